"""Notebook 05, one machine, one file (seed 004): how far do reads, big pages and writes go?
Everything that is this notebook's, declared once.

The article states no warm-up, repeats or duration: one 10-s run per level, no warm-up. Both
scales drive load with loadgen (`generator`): the article states no load tool, and Locust was
the limit at 45 of the 48 seed levels (2026-11-22) and at every quick level of the compiled stacks
(the quick run of 2026-11-26 at 3e90405), each then measured again with loadgen, which is
what was reported.
"""
from __future__ import annotations

from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, NOT_STATED, ONE_FILE, PIN_WHY, RunView, recorded, stack_knob)

# What each constant means: sqlitelab.studies.registry.
ID = "05-single-machine"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "one machine, seed 004"

SCALES: dict[str, dict] = {
    # Quick: one level between the seed's first two (each endpoint's rate, not a curve), 1.5-s
    # windows, and no wrk cross-check (quick's loadgen is the one calibrated against wrk at
    # set-up; the per-endpoint cross-check is the seed's).
    "quick": {"users_rows": 100_000, "user_bytes": 700, "levels": [32], "duration": 1.5,
              "warmup": 0.3, "repeats": 1, "crosscheck_users": None, "crosscheck_seconds": None,
              "generator": "loadgen", "ceiling_seconds": 2.0},
    # Seed: wrk checks each stack and endpoint for 3 s at 64 users (a rate, not a curve: its 20
    # points of 10 s were 215 of the 968 s of a seed run of 2026-11-26, of 5 s 115 of 878).
    "seed": {"users_rows": 5_000_000, "user_bytes": 700, "levels": [16, 64, 256],
             "duration": 10.0, "warmup": 0.0, "repeats": 1, "crosscheck_users": 64,
             "crosscheck_seconds": 3.0, "generator": "loadgen", "ceiling_seconds": 2.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 75, "seed": 920}

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (sqlitelab.studies.registry.experiment_title): none of its own: each is a scenario, or a profile and a scenario, named by theirs.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["go-nethttp", "python-fastapi"],
               "users_rows": 2000,
               "levels": [4],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "rps":
        "Look for the endpoints whose bars clear Twitter's and Yahoo's lines on this machine, and "
        "how far each stack is from the article's Go on 8 cores.",
    "mbit":
        "Look for the page endpoint: there bytes, not requests, become the limit.",
    "rss":
        "Look for the stacks whose memory grows with the endpoint's page size: memory, not CPU, "
        "would size their machine.",
}

def article_pool(run: RunView) -> list:
    """go-nethttp's pool (LAB_POOL, from /health) under the run's own `profile`."""
    return run.where(server="go-nethttp", profile=run.param("profile")).knob("pool")


def beyond_pool(run: RunView) -> list:
    """go-nethttp's pool under the run's `beyond_profile`: its second set of rows."""
    return run.where(server="go-nethttp", profile=run.param("beyond_profile")).knob("pool")


# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "004", "“SQLite is the best database in the world” (Go on a laptop)", (
    Detail("machine", "MacBook Air M1 (8 cores), 8 GB", "col:machine", why=MACHINE_WHY),
    Detail("server CPUs", "all 8 cores, shared with the load tool", "cpus:server_pinning", expect=8,
           why=PIN_WHY),
    Detail("Go threads", "GOMAXPROCS = 8 (every core)", stack_knob("go-nethttp", "threads"),
           expect=8, why="GOMAXPROCS follows the server's CPUs here"),
    Detail("DSN: shared cache", "?cache=shared", "knob:cache", expect="shared",
           why="the profile does not set it"),
    Detail("connection pool (Go)", "database/sql's defaults: `sql.Open` and no SetMaxOpenConns — no "
           "limit on open connections, 2 kept idle, each opened when a request needs one",
           article_pool, expect="default",
           why="the profile fixes go-nethttp's pool (LAB_POOL)"),
    Detail("connection pool (Go), beyond the article", "— (the article ran one pool)", beyond_pool,
           expect=None, why="a variant the article did not run, its own rows and table: the "
                            "`beyond_profile` on go-nethttp, a fixed pool of LAB_READERS connections "
                            "(one per server core) opened at start-up"),
    Detail("DSN: journal mode", "&_journal_mode=WAL", "pragma:journal_mode", expect="wal",
           why="another journal mode"),
    Detail("synchronous", "NORMAL (what mattn/go-sqlite3 sets when the DSN does not)",
           "pragma:synchronous", expect="normal", why="another synchronous"),
    Detail("users table", "“millions of users … a file of multiple GBs”",
           lambda r: f"{r.param('users_rows'):,} users, {max(r.col('db_mib')) / 1024:.2f} GiB",
           expect=None, why="the size the scale seeds; the share of it in the page cache is "
                            "reported per level"),
    Detail("read", "SELECT * FROM userinfo WHERE uid = ? (a random uid), a small template",
           "col:scenario", expect=None, only={"scenario": "user-read"},
           why="the lab selects the four columns its templates show; the row's page is read either way"),
    Detail("update", "UPDATE userinfo SET departname = ? WHERE uid = ?, then SELECT *: two autocommit "
           "statements", "col:scenario", expect=None, only={"scenario": "user-update"},
           why="one transaction: the UPDATE (which also counts updates, for the audit) and the re-SELECT"),
    Detail("load tool, users, duration", "not stated", "col:generator", expect=NOT_STATED,
           why="the scale's generator: loadgen at seed scale, where Locust set the pace on these "
               "endpoints (scales.py); Locust, confirmed by loadgen where it did, at quick scale"),
    Detail("warm-up", "not stated", "param:warmup", expect=NOT_STATED),
    Detail("repeats", "not stated", "param:repeats", expect=NOT_STATED),
    Detail("database file", "one users.sqlite for every test, a server program per endpoint",
           recorded("db_mib", ONE_FILE), expect=ONE_FILE,
           why="the run used another arrangement"),
))
