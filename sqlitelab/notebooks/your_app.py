"""Notebook 10, your own app: the lab's method pointed at any HTTP server on this machine (no
article: the articles' readers' question, "can SQLite run *my* app?"). Everything that is this
notebook's, declared once: its scales, its method rows (what the lab knows of an app and what it
cannot know). Its two examples that run out of the box are its runner's
(sqlitelab.experiments.your_app.examples).

Its code: its levels and open-loop rates, its WAL over the window, and the findings.
"""
from __future__ import annotations

import os

from pathlib import Path

import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import users
from sqlitelab.infra.servers import stack_title
from sqlitelab.load import scenarios
from sqlitelab.report import analysis, capacity, findings, plots
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

# Its parameters as its parameters cell declares them (but `replay` and `run_id`), stored with each
# run (`notebook_parameters`): a run made anywhere — papermill writing the executed notebook to a path
# of its own, JupyterLab — is re-made from results.db into its run's folder, where reports look
# (publish.missing, `python -m sqlitelab.replay --missing`)
PARAMETERS = ("scale", "example", "name", "command", "url", "env", "db", "ready_path", "locustfile",
              "scenario", "scenario_params", "writes", "count_query", "lock", "levels", "rates",
              "open_users", "duration", "warmup", "repeats", "plain_users", "slo_p99_ms",
              "requests_per_user", "peak_hours", "server_cpus", "generator_cpus")


FILES = ("db", "locustfile")  # parameters that name a file: stored as absolute paths


def notebook_parameters(namespace: dict) -> dict:
    """The notebook's parameters as given (PARAMETERS, from its namespace: a kernel's globals()),
    a file's path made absolute from where the run found it (FILES): a re-making runs elsewhere
    (the notebooks' folder) and must find the same file."""
    given = {k: namespace.get(k) for k in PARAMETERS}
    return {k: (os.path.abspath(os.path.expanduser(v)) if k in FILES and isinstance(v, str) and v else v)
            for k, v in given.items()}


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
    errors, the writes acknowledged and the rows the count query gained, the audit (`audited`:
    whether it checked anything, findings.audited), and the CPU of the app and of the generator. Closed-loop levels only (the open-loop ones: app_rates)."""
    df = df[~analysis.open_loop(df)]
    df = df.assign(_audited=findings.audited(df))
    t = analysis.over_repeats(df, ["server", "users"],
                     ["rps", "mean_ms", "p50_ms", "p99_ms", "max_ms", "requests", "errors",
                      "busy_errors", "server_errors", "acked_writes", "rows_written",
                      "server_cpu_pct", "gen_cpu_pct", "db_cached_before", "db_cached_after", "audited"],
                     server_errors="sum", acked_writes="sum", rows_written="sum", audited=("_audited", "all"))
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


# The columns a reader is shown, in plain words, with their format: the levels (the audit's own
# columns among them), the open-loop rates, plain Locust's run beside them, the capacity.
SHOWN: dict[str, dict[str, tuple[str, str]]] = {
    "levels": {"users": ("users", "{:,.0f}"), "rps": ("requests/s", "{:,.0f}"), "p50_ms": ("p50 ms", "{:,.1f}"),
               "p99_ms": ("p99 ms", "{:,.1f}"), "errors": ("failed", "{:,.0f}"),
               "busy_errors": ("lock errors", "{:,.0f}"), "lock_share": ("lock share", "{:.1%}"),
               "server_errors": ("other 5xx", "{:,.0f}"), "acked_writes": ("writes acknowledged", "{:,.0f}"),
               "rows_written": ("rows gained", "{:,.0f}"), "audit": ("audit", "{}"),
               "server_cpu_pct": ("app CPU %", "{:,.0f}"), "gen_cpu_pct": ("Locust CPU %", "{:,.0f}"),
               "set_by": ("pace set by", "{}")},
    "rates": {"rate": ("offered/s", "{:,.0f}"), "rps": ("requests/s", "{:,.0f}"), "p50_ms": ("p50 ms", "{:,.1f}"),
              "p99_ms": ("p99 ms", "{:,.1f}"), "errors": ("failed", "{:,.0f}"),
              "busy_errors": ("lock errors", "{:,.0f}"), "lock_share": ("lock share", "{:.1%}"),
              "backlog": ("left unsent", "{:,.0f}")},
    "plain": {"users": ("users", "{:,.0f}"), "duration_s": ("seconds", "{:,.1f}"), "requests": ("requests", "{:,.0f}"),
              "rps": ("requests/s", "{:,.0f}"), "p50_ms": ("p50 ms", "{:,.1f}"), "p99_ms": ("p99 ms", "{:,.1f}"),
              "errors": ("failed", "{:,.0f}")},
    "capacity": {"peak_rps": ("peak requests/s", "{:,.0f}"), "peak_users": ("peak at users", "{:,.0f}"),
                 "peak_p99_ms": ("p99 ms at the peak", "{:,.1f}"),
                 "slo_rps": ("requests/s at the objective", "{:,.0f}"),
                 "slo_users": ("objective met at users", "{:,.0f}"),
                 "slo_p99_ms": ("p99 ms there", "{:,.1f}")},
}


def shown(table: pd.DataFrame, which: str):
    """`table` as a reader sees it (SHOWN[which]): its columns in plain words and formats, no row
    numbers; the levels' audit in words and who set the pace (the app, or the generator). A
    column the table lacks is left out; an empty cell is blank."""
    t = table.copy()
    if which == "levels":
        audited = t["audited"] if "audited" in t else pd.Series(True, index=t.index)
        t["audit"] = ["ok" if ok and a else "nothing audited" if ok else "FAILED"
                      for ok, a in zip(t.get("audit_ok", pd.Series(True, index=t.index)), audited)]
        t["set_by"] = [analysis.limit_note(r) or "the app" for r in t.to_dict("records")]
        for col in ("acked_writes", "rows_written"):  # nothing counted: blank, not 0
            if col in t:
                t[col] = t[col].astype(object).where(audited.astype(bool), None)
    return plots.plain_table(t, SHOWN[which])


def wal_series(seconds: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10: every level's window second by second, laid end to end in the order they ran
    (`elapsed_s` from the first window's start, by the clock), with the WAL in MiB and the level
    in words (`level`); empty when no second saw a WAL with anything in it."""
    if seconds.empty or not (seconds["wal_bytes"].fillna(0) > 0).any():  # no WAL, or one never written
        return pd.DataFrame(columns=["elapsed_s", "wal_mib", "users", "level"])
    s = seconds.sort_values("t").copy()
    s["elapsed_s"] = s["t"] - s["t"].min()
    s["wal_mib"] = s["wal_bytes"] / 2**20
    s["level"] = s["users"].map(users)
    return s.reset_index(drop=True)


# A level where the app waits rather than works: its median at least WAITS_MS while the app used
# less than WAITS_CPU of a core. At one user a request's CPU time is the app's CPU share times its
# latency: under a fifth of it on the app's CPU, and tens of ms long, the rest is waiting (on a
# socket, a sleep, another service, a lock), not SQLite working.
WAITS_MS, WAITS_CPU = 10.0, 20.0


def waits(levels: pd.DataFrame) -> list[str]:
    """The levels of `levels` (app_levels) where the app waits rather than works (WAITS_MS,
    WAITS_CPU), in words."""
    if not len(levels) or "server_cpu_pct" not in levels:
        return []
    w = levels[(levels["p50_ms"] >= WAITS_MS) & (levels["server_cpu_pct"] < WAITS_CPU)]
    return [f"- At {users(r.users)} the median request took "
            f"{findings.ms(r.p50_ms)} while {stack_title(r.server)} used {r.server_cpu_pct:.0f} % of a core: "
            f"the app waits (on its socket, a sleep, another service), it does not work — that time is "
            f"not SQLite's." for r in w.sort_values("users").itertuples()]


def your_app(levels: pd.DataFrame, cap: pd.DataFrame, plain: pd.DataFrame, slo_p99_ms: float,
             requests_per_user: float, peak_hours: float, agreement,
             open_cap: pd.DataFrame | None = None, points: pd.DataFrame | None = None) -> str:
    """Notebook 10: the app's peak (still rising when it is the highest level measured) and its
    capacity at the objective, what that is in daily active users by the articles' napkin math at
    the precision its level's repeats support (`points`: the closed-loop points, for the repeats
    and the requests behind it), where lock errors appeared, levels where the app waits rather
    than works, and how plain Locust's count of the same locustfile compares, rate and p99
    (`agreement`: experiments.your_app.agreement)."""
    lines = []
    for c in cap.itertuples():
        if not findings.finished(c.peak_rps):
            lines.append(f"- **{stack_title(c.server)}**: at every level, {findings.STALLED}: no peak was measured.")
            continue
        note = f" ({c.peak_limit}: a lower bound)" if c.peak_lower_bound else ""
        top = levels.loc[levels["server"] == c.server, "users"].max() if len(levels) else None
        if top is not None and c.peak_users == top and (levels["server"] == c.server).sum() > 1:
            lines.append(f"- **{stack_title(c.server)}**: the highest rate measured is **{c.peak_rps:,.0f} "
                         f"requests/s** at {c.peak_users} users, the highest level (p99 "
                         f"{findings.ms(c.peak_p99_ms)}){note}: still rising, so no peak was reached — "
                         f"its peak lies beyond it" + ("." if note else " (a lower bound)."))
        else:
            lines.append(f"- **{stack_title(c.server)}**: the naive peak is **{c.peak_rps:,.0f} requests/s** at "
                         f"{c.peak_users} users (p99 {findings.ms(c.peak_p99_ms)}){note}.")
        if c.slo_rps > 0:
            at = (points[(points["server"] == c.server) & (points["users"] == c.slo_users)]
                  if points is not None and len(points) else pd.DataFrame())
            rate = analysis.rate_with_runs(c.slo_rps, at["rps"] if len(at) else None)
            dau = intervals.scaled(rate, capacity.daily_active_users(1.0, requests_per_user, peak_hours))
            behind = (f", from {int(at['requests'].sum()):,} requests in {len(at)} window(s) of "
                      f"{at['window_s'].mean():.1f} s" if len(at) and "window_s" in at else "")
            lines.append(f"- At a p99 of at most {slo_p99_ms:g} ms with no errors it serves "
                         f"**{intervals.shown(rate, ' requests/s')}** ({c.slo_users} users{behind}): by the "
                         f"articles' napkin math ({requests_per_user:g} requests per user per day, the day's "
                         f"load in {peak_hours:g} peak hours) about **{intervals.shown(dau)}** daily active "
                         f"users" + (" (a lower bound: the generator set the pace)" if c.slo_lower_bound else "")
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
    lines += waits(levels)
    other = levels[levels["server_errors"] > 0]
    if len(other):
        lines.append(f"- Other server errors (5xx the lock rule did not match): "
                     f"{int(other['server_errors'].sum()):,} over {len(other)} level(s).")
    for r in plain.itertuples():
        lab = levels[levels["users"] == r.users]
        if lab.empty:
            continue
        lab_rps, lab_p99 = float(lab["rps"].iloc[0]), float(lab["p99_ms"].iloc[0])
        p99 = (f" Its p99: {findings.ms(r.p99_ms)} by Locust's count against the lab's {findings.ms(lab_p99)}"
               + (f" ({r.p99_ms / lab_p99:.2f}×)" if lab_p99 > 0 and r.p99_ms == r.p99_ms else "")
               + ": Locust times every request of its run from the spawn, in whole milliseconds; the lab "
                 "those that start and end in its window, in microseconds." if lab_p99 == lab_p99 else "")
        lines.append(f"- The same locustfile run by plain `locust --headless` at {r.users} users: "
                     f"{r.requests:,} requests, {r.rps:,.0f} requests/s by Locust's own count, "
                     f"against the lab's {lab_rps:,.0f} in its window: {agreement(lab_rps, r.rps)}.{p99}")
    return "\n".join(lines)
