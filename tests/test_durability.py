"""Crash durability: every write a server acknowledged survives a SIGKILL of its whole process
group, and the file passes `PRAGMA integrity_check`.

For each bundled stack and each write path it accepts on SQLite (all three on every stack with
one process: servers/README.md, "Impossible combinations"), on a fresh file with a WAL profile
(rails71: journal_mode=wal, synchronous=normal, which a process crash cannot defeat), a few
rounds: start the server, 8 threads POST /items on keep-alive connections, SIGKILL the group
once `kill_after` writes were acknowledged (201), then compare the acknowledged ids with the
file's rows. The rounds share the file, so each start after the first recovers a crashed WAL.
The same check, one function, must catch tests/stacks/lossy-python (it acknowledges before it
commits, and drops some writes): the check has teeth.

Run with `-s` for the table (rounds, acked, rows, lost per stack and write path).
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sqlitelab.infra import databases, servers
from conftest import STACKS

pytestmark = pytest.mark.contract

WRITE_PATHS = ("pool", "writer", "batch")  # every stack accepts each with LAB_PROCESSES=1 (its default)
PROFILE = "rails71"                         # WAL, synchronous=normal
KILL_AFTER = (50, 200, 500)                 # one round per value: SIGKILL after that many 201s
WRITERS = 8
ROUND_SECONDS = 6.0                         # a round's burst never runs longer (the Puma stacks' GVL-held
                                            # busy_timeout stalls reach it: killed mid-stall, as a crash may)
LOSSY = Path(__file__).resolve().parent / "stacks" / "lossy-python"
PAYLOAD = json.dumps({"payload": "durable? " * 8}).encode()

RESULTS: list["Durability"] = []


@dataclass
class Durability:
    """What the crash rounds of one server found."""
    stack: str
    write_path: str
    rounds: int = 0
    acked: set[int] = field(default_factory=set)    # ids answered 201 before a kill
    rows: int = 0                                   # items in the file after the last round
    missing: list[int] = field(default_factory=list)  # acknowledged, not in the file
    integrity: list[str] = field(default_factory=list)  # integrity_check after each round
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def lost(self) -> int:
        return len(self.missing)

    def line(self) -> str:
        other = {k: v for k, v in self.statuses.items() if k != 201}
        return (f"{self.stack:15s} {self.write_path:6s} rounds={self.rounds} acked={len(self.acked):5d} "
                f"rows={self.rows:5d} lost={self.lost:4d} integrity={','.join(sorted(set(self.integrity)))} "
                f"other={dict(other) or '-'} {self.seconds:.1f}s")


def _writer(host: str, port: int, cap: int, deadline: float, stop: threading.Event,
            acked: list[int], statuses: Counter, lock: threading.Lock) -> None:
    """POST /items on one keep-alive connection, at most `cap` times, until stopped or the
    deadline; records every 201's id."""
    conn = None
    for _ in range(cap):
        if stop.is_set() or time.monotonic() > deadline:
            break
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("POST", "/items", body=PAYLOAD, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
                conn = None
            if stop.is_set():
                break
            time.sleep(0.01)
            continue
        with lock:
            statuses[r.status] += 1
            if r.status == 201:
                acked.append(json.loads(body)["id"])
    if conn is not None:
        conn.close()


def crash_round(srv: servers.Server, kill_after: int) -> tuple[list[int], Counter]:
    """One burst of WRITERS threads against a running server; SIGKILL its process group once
    `kill_after` writes were acknowledged (or at the round's deadline); the ids acknowledged."""
    acked: list[int] = []
    statuses: Counter = Counter()
    lock, stop = threading.Lock(), threading.Event()
    deadline = time.monotonic() + ROUND_SECONDS
    threads = [threading.Thread(target=_writer, daemon=True,
                                args=(srv.host, srv.port, kill_after, deadline, stop, acked, statuses, lock))
               for _ in range(WRITERS)]
    for t in threads:
        t.start()
    try:
        while len(acked) < kill_after and time.monotonic() < deadline and any(t.is_alive() for t in threads):
            time.sleep(0.001)
        os.killpg(srv.pid, signal.SIGKILL)  # the server runs in a session of its own
    finally:
        stop.set()
        srv.stop()  # reaps it (and anything left in its group)
        for t in threads:
            t.join(10)
    with lock:
        return list(acked), Counter(statuses)


def check_durability(stack: str, db: Path, *, write_path: str = "pool", kill_after=KILL_AFTER,
                     extra_env: dict[str, str] | None = None) -> Durability:
    """Crash rounds on one file (fresh from prepare_database): what was acknowledged, what the
    file holds after each SIGKILL, and its integrity check."""
    result = Durability(stack, write_path)
    t0 = time.monotonic()
    for n in kill_after:
        srv = servers.start_server(stack, db, profile=PROFILE, write_path=write_path,
                                   extra_env=extra_env, timeout=120)
        ids, statuses = crash_round(srv, n)
        result.rounds += 1
        result.acked.update(ids)
        result.statuses.update(statuses)
        result.integrity.append(databases.integrity_check(db))
    con = sqlite3.connect(db)  # read-write: a crashed WAL is recovered on open
    try:
        present = {r[0] for r in con.execute("SELECT id FROM items")}
    finally:
        con.close()
    result.rows = len(present)
    result.missing = sorted(result.acked - present)
    result.seconds = time.monotonic() - t0
    RESULTS.append(result)
    print("\n" + result.line(), flush=True)
    return result


def assert_durable(result: Durability) -> None:
    """Every acknowledged write is in the file, and the file is sound."""
    assert result.rounds > 0 and result.acked, f"{result.stack}/{result.write_path}: nothing was acknowledged"
    assert not result.missing, (
        f"{result.stack}/{result.write_path}: lost {result.lost} of {len(result.acked)} acknowledged "
        f"writes over {result.rounds} SIGKILLs (ids {result.missing[:10]}...)")
    assert set(result.integrity) == {"ok"}, f"{result.stack}/{result.write_path}: integrity_check {result.integrity}"


@pytest.fixture(scope="module", autouse=True)
def table():
    yield
    if RESULTS:
        print("\n\ncrash durability (SIGKILL after " + "/".join(map(str, KILL_AFTER)) + " acks, "
              f"{WRITERS} writers, profile {PROFILE}):")
        for r in RESULTS:
            print("  " + r.line())


@pytest.mark.parametrize("write_path", WRITE_PATHS)
@pytest.mark.parametrize("stack", STACKS)
def test_acknowledged_writes_survive_sigkill(stack, write_path, tmp_path):
    db = databases.prepare_database(tmp_path / "durability.db")
    assert_durable(check_durability(stack, db, write_path=write_path))


def test_the_check_catches_a_server_that_acknowledges_before_committing(tmp_path, monkeypatch):
    for name, entry in servers.extra_stacks(str(LOSSY)).items():
        monkeypatch.setitem(servers.STACKS, name, entry)
    db = databases.prepare_database(tmp_path / "durability.db")
    result = check_durability("lossy-python", db, extra_env={"LAB_LOSSY_SEED": "1"})
    with pytest.raises(AssertionError, match=r"lost \d+ of \d+ acknowledged writes"):
        assert_durable(result)
    assert result.lost > 0 and set(result.integrity) == {"ok"}
