"""The lab's words for what it measures, shared by every layer: when a request has stalled,
how a pragma's value is named, how a point's path and store are labelled and titled, when an
open-loop level kept up, which column a reference client's rate is counted as, notebook 04's
buffer methods and variants and each operation in plain words, and the stack this machine's
noise is measured on."""
from __future__ import annotations

import re

import pandas as pd

STALL_MS = 1000.0  # a request still running this long after the window closed has stalled
NOT_AUDITED = "no writes audited"  # a point's audit_rule where nothing was counted (an app without a writes rule)
SYNCHRONOUS = {"0": "off", "1": "normal", "2": "full", "3": "extra"}  # PRAGMA synchronous's numbers
JOURNAL_MODES = ("wal", "delete")  # the journal modes a power cut is measured in (notebook 12): WAL, the rollback journal

# The lab's column whose rate is counted as each client of a sweep's cross-check counts its own:
# a lab generator's rate is compared with the client's in it (sweep's cross-check,
# analysis.crosscheck_table). The clients are sqlitelab.load.crosscheck.TOOLS; each one's module
# reads its own here as `COUNTED_AS`.
COUNTED_AS = {"wrk": "rps",       # the exact window's, as wrk's
              "hey": "hey_rps",   # the driver's whole-run accounting, as hey's Requests/sec
              "oha": "rps"}       # the exact window's, as oha's

# Notebook 04's buffer points (sqlitelab.experiments.buffer_point, which imports only the standard
# library and so keeps its ids to itself: tests/test_buffer.py holds these to its METHODS, VARIANTS
# and TUNED_VARIANT). In plain words, for figures and tables: each method, and each variant of the
# `article` method; TUNED_VARIANT is the variant column of `tuned` points.
TUNED_VARIANT = "lab"
METHOD_TITLES = {"article": "the author's method", "tuned": "the lab's tuned writer"}
VARIANT_TITLES = {"as_published": "as published", "one_connection": "one connection",
                  "sync_normal": "synchronous=NORMAL", "no_ckpt_on_close": "no checkpoint on close",
                  "page_size_8192": "8 KiB pages", "py311_gc": "closed when Python frees it", "no_logging": "no logging"}

# Each operation of sqlitelab.infra.operations (its OPERATIONS: tests/test_operations.py holds the
# two to the same ids) in plain words, for figures, tables and experiment titles.
OPERATION_TITLES: dict[str, str] = {"backup": "online backup", "vacuum-into": "VACUUM INTO",
                                    "create-index": "CREATE INDEX", "checkpoint": "WAL checkpoint",
                                    "litestream": "Litestream replication"}

# The stack this machine's noise is measured on unless told (sqlitelab.experiments.noise reads it
# as `STACK`, `python -m sqlitelab.compare --noise --stack`'s default): a comparison's band is a
# point's own stack's spread, else this one's (report.compare.measured_on, browse's canned query).
NOISE_STACK = "go-nethttp"


def link_label(delay_us) -> str:
    """A point's path from generator to server: `direct`, or `link <n> µs` (each way)."""
    if delay_us is None or delay_us != delay_us:  # None or NaN: no link
        return "direct"
    return f"link {int(delay_us)} µs"


def link_title(label) -> str:
    """A link_label in a reader's words: "direct", "proxy, no delay", "proxy, 100 µs each way"."""
    m = re.fullmatch(r"link (\d+) µs", str(label))
    if not m:
        return str(label)
    return "proxy, no delay" if int(m[1]) == 0 else f"proxy, {m[1]} µs each way"


def store_label(database, db_link_delay_us=None) -> str:
    """`sqlite`, `postgres`, or `postgres, link 100 µs` (its own host, sweep's db_link_delay_us)."""
    if db_link_delay_us is None or pd.isna(db_link_delay_us):
        return str(database)
    return f"{database}, link {int(db_link_delay_us)} µs"


def store_title(store: str) -> str:
    """A store_label in a reader's words: "SQLite", "Postgres on the same machine", "Postgres
    behind a 500 µs link"."""
    database, _, link = str(store).partition(", link ")
    name = {"sqlite": "SQLite", "postgres": "Postgres"}.get(database, database)
    if link:
        return f"{name} behind a {link} link"
    return f"{name} on the same machine" if database == "postgres" else name


def keeps_up(point: dict, slo_p99_ms: float) -> bool:
    """An open-loop level the server kept up with: p99 (from due times, so a request that
    waited for a free user is charged that wait) within the SLO, no error, and nothing due
    before the close left unsent. Late sends are not a criterion of their own: their wait is
    in the p99."""
    return bool(point.get("requests") and point.get("p99_ms") is not None
                and point["p99_ms"] <= slo_p99_ms and not point.get("errors")
                and not point.get("backlog"))


def users(n) -> str:
    """A number of concurrent users in words: "1 user", "4 users" (a whole number as one)."""
    v = float(n)
    return f"{int(v) if v.is_integer() else v:g} user{'' if v == 1 else 's'}"
