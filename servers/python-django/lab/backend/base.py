"""ENGINE "lab.backend": Django's own SQLite backend (django.db.backends.sqlite3) with the two
things the contract asks of it that Django leaves out, and nothing else changed:

- LAB_BUSY=sleep_poll:<ms>|retries:<n>, emulated. The standard library's sqlite3 has no
  sqlite3_busy_handler hook, so the statements where SQLite would call a handler are re-run on
  SQLITE_BUSY/SQLITE_LOCKED here: BEGIN IMMEDIATE, the first lock-taking statement after
  BEGIN DEFERRED, an autocommit statement (a read outside transaction.atomic) and COMMIT; a
  statement that upgrades an open read transaction to a write never is. busy_timeout:<ms> is
  SQLite's own (OPTIONS "timeout", which Django passes to sqlite3.connect); `none` is timeout 0.
- LAB_SQL_LOG=on: one line per statement appended to <LAB_DB>.sql.log (Rails' development log),
  including BEGIN/COMMIT/ROLLBACK (Django's COMMIT and ROLLBACK are sqlite3's commit() and
  rollback(), which no cursor sees: here they are the same statements run explicitly), the
  savepoints and the start-up pragmas (OPTIONS "init_command": LAB_PRAGMAS, in order).

OPTIONS "lab" carries the two knobs from labsite/settings.py to here; the rest of OPTIONS is
Django's (timeout, transaction_mode, init_command, cached_statements).
"""
from __future__ import annotations

import json
import os
import sqlite3 as Database
import sys
import threading
import time
from collections.abc import Mapping

from django.db.backends.sqlite3 import base as sqlite3_base
from django.db.backends.sqlite3._functions import register as register_functions
from django.db.backends.utils import debug_transaction

SQLITE_BUSY, SQLITE_LOCKED = 5, 6


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED, any extended code (SQLITE_BUSY_SNAPSHOT,
    SQLITE_LOCKED_SHAREDCACHE, ...)."""
    return (isinstance(exc, Database.OperationalError)
            and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (SQLITE_BUSY, SQLITE_LOCKED))


class BusyPolicy:
    """LAB_BUSY where it is emulated: `call` re-runs a lock-taking statement as a busy handler
    would have been called. sleep_poll:<ms>: 1 ms sleeps until <ms> have passed since the first
    try; retries:<n>: at most n re-runs, without sleeping (Rails 7.1's `retries:`)."""

    def __init__(self, kind: str, arg: int):
        self.kind, self.arg = kind, arg
        self.emulated = kind in ("sleep_poll", "retries")

    def call(self, fn):
        start, count = time.monotonic(), 0
        while True:
            try:
                return fn()
            except Database.OperationalError as e:
                if not is_busy(e):
                    raise
                if self.kind == "retries":
                    count += 1
                    if count > self.arg:
                        raise
                else:
                    if (time.monotonic() - start) * 1000 >= self.arg:
                        raise
                    time.sleep(0.001)


class SqlLog:
    """LAB_SQL_LOG=on: `  SQL (0.3ms)  <sql>  [bound values]`, one line per statement, appended
    right after it finished (or failed), in the thread that ran it: one os.write() on an O_APPEND
    descriptor per line, under a per-process lock, as Ruby's Logger writes log/development.log."""

    _open: dict[str, "SqlLog"] = {}
    _open_lock = threading.Lock()

    @classmethod
    def for_path(cls, path: str) -> "SqlLog":
        """The process's one log for `path` (every connection of the process shares it)."""
        with cls._open_lock:
            if path not in cls._open or cls._open[path].pid != os.getpid():
                cls._open[path] = cls(path)
            return cls._open[path]

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self.lock = threading.Lock()
        self.pid = os.getpid()

    @staticmethod
    def value(v) -> str:
        if v is None:
            return "nil"
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, (bytes, bytearray, memoryview)):
            return f"<{len(v)} bytes of binary data>"
        return repr(v)

    def statement(self, sql: str, params, seconds: float) -> None:
        line = f"  SQL ({seconds * 1000:.1f}ms)  {sql}"
        if params:
            values = params.values() if isinstance(params, Mapping) else params
            line += "  [" + ", ".join(map(self.value, values)) + "]"
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            with self.lock:
                os.write(self.fd, data)
        except OSError as e:  # as Ruby's Logger: the request goes on
            print(f"log writing failed. {e}", file=sys.stderr)


class LabConnection(Database.Connection):
    """A sqlite3 connection (sqlite3.connect(factory=...)) that knows the busy policy and the
    SQL log, and whether its open transaction has taken its first lock yet."""

    policy: BusyPolicy
    log: SqlLog | None = None
    plain = True   # neither emulation nor log: statements run as Django runs them
    fresh = False  # BEGIN DEFERRED ran and no lock-taking statement has yet

    def configure(self, policy: BusyPolicy, log: SqlLog | None) -> None:
        self.policy, self.log = policy, log
        self.plain = log is None and not policy.emulated

    def lock_taking(self, sql: str) -> bool:
        """Whether SQLite would call a busy handler for this statement (emulated policies only)."""
        if not self.policy.emulated:
            return False
        head = sql.lstrip()[:24].upper()
        if not self.in_transaction:  # autocommit: BEGIN, or a statement that is its own transaction
            if head.startswith("BEGIN"):
                deferred = not head.startswith(("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"))
                self.fresh = deferred
                return not deferred
            return True
        if self.fresh and not head.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK TO")):
            self.fresh = False  # the first statement of a deferred transaction takes its first lock
            return True
        return False

    def run(self, fn, sql: str, params, busy: bool):
        """fn() (the statement), re-run by the emulated policy when `busy`, then logged once."""
        if self.log is None:
            return self.policy.call(fn) if busy else fn()
        started = time.perf_counter()
        try:
            return self.policy.call(fn) if busy else fn()
        finally:
            self.log.statement(sql, params, time.perf_counter() - started)

    def statement(self, sql: str, busy: bool = False):
        """A statement without parameters run on the connection itself (the start-up pragmas,
        COMMIT, ROLLBACK)."""
        if self.plain:
            return self.execute(sql)
        return self.run(lambda: self.execute(sql), sql, None, busy)


class LabCursor(sqlite3_base.SQLiteCursorWrapper):
    """Django's cursor (format-style parameters turned into qmark), each statement through the
    connection's busy policy and SQL log."""

    def execute(self, query, params=None):
        if params is not None:
            names = list(params) if isinstance(params, Mapping) else None
            query = self.convert_query(query, param_names=names)
        con: LabConnection = self.connection
        if con.plain:  # LAB_BUSY native, LAB_SQL_LOG=off: Django's own path, nothing added
            if params is None:
                return Database.Cursor.execute(self, query)
            return Database.Cursor.execute(self, query, params)
        if params is None:
            def fn():
                return Database.Cursor.execute(self, query)
        else:
            def fn():
                return Database.Cursor.execute(self, query, params)
        return con.run(fn, query, params, con.lock_taking(query))

    def executemany(self, query, param_list):
        con: LabConnection = self.connection
        if con.plain:
            return super().executemany(query, param_list)
        param_list = list(param_list)
        return con.run(lambda: super(LabCursor, self).executemany(query, param_list),
                       query, None, con.lock_taking(query))


class DatabaseWrapper(sqlite3_base.DatabaseWrapper):

    def get_connection_params(self):
        kwargs = super().get_connection_params()
        lab = kwargs.pop("lab", None) or {}
        self.lab_policy = BusyPolicy(lab.get("busy_kind", "busy_timeout"), lab.get("busy_arg", 0))
        self.lab_log_path = lab.get("sql_log")
        kwargs["factory"] = LabConnection
        return kwargs

    def get_new_connection(self, conn_params):
        # Django's own (django/db/backends/sqlite3/base.py, 5.2), its statements logged
        conn: LabConnection = Database.connect(**conn_params)
        conn.configure(self.lab_policy, SqlLog.for_path(self.lab_log_path) if self.lab_log_path else None)
        register_functions(conn)
        conn.statement("PRAGMA foreign_keys = ON")
        conn.statement("PRAGMA legacy_alter_table = OFF")
        for init_command in self.init_commands:  # OPTIONS["init_command"]: LAB_PRAGMAS, in order
            if init_command := init_command.strip():
                conn.statement(init_command)
        return conn

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=LabCursor)

    def _commit(self):
        if self.connection is not None:
            with debug_transaction(self, "COMMIT"), self.wrap_database_errors:
                con: LabConnection = self.connection
                if con.in_transaction:
                    con.fresh = False
                    con.statement("COMMIT", busy=con.policy.emulated)

    def _rollback(self):
        if self.connection is not None:
            with debug_transaction(self, "ROLLBACK"), self.wrap_database_errors:
                con: LabConnection = self.connection
                con.fresh = False
                if con.in_transaction:
                    con.statement("ROLLBACK")
