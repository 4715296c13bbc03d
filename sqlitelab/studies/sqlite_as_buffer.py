"""Notebook 04, SQLite as a write buffer (seed 003): how many records per second, how big, how
much memory? Everything that is this notebook's, declared once.

Seed scale keeps the article's totals, rows per transaction and one run per total (its method);
above 1 M records (`large`) the lab's writer runs only at the article's settings above 10 M (25
and 100 rows per transaction, 25 alone at 100 M, synchronous FULL; the article ran 10 rows only up
to 10 M, 100 rows ran out of memory at 100 M, and NORMAL never), without the consumer (the article
has none): its 10-M points at NORMAL and at 10 rows took 180 of the reference run's 845 s of
points (034f47a), and 100 rows at 100 M 174 s of the seed run of 2026-11-26 (0382126).
"""
from __future__ import annotations

from sqlitelab.studies.method import (
    Article, AS_PUBLISHED, Detail, MACHINE_WHY, NOT_STATED, consumed_up_to, large_points,
    measured_totals, recorded)

# What each constant means: sqlitelab.studies.registry.
ID = "04-sqlite-as-buffer"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "SQLite as a buffer, seed 003"

SCALES: dict[str, dict] = {
    "quick": {"totals": [1_000, 10_000, 100_000], "rows_per_txn": [10, 25, 100],
              "synchronous": ["normal", "full"], "methods": ["article", "tuned"],
              "variants": ["one_connection", "no_ckpt_on_close"], "variant_totals": [100_000],
              "repeats": 1, "max_seconds": 60.0, "slow_sync_ms": 40.0, "slow_sync_total": 100_000},
    "seed": {"totals": [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000],
             "rows_per_txn": [10, 25, 100], "synchronous": ["normal", "full"],
             "methods": ["article", "tuned"],
             "variants": ["one_connection", "sync_normal", "no_ckpt_on_close", "page_size_8192",
                          "py311_gc", "no_logging"], "variant_totals": [1_000_000],
             "repeats": 1, "max_seconds": 300.0, "slow_sync_ms": 40.0, "slow_sync_total": 1_000_000,
             "large": {"above": 1_000_000, "rows_per_txn": [25, 100],
                       "rows_per_txn_at": {100_000_000: [25]}, "synchronous": ["full"],
                       "consume": False}},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 35, "seed": 670}  # quick: 25.5-26.2 s, seed: 601-643 s (2026-11-26/27)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words, by id or pattern (sqlitelab.studies.registry.experiment_title).
EXPERIMENT_TITLES: dict = {"slow-sync": "a slow disk (every sync delayed)"}

READS_THE_OTHERS = False

# the smoke run: every table and figure of the notebook, the variants and the slow-disk run at
# its largest total (quick's 100,000 would be most of its time: 40 ms a sync)
SMOKE: dict = {"totals": [1000, 5000],
               "rows_per_txn": [2, 5],
               "synchronous": ["normal"],
               "records_per_row": 100,
               "variant_totals": [5000],
               "slow_sync_total": 5000}
STORES: str | None = "buffer_points"

READING: dict[str, str] = {
    "records-per-second":
        "Look for flat lines (the rate holds as the file grows) and for the gap that rows per "
        "transaction make, against the article's points.",
    "variants":
        "The author's method with one change at a time: the tallest bar against the as-published "
        "one is the change that matters most at this size.",
    "db-size":
        "Look for a straight line (the file grows with the records) and where the lab's file "
        "differs from the article's.",
    "peak-memory":
        "Look for flat lines: a writer that streams keeps its memory whatever the number of records.",
    "consumer":
        "Compare the consumer's rate with the writer's: a buffer keeps up only while its consumer is "
        "at least as fast.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "003", "“The surprising effectiveness of SQLite for non-persistent "
        "use cases” (2025); the author's load test, METResearchGroup/bluesky-research@de1246d9", (
    Detail("machine", "“my MacBook” (model not stated), where 100 M at 25 rows ran “locally”; "
           "100 M at 100 rows ran out of memory on a 40 GB Slurm node", "col:machine",
           why=MACHINE_WHY),
    Detail("the author's code", "the load test it links, lib/db/tests/queue_load_testing.py on "
           "main, no commit named: on main from github.com/METResearchGroup/bluesky-research at "
           "de1246d9 (2025-02-07), a week after the article's date (2025-01-31 05:00 +0800)",
           recorded("variant", "that commit, detail by detail (buffer_point's `article`)"),
           expect=NOT_STATED, only=AS_PUBLISHED,
           why="the lab follows de1246d9, the first commit on main with the linked script (its "
               "batch_add_items_to_queue docstring links the article); its write path is the one "
               "committed on the author's branch on 2025-01-31 at 20:08 -0600 (985da6f3), the "
               "script at 20:42 (87d88df2), unchanged since but for docstrings"),
    Detail("the code at the article's date", "at 2025-01-31 05:00 +0800 (2025-01-30 15:00 "
           "-0600) batch_add_items_to_queue wrote every row in one executemany on one connection "
           "(main at c131a1d5, 2025-01-20; the author's branch at f0eedae2, 2025-01-28): one "
           "transaction, no rows-per-transaction setting; a new connection per group of "
           "batch_write_size rows came 29 h later (985da6f3, 2025-01-31 20:08 -0600)",
           recorded("variant", "a new connection per group of rows (the code at de1246d9)"),
           expect=None, only=AS_PUBLISHED,
           why="the lab follows the later code: the article's tables vary the rows per "
               "transaction (25, 100, 10), which only it can, so (an inference) they come from it "
               "and the post was finished after its date; the lab runs no one-transaction variant"),
    Detail("Python", "3.10 (the repository's): a dropped sqlite3 connection closes at once",
           "col:python", expect=None, only=AS_PUBLISHED,
           why="3.11+ keeps a dropped connection open until the cyclic GC runs; `article` closes "
               "it where 3.10 would have, the `py311_gc` variant leaves it to the GC"),
    Detail("records", "{uri, text}: random strings of 10, 15 and 50 characters, ~127 B of JSON "
           "each, all generated in memory before the timing",
           lambda r: (f"the same records from the lab's generator (buffer_point.lab_records), all in "
                      f"memory first: {max(r.col('records_bytes_per_record')):,.0f} B of RSS per record"),
           expect=None, only=AS_PUBLISHED,
           why="the same records, shape, lengths and alphabet, and the same memory, generated "
               "(untimed) nine times faster than by the author's random.choices; the run also "
               "reports the memory they take"),
    Detail("records per row", "1,000 (one json.dumps per chunk of 1,000)", "col:records_per_row",
           expect=1000, only=AS_PUBLISHED, why="another chunk size"),
    Detail("rows per transaction", "25, then 100 and 10", "col:rows_per_txn", expect=[10, 25, 100],
           compare="superset", only=AS_PUBLISHED, why="the run lacks one of the article's"),
    Detail("records written", "1 K, 10 K, 100 K, 1 M, 10 M, 50 M, 100 M", measured_totals,
           expect=[1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000],
           compare="superset", only=AS_PUBLISHED,
           why="totals this scale leaves out, or that would not fit in this machine's memory "
               "or disk (the skipped rows say which)"),
    Detail("connection", "a new sqlite3.connect() per group of rows (one transaction each), "
           "dropped when the next one is opened", "col:variant", expect="as_published",
           only=AS_PUBLISHED, why="another variant"),
    Detail("synchronous", "not set: SQLite's default FULL on every per-group connection",
           "col:synchronous", expect="full", only=AS_PUBLISHED, why="another synchronous"),
    Detail("page size", "`page_size=8192`, issued after `journal_mode=WAL`, so it never applies",
           "col:page_size", expect=4096, only=AS_PUBLISHED, why="the page size differs"),
    Detail("what is timed", "from the call of batch_add_items_to_queue to its return: chunking, "
           "json.dumps, every INSERT, commit and connection", recorded(
               "seconds", "the same call, the same boundaries"), expect=None, only=AS_PUBLISHED,
           why="the lab's probes of the -wal/-shm files between groups are subtracted"),
    Detail("size", "“MB” of db + -wal + -shm (MiB: 1,000 records → 0.13)", recorded(
        "db_mib", "MiB of db + -wal + -shm after the call"), expect=None, only=AS_PUBLISHED,
           why="the same files, in MiB"),
    Detail("repeats", "one run per total", "param:repeats", expect=1, why="repeated"),
    Detail("beyond 10 M records", "25 rows per transaction at 50 M and 100 M, 100 rows at 50 M "
           "(at 100 M out of memory); 10 rows only up to 10 M; SQLite's default synchronous FULL",
           large_points, expect=["100 rows · full", "25 rows · full"],
           why="the author's method does not fit in memory there; the lab's writer ran other rows "
               "or synchronous settings too"),
    Detail("consumer", "none: the load test only writes", consumed_up_to, expect=None,
           why="the lab's addition: a consumer reads the rows back, marks them done and deletes "
               "them (records/s); at seed scale up to "
               f"{SCALES['seed']['large']['above']:,} records, so that the seed run fits its 90 minutes"),
))
