"""Notebook 08, operations under load (no article: the operators' questions, issue 16): capacity
from offered load, and the day the backup runs. Everything that is this notebook's, declared once.

Seed scale: open-loop rates of 5-s windows and 30-s windows around each operation, on 5,000,000
users rows (seed 004's size).
"""
from __future__ import annotations

from sqlitelab.core.vocabulary import OPERATION_TITLES
from sqlitelab.infra.servers import stack_title
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY

# What each constant means: sqlitelab.studies.registry.
ID = "08-operations-under-load"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "operations under load"

SCALES: dict[str, dict] = {
    # Quick: six rates from well under the quick closed-loop peaks to past them (the hockey
    # stick's flat part, its knee and its wall) in 1.5-s windows, and 4-s windows with the
    # operation at second 1.5: every operation but Litestream's replication ended within 1.2 s
    # of its start at quick (2026-11-26 at 3e90405), so the window still shows the load before,
    # during and after it.
    "quick": {"levels": [8, 64], "rates": [2000, 4000, 8000, 12000, 16000, 20000],
              "open_users": 64,
              "duration": 1.5, "warmup": 0.3, "op_duration": 4.0, "at_s": 1.5,
              "users_rows": 1_000_000, "fraction": 0.5},
    "seed": {"levels": [8, 16, 64], "rates": [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 18000, 20000, 24000],
             "open_users": 64, "duration": 5.0, "warmup": 0.5, "op_duration": 30.0, "at_s": 10.0,
             "users_rows": 5_000_000, "fraction": 0.5},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 125, "seed": 540}

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
# Its closed-loop levels (its open-loop rates: capacity.three_ways).
HEADLINE_EXPERIMENTS: set[str] | None = {"closed"}

# Its experiments in plain words, by id or pattern (sqlitelab.studies.registry.experiment_title).
EXPERIMENT_TITLES: dict = {"closed": "closed loop", "open": "open loop",
                           r"op/([a-z-]+)/([a-z-]+)": lambda op, server: f"{OPERATION_TITLES[op]} on {stack_title(server)}"}

# The workload, declared once: seed 002's 90/10 mix through one writer (notebook 03), on a
# database whose users table is large (the index builds on it; the mix never reads it).
# sqlitelab.notebooks.operations_under_load runs it.
WORKLOAD = {"scenario": "mix", "profile": "single-writer", "scenario_params": {"write_share": 0.1},
            "seed_items": 1000, "payload_bytes": 2048,
            "what": "seed 002's mix: 90 % GET /items/{id}, 10 % POST /items of 2 KB, one writer"}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["go-nethttp", "python-fastapi"],
               "levels": [4],
               "rates": [100, 400],
               "open_users": 16,
               "duration": 0.5,
               "warmup": 0.2,
               "op_duration": 2.0,
               "at_s": 1.0,
               "users_rows": 20000,
               "fraction": 0.5,
               "operations_run": ["checkpoint"]}
STORES: str | None = "points"

READING: dict[str, str] = {
    "hockey-stick":
        "Follow each stack's line to where it leaves the SLO line: below it the server keeps up "
        "with what arrives and p99 is its own service time; past the knee requests queue, and "
        "p99 (from their due time) climbs by orders of magnitude for a small step in load (a rate "
        "whose window left requests unsent, the table's backlog, fell behind even below the line).",
    "timeline":
        "Look at the shaded span in each column: how far each second's p99 rose while the "
        "operation ran and how fast it came back after, whether errors or late sends appeared, "
        "and what the WAL did (a checkpoint empties it; a long reader lets it grow).",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002", "capacity as operators measure it, and the day the backup runs", (
    Detail("how load is offered", "closed loop: each user (hey, oha, the authors' clients) "
           "waits for its answer before sending the next", "col:open_loop", expect=[False],
           why="this notebook's question: requests arrive on a schedule whatever the server "
               "answers (open loop, load.run_level's `rate`), latency from each request's due "
               "time, so that a server that falls behind is charged for its queue (no "
               "coordinated omission); the closed-loop levels are run too, for comparison"),
    Detail("capacity", "the peak requests/s at any latency",
           lambda r: (f"the highest offered rate below the first the server did not keep up with "
                      f"(p99 from due times ≤ {r.param('slo_p99_ms'):g} ms, no errors, no backlog)"),
           expect=None, why="operators size capacity from latency against offered load; the "
                            "closed-loop capacity and the naive peak are shown beside it"),
    Detail("arrivals", "—", "col:arrivals", expect=None,
           why="constant spacing by default (Poisson on request): each generator process "
               "offers its share of the rate"),
    Detail("workload", "seed 002: 90 % reads, 10 % writes of 2 KB through one writer",
           "col:scenario", expect=["mix"], why="another workload"),
    Detail("operations", "seed 000 warns that a CREATE INDEX on a big table blocks writers; "
           "none of the articles measured one", "col:operation", expect=None,
           why="an online backup (backup API), VACUUM INTO, CREATE INDEX on the users table, "
               "wal_checkpoint(TRUNCATE) and Litestream replicating to a local file replica, "
               "each started at a marked second of a steady open-loop load (sqlitelab.infra.operations), "
               "in its own process on the server's CPUs, as an operator's command on the server"),
    Detail("steady load", "—",
           lambda r: f"{r.param('fraction'):.0%} of each stack's open-loop capacity", expect=None,
           why="a load the server keeps up with, so that what the operation costs shows"),
    Detail("users table", "seed 000: “a big table”",
           lambda r: f"{r.param('users_rows'):,} rows", expect=None,
           why="the size the scale seeds (the index is built on it)"),
    Detail("load tool", "hey (000); the author's own Rust tool on reqwest + tokio (002)",
           "col:generator", expect=None,
           why="loadgen (the lab's Go generator, calibrated against wrk) at every rate: one "
               "Locust core is the limit first"),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))
