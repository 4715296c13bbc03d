"""python-fastapi: FastAPI + uvicorn + stdlib sqlite3, implementing servers/openapi.yaml.

Configuration is the LAB_* environment (servers/README.md). Reads are plain `def`
handlers (FastAPI runs them in its thread pool, LAB_THREADS threads). Write handlers are
`async def` only to read and validate the body; the transaction itself runs in the thread
pool (`pool`) or on the one writer thread (`writer`, `batch`) — never on the event loop.
With LAB_DATABASE=postgres the same handlers and transactions run on psycopg 3 and a
psycopg_pool.ConnectionPool (PostgresDatabase: placeholders, connections, error mapping and
new ids are the only differences).
"""
from __future__ import annotations

import asyncio
import html
import importlib.metadata
import itertools
import json
import math
import mmap
import os
import platform
import queue
import random
import re
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import Future
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path

SERVER = "python-fastapi"
MAX_BODY = 1_048_576
MAX_PAYLOAD = 65_536
MAX_ID = 2**63 - 1


# ----------------------------------------------------------------------------- config

class ConfigError(Exception):
    pass


# The LAB_PRAGMAS allow-list of servers/shared.toml (tests/test_contract.py checks they agree).
PRAGMA_VALUES = {
    "journal_mode": ("delete", "truncate", "persist", "memory", "wal", "off"),
    "synchronous": ("off", "normal", "full", "extra", "0", "1", "2", "3"),
    "temp_store": ("default", "file", "memory", "0", "1", "2"),
    "foreign_keys": ("on", "off", "true", "false", "0", "1"),
    "cache_size": int, "mmap_size": int, "journal_size_limit": int, "wal_autocheckpoint": int,
}


def _choice(env, name, default, allowed):
    """An enumerated LAB_* value (empty: the default); anything else is a start-up error."""
    value = env.get(name) or default
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {'|'.join(allowed)}")
    return value


def _int_env(env, name, default, minimum=1, maximum=None):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum or (maximum and int(raw) > maximum):
        bound = f"{minimum}..{maximum}" if maximum else f">= {minimum}"
        raise ConfigError(f"{name}={raw!r} is not an integer {bound}")
    return int(raw)


def sqlite_uri(path: str, **params: str) -> str:
    """A `file:` URI for sqlite3.connect(..., uri=True): the path percent-escaped (a '?', '#'
    or '%' in it would otherwise be read as URI syntax), then the query parameters."""
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{urllib.parse.urlencode(params)}"


TABLES = ("requests", "metrics", "items", "users")  # servers/schema.sql, schema.postgres.sql
# SQLite's own knobs: with LAB_DATABASE=postgres they must be unset or empty (null in /health).
SQLITE_ONLY = ("LAB_PRAGMAS", "LAB_TXN_MODE", "LAB_BUSY", "LAB_CACHE", "LAB_SQL_LOG")


def parse_config(env=os.environ) -> dict:
    cfg: dict = {}
    cfg["host"] = env.get("LAB_HOST") or "127.0.0.1"
    if not env.get("LAB_PORT"):
        raise ConfigError("LAB_PORT is required")
    cfg["port"] = _int_env(env, "LAB_PORT", None, 1, 65535)
    cfg["database"] = _choice(env, "LAB_DATABASE", "sqlite", ("sqlite", "postgres"))
    if cfg["database"] == "postgres":
        _parse_postgres(env, cfg)
    else:
        if env.get("LAB_DATABASE_URL"):
            raise ConfigError("LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite "
                              "(or set LAB_DATABASE=postgres)")
        _parse_sqlite(env, cfg)

    cfg["write_path"] = path = _choice(env, "LAB_WRITE_PATH", "pool", ("pool", "writer", "batch"))
    cfg["processes"] = _int_env(env, "LAB_PROCESSES", 1, 1, 256)
    cfg["threads"] = _int_env(env, "LAB_THREADS", 4, 1, 1024)
    cfg["readers"] = _int_env(env, "LAB_READERS", cfg["threads"], 1, 1024)
    if path != "pool" and cfg["processes"] > 1:
        raise ConfigError(f"LAB_WRITE_PATH={path} needs LAB_PROCESSES=1 "
                          "(one writer thread serves one process)")

    metrics_txn = _choice(env, "LAB_METRICS_TXN", "request", ("request", "record"))
    if metrics_txn == "record" and path != "pool":
        raise ConfigError("LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool "
                          f"(got {path}: each record commits on the request's pooled connection)")
    cfg["metrics_txn"] = metrics_txn
    if cfg["database"] == "sqlite":
        cfg["cache"] = _choice(env, "LAB_CACHE", "private", ("private", "shared"))
        cfg["sql_log"] = _choice(env, "LAB_SQL_LOG", "off", ("off", "on"))
    templates = Path(env.get("LAB_TEMPLATES") or Path(__file__).resolve().parent.parent / "templates")
    cfg["templates"] = templates
    return cfg


def _parse_postgres(env, cfg: dict) -> None:
    """LAB_DATABASE=postgres: LAB_DATABASE_URL (a libpq connection string, checked for syntax
    here; main() connects); SQLite's knobs refused, reported as null. LAB_DB is not read."""
    for name in SQLITE_ONLY:
        if env.get(name):
            raise ConfigError(f"{name} is SQLite's; unset it with LAB_DATABASE=postgres")
    url = env.get("LAB_DATABASE_URL")
    if not url:
        raise ConfigError("LAB_DATABASE_URL is required with LAB_DATABASE=postgres (a libpq "
                          "key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')")
    try:
        import psycopg.conninfo
    except ImportError as e:
        raise ConfigError(f"LAB_DATABASE=postgres needs psycopg and psycopg-pool "
                          f"(servers/python-fastapi/requirements.txt): {e}")
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: {one_line(e)}")
    # Defaults only where the URL says nothing: a host that never answers fails in 10 s, not
    # never, and pg_stat_activity names the server.
    defaults = {"connect_timeout": "10", "application_name": SERVER}
    cfg["database_url"] = psycopg.conninfo.make_conninfo(
        url, **{k: v for k, v in defaults.items() if k not in params})
    cfg["db"] = None
    cfg.update(pragmas=None, txn_mode=None, busy=None, busy_kind=None, busy_arg=None,
               cache=None, sql_log=None)


def one_line(e: BaseException) -> str:
    """An error's message on one line (libpq's run over several)."""
    return " ".join(str(e).split()) or type(e).__name__


def _parse_sqlite(env, cfg: dict) -> None:
    db = env.get("LAB_DB")
    if not db:
        raise ConfigError("LAB_DB is required (a database made from servers/schema.sql)")
    if not Path(db).is_file():
        raise ConfigError(f"LAB_DB={db!r} does not exist (make it from servers/schema.sql)")
    try:  # read-write, never creating: a hot journal a crash left is rolled back here, as at any open
        con = sqlite3.connect(sqlite_uri(db, mode="rw"), uri=True)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        con.close()
    except sqlite3.Error as e:
        raise ConfigError(f"LAB_DB={db!r} is not a readable SQLite database: {e}")
    missing = set(TABLES) - tables
    if missing:
        raise ConfigError(f"LAB_DB={db!r} lacks tables {sorted(missing)} of servers/schema.sql")
    cfg["db"] = db

    pragmas = []
    for part in filter(None, (p.strip() for p in (env.get("LAB_PRAGMAS") or "").split(","))):
        name, sep, value = part.partition("=")
        name, value = name.strip().lower(), value.strip().lower()
        if name not in PRAGMA_VALUES:
            raise ConfigError(f"LAB_PRAGMAS: pragma {name!r} is not allowed "
                              f"(allowed: {', '.join(sorted(PRAGMA_VALUES))})")
        allowed = PRAGMA_VALUES[name]
        if not sep or (allowed is int and not re.fullmatch(r"-?[0-9]+", value)) or \
                (allowed is not int and value not in allowed):
            want = "an integer" if allowed is int else "one of " + "|".join(allowed)
            raise ConfigError(f"LAB_PRAGMAS: {name}={value!r} is not {want}")
        pragmas.append((name, value))
    cfg["pragmas"] = pragmas

    cfg["txn_mode"] = _choice(env, "LAB_TXN_MODE", "deferred", ("deferred", "immediate"))

    busy = env.get("LAB_BUSY") or "busy_timeout:5000"
    m = re.fullmatch(r"(busy_timeout|sleep_poll|retries):([0-9]{1,9})|none", busy)
    if not m:
        raise ConfigError(f"LAB_BUSY={busy!r} is not busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none")
    cfg["busy"] = busy
    cfg["busy_kind"], cfg["busy_arg"] = (m.group(1), int(m.group(2))) if m.group(1) else ("none", 0)


# ----------------------------------------------------------------------------- errors

class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


SQLITE_BUSY, SQLITE_LOCKED = 5, 6


def is_busy(exc: BaseException) -> bool:
    return (isinstance(exc, sqlite3.OperationalError)
            and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in (SQLITE_BUSY, SQLITE_LOCKED))


def busy_error() -> HTTPError:
    return HTTPError(503, "database is locked")


def unavailable_error() -> HTTPError:
    return HTTPError(503, "database unavailable")


# ----------------------------------------------------------------------------- database

class SqlLog:
    """LAB_SQL_LOG=on: Rails' development log in miniature (seed 001's `rails s`). One line per
    statement, `  SQL (0.3ms)  <sql>  [bound values]`, appended to <LAB_DB>.sql.log right after the
    statement finished, in the thread that ran it: one os.write() on an O_APPEND descriptor per
    line (which releases the GIL), under a lock, as Ruby's Logger writes log/development.log."""

    def __init__(self, path: str):
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise ConfigError(f"LAB_SQL_LOG=on: cannot open {path!r} for append: {e.strerror}")
        self.lock = threading.Lock()

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
            line += "  [" + ", ".join(map(self.value, params)) + "]"
        data = (line + "\n").encode("utf-8", "backslashreplace")
        try:
            with self.lock:
                os.write(self.fd, data)
        except OSError as e:  # as Ruby's Logger: the request goes on
            print(f"log writing failed. {e}", file=sys.stderr)

    def close(self) -> None:
        os.close(self.fd)


class BusyPolicy:
    """LAB_BUSY. busy_timeout is SQLite's own; sleep_poll/retries are emulated where SQLite
    would call a busy handler (stdlib sqlite3 offers no sqlite3_busy_handler)."""

    def __init__(self, kind: str, arg: int):
        self.kind, self.arg = kind, arg
        self.emulated = kind in ("sleep_poll", "retries")

    def configure(self, db: "Database", con: sqlite3.Connection) -> None:
        ms = self.arg if self.kind == "busy_timeout" else 0
        db.execute(con, f"PRAGMA busy_timeout = {ms}")

    def call(self, fn):
        """Run a lock-taking statement, retrying on SQLITE_BUSY as a busy handler would."""
        if not self.emulated:
            return fn()
        start, count = time.monotonic(), 0
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
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


class Tx:
    """An open write transaction. Under BEGIN DEFERRED the first statement takes the first
    lock, so only it goes through the busy policy; later ones (the read->write upgrade) don't."""

    def __init__(self, db: "Database", con: sqlite3.Connection, deferred: bool):
        self.db, self.con, self.fresh = db, con, deferred

    def execute(self, sql: str, params=(), fetch: bool = False):
        """The statement's cursor, or with fetch=True its first row (or None)."""
        busy, self.fresh = self.fresh, False
        return self.db.execute(self.con, sql, params, busy=busy, fetch=fetch)

    def insert(self, sql: str, params) -> int:
        """An INSERT; the new row's id."""
        busy, self.fresh = self.fresh, False
        return self.db.insert(self.con, sql, params, busy=busy)


class Database:
    """SQLite (the stdlib sqlite3). PostgresDatabase overrides the seam: connect/checkout/
    checkin, execute (placeholders), insert (new ids), in_transaction, classify (errors), broken."""
    name = "sqlite"
    Error: type | tuple = sqlite3.Error
    JOB_ERRORS: tuple = ()  # errors a batch job is rolled back to its savepoint for (beside HTTPError)
    SAVEPOINT, RELEASE, ROLLBACK_TO = "SAVEPOINT job", "RELEASE job", "ROLLBACK TO job"

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.policy = BusyPolicy(cfg["busy_kind"], cfg["busy_arg"])
        self.begin = "BEGIN IMMEDIATE" if cfg["txn_mode"] == "immediate" else "BEGIN DEFERRED"
        self.log = SqlLog(f"{cfg['db']}.sql.log") if cfg["sql_log"] == "on" else None
        self.pool: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        for _ in range(cfg["readers"]):
            self.pool.put(self.connect())
        self.writer = Writer(self, batch=cfg["write_path"] == "batch") \
            if cfg["write_path"] != "pool" else None
        self.version = sqlite3.sqlite_version

    def connect(self) -> sqlite3.Connection:
        # mode=rw: open an existing database, never create one; LAB_CACHE=shared adds
        # cache=shared (SQLite's shared-cache mode for every connection of this process).
        params = {"mode": "rw", **({"cache": "shared"} if self.cfg["cache"] == "shared" else {})}
        con = sqlite3.connect(sqlite_uri(self.cfg["db"], **params), uri=True, isolation_level=None,
                              check_same_thread=False, cached_statements=256)
        self.policy.configure(self, con)
        for name, value in self.cfg["pragmas"]:
            self.execute(con, f"PRAGMA {name} = {value}")
        return con

    def execute(self, con: sqlite3.Connection, sql: str, params=(), busy: bool = False,
                fetch: bool = False):
        """Every statement the server runs goes through here. busy: a statement where SQLite
        would call a busy handler (the emulated policy retries it); fetch: return the first row
        (or None) instead of the cursor. LAB_SQL_LOG=on logs it once, retries included, after it
        finished or failed (as Rails does)."""
        if self.log is None and not busy:  # off: as before, con.execute and nothing more
            cur = con.execute(sql, params)
            return cur.fetchone() if fetch else cur

        def run():
            cur = con.execute(sql, params)
            return cur.fetchone() if fetch else cur
        if self.log is None:
            return self.policy.call(run)
        started = time.perf_counter()
        try:
            return self.policy.call(run) if busy else run()
        finally:
            self.log.statement(sql, params, time.perf_counter() - started)

    def insert(self, con, sql: str, params, busy: bool = False) -> int:
        return self.execute(con, sql, params, busy=busy).lastrowid

    def in_transaction(self, con) -> bool:
        return con.in_transaction

    def classify(self, exc: BaseException) -> HTTPError | None:
        """The HTTP answer a database error maps to (None: a 500)."""
        return busy_error() if is_busy(exc) else None

    def broken(self, con) -> bool:
        return False

    def checkout(self):
        return self.pool.get()

    def checkin(self, con) -> None:
        self.pool.put(con)

    def read(self, sql: str, params=()):
        return self.with_connection(lambda con: self.read_on(con, sql, params))

    def read_on(self, con: sqlite3.Connection, sql: str, params=()):
        """An autocommit read on `con` (the busy policy applies, as SQLite calls a handler)."""
        return self.execute(con, sql, params, busy=True, fetch=True)

    def with_connection(self, fn):
        """`fn(con)` on a pooled connection; busy/locked that escapes becomes a 503."""
        con = self.checkout()
        try:
            return fn(con)
        except self.Error as e:
            raise self.classify(e) or e
        finally:
            self.checkin(con)

    def transaction(self, con: sqlite3.Connection, work):
        self.execute(con, self.begin, busy=True)
        try:
            result = work(Tx(self, con, self.begin == "BEGIN DEFERRED"))
            self.execute(con, "COMMIT", busy=True)
            return result
        except BaseException:
            if self.in_transaction(con):
                self.execute(con, "ROLLBACK")
            raise

    def write_in_pool(self, work):
        return self.with_connection(lambda con: self.transaction(con, work))

    async def write(self, work):
        """Run `work(tx)` in one write transaction; return only after its COMMIT."""
        if self.writer is None:
            from starlette.concurrency import run_in_threadpool
            return await run_in_threadpool(self.write_in_pool, work)
        return await asyncio.wrap_future(self.writer.submit(work))

    def effective_pragmas(self) -> dict[str, str]:
        con = self.pool.get()
        try:
            return {name: str(self.execute(con, f"PRAGMA {name}", fetch=True)[0]).lower()
                    for name, _ in self.cfg["pragmas"]}
        finally:
            self.pool.put(con)

    def close(self) -> None:
        if self.writer:
            self.writer.stop()
        while not self.pool.empty():
            self.pool.get_nowait().close()
        if self.log:
            self.log.close()


class PostgresDatabase(Database):
    """LAB_DATABASE=postgres: psycopg 3 on a psycopg_pool.ConnectionPool of LAB_READERS
    autocommit connections (all opened before the server listens), plus the writer's own
    connection with `writer`/`batch`. The transactions are the SQLite path's, statement for
    statement: `BEGIN` (READ COMMITTED), the work, `COMMIT` / `ROLLBACK`, sent as plain
    statements on autocommit connections; `?` becomes `%s`, ids come from `RETURNING id`."""
    name = "postgres"
    SAVEPOINT, RELEASE, ROLLBACK_TO = "SAVEPOINT job", "RELEASE SAVEPOINT job", "ROLLBACK TO SAVEPOINT job"
    LOCKED = ("40001", "40P01", "55P03")  # serialization failure, deadlock, lock not available
    UNAVAILABLE = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now (and class 08)

    def __init__(self, cfg: dict):
        import psycopg
        import psycopg_pool
        from psycopg.pq import TransactionStatus
        self.psycopg = psycopg
        self.Error = psycopg.Error
        # A job's own bad data (a NUL in a string, a constraint) fails that job alone in `batch`.
        self.JOB_ERRORS = (psycopg.DataError, psycopg.IntegrityError)
        self.open_states = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
        self.cfg = cfg
        self.policy = BusyPolicy("none", 0)  # Postgres waits for row locks itself
        self.begin = "BEGIN"
        self.log = None
        self.statements: dict[str, str] = {}
        self.pool = psycopg_pool.ConnectionPool(
            cfg["database_url"], min_size=cfg["readers"], max_size=cfg["readers"],
            kwargs={"autocommit": True}, open=False, name=f"{SERVER}-{os.getpid()}")
        try:
            self.pool.open()
            self.pool.wait(timeout=30.0)
            self.version = self.with_connection(
                lambda con: self.execute(con, "SHOW server_version", fetch=True)[0])
            self.writer = Writer(self, batch=cfg["write_path"] == "batch") \
                if cfg["write_path"] != "pool" else None
        except (psycopg.Error, HTTPError) as e:
            self.pool.close()
            hint = f" (a pool of {cfg['readers']} connections, LAB_READERS; Postgres' max_connections?)" \
                if isinstance(e, psycopg_pool.PoolTimeout) else ""
            raise ConfigError(f"LAB_DATABASE_URL: cannot connect: {one_line(e)}{hint}")

    def connect(self):
        """The writer's connection (the pool makes the others)."""
        return self.psycopg.connect(self.cfg["database_url"], autocommit=True)

    def checkout(self):
        try:
            return self.pool.getconn()  # PoolTimeout after 30 s: 503 database unavailable
        except self.Error as e:
            raise self.classify(e) or e

    def checkin(self, con) -> None:
        self.pool.putconn(con)  # the pool replaces a connection that broke

    def execute(self, con, sql: str, params=(), busy: bool = False, fetch: bool = False):
        """The SQLite path's statement with `%s` for `?` (no busy policy, no SQL log)."""
        query = self.statements.get(sql)
        if query is None:
            query = self.statements[sql] = sql.replace("?", "%s")
        cur = con.execute(query, params or None)
        return cur.fetchone() if fetch else cur

    def insert(self, con, sql: str, params, busy: bool = False) -> int:
        return self.execute(con, sql + " RETURNING id", params, fetch=True)[0]

    def in_transaction(self, con) -> bool:
        return con.info.transaction_status in self.open_states  # not on a lost connection

    def classify(self, exc: BaseException) -> HTTPError | None:
        if not isinstance(exc, self.Error):
            return None
        state = exc.sqlstate
        if state in self.LOCKED:
            return busy_error()
        if state is not None and (state.startswith("08") or state in self.UNAVAILABLE):
            return unavailable_error()
        if state is None and isinstance(exc, self.psycopg.OperationalError):
            return unavailable_error()  # a lost connection, a closed one, the pool's timeout
        return None

    def broken(self, con) -> bool:
        return con.closed or con.broken

    def effective_pragmas(self) -> None:
        return None

    def close(self) -> None:
        if self.writer:
            self.writer.stop()
        self.pool.close()


class Writer:
    """One thread, one connection, fed by a queue. `batch`: group commit of all queued jobs."""

    def __init__(self, db: Database, batch: bool):
        self.db, self.batch = db, batch
        self.con = db.connect()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        # /health's `writer`: transactions run, jobs in them, and how many held each count of jobs
        self.counts_lock = threading.Lock()
        self.transactions, self.jobs_run, self.sizes = 0, 0, {}
        self.thread = threading.Thread(target=self.loop, name=f"{db.name}-writer", daemon=True)
        self.thread.start()

    def submit(self, work) -> Future:
        fut: Future = Future()
        self.jobs.put((work, fut))
        return fut

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()
        self.con.close()

    def loop(self) -> None:
        while True:
            first = self.jobs.get()
            if first is None:
                return
            batch = [first]
            if self.batch:
                while True:
                    try:
                        job = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is None:
                        self.jobs.put(None)  # stop after this batch
                        break
                    batch.append(job)
            self.run(batch)

    def counts(self) -> dict:
        """Transactions the writer ran, the jobs in them, and the sizes' distribution."""
        with self.counts_lock:
            return {"transactions": self.transactions, "jobs": self.jobs_run,
                    "sizes": {str(k): v for k, v in sorted(self.sizes.items())}}

    def run(self, batch) -> None:
        with self.counts_lock:
            self.transactions += 1
            self.jobs_run += len(batch)
            self.sizes[len(batch)] = self.sizes.get(len(batch), 0) + 1
        if self.db.broken(self.con):  # Postgres: the writer's connection was lost; a new one
            try:
                self.con.close()
                self.con = self.db.connect()
            except self.db.Error as e:
                for _, fut in batch:
                    fut.set_exception(self.db.classify(e) or e)
                return
        if not self.batch:
            work, fut = batch[0]
            try:
                fut.set_result(self.db.transaction(self.con, work))
            except self.db.Error as e:
                fut.set_exception(self.db.classify(e) or e)
            except BaseException as e:
                fut.set_exception(e)
            return
        results = []
        db = self.db
        try:
            def group(tx: Tx):
                for work, _ in batch:
                    tx.execute(db.SAVEPOINT)
                    try:
                        results.append((True, work(tx)))
                        tx.execute(db.RELEASE)
                    except (HTTPError, *db.JOB_ERRORS) as e:
                        tx.execute(db.ROLLBACK_TO)
                        tx.execute(db.RELEASE)
                        results.append((False, e if isinstance(e, HTTPError) else db.classify(e) or e))
            self.db.transaction(self.con, group)
        except BaseException as e:  # the commit failed: no job of the batch is acknowledged
            err = self.db.classify(e) or e
            for _, fut in batch:
                fut.set_exception(err)
            return
        for (ok, value), (_, fut) in zip(results, batch):
            (fut.set_result if ok else fut.set_exception)(value)


# ----------------------------------------------------------------------------- request counter

class Counter:
    """Requests answered by this process, in an mmap'd file of LAB_STATS_DIR so that
    /health can sum every worker process."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{os.getpid()}.count"
        with open(self.path, "wb") as f:
            f.write(b"\0" * 8)
        self.file = open(self.path, "r+b")
        self.mm = mmap.mmap(self.file.fileno(), 8)
        self.seq = itertools.count(1)
        self.dir = directory

    def bump(self) -> None:
        self.mm[:8] = next(self.seq).to_bytes(8, "little")

    def total(self) -> int:
        total = 0
        for p in self.dir.glob("*.count"):
            try:
                total += int.from_bytes(p.read_bytes()[:8], "little")
            except OSError:
                pass
        return total


# ----------------------------------------------------------------------------- rendering

class Template:
    def __init__(self, path: Path):
        parts = re.split(r"\{\{(\w+)\}\}", path.read_text())
        self.parts = parts  # even: literal, odd: field name

    def render(self, values: dict) -> str:
        out = []
        for i, part in enumerate(self.parts):
            out.append(html.escape(str(values[part]), quote=True) if i % 2 else part)
        return "".join(out)


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_id(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not 1 <= int(raw) <= MAX_ID:
        raise HTTPError(400, f"invalid id {raw[:40]!r}: expected an integer 1..{MAX_ID}")
    return int(raw)


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


async def read_json(request, required: bool):
    """The request body as JSON (whatever its Content-Type), at most MAX_BODY bytes."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
        raise HTTPError(413, f"request body over {MAX_BODY} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise HTTPError(413, f"request body over {MAX_BODY} bytes")
    if not body.strip():
        if required:
            raise HTTPError(400, "a JSON body is required")
        return None
    try:  # strict UTF-8: json.loads(bytes) would let encoded surrogates (and a BOM) through
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HTTPError(400, f"body is not valid UTF-8 ({e.reason} at byte {e.start})")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
            raise HTTPError(400, "body has a \\u escape of an unpaired UTF-16 surrogate")
        return value
    except (ValueError, RecursionError) as e:
        raise HTTPError(400, f"malformed JSON: {str(e)[:200]}")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(v) -> bool:
    """A string in v holds a surrogate: json.loads joins an escaped pair into one character,
    so what is left came from an unpaired escape and has no UTF-8 form."""
    if isinstance(v, str):
        return _SURROGATE.search(v) is not None
    if isinstance(v, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_has_lone_surrogate(x) for x in v)
    return False


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def short_str(v, field: str, lo: int = 1, hi: int = 64) -> str:
    if not isinstance(v, str) or not lo <= len(v) <= hi:
        raise HTTPError(400, f"{field} must be a string of {lo} to {hi} characters")
    return storable(v, field)


def storable(v: str, field: str) -> str:
    """A string the database can hold: Postgres' text cannot hold U+0000 (SQLite's can), so on
    Postgres it is a 400 before any write, not the driver's error (a 500)."""
    if "\x00" in v and isinstance(DB, PostgresDatabase):
        raise HTTPError(400, f"{field} holds U+0000, which Postgres text cannot store")
    return v


# ----------------------------------------------------------------------------- start-up checks

def check_postgres(cfg: dict) -> None:
    """LAB_DATABASE=postgres: the database answers and has the four tables (each worker then
    opens its own pool)."""
    import psycopg
    try:
        con = psycopg.connect(cfg["database_url"], autocommit=True)
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: cannot connect: {one_line(e)}")
    try:
        found = {r[0] for r in con.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL", (list(TABLES),))}
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: cannot read the schema: {one_line(e)}")
    finally:
        con.close()
    missing = set(TABLES) - found
    if missing:
        raise ConfigError(f"LAB_DATABASE_URL: the database lacks tables {sorted(missing)} "
                          "of servers/schema.postgres.sql")


def checked_config() -> dict:
    """The LAB_* configuration with everything a start can refuse checked: the knobs, the
    templates, and the database (each pragma applied once on SQLite; Postgres reachable with
    the lab's tables). ConfigError or sqlite3.Error otherwise."""
    cfg = parse_config()
    for name in ("request", "user", "user_page"):
        if not (cfg["templates"] / f"{name}.html").is_file():
            raise ConfigError(f"LAB_TEMPLATES={str(cfg['templates'])!r} lacks {name}.html")
    if cfg["database"] == "postgres":
        check_postgres(cfg)
    else:
        con = sqlite3.connect(cfg["db"])  # check every pragma really applies
        for name, value in cfg["pragmas"]:
            con.execute(f"PRAGMA {name} = {value}")
        con.close()
        if cfg["sql_log"] == "on":  # each worker opens its own descriptor in Database
            SqlLog(f"{cfg['db']}.sql.log").close()
    return cfg


if __name__ == "__main__":  # the server's own process refuses a bad start before importing FastAPI
    try:                    # (about 0.6 s): the worker processes import this module as `app`
        CHECKED = checked_config()
    except (ConfigError, sqlite3.Error) as e:
        print(f"lab: {e}", file=sys.stderr)
        sys.exit(2)


# ----------------------------------------------------------------------------- the app

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402

CFG = None
STARTUP_FAILED = "startup-failed"  # left in LAB_STATS_DIR by a worker that could not start
DB: Database | None = None
COUNTER: Counter | None = None
TEMPLATES: dict[str, Template] = {}
METRIC_NAMES = ("cpu", "memory", "disk", "load", "requests")  # servers/shared.toml


@asynccontextmanager
async def lifespan(app):
    global CFG, DB, COUNTER
    CFG = parse_config()
    import anyio.to_thread
    anyio.to_thread.current_default_thread_limiter().total_tokens = CFG["threads"]
    for name in ("request", "user", "user_page"):
        TEMPLATES[name] = Template(CFG["templates"] / f"{name}.html")
    COUNTER = Counter(Path(os.environ["LAB_STATS_DIR"]))
    try:
        DB = (PostgresDatabase if CFG["database"] == "postgres" else Database)(CFG)
    except ConfigError as e:  # a worker that cannot open its pool: one line, then uvicorn exits
        print(f"lab: {e}", file=sys.stderr, flush=True)
        (Path(os.environ["LAB_STATS_DIR"]) / STARTUP_FAILED).write_text(str(e))  # main() exits 2
        raise
    yield
    DB.close()


# redirect_slashes=False: "/hello/" is an unknown path (404 JSON), not a 307 to "/hello".
app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None,
              redirect_slashes=False)


class CountRequests:
    """Pure ASGI middleware: count every answered request but /health."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] == "/health":
            return await self.app(scope, receive, send)

        async def counted_send(message):
            if message["type"] == "http.response.start":
                COUNTER.bump()
            await send(message)
        await self.app(scope, receive, counted_send)


# A raw path with an empty, "." or ".." segment ("//hello", "/./hello", "/items/../hello").
UNCLEAN_PATH = re.compile(rb"//|/\.\.?(?:/|\Z)")


class RejectUncleanPaths:
    """Pure ASGI middleware: a path that is not in clean form names no resource, whatever it
    would resolve to: 404 JSON before routing, as in every stack (Go's ServeMux would
    redirect it to the cleaned path). The raw path: "%2e%2e" is an ordinary segment."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        raw = scope.get("raw_path") or scope.get("path", "").encode()
        if scope["type"] == "http" and UNCLEAN_PATH.search(raw):
            return await error(404, "not found")(scope, receive, send)
        return await self.app(scope, receive, send)


app.add_middleware(RejectUncleanPaths)
app.add_middleware(CountRequests)  # added last: outermost, so it counts the 404s above too


def error(status: int, message: str, headers=None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


@app.exception_handler(HTTPError)
async def lab_error(request, exc: HTTPError):
    return error(exc.status, exc.message)


@app.exception_handler(StarletteHTTPException)
async def http_error(request, exc: StarletteHTTPException):
    message = {404: "not found", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
    return error(exc.status_code, message, getattr(exc, "headers", None))


@app.exception_handler(RequestValidationError)
async def validation_error(request, exc):
    return error(400, "invalid request")


@app.exception_handler(Exception)
async def internal_error(request, exc):
    return error(500, "internal error")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(),
           **{p: importlib.metadata.version(p) for p in ("fastapi", "starlette", "uvicorn")}}
    if CFG["database"] == "postgres":
        import psycopg
        v = psycopg.pq.version()
        out.update({p: importlib.metadata.version(p) for p in ("psycopg", "psycopg-pool")},
                   **{"libpq": f"{v // 10000}.{v % 100}", "psycopg-impl": psycopg.pq.__impl__})
    return out


def compile_options() -> list[str]:
    """PRAGMA compile_options of the SQLite library this process links (an in-memory database:
    also with LAB_DATABASE=postgres)."""
    memory = sqlite3.connect(":memory:")
    try:
        return [row[0] for row in memory.execute("PRAGMA compile_options")]
    finally:
        memory.close()


SQLITE_OPTIONS = compile_options()


@app.get("/health")
def health():
    return {
        "server": SERVER,
        "versions": versions(),
        "sqlite_version": sqlite3.sqlite_version,
        "sqlite_compile_options": SQLITE_OPTIONS,
        "database": CFG["database"],
        "database_version": DB.version,
        "pid": os.getpid(),
        "knobs": {"database": CFG["database"], "pragmas": DB.effective_pragmas(), "txn_mode": CFG["txn_mode"],
                  "busy": CFG["busy"], "write_path": CFG["write_path"],
                  "processes": CFG["processes"], "threads": CFG["threads"],
                  "readers": CFG["readers"], "metrics_txn": CFG["metrics_txn"],
                  "cache": CFG["cache"], "sql_log": CFG["sql_log"]},
        "emulated": ({"busy": f"{CFG['busy_kind']} emulated in application code around lock-taking "
                              "statements and COMMIT: stdlib sqlite3 has no sqlite3_busy_handler"}
                     if DB.policy.emulated else {}),
        "requests_handled": COUNTER.total(),
        "writer": DB.writer.counts() if DB.writer else None,
    }


@app.get("/hello", response_class=PlainTextResponse)
def hello():
    return PlainTextResponse("Hello, World!")


MAX_DELAY_MS = 10_000


@app.get("/delay/{ms}", response_class=PlainTextResponse)
async def delay(ms: str):
    """Waits on the event loop (no database, no thread, no CPU), then answers like /hello."""
    m = re.fullmatch(r"0*([0-9]{1,5})", ms)
    if not m or int(m.group(1)) > MAX_DELAY_MS:
        raise HTTPError(400, f"invalid delay {ms[:40]!r}: expected an integer 0..{MAX_DELAY_MS} (ms)")
    await asyncio.sleep(int(m.group(1)) / 1000)
    return PlainTextResponse("Hello, World!")


@app.post("/requests")
async def create_request(request: Request):
    params = await read_json(request, required=False)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise HTTPError(400, "the body must be a JSON object")
    row = (str(uuid.uuid4()), request.client.host if request.client else "",
           request.method, str(request.url), json.dumps(params, separators=(",", ":")))

    def work(tx: Tx) -> int:
        ts = now()
        return tx.insert("INSERT INTO requests (uid, ip, method, url, parameters, created_at, "
                         "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)", (*row, ts, ts))
    new_id = await DB.write(work)
    location = f"/requests/{new_id}"
    return HTMLResponse(f'<html><body>You are being <a href="{location}">redirected</a>.</body></html>',
                        status_code=302, headers={"Location": location})


@app.get("/requests/{id}", response_class=HTMLResponse)
def show_request(id: str):
    row = DB.read("SELECT id, uid, ip, method, url, parameters, created_at, updated_at "
                  "FROM requests WHERE id = ?", (parse_id(id),))
    if row is None:
        raise HTTPError(404, f"request {id} not found")
    keys = ("id", "uid", "ip", "method", "url", "parameters", "created_at", "updated_at")
    return HTMLResponse(TEMPLATES["request"].render(dict(zip(keys, row))))


SQL_LATEST_METRIC = "SELECT value FROM metrics WHERE instance = ? AND name = ? ORDER BY id DESC LIMIT 1"
SQL_INSERT_METRIC = ("INSERT INTO metrics (instance, name, value, previous, created_at) "
                     "VALUES (?, ?, ?, ?, ?)")


@app.post("/metrics", status_code=201)
async def create_metrics(request: Request):
    body = await read_json(request, required=False)
    if body is None:
        instance = f"instance-{random.randint(1, 10)}"
        measurements = [(n, random.uniform(0, 100)) for n in METRIC_NAMES]
    else:
        if not isinstance(body, dict):
            raise HTTPError(400, "the body must be a JSON object")
        instance = short_str(body.get("instance"), "instance")
        ms = body.get("measurements")
        if not isinstance(ms, list) or len(ms) != 5:
            raise HTTPError(400, "measurements must be a list of exactly 5 {name, value} objects")
        measurements = []
        for m in ms:
            if not isinstance(m, dict) or not is_number(m.get("value")):
                raise HTTPError(400, "each measurement needs a name and a finite numeric value")
            measurements.append((short_str(m.get("name"), "measurement name"), float(m["value"])))

    def work(tx: Tx) -> list[int]:  # request: one transaction for the five records
        ids, ts = [], now()
        for name, value in measurements:
            prev = tx.execute(SQL_LATEST_METRIC, (instance, name), fetch=True)
            ids.append(tx.insert(SQL_INSERT_METRIC, (instance, name, value, prev[0] if prev else None, ts)))
        return ids

    def records(con) -> list[int]:
        # record (ActiveRecord): the lookup is an autocommit read, then each INSERT is its own
        # transaction. A failure at record k leaves records 1..k-1 committed, as in Rails.
        ids, ts = [], now()
        for name, value in measurements:
            prev = DB.read_on(con, SQL_LATEST_METRIC, (instance, name))
            row = (instance, name, value, prev[0] if prev else None, ts)
            ids.append(DB.transaction(con, lambda tx: tx.insert(SQL_INSERT_METRIC, row)))
        return ids

    if CFG["metrics_txn"] == "record":
        from starlette.concurrency import run_in_threadpool
        ids = await run_in_threadpool(DB.with_connection, records)
    else:
        ids = await DB.write(work)
    return JSONResponse({"instance": instance, "ids": ids}, status_code=201)


@app.post("/items")
async def create_item(request: Request):
    body = await read_json(request, required=True)
    if not isinstance(body, dict) or not isinstance(body.get("payload"), str):
        raise HTTPError(400, 'the body must be {"payload": "<string>"}')
    payload = storable(body["payload"], "payload")
    if len(payload.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD:
        raise HTTPError(400, f"payload over {MAX_PAYLOAD} bytes")

    def work(tx: Tx) -> int:
        return tx.insert("INSERT INTO items (payload, created_at) VALUES (?, ?)", (payload, now()))
    return JSONResponse({"id": await DB.write(work)}, status_code=201)


@app.get("/items/{id}")
def show_item(id: str):
    row = DB.read("SELECT id, payload, created_at FROM items WHERE id = ?", (parse_id(id),))
    if row is None:
        raise HTTPError(404, f"item {id} not found")
    return {"id": row[0], "payload": row[1], "created_at": row[2]}


USER_SQL = "SELECT uid, username, departname, created FROM users WHERE uid = ?"
USER_KEYS = ("uid", "username", "departname", "created")


def user_row(uid: str) -> dict:
    row = DB.read(USER_SQL, (parse_id(uid),))
    if row is None:
        raise HTTPError(404, f"user {uid} not found")
    return dict(zip(USER_KEYS, row))


@app.get("/users/{uid}", response_class=HTMLResponse)
def show_user(uid: str):
    return HTMLResponse(TEMPLATES["user"].render(user_row(uid)))


@app.get("/users/{uid}/page", response_class=HTMLResponse)
def show_user_page(uid: str):
    return HTMLResponse(TEMPLATES["user_page"].render(user_row(uid)))


@app.post("/users/{uid}")
async def update_user(uid: str, request: Request):
    key = parse_id(uid)
    body = await read_json(request, required=True)
    if not isinstance(body, dict):
        raise HTTPError(400, 'the body must be {"departname": "<string>"}')
    departname = short_str(body.get("departname"), "departname")

    def work(tx: Tx):
        if tx.execute("UPDATE users SET departname = ?, updates = updates + 1 WHERE uid = ?",
                      (departname, key)).rowcount == 0:
            raise HTTPError(404, f"user {uid} not found")
        return tx.execute(USER_SQL, (key,), fetch=True)
    row = await DB.write(work)
    return HTMLResponse(TEMPLATES["user"].render(dict(zip(USER_KEYS, row))))


# ----------------------------------------------------------------------------- main

def main(cfg: dict) -> int:
    """The server: uvicorn's workers, each importing this module as `app`, on a configuration
    already checked (checked_config)."""
    import uvicorn
    # uvicorn (0.54) re-raises SIGTERM/SIGINT once its graceful shutdown is done: exit 0 then, as
    # the contract says, through the `finally` below (the default action would exit 143 and
    # leave the stats folder behind)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    # in the lab's folder for this server when it gives one (LAB_RUNTIME_DIR: removed by the lab
    # even when this process is SIGKILLed and its `finally` never runs)
    stats = tempfile.mkdtemp(prefix="lab-stats-", dir=os.environ.get("LAB_RUNTIME_DIR") or None)
    os.environ["LAB_STATS_DIR"] = stats
    try:
        uvicorn.run("app:app", app_dir=str(Path(__file__).resolve().parent),
                    host=cfg["host"], port=cfg["port"], workers=cfg["processes"],
                    access_log=False, log_level="warning", server_header=False,
                    timeout_graceful_shutdown=10)
        if (Path(stats) / STARTUP_FAILED).exists():  # uvicorn's supervisor stopped (exit status 0)
            return 2
    finally:
        shutil.rmtree(stats, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(CHECKED))
