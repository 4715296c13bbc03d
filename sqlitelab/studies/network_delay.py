"""Notebook 09, over a network (no article: the readers' question of a network between load and
server): what a delayed link does to the articles' loopback numbers. Everything that is this
notebook's, declared once.

Seed scale runs once per level, 10-s windows, so that `make seed` keeps within its 90 minutes.
"""
from __future__ import annotations

from sqlitelab.core.vocabulary import link_label
from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, PIN_WHY, link_lateness, link_paths)

# What each constant means: sqlitelab.studies.registry.
ID = "09-network-delay"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "network delay"

SCALES: dict[str, dict] = {
    "quick": {"levels": [1, 8, 64], "duration": 2.0, "warmup": 0.5, "repeats": 1,
              "delays_us": [100, 500]},
    "seed": {"levels": [1, 8, 64], "duration": 10.0, "warmup": 1.0, "repeats": 1,
             "delays_us": [100, 500]},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 45, "seed": 160}

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words, by id or pattern (sqlitelab.studies.registry.experiment_title).
EXPERIMENT_TITLES: dict = {"direct": "direct", r"link-(\d+)us": lambda delay: link_label(int(delay))}

READS_THE_OTHERS = False

SMOKE: dict = {"server": "go-nethttp",
               "levels": [1, 4],
               "delays_us": [500],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "Look for where the delayed lines leave the direct one: few users lose throughput to every "
        "microsecond of delay (Little's law, dotted), many users hide it until the server is busy.",
    "latency":
        "Each link adds its round trip to every request: compare the gap between lines with "
        "twice the link's delay.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002, 004", "the articles' loopback runs, over a network", (
    Detail("path from load to server", "loopback on one machine (000, 004: the same laptop; "
           "002: the same machine, other cores)", link_paths, expect=["direct"],
           why="this notebook's question: the same load over links that delay each direction"),
    Detail("how the delay is made", "no delay", lambda r: "a user-space TCP proxy holding each "
           "chunk n µs each way (sqlitelab.infra.link); the kernel has no netem", expect=None,
           why="Toxiproxy's latency toxic takes whole milliseconds, and Go's timers round "
               "sub-millisecond sleeps up to ~1 ms, so 0.1 and 0.5 ms need the lab's own proxy"),
    Detail("delay applied", "none", link_lateness, expect=None,
           why="the proxy's threads wake late: tens of µs on a quiet core, a millisecond and "
               "more on average (single chunks far later: the worst is shown) when it shares a "
               "saturated core with the generator; measured by the proxy per level, the mean "
               "added to the Little's-law bound"),
    Detail("connections", "kept alive by every tool (hey, oha, the author's client)",
           "col:keepalive", expect=[True], why="a new connection per request"),
    Detail("load tool", "hey (000); the author's own Rust tool on reqwest + tokio (002); "
           "not stated (004)",
           "col:generator", expect=None,
           why="one generator for every path (loadgen by default, calibrated against wrk), so "
               "that its own cost is the same in every row and leaves CPU to the link"),
    Detail("server CPUs", "the whole machine", "cpus:server_pinning", expect=None, why=PIN_WHY),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))
