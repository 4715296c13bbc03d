"""Notebook 10, your own app: the lab's method pointed at any HTTP server on this machine (no
article: the articles' readers' question, "can SQLite run *my* app?"). Everything that is this
notebook's, declared once: its scales, its two examples that run out of the box, its method rows
(what the lab knows of an app and what it cannot know).

The examples are apps as a user would give them: a command line with {port} and {db}, a
database file, a locustfile or a scenario, the requests that acknowledge a write and the query
that counts them. `datasette`: Datasette (in the lab's lock, written by nobody here) serving a
copy of a seeded shop read-only (immutable), read by a locustfile written the way Locust's
documentation writes one (examples/your-app/datasette_locustfile.py). `bundled`: the lab's own
go-nethttp server started through that same command path — as your app would be, with no
LAB_* variable set by the lab — sending seed 002's mix, its writes audited by your rule.
"""
from __future__ import annotations

import sys
from pathlib import Path

from sqlitelab.core import config
from sqlitelab.infra import servers
from sqlitelab.load import scenarios
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY, NOT_STATED, PIN_WHY

# What each constant means: sqlitelab.studies.registry.
ID = "10-your-app"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "your own app"

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
BUDGET_SECONDS: dict[str, float] = {"quick": 25, "seed": 50}  # quick: 17.5 s, seed: 39.5-40.9 s (2026-11-26/27)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (sqlitelab.studies.registry.experiment_title): none: an app's one sweep.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = False

# 1.5-s windows: when the machine runs slow, Datasette answers in hundreds of ms and a 0.5-s window
# holds no request that both started and finished in it
SMOKE: dict = {"levels": [1, 4], "duration": 1.5, "warmup": 0.2, "plain_users": 2}
STORES: str | None = "points"

EXAMPLES_DIR = config.PROJ_ROOT / "examples" / "your-app"


def examples() -> dict[str, dict]:
    """The two examples as a user would write them (App.of's and plan's keyword arguments), and
    the shop each serves (`shop`: databases.prepare_database's, made fresh in the run's folder)."""
    datasette = Path(sys.executable).with_name("datasette")
    go = config.SERVERS_DIR / "go-nethttp" / "run"
    return {
        "datasette": {
            "name": "Datasette, read-only",
            "command": f"{datasette} serve --immutable {{db}} --host 127.0.0.1 --port {{port}}",
            "shop": {"users": 10_000, "items": 1_000, "user_bytes": 200},  # the locustfile's USERS, ITEMS
            "locustfile": EXAMPLES_DIR / "datasette_locustfile.py",
        },
        "bundled": {
            "name": f"{servers.stack_title('go-nethttp')}, started by its command",
            "command": f"env LAB_PORT={{port}} LAB_DB={{db}} {go}",
            # FULL: every commit waits for the disk, so the server, not Locust, sets the pace
            "env": {"LAB_PRAGMAS": "journal_mode=wal,synchronous=full", "LAB_TXN_MODE": "immediate",
                    "LAB_BUSY": "busy_timeout:5000"},
            "shop": {"items": 1_000},
            "scenario": "mix", "scenario_params": {"write_share": 0.5},
            "writes": {"method": "POST", "path": "/items$", "status": [201]},
            "count_query": "SELECT count(*) FROM items",
        },
    }


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
