"""Notebook 10, your own app: the lab's method pointed at any HTTP server on this machine (no
article: the articles' readers' question, "can SQLite run *my* app?"). Everything that is this
notebook's, declared once: its scales, its method rows (what the lab knows of an app and what it
cannot know). Its two examples that run out of the box are its runner's
(sqlitelab.experiments.your_app.examples).

Its code: its levels and open-loop rates, its WAL over the window, and the findings.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sqlitelab.infra.servers import stack_title
from sqlitelab.load import scenarios
from sqlitelab.report import analysis, capacity, findings
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY, NOT_STATED, PIN_WHY


# What each constant means: sqlitelab.studies.declarations.
ID = "10-your-app"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "your own app"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = ("Your own app: any HTTP app on this machine (its command or its URL, your locustfile or"
            " a lab scenario), lock errors by its own words, every acknowledged write audited; two "
            "examples run as they are ([`examples/your-app/`](examples/your-app/))")
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "throughput"

SCALES: dict[str, dict] = {
    # Quick: one user (the service time), a middle and a high level, enough for the knee of a
    # small app on 2 cores; 1.5-s windows; the plain-Locust comparison at the middle level.
    "quick": {"levels": [1, 8, 32], "duration": 1.5, "warmup": 0.3, "repeats": 1,
              "plain_users": 8},
    # Seed (no article to reproduce): the same levels and one more, in 5-s windows.
    "seed": {"levels": [1, 8, 32, 64], "duration": 5.0, "warmup": 1.0, "repeats": 1,
             "plain_users": 8},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 20, "seed": 45}  # quick: 17.1-17.5 s (2026-11-28), seed: 40.1 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (declarations.experiment_title): none: an app's one sweep.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = False

# 1.5-s windows: when the machine runs slow, Datasette answers in hundreds of ms and a 0.5-s window
# holds no request that both started and finished in it
SMOKE: dict = {"levels": [1, 4], "duration": 1.5, "warmup": 0.2, "plain_users": 2}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "Look for where the line flattens: more users past it only queue.",
    "latency":
        "Look for the level where p99 leaves the median behind: that is where users start to wait.",
    "locks":
        "Any share above zero is SQLite's lock reaching your users as an error.",
    "offered-load":
        "Look for where p99 leaves the objective's line: the rate before it is what the app keeps up with.",
    "wal":
        "A WAL that only grows is never checkpointed under this load; a saw-tooth is checkpoints "
        "keeping up.",
}

# Its method: what the lab knows of an app and what it cannot know (sqlitelab.report.methods).
ARTICLE = Article(ID, "—", "your app, measured the way the lab measures its own servers", (
    Detail("how it was started", "—", lambda r: _started(r), expect=NOT_STATED,
           why="the app's own command, or an app already listening (then its CPUs are its own)"),
    Detail("what the users send", "—", lambda r: _load(r), expect=NOT_STATED,
           why="your locustfile's users as Locust would run them, or a scenario of the lab's"),
    Detail("load generator", "—", "col:generator", expect=["locust"],
           why="Locust on the generator's CPUs; a user class of yours is not the lab's calibrated "
               "one, so a point is flagged by the CPU rules alone (generator busy, server idle)"),
    Detail("what is timed", "—", lambda r: "each request from its send to its last byte, counted when "
           "it starts and ends inside the window (µs HdrHistogram)", expect=NOT_STATED,
           why="Locust's own statistics count from the spawn and in whole milliseconds"),
    Detail("lock errors", "—", lambda r: _lock(r), expect=NOT_STATED,
           why="the lab cannot see inside your app: a lock is what its error says; an unmatched 5xx "
               "is another error"),
    Detail("acknowledged writes", "—", lambda r: _writes(r), expect=NOT_STATED,
           why="your rule and count query; a request of a custom client is not seen"),
    Detail("server CPUs", "—", "cpus:server_pinning", expect=NOT_STATED, why=PIN_WHY),
    Detail("machine", "—", "col:machine", expect=NOT_STATED, why=MACHINE_WHY),
))


def _sweep(r) -> dict:  # the notebook stores the plan's record (your_app.Plan.record) among its parameters
    return r.parameters


def _started(r) -> str:
    s = _sweep(r)
    return f"by its command: {' '.join(s['command'])}" if s.get("command") else f"reached at {s.get('url')}"


def _load(r) -> str:
    s = _sweep(r)
    if s.get("locustfile"):
        return f"{Path(s['locustfile']).name}: {', '.join(s.get('user_classes') or [])}"
    return f"the lab's scenario {s.get('scenario')}{scenarios.params_words(s.get('scenario_params'))}"


def _lock(r) -> str:
    lock = _sweep(r).get("lock") or {}
    low, high = lock.get("status", ["?", "?"])
    pattern = lock.get("pattern")
    return f"status {low}–{high}" + (f" with a body matching {pattern!r}" if pattern else "")


def _writes(r) -> str:
    s = _sweep(r)
    w = s.get("writes")
    if not w:
        return "none audited"
    return (f"{w['method']} requests whose name matches {w['path']!r}, answered "
            f"{', '.join(map(str, w['status']))}; counted by {s.get('count_query')}")


# --------------------------------------------------------------------------- its code

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
            lines.append(f"- **{stack_title(c.server)}**: at every level, {findings.STALLED}: no peak was measured.")
            continue
        note = f" ({c.peak_limit}: a lower bound)" if c.peak_lower_bound else ""
        lines.append(f"- **{stack_title(c.server)}**: the naive peak is **{c.peak_rps:,.0f} requests/s** at "
                     f"{c.peak_users} users (p99 {findings.ms(c.peak_p99_ms)}){note}.")
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
                         f"**{o.open_rps:,.0f} requests/s** (p99 {findings.ms(o.open_p99_ms)} from the due "
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
