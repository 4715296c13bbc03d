"""The ceiling: what SQLite itself and the disk under it do here, without HTTP, pinned like a server.

`raw_sqlite()` runs in a fresh process on the given CPUs (taskset) and measures one-row
write transactions per second (BEGIN IMMEDIATE; INSERT; COMMIT, WAL, synchronous=NORMAL by
default) and primary-key point reads per second, through Python's stdlib sqlite3 — so it
includes one C-extension call per statement, like the thinnest possible server.
`disk_syncs()` measures the file system's fsync and fdatasync rate as pg_test_fsync does (an
8 KiB write at one offset, then the sync, in a loop): every commit at synchronous=FULL waits for
one. Both run in the folder the sweeps' databases live in (config.TMP_DIR), not /tmp, which may
be another file system (a tmpfs syncs for free).
`ceiling()` measures all of it for a notebook run — commits at NORMAL and at FULL, point reads,
fsync and fdatasync — and stores it (table `ceilings`, experiment `ceiling` of the run), so the
number a Findings sentence quotes is in results.db.
"""
from __future__ import annotations

import pandas as pd
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlitelab.core import config, processes, results, turns

_SCRIPT = r"""
import json, os, sqlite3, sys, time
path, seconds, synchronous, reads = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4] == "reads"
con = sqlite3.connect(path, isolation_level=None)
con.execute("PRAGMA journal_mode=WAL")
con.execute(f"PRAGMA synchronous={synchronous}")
con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, uid TEXT, payload TEXT)")
payload = "x" * 100
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    for _ in range(200):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO t (uid, payload) VALUES (?, ?)", (str(n), payload))
        con.execute("COMMIT")
        n += 1
commits = n / (time.perf_counter() - t0)
rows = n
q = "SELECT id, uid, payload FROM t WHERE id = ?"
m, t0, k = 0, time.perf_counter(), 0
while reads and time.perf_counter() - t0 < seconds:
    for _ in range(1000):
        k = k % rows + 1
        con.execute(q, (k,)).fetchone()
        m += 1
reads = m / (time.perf_counter() - t0) if reads else None
print(json.dumps({"commits_per_s": commits, "reads_per_s": reads, "rows": rows,
                  "sqlite_version": sqlite3.sqlite_version, "synchronous": synchronous}))
"""


_SYNCS = r"""
import json, os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
out, block = {}, bytes(8192)
for name, sync in (("fsync", os.fsync), ("fdatasync", os.fdatasync)):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        os.pwrite(fd, block, 0)
        sync(fd)
        n += 1
    out[name + "_per_s"] = n / (time.perf_counter() - t0)
    os.close(fd)
print(json.dumps(out))
"""


def _scratch() -> tempfile.TemporaryDirectory:
    """A folder on the file system that holds the sweeps' databases."""
    config.TMP_DIR.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix="lab-baseline-", dir=config.TMP_DIR)


def disk_syncs(seconds: float = 1.0, cpus: str | None = None) -> dict:
    """fsync/s and fdatasync/s of an 8 KiB write on the databases' file system (pg_test_fsync's
    way), in a pinned subprocess."""
    with _scratch() as d:
        cmd, pinned = processes.pin_command(
            [sys.executable, "-c", _SYNCS, str(Path(d) / "sync.bin"), str(seconds)], cpus)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 60)
    if out.returncode != 0:
        raise RuntimeError(f"disk sync measurement failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def raw_sqlite(seconds: float = 2.0, cpus: str | None = None, synchronous: str = "normal",
               reads: bool = True) -> dict:
    """One-row commits/s and (`reads`) point reads/s of SQLite on `cpus`, in a pinned subprocess."""
    if synchronous.lower() not in ("off", "normal", "full", "extra"):
        raise ValueError(f"synchronous must be off|normal|full|extra, not {synchronous!r}")
    with _scratch() as d:
        cmd, pinned = processes.pin_command(
            [sys.executable, "-c", _SCRIPT, str(Path(d) / "b.db"), str(seconds), synchronous,
             "reads" if reads else "no-reads"], cpus)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 60)
    if out.returncode != 0:
        raise RuntimeError(f"baseline failed: {out.stderr[-2000:]}")
    return {**json.loads(out.stdout), "cpus": pinned}


def ceiling(notebook: str, run_id: str, seconds: float, cpus: str | None,
            parameters: dict | None = None, path: Path | str | None = None) -> dict:
    """raw_sqlite at NORMAL and at FULL and disk_syncs (half as long), for a notebook run, stored
    as its `ceiling` experiment (one row in `ceilings`, described like every row:
    results.describe), and returned; while a replay is on, the one the replayed run stored."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
        raise ValueError(f"ceiling seconds must be a number > 0, not {seconds!r}")
    if results.replaying():
        return results.replayed_table("ceilings", "ceiling", parameters).iloc[0].to_dict()
    turns.passing()  # runs taking turns (sqlitelab.core.turns): this measurement is one turn
    full = raw_sqlite(float(seconds), cpus, synchronous="full", reads=False)
    raw = {**raw_sqlite(float(seconds), cpus), "full_commits_per_s": full["commits_per_s"],
           **disk_syncs(float(seconds) / 2, cpus), "seconds": float(seconds)}
    results.store_table(run_id, notebook, "ceilings", pd.DataFrame([raw]), parameters=parameters,
                        path=path, experiment="ceiling")
    return raw
