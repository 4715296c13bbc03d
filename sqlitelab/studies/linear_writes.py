"""Notebook 01, linear writes (seed 000): how many write requests per second can one SQLite
file take? Everything that is this notebook's, declared once.

Seed scale keeps the article's levels, 10-s runs and three repeats, with no warm-up (hey
measured from the moment its users were running); the stacks the article did not run get
`beyond_repeats` runs per level (one), ruby-puma the article's three.
"""
from __future__ import annotations

from sqlitelab.studies.method import (
    Article, Detail, GEN_WHY, MACHINE_WHY, PIN_WHY, profile_knobs, profile_pragma, puma_shape,
    crosscheck_client, recorded, software, stack_knob)

# What each constant means: sqlitelab.studies.registry.
ID = "01-linear-writes"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "linear writes, seed 000"

SCALES: dict[str, dict] = {
    # Quick keeps the article's six levels, each needed for the shape: 1 and 2 the rise, 4 the
    # peak of every stack on the reference machine, 8, 10 and 16 where ruby-puma's writers stall
    # (Rails 7.1's busy handler holds the GVL up to 5 s) while the others stay flat. No warm-up,
    # as the article's hey ran, and 2.5-s windows: the 0.5 s of warm-up each point paid went
    # into its window (three runs on 2026-11-27: windows 60 %, 57 % and 63 % of the sweeps' wall
    # time, against 48 % before; ruby-puma's answers after a window closed took most of the rest).
    # No ramp inside a window without warm-up: go-nethttp at 1, 2 and 4 users, three runs with
    # none and three with 0.5 s alternated (2026-11-27): a window's second second completed more
    # than its first in 2 of the 9 windows without warm-up and 3 of the 9 with it; the runs that
    # were slow were slow at every level (the machine's state, not the start).
    # hey, the article's tool, runs at crosscheck_users: at quick one level, 4, where every stack
    # peaks and ruby-puma stalls least (in the 01 runs stored on 2026-11-27 it stalled at 2 of
    # its 6 points at 4 users, at 5 of 6 at 8), so that hey and the lab's generator mostly
    # measure a steady server rather than two draws of a 5-10-s stall; at seed three, one per
    # stretch of the curve (one user, the peak, the article's last level)
    # Both scales drive load with loadgen, a Go client as hey is: Locust set the pace at almost
    # every quick level of the compiled stacks (the quick run of 2026-11-26 at 3e90405: 23 of its
    # 24 points), each then measured again with loadgen, which was what the figures showed; at
    # seed the reference run (82710e9) spent 330 of its 1,078 s measuring 22 Locust-bound levels
    # again with loadgen (ruby-puma's four among them).
    "quick": {"levels": [1, 2, 4, 8, 10, 16], "duration": 2.5, "warmup": 0.0, "repeats": 1,
              "beyond_repeats": 1, "crosscheck_users": [4], "ceiling_seconds": 2.0,
              "generator": "loadgen"},
    "seed": {"levels": [1, 2, 4, 8, 10, 16, 32, 64], "duration": 10.0, "warmup": 0.0, "repeats": 3,
             "beyond_repeats": 1, "crosscheck_users": [1, 4, 16], "ceiling_seconds": 2.0,
             "generator": "loadgen"},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget). Quick runs took
# 103-120 s on 2026-11-26: ruby-puma's stalls hold answers 3-8 s past a window
# (timing's "requests in flight answered", 23 s of 117 in the last), so its budget has that margin.
BUDGET_SECONDS: dict[str, float] = {"quick": 125, "seed": 800}

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (sqlitelab.studies.registry.experiment_title): none: its one sweep.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["ruby-puma", "go-nethttp"],
               "levels": [1, 2],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "Look for the level where the curve stops rising, beside the article's line (both counted as "
        "its tool, hey, counts: every request over the whole run; the exact-window rates are in the "
        "table above): there every Puma thread (workers × threads) is busy, and more users only queue.",
    "latency":
        "Look for p50 and p99 climbing from the level where throughput stopped rising: from there an "
        "added user adds waiting time, not writes.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000",
        "Stephen Margheim, “SQLite Myths: Linear writes don't scale” (2023)", (
    Detail("machine", "MacBook Pro 16″ (2021), Apple M1 Max (10 cores), 32 GB, macOS 12.5.1",
           "col:machine", why=MACHINE_WHY),
    Detail("software", "Ruby 3.2.2, Rails 7.1.2, sqlite3-ruby gem 1.6.9, SQLite 3.44.2",
           software("ruby-puma", ("ruby", "puma", "sqlite3-ruby")), expect=None,
           why="Debian 12's packages (no RubyGems here): an older Ruby, gem and SQLite; Puma, Rack "
               "and the lab's app instead of Rails"),
    Detail("YJIT", "enabled (RUBY_YJIT_ENABLE=1, Ruby 3.2's YJIT)", stack_knob("ruby-puma", "yjit"),
           expect="on", why="the notebook's `yjit` parameter turned it off (Ruby 3.1's YJIT here, "
                            "an earlier version of it, when on)"),
    Detail("server CPUs", "all 10 cores, shared with hey", "cpus:server_pinning", expect=10,
           why=PIN_WHY),
    Detail("application", "the Rails 7.1.2 scaffold's `create` (production env, logging off): one "
           "INSERT, then a 302 to the show page", "col:server", expect=None,
           why="a minimal app in each stack doing what the scaffold does (one INSERT, 302 to a "
               "~1.5 KB show page); no Rails, so less work per request"),
    Detail("Puma workers × threads", "10 × 3 (WEB_CONCURRENCY=10, RAILS_MAX_THREADS=3)",
           puma_shape, expect="10 × 3", why="set by the notebook's puma_workers/puma_threads"),
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
