"""Notebook 01, linear writes (seed 000): how many write requests per second can one SQLite
file take? Everything that is this notebook's, declared once.

Seed scale keeps the article's levels, 10-s runs and three repeats, with no warm-up (hey
measured from the moment its users were running); the article's stack, Rails (ruby-rails), runs
the article's three per level, the others `beyond_repeats` (one): among them ruby-puma, the same
writes without Rails.

Its code: its tables of Puma's writes/s as users rise (the lab's window and hey's count), each
stack's peak and where errors begin, the napkin math of daily users, their findings, and its row of
the README.
"""
from __future__ import annotations

import functools
import json
from types import ModuleType

import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import STALL_MS, users
from sqlitelab.infra.servers import stack_title
from sqlitelab.report import analysis, capacity, claims, findings, summaries
from sqlitelab.studies.method import (
    Article, Detail, GEN_WHY, generator_flags, MACHINE_WHY, PIN_WHY, profile_knobs, profile_pragma, puma_knobs,
    puma_shape, crosscheck_client, recorded, software, stack_knob)


# What each constant means: sqlitelab.studies.declarations.
ID = "01-linear-writes"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "linear writes, seed 000"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "How many write requests per second can one SQLite file take? (seed 000)"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "throughput"

SCALES: dict[str, dict] = {
    # Quick keeps five of the article's six levels, each needed for the shape: 1 and 2 the rise,
    # 4 the peak of every stack on the reference machine, 10 (the article's peak) and 16 where the
    # Puma stacks' writers stall (Rails' busy timeout holds the GVL up to 5 s) while the others
    # stay flat. Not 8, between 4 and 10 on that flat stretch: each Puma stack's point there
    # stalled past its window, ruby-rails' for 9.0 s, ruby-puma's for 3.2 s (the quick run of
    # 2026-11-28 at b4af89a), and the 01 quick runs of 2026-11-28 took 175-208 s. No warm-up,
    # as the article's hey ran, and 2-s windows (2.5 s until 2026-11-28, whose runs went over
    # quick's 150 s a notebook: a Puma stack's stall of 5-14 s outlasts either): the 0.5 s of
    # warm-up each point paid went into its window (three runs on 2026-11-27: windows 60 %, 57 % and 63 % of the sweeps' wall
    # time, against 48 % before; ruby-puma's answers after a window closed took most of the rest).
    # No ramp inside a window without warm-up: go-nethttp at 1, 2 and 4 users, three runs with
    # none and three with 0.5 s alternated (2026-11-27): a window's second second completed more
    # than its first in 2 of the 9 windows without warm-up and 3 of the 9 with it; the runs that
    # were slow were slow at every level (the machine's state, not the start).
    # hey, the article's tool, runs at crosscheck_users: at quick one level, 2, where neither Puma
    # stack stalls (the quick run of 2026-11-28: ruby-rails answered what was in flight 8.3 s
    # after its 2.5-s window at 4 users and hey counted 17 writes/s there; at 2 users, neither
    # stack had anything in flight), so that hey and the lab's generator measure a steady server
    # rather than two draws of a 5-10-s stall; at seed three, one per stretch of the curve (one
    # user, the peak, the article's last level)
    # Both scales drive load with loadgen, a Go client as hey is: Locust set the pace at almost
    # every quick level of the compiled stacks (the quick run of 2026-11-26 at 3e90405: 23 of its
    # 24 points), each then measured again with loadgen, which was what the figures showed; at
    # seed the reference run (82710e9) spent 330 of its 1,078 s measuring 22 Locust-bound levels
    # again with loadgen (ruby-puma's four among them).
    # Puma's workers (worker_counts, beside the main run's puma_workers): the article's stack at
    # each count × puma_threads, `beyond_repeats` runs per level of worker_levels, at seed scale:
    # one, two and four workers (this machine gives the server one or two cores) at five levels
    # up to the article's last, 16 (in the seed run of 2026-11-28 at 0f6a81e every shape peaked at
    # 1-2 users and stalled from 4, 32 and 64 users included), the article's 10 workers being the
    # main run. Quick runs none: Rails' stalls (5 s and more)
    # outlast its windows, so a quick point past the peak measures where a stall fell (the
    # quick run of 2026-11-28, one worker: 22 writes/s at 4 users, 355 at 10), and the sweep took
    # 46 s of its 208.
    # The stacks the article did not run take `beyond_levels` at seed: four of the article's eight
    # (its seed run of 2026-11-28 at d027339 took 1,172 s of its 800, 320 s of windows on those
    # four stacks at eight levels).
    # The stacks beyond the article's take four of those five at quick, all but 10 (the article's
    # peak, which its own stack keeps; 2 stays for hey's cross-check), so that quick holds every
    # bundled stack: with all seven at five levels, 01 quick took 167 s of its 150 (2026-12-02 at
    # 9ee6dc4).
    "quick": {"levels": [1, 2, 4, 10, 16], "beyond_levels": [1, 2, 4, 16], "duration": 2.0,
              "warmup": 0.0, "repeats": 1,
              "beyond_repeats": 1, "crosscheck_users": [2], "ceiling_seconds": 2.0,
              "generator": "loadgen", "worker_counts": [], "worker_levels": [1, 2, 4, 10]},
    "seed": {"levels": [1, 2, 4, 8, 10, 16, 32, 64], "beyond_levels": [1, 4, 16, 64], "duration": 10.0,
             "warmup": 0.0, "repeats": 3,
             "beyond_repeats": 1, "crosscheck_users": [1, 4, 16], "ceiling_seconds": 2.0,
             "generator": "loadgen", "worker_counts": [1, 2, 4],
             "worker_levels": [1, 2, 4, 8, 16]},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget). The Puma stacks'
# stalls hold answers up to 14 s past a window (timing's "requests in flight answered": 60 s of
# the 160 s of sweeps of the quick run of 2026-11-28 at b4af89a), so its budget has that margin.
# Quick: 125.5 s with every bundled stack (make run of 2026-12-02 at d3a296c, fresh clone), 141.0 s
# alone an hour before. Seed: 870 s (make seed of 2026-11-29 at 922307f, fresh clone), 814 s alone
# (2026-11-29 at 382b690).
BUDGET_SECONDS: dict[str, float] = {"quick": 145, "seed": 930}

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = {""}

# Its experiments in plain words (declarations.experiment_title): the article's sweep, and Puma's
# workers on the article's stack.
EXPERIMENT_TITLES: dict = {r"workers-(\d+)": lambda n: f"{n} Puma worker{'s' if int(n) != 1 else ''}"}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["ruby-rails", "go-nethttp"],
               "levels": [1, 2],
               "beyond_levels": [1, 2],
               "worker_counts": [1],
               "worker_levels": [2],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "Look for the level where the curve stops rising, beside the article's line (both counted as "
        "its tool, hey, counts: every request over the whole run; the exact-window rates are in the "
        "table above): past it more users only queue, and a curve that stops well before the Puma "
        "threads (workers × threads, in the method table) ran out of something else first — the "
        "server's core, or SQLite's one writer.",
    "latency":
        "Look for p50 and p99 climbing from the level where throughput stopped rising: from there an "
        "added user adds waiting time, not writes.",
    "workers":
        "One line per Puma shape on the same stack: look for the level where each line stops rising, "
        "and whether it sits at the shape's threads (workers × threads) or below them, where the "
        "server's cores ran out first.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000",
        "Stephen Margheim, “SQLite Myths: Linear writes don't scale” (2023)", (
    Detail("machine", "MacBook Pro 16″ (2021), Apple M1 Max (10 cores), 32 GB, macOS 12.5.1",
           "col:machine", why=MACHINE_WHY),
    Detail("software", "Ruby 3.2.2, Rails 7.1.2, sqlite3-ruby gem 1.6.9, SQLite 3.44.2",
           software("ruby-rails", ("ruby", "rails", "puma", "sqlite3-ruby")), expect=None,
           why="Debian 12's packages (no RubyGems here): Rails 6.1 on Ruby 3.1, an older gem and "
               "SQLite. Rails 6.1 has neither 7.1's default pragmas nor its `retries:` (the profile's "
               "knobs install them: servers/ruby-rails/README.md); Ruby 3.1's YJIT is an earlier "
               "one; both gems wait on a lock in sqlite3_busy_timeout holding Ruby's GVL, the "
               "collapse the article met"),
    Detail("YJIT", "enabled (RUBY_YJIT_ENABLE=1, Ruby 3.2's YJIT)", stack_knob("ruby-rails", "yjit"),
           expect=None, why="Ruby 3.1's YJIT here (Debian 12's Ruby), an earlier version of it than "
                            "the article's, when on; the notebook's `yjit` parameter turns it off"),
    Detail("server CPUs", "all 10 cores, shared with hey", "cpus:server_pinning", expect=10,
           why=PIN_WHY),
    Detail("application", "the Rails 7.1.2 scaffold's `create` (production env, logging off): one "
           "INSERT, then a 302 to the show page", "col:server", expect=None,
           why="ruby-rails is a Rails 6.1 app whose `create` does the same, in production mode "
               "with its log at warn; beside it, the same writes without Rails (ruby-puma, a Rack app "
               "with Rails' SQLite settings) and in each other stack (one INSERT, 302 to a ~1.5 KB "
               "show page)"),
    Detail("Puma workers × threads", "10 × 3 (WEB_CONCURRENCY=10, RAILS_MAX_THREADS=3)",
           puma_shape("ruby-rails"), expect="10 × 3", why="set by the notebook's puma_workers/puma_threads"),
    Detail("journal mode", "WAL (Rails 7.1 default)", "pragma:journal_mode",
           expect=profile_pragma("rails71", "journal_mode"), why="the profile sets another"),
    Detail("synchronous", "NORMAL (Rails 7.1 default)", "pragma:synchronous",
           expect=profile_pragma("rails71", "synchronous"), why="the profile sets another"),
    Detail("transactions", "deferred (Rails 7.1)", "knob:txn_mode",
           expect=profile_knobs("rails71")["txn_mode"], why="the profile sets another"),
    Detail("busy handling", "`timeout: 5000`: SQLite's busy_timeout, which holds Ruby's GVL while "
           "it waits", "knob:busy", expect=profile_knobs("rails71")["busy"], why="the profile sets another"),
    Detail("request", "POST /requests; hey follows the 302 to the show page", "col:scenario",
           expect="rails-writes", why="another scenario"),
    Detail("load tool", "hey -c N -z 10s -m POST (Go net/http client)", "col:generator",
           expect=None, why=GEN_WHY),
    Detail("generator flags", "— (one tool, no check of it)", generator_flags, expect=None,
           why="the lab flags a level its generator may have limited, and measures it again where the "
               "notebook confirms (docs/method.md, 'The load generator is never the story')"),
    Detail("the article's tool, here", "hey -c N -z 10s -m POST, following the redirect",
           crosscheck_client, expect=None,
           why="hey v0.1.5, built from its Go module, runs the cross-check levels for `warmup + "
               "duration` s with no warm-up of its own, as the article ran it; its numbers beside "
               "the lab's generators' in the cross-check table (theirs counted as hey counts)"),
    Detail("keep-alive", "on (hey's default)", "col:keepalive", expect=True,
           why="the run used a new connection per request"),
    Detail("concurrency levels", "1, 2, 4, 8, 10, 16", "param:levels", expect=[1, 2, 4, 8, 10, 16],
           compare="superset", why="the run's levels do not include all of the article's"),
    Detail("duration", "10 s per run", "param:duration", expect=10,
           why="shorter runs at this scale"),
    Detail("warm-up", "none: each hey run starts at full concurrency", "param:warmup", expect=0,
           why="the lab warms up before its exact window; the hey columns count the warm-up too"),
    Detail("repeats", "3 runs per level: RPS and average the mean, slowest the max",
           "param:repeats", expect=3, why="fewer repeats at this scale"),
    Detail("repeats, the stacks the article did not run", "— (Rails only)",
           "param:beyond_repeats", expect=None,
           why="the lab's own stacks run `beyond_repeats` per level (one at seed scale, so "
               "that the seed run fits its 90 minutes); the article's stack runs its three"),
    Detail("throughput", "hey's Requests/sec: every response (any status) over the run's Total, "
           "which runs on until the last request in flight ends (15.0, 13.7, 12.6 s at 16 users)",
           recorded("hey_rps", "the window's rps (requests that start and finish inside it) "
                               "and hey's (every response over the whole run)"), expect=None,
           why="both are recorded; the comparison with the article uses the hey columns"),
    Detail("latency", "Average and Slowest over every response, the 5-s stalls included",
           recorded("hey_max_ms", "the window's percentiles, and hey's average and slowest over "
                                  "the whole run"), expect=None,
           why="both are recorded; the comparison with the article uses the hey columns"),
))


# --------------------------------------------------------------------------- its code

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


def level_runs(points: pd.DataFrame, server: str, profile: str, users) -> list[float]:
    """The writes/s of each run of one level (a stack, profile and number of users)."""
    return points.loc[(points["server"] == server) & (points["profile"] == profile)
                      & (points["users"] == users), "rps"].tolist()


def runs_of(points: pd.DataFrame):
    """level_runs over `points`, as the throughput figure takes each level's runs
    (plots.throughput_chart's `runs`: a level of two runs or more drawn with the 95 % interval of
    its mean over them, one of a single run with none)."""
    return functools.partial(level_runs, points)


def linear_writes(table: pd.DataFrame, points: pd.DataFrame | None = None) -> str:
    """Markdown sentences about where throughput peaks and where errors begin; a peak measured
    in two runs or more (`points`, the runs `table` combines) with its interval over them."""
    lines = []
    for r in peak(table).itertuples():
        if not findings.finished(r.peak_rps):
            lines.append(f"- **{stack_title(r.server)}** ({r.profile}): at every level, up to {r.max_users} users, {findings.STALLED}.")
            continue
        runs = [] if points is None else level_runs(points, r.server, r.profile, r.peak_users)
        rate = (intervals.shown(intervals.mean_interval(runs), " writes/s") if len(runs) >= 2
                else f"{r.peak_rps:,.0f} writes/s")
        top = r.max_users == r.peak_users and (table["server"] == r.server).sum() > 1
        s = (f"- **{stack_title(r.server)}** ({r.profile}): " +
             (f"its highest rate, **{rate}**, at {users(r.peak_users)}, the highest level run: "
              f"no peak within the levels (a lower bound on it)" if top else
              f"throughput peaks at **{rate}** with {users(r.peak_users)}"))
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


def puma_shape_words(workers: int, threads: int) -> str:
    """"10 workers × 3 threads": a worker sweep's series in plain words."""
    return f"{workers} worker{'s' if workers != 1 else ''} × {threads} thread{'s' if threads != 1 else ''}"


def workers_points(df: pd.DataFrame) -> pd.DataFrame:
    """The worker sweep's points (and the main run's on the same stack), each labelled with its
    Puma shape as /health reported it (`puma`), for one line per shape."""
    return df.assign(puma=[puma_shape_words(int(p), int(t))
                           for p, t in zip(df["server_processes"], df["server_threads"])])


def workers_peaks(df: pd.DataFrame) -> pd.DataFrame:
    """Per Puma shape: the level of the highest mean throughput in the window, that throughput,
    and where errors or stalls begin (peak's rule), in the shapes' order of workers."""
    pts = workers_points(df)
    table = analysis.over_repeats(pts, ["puma", "server_processes", "profile", "users"],
                                  ["rps", "errors", "busy_errors"]
                                  + (["max_overrun_ms"] if "max_overrun_ms" in pts else []))
    best = peak(table.rename(columns={"puma": "server"}))
    workers = table.drop_duplicates("puma").set_index("puma")["server_processes"]
    return (best.rename(columns={"server": "puma"}).assign(workers=lambda d: d["puma"].map(workers))
            .sort_values("workers").reset_index(drop=True))


def workers_finding(peaks: pd.DataFrame, server_cpus: str) -> str:
    """Markdown: each Puma shape's peak (level and writes/s) and where errors begin, on the
    server's CPUs."""
    lines = [f"The server ran on CPU(s) {server_cpus}. Each Puma shape's peak in the window:"]
    for r in peaks.itertuples():
        if not findings.finished(r.peak_rps):
            lines.append(f"- **{r.puma}**: at every level, {findings.STALLED}.")
            continue
        errs = (f"errors or stalls from {int(r.errors_from_users)} users" if pd.notna(r.errors_from_users)
                else "no errors at any level")
        lines.append(f"- **{r.puma}**: {r.peak_rps:,.0f} writes/s with {users(r.peak_users)}; {errs}.")
    return "\n".join(lines)


def napkin(peak_rps: float, writes_per_user: float = 35, peak_hours: float = 4,
           runs: list[float] | None = None) -> str:
    """Seed 000's napkin math applied to a measured peak, at the precision its level's `runs`
    support (their mean and its 95 % interval; one run or none given: three figures)."""
    if not findings.finished(peak_rps):
        return f"No napkin math: {findings.STALLED.replace('its window', 'any window')}, so there is no peak."
    at = analysis.rate_with_runs(peak_rps, runs)
    per_day, dau = (intervals.scaled(at, f(1.0)) for f in (
        lambda r: capacity.requests_per_day(r, peak_hours) / 1e6,
        lambda r: capacity.daily_active_users(r, writes_per_user, peak_hours)))
    return (f"At **{intervals.shown(at, ' writes/s')}**, with a day's writes packed into {peak_hours:g} peak "
            f"hours, this server absorbs **{intervals.rounded(per_day)} million writes per day** — "
            f"**{intervals.rounded(dau)} daily active users** at {writes_per_user:g} writes each "
            f"(the article: ~2,500/s → 35 M/day → 1 M DAU).")


def napkin_table(table: pd.DataFrame, first: str, writes_per_user: float = 35,
                 peak_hours: float = 4, points: pd.DataFrame | None = None) -> pd.DataFrame:
    """Seed 000's napkin math on each stack's peak (`first`, the article's stack, on top):
    writes/day with the day packed into `peak_hours`, and daily active users at
    `writes_per_user` writes each, each at the precision the peak's level's runs in `points`
    support (intervals.rounded; without them, three figures)."""
    best = peak(table)
    best = best.assign(_order=best["server"] != first).sort_values(["_order", "peak_rps"],
                                                                   ascending=[True, False])
    at = [analysis.rate_with_runs(r.peak_rps, level_runs(points, r.server, r.profile, r.peak_users)
                        if points is not None else None) for r in best.itertuples()]
    return pd.DataFrame({
        "server": best["server"], "profile": best["profile"], "peak_rps": best["peak_rps"],
        "at_users": best["peak_users"], "lower_bound": best["peak_generator_bound"],
        "writes_per_day_M": [intervals.rounded(intervals.scaled(
            a, capacity.requests_per_day(1.0, peak_hours) / 1e6)) if a.estimate > 0 else "0" for a in at],
        "dau": [intervals.rounded(intervals.scaled(a, capacity.daily_active_users(1.0, writes_per_user, peak_hours)))
                if a.estimate > 0 else "0" for a in at],
    }).reset_index(drop=True)


def napkin_first(napkin_rows: pd.DataFrame, points: pd.DataFrame, writes_per_user: float = 35,
                 peak_hours: float = 4) -> str:
    """napkin() on the first stack of napkin_table (the article's), with its peak level's runs."""
    if napkin_rows.empty:
        return napkin(float("nan"), writes_per_user, peak_hours)
    r = napkin_rows.iloc[0]
    return napkin(r["peak_rps"], writes_per_user, peak_hours,
                  level_runs(points, r["server"], r["profile"], r["at_users"]))


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 000: the article's stack's writes/s as users rise (the stack the run names as the
    article's), where it collapses, and the napkin math."""
    ref, meta = analysis.reference("seed000_linear_writes")
    art_curve = dict(zip(ref["users"], ref["rps"]))
    art_peak = ref.loc[ref["rps"].idxmax()]
    art_errors = ref.loc[ref["errors_3_runs"] > 0, "users"]
    article = (f"Puma 10 × 3, Rails 7.1 ({meta['hardware'].split(';')[0]}), `hey -z 10s`, 3 runs per level: "
               f"{claims.collapse_words(art_curve)}; average {art_peak.mean_ms:g} ms at the peak; "
               f"napkin math on ~2,500/s: 35 M writes/day, 1 M DAU")
    pts = summaries.points(study, x)
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    stack = summaries.parameter(study, x, "article_server", "ruby-rails")
    name = stack_title(stack)
    table = seed_table(pts)
    ours = table[table["server"] == stack]
    parts = []
    for profile, g in ours.groupby("profile", sort=True):
        curve = dict(zip(g["users"], g["rps"]))
        busy = g[g["busy_errors"] > 0]
        best = g.loc[g["rps"].idxmax()]
        knobs = pts.loc[(pts["server"] == stack) & (pts["profile"] == profile), "knobs"]
        yjit = {json.loads(k).get("yjit") for k in knobs.dropna()} - {None}
        yjit_words = f", YJIT {'/'.join(sorted(yjit))}" if yjit else ""  # runs before LAB_YJIT: unknown
        at_peak = analysis.rate_with_runs(best["rps"], level_runs(pts, stack, profile, best["users"]))
        text = (f"{name} (`{profile}`{yjit_words}) on {summaries.server_cores(study, x)}, "
                f"{summaries.run_shape(pts[pts['server'] == stack])}: "
                f"{claims.collapse_words(curve, peak=intervals.shown(at_peak, '/s'))}{summaries.limit(best)} — "
                f"{claims.shape_words(curve, art_curve, errors_here=busy['users'].min() if len(busy) else None, errors_article=art_errors.min() if len(art_errors) else None)}")
        text += ("; its errors: 'database is locked'" if len(busy) else "; no 'database is locked' at any level")
        per_day, dau = (intervals.scaled(at_peak, f(1.0) / 1e6) for f in (capacity.requests_per_day,
                                                                          capacity.daily_active_users))
        text += (f". Napkin math on that peak, at its precision: {intervals.rounded(per_day, ' M')} writes/day, "
                 f"{intervals.rounded(dau, ' M')} DAU")
        parts.append(text)
    checks = x.get("crosschecks", pd.DataFrame())
    hey = checks[(checks["notebook"] == study.ID) & (checks["generator"] == "hey")
                 & (checks["server"] == stack) & checks["skipped"].isna()] if len(checks) else checks
    if len(hey):
        lab = pts[pts["server"] == stack].groupby("users")["hey_rps"].mean()
        parts.append(f"hey itself on {name} (the article's tool, here): " + ", ".join(
            f"{summaries.once(r.rps, '/s')} at {users(r.users)}" + (
                f" (the lab's generator, counted as hey counts: {summaries.once(lab[r.users], '/s')})"
                if r.users in lab else "")
            for r in hey.sort_values("users").itertuples()))
    others = peak(table[table["server"] != stack])
    if len(others):
        said, repeated = [], False
        for r in others.itertuples():
            at_peak = analysis.rate_with_runs(r.peak_rps, level_runs(pts, r.server, r.profile, r.peak_users))
            repeated |= at_peak.n > 1
            rate = intervals.shown(at_peak, "/s") if at_peak.n > 1 else summaries.once(r.peak_rps, "/s")
            said.append(f"{stack_title(r.server)} {rate} ({users(r.peak_users)})")
        parts.append("Peaks in the exact window: " + ", ".join(said)
                     + ("" if repeated else " (one run per level: no interval)"))
    c = summaries.ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {summaries.once(c['commits_per_s'])} one-row commits/s "
                     f"(synchronous={c.get('synchronous', 'normal')})")
    return article, summaries.sentences(parts)
