"""Notebook 07, SQLite or Postgres? (no article: the readers' "why not Postgres?", issue 15): the
seed workloads, declared once, each run on both databases by the same servers with the same load.
Everything that is this notebook's, declared once.

Each workload is one of the collection's article workloads with the profile its notebook runs
(01: seed 000's Rails writes; 02: seed 001's ten-statement request with the fixed Rails 8 set-up;
03: seed 002's 90/10 mix through one writer; 05: seed 004's read, 100 KB page and update). On
Postgres the profile's SQLite-only knobs (pragmas, transaction mode, busy handler) fall away and
its `synchronous` picks Postgres' commit durability (sqlitelab.infra.postgres.durability_for).

Seed scale: one 5-s run per level, two levels (8 and 64 users: every workload, stack and
database is 112 levels), on 100,000 users rows (seed 004's 5 M would take minutes to copy into
each Postgres).
"""
from __future__ import annotations

from sqlitelab.core.vocabulary import store_label, store_title

from dataclasses import dataclass, field

from sqlitelab.studies import busy_errors, linear_writes, read_write_mix, single_machine
from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, postgres_durability, postgres_memory, stores)

# What each constant means: sqlitelab.studies.registry.
ID = "07-sqlite-vs-postgres"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "SQLite vs Postgres"

SCALES: dict[str, dict] = {
    # Quick: the seed's first level only (8 users, so a quick ratio meets a seed one on the same
    # level), 1-s windows, and no Postgres behind a link: 48 server starts (seed 004's three
    # endpoints each start their own) and 16 Postgres clusters leave no room for a second level
    # or the link within the notebook's budget. The ratio is then the one level's, not the best of two;
    # the throughput curves and the link are left to the seed scale.
    "quick": {"levels": [8], "duration": 1.0, "warmup": 0.3, "repeats": 1,
              "users_rows": 10_000, "user_bytes": 700, "db_delays_us": [], "ceiling_seconds": 1.0},
    "seed": {"levels": [8, 64], "duration": 5.0, "warmup": 0.5, "repeats": 1,
             "users_rows": 100_000, "user_bytes": 700, "db_delays_us": [100, 500],
             "ceiling_seconds": 2.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 130, "seed": 760}  # quick: 112-116 s, seed: 712-717 s (2026-11-26/27)

SERVER_SPLIT: int | None = None

IN_COLLECTION = True


@dataclass(frozen=True)
class Workload:
    seed: str                 # the article (seeds/000 ...)
    notebook: str             # the notebook that reproduces it on SQLite
    scenarios: tuple[str, ...]  # one sweep runs them in turn on one database per server
    profile: str              # servers/profiles.toml
    what: str                 # one line for tables and captions
    scenario_params: dict = field(default_factory=dict)
    seed_items: int = 0       # rows the database holds before the load
    payload_bytes: int = 2048
    seeds_users: bool = False  # seeded with the scale's `users_rows` wide users rows


WORKLOADS: dict[str, Workload] = {
    "000-writes": Workload("000", linear_writes.ID, ("rails-writes",), "rails71",
                           "seed 000: POST /requests, one INSERT per request (Rails 7.1)"),
    "001-metrics": Workload("001", busy_errors.ID, ("metrics-writes",), "rails8",
                            "seed 001: POST /metrics, ten statements in one transaction (Rails 8)"),
    "002-mix": Workload("002", read_write_mix.ID, ("mix",), "single-writer",
                        "seed 002: 90 % GET /items, 10 % POST /items of 2 KB, one writer",
                        scenario_params={"write_share": 0.1}, seed_items=1000),
    "004-users": Workload("004", single_machine.ID, ("user-read", "user-page", "user-update"),
                          "go-seed004", "seed 004: GET /users/{uid}, its 100 KB page, POST /users/{uid}",
                          seeds_users=True),
}


def workload_of(experiment: str) -> str:
    """The WORKLOADS key of a point's experiment (`002-mix/sqlite`, `004-users/postgres/user-read`,
    `001-metrics/postgres-link-100us`)."""
    head = str(experiment).split("/", 1)[0]
    if head not in WORKLOADS:
        raise ValueError(f"experiment {experiment!r} names no workload of {', '.join(WORKLOADS)}")
    return head


def experiment(workload: str, database: str, db_link_delay_us: int | None = None) -> str:
    """A workload's run on one database (each its own run folder: the levels of two databases
    never share one), `<workload>/<database>[-link-<n>us]`."""
    return f"{workload}/{database}" + (f"-link-{db_link_delay_us}us" if db_link_delay_us is not None else "")


def check(workloads: list[str]) -> list[str]:
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        raise ValueError(f"workloads must name some of {', '.join(WORKLOADS)}, not {workloads!r}")
    return list(workloads)


def experiments() -> set[str]:
    """Every experiment a workload's run on a database is stored as (not the linked ones)."""
    return {experiment(name, db) + ("" if len(w.scenarios) == 1 else f"/{s}")
            for name, w in WORKLOADS.items() for s in w.scenarios for db in ("sqlite", "postgres")}


# Each workload on each database, not Postgres behind a link.
HEADLINE_EXPERIMENTS: set[str] | None = experiments()

# Its experiments in plain words, by id or pattern (sqlitelab.studies.registry.experiment_title).
EXPERIMENT_TITLES: dict = {r"(\d{3})-[a-z]+": "seed {}'s workload",
                           r"(sqlite|postgres)(?:-link-(\d+)us)?": lambda db, link: store_title(store_label(db, link))}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["rust-axum", "ruby-puma"],
               "workloads": ["001-metrics", "004-users"],
               "db_link_workloads": ["001-metrics"],
               "levels": [4],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1,
               "users_rows": 200,
               "db_delays_us": [500],
               "figure_workload": "001-metrics"}
STORES: str | None = "points"

READING: dict[str, str] = {
    "ratio":
        "Bars right of 1: SQLite served more requests per second than Postgres, each at its best level measured, "
        "with the same server code on the same cores (left of 1, Postgres did; hatched, the generator "
        "set the pace of one of the two, so that ratio is a bound).",
    "throughput":
        "Solid lines SQLite, dashed Postgres, one colour per stack: where the two lines of a colour part, "
        "the database (not the stack) sets the pace; where they run together, the application does.",
    "db-link":
        "Each of seed 001's ten statements per request waits a round trip when Postgres has a host of "
        "its own: the bars fall with the link's delay, which SQLite, inside the server, never pays.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 001, 002, 004", "the articles' workloads, on Postgres too", (
    Detail("database", "SQLite only: every article argues against “just use Postgres” without "
           "measuring it", stores, expect=["sqlite"],
           why="this notebook's question: the same servers and load on a real Postgres 15 beside "
               "SQLite (sqlitelab.infra.postgres), and Postgres on a host of its own (a delayed link)"),
    Detail("application code", "each article's own server", "col:server", expect=None,
           why="the lab's four servers, one code path per stack with a database seam: the same "
               "endpoints, statements, transactions and acknowledgements on both databases"),
    Detail("durability", "SQLite's synchronous as each profile sets it (NORMAL for Rails; FULL "
           "for seed 002's drivers, inferred: its article does not state it; OFF for seed 004)",
           postgres_durability, expect=None,
           why="Postgres has no `synchronous`: the commit durability that makes the same promise "
               "(synchronous_commit=off beside NORMAL: a crash may lose the last commits, never "
               "consistency; on beside FULL; fsync=off beside OFF)"),
    Detail("Postgres memory", "—", postgres_memory, expect=None,
           why="sized to the machine (a quarter of RAM for shared_buffers, at most 8 GB, half for "
               "effective_cache_size); every other setting Postgres' default but WAL for one "
               "machine (wal_level=minimal, no replicas, as SQLite's WAL)"),
    Detail("connections to the database", "SQLite: in-process connections (Rails' pool, one "
           "writer in seed 002)", "knob:readers", expect=None,
           why="SQLite: each stack's default, which follows its CPUs (one connection for Go and Axum "
               "on one core: SQLite works inside the process); Postgres: the notebook's "
               "postgres_readers per process (8 by default, about what the drivers' own pools give a "
               "small machine: pgxpool max(4, CPUs), deadpool 4 × CPUs, Rails 5), plus the writer's in "
               "writer/batch mode, since every statement waits a round trip and one connection would "
               "serialise the server on it; over its unix socket (or TCP through the link)"),
    Detail("where the database runs", "inside the server's process, on the server's CPUs",
           "cpus:server_pinning", expect=None,
           why="Postgres is pinned to the server's CPUs and its CPU counted with the server's, so "
               "both databases get the same cores"),
    Detail("load tool", "hey (000), oha (001), the author's own Rust tool on reqwest + tokio "
           "(002), not stated (004)",
           "col:generator", expect=None,
           why="one generator for every row (loadgen by default, calibrated against wrk), so its "
               "own cost is the same on both databases"),
    Detail("windows", "000: 10 s; 001: 5 s; 002: 50,000 requests; 004: not stated",
           "param:duration", expect=None,
           why="one window length for every workload, so that each pair is measured alike"),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))
