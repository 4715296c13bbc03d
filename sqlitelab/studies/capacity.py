"""Notebook 06, capacity: how many daily active users, honestly? The articles' napkin math
over the newest runs of the other notebooks (those whose study is IN_COLLECTION), so a batch runs
it after them (READS_THE_OTHERS). Everything that is this notebook's, declared once.
"""
from __future__ import annotations

from sqlitelab.studies.method import Article, Detail, MACHINE_WHY

# What each constant means: sqlitelab.studies.registry.
ID = "06-capacity"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "capacity"

SCALES: dict[str, dict] = {
    "quick": {"slo_p99_ms": 100.0},
    "seed": {"slo_p99_ms": 100.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 10, "seed": 20}

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (sqlitelab.studies.registry.experiment_title): none: it reads the other notebooks' runs.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = True

SMOKE: dict = {}
STORES: str | None = None

READING: dict[str, str] = {
    "capacity":
        "In each panel, the line from a stack's dot to its tick is what the latency objective costs "
        "against the naive peak; each panel has its own scale.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002, 004", "the articles' napkin math", (
    Detail("peak hours", "seed 000: a day's requests packed into 4 peak hours (1 M/day ≈ 70/s)",
           "param:peak_hours", expect=4, why="set by the notebook's peak_hours"),
    Detail("requests per user per day", "seed 000: 35 writes", "param:requests_per_user",
           expect=35, why="set by the notebook's requests_per_user"),
    Detail("seconds between requests", "seed 002: one request per active user every 10 s",
           "param:seconds_between_requests", expect=10,
           why="set by the notebook's seconds_between_requests"),
    Detail("capacity", "the peak requests/s at any latency (all three articles)",
           lambda r: f"the best level with p99 ≤ {r.param('slo_p99_ms'):g} ms and no errors",
           expect=None, why="a peak reached with seconds of queueing is not capacity; the naive "
                            "peak is shown beside it"),
    Detail("which measurements", "each article's own runs, on its own hardware",
           lambda r: f"the newest {r.param('scale')!r} run of each load notebook on this machine",
           expect=None, why=MACHINE_WHY),
))
