"""Napkin math from the articles, made explicit — and capacity at a latency objective.

Seed 000: pack a day's requests into 4 peak hours (1,000,000/day ≈ 70/s); ~2,500 writes/s
→ > 35 M writes/day → 1 M DAU at 35 writes each. Seed 002: one request per user every
10 s → 1,107 req/s ≈ 11,000 active users. Seed 004: Yahoo's 3.6 billion monthly visits ≈
1,388 req/s. Seed 000: Twitter 2007 at 600 req/s, Shopify 2013 at 833.

Peak throughput at any latency is not capacity: `capacity_at_slo` takes the highest measured
throughput whose p99 meets the objective with no errors.
"""
from __future__ import annotations

import pandas as pd

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

    Repeats of a level are averaged first; a generator-bound level means the server could
    do at least that much (`*_lower_bound`)."""
    _positive(slo_p99_ms=slo_p99_ms)
    if points.empty:
        return pd.DataFrame()
    keys = list(by) + ["users"]
    g = points.groupby(keys, sort=True)
    lv = pd.DataFrame({"rps": g["rps"].mean(), "p99_ms": g["p99_ms"].max(),
                       "errors": g["errors"].sum(),
                       "generator_bound": g["generator_bound"].any()}).reset_index()
    rows = []
    for key, grp in lv.groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        peak = grp.loc[grp["rps"].idxmax()]
        ok = grp[(grp["p99_ms"] <= slo_p99_ms) & (grp["errors"] == 0)]
        row = dict(zip(by, key))
        row.update({"peak_rps": peak["rps"], "peak_users": int(peak["users"]),
                    "peak_p99_ms": peak["p99_ms"], "peak_errors": int(peak["errors"]),
                    "peak_lower_bound": bool(peak["generator_bound"])})
        if len(ok):
            best = ok.loc[ok["rps"].idxmax()]
            row.update({"slo_rps": best["rps"], "slo_users": int(best["users"]),
                        "slo_p99_ms": best["p99_ms"], "slo_lower_bound": bool(best["generator_bound"])})
        else:
            row.update({"slo_rps": 0.0, "slo_users": None, "slo_p99_ms": None, "slo_lower_bound": False})
        rows.append(row)
    return pd.DataFrame(rows)
