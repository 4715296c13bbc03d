"""Seed 003: SQLite as a write buffer, in-process Python, no HTTP.

Records `{"uri", "text"}` are JSON-dumped into a composite record, 1,000 composite records
are grouped into one row (as JSON), and `rows_per_txn` rows are written per transaction in
WAL mode. JSON serialisation is inside the timing, as in the article; generating the dummy
records is not. Every point runs in a fresh process (which imports only the standard library), so its
peak memory is its own.
The consumer side reads pending rows in order, marks them done, then deletes them.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import shutil
import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    id         INTEGER PRIMARY KEY,
    payload    TEXT NOT NULL,      -- JSON list of records_per_row composite records
    metadata   TEXT NOT NULL,
    created_at TEXT NOT NULL,
    status     TEXT NOT NULL DEFAULT 'pending'
);
"""
BYTES_PER_RECORD = 260   # measured here: ~236 bytes/record (db + wal), plus headroom


def db_size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal", f"{path}-shm")
               if os.path.exists(p))


def _records(start: int, n: int, stamp: str) -> list[dict]:
    return [{"payload": {"uri": f"at://did:plc:{i:012d}/app.bsky.feed.post/{i:x}",
                         "text": f"post number {i}: the quick brown fox jumps over"},
             "timestamp": stamp, "metadata": {"service": "buffer-test"}}
            for i in range(start, start + n)]


def _write_point(path: str, total: int, rows_per_txn: int, records_per_row: int,
                 synchronous: str) -> dict:
    for p in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(p):
            os.remove(p)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.executescript(SCHEMA)
    stamp = "2026-01-01T00:00:00Z"
    meta = json.dumps({"service": "buffer-test", "records": records_per_row})
    per_txn = rows_per_txn * records_per_row
    written, timed, txns = 0, 0.0, 0
    while written < total:
        n = min(per_txn, total - written)
        batch = _records(written, n, stamp)                   # generation: not timed
        t = time.perf_counter()
        rows = [(json.dumps([{"payload": json.dumps(r["payload"]), "timestamp": r["timestamp"],
                              "metadata": json.dumps(r["metadata"])}
                             for r in batch[k:k + records_per_row]]), meta, stamp)
                for k in range(0, n, records_per_row)]
        con.execute("BEGIN")
        con.executemany("INSERT INTO queue (payload, metadata, created_at) VALUES (?, ?, ?)", rows)
        con.execute("COMMIT")
        timed += time.perf_counter() - t
        written += n
        txns += 1
    size = db_size(Path(path))
    con.close()
    return {"records": written, "transactions": txns, "write_seconds": timed,
            "records_per_s": written / timed if timed else None, "db_bytes": size}


def _consume_point(path: str, rows_per_txn: int) -> dict:
    """Read pending rows in id order, mark them done, delete them: records/s of the consumer."""
    con = sqlite3.connect(path, isolation_level=None)
    t = time.perf_counter()
    consumed = 0
    while True:
        con.execute("BEGIN IMMEDIATE")
        rows = con.execute("SELECT id, payload FROM queue WHERE status = 'pending' ORDER BY id LIMIT ?",
                           (rows_per_txn,)).fetchall()
        if not rows:
            con.execute("COMMIT")
            break
        for _, payload in rows:
            consumed += len(json.loads(payload))
        ids = [r[0] for r in rows]
        marks = ",".join("?" * len(ids))
        con.execute(f"UPDATE queue SET status = 'done' WHERE id IN ({marks})", ids)
        con.execute(f"DELETE FROM queue WHERE id IN ({marks}) AND status = 'done'", ids)
        con.execute("COMMIT")
    seconds = time.perf_counter() - t
    left = con.execute("SELECT count(*) FROM queue").fetchone()[0]
    con.close()
    return {"consumed": consumed, "consume_seconds": seconds,
            "consume_records_per_s": consumed / seconds if seconds else None, "rows_left": left}


def _point_worker(conn, kwargs: dict, consume: bool) -> None:
    try:
        out = _write_point(**kwargs)
        if consume:
            out.update(_consume_point(kwargs["path"], kwargs["rows_per_txn"]))
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        conn.send(("ok", out))
    except BaseException as e:  # report, don't hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def run_point(path: Path, total: int, rows_per_txn: int, records_per_row: int = 1000,
              synchronous: str = "normal", consume: bool = True, timeout: float = 3600) -> dict:
    """One measurement in a fresh process (stopped by PID on timeout or interrupt)."""
    if synchronous.lower() not in ("off", "normal", "full", "extra"):
        raise ValueError(f"synchronous must be off|normal|full|extra, not {synchronous!r}")
    for name, v in (("total", total), ("rows_per_txn", rows_per_txn), ("records_per_row", records_per_row)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    kwargs = {"path": str(path), "total": total, "rows_per_txn": rows_per_txn,
              "records_per_row": records_per_row, "synchronous": synchronous.lower()}
    proc = ctx.Process(target=_point_worker, args=(child, kwargs, consume), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            raise TimeoutError(f"buffer point {kwargs} exceeded {timeout:.0f} s")
        status, out = parent.recv()
    finally:
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        proc.join()
    if status != "ok":
        raise RuntimeError(f"buffer point {kwargs} failed: {out}")
    return out


def sweep_buffer(work_dir: Path, totals: list[int], rows_per_txn: list[int],
                 synchronous: list[str], records_per_row: int = 1000, consume: bool = True,
                 max_seconds: float = 600, disk_margin: float = 1.5, keep_free_gb: float = 2.0,
                 progress: bool = True):
    """Every (synchronous, rows_per_txn, total), smallest totals first. A point is skipped —
    and says why — when it would not fit on the free disk, or when the previous total's
    rate projects it beyond `max_seconds`. Returns a DataFrame."""
    import pandas as pd  # here, not at the top: the point workers stay small
    from tqdm.auto import tqdm
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    combos = [(s, r, t) for s in synchronous for r in rows_per_txn for t in sorted(totals)]
    last_rate: dict = {}
    for sync, rpt, total in tqdm(combos, desc="buffer", disable=not progress, mininterval=0.5):
        base = {"synchronous": sync, "rows_per_txn": rpt, "records_per_row": records_per_row,
                "total": total}
        need = total * BYTES_PER_RECORD * disk_margin
        free = shutil.disk_usage(work_dir).free - keep_free_gb * 2**30
        rate = last_rate.get((sync, rpt))
        if need > free:
            rows.append({**base, "skipped": f"needs ~{need / 2**30:.1f} GiB, {max(free, 0) / 2**30:.1f} GiB free"})
            continue
        if rate and total / rate * 2 > max_seconds:
            rows.append({**base, "skipped": f"projected {total / rate * 2:.0f} s > max_seconds {max_seconds:.0f}"})
            continue
        path = work_dir / f"buffer-{sync}-{rpt}-{total}.db"
        try:
            out = run_point(path, total, rpt, records_per_row, sync, consume,
                            timeout=max_seconds * 3)
        finally:
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                p.unlink(missing_ok=True)
        last_rate[(sync, rpt)] = out["records_per_s"]
        rows.append({**base, **out, "skipped": None})
    df = pd.DataFrame(rows)
    if "db_bytes" in df:
        df["db_mb"] = df["db_bytes"] / 1e6
    return df
