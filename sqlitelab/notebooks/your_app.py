"""Notebook 10, your own app: its levels and open-loop rates, its WAL over the window, and the
findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.report import analysis, capacity, findings


def app_levels(df: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10, per app and level (over repeats): throughput and latency, the window's lock
    errors (by the app's rule) and their share of its requests (`lock_share`), its other server
    errors, the writes acknowledged and the rows the count query gained, the audit, and the CPU of
    the app and of the generator. Closed-loop levels only (the open-loop ones: app_rates)."""
    df = df[~analysis.open_loop(df)]
    t = analysis.over_repeats(df, ["server", "users"],
                     ["rps", "mean_ms", "p50_ms", "p99_ms", "max_ms", "requests", "errors",
                      "busy_errors", "server_errors", "acked_writes", "rows_written",
                      "server_cpu_pct", "gen_cpu_pct", "db_cached_before", "db_cached_after"],
                     server_errors="sum", acked_writes="sum", rows_written="sum")
    t["lock_share"] = t["busy_errors"] / t["requests"].where(t["requests"] > 0)
    return t


def app_rates(df: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10's open-loop levels, per app and offered rate (over repeats): what was served,
    p99 from the due times (a request that waited for a free user is charged the wait), the
    window's lock errors and their share, the requests left unsent at the close (`backlog`)."""
    pts = analysis.rate_points(df)
    if pts.empty:
        return pd.DataFrame(columns=["server", "rate", "rps", "p99_ms", "busy_errors", "lock_share"])
    t = analysis.over_repeats(pts, ["server", "users", "rate"],
                     ["rps", "p50_ms", "p99_ms", "requests", "errors", "busy_errors", "backlog"],
                     backlog="sum")
    t["lock_share"] = t["busy_errors"] / t["requests"].where(t["requests"] > 0)
    return t


def wal_series(seconds: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10: every level's window second by second, laid end to end in the order they ran
    (`elapsed_s` from the first window's start, by the clock), with the WAL in MiB and the level
    in words (`level`); empty when no second saw a WAL with anything in it."""
    if seconds.empty or not (seconds["wal_bytes"].fillna(0) > 0).any():  # no WAL, or one never written
        return pd.DataFrame(columns=["elapsed_s", "wal_mib", "users", "level"])
    s = seconds.sort_values("t").copy()
    s["elapsed_s"] = s["t"] - s["t"].min()
    s["wal_mib"] = s["wal_bytes"] / 2**20
    s["level"] = s["users"].map(lambda u: f"{int(u)} user{'s' if u != 1 else ''}")
    return s.reset_index(drop=True)


def your_app(levels: pd.DataFrame, cap: pd.DataFrame, plain: pd.DataFrame, slo_p99_ms: float,
             requests_per_user: float, peak_hours: float, agreement,
             open_cap: pd.DataFrame | None = None) -> str:
    """Notebook 10: the app's peak and its capacity at the objective, what that is in daily active
    users by the articles' napkin math, where lock errors appeared, and how plain Locust's count of
    the same locustfile compares (`agreement`: experiments.your_app.agreement)."""
    lines = []
    for c in cap.itertuples():
        if not findings.finished(c.peak_rps):
            lines.append(f"- **{c.server}**: at every level, {findings.STALLED}: no peak was measured.")
            continue
        note = f" ({c.peak_limit}: a lower bound)" if c.peak_lower_bound else ""
        lines.append(f"- **{c.server}**: the naive peak is **{c.peak_rps:,.0f} requests/s** at "
                     f"{c.peak_users} users (p99 {c.peak_p99_ms:,.1f} ms){note}.")
        if c.slo_rps > 0:
            dau = capacity.daily_active_users(c.slo_rps, requests_per_user, peak_hours)
            lines.append(f"- At a p99 of at most {slo_p99_ms:g} ms with no errors it serves "
                         f"**{c.slo_rps:,.0f} requests/s** ({c.slo_users} users): by the articles' "
                         f"napkin math ({requests_per_user:g} requests per user per day, the day's "
                         f"load in {peak_hours:g} peak hours) about **{dau:,.0f} daily active users**"
                         + (" (a lower bound: the generator set the pace)" if c.slo_lower_bound else "")
                         + ".")
        else:
            lines.append(f"- No level met a p99 of at most {slo_p99_ms:g} ms with no errors: no "
                         f"capacity at that objective was measured.")
    for o in (open_cap if open_cap is not None else pd.DataFrame()).itertuples():
        if o.open_rps > 0:
            lines.append(f"- Offered load (open loop, {o.users} users): it kept up with "
                         f"**{o.open_rps:,.0f} requests/s** (p99 {o.open_p99_ms:,.1f} ms from the due "
                         f"times)" + (f"; at {o.knee_rate:,.0f} requests/s it no longer did."
                                      if o.knee_rate is not None else
                                      ", the highest rate offered: a lower bound."))
        else:
            lines.append(f"- Offered load (open loop): it did not keep up with the lowest rate offered "
                         f"({o.knee_rate:,.0f} requests/s).")
    locked = levels[levels["busy_errors"] > 0]
    if len(locked):
        first = locked.sort_values("users").iloc[0]
        worst = locked.loc[locked["lock_share"].idxmax()]
        lines.append(f"- Lock errors reached users from {int(first['users'])} users on "
                     f"({int(first['busy_errors']):,} in that window); the most, "
                     f"{worst['lock_share']:.1%} of requests, at {int(worst['users'])} users.")
    elif len(levels):
        lines.append(f"- No response matched the lock rule at any of the {len(levels)} levels.")
    other = levels[levels["server_errors"] > 0]
    if len(other):
        lines.append(f"- Other server errors (5xx the lock rule did not match): "
                     f"{int(other['server_errors'].sum()):,} over {len(other)} level(s).")
    for r in plain.itertuples():
        lab = levels[levels["users"] == r.users]
        if lab.empty:
            continue
        lab_rps = float(lab["rps"].iloc[0])
        lines.append(f"- The same locustfile run by plain `locust --headless` at {r.users} users: "
                     f"{r.requests:,} requests, {r.rps:,.0f} requests/s by Locust's own count, "
                     f"against the lab's {lab_rps:,.0f} in its window: {agreement(lab_rps, r.rps)}.")
    return "\n".join(lines)
