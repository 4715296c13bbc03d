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

from sqlitelab.core.vocabulary import keeps_up
from sqlitelab.core import intervals
from sqlitelab.report.analysis import limit_note, limited, open_loop, over_repeats, rate_points, rate_with_runs

SECONDS_PER_HOUR = 3600
DAY = 24 * SECONDS_PER_HOUR


def rps_needed(requests_per_day: float, peak_hours: float = 4) -> float:
    """Requests/s to serve a day's requests packed into `peak_hours` (seed 000's rule of thumb)."""
    positive(requests_per_day=requests_per_day, peak_hours=peak_hours)
    return requests_per_day / (peak_hours * SECONDS_PER_HOUR)


def requests_per_day(rps: float, peak_hours: float = 4) -> float:
    """A day's requests a server sustaining `rps` absorbs when they arrive in `peak_hours`."""
    positive(rps=rps, peak_hours=peak_hours)
    return rps * peak_hours * SECONDS_PER_HOUR


def daily_active_users(rps: float, requests_per_user: float = 35, peak_hours: float = 4) -> float:
    """DAU at `requests_per_user` requests each per day (seed 000: 35 writes)."""
    positive(requests_per_user=requests_per_user)
    return requests_per_day(rps, peak_hours) / requests_per_user


def active_users(rps: float, seconds_between_requests: float = 10) -> float:
    """Concurrently active users each sending one request every N seconds (seed 002)."""
    positive(rps=rps, seconds_between_requests=seconds_between_requests)
    return rps * seconds_between_requests


def rps_from_monthly(visits_per_month: float, days: float = 30) -> float:
    """Average requests/s of a monthly count (seed 004's Yahoo figure)."""
    positive(visits_per_month=visits_per_month, days=days)
    return visits_per_month / (days * DAY)


def positive(**values: float) -> None:
    for k, v in values.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise ValueError(f"{k} must be a positive number, not {v!r}")


def capacity_at_slo(points: pd.DataFrame, slo_p99_ms: float = 100.0,
                    by=("server", "profile", "scenario")) -> pd.DataFrame:
    """Per group: the naive peak (highest rps, any latency, any errors) next to the capacity
    at the objective (highest rps of a level whose every repeat had p99 ≤ SLO and no errors).

    Repeats of a level are averaged first; a level whose generator was the limit or set the
    pace means the server could do at least that much (`*_lower_bound`, and `*_limit` says
    which: generator-bound or generator-influenced). The capacity carries the 95 % interval of
    its level's mean over its runs (`slo_rps_low`, `slo_rps_high`, NaN for one run; `slo_runs`:
    analysis.rate_with_runs; `slo_interval` gives it back as an Interval)."""
    positive(slo_p99_ms=slo_p99_ms)
    if points.empty:
        return pd.DataFrame()
    # a level meets the objective only if its worst repeat does: p99 the worst, not the mean
    lv = over_repeats(points, list(by) + ["users"], ["rps", "p99_ms", "errors"], p99_ms="max")
    runs = points.groupby(list(by) + ["users"], sort=True)["rps"].agg(list)
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
            iv = rate_with_runs(best["rps"], runs.get(key + (best["users"],)))
            row.update({"slo_rps": best["rps"], "slo_users": int(best["users"]),
                        "slo_p99_ms": best["p99_ms"], "slo_lower_bound": bool(limited(best)),
                        "slo_limit": limit_note(best), "slo_rps_low": iv.low, "slo_rps_high": iv.high,
                        "slo_runs": iv.n})
        else:
            row.update({"slo_rps": 0.0, "slo_users": None, "slo_p99_ms": None, "slo_lower_bound": False,
                        "slo_limit": "", "slo_rps_low": float("nan"), "slo_rps_high": float("nan"),
                        "slo_runs": 0})
        rows.append(row)
    return pd.DataFrame(rows)


def slo_interval(row: dict, column: str = "slo_rps") -> intervals.Interval:
    """A capacity_at_slo (or estimate) row's `column` — the capacity, or a number proportional to
    it such as its daily users — with the 95 % interval over its level's `slo_runs` runs, from
    `<column>_low` and `<column>_high` (missing, or one run: no interval)."""
    low, high = row.get(f"{column}_low", float("nan")), row.get(f"{column}_high", float("nan"))
    n = int(row.get("slo_runs") or 1) if low == low and high == high else 1
    if n < 2:
        low = high = float("nan")
    return intervals.Interval(float(row[column]), float(low), float(high), n, intervals.mean_method(n))


def open_loop_capacity(points: pd.DataFrame, slo_p99_ms: float = 100.0,
                       by=("server", "profile", "scenario")) -> pd.DataFrame:
    """Per group (and users, the most in flight): the offered rates from the lowest up, and
    the capacity = the highest rate below the first one the server did not keep up with
    (every repeat must keep up: vocabulary.keeps_up). `knee_rate` is that first rate (None: it kept
    up with every rate offered, and the capacity is a lower bound: `open_lower_bound`)."""
    positive(slo_p99_ms=slo_p99_ms)
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


