"""The write paths, the per-process start-up and shutdown, and what a database error answers.

`write(work)` runs `work(alias)` — a function of a database alias that does one write's ORM
statements — in one transaction.atomic() and returns its result only after COMMIT:
- LAB_WRITE_PATH=pool: in the request's own thread, on its connection (`default`);
- writer / batch: on the one Writer thread, with its own connection (alias `writer`), fed by a
  queue; batch commits everything queued at once, each job in a nested atomic (a savepoint).
"""
from __future__ import annotations

import importlib.metadata
import mmap
import os
import platform
import queue
import sqlite3
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, connections, transaction
from django.db.backends.signals import connection_created

from lab.backend.base import is_busy
from lab.config import one_line

DEFAULT, WRITER_ALIAS = "default", "writer"


class ApiError(Exception):
    """An answer other than the endpoint's success: {"error": message} with this status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def busy_error() -> ApiError:
    return ApiError(503, "database is locked")


def unavailable_error() -> ApiError:
    return ApiError(503, "database unavailable")


PG_LOCKED = ("40001", "40P01", "55P03")      # serialization failure, deadlock, lock not available
PG_UNAVAILABLE = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now (and class 08)


def classify(exc: BaseException) -> ApiError | None:
    """The 503 a database error maps to (servers/README.md), or None: a 500. Django wraps the
    driver's exception (django.db.OperationalError, ...) with the driver's as its __cause__."""
    if isinstance(exc, ApiError):
        return exc
    if not isinstance(exc, DatabaseError):
        return None
    cause = exc.__cause__ or exc
    if isinstance(cause, sqlite3.Error):
        return busy_error() if is_busy(cause) else None
    try:
        import psycopg
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(cause, psycopg.Error):
        return None
    state = cause.sqlstate
    if state in PG_LOCKED:
        return busy_error()
    if state is not None and (state.startswith("08") or state in PG_UNAVAILABLE):
        return unavailable_error()
    if state is None and isinstance(cause, psycopg.OperationalError):
        return unavailable_error()  # a lost connection, a closed one, the pool's timeout
    return None


# ----------------------------------------------------------------------------- write paths

WRITER: "Writer | None" = None


def write(work):
    """`work(alias)` in one write transaction; its result once committed."""
    if WRITER is None:
        with transaction.atomic(using=DEFAULT):
            return work(DEFAULT)
    return WRITER.submit(work).result()


class Writer:
    """One thread, one connection (alias `writer`), fed by a queue. `batch`: group commit of
    every job queued, one transaction, each job in a nested transaction.atomic() (SAVEPOINT ...
    RELEASE SAVEPOINT; ROLLBACK TO SAVEPOINT for a job that fails, which is answered alone)."""

    JOB_ERRORS = (ApiError, DataError, IntegrityError)  # what fails one job of a batch, not the batch

    def __init__(self, batch: bool):
        self.batch = batch
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.counts_lock = threading.Lock()
        self.transactions, self.jobs_run, self.sizes = 0, 0, {}
        self.ready: Future = Future()
        self.thread = threading.Thread(target=self.loop, name="lab-writer", daemon=True)
        self.thread.start()
        self.ready.result()  # its connection is open (or the error that kept it closed)

    def submit(self, work) -> Future:
        fut: Future = Future()
        self.jobs.put((work, fut))
        return fut

    def stop(self) -> None:
        """Commit and answer what is queued, then close the connection."""
        self.jobs.put(None)
        self.thread.join()

    def counts(self) -> dict:
        with self.counts_lock:
            return {"transactions": self.transactions, "jobs": self.jobs_run,
                    "sizes": {str(k): v for k, v in sorted(self.sizes.items())}}

    def loop(self) -> None:
        try:
            connections[WRITER_ALIAS].ensure_connection()
        except BaseException as e:
            self.ready.set_exception(e)
            return
        self.ready.set_result(True)
        try:
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
        finally:
            connections[WRITER_ALIAS].close()

    def run(self, batch) -> None:
        with self.counts_lock:
            self.transactions += 1
            self.jobs_run += len(batch)
            self.sizes[len(batch)] = self.sizes.get(len(batch), 0) + 1
        # what Django does around every request: a connection that broke (Postgres) is closed,
        # and the next statement opens a new one
        connections[WRITER_ALIAS].close_if_unusable_or_obsolete()
        if not self.batch:
            work, fut = batch[0]
            try:
                with transaction.atomic(using=WRITER_ALIAS):
                    result = work(WRITER_ALIAS)
                fut.set_result(result)
            except BaseException as e:
                fut.set_exception(e)
            return
        results = []
        try:
            with transaction.atomic(using=WRITER_ALIAS):
                for work, _ in batch:
                    try:
                        with transaction.atomic(using=WRITER_ALIAS):  # a savepoint per job
                            results.append((True, work(WRITER_ALIAS)))
                    except self.JOB_ERRORS as e:
                        results.append((False, e))
        except BaseException as e:  # the batch failed (its COMMIT too): no job is acknowledged
            for _, fut in batch:
                err = classify(e)
                fut.set_exception(ApiError(err.status, err.message) if err else
                                  RuntimeError(f"batch failed: {one_line(e)}"))
            return
        for (ok, value), (_, fut) in zip(results, batch):
            (fut.set_result if ok else fut.set_exception)(value)


# ----------------------------------------------------------------------------- request counter

class Counter:
    """Requests answered by this process, in an mmap'd file of LAB_STATS_DIR (inside
    LAB_RUNTIME_DIR) so that /health can sum every worker process."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{os.getpid()}.count"
        path.write_bytes(b"\0" * 8)
        self.file = open(path, "r+b")
        self.mm = mmap.mmap(self.file.fileno(), 8)
        self.lock = threading.Lock()
        self.n = 0
        self.dir = directory

    def bump(self) -> None:
        with self.lock:
            self.n += 1
            self.mm[:8] = self.n.to_bytes(8, "little")

    def total(self) -> int:
        total = 0
        for p in self.dir.glob("*.count"):
            try:
                total += int.from_bytes(p.read_bytes()[:8], "little")
            except OSError:
                pass
        return total


# ----------------------------------------------------------------------------- a worker's life

COUNTER: Counter | None = None
VERSIONS: dict[str, str] = {}
DATABASE_VERSION: str | None = None
SQLITE_OPTIONS: list[str] = []
_SQLITE_CONNECTIONS: list = []  # every SQLite connection this process opened (closed at exit)
STARTUP_FAILED = "startup-failed"  # in LAB_STATS_DIR: the first worker that could not start says why


def _remember(sender, connection, **kwargs):
    if connection.vendor == "sqlite":
        _SQLITE_CONNECTIONS.append(connection.connection)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(),
           **{p: importlib.metadata.version(p) for p in ("django", "gunicorn")}}
    if settings.LAB["database"] == "postgres":
        import psycopg
        v = psycopg.pq.version()
        out.update({p: importlib.metadata.version(p) for p in ("psycopg", "psycopg-pool")},
                   **{"libpq": f"{v // 10000}.{v % 100}", "psycopg-impl": psycopg.pq.__impl__})
    return out


def compile_options() -> list[str]:
    """PRAGMA compile_options of the SQLite library this process links (also on Postgres)."""
    memory = sqlite3.connect(":memory:")
    try:
        return [row[0] for row in memory.execute("PRAGMA compile_options")]
    finally:
        memory.close()


def start_worker(pool) -> None:
    """A gunicorn worker, before it accepts its first connection (server.py's post_worker_init):
    its counter, its connections opened (SQLite: one per gthread thread, each with the pragmas;
    Postgres: Django's psycopg pool, filled), the writer thread. On an error: one `lab: ` line
    (the first worker to fail says it) and exit 3, gunicorn's worker boot error, which stops
    the server."""
    global COUNTER, DATABASE_VERSION, WRITER
    cfg = settings.LAB
    stats = Path(os.environ["LAB_STATS_DIR"])
    try:
        COUNTER = Counter(stats)
        VERSIONS.update(versions())
        SQLITE_OPTIONS[:] = compile_options()
        if cfg["database"] == "postgres":
            _open_postgres(cfg)
        else:
            connection_created.connect(_remember)
            _open_sqlite(cfg, pool)
            DATABASE_VERSION = sqlite3.sqlite_version
        if cfg["write_path"] != "pool":
            WRITER = Writer(batch=cfg["write_path"] == "batch")
    except Exception as e:
        say_once(stats, f"{_what_failed(cfg)}: {one_line(e.__cause__ or e)}")
        sys.exit(3)


def _what_failed(cfg) -> str:
    if cfg["database"] == "postgres":
        return (f"LAB_DATABASE_URL: cannot connect (a pool of {cfg['readers']} connections, "
                "LAB_READERS; Postgres' max_connections?)")
    return f"LAB_DB={cfg['db']!r}: cannot open a connection"


def say_once(stats: Path, message: str) -> None:
    try:
        fd = os.open(stats / STARTUP_FAILED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return  # another worker said it
    os.write(fd, message.encode())
    os.close(fd)
    print(f"lab: {message}", file=sys.stderr, flush=True)


def _open_postgres(cfg) -> None:
    """Django's pool (OPTIONS "pool": psycopg_pool.ConnectionPool, min = max = LAB_READERS),
    opened and filled now; the server's version read on one of its connections."""
    global DATABASE_VERSION
    db = connections[DEFAULT]
    db.pool.open(wait=True, timeout=30.0)
    with db.cursor() as cur:
        cur.execute("SHOW server_version")
        DATABASE_VERSION = cur.fetchone()[0]
    db.close()  # back to the pool


def _open_sqlite(cfg, pool) -> None:
    """Every gthread thread opens its `default` connection now, one after another (SQLite's
    shared cache would refuse the pragmas of connections opening at once): a barrier holds each
    thread until all have, so each task lands on a thread of its own."""
    n = cfg["threads"]
    barrier, one_at_a_time = threading.Barrier(n), threading.Lock()

    def open_here():
        try:
            with one_at_a_time:
                connections[DEFAULT].ensure_connection()
        finally:
            barrier.wait(timeout=120)
    for fut in [pool.submit(open_here) for _ in range(n)]:
        fut.result()


def stop_worker() -> None:
    """A worker whose requests are done (gunicorn's worker_exit): the writer commits and answers
    what is queued, then every connection closes."""
    global WRITER
    if WRITER is not None:
        WRITER.stop()
        WRITER = None
    if settings.LAB["database"] == "postgres":
        try:
            connections[DEFAULT].close_pool()
        except Exception:
            pass
    for con in _SQLITE_CONNECTIONS:
        try:
            con.close()
        except Exception:
            pass
