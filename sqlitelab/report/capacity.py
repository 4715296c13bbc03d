"""Napkin math from the articles, made explicit — and capacity at a latency objective.

Seed 000: pack a day's requests into 4 peak hours (1,000,000/day ≈ 70/s); ~2,500 writes/s
→ > 35 M writes/day → 1 M DAU at 35 writes each. Seed 002: one request per user every
10 s → 1,107 req/s ≈ 11,000 active users. Seed 004: Yahoo's 3.6 billion monthly visits ≈
1,388 req/s. Seed 000: Twitter 2007 at 600 req/s, Shopify 2013 at 833.

Peak throughput at any latency is not capacity: `capacity_at_slo` takes the highest measured
throughput whose p99 meets the objective with no errors. Closed-loop users wait for each answer,
so a slow server slows its own load down and its p99 looks better than arriving users would
see it; `open_loop_capacity` sizes capacity as operators do, from offered load: the highest
arrival rate the server kept up with (vocabulary.keeps_up: p99 from due times within the SLO, no
errors, no backlog), and `three_ways` sets it beside the closed-loop capacity and the naive peak.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core.vocabulary import keeps_up, store_label
from sqlitelab.report.analysis import limit_note, limited, open_loop, over_repeats, peak, rate_points
from sqlitelab.studies import registry
from sqlitelab.studies.sqlite_vs_postgres import workload_of

SECONDS_PER_HOUR = 3600
DAY = 24 * SECONDS_PER_HOUR

# Reference loads the articles compare against (requests per second), with their source.
REFERENCE_LOADS = {
    "Twitter 2007": (600, "seed 000, via Nate Berkopec (2015)"),
    "Shopify 2013": (833, "seed 000, via Nate Berkopec (2015)"),
    "Yahoo (3.6 B visits/month)": (None, "seed 004, SimilarWeb; 3.6e9 visits over 30 days"),
    "Twitter tweets/s": (6000, "seed 004: 'on average users post 6K tweets per second'"),
}


def rps_needed(requests_per_day: float, peak_hours: float = 4) -> float:
    """Requests/s to serve a day's requests packed into `peak_hours` (seed 000's rule of thumb)."""
    _positive(requests_per_day=requests_per_day, peak_hours=peak_hours)
    return requests_per_day / (peak_hours * SECONDS_PER_HOUR)


def requests_per_day(rps: float, peak_hours: float = 4) -> float:
    """A day's requests a server sustaining `rps` absorbs when they arrive in `peak_hours`."""
    _positive(rps=rps, peak_hours=peak_hours)
    return rps * peak_hours * SECONDS_PER_HOUR


def daily_active_users(rps: float, requests_per_user: float = 35, peak_hours: float = 4) -> float:
    """DAU at `requests_per_user` requests each per day (seed 000: 35 writes)."""
    _positive(requests_per_user=requests_per_user)
    return requests_per_day(rps, peak_hours) / requests_per_user


def active_users(rps: float, seconds_between_requests: float = 10) -> float:
    """Concurrently active users each sending one request every N seconds (seed 002)."""
    _positive(rps=rps, seconds_between_requests=seconds_between_requests)
    return rps * seconds_between_requests


def rps_from_monthly(visits_per_month: float, days: float = 30) -> float:
    """Average requests/s of a monthly count (seed 004's Yahoo figure)."""
    _positive(visits_per_month=visits_per_month, days=days)
    return visits_per_month / (days * DAY)


def reference_loads() -> pd.DataFrame:
    rows = []
    for name, (rps, source) in REFERENCE_LOADS.items():
        if rps is None:
            rps = rps_from_monthly(3.6e9)
        rows.append({"name": name, "rps": rps, "source": source})
    return pd.DataFrame(rows)


def _positive(**values: float) -> None:
    for k, v in values.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise ValueError(f"{k} must be a positive number, not {v!r}")


def capacity_at_slo(points: pd.DataFrame, slo_p99_ms: float = 100.0,
                    by=("server", "profile", "scenario")) -> pd.DataFrame:
    """Per group: the naive peak (highest rps, any latency, any errors) next to the capacity
    at the objective (highest rps of a level whose every repeat had p99 ≤ SLO and no errors).

    Repeats of a level are averaged first; a level whose generator was the limit or set the
    pace means the server could do at least that much (`*_lower_bound`, and `*_limit` says
    which: generator-bound or generator-influenced)."""
    _positive(slo_p99_ms=slo_p99_ms)
    if points.empty:
        return pd.DataFrame()
    # a level meets the objective only if its worst repeat does: p99 the worst, not the mean
    lv = over_repeats(points, list(by) + ["users"], ["rps", "p99_ms", "errors"], p99_ms="max")
    rows = []
    for key, grp in lv.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        peak = grp.loc[grp["rps"].idxmax()]
        ok = grp[(grp["p99_ms"] <= slo_p99_ms) & (grp["errors"] == 0)]
        row = dict(zip(by, key))
        row.update({"peak_rps": peak["rps"], "peak_users": int(peak["users"]),
                    "peak_p99_ms": peak["p99_ms"], "peak_errors": int(peak["errors"]),
                    "peak_lower_bound": bool(limited(peak)), "peak_limit": limit_note(peak)})
        if len(ok):
            best = ok.loc[ok["rps"].idxmax()]
            row.update({"slo_rps": best["rps"], "slo_users": int(best["users"]),
                        "slo_p99_ms": best["p99_ms"], "slo_lower_bound": bool(limited(best)),
                        "slo_limit": limit_note(best)})
        else:
            row.update({"slo_rps": 0.0, "slo_users": None, "slo_p99_ms": None, "slo_lower_bound": False,
                        "slo_limit": ""})
        rows.append(row)
    return pd.DataFrame(rows)


def open_loop_capacity(points: pd.DataFrame, slo_p99_ms: float = 100.0,
                       by=("server", "profile", "scenario")) -> pd.DataFrame:
    """Per group (and users, the most in flight): the offered rates from the lowest up, and
    the capacity = the highest rate below the first one the server did not keep up with
    (every repeat must keep up: vocabulary.keeps_up). `knee_rate` is that first rate (None: it kept
    up with every rate offered, and the capacity is a lower bound: `open_lower_bound`)."""
    _positive(slo_p99_ms=slo_p99_ms)
    pts = rate_points(points) if len(points) else points
    if pts.empty:
        return pd.DataFrame(columns=[*by, "users", "open_rps", "knee_rate"])
    rows = []
    for key, grp in pts.groupby(list(by) + ["users"], sort=True):
        row = dict(zip(list(by) + ["users"], key))
        cap, knee, at = 0.0, None, None
        for rate, lv in grp.groupby("rate", sort=True):
            if all(keeps_up(p, slo_p99_ms) for p in lv.to_dict("records")):
                cap, at = float(rate), lv
            else:
                knee = float(rate)
                break
        row.update({"open_rps": cap, "knee_rate": knee, "open_lower_bound": knee is None,
                    "open_p99_ms": float(at["p99_ms"].max()) if at is not None else None,
                    "open_served_rps": float(at["rps"].mean()) if at is not None else None,
                    "rates": len(grp["rate"].unique())})
        rows.append(row)
    return pd.DataFrame(rows)


def three_ways(points: pd.DataFrame, slo_p99_ms: float = 100.0,
               by=("notebook", "server", "profile", "scenario")) -> pd.DataFrame:
    """Per stack and workload: open-loop capacity (from offered load), closed-loop capacity
    (the best level whose p99 met the SLO) and the naive peak (best rps at any latency), from
    the same run's open- and closed-loop points."""
    if points.empty:
        return pd.DataFrame(columns=[*by, "open_rps", "slo_rps", "peak_rps"])
    pts = points.assign(experiment=points["experiment"].fillna("") if "experiment" in points else "")
    opened = open_loop_capacity(pts, slo_p99_ms, by=by)
    closed = capacity_at_slo(pts[~open_loop(pts)], slo_p99_ms, by=by)
    if opened.empty or closed.empty:
        return pd.DataFrame(columns=[*by, "open_rps", "slo_rps", "peak_rps"])
    best = opened.loc[opened.groupby(list(by))["open_rps"].idxmax()]
    out = best.merge(closed, on=list(by), how="inner")
    keep = [*by, "open_rps", "knee_rate", "open_lower_bound", "open_p99_ms", "users", "slo_rps",
            "slo_users", "slo_p99_ms", "peak_rps", "peak_users", "peak_p99_ms"]
    out = out[keep].rename(columns={"users": "open_users"})
    out["open_over_closed"] = out["open_rps"] / out["slo_rps"].where(out["slo_rps"] > 0)
    return out.sort_values(list(by)).reset_index(drop=True)


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
    _positive(requests_per_user=requests_per_user, peak_hours=peak_hours,
              seconds_between_requests=seconds_between_requests)
    if points.empty:
        return pd.DataFrame(columns=list(GROUP) + ["peak_rps", "slo_rps"])
    pts = points.assign(experiment=points["experiment"].fillna(""),
                        database=(points["database"].fillna("sqlite") if "database" in points
                                  else "sqlite"))
    pts = pts[~open_loop(pts)]  # levels of users; open-loop rates are open_loop_capacity's
    if pts.empty:
        return pd.DataFrame(columns=list(GROUP) + ["peak_rps", "slo_rps"])
    cap = capacity_at_slo(pts, slo_p99_ms, by=GROUP)
    for col in ("peak", "slo"):
        rps = cap[f"{col}_rps"]
        cap[f"{col}_dau"] = [daily_active_users(r, requests_per_user, peak_hours) if r > 0 else 0.0
                             for r in rps]
        cap[f"{col}_active_users"] = [active_users(r, seconds_between_requests) if r > 0 else 0.0
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
                     **{f"dau_at_{k:g}": daily_active_users(r.slo_rps, k, peak_hours) for k in per_user}})
    for r in refs.itertuples():
        rows.append({"what": f"{r.name} (reference)", "capacity_rps": r.rps,
                     **{f"dau_at_{k:g}": daily_active_users(r.rps, k, peak_hours) for k in per_user}})
    return pd.DataFrame(rows, columns=["what", "capacity_rps"] + [f"dau_at_{k:g}" for k in per_user])


def napkin_table(table: pd.DataFrame, writes_per_user: float = 35, peak_hours: float = 4,
                 first: str = "ruby-puma") -> pd.DataFrame:
    """Seed 000's napkin math on each stack's peak (`first`, the article's stack, on top):
    writes/day with the day packed into `peak_hours`, and daily active users at
    `writes_per_user` writes each."""
    best = peak(table)
    best = best.assign(_order=best["server"] != first).sort_values(["_order", "peak_rps"],
                                                                   ascending=[True, False])
    return pd.DataFrame({
        "server": best["server"], "profile": best["profile"], "peak_rps": best["peak_rps"],
        "at_users": best["peak_users"], "lower_bound": best["peak_generator_bound"],
        "writes_per_day_M": [requests_per_day(r, peak_hours) / 1e6 for r in best["peak_rps"]],
        "dau": [daily_active_users(r, writes_per_user, peak_hours) for r in best["peak_rps"]],
    }).reset_index(drop=True)


def active_users_table(table: pd.DataFrame, seconds_between_requests: float = 10) -> pd.DataFrame:
    best = table.loc[table.groupby("server")["rps"].idxmax()].copy()
    best["active_users"] = [active_users(r, seconds_between_requests) for r in best["rps"]]
    return best[["server", "users", "rps", "p99_ms", "active_users"]
                + [c for c in ("generator", "generator_bound", "generator_influenced") if c in best]]


def versus_table(df: pd.DataFrame, slo_p99_ms: float = 100.0) -> pd.DataFrame:
    """Notebook 07: per workload, endpoint (scenario), stack and store (sqlite, postgres, postgres
    behind a link): how many levels it ran (`levels`), the best level's throughput and that level's p99 (repeats averaged, p99 the
    worst repeat), how it must be read (generator-bound...), and the capacity at the SLO (the
    best level with p99 ≤ SLO and no errors, capacity.capacity_at_slo)."""
    if df.empty:
        return pd.DataFrame()
    links = df["db_link_delay_us"] if "db_link_delay_us" in df else pd.Series(None, index=df.index)
    d = df.assign(workload=df["experiment"].map(workload_of),
                  store=[store_label(db, l) for db, l in zip(df["database"], links)])
    keys = ["workload", "scenario", "server", "store"]
    lv = over_repeats(d, keys + ["users"], ["rps", "p99_ms", "errors", "server_cpu_pct"], p99_ms="max")
    best = lv.loc[lv.groupby(keys)["rps"].idxmax()].copy()
    best = best.merge(lv.groupby(keys)["users"].nunique().rename("levels").reset_index(), on=keys)
    best["limit"] = [limit_note(r) for r in best.to_dict("records")]
    best["generator_bound"] = best["limit"] == "generator-bound"
    best["generator_influenced"] = best["limit"] == "generator-influenced"
    cap = capacity_at_slo(d, slo_p99_ms, by=tuple(keys))[keys + ["slo_rps", "slo_users"]]
    out = best.merge(cap, on=keys, how="left")
    out = out.rename(columns={"users": "best_users", "rps": "best_rps", "p99_ms": "best_p99_ms"})
    return out[keys + ["levels", "best_users", "best_rps", "best_p99_ms", "errors", "server_cpu_pct", "limit",
                       "generator_bound", "generator_influenced", "slo_rps", "slo_users",
                       "audit_ok"]].sort_values(keys).reset_index(drop=True)


def versus_ratios(table: pd.DataFrame, against: str = "postgres") -> pd.DataFrame:
    """SQLite against `against` (a store of versus_table) per workload, endpoint and stack:
    throughput and p99 at each one's best level, their ratios (SQLite / Postgres: above 1, SQLite
    serves more; a p99 ratio below 1, SQLite answers faster), and both capacities at the SLO.
    Where no request finished on a side at any of its levels (`stalled` names it), no ratio."""
    if table.empty:
        return pd.DataFrame()
    keys = ["workload", "scenario", "server"]
    a = table[table["store"] == "sqlite"].set_index(keys)
    b = table[table["store"] == against].set_index(keys)
    both = a.index.intersection(b.index)
    a, b = a.loc[both], b.loc[both]
    # a side where no request finished at any level (a stall longer than the window) has no rate
    # to divide: no ratio, and `stalled` names the side
    ran_a, ran_b = a["best_rps"] > 0, b["best_rps"] > 0
    out = pd.DataFrame({
        "sqlite_rps": a["best_rps"], "postgres_rps": b["best_rps"],
        "rps_ratio": (a["best_rps"] / b["best_rps"]).where(ran_a & ran_b),
        "stalled": [", ".join(n for n, ran in (("sqlite", x), (against, y)) if not ran)
                    for x, y in zip(ran_a, ran_b)],
        "sqlite_p99_ms": a["best_p99_ms"], "postgres_p99_ms": b["best_p99_ms"],
        "p99_ratio": a["best_p99_ms"] / b["best_p99_ms"],
        "sqlite_slo_rps": a["slo_rps"], "postgres_slo_rps": b["slo_rps"],
        "limits": [", ".join(x for x in (f"sqlite {la}" if la else "", f"postgres {lb}" if lb else "") if x)
                   for la, lb in zip(a["limit"], b["limit"])],
        # either side's generator set the pace: the ratio is a bound, not a measurement
        "generator_bound": a["generator_bound"] | b["generator_bound"],
        "generator_influenced": a["generator_influenced"] | b["generator_influenced"],
        "audit_ok": a["audit_ok"].astype(bool) & b["audit_ok"].astype(bool),
    }, index=both)
    return out.reset_index().sort_values(keys).reset_index(drop=True)


def steady_rates(points: pd.DataFrame, fraction: float, slo_p99_ms: float) -> pd.DataFrame:
    """Per stack: its open-loop capacity and the steady rate (`fraction` of it) the operations
    run under; a stack that kept up with no rate offered gets none (it is left out)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction!r}")
    cap = open_loop_capacity(points, slo_p99_ms, by=("server",))
    if cap.empty:
        return cap
    cap = cap.loc[cap.groupby("server")["open_rps"].idxmax()].reset_index(drop=True)
    cap["steady_rate"] = (cap["open_rps"] * fraction).where(cap["open_rps"] > 0)
    return cap
