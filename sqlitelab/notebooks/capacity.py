"""Notebook 06, capacity: which run of each notebook it reads (COLLECTION, latest_runs), the
estimate per stack and workload at a latency objective, the reference loads, the daily-users
table and chart frame, and the findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.report import analysis, capacity, findings
from sqlitelab.studies import registry


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


# The notebooks whose measurements notebook 06 reads (each study's IN_COLLECTION), and for each
# the experiments that reproduce its article (its HEADLINE_EXPERIMENTS; the others are the
# "beyond" sweeps: write shares, write paths...). Read from the studies, never typed here.
COLLECTION = tuple(s.ID for s in registry.studies() if s.IN_COLLECTION)


HEADLINE_EXPERIMENTS = {s.ID: s.HEADLINE_EXPERIMENTS for s in registry.studies()
                        if s.HEADLINE_EXPERIMENTS is not None}


# `database`: sqlite, or postgres (07); points stored before issue 15 have none and are SQLite's
GROUP = ("notebook", "experiment", "server", "profile", "scenario", "database")


def latest_runs(points: pd.DataFrame, scale: str | None = None,
                notebooks: list[str] | tuple[str, ...] | None = None) -> pd.DataFrame:
    """The points of each notebook's newest run — every experiment of that run, nothing of
    older runs. `scale` keeps only runs made at that scale (ad-hoc sweeps have none);
    `notebooks` defaults to the collection's load notebooks."""
    if points.empty:
        return points
    wanted = list(notebooks) if notebooks is not None else list(COLLECTION)
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
    active users and concurrently active users from both the naive peak and the SLO capacity."""
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
    return cap.sort_values(["notebook", "experiment", "scenario", "slo_rps"],
                           ascending=[True, True, True, False]).reset_index(drop=True)


def headline(cap: pd.DataFrame) -> pd.DataFrame:
    """The rows that reproduce an article (see HEADLINE_EXPERIMENTS), the best profile of
    each server per notebook and scenario."""
    if cap.empty:
        return cap
    keep = [e in HEADLINE_EXPERIMENTS.get(n, {e}) for n, e in zip(cap["notebook"], cap["experiment"])]
    h = cap[keep]
    if h.empty:
        return h
    by = ["notebook", "scenario", "server"] + (["database"] if "database" in h else [])
    best = h.loc[h.groupby(by)["slo_rps"].idxmax()]
    return best.sort_values(by).reset_index(drop=True)


def chart_frame(cap: pd.DataFrame, slo_p99_ms: float) -> pd.DataFrame:
    """Long form for plots.capacity_chart (one panel per workload, one bar per stack): naive
    peak and SLO capacity per headline row, with its notebook, scenario, server and profile;
    `generator_bound` and `generator_influenced` mark lower bounds."""
    h = headline(cap)
    if h.empty:
        return pd.DataFrame({"what": ["(no points)"], "kind": ["naive peak"], "rps": [0.0],
                             "notebook": [None], "scenario": [None], "server": [None], "profile": [None],
                             "generator_bound": [False], "generator_influenced": [False]})
    what = h["scenario"] + " · " + h["server"] + " (" + h["profile"] + ")"
    if "database" in h:  # 07's Postgres rows, named as such
        what = what + h["database"].map(lambda d: "" if d in (None, "sqlite") else f" · {d}")
    ids = {"what": what, "notebook": h["notebook"], "scenario": h["scenario"], "server": h["server"],
           "profile": h["profile"],
           "database": h["database"] if "database" in h else "sqlite"}
    return pd.concat([
        pd.DataFrame({**ids, "kind": "naive peak", "rps": h["peak_rps"],
                      "generator_bound": h["peak_limit"] == "generator-bound",
                      "generator_influenced": h["peak_limit"] == "generator-influenced"}),
        pd.DataFrame({**ids, "kind": f"p99 ≤ {slo_p99_ms:g} ms", "rps": h["slo_rps"],
                      "generator_bound": h["slo_limit"] == "generator-bound",
                      "generator_influenced": h["slo_limit"] == "generator-influenced"}),
    ], ignore_index=True)


PER_USER = (1, 10, 35, 100, 1000)  # requests per user per day, the columns of dau_table


def dau_table(cap: pd.DataFrame, refs: pd.DataFrame, peak_hours: float = 4,
              per_user=None) -> pd.DataFrame:
    """Daily active users for each headline SLO capacity (its stack and workload) and each
    reference load, at each number of requests per user per day (one column each): the napkin
    maths as a table to read across — DAU is capacity × peak seconds ÷ requests per user, so
    every row scales the same way."""
    per_user = list(PER_USER if per_user is None else per_user)
    rows = []
    h = headline(cap)
    for r in (h[h["slo_rps"] > 0].itertuples() if len(h) else []):
        rows.append({"what": f"{r.server} · {r.scenario}", "capacity_rps": r.slo_rps,
                     **{f"dau_at_{k:g}": capacity.daily_active_users(r.slo_rps, k, peak_hours) for k in per_user}})
    for r in refs.itertuples():
        rows.append({"what": f"{r.name} (reference)", "capacity_rps": r.rps,
                     **{f"dau_at_{k:g}": capacity.daily_active_users(r.rps, k, peak_hours) for k in per_user}})
    return pd.DataFrame(rows, columns=["what", "capacity_rps"] + [f"dau_at_{k:g}" for k in per_user])


def capacity_findings(cap: pd.DataFrame, requests_per_user: float = 35,
             seconds_between_requests: float = 10) -> str:
    """One line per headline row: SLO capacity vs the peak and what it means in users."""
    h = headline(cap)
    if h.empty:
        return "No points: nothing to estimate yet (run notebooks 01–05 at this scale first)."
    lines = []
    for r in h.sort_values("slo_rps", ascending=False).itertuples():
        if not findings.finished(r.peak_rps):
            lines.append(f"- **{r.server} · {r.scenario}** ({r.profile}, {r.notebook}): at every level, "
                         f"{findings.STALLED}: no capacity measured.")
            continue
        cut = 1 - r.slo_rps / r.peak_rps
        bound = f" ({r.slo_limit}: at least this)" if r.slo_lower_bound else ""
        lines.append(f"- **{r.server} · {r.scenario}** ({r.profile}, {r.notebook}): "
                     f"{r.slo_rps:,.0f} req/s within the SLO{bound} vs a peak of {r.peak_rps:,.0f} "
                     f"({cut:.0%} lower) → {r.slo_dau:,.0f} DAU at {requests_per_user:g} requests "
                     f"each, {r.slo_active_users:,.0f} active users at one request per "
                     f"{seconds_between_requests:g} s.")
    return "\n".join(lines)
