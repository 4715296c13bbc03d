"""The committed reference run: the newest run of each notebook at a scale, exported from
data/results.db into a folder of CSV files that the repository keeps (data/reference-run/), with
the method tables and the reports of those runs beside them. The README's result tables are
generated from it (sqlitelab.readme), and anyone can re-analyse it with the lab's own
functions: `reference_tables.load(dir)["points"]` has the columns of `results.load_points`.

    python -m sqlitelab.report.reference_run --scale seed      # export (then: python -m sqlitelab.readme)

Every row of every exported table belongs to one of the exported notebook runs (its
`notebook_run`); the points keep every column but the encoded histograms, so a percentile is the
one the run stored, never recomputed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pandas as pd

from sqlitelab.core import config, schema
from sqlitelab.report import analysis, publish, reference_tables

# The columns left out of the tables exported (reference_tables.TABLES): encoded histograms
# (binary, and every percentile they give is stored beside them).
LEFT_OUT = {"points": ("histogram",)}
# The order rows are written in (so that a re-export of the same rows is the same file).
ORDER = ("notebook", "notebook_run", "run_id", "experiment", "server", "profile", "scenario", "database",
         "users", "rate", "repeat", "generator", "method", "variant", "rows_per_txn", "total")


def _has(con: sqlite3.Connection, table: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", [table]).fetchone() is not None


def _rows(con: sqlite3.Connection, table: str, notebook_runs: list[str]) -> pd.DataFrame:
    if not _has(con, table):
        return pd.DataFrame()
    cols = [r[1] for r in con.execute(f"PRAGMA table_info([{table}])") if r[1] not in LEFT_OUT.get(table, ())]
    if "notebook_run" not in cols:
        return pd.DataFrame()
    marks = ", ".join("?" * len(notebook_runs))
    df = pd.read_sql_query(f"SELECT {', '.join(f'[{c}]' for c in cols)} FROM [{table}] "
                           f"WHERE notebook_run IN ({marks})", con, params=notebook_runs)
    order = [c for c in ORDER if c in df.columns]
    return df.sort_values(order, kind="mergesort").reset_index(drop=True) if order else df


def _power(con: sqlite3.Connection, machines: list[str] | None = None) -> pd.DataFrame:
    """The power checks stored for `machines` (report.power's rows) that carry the band they
    judged by: one row per pair of runs, check and metric (the newest judgement of it), oldest
    check first."""
    if not _has(con, "power"):
        return pd.DataFrame()
    if machines is None:  # every machine's
        return _judgements(pd.read_sql_query("SELECT * FROM power", con))
    marks = ", ".join("?" * len(machines))
    df = pd.read_sql_query(f"SELECT * FROM power WHERE machine IN ({marks})", con, params=machines)
    return _judgements(df)


def _judgements(df: pd.DataFrame) -> pd.DataFrame:
    """Power rows that carry the band they judged by: the newest judgement of each pair of runs,
    check and metric, oldest check first."""
    if "band" not in df or df.empty:
        return pd.DataFrame()
    df = df[df["band"].notna()].sort_values("measured", kind="mergesort")
    df = df.drop_duplicates(["run_a", "run_b", "check", "metric"], keep="last")
    # a judgement's rows share their `measured`: A/A before held, throughput before p99
    return df.sort_values(["measured", "check", "metric"], ascending=[True, True, False],
                          kind="mergesort").reset_index(drop=True)


def _calibrations(con: sqlite3.Connection, runs: pd.DataFrame) -> pd.DataFrame:
    """The generator calibrations the exported `runs` rows name (analysis.calibration_ids),
    oldest first."""
    ids = analysis.calibration_ids(runs)
    if not ids or not _has(con, "calibrations"):
        return pd.DataFrame()
    marks = ", ".join("?" * len(ids))
    return pd.read_sql_query(f"SELECT * FROM calibrations WHERE calib_id IN ({marks}) "
                             "ORDER BY started, calib_id", con, params=ids)


def export(runs: list[publish.Run], out_dir: Path | None = None, db: Path | None = None,
           runs_dir: Path | None = None) -> dict[str, Path]:
    """Write `runs` (publish.newest) into `out_dir`: one CSV per table, `methods/<notebook>.csv`,
    `reports/` and `manifest.json` (what was exported, from which runs). Refuses no runs."""
    if not runs:
        raise ValueError("no finished run to export: run `make seed` (or `make run`) first")
    out = Path(out_dir or reference_tables.REFERENCE_DIR)
    db = Path(db or config.RESULTS_DB)
    runs_dir = Path(runs_dir or config.RUNS_DIR)
    ids = [r.run_id for r in runs]
    for old in ("methods", "reports"):
        shutil.rmtree(out / old, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        frames = {table: _rows(con, table, ids) for table in reference_tables.TABLES}
        machines = sorted({str(r.provenance.get("machine")) for r in runs})
        kept = out / f"{reference_tables.POWER}.csv"  # the checks exported before: not a run's own rows
        frames[reference_tables.POWER] = _judgements(pd.concat(
            [pd.read_csv(kept) if kept.is_file() else pd.DataFrame(), _power(con, machines)], ignore_index=True))
        frames[reference_tables.CALIBRATIONS] = _calibrations(con, frames["runs"])
        for table, df in frames.items():
            path = out / f"{table}.csv"
            path.unlink(missing_ok=True)
            if len(df):
                df.to_csv(path, index=False)
                written[table] = path
    finally:
        con.close()
    kept = out / f"{reference_tables.TIMINGS}.csv"  # written before the pages are re-made (add_timings)
    if kept.exists():
        written[reference_tables.TIMINGS] = kept
    for r in runs:
        method = runs_dir / r.run_id / "method.csv"
        if method.exists():
            (out / "methods").mkdir(exist_ok=True)
            shutil.copyfile(method, out / "methods" / f"{r.notebook}.csv")
    store = "the CSV files of `data/reference-run/` (the run's export)"
    done = [(r, publish.write(r, out / "reports", store)) for r in runs]
    publish.index(done, out / "reports")
    manifest = {"scale": sorted({r.scale for r in runs}),
                "runs": [{"notebook": r.notebook, "run_id": r.run_id, "started": r.started,
                          "git_commit": r.provenance.get("git_commit"), "machine": r.provenance.get("machine")}
                         for r in runs],
                "tables": {t: len(pd.read_csv(p)) for t, p in written.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    written["manifest"] = out / "manifest.json"
    (out / "README.md").write_text(describe(manifest))
    written["readme"] = out / "README.md"
    return written


def add_power(out_dir: Path | None = None, db: Path | None = None) -> Path:
    """The export's power.csv with the power checks stored in `db` added, those of every machine
    (those it has kept; a check judged again, its newest judgement): a check measured after the
    run was exported joins it without the run's being exported again, and one measured on another
    machine stands beside the run's machine's, naming its machine wherever it is shown."""
    out = Path(out_dir or reference_tables.REFERENCE_DIR)
    manifest = json.loads((out / "manifest.json").read_text())
    con = sqlite3.connect(f"file:{Path(db or config.RESULTS_DB)}?mode=ro", uri=True)
    try:
        new = _power(con)
    finally:
        con.close()
    path = out / f"{reference_tables.POWER}.csv"
    old = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    both = _judgements(pd.concat([old, new], ignore_index=True))
    both.to_csv(path, index=False)
    manifest["tables"][reference_tables.POWER] = len(both)  # and the export's README, which counts it
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "README.md").write_text(describe(manifest))
    return path


def timings(scale: str = "seed", runs_dir: Path | None = None, db: Path | None = None) -> pd.DataFrame:
    """How long the newest run of each notebook at `scale` took, as papermill timed its executed
    notebook (its start, end and duration), with its commit and machine: one row per notebook,
    in their order. Refuses a run whose executed notebook is a re-making (replay): its time is
    the re-making's, not the run's (take the timings before the exported pages are re-made)."""
    rows = []
    for r in publish.newest(scale, None, runs_dir=runs_dir, db=db):
        pm = publish.papermill_of(r.executed)
        if pm.get("parameters", {}).get("replay"):
            raise ValueError(f"{r.executed} is a re-making of its run (replay): its time is not the run's; "
                             "take the timings before the pages are re-made")
        rows.append({"notebook": r.notebook, "run_id": r.run_id, "scale": r.scale,
                     "started": pm.get("start_time"), "finished": pm.get("end_time"),
                     "seconds": round(float(pm["duration"]), 1),
                     "git_commit": r.provenance.get("git_commit"),
                     "machine": r.provenance.get("machine")})
    if not rows:
        raise ValueError(f"no finished {scale}-scale run to time: run `make {scale}` first")
    return pd.DataFrame(rows)


def add_timings(scale: str = "seed", out_dir: Path | None = None, db: Path | None = None,
                runs_dir: Path | None = None) -> Path:
    """The export's timings.csv written from the newest run of each notebook at `scale`
    (timings), and counted in its manifest when there is one."""
    out = Path(out_dir or reference_tables.REFERENCE_DIR)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{reference_tables.TIMINGS}.csv"
    timings(scale, runs_dir, db).to_csv(path, index=False)
    if (out / "manifest.json").exists():
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["tables"][reference_tables.TIMINGS] = len(pd.read_csv(path))
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        (out / "README.md").write_text(describe(manifest))
    return path


def describe(manifest: dict) -> str:
    """The export's README: what it is, which runs, each file, how to read it back."""
    lines = ["# The reference run", "",
             "Written by `python -m sqlitelab.report.reference_run` (do not edit by hand): the newest "
             f"{'/'.join(manifest['scale'])}-scale run of each notebook, exported from `data/results.db`. "
             "The README's tables are generated from it (`python -m sqlitelab.readme`).", "",
             "| notebook | run | commit | machine |", "|---|---|---|---|"]
    lines += [f"| {r['notebook']} | `{r['run_id']}` | `{r['git_commit']}` | {r['machine']} |" for r in manifest["runs"]]
    lines += ["", "| file | rows | what |", "|---|---:|---|"]
    what = {**{t: d.get("description", "") for t, d in schema.TABLES.items()}, **reference_tables.DESCRIPTIONS}
    lines += [f"| `{t}.csv` | {n:,} | {' '.join(what.get(t, '').split())} |"
              for t, n in manifest["tables"].items()]
    lines += ["| `methods/<notebook>.csv` | | each notebook's method table: the article's details beside the run's |",
              "| `reports/` | | each notebook run as a page without code (`index.md`) |", "",
              "Every column is described in `sqlitelab/core/schema.py` (and in `make browse`); the points "
              "leave out the encoded histograms. Read it back "
              "with the lab's own functions: `sqlitelab.report.reference_tables.load()` gives each table as a "
              "DataFrame, `points` with the columns of `results.load_points` (headline points only).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.report.reference_run",
                                 description="Export the newest run of each notebook as the committed reference run.")
    ap.add_argument("--scale", choices=["quick", "seed"], default="seed")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes (default: every notebook with a finished run)")
    ap.add_argument("--out", type=Path, default=None, help=f"default: {reference_tables.REFERENCE_DIR}")
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--runs-dir", type=Path, default=None)
    ap.add_argument("--power", action="store_true",
                    help="only add the power checks stored in --db to the export's power.csv (nothing else exported)")
    ap.add_argument("--timings", action="store_true",
                    help="only write how long the newest run of each notebook at --scale took (timings.csv), "
                         "before the exported runs' pages are re-made")
    args = ap.parse_args(argv)
    if args.power:
        print(f"power            {add_power(args.out, args.db)}")
        return 0
    if args.timings:
        try:
            print(f"timings          {add_timings(args.scale, args.out, args.db, args.runs_dir)}")
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    runs = publish.newest(args.scale, args.only, runs_dir=args.runs_dir, db=args.db)
    try:
        written = export(runs, args.out, args.db, args.runs_dir)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    for name, path in written.items():
        print(f"{name:<16} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
