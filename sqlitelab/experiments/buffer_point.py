"""Seed 003: SQLite as a write buffer, in-process Python, no HTTP: one point, in a process of
its own (the sweeps over them: sqlitelab.experiments.buffer).

Two methods, each point in a fresh process of its own (which imports only the standard
library, so its peak memory is its own), stopped by PID on timeout or interrupt:

`article`
    The author's code, detail by detail (METResearchGroup/bluesky-research, commit de1246d9,
    `lib/db/tests/queue_load_testing.py` and `Queue._init_queue_db`, `_create_batched_chunks`,
    `batch_add_items_to_queue` in `lib/db/queue.py`):

    - untimed: the queue database is created by `_init_queue_db`'s pragma sequence (WAL first, so
      its later `page_size=8192` is ignored and pages stay 4 KiB; `zip_compression` is not a
      pragma and is ignored; synchronous/cache/mmap are per connection and do not persist) and
      its table; then every record `{"uri": "at://<10>/post/<15>", "text": "Test post content <50>"}`
      (characters drawn uniformly from ASCII letters and digits) is generated into one list — by
      the lab's generator (`lab_records`: the same records, the same memory, nine times faster
      than the author's `random.choices`, which `record_generator="author"` still runs);
    - timed, from the call of `batch_add_items_to_queue(records)` to its return: chunks of 1,000
      records; one `json.dumps(chunk)` per chunk, metadata `{"batch_size": 1000,
      "actual_batch_size": len(chunk)}`, created_at (UTC, "%Y-%m-%d-%H:%M:%S") and 'pending' per
      chunk, all rows built first; then groups of `rows_per_txn` rows, each written by a NEW
      `sqlite3.connect(path)` (Python's default isolation level, no pragma: SQLite's default
      synchronous FULL, WAL from the file) with `executemany` inside `with conn:`, then
      `conn.commit()`; the author's logger lines (two per call, one per 10 groups) too.

    Connection lifetimes follow the author's Python (3.10, see the repository's README and
    requirements): CPython <= 3.10 freed a dropped `sqlite3.Connection` at once, so the previous
    group's connection closes when `conn` is rebound, i.e. just AFTER the next one was opened,
    and the last one when the function returns, inside the timing. This lab runs Python 3.11+,
    where the statement cache (a functools.lru_cache around the connection) makes every
    connection part of a reference cycle: a dropped connection stays open until the cyclic GC
    runs (cpython#97641, #103837). So `article` closes the previous connection explicitly where
    3.10 would have; the `py311_gc` variant leaves it to the GC, as the unchanged code does here.

    What SQLite does with that order: a connection that has been opened but has not yet run a
    statement that reads the schema holds no lock on the file, so the previous connection's
    close finds itself the last one: it checkpoints the whole WAL into the database (syncing
    both) and deletes the -wal and -shm files, and the next group's first statement creates
    them again. One checkpoint per group, measured here (`close_checkpoints`), not assumed.

`tuned`
    The lab's way: one connection for the whole run, explicit BEGIN/COMMIT per transaction of
    `rows_per_txn` rows, WAL, `synchronous` NORMAL or FULL as an axis, records generated per
    transaction (untimed, so it goes to 100 M with flat memory) by a faster generator of the same
    shape and length (one os.urandom draw per transaction mapped uniformly onto the same 62
    characters), one json.dumps per row of 1,000 records and the author's metadata, created_at and
    status. Optionally the consumer: read pending rows in id order, mark them done, delete them;
    its one pass over the file is then also the point's audit (consume_point).

Knob-at-a-time variants of `article` (each changes exactly one thing, see VARIANTS) look for what
explains the article's 10-rows-per-transaction table. Every point reports seconds, records/s, the
database size (db + -wal + -shm, MiB, as the author's `get_db_size_mb`), the process's RSS before
and after generating the records and its peak, checkpoints counted from the -wal/-shm files
(probing them is excluded from the timing), and an audit of the rows written.

Run one point from a shell (in this process, e.g. under `strace -f -c`):
    python -m sqlitelab.experiments.buffer_point --method article --variant as_published --total 1000000 --rows-per-txn 10
"""
from __future__ import annotations

import resource
from multiprocessing import resource_tracker
import argparse
import gc
import json
import logging
import math
import multiprocessing as mp
import os
import platform
import random
import sqlite3
import string
import struct
import tempfile
import time
from datetime import datetime, timezone
from logging.handlers import RotatingFileHandler
from pathlib import Path

METHODS = ("article", "tuned")
VARIANTS = {  # of the `article` method; each changes exactly one thing from "as_published"
    "as_published": "the author's code; connections closed where CPython 3.10 closed them",
    "one_connection": "one connection for the whole call instead of one per group "
                      "(still `with conn:` per group; closed at the end, inside the timing)",
    "sync_normal": "PRAGMA synchronous=NORMAL on each per-group connection (issued after the "
                   "previous connection closed, so the close order is unchanged)",
    "no_ckpt_on_close": "one extra connection, opened after init and before the timing, that has "
                        "read the schema and stays open until after the size is taken: no "
                        "group's close is the last, so none checkpoints or deletes the WAL "
                        "(only the 1,000-page autocheckpoint runs)",
    "page_size_8192": "init issues page_size=8192 before journal_mode=WAL, so the 8 KiB pages "
                      "the author asked for take effect",
    "py311_gc": "the code unchanged on this Python: dropped connections are not closed "
                "explicitly and close whenever the cyclic GC collects them",
    "no_logging": "without the author's logger lines inside the timing",
}
TUNED_VARIANT = "lab"           # the variant column of `tuned` points
# Their plain words for figures and tables (METHOD_TITLES, VARIANT_TITLES) and TUNED_VARIANT for
# reports are in sqlitelab.core.vocabulary, which this module does not import (standard library
# only); tests/test_buffer.py holds the two to the same ids.
SYNCHRONOUS = {"off": 0, "normal": 1, "full": 2, "extra": 3}
SYNC_NAMES = {v: k for k, v in SYNCHRONOUS.items()}
TIMESTAMP_FORMAT = "%Y-%m-%d-%H:%M:%S"      # lib/constants.py timestamp_format
ALNUM = string.ascii_letters + string.digits

INSERT = "INSERT INTO queue (payload, metadata, created_at, status) VALUES (?, ?, ?, ?)"
AUTHOR_TABLE = """
                CREATE TABLE queue (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    payload TEXT,
                    metadata TEXT,
                    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                    status TEXT DEFAULT 'pending'
                )
            """


class PointTimeout(TimeoutError):
    """A point ran past its timeout; its process (`pid`) was stopped."""

    def __init__(self, message: str, pid: int):
        super().__init__(message)
        self.pid = pid


# ----------------------------------------------------------------------------- files, memory

def db_size(path: Path | str) -> int:
    """db + -wal + -shm in bytes (the author's get_db_size_mb, before its division by 2**20)."""
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal", f"{path}-shm")
               if os.path.exists(p))


def _remove_db(path: str) -> None:
    for p in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(p):
            os.remove(p)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _rss_mib() -> float:
    return _status_kib("VmRSS") / 1024


def _hwm_mib() -> float:
    return _status_kib("VmHWM") / 1024



def _usage() -> tuple[float, int, int]:
    """(CPU seconds user + system, minor page faults, voluntary context switches) so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_minflt, r.ru_nvcsw


def _usage_delta(u0, u1) -> dict:
    return {"timed_cpu_seconds": u1[0] - u0[0], "timed_minor_faults": u1[1] - u0[1],
            "timed_voluntary_switches": u1[2] - u0[2]}


def _loadavg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def _wal_probe(path: str) -> tuple[bool, int, int]:
    """(the -wal file exists, its size, nBackfill from the -shm's checkpoint info). nBackfill > 0
    right after a commit means a checkpoint ran at that commit (the next write restarts the WAL
    and sets it back to 0). Reads the files; the shm is mapped shared, so read() sees it."""
    wal = f"{path}-wal"
    try:
        size = os.path.getsize(wal)
    except OSError:
        return False, 0, 0
    backfill = 0
    try:
        with open(f"{path}-shm", "rb") as f:
            head = f.read(100)
        if len(head) >= 100:
            backfill = struct.unpack_from("=I", head, 96)[0]
    except OSError:
        pass
    return True, size, backfill


# ----------------------------------------------------------------------------- records

def _random_string(length: int = 10) -> str:
    """generate_random_string of queue_load_testing.py."""
    return "".join(random.choices(string.ascii_letters + string.digits, k=length))


def author_records(n: int) -> list[dict]:
    """generate_test_records of queue_load_testing.py: the author's generator, as is."""
    return [
        {
            "uri": f"at://{_random_string(10)}/post/{_random_string(15)}",
            "text": f"Test post content {_random_string(50)}",
        }
        for _ in range(n)
    ]


_DROP = bytes(range(248, 256))                        # 248 = 4 x 62: uniform after dropping
_MAP = bytes((ALNUM.encode())[b % 62] for b in range(256))


def fast_records(n: int) -> list[dict]:
    """Records of the same shape and lengths (10 + 15 + 50 characters drawn uniformly from the
    same 62), from one os.urandom draw per call instead of three random.choices per record."""
    need = 75 * n
    chars = b""
    while len(chars) < need:
        chars += os.urandom(int((need - len(chars)) * 1.04) + 64).translate(_MAP, _DROP)
    s = chars[:need].decode("ascii")
    return [{"uri": f"at://{s[k:k + 10]}/post/{s[k + 10:k + 25]}",
             "text": f"Test post content {s[k + 25:k + 75]}"} for k in range(0, need, 75)]


def lab_records(n: int, block: int = 10_000) -> list[dict]:
    """The article method's records from the lab's generator: `fast_records` (the same shape,
    lengths and alphabet as `author_records`, each character drawn uniformly from the same 62)
    in blocks of `block`, so that its random text is never more than a block's worth of memory
    beside the records: the records take what the author's take (records_bytes_per_record), and
    the point's peak stays that of writing them, at a ninth of the author's generating time."""
    out: list[dict] = []
    for k in range(0, n, block):
        out += fast_records(min(block, n - k))
    return out


RECORD_GENERATORS = {"lab": lab_records, "author": author_records}


def _now_str() -> str:
    """lib.helper.generate_current_datetime_str."""
    return datetime.now(timezone.utc).strftime(TIMESTAMP_FORMAT)


# ----------------------------------------------------------------------------- article

def _author_logger(log_dir: str) -> logging.Logger:
    """lib/log/logger.py's Logger: a stream handler (the terminal there, /dev/null here) and a
    rotating file handler, both formatting every line; `info` adds context "{}"."""
    lg = logging.Logger(f"buffer-article-{os.getpid()}", logging.INFO)
    fmt = "%(asctime)s %(levelname)s [%(filename)s]: %(message)s"
    stream = logging.StreamHandler(open(os.devnull, "w"))
    stream.setFormatter(logging.Formatter(fmt))
    file = RotatingFileHandler(os.path.join(log_dir, "logs.log"), maxBytes=1024 * 1024, backupCount=5)
    file.setFormatter(logging.Formatter(fmt + " %(context)s"))
    lg.addHandler(stream)
    lg.addHandler(file)
    return lg


def _init_queue_db(path: str, variant: str) -> sqlite3.Connection | None:
    """Queue._init_queue_db. Returns the connection only for py311_gc (left to the GC)."""
    conn = sqlite3.connect(path, timeout=30.0)
    with conn:
        if variant == "page_size_8192":
            conn.execute("PRAGMA page_size=8192")          # before WAL: takes effect
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA cache_size=-64000")
        conn.execute("PRAGMA mmap_size=268435456")
        conn.execute("PRAGMA page_size=8192")              # after WAL: ignored (4 KiB pages)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA zip_compression=true")    # not a pragma: ignored
        except sqlite3.OperationalError:
            pass
        conn.execute(AUTHOR_TABLE)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.commit()
    if variant == "py311_gc":
        return None        # dropped, not closed: the GC closes it whenever it runs
    conn.close()           # CPython 3.10: freed (closed) when _init_queue_db returns
    return None


def _create_batched_chunks(chunks: list[list[dict]], batch_size: int,
                           metadata: dict | None = None) -> list[tuple[str, str, str, str]]:
    """Queue._create_batched_chunks."""
    batched_chunks = []
    if metadata is None:
        metadata = {}
    for chunk in chunks:
        payload = json.dumps(chunk)
        created_at = _now_str()
        status = "pending"
        metadata_dict = {**metadata, "batch_size": batch_size, "actual_batch_size": len(chunk)}
        json_metadata = json.dumps(metadata_dict)
        batched_chunks.append((payload, json_metadata, created_at, status))
    return batched_chunks


class _Probe:
    """Counts checkpoints from the files between the author's steps; its own time is kept
    apart (`seconds`) and subtracted from the timing."""

    def __init__(self, path: str, enabled: bool):
        self.path, self.enabled = path, enabled
        self.seconds = 0.0
        self.close_checkpoints = 0      # a close that found itself last: WAL and shm deleted
        self.auto_checkpoints = 0       # a checkpoint at a commit (nBackfill > 0 after it)
        self.wal_max = 0
        self.closes = 0
        self.synchronous: int | None = None
        self.page_size: int | None = None
        self.group_seconds: list[float] = []

    def after_close(self) -> None:
        self.closes += 1
        if not self.enabled:
            return
        t = time.perf_counter()
        if not os.path.exists(f"{self.path}-wal"):
            self.close_checkpoints += 1
        self.seconds += time.perf_counter() - t

    def after_commit(self, conn: sqlite3.Connection | None) -> None:
        t = time.perf_counter()
        if conn is not None and self.synchronous is None:   # the schema is read by now
            self.synchronous = conn.execute("PRAGMA synchronous").fetchall()[0][0]
            self.page_size = conn.execute("PRAGMA page_size").fetchall()[0][0]
        if self.enabled:
            exists, size, backfill = _wal_probe(self.path)
            self.wal_max = max(self.wal_max, size)
            if exists and backfill > 0:
                self.auto_checkpoints += 1
        self.seconds += time.perf_counter() - t


def batch_add_items_to_queue(db_path: str, items: list[dict], batch_size: int = 1000,
                             batch_write_size: int = 25, variant: str = "as_published",
                             logger: logging.Logger | None = None, probe: _Probe | None = None,
                             metadata: dict | None = None) -> dict:
    """Queue.batch_add_items_to_queue, with the one change of `variant`. Returns the split of
    its own time (serialisation, writing, the last close), probes excluded."""
    probe = probe or _Probe(db_path, False)
    log = (lambda msg: logger.info(msg, extra={"context": "{}"})) if logger else (lambda msg: None)
    t0 = time.perf_counter()
    if metadata is None:
        metadata = {}
    chunks = [items[i: i + batch_size] for i in range(0, len(items), batch_size)]
    minibatch_chunks = _create_batched_chunks(chunks=chunks, batch_size=batch_size, metadata=metadata)
    batch_chunks = [minibatch_chunks[i: i + batch_write_size]
                    for i in range(0, len(minibatch_chunks), batch_write_size)]
    total_items, total_batches, total_minibatches = len(items), len(batch_chunks), len(minibatch_chunks)
    log(f"Writing {total_items} items as {total_minibatches} minibatches to DB.")
    log(f"Writing {total_minibatches} minibatches to DB as {total_batches} batches...")
    t1 = time.perf_counter()
    conn = None
    opened = 0
    for i, batch_chunk in enumerate(batch_chunks):
        tg = time.perf_counter()
        pg = probe.seconds
        if i % 10 == 0:
            log(f"Processing batch {i + 1}/{total_batches}...")
        if variant == "one_connection":
            if conn is None:
                conn = sqlite3.connect(db_path)
                opened += 1
        else:
            new = sqlite3.connect(db_path)      # `with sqlite3.connect(...) as conn:` opens first,
            opened += 1
            if conn is not None and variant != "py311_gc":
                conn.close()                    # ... then rebinding `conn` frees the old one (3.10)
                probe.after_close()
            conn = new                          # py311_gc: the old one waits for the cyclic GC
            if variant == "sync_normal":
                conn.execute("PRAGMA synchronous=NORMAL")
        with conn:
            conn.executemany(INSERT, batch_chunk)
        conn.commit()
        probe.after_commit(conn)
        probe.group_seconds.append(time.perf_counter() - tg - (probe.seconds - pg))
    t2 = time.perf_counter()
    if conn is not None and variant != "py311_gc":
        conn.close()                            # the function returns: its `conn` is freed (3.10)
        probe.after_close()
    t3 = time.perf_counter()
    return {"serialise_seconds": t1 - t0, "write_seconds": t2 - t1, "close_seconds": t3 - t2,
            "groups": total_batches, "connections": opened}


def _gc_watch() -> tuple[dict, callable]:
    """Cyclic-GC collections and their time, per generation, while installed."""
    stats = {"collections": 0, "full_collections": 0, "seconds": 0.0, "_t": 0.0}

    def cb(phase, info):
        if phase == "start":
            stats["_t"] = time.perf_counter()
        else:
            stats["collections"] += 1
            stats["full_collections"] += info.get("generation") == 2
            stats["seconds"] += time.perf_counter() - stats["_t"]
    gc.callbacks.append(cb)
    return stats, cb


class _Auditor:
    """The audit's checks (see _audit), row by row in id order: the rows the payloads hold, their
    records, metadata and status. Records are counted by their '{"uri": ' openings (exact: uri
    and text hold only letters, digits, ':', '/', ' ') or, when the caller has parsed the
    payload (`recs`, the consumer), as the parsed list's length; small totals, and the first and
    last rows always, are checked record by record."""

    def __init__(self, total: int, records_per_row: int, full_parse: bool):
        self.total, self.records_per_row, self.full_parse = total, records_per_row, full_parse
        self.in_payloads, self.seen = 0, 0
        self.parsed_ok = self.meta_ok = self.status_ok = True
        self.last: tuple[str, list | None] | None = None

    def _parsed_ok(self, payload: str, recs, n: int | None) -> bool:
        recs = json.loads(payload) if recs is None else recs
        return (isinstance(recs, list) and (n is None or len(recs) == n)
                and all(isinstance(r, dict) and set(r) == {"uri", "text"} for r in recs))

    def row(self, payload: str, meta: str, status: str, recs: list | None = None) -> None:
        n = payload.count('{"uri": ') if recs is None else (len(recs) if isinstance(recs, list) else -1)
        self.in_payloads += n
        m = json.loads(meta)
        self.meta_ok &= (m.get("batch_size") == self.records_per_row and m.get("actual_batch_size") == n)
        self.status_ok &= status == "pending"
        if self.full_parse or self.seen == 0:
            self.parsed_ok &= self._parsed_ok(payload, recs, n)
        self.seen += 1
        self.last = (payload, recs)

    def result(self, rows: int, journal: str) -> dict:
        if self.last is not None:
            self.parsed_ok &= self._parsed_ok(*self.last, None)
        expected = math.ceil(self.total / self.records_per_row)
        return {"rows": rows, "rows_expected": expected, "records_in_payloads": self.in_payloads,
                "journal_mode": journal,
                "audit_ok": bool(rows == expected and self.seen == rows
                                 and self.in_payloads == self.total and self.parsed_ok
                                 and self.meta_ok and self.status_ok and journal == "wal")}


def _audit(path: str, total: int, records_per_row: int, full_parse: bool) -> dict:
    """Rows written, the records their payloads hold, the metadata (_Auditor), read back in one
    pass after the timing. (consume_point does the same checks on the rows it consumes.)"""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT count(*) FROM queue").fetchall()[0][0]
        auditor = _Auditor(total, records_per_row, full_parse)
        for payload, meta, status in con.execute("SELECT payload, metadata, status FROM queue ORDER BY id"):
            auditor.row(payload, meta, status)
        journal = con.execute("PRAGMA journal_mode").fetchall()[0][0]
    finally:
        con.close()
    return auditor.result(rows, journal)


def article_point(path: str, total: int, rows_per_txn: int, variant: str = "as_published",
                  records_per_row: int = 1000, probe: bool = True,
                  record_generator: str = "lab") -> dict:
    """One load test as queue_load_testing.run_load_test ran it, with the one change of `variant`.
    The records, generated before the timing, come from `record_generator`: "lab" (lab_records,
    the default) or "author" (the author's generate_test_records, nine times slower here)."""
    generate = RECORD_GENERATORS[record_generator]
    _remove_db(path)
    log_dir = os.path.dirname(os.path.abspath(path))
    rss_start = _rss_mib()
    _init_queue_db(path, variant)                          # untimed (Queue(..., create_new_queue=True))
    extra = None
    if variant == "no_ckpt_on_close":
        extra = sqlite3.connect(path)
        extra.execute("SELECT count(*) FROM sqlite_master").fetchall()   # keeps the WAL open (no read txn)
    logger = None if variant == "no_logging" else _author_logger(log_dir)
    rss_before = _rss_mib()
    tg = time.perf_counter()
    records = generate(total)                              # untimed
    gen_seconds = time.perf_counter() - tg
    rss_after = _rss_mib()
    pr = _Probe(path, probe)
    gcs, cb = _gc_watch()
    try:
        u0 = _usage()
        start_time = time.perf_counter()
        split = batch_add_items_to_queue(path, records, batch_size=records_per_row,
                                         batch_write_size=rows_per_txn, variant=variant,
                                         logger=logger, probe=pr)
        end_time = time.perf_counter()
        u1 = _usage()
    finally:
        gc.callbacks.remove(cb)
    seconds = end_time - start_time - pr.seconds
    exists, wal_bytes, _ = _wal_probe(path)
    size = db_size(path)
    peak = _hwm_mib()
    del records
    if extra is not None:
        extra.close()
    if logger:
        for h in logger.handlers:
            h.close()
    gc.collect()                                           # py311_gc: close what is left
    out = {"seconds": seconds, "records_per_s": total / seconds if seconds > 0 else None,
           "db_bytes": size, "db_mib": size / 2**20, "wal_mib": wal_bytes / 2**20,
           "wal_max_mib": pr.wal_max / 2**20, "page_size": pr.page_size,
           "synchronous": SYNC_NAMES.get(pr.synchronous), "synchronous_level": pr.synchronous,
           **split, "group_ms_median": _median(pr.group_seconds) * 1e3,
           "group_ms_max": max(pr.group_seconds, default=0) * 1e3,
           "close_checkpoints": pr.close_checkpoints if probe else None,
           "auto_checkpoints": pr.auto_checkpoints if probe else None,
           "probe_seconds": pr.seconds, "gc_collections": gcs["collections"],
           "gc_full_collections": gcs["full_collections"], "gc_seconds": gcs["seconds"],
           **_usage_delta(u0, u1), "generate_seconds": gen_seconds, "rss_start_mib": rss_start,
           "rss_before_gen_mib": rss_before, "rss_after_gen_mib": rss_after, "peak_rss_mib": peak,
           "records_bytes_per_record": (rss_after - rss_before) * 2**20 / total,
           "peak_bytes_per_record": (peak - rss_before) * 2**20 / total}
    t = time.perf_counter()
    out.update(_audit(path, total, records_per_row, full_parse=total <= 100_000))
    out["audit_seconds"] = time.perf_counter() - t
    return out


def _median(xs: list[float]) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# ----------------------------------------------------------------------------- tuned

def tuned_point(path: str, total: int, rows_per_txn: int, synchronous: str = "normal",
                records_per_row: int = 1000, probe: bool = True, audit: bool = True) -> dict:
    """One connection, BEGIN/COMMIT per `rows_per_txn` rows, WAL, `synchronous` as asked;
    records generated per transaction (untimed); the timing covers serialisation, the
    transactions and the final close (its checkpoint), as `article`'s does. `audit=False`:
    the caller audits (the consumer's pass, consume_point)."""
    _remove_db(path)
    rss_start = _rss_mib()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute(AUTHOR_TABLE)
    level = con.execute("PRAGMA synchronous").fetchall()[0][0]
    page_size = con.execute("PRAGMA page_size").fetchall()[0][0]
    pr = _Probe(path, probe)
    per_txn = rows_per_txn * records_per_row
    written, timed, ser, gen, txns = 0, 0.0, 0.0, 0.0, 0
    rss_before = _rss_mib()
    rss_after = rss_before
    used = [0.0, 0, 0]
    while written < total:
        n = min(per_txn, total - written)
        tg = time.perf_counter()
        batch = fast_records(n)                                   # untimed
        gen += time.perf_counter() - tg
        if txns == 0:
            rss_after = _rss_mib()
        u0 = _usage()
        t = time.perf_counter()
        rows = []
        for k in range(0, n, records_per_row):
            chunk = batch[k:k + records_per_row]
            rows.append((json.dumps(chunk),
                         json.dumps({"batch_size": records_per_row, "actual_batch_size": len(chunk)}),
                         _now_str(), "pending"))
        t1 = time.perf_counter()
        con.execute("BEGIN")
        con.executemany(INSERT, rows)
        con.execute("COMMIT")
        t2 = time.perf_counter()
        used = [a + (b - c) for a, b, c in zip(used, _usage(), u0)]
        ser += t1 - t
        timed += t2 - t
        pr.group_seconds.append(t2 - t)
        pr.after_commit(None)
        written += n
        txns += 1
        del batch, rows
    u0 = _usage()
    t = time.perf_counter()
    con.close()
    close_seconds = time.perf_counter() - t
    used = [a + (b - c) for a, b, c in zip(used, _usage(), u0)]
    pr.after_close()
    timed += close_seconds
    size = db_size(path)
    peak = _hwm_mib()
    out = {"seconds": timed, "records_per_s": total / timed if timed > 0 else None,
           "db_bytes": size, "db_mib": size / 2**20, "wal_mib": 0.0, "wal_max_mib": pr.wal_max / 2**20,
           "page_size": page_size, "synchronous": SYNC_NAMES.get(level), "synchronous_level": level,
           "serialise_seconds": ser, "write_seconds": timed - ser - close_seconds,
           "close_seconds": close_seconds, "groups": txns, "connections": 1,
           "group_ms_median": _median(pr.group_seconds) * 1e3,
           "group_ms_max": max(pr.group_seconds, default=0) * 1e3,
           "close_checkpoints": pr.close_checkpoints if probe else None,
           "auto_checkpoints": pr.auto_checkpoints if probe else None, "probe_seconds": pr.seconds,
           **_usage_delta((0.0, 0, 0), used), "generate_seconds": gen, "rss_start_mib": rss_start,
           "rss_before_gen_mib": rss_before,
           "rss_after_gen_mib": rss_after, "peak_rss_mib": peak,
           "records_bytes_per_record": (rss_after - rss_before) * 2**20 / min(per_txn, total),
           "peak_bytes_per_record": (peak - rss_before) * 2**20 / total}
    if audit:
        t = time.perf_counter()
        out.update(_audit(path, total, records_per_row, full_parse=total <= 100_000))
        out["audit_seconds"] = time.perf_counter() - t
    return out


def consume_point(path: str, rows_per_txn: int, audit: tuple[int, int] | None = None) -> dict:
    """Read pending rows in id order, mark them done, delete them: records/s of the consumer.

    `audit` = (total, records_per_row): this pass is also the point's audit, so a file of
    12.5 GB is read once, not twice: every row the consumer reads goes through _audit's checks
    (_Auditor; the consumer's own parse of the payload serves the full-parse checks), their
    time kept apart (`audit_seconds`, not in `consume_seconds`); the audit also requires that
    the consumer saw every row."""
    con = sqlite3.connect(path, isolation_level=None)
    auditor, audit_s, out = None, 0.0, {}
    if audit is not None:
        t = time.perf_counter()
        total, records_per_row = audit
        auditor = _Auditor(total, records_per_row, full_parse=total <= 100_000)
        rows_before = con.execute("SELECT count(*) FROM queue").fetchone()[0]
        journal = con.execute("PRAGMA journal_mode").fetchone()[0]
        audit_s += time.perf_counter() - t
    select = ("SELECT id, payload, metadata, status" if auditor else "SELECT id, payload") + \
        " FROM queue WHERE status = 'pending' ORDER BY id LIMIT ?"
    in_loop = 0.0
    t = time.perf_counter()
    consumed = 0
    while True:
        con.execute("BEGIN IMMEDIATE")
        rows = con.execute(select, (rows_per_txn,)).fetchall()
        if not rows:
            con.execute("COMMIT")
            break
        for r in rows:
            recs = json.loads(r[1])
            consumed += len(recs)
            if auditor is not None:
                ta = time.perf_counter()
                auditor.row(r[1], r[2], r[3], recs)
                in_loop += time.perf_counter() - ta
        ids = [r[0] for r in rows]
        del rows, recs
        marks = ",".join("?" * len(ids))
        con.execute(f"UPDATE queue SET status = 'done' WHERE id IN ({marks})", ids)
        con.execute(f"DELETE FROM queue WHERE id IN ({marks}) AND status = 'done'", ids)
        con.execute("COMMIT")
    seconds = time.perf_counter() - t - in_loop
    left = con.execute("SELECT count(*) FROM queue").fetchone()[0]
    con.close()
    if auditor is not None:
        t = time.perf_counter()
        out = auditor.result(rows_before, journal)
        out["audit_seconds"] = audit_s + in_loop + time.perf_counter() - t
    return {**out, "consumed": consumed, "consume_seconds": seconds,
            "consume_records_per_s": consumed / seconds if seconds else None, "rows_left": left}


# ----------------------------------------------------------------------------- one point

def check_point(method: str, total: int, rows_per_txn: int, variant: str | None = None,
                synchronous: str | None = None, records_per_row: int = 1000) -> tuple[str, str | None]:
    """Validate a point's parameters; returns (variant, synchronous) normalised. ValueError
    with a clear message otherwise."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    for name, v in (("total", total), ("rows_per_txn", rows_per_txn), ("records_per_row", records_per_row)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    if method == "article":
        variant = variant or "as_published"
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)} for method 'article', not {variant!r}")
        if synchronous is not None:
            raise ValueError("method 'article' takes no synchronous (its connections use SQLite's "
                             "default, FULL); use variant='sync_normal' for NORMAL")
        return variant, None
    if variant not in (None, TUNED_VARIANT):
        raise ValueError(f"method 'tuned' has no variants (variant must be None or {TUNED_VARIANT!r}, "
                         f"not {variant!r})")
    if not isinstance(synchronous, str) or synchronous.lower() not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {sorted(SYNCHRONOUS)} for method 'tuned', "
                         f"not {synchronous!r}")
    return TUNED_VARIANT, synchronous.lower()


def _measure(kw: dict) -> dict:
    """A point in this process (the worker, or the command line)."""
    if kw["method"] == "article":
        out = article_point(kw["path"], kw["total"], kw["rows_per_txn"], kw["variant"],
                            kw["records_per_row"], kw.get("probe", True))
    else:
        consume = bool(kw.get("consume"))   # then the consumer's pass is the audit
        out = tuned_point(kw["path"], kw["total"], kw["rows_per_txn"], kw["synchronous"],
                          kw["records_per_row"], kw.get("probe", True), audit=not consume)
        if consume:
            out.update(consume_point(kw["path"], kw["rows_per_txn"],
                                     audit=(kw["total"], kw["records_per_row"])))
    out.update({"python": platform.python_version(), "sqlite_version": sqlite3.sqlite_version})
    return out


def _point_worker(conn, kw: dict) -> None:
    started = time.time()
    try:
        if kw.get("mem_limit"):
            resource.setrlimit(resource.RLIMIT_AS, (kw["mem_limit"], kw["mem_limit"]))
        out = _measure(kw)
        out.update({"worker_started": started, "worker_seconds": time.time() - started})
        conn.send(("ok", out))
    except BaseException as e:  # report, don't hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def _stop(proc) -> None:
    if proc.is_alive():
        proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    proc.join()
    _stop_resource_tracker()


def _stop_resource_tracker() -> None:
    """A "spawn" Process starts multiprocessing's resource tracker, a helper process that would
    otherwise live as long as the caller (a notebook kernel, pytest). Stopped by its PID here
    (it restarts on the next point); nothing of ours is registered with it once a point is over."""
    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_pid", None) is not None and hasattr(tracker, "_stop"):
        tracker._stop()


def run_point(path: Path | str, total: int, rows_per_txn: int, method: str = "tuned",
              variant: str | None = None, synchronous: str | None = None,
              records_per_row: int = 1000, consume: bool = True, probe: bool = True,
              timeout: float = 3600, mem_limit: int | None = None) -> dict:
    """One measurement in a fresh process, stopped by PID on timeout (PointTimeout) or
    interrupt. `synchronous` is required for `tuned` and must be None for `article`. `mem_limit` (bytes)
    caps the process's address space, so a point that outgrows its projection fails with a
    MemoryError instead of pushing the machine into the OOM killer."""
    variant, synchronous = check_point(method, total, rows_per_txn, variant, synchronous, records_per_row)
    kw = {"path": str(path), "method": method, "variant": variant, "synchronous": synchronous,
          "total": total, "rows_per_txn": rows_per_txn, "records_per_row": records_per_row,
          "consume": consume and method == "tuned", "probe": probe, "mem_limit": mem_limit}
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_point_worker, args=(child, kw), daemon=True)
    load0 = _loadavg()
    launched = time.time()
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise PointTimeout(f"buffer point {method}/{variant} total={total} rows_per_txn={rows_per_txn} "
                               f"exceeded {timeout:.0f} s; process {proc.pid} stopped", proc.pid)
        try:
            status, out = parent.recv()
        except EOFError:
            status, out = "error", f"the point's process died (exit code {proc.exitcode})"
    finally:
        _stop(proc)
        parent.close()
    if status != "ok":
        raise RuntimeError(f"buffer point {method}/{variant} total={total} rows_per_txn={rows_per_txn} failed: {out}")
    # the fresh process's start-up (spawn: a new interpreter importing this module) and its exit
    out.update({"loadavg_start": load0, "loadavg_end": _loadavg(),
                "process_start_seconds": out.pop("worker_started") - launched,
                "process_seconds": time.time() - launched})
    return out



def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.experiments.buffer_point",
                                 description="One buffer point in this process; prints its measurements as JSON.")
    ap.add_argument("--method", choices=METHODS, default="article")
    ap.add_argument("--variant", default=None, help=f"article: one of {sorted(VARIANTS)}")
    ap.add_argument("--synchronous", default=None, help="tuned: off|normal|full|extra")
    ap.add_argument("--total", type=int, required=True)
    ap.add_argument("--rows-per-txn", type=int, required=True)
    ap.add_argument("--records-per-row", type=int, default=1000)
    ap.add_argument("--path", default=None, help="database file (default: a temporary directory)")
    ap.add_argument("--no-consume", action="store_true")
    ap.add_argument("--no-probe", action="store_true")
    a = ap.parse_args(argv)
    if a.method == "tuned" and a.synchronous is None:
        a.synchronous = "normal"
    variant, sync = check_point(a.method, a.total, a.rows_per_txn, a.variant, a.synchronous, a.records_per_row)
    with tempfile.TemporaryDirectory() as d:
        path = a.path or os.path.join(d, "buffer.db")
        try:
            out = _measure({"path": path, "method": a.method, "variant": variant, "synchronous": sync,
                            "total": a.total, "rows_per_txn": a.rows_per_txn,
                            "records_per_row": a.records_per_row, "consume": not a.no_consume,
                            "probe": not a.no_probe})
        finally:
            _remove_db(path)
    print(json.dumps({"method": a.method, "variant": variant, "rows_per_txn": a.rows_per_txn,
                      "total": a.total, **out}))


if __name__ == "__main__":
    main()
