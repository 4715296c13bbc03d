"""The committed reference run read back: the tables sqlitelab.report.reference_run exported into
data/reference-run/, each as a DataFrame, `points` with the columns of `results.load_points`.
The README's rows (sqlitelab.readme) and compare's `reference:<NN>` side read it.

    load()["points"]     # the headline points of the reference run, with their run's `started`

Reading needs none of what writes it: the exporter renders each run's page with nbconvert,
whose notebook validator takes seconds to import, and a notebook's kernel imports compare.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sqlitelab.core import config

REFERENCE_DIR = config.REFERENCE_RUN_DIR
# The tables exported, each filtered to the exported notebook runs.
TABLES = ("runs", "points", "buffer_points", "buffer_slow_sync", "ceilings", "crosschecks")
# The lab's power checks on the exported runs' machine, and any other machine's added to them
# (report.power's rows: not a run's own rows; reference_run.add_power).
POWER = "power"
# The generator calibrations the exported runs used (runs.calibrations: stored once per machine,
# not per run): their flags' thresholds and HTTP alone, wrk's rate on /hello.
CALIBRATIONS = "calibrations"
# How long the newest run of each notebook at the scale took, as papermill timed its executed
# notebook (reference_run.timings: every notebook's, not only the exported ones'; taken before
# the exported runs' pages are re-made, which a re-making's own time would replace).
TIMINGS = "timings"
# What each file that is no table of results.db holds (the export's README; schema.TABLES
# describes the others).
DESCRIPTIONS = {TIMINGS: "How long the newest run of each notebook at the scale took, as papermill "
                         "timed its executed notebook, seconds."}


def machine_of(x: dict) -> str | None:
    """The machine the exported runs ran on (`load`'s manifest), None in an export without runs."""
    runs = x.get("manifest", {}).get("runs") or []
    return runs[0].get("machine") if runs else None


def load(export_dir: Path | None = None) -> dict[str, pd.DataFrame]:
    """The exported tables by name, and `manifest` (a dict). `points` carries its run's `started`,
    as results.load_points gives it, and only the headline points (those no generator replaced)."""
    d = Path(export_dir or REFERENCE_DIR)
    if not (d / "manifest.json").exists():
        raise FileNotFoundError(f"no reference run in {d} (no manifest.json): export one with "
                                f"`python -m sqlitelab.report.reference_run --scale seed`")
    out: dict = {"manifest": json.loads((d / "manifest.json").read_text())}
    for table in (*TABLES, POWER, CALIBRATIONS, TIMINGS):
        path = d / f"{table}.csv"
        # .copy(): one block per dtype, not one per column as read_csv leaves a wide file
        out[table] = pd.read_csv(path, low_memory=False).copy() if path.exists() else pd.DataFrame()
    pts = out["points"]
    if len(pts):
        started = out["runs"].groupby("run_id")["started"].min()
        pts = pts.assign(started=pts["run_id"].map(started))
        if "headline" in pts:
            pts = pts[pts["headline"].fillna(1).astype(int) == 1].reset_index(drop=True)
        out["points"] = pts.copy()
    return out
