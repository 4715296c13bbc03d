"""data/results.db, the catalogue of every run and point (written with sqlite-utils,
readable in Datasette), and the metadata that makes a number reproducible."""
from __future__ import annotations

import json
import os
import platform
import secrets
import sqlite3
import subprocess
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import pandas as pd
import sqlite_utils

from . import config


def new_run_id(notebook: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{notebook}-{secrets.token_hex(2)}"


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=config.PROJ_ROOT, text=True,
                             capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=config.PROJ_ROOT, text=True, capture_output=True,
                               timeout=10).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import psutil
    return {"host": platform.node(), "system": f"{platform.system()} {platform.release()}",
            "cpu": model or platform.processor(), "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1)}


def machine_label(m: dict | None = None) -> str:
    m = m or machine()
    return f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']:g} GiB"


def versions() -> dict:
    out = {"python": platform.python_version(), "sqlite (python)": sqlite3.sqlite_version}
    for pkg in ("locust", "pandas", "matplotlib", "sqlite-utils", "hdrhistogram", "papermill"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def lock_pins(path: Path | str | None = None) -> dict[str, str]:
    """requirements.lock's `name==version` pins that apply to this Python and platform (the
    lock is universal: a package may be pinned per Python version), names normalised."""
    import re
    from packaging.markers import Marker
    path = Path(path or config.LOCK_FILE)
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)\s*(?:;([^\\]*))?", line)
        if m and (not m.group(3) or Marker(m.group(3).strip()).evaluate()):
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def lock() -> dict:
    """Which locked environment made a run: the lock file's hash, and whether every pin that
    applies here is what is installed (`lock_drift` lists those that are not)."""
    import hashlib
    try:
        text = config.LOCK_FILE.read_bytes()
    except OSError:
        return {"lock_hash": None, "lock_ok": None, "lock_drift": None}
    drift = []
    for name, pinned in lock_pins().items():
        try:
            got = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a pin for another Python or platform (the lock is universal)
        if got != pinned:
            drift.append(f"{name} {got} (locked {pinned})")
    return {"lock_hash": hashlib.sha256(text).hexdigest()[:16], "lock_ok": not drift,
            "lock_drift": drift}


def open_db(path: Path | str | None = None) -> sqlite_utils.Database:
    path = Path(path or config.RESULTS_DB)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite_utils.Database(path)
    db.execute("PRAGMA journal_mode=WAL")
    return db


def store_run(run: dict, points: list[dict], path: Path | str | None = None,
              table: str = "points") -> None:
    """The run's row in `runs` (dicts and lists as JSON), with the lock it ran from, and its
    measurements in `table`."""
    run = {**lock(), **run}
    db = open_db(path)
    row = {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
           for k, v in run.items()}
    db["runs"].insert(row, pk="run_id", replace=True, alter=True)
    db.conn.close()
    if points:
        store_rows(table, points, path)


def store_rows(table: str, rows: list[dict], path: Path | str | None = None) -> None:
    """Rows of a run's side table (e.g. `crosschecks`), each carrying its run_id."""
    db = open_db(path)
    db[table].insert_all(rows, alter=True)
    db[table].create_index(["run_id"], if_not_exists=True)
    db.conn.close()


def load_table(table: str, run_id: str | None = None, path: Path | str | None = None) -> pd.DataFrame:
    """A side table's rows (all, or those of `run_id` and its experiments)."""
    path = Path(path or config.RESULTS_DB)
    if not path.exists():
        return pd.DataFrame()
    con = sqlite3.connect(path)
    try:
        sql, args = f"SELECT * FROM [{table}]", []
        if run_id:
            sql += " WHERE run_id = ? OR run_id LIKE ?"
            args = [run_id, run_id + "/%"]
        return pd.read_sql_query(sql, con, params=args)
    except (sqlite3.OperationalError, pd.errors.DatabaseError):
        return pd.DataFrame()
    finally:
        con.close()


def load_points(path: Path | str | None = None, notebook: str | None = None,
                run_id: str | None = None, headline_only: bool = True) -> pd.DataFrame:
    """Every stored point, joined with its run's notebook, experiment, start, machine and scale
    (the `scale` parameter the notebook ran with; None for ad-hoc sweeps), newest runs first.
    `headline_only`: without the points a confirming generator replaced (sweep's `confirm`)."""
    path = Path(path or config.RESULTS_DB)
    if not path.exists():
        return pd.DataFrame()
    con = sqlite3.connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"runs", "points"} <= tables:
            return pd.DataFrame()
        sql = ("SELECT p.*, r.notebook, r.experiment, r.started, r.machine AS run_machine, "
               "json_extract(r.parameters, '$.scale') AS scale FROM points p "
               "JOIN runs r USING (run_id)")
        where, args = [], []
        if notebook:
            where.append("r.notebook = ?"); args.append(notebook)
        if run_id:  # the run and its experiments (<run_id>/<experiment>)
            where.append("(p.run_id = ? OR p.run_id LIKE ?)"); args += [run_id, run_id + "/%"]
        columns = {r[1] for r in con.execute("PRAGMA table_info(points)")}
        if headline_only and "headline" in columns:  # points from before the flag are headline
            where.append("coalesce(p.headline, 1) = 1")
        if where:
            sql += " WHERE " + " AND ".join(where)
        df = pd.read_sql_query(sql + " ORDER BY r.started DESC", con, params=args)
        # points record their machine since sweep() writes it; older ones take their run's
        df["machine"] = df["machine"].fillna(df["run_machine"]) if "machine" in df else df["run_machine"]
        return df.drop(columns="run_machine")
    finally:
        con.close()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def elapsed(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


def store_table(run_id: str, notebook: str, table: str, rows: pd.DataFrame,
                parameters: dict | None = None, path: Path | str | None = None) -> None:
    """A run row plus its measurements in another table (e.g. `buffer_points`), and a CSV
    copy under data/runs/<run_id>/."""
    run = {"run_id": run_id, "notebook": notebook, "started": now_iso(), "finished": now_iso(),
           "parameters": parameters or {}, "git_commit": git_commit(), "machine": machine_label(),
           "machine_info": machine(), "versions": versions(), "points": len(rows)}
    records = [{"run_id": run_id, **{k: (None if pd.isna(v) else v) for k, v in r.items()}}
               for r in rows.to_dict("records")]
    store_run(run, records, path, table)
    out = (Path(path).parent / "runs" if path else config.RUNS_DIR) / run_id
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / f"{table}.csv", index=False)
