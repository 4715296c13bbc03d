"""The ceiling: what SQLite itself does here, without HTTP, pinned like a server.

`raw_sqlite()` runs in a fresh process on the given CPUs (taskset) and measures one-row
write transactions per second (BEGIN IMMEDIATE; INSERT; COMMIT, WAL, synchronous=NORMAL by
default) and primary-key point reads per second, through Python's stdlib sqlite3 — so it
includes one C-extension call per statement, like the thinnest possible server.
`ceiling()` measures it for a notebook run and stores it (table `ceilings`, experiment
`ceiling` of the run), so the number a Findings sentence quotes is in results.db.
"""
from __future__ import annotations

import pandas as pd
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlitelab.core import processes, results

_SCRIPT = r"""
import json, os, sqlite3, sys, time
path, seconds, synchronous = sys.argv[1], float(sys.argv[2]), sys.argv[3]
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
while time.perf_counter() - t0 < seconds:
    for _ in range(1000):
        k = k % rows + 1
        con.execute(q, (k,)).fetchone()
        m += 1
reads = m / (time.perf_counter() - t0)
print(json.dumps({"commits_per_s": commits, "reads_per_s": reads, "rows": rows,
                  "sqlite_version": sqlite3.sqlite_version, "synchronous": synchronous}))
"""


def raw_sqlite(seconds: float = 2.0, cpus: str | None = None, synchronous: str = "normal") -> dict:
    """One-row commits/s and point reads/s of SQLite on `cpus`, in a pinned subprocess."""
    if synchronous.lower() not in ("off", "normal", "full", "extra"):
        raise ValueError(f"synchronous must be off|normal|full|extra, not {synchronous!r}")
    with tempfile.TemporaryDirectory(prefix="lab-baseline-") as d:
        cmd, pinned = processes.pin_command(
            [sys.executable, "-c", _SCRIPT, str(Path(d) / "b.db"), str(seconds), synchronous], cpus)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 60)
    if out.returncode != 0:
        raise RuntimeError(f"baseline failed: {out.stderr[-2000:]}")
    return {**json.loads(out.stdout), "cpus": pinned}


def ceiling(notebook: str, run_id: str, seconds: float, cpus: str | None,
            parameters: dict | None = None, path: Path | str | None = None) -> dict:
    """`raw_sqlite(seconds, cpus)` for a notebook run, stored as its `ceiling` experiment (one
    row in `ceilings`, described like every row: results.describe), and returned."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
        raise ValueError(f"ceiling seconds must be a number > 0, not {seconds!r}")
    raw = {**raw_sqlite(float(seconds), cpus), "seconds": float(seconds)}
    results.store_table(run_id, notebook, "ceilings", pd.DataFrame([raw]), parameters=parameters,
                        path=path, experiment="ceiling")
    return raw
