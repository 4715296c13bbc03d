"""One row per article for the README: what the article found, and what the reference run shows —
every number read from the article's published table (sqlitelab/report/reference/) or from the
exported run (sqlitelab.report.reference_run), every verdict word from sqlitelab.report.claims.

What the rows share is here; each row is its notebook's `summary(study, tables)`
(sqlitelab.notebooks), which returns (the article, here) as two Markdown cells.
"""
from __future__ import annotations

import json
from types import ModuleType

import pandas as pd

from sqlitelab.core import intervals, layout
from sqlitelab.report import analysis

Tables = dict  # reference_tables.load(): table name -> DataFrame
NOT_IN_RUN = "not in the reference run"


def points(study: ModuleType, x: Tables) -> pd.DataFrame:
    """The notebook's headline points in the export (the experiments that reproduce its article)."""
    pts = x["points"]
    if pts.empty:
        return pts
    pts = pts[pts["notebook"] == study.ID].assign(experiment=lambda d: d["experiment"].fillna(""))
    if study.HEADLINE_EXPERIMENTS is not None:
        pts = pts[pts["experiment"].isin(study.HEADLINE_EXPERIMENTS)]
    return pts.reset_index(drop=True)


def experiment_points(study: ModuleType, x: Tables, experiment: str) -> pd.DataFrame:
    """The headline points of one experiment of the notebook's run in the export (empty: none)."""
    pts = x["points"]
    if pts.empty:
        return pts
    pts = pts[(pts["notebook"] == study.ID) & (pts["experiment"].fillna("") == experiment)]
    if "headline" in pts:
        pts = pts[pts["headline"].fillna(1).astype(bool)]
    return pts.reset_index(drop=True)


def parameter(study: ModuleType, x: Tables, name: str, default=None):
    """A parameter the notebook's run stored (its `params`), or `default` where the run has none."""
    runs = x.get("runs", pd.DataFrame())
    runs = runs[runs["notebook"] == study.ID] if len(runs) else runs
    for raw in runs.get("parameters", []):
        value = json.loads(raw).get(name) if isinstance(raw, str) else None
        if value is not None:
            return value
    return default


def server_cores(study: ModuleType, x: Tables) -> str:
    """What the notebook's run gave its servers, from its runs' `server_cpus`: "one server core",
    "2 server cores", or "every core (servers not pinned)"."""
    runs = x.get("runs", pd.DataFrame())
    runs = runs[runs["notebook"] == study.ID] if len(runs) else runs
    n = layout.pinned_count(runs.get("server_cpus", pd.Series(dtype=object)))
    return "every core (servers not pinned)" if not n else "one server core" if n == 1 else f"{n} server cores"


def ceiling(study: ModuleType, x: Tables) -> dict | None:
    """The raw-SQLite ceiling the notebook's run measured on the server's core, or None."""
    c = x.get("ceilings", pd.DataFrame())
    c = c[c["notebook"] == study.ID] if len(c) else c
    return c.iloc[0].to_dict() if len(c) else None


def repeats(pts: pd.DataFrame) -> int:
    """The most runs any level of `pts` had (1 where no point says)."""
    return int(pts["repeat"].max()) if "repeat" in pts and len(pts) else 1


def run_shape(pts: pd.DataFrame) -> str:
    """"3 × 10 s per level", "one 10-s window per level", or the windows' range where a level
    ran until a count of requests (its window then varies)."""
    reps = repeats(pts)
    w = pts["window_s"] if "window_s" in pts and len(pts) else pd.Series([float("nan")])
    if w.max() > 1.05 * w.min():
        window = f"{w.min():.1f}–{w.max():.1f}-s windows"
        return f"{reps} × {window} per level" if reps > 1 else f"{window}, one per level"
    return f"{reps} × {w.median():g} s per level" if reps > 1 else f"one {w.median():g}-s window per level"


def once(value: float, unit: str = "") -> str:
    """A number measured in one window (no repeats, so no interval): at the three significant
    figures such a number keeps (intervals.decimals), not every digit the window happened to give."""
    return intervals.rounded(intervals.mean_interval([value]), unit)


def sentences(parts: list[str]) -> str:
    """Parts joined as sentences, each begun with a capital."""
    return " ".join(p[0].upper() + p[1:] + ("" if p.endswith(".") else ".") for p in parts if p)


def limit(row) -> str:
    row = row._asdict() if hasattr(row, "_asdict") else row  # itertuples' rows
    return f" ({analysis.limit_note(row)}: at least this)" if analysis.limited(row) else ""


