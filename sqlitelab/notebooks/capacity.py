"""Notebook 06, capacity: how many daily active users, honestly? The articles' napkin math
over the newest runs of the other notebooks (those whose module is IN_COLLECTION), so a batch runs
it after them (READS_THE_OTHERS). Everything that is this notebook's, declared once.

Its code: which run of each notebook it reads (collection, latest_runs), the estimate per stack and
workload at a latency objective, the reference loads, the daily-users table and chart frame, and
the findings.
"""
from __future__ import annotations

from types import ModuleType

import pandas as pd

from sqlitelab.core import intervals, results
from sqlitelab.infra.servers import profile_title, stack_title
from sqlitelab.load.scenarios import scenario_title
from sqlitelab.report import analysis, capacity, findings, reference_tables, summaries
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY


# What each constant means: sqlitelab.studies.declarations.
ID = "06-capacity"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "capacity"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "How many daily active users — at a latency objective, not the naive peak"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "capacity"

SCALES: dict[str, dict] = {
    "quick": {"slo_p99_ms": 100.0},
    "seed": {"slo_p99_ms": 100.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 8, "seed": 10}  # seed: 5.2 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (declarations.experiment_title): none: it reads the other notebooks' runs.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = True

SMOKE: dict = {}
STORES: str | None = None

READING: dict[str, str] = {
    "capacity":
        "In each row, the line from a stack's dot to its tick is what the latency objective costs "
        "against the naive peak, and the daily users at the right are the dot's (SQLite only: "
        "Postgres is notebook 07's question, its rows in the tables above).",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002, 004", "the articles' napkin math", (
    Detail("peak hours", "seed 000: a day's requests packed into 4 peak hours (1 M/day ≈ 70/s)",
           "param:peak_hours", expect=4, why="set by the notebook's peak_hours"),
    Detail("requests per user per day", "seed 000: 35 writes", "param:requests_per_user",
           expect=35, why="set by the notebook's requests_per_user"),
    Detail("seconds between requests", "seed 002: one request per active user every 10 s",
           "param:seconds_between_requests", expect=10,
           why="set by the notebook's seconds_between_requests"),
    Detail("capacity", "the peak requests/s at any latency (all three articles)",
           lambda r: f"the best level with p99 ≤ {r.param('slo_p99_ms'):g} ms and no errors",
           expect=None, why="a peak reached with seconds of queueing is not capacity; the naive "
                            "peak is shown beside it"),
    Detail("which measurements", "each article's own runs, on its own hardware",
           lambda r: (f"the newest {r.param('scale')!r} run of each load notebook "
                      + ("in the committed reference run" if r.param("source") == "reference" else "on this machine")),
           expect=None, why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

# Reference loads the articles compare against (requests per second), with their source.
REFERENCE_LOADS = {
    "Twitter 2007": (600, "seed 000, via Nate Berkopec (2015)"),
    "Shopify 2013": (833, "seed 000, via Nate Berkopec (2015)"),
    "Yahoo (3.6 B visits/month)": (None, "seed 004, SimilarWeb; 3.6e9 visits over 30 days"),
    "Twitter tweets/s": (6000, "seed 004: 'on average users post 6K tweets per second'"),
}


def reference_loads() -> pd.DataFrame:
    rows = []
    for name, (rps, source) in REFERENCE_LOADS.items():
        if rps is None:
            rps = capacity.rps_from_monthly(3.6e9)
        rows.append({"name": name, "rps": rps, "source": source})
    return pd.DataFrame(rows)


def collection(studies: dict[str, ModuleType]) -> list[str]:
    """The notebooks whose measurements notebook 06 reads (each module's IN_COLLECTION) of
    `studies` (every notebook's module by ID, sqlitelab.notebooks.studies)."""
    return [i for i, s in studies.items() if s.IN_COLLECTION]


# `database`: sqlite, or postgres (07); points stored before issue 15 have none and are SQLite's
GROUP = ("notebook", "experiment", "server", "profile", "scenario", "database")


# Where 06 reads its points (its `source`): the lab's results store (data/results.db), or the
# committed reference run's export (data/reference-run/, sqlitelab.report.reference_tables), so
# that the committed seed figure is re-made from what the repository keeps.
SOURCES = ("results", "reference")


def stored_points(source: str = "results") -> pd.DataFrame:
    """Every stored point `source` (SOURCES) holds, as results.load_points gives them."""
    if source == "results":
        return results.load_points()
    if source == "reference":
        return reference_tables.load()["points"]
    raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")


def latest_runs(points: pd.DataFrame, studies: dict[str, ModuleType], scale: str | None = None,
                notebooks: list[str] | tuple[str, ...] | None = None) -> pd.DataFrame:
    """The points of each notebook's newest run — every experiment of that run, nothing of
    older runs. `scale` keeps only runs made at that scale (ad-hoc sweeps have none);
    `notebooks` defaults to the collection's load notebooks (`collection(studies)`)."""
    if points.empty:
        return points
    wanted = list(notebooks) if notebooks is not None else collection(studies)
    pts = points[points["notebook"].isin(wanted)].copy()
    if scale is not None:
        pts = pts[pts["scale"] == scale]
    if pts.empty:
        return pts
    first = pts.groupby(["notebook", "notebook_run"])["started"].min().reset_index()
    newest = first.loc[first.groupby("notebook")["started"].idxmax(), "notebook_run"]
    return pts[pts["notebook_run"].isin(set(newest))].reset_index(drop=True)


def estimate(points: pd.DataFrame, slo_p99_ms: float = 100.0, requests_per_user: float = 35,
             seconds_between_requests: float = 10, peak_hours: float = 4) -> pd.DataFrame:
    """`capacity_at_slo` per notebook, experiment, server, profile and scenario, with daily
    active users and concurrently active users from both the naive peak and the SLO capacity,
    and the SLO capacity's daily users at the ends of its 95 % interval (`slo_dau_low`,
    `slo_dau_high`: NaN for a level of one run)."""
    capacity.positive(requests_per_user=requests_per_user, peak_hours=peak_hours,
              seconds_between_requests=seconds_between_requests)
    if points.empty:
        return pd.DataFrame(columns=list(GROUP) + ["peak_rps", "slo_rps"])
    pts = points.assign(experiment=points["experiment"].fillna(""),
                        database=(points["database"].fillna("sqlite") if "database" in points
                                  else "sqlite"))
    pts = pts[~analysis.open_loop(pts)]  # levels of users; open-loop rates are open_loop_capacity's
    if pts.empty:
        return pd.DataFrame(columns=list(GROUP) + ["peak_rps", "slo_rps"])
    cap = capacity.capacity_at_slo(pts, slo_p99_ms, by=GROUP)
    for col in ("peak", "slo"):
        rps = cap[f"{col}_rps"]
        cap[f"{col}_dau"] = [capacity.daily_active_users(r, requests_per_user, peak_hours) if r > 0 else 0.0
                             for r in rps]
        cap[f"{col}_active_users"] = [capacity.active_users(r, seconds_between_requests) if r > 0 else 0.0
                                      for r in rps]
    per_rps = capacity.daily_active_users(1.0, requests_per_user, peak_hours)  # DAU is proportional to rps
    cap["slo_dau_low"], cap["slo_dau_high"] = cap["slo_rps_low"] * per_rps, cap["slo_rps_high"] * per_rps
    return cap.sort_values(["notebook", "experiment", "scenario", "slo_rps"],
                           ascending=[True, True, True, False]).reset_index(drop=True)


def headline(cap: pd.DataFrame, studies: dict[str, ModuleType]) -> pd.DataFrame:
    """The rows that reproduce an article (each notebook's HEADLINE_EXPERIMENTS, of `studies`),
    the best profile of each server per notebook and scenario."""
    if cap.empty:
        return cap
    headlines = {i: s.HEADLINE_EXPERIMENTS for i, s in studies.items()  # the others: "beyond" sweeps
                 if s.HEADLINE_EXPERIMENTS is not None}
    keep = [e in headlines.get(n, {e}) for n, e in zip(cap["notebook"], cap["experiment"])]
    h = cap[keep]
    if h.empty:
        return h
    by = ["notebook", "scenario", "server"] + (["database"] if "database" in h else [])
    best = h.loc[h.groupby(by)["slo_rps"].idxmax()]
    return best.sort_values(by).reset_index(drop=True)


def chart_frame(cap: pd.DataFrame, slo_p99_ms: float, studies: dict[str, ModuleType]) -> pd.DataFrame:
    """Long form for plots.capacity_chart (a block of rows per workload, a row per stack): naive
    peak and SLO capacity per headline row on SQLite, with its notebook, scenario, server and
    profile; a workload measured by several notebooks (07 and 08 measure 03's and 05's again for
    their own questions) from the first of them. `generator_bound` and `generator_influenced` mark
    lower bounds; `rps_low`, `rps_high`: the capacity's 95 % interval over its level's runs (NaN
    for one run, and for the naive peak). Postgres is 07's question, in its own figures and in
    the tables here."""
    h = headline(cap, studies)
    if len(h):
        h = h[h["database"].fillna("sqlite") == "sqlite"] if "database" in h else h
        owner = h.groupby("scenario")["notebook"].min()
        h = h[h["notebook"] == h["scenario"].map(owner)]
    if h.empty:
        return pd.DataFrame({"what": ["(no points)"], "kind": ["naive peak"], "rps": [0.0],
                             "notebook": [None], "scenario": [None], "server": [None], "profile": [None],
                             "generator_bound": [False], "generator_influenced": [False]})
    what = h["scenario"] + " · " + h["server"] + " (" + h["profile"] + ")"
    ids = {"what": what, "notebook": h["notebook"], "scenario": h["scenario"], "server": h["server"],
           "profile": h["profile"],
           "database": h["database"] if "database" in h else "sqlite"}
    return pd.concat([
        pd.DataFrame({**ids, "kind": "naive peak", "rps": h["peak_rps"],
                      "generator_bound": h["peak_limit"] == "generator-bound",
                      "generator_influenced": h["peak_limit"] == "generator-influenced"}),
        pd.DataFrame({**ids, "kind": f"p99 ≤ {slo_p99_ms:g} ms", "rps": h["slo_rps"],
                      "rps_low": h["slo_rps_low"], "rps_high": h["slo_rps_high"],
                      "generator_bound": h["slo_limit"] == "generator-bound",
                      "generator_influenced": h["slo_limit"] == "generator-influenced"}),
    ], ignore_index=True)


def users_axis(requests_per_user: float = 35, peak_hours: float = 4) -> tuple[float, str]:
    """plots.capacity_chart's `users`: daily active users per request/s, and what that assumes."""
    return (capacity.daily_active_users(1.0, requests_per_user, peak_hours),
            f"{requests_per_user:g} requests each, in {peak_hours:g} peak hours")


PER_USER = (1, 10, 35, 100, 1000)  # requests per user per day, the columns of dau_table


def dau_table(cap: pd.DataFrame, refs: pd.DataFrame, studies: dict[str, ModuleType],
              peak_hours: float = 4, per_user=None) -> pd.DataFrame:
    """Daily active users for each headline SLO capacity (its stack and workload) and each
    reference load, at each number of requests per user per day (one column each): the napkin
    maths as a table to read across — DAU is capacity × peak seconds ÷ requests per user, so
    every row scales the same way."""
    per_user = list(PER_USER if per_user is None else per_user)
    rows = []
    h = headline(cap, studies)
    for r in (h[h["slo_rps"] > 0].itertuples() if len(h) else []):
        rows.append({"what": f"{stack_title(r.server)} · {scenario_title(r.scenario)}", "capacity_rps": r.slo_rps,
                     **{f"dau_at_{k:g}": capacity.daily_active_users(r.slo_rps, k, peak_hours) for k in per_user}})
    for r in refs.itertuples():
        rows.append({"what": f"{r.name} (reference)", "capacity_rps": r.rps,
                     **{f"dau_at_{k:g}": capacity.daily_active_users(r.rps, k, peak_hours) for k in per_user}})
    return pd.DataFrame(rows, columns=["what", "capacity_rps"] + [f"dau_at_{k:g}" for k in per_user])


def capacity_findings(cap: pd.DataFrame, studies: dict[str, ModuleType], requests_per_user: float = 35,
                      seconds_between_requests: float = 10) -> str:
    """One line per headline row: SLO capacity vs the peak and what it means in users."""
    h = headline(cap, studies)
    if h.empty:
        return "No points: nothing to estimate yet (run notebooks 01–05 at this scale first)."
    lines = []
    for r in h.sort_values("slo_rps", ascending=False).itertuples():
        who = (f"**{stack_title(r.server)} · {scenario_title(r.scenario)}** "
               f"({profile_title(r.profile)}; notebook {r.notebook[:2]})")
        if not findings.finished(r.peak_rps):
            lines.append(f"- {who}: at every level, {findings.STALLED}: no capacity measured.")
            continue
        if not r.slo_rps > 0:
            lines.append(f"- {who}: no level met the latency objective with no errors (a peak of "
                         f"{summaries.once(r.peak_rps)} req/s): no daily users to count on.")
            continue
        cut = 1 - r.slo_rps / r.peak_rps
        bound = f" ({r.slo_limit}: at least this)" if r.slo_lower_bound else ""
        iv, dau = capacity.slo_interval(r._asdict()), capacity.slo_interval(r._asdict(), "slo_dau")
        active = intervals.scaled(iv, r.slo_active_users / r.slo_rps)  # proportional to it (estimate)
        said = intervals.shown if iv.bounded else intervals.rounded
        lines.append(f"- {who}: {said(dau)} DAU at {requests_per_user:g} requests each, from "
                     f"{said(iv)} req/s within the latency objective{bound} ("
                     + ("the naive peak itself" if cut <= 0 else
                        f"{cut:.0%} below the naive peak of {summaries.once(r.peak_rps)}") + "); "
                     f"{intervals.rounded(active)} active users at one request per "
                     f"{seconds_between_requests:g} s" + ("." if iv.bounded else f" ({iv.method})."))
    return "\n".join(lines)
