"""How the lab classifies a response that is not a success (shared by the Locust recorder).

A lock error ('busy': SQLITE_BUSY or SQLITE_LOCKED reached the client) is, for the lab's own
servers, any 503: the contract makes every escaped lock a 503 and nothing else one. Another app
says so in its own words: `LockRule` is a status range and a pattern its error body must match
(the defaults: what SQLite and its drivers put in an error's text, tests/test_units.py checks them
on bodies recorded from those drivers and frameworks); a 5xx whose body does not match is
another server error, never a lock.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# SQLite's own texts for SQLITE_BUSY ("database is locked") and SQLITE_LOCKED ("database table is
# locked"), the result codes' names, and how drivers phrase them: the sqlite3 gem's BusyException,
# xerial's "The database file is locked", exqlite's "Database busy".
LOCK_PATTERN = (r"database (table )?is locked|SQLITE_(BUSY|LOCKED)|BusyException"
                r"|database file is locked|database busy")


@dataclass(frozen=True)
class LockRule:
    """A response is a lock error when its status is in [low, high] and its body matches
    `pattern` (a regular expression, case-insensitive); `pattern` None: the status alone."""
    low: int = 500
    high: int = 599
    pattern: str | None = LOCK_PATTERN

    def __post_init__(self):
        if not (100 <= self.low <= self.high <= 599):
            raise ValueError(f"a lock error's statuses must be a range within 100-599, not "
                             f"{self.low}-{self.high}")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as e:
                raise ValueError(f"the lock pattern {self.pattern!r} is not a regular expression: {e}") from None

    def matches(self, status: int, body: str | None) -> bool:
        if not self.low <= status <= self.high:
            return False
        return self.pattern is None or bool(body and _compiled(self.pattern).search(body))

    def needs_body(self, status: int) -> bool:
        """Whether deciding on `status` reads the body (the recorder reads no other)."""
        return self.pattern is not None and self.low <= status <= self.high

    def env(self) -> dict[str, str]:
        """The rule for a generator process (LAB_LOCK_STATUS, LAB_LOCK_PATTERN)."""
        return {"LAB_LOCK_STATUS": f"{self.low}-{self.high}", "LAB_LOCK_PATTERN": self.pattern or ""}

    @classmethod
    def from_env(cls, env) -> "LockRule":
        """The rule a generator was given, or the lab's own servers' (CONTRACT) when none."""
        status = env.get("LAB_LOCK_STATUS")
        if not status:
            return CONTRACT
        low, _, high = status.partition("-")
        return cls(int(low), int(high or low), env.get("LAB_LOCK_PATTERN") or None)


CONTRACT = LockRule(503, 503, None)  # the lab's servers: every escaped lock is a 503, nothing else is

_COMPILED: dict[str, re.Pattern] = {}


def _compiled(pattern: str) -> re.Pattern:
    found = _COMPILED.get(pattern)
    if found is None:
        found = _COMPILED[pattern] = re.compile(pattern, re.IGNORECASE)
    return found


def failure_kind(status: int, exception: BaseException | None = None, body: str | None = None,
                 rule: LockRule = CONTRACT) -> str | None:
    """'busy' (a lock error by `rule`: for the lab's servers a 503), 'server_error' (another 5xx),
    'client_error' (4xx), 'timeout' or 'connection' (no response), or None for a success or
    redirect."""
    if status and rule.matches(status, body):
        return "busy"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    if status == 0 or (exception is not None and status < 200):
        text = f"{type(exception).__name__} {exception}".lower()
        return "timeout" if "timeout" in text or "timed out" in text else "connection"
    return None
