"""Notebook 01, linear writes (seed 000): its tables of Puma's writes/s as users rise (the lab's
window and hey's count), each stack's peak and where errors begin, the napkin math of daily
users, their findings, and its row of the README.
"""
from __future__ import annotations

import json
from types import ModuleType

import pandas as pd

from sqlitelab.core.vocabulary import STALL_MS
from sqlitelab.report import analysis, capacity, claims, findings, summaries


def seed_table(df: pd.DataFrame) -> pd.DataFrame:
    """The seeds' layout: per server, profile and users — RPS and average (mean over repeats),
    slowest (max over repeats), plus percentiles, errors and the generator flag."""
    cols = ["rps", "rps_spread", "mean_ms", "p50_ms", "p99_ms", "max_ms", "errors", "busy_errors"]
    return analysis.over_repeats(df, ["server", "profile", "users"],
                        cols + (["max_overrun_ms"] if "max_overrun_ms" in df else []),
                        rps_spread=("rps", lambda v: v.max() - v.min()))


def hey_table(df: pd.DataFrame) -> pd.DataFrame:
    """The same runs counted as `hey -z` counts them (seed 000's tool): per server, profile and
    users, Requests/sec = every response of the run over the run's whole duration (until the
    last request in flight ended), Average and Slowest over every response — means over the
    repeats, slowest the max, as the article reports them — beside the window's rps."""
    return analysis.over_repeats(
        df, ["server", "profile", "users"],
        ["hey_rps", "hey_mean_ms", "hey_max_ms", "hey_seconds", "responses", "errors_in_runs",
         "window_rps"],
        responses=("hey_results", None), window_rps=("rps", None),
        errors_in_runs=("run_counts", lambda v: sum(analysis.run_status(x, lambda st: st >= 500 or st == 0)
                                                    for x in v)))


def against_article(ours: pd.DataFrame, ref: pd.DataFrame, on: str, columns: dict[str, str]) -> pd.DataFrame:
    """The article's rows beside ours, joined on `on`: `columns` maps each of the article's
    columns to ours (`{"rps": "hey_rps"}`), shown as `<col> (article)` and `<col> (here)`."""
    left = ref[[on, *columns]].rename(columns={c: f"{c} (article)" for c in columns})
    right = ours[[on, *columns.values()]].rename(columns={v: f"{k} (here)" for k, v in columns.items()})
    out = left.merge(right, on=on, how="left")
    return out[[on] + [f"{c} ({w})" for c in columns for w in ("article", "here")]]


def stalled(table: pd.DataFrame) -> pd.Series:
    """Levels where requests stalled past the window, or none completed in it at all."""
    over = table["max_overrun_ms"] if "max_overrun_ms" in table else 0
    return (table["rps"] <= 0) | (over >= STALL_MS)


def peak(table: pd.DataFrame) -> pd.DataFrame:
    """Per server/profile: the level of highest mean throughput, and where errors begin."""
    rows = []
    for (server, profile), g in table.groupby(["server", "profile"], sort=True):
        best = g.loc[g["rps"].idxmax()]
        erring = g[(g["errors"] > 0) | stalled(g)]
        last = g.loc[g["users"].idxmax()]
        rows.append({"server": server, "profile": profile, "peak_rps": best["rps"],
                     "peak_users": int(best["users"]),
                     "peak_generator_bound": bool(analysis.limited(best)),
                     "peak_limit": analysis.limit_note(best),
                     "errors_from_users": int(erring["users"].min()) if len(erring) else None,
                     "rps_at_max_users": last["rps"], "max_users": int(last["users"]),
                     "drop_from_peak": 1 - last["rps"] / best["rps"] if best["rps"] else None})
    return pd.DataFrame(rows)


def linear_writes(table: pd.DataFrame) -> str:
    """Markdown sentences about where throughput peaks and where errors begin."""
    lines = []
    for r in peak(table).itertuples():
        if not findings.finished(r.peak_rps):
            lines.append(f"- **{r.server}** ({r.profile}): at every level, up to {r.max_users} users, {findings.STALLED}.")
            continue
        s = (f"- **{r.server}** ({r.profile}): throughput peaks at **{r.peak_rps:,.0f} writes/s** "
             f"with {r.peak_users} concurrent users")
        if r.peak_generator_bound:
            s += f" ({r.peak_limit}: a lower bound, the server may go higher)"
        if pd.notna(r.errors_from_users):
            s += (f"; errors or stalls (requests unfinished {STALL_MS / 1000:g} s after the window) "
                  f"begin at {int(r.errors_from_users)} users")
        else:
            s += "; no errors at any level"
        if r.max_users != r.peak_users:
            s += (f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s "
                  f"({r.drop_from_peak:.0%} below the peak)." if r.drop_from_peak and r.drop_from_peak > 0
                  else f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s.")
        else:
            s += "."
        lines.append(s)
    return "\n".join(lines)


def napkin(peak_rps: float, writes_per_user: float = 35, peak_hours: float = 4) -> str:
    """Seed 000's napkin math applied to a measured peak."""
    if not findings.finished(peak_rps):
        return f"No napkin math: {findings.STALLED.replace('its window', 'any window')}, so there is no peak."
    per_day = capacity.requests_per_day(peak_rps, peak_hours)
    dau = capacity.daily_active_users(peak_rps, writes_per_user, peak_hours)
    return (f"At **{peak_rps:,.0f} writes/s**, with a day's writes packed into {peak_hours:g} peak "
            f"hours, this server absorbs **{per_day / 1e6:,.1f} million writes per day** — "
            f"**{dau:,.0f} daily active users** at {writes_per_user:g} writes each "
            f"(the article: ~2,500/s → 35 M/day → 1 M DAU).")


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
        "writes_per_day_M": [capacity.requests_per_day(r, peak_hours) / 1e6 for r in best["peak_rps"]],
        "dau": [capacity.daily_active_users(r, writes_per_user, peak_hours) for r in best["peak_rps"]],
    }).reset_index(drop=True)


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 000: Puma's writes/s as users rise, where it collapses, and the napkin math."""
    ref, meta = analysis.reference("seed000_linear_writes")
    art_curve = dict(zip(ref["users"], ref["rps"]))
    art_peak = ref.loc[ref["rps"].idxmax()]
    article = (f"Puma 10 × 3, Rails 7.1 ({meta['hardware'].split(';')[0]}), `hey -z 10s`, 3 runs per level: "
               f"{claims.collapse_words(art_curve)}; average {art_peak.mean_ms:g} ms at the peak; "
               f"napkin math on ~2,500/s: 35 M writes/day, 1 M DAU")
    pts = summaries.points(study, x)
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    table = seed_table(pts)
    puma = table[table["server"] == "ruby-puma"]
    parts = []
    for profile, g in puma.groupby("profile", sort=True):
        curve = dict(zip(g["users"], g["rps"]))
        busy = g[g["busy_errors"] > 0]
        best = g.loc[g["rps"].idxmax()]
        knobs = pts.loc[(pts["server"] == "ruby-puma") & (pts["profile"] == profile), "knobs"]
        yjit = {json.loads(k).get("yjit") for k in knobs.dropna()} - {None}
        yjit_words = f", YJIT {'/'.join(sorted(yjit))}" if yjit else ""  # runs before LAB_YJIT: unknown
        text = (f"Puma (`{profile}`{yjit_words}), {summaries.run_shape(pts[pts['server'] == 'ruby-puma'])}: "
                f"{claims.collapse_words(curve)}{summaries.limit(best)} — {claims.shape_words(curve, art_curve)}")
        text += (f"; 'database is locked' from {int(busy['users'].min())} user(s)" if len(busy)
                 else "; no 'database is locked' at any level")
        dau = capacity.daily_active_users(best["rps"])
        text += (f". Napkin math on that peak: {capacity.requests_per_day(best['rps']) / 1e6:,.1f} M writes/day, "
                 f"{dau / 1e6:,.2f} M DAU")
        parts.append(text)
    checks = x.get("crosschecks", pd.DataFrame())
    hey = checks[(checks["notebook"] == study.ID) & (checks["generator"] == "hey")
                 & (checks["server"] == "ruby-puma") & checks["skipped"].isna()] if len(checks) else checks
    if len(hey):
        lab = pts[pts["server"] == "ruby-puma"].groupby("users")["hey_rps"].mean()
        parts.append("hey itself on Puma (the article's tool, here): " + ", ".join(
            f"{r.rps:,.0f}/s at {r.users} user{'s' if r.users != 1 else ''}" + (f" (the lab's generator, counted as hey counts: "
                                                   f"{lab[r.users]:,.0f}/s)" if r.users in lab else "")
            for r in hey.sort_values("users").itertuples()))
    others = peak(table[table["server"] != "ruby-puma"])
    if len(others):
        parts.append("Peaks in the exact window: " + ", ".join(
            f"{r.server} {r.peak_rps:,.0f}/s ({r.peak_users} users)" for r in others.itertuples()))
    c = summaries.ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {c['commits_per_s']:,.0f} one-row commits/s "
                     f"(synchronous={c.get('synchronous', 'normal')})")
    return article, summaries.sentences(parts)
