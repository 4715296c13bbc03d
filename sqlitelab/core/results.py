"""data/results.db, the catalogue of every run and point (written with sqlite-utils,
readable in Datasette), and the metadata that makes a number reproducible."""
from __future__ import annotations

import re
from packaging.markers import Marker
import contextlib
import fcntl
import hashlib
import json
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

from sqlitelab.core import config, schema
from sqlitelab.core.machine import machine, machine_label


RUN_STAMP = "%Y%m%dT%H%M%SZ"  # a notebook run id's first part: when it started, UTC


def new_run_id(notebook: str) -> str:
    stamp = datetime.now(timezone.utc).strftime(RUN_STAMP)
    return f"{stamp}-{notebook}-{secrets.token_hex(2)}"


def run_started(run_id: str) -> str | None:
    """When the notebook run `run_id` (new_run_id's) started, ISO 8601 in UTC; None for an id
    of another form."""
    try:
        return datetime.strptime(str(run_id).split("-", 1)[0], RUN_STAMP).replace(tzinfo=timezone.utc).isoformat()
    except ValueError:
        return None


def sweep_id(notebook_run: str, experiment: str | None) -> str:
    """The key of one sweep (or stored table) of a notebook run in `runs`, and its folder under
    data/runs/: `<notebook_run>/<experiment>`. A key only: what it is made of is stored in its
    own columns (`notebook_run`, `experiment`), and nothing reads it back out of the id."""
    return f"{notebook_run}/{experiment}" if experiment else notebook_run


def describe(notebook: str, notebook_run: str, experiment: str | None,
             parameters: dict | None) -> dict:
    """What every stored row says about itself (beside its own generator and CPU pinning):
    the notebook, its run, the experiment, the scale it ran at, the machine and the commit."""
    return {"notebook": notebook, "notebook_run": notebook_run, "experiment": experiment or None,
            "scale": (parameters or {}).get("scale"), "machine": machine_label(),
            "git_commit": git_commit()}


def migrate(path: Path | str | None = None) -> None:
    """Bring a results.db written before rows described themselves up to date, once: `runs`
    gets `notebook_run` and `scale`, and every table keyed by run_id the schema.DESCRIBED
    columns, taken from its run. The only place a run id is ever split: those old rows said
    nothing else about the notebook run they belong to."""
    path = Path(path or config.RESULTS_DB)
    if not path.exists():
        return
    con = sqlite3.connect(path, timeout=30)
    try:
        def columns(table: str) -> set[str]:
            return {r[1] for r in con.execute(f"PRAGMA table_info([{table}])")}

        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        if "runs" not in tables:
            return
        todo = [t for t in tables
                if "run_id" in columns(t) and not set(schema.DESCRIBED) <= columns(t)]
        if not todo:
            return
        with con:
            have = columns("runs")
            for c in ("notebook_run", "scale", "experiment"):
                if c not in have:
                    con.execute(f"ALTER TABLE runs ADD COLUMN [{c}] TEXT")
            con.execute("UPDATE runs SET notebook_run = CASE WHEN instr(run_id, '/') > 0 "
                        "THEN substr(run_id, 1, instr(run_id, '/') - 1) ELSE run_id END "
                        "WHERE notebook_run IS NULL")
            con.execute("UPDATE runs SET experiment = substr(run_id, instr(run_id, '/') + 1) "
                        "WHERE experiment IS NULL AND instr(run_id, '/') > 0")
            con.execute("UPDATE runs SET scale = json_extract(parameters, '$.scale') "
                        "WHERE scale IS NULL AND json_valid(parameters)")
            for table in todo:
                if table == "runs":
                    continue
                have = columns(table)
                for c in schema.DESCRIBED:
                    if c not in have:
                        con.execute(f"ALTER TABLE [{table}] ADD COLUMN [{c}] TEXT")
                for c in schema.DESCRIBED:
                    con.execute(f"UPDATE [{table}] SET [{c}] = (SELECT r.[{c}] FROM runs r "
                                f"WHERE r.run_id = [{table}].run_id) WHERE [{c}] IS NULL")
    finally:
        con.close()


# What the lab writes into its own tree (figures, data): a run that rewrote them ran unchanged code.
OUTPUTS = ("figures", "data")


def git_commit() -> str:
    """HEAD, with "-dirty" when a tracked file other than the lab's own outputs has changed."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=config.PROJ_ROOT, text=True,
                             capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                *(f":(exclude){d}" for d in OUTPUTS)],
                               cwd=config.PROJ_ROOT, text=True, capture_output=True,
                               timeout=10).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def measured_on(rows: pd.DataFrame) -> str:
    """The machine(s) `rows` were measured on, from their own `machine` column (for a caption
    or a table's heading; this machine's label when the rows say none)."""
    got = sorted(rows["machine"].dropna().unique()) if "machine" in rows else []
    return "; ".join(got) if got else machine_label()


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
    """results.db, migrated and in WAL mode. A process that writes holds `writing` instead:
    two notebooks storing at once (two `make run`s, the notebook tier on two workers) must not
    meet inside SQLite's locks, where creating a table on a fresh file can fail at once with
    "database is locked" instead of waiting."""
    path = Path(path or config.RESULTS_DB)
    path.parent.mkdir(parents=True, exist_ok=True)
    migrate(path)
    db = sqlite_utils.Database(sqlite3.connect(path, timeout=60))
    db.execute("PRAGMA journal_mode=WAL")
    return db


@contextlib.contextmanager
def writing(path: Path | str | None = None):
    """results.db opened for writing by one process at a time: an exclusive lock on a file
    beside it (`results.db.lock`) held until the database is closed."""
    path = Path(path or config.RESULTS_DB)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        db = open_db(path)
        try:
            yield db
        finally:
            db.conn.close()


# ------------------------------------------------------------------------------------- replay
# A notebook re-made from a run it stored, measuring nothing: the notebook's `replay` parameter
# names the run (`replay(...)` below, in its setup cell). While it is on, every experiment that
# would measure (sweep.run, baseline.ceiling, buffer's sweeps) returns what that run stored
# instead (`replayed`, `replayed_table`), and nothing is written to results.db or data/runs/.
_REPLAY: dict = {}


class ReplayError(ValueError):
    """A replay that cannot be made: no such run, or not one of this notebook's, or a sweep the
    run did not store (other parameters than it ran with)."""


def replay(notebook: str, run: str | None, scale: str | None = None,
           path: Path | str | None = None) -> str | None:
    """Turn replaying `run` of `notebook` on (None: off) and return its id. `run`: a notebook
    run's id in results.db, or "newest" (the notebook's newest run at `scale`)."""
    _REPLAY.clear()
    if run is None:
        return None
    if not isinstance(run, str) or not run:
        raise ReplayError(f"replay must be a run id of {notebook} in results.db or \"newest\", not {run!r}")
    runs = read_sql("SELECT notebook_run, notebook, scale, started FROM runs WHERE notebook = ?"
                    + ("" if run == "newest" else " AND notebook_run = ?")
                    + (" AND scale = ?" if run == "newest" and scale else "") + " ORDER BY started DESC",
                    [notebook] + ([] if run == "newest" else [run]) + ([scale] if run == "newest" and scale else []),
                    path)
    if runs.empty:
        raise ReplayError(f"replay: no stored run {run!r} of {notebook}"
                          + (f" at {scale} scale" if run == "newest" and scale else "")
                          + f" in {path or config.RESULTS_DB}")
    _REPLAY.update(run=str(runs["notebook_run"].iloc[0]), path=path)
    return _REPLAY["run"]


def replaying() -> str | None:
    """The notebook run being replayed, None when measuring."""
    return _REPLAY.get("run")


# Parameters a replay may give otherwise than the run stored them: its id, and the time its notebook
# was allowed (a budget re-allocated since; the stored points are what ran in the time it had).
REPLAY_IGNORES = ("run_id", "budget_seconds")


def _stored_run(key: str, parameters: dict | None) -> None:
    """Refuse a sweep the replayed run did not store, or stored with other parameters."""
    rows = read_sql("SELECT parameters FROM runs WHERE run_id = ?", [key], _REPLAY.get("path"))
    if rows.empty:
        raise ReplayError(f"replay: run {_REPLAY['run']} stored no {key!r} (was it run with other parameters?)")
    if parameters is not None:
        stored = _in_its_folder(json.loads(rows["parameters"].iloc[0] or "{}"), key)
        given = _in_its_folder(json.loads(json.dumps(parameters, sort_keys=True, default=str)), key)
        differ = [f"{k}: stored {stored.get(k)!r}, given {given.get(k)!r}"
                  for k in sorted(set(stored) | set(given))
                  if k not in REPLAY_IGNORES and stored.get(k) != given.get(k)]
        if differ:
            raise ReplayError(f"replay: {_REPLAY['run']} ran with other parameters — " + "; ".join(differ))


def _in_its_folder(parameters: dict, run: str) -> dict:
    """Parameters with every path inside the run's own folder (…/runs/<run>/, where the lab made
    what the run used: notebook 10's example database) written from that folder on, wherever the
    folder is: a re-making keeps its files in a folder of its own."""
    folder = re.compile(r"[^\s\"']*/runs/" + re.escape(run) + "/")
    return json.loads(folder.sub(f"<runs>/{run}/", json.dumps(parameters, sort_keys=True)))


def typed(rows: pd.DataFrame) -> pd.DataFrame:
    """Stored rows with schema.TYPES' columns in their types, as a live point has them: its flags
    True/False (stored as 0/1), its numbers numbers (a file whose column was made TEXT before it
    was declared there keeps them as text)."""
    out = {}
    for c, kind in schema.TYPES.items():
        if c not in rows or rows[c].dtype == bool:
            continue
        if kind is bool:
            flags = rows[c].map(lambda v: None if v is None or v != v else bool(int(v)))
            out[c] = flags.astype(bool) if flags.notna().all() else flags.astype("boolean")
        elif not pd.api.types.is_numeric_dtype(rows[c]):
            out[c] = pd.to_numeric(rows[c], errors="coerce")
    return rows.assign(**out)


def replayed(key: str, parameters: dict | None = None) -> pd.DataFrame:
    """The headline points the replayed run's sweep `key` stored, in the order it measured them."""
    _stored_run(key, parameters)
    return typed(read_sql("SELECT * FROM points WHERE run_id = ? AND coalesce(headline, 1) = 1 ORDER BY rowid",
                          [key], _REPLAY.get("path")))


def replayed_table(table: str, experiment: str | None = None, parameters: dict | None = None,
                   own: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of `table` the replayed run stored with store_table (its `experiment`), without the
    description store_table added to each, but for the columns of it the rows had of their `own`
    (buffer points name their machine)."""
    key = sweep_id(_REPLAY["run"], experiment)
    _stored_run(key, parameters)
    rows = typed(read_sql(f"SELECT * FROM [{table}] WHERE run_id = ? ORDER BY rowid", [key], _REPLAY.get("path")))
    return rows.drop(columns=[c for c in ("run_id", *schema.DESCRIBED) if c in rows and c not in own])


def store_run(run: dict, points: list[dict], path: Path | str | None = None,
              table: str = "points") -> None:
    """The run's row in `runs` (dicts and lists as JSON), with the lock it ran from, and its
    measurements in `table`, each carrying the run's description (schema.DESCRIBED: `describe`)
    where it does not give its own. Nothing while a replay is on (`replay`)."""
    if replaying():
        return
    missing = [k for k in ("run_id", "notebook", "notebook_run") if not run.get(k)]
    if missing:
        raise ValueError(f"a run needs {', '.join(missing)} (results.describe)")
    run = {**lock(), **{k: None for k in schema.DESCRIBED}, **run}
    points = [{**{k: run[k] for k in schema.DESCRIBED}, **p} for p in points]
    row = {k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
           for k, v in run.items()}
    with writing(path) as db:
        db["runs"].insert(row, pk="run_id", replace=True, alter=True)
    if points:
        store_rows(table, points, path)


def store_rows(table: str, rows: list[dict], path: Path | str | None = None) -> None:
    """Rows of a run's side table (e.g. `crosschecks`), each carrying its run_id; the columns
    schema.TYPES declares get their declared type."""
    if replaying():
        return
    types = {k: t for k, t in schema.TYPES.items() if any(k in r for r in rows)}
    with writing(path) as db:
        if db[table].exists():
            for name, kind in types.items():
                if name not in db[table].columns_dict:
                    db[table].add_column(name, kind)
        db[table].insert_all(rows, alter=True, columns=types)
        db[table].create_index(["run_id"], if_not_exists=True)


def _read(query, path: Path | str | None) -> pd.DataFrame:
    """`query(con)` on results.db (migrated first), or an empty frame when there is none."""
    path = Path(path or config.RESULTS_DB)
    if not path.exists():
        return pd.DataFrame()
    migrate(path)
    con = sqlite3.connect(path)
    try:
        return query(con)
    finally:
        con.close()


def read_sql(sql: str, args: list | tuple = (), path: Path | str | None = None) -> pd.DataFrame:
    """A query's rows from results.db; an empty frame when the file or a table is missing."""
    def query(con):
        try:
            return pd.read_sql_query(sql, con, params=list(args))
        except (sqlite3.OperationalError, pd.errors.DatabaseError):
            return pd.DataFrame()
    return _read(query, path)


def load_table(table: str, run_id: str | None = None, path: Path | str | None = None) -> pd.DataFrame:
    """A table's rows (all, or those of `run_id`: a notebook run, all its experiments, or one
    sweep)."""
    if run_id:
        return read_sql(f"SELECT * FROM [{table}] WHERE notebook_run = ? OR run_id = ?",
                        [run_id, run_id], path)
    return read_sql(f"SELECT * FROM [{table}]", [], path)


def has_table(name: str, path: Path | str | None = None) -> bool:
    """Whether the results database (None: data/results.db) has the table `name` yet (one a
    measurement writes the first time it is made: noise, power)."""
    return not read_sql("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", [name], path).empty


def load_points(path: Path | str | None = None, notebook: str | None = None,
                run_id: str | None = None, headline_only: bool = True) -> pd.DataFrame:
    """Every stored point (each says its notebook, notebook run, experiment, scale, machine,
    commit, generator and CPU pinning), with its run's start, newest runs first. `run_id`: a
    notebook run (all its experiments) or one sweep. `headline_only`: without the points a
    confirming generator replaced (sweep's `confirm`)."""
    def query(con):
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"runs", "points"} <= tables:
            return pd.DataFrame()
        sql = "SELECT p.*, r.started FROM points p JOIN runs r USING (run_id)"
        where, args = [], []
        if notebook:
            where.append("p.notebook = ?"); args.append(notebook)
        if run_id:
            where.append("(p.notebook_run = ? OR p.run_id = ?)"); args += [run_id, run_id]
        columns = {r[1] for r in con.execute("PRAGMA table_info(points)")}
        if headline_only and "headline" in columns:  # points from before the flag are headline
            where.append("coalesce(p.headline, 1) = 1")
        if where:
            sql += " WHERE " + " AND ".join(where)
        return pd.read_sql_query(sql + " ORDER BY r.started DESC", con, params=args)
    return _read(query, path)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def elapsed(t0: float) -> float:
    return round(time.perf_counter() - t0, 3)


def store_table(run_id: str, notebook: str, table: str, rows: pd.DataFrame,
                parameters: dict | None = None, path: Path | str | None = None,
                experiment: str | None = None) -> None:
    """A run row plus its measurements in another table (e.g. `buffer_points`), each row
    describing itself (`describe`), and a CSV copy under data/runs/<run_id>/. `run_id`: the
    notebook run; `experiment`: which of its tables, when it stores several. Nothing while a
    replay is on (`replay`)."""
    if replaying():
        return
    key = sweep_id(run_id, experiment)
    described = describe(notebook, run_id, experiment, parameters)
    run = {"run_id": key, **described, "started": now_iso(), "finished": now_iso(),
           "parameters": parameters or {}, "machine_info": machine(), "versions": versions(),
           "points": len(rows)}
    records = [{"run_id": key, **{k: (None if pd.isna(v) else v) for k, v in r.items()}, **described}
               for r in rows.to_dict("records")]
    store_run(run, records, path, table)
    out = (Path(path).parent / "runs" if path else config.RUNS_DIR) / key
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / f"{table}.csv", index=False)
