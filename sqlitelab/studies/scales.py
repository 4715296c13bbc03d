"""How big a notebook run is. A *scale* (quick | seed) is not a *profile* (server knobs).

`quick` finishes the whole collection in minutes; `seed` uses the articles' own levels and
durations. A notebook's `parameters` cell names the scale; any parameter left `None` takes
the scale's value here, anything else overrides it. `crosscheck_users`: the level at which a
sweep adds one wrk point per server and profile (sweep's `crosscheck`); `ceiling_seconds`: each
half (commits, then point reads) of the raw-SQLite ceiling on the server's core (baseline.ceiling).

`seed` keeps every setting an article states (its levels, durations, request counts, record
totals, rows per transaction, connection behaviour, repeats) and must finish within 90 minutes
on a 2-core machine (DESIGN). What the lab adds beyond an article is sized to fit (issue 12;
`python -m sqlitelab.report.timing` and timing.budget show where a run's time went):
- no warm-up where the article had none (01 hey, 02 oha, 03 its own tool): the window opens
  when the generator's users are all running, as those tools measured; 05's article states no
  warm-up, repeats or duration: one 10-s run per level, no warm-up, like the others;
- one repeat where the article ran one (02), and for the stacks the article did not run (01's
  `beyond_repeats`; ruby-puma keeps the article's three);
- 03's 16 `fine_levels` (levels the article did not run) only on request;
- 05 at seed scale with loadgen (`generator`): the article states no load tool, and Locust was
  the limit at 45 of 05's 48 seed levels (2026-11-22), each then measured again with loadgen,
  which is what was reported; `quick` keeps Locust (and its loadgen confirmation);
- 09 (no article: the readers' question of a network between load and server) once per level
  at seed scale, 10-s windows, so that `make seed` keeps within its 90 minutes;
- 07 (no article: the readers' "why not Postgres?") one 5-s run per level at seed scale, two
  levels (8 and 64 users: every workload, stack and database is 112 levels), on 100,000 users rows (seed 004's 5 M would take minutes to copy into each Postgres);
- 08 (no article: the operators' questions) open-loop rates of 5-s windows and 30-s windows
  around each operation at seed scale, on 5,000,000 users rows (seed 004's size);
- 04 above 10 M records (`large`): the lab's writer at the article's own settings there (25 and
  100 rows per transaction, synchronous FULL; the article ran 10 rows only up to 10 M, and NORMAL
  never), without the consumer (the article has none).
"""
from __future__ import annotations

SCALES: dict[str, dict[str, dict]] = {
    "01-linear-writes": {
        "quick": {"levels": [1, 2, 4, 8, 10, 16], "duration": 2.0, "warmup": 0.5, "repeats": 1,
                  "beyond_repeats": 1, "crosscheck_users": 8, "ceiling_seconds": 2.0},
        "seed": {"levels": [1, 2, 4, 8, 10, 16, 32, 64], "duration": 10.0, "warmup": 0.0, "repeats": 3,
                 "beyond_repeats": 1, "crosscheck_users": 16, "ceiling_seconds": 2.0},
    },
    "02-busy-errors": {
        "quick": {"levels": [1, 3, 16], "article_levels": [1, 3], "duration": 1.5, "warmup": 0.3,
                  "repeats": 1, "crosscheck_users": 3},
        "seed": {"levels": [1, 3, 16], "article_levels": [1, 3], "duration": 5.0, "warmup": 0.0,
                 "repeats": 1, "crosscheck_users": 3},
    },
    "03-read-write-mix": {
        "quick": {"levels": [8, 32, 128], "requests": 10_000, "warmup": 0.5, "repeats": 1,
                  "fine_levels": [], "write_shares": [0.0, 0.1, 0.5, 1.0], "share_users": 32,
                  "paths_users": 64, "beyond_requests": 2000, "crosscheck_users": 32,
                  "crosscheck_seconds": 2.0},
        "seed": {"levels": [8, 32, 64, 128, 256], "requests": 50_000, "warmup": 0.0, "repeats": 1,
                 "fine_levels": [],
                 "write_shares": [0.0, 0.1, 0.5, 1.0], "share_users": 64, "paths_users": 128,
                 "beyond_requests": 20_000, "crosscheck_users": 64, "crosscheck_seconds": 10.0},
    },
    "04-sqlite-as-buffer": {
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
                 "large": {"above": 10_000_000, "rows_per_txn": [25, 100], "synchronous": ["full"],
                           "consume": False}},
    },
    "05-single-machine": {
        "quick": {"users_rows": 100_000, "user_bytes": 700, "levels": [32], "duration": 2.0,
                  "warmup": 0.5, "repeats": 1, "crosscheck_users": 32, "generator": "locust",
                  "ceiling_seconds": 2.0},
        "seed": {"users_rows": 5_000_000, "user_bytes": 700, "levels": [16, 64, 256],
                 "duration": 10.0, "warmup": 0.0, "repeats": 1, "crosscheck_users": 64,
                 "generator": "loadgen", "ceiling_seconds": 2.0},
    },
    "09-network-delay": {
        "quick": {"levels": [1, 8, 64], "duration": 2.0, "warmup": 0.5, "repeats": 1,
                  "delays_us": [100, 500]},
        "seed": {"levels": [1, 8, 64], "duration": 10.0, "warmup": 1.0, "repeats": 1,
                 "delays_us": [100, 500]},
    },
    "07-sqlite-vs-postgres": {
        "quick": {"levels": [8, 32], "duration": 1.5, "warmup": 0.5, "repeats": 1,
                  "users_rows": 10_000, "user_bytes": 700, "db_delays_us": [500]},
        "seed": {"levels": [8, 64], "duration": 5.0, "warmup": 1.0, "repeats": 1,
                 "users_rows": 100_000, "user_bytes": 700, "db_delays_us": [100, 500]},
    },
    "08-operations-under-load": {
        "quick": {"levels": [8, 64], "rates": [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 20000],
                  "open_users": 64,
                  "duration": 2.0, "warmup": 0.5, "op_duration": 10.0, "at_s": 3.0,
                  "users_rows": 1_000_000, "fraction": 0.5},
        "seed": {"levels": [8, 16, 64], "rates": [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 18000, 20000, 24000],
                 "open_users": 64, "duration": 5.0, "warmup": 1.0, "op_duration": 30.0, "at_s": 10.0,
                 "users_rows": 5_000_000, "fraction": 0.5},
    },
    "06-capacity": {
        "quick": {"slo_p99_ms": 100.0},
        "seed": {"slo_p99_ms": 100.0},
    },
}


# 03's fine levels, a sweep of 16 levels beyond the article's five (about 9 minutes at seed
# scale): pass `fine_levels=FINE_LEVELS` (or `-p fine_levels "[...]"`) to run it.
FINE_LEVELS = [8, 10, 13, 16, 20, 25, 32, 40, 51, 64, 81, 102, 128, 161, 203, 256]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _integers(least: int, empty: bool = False):
    """A list of integers >= least (empty too when `empty`)."""
    return lambda v: isinstance(v, (list, tuple)) and (empty or bool(v)) and all(_integer(u) and u >= least for u in v)


# What each setting accepts, checked by `settings` before a notebook starts anything: a check
# and the words an error gives (one line: "<name> must be <words>, not <value>").
ACCEPTS: dict[str, tuple] = {
    **{k: (_integers(1), "a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4]")
       for k in ("levels", "article_levels")},
    "fine_levels": (_integers(1, empty=True), "a list of integers >= 1 (concurrent users; []: none)"),
    **{k: (lambda v: _number(v) and v > 0, "a number of seconds > 0")
       for k in ("duration", "ceiling_seconds", "crosscheck_seconds", "max_seconds", "op_duration")},
    **{k: (lambda v: _number(v) and v >= 0, "a number of seconds >= 0") for k in ("warmup", "at_s")},
    **{k: (lambda v: _integer(v) and v >= 1, "an integer >= 1 (runs of each level)")
       for k in ("repeats", "beyond_repeats")},
    **{k: (lambda v: _integer(v) and v >= 1, "an integer >= 1 (concurrent users)")
       for k in ("crosscheck_users", "share_users", "paths_users", "open_users")},
    **{k: (lambda v: _integer(v) and v >= 1, "an integer >= 1 (requests per level)")
       for k in ("requests", "beyond_requests")},
    "write_shares": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(_number(w) and 0 <= w <= 1 for w in v),
                     "a non-empty list of write shares, numbers from 0 to 1, e.g. [0.0, 0.5, 1.0]"),
    "totals": (_integers(1), "a non-empty list of integers >= 1 (records per run)"),
    "variant_totals": (_integers(1, empty=True), "a list of integers >= 1 (records per run)"),
    "rows_per_txn": (_integers(1), "a non-empty list of integers >= 1 (rows per transaction)"),
    "slow_sync_ms": (lambda v: _number(v) and v >= 0, "a number of milliseconds >= 0 (0: no slow-disk run)"),
    "slow_sync_total": (lambda v: _integer(v) and v >= 1, "an integer >= 1 (records)"),
    "users_rows": (lambda v: _integer(v) and v >= 1, "an integer >= 1 (rows of the users table)"),
    "user_bytes": (lambda v: _integer(v) and v >= 0, "an integer >= 0 (bytes of each user's bio)"),
    **{k: (_integers(0, empty=True), "a list of integers >= 0 (microseconds each way), e.g. [100, 500]")
       for k in ("delays_us", "db_delays_us")},
    "rates": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(_number(r) and r > 0 for r in v),
              "a non-empty list of numbers > 0 (requests/s), e.g. [100, 200]"),
    "fraction": (lambda v: _number(v) and v > 0, "a number > 0 (share of the open-loop capacity)"),
    "slo_p99_ms": (lambda v: _number(v) and v > 0, "a number of milliseconds > 0"),
}


def names(notebook: str) -> list[str]:
    """Every setting a scale of `notebook` holds: each is a `None` parameter of the notebook."""
    return sorted({k for scale in SCALES[notebook].values() for k in scale})


def settings(notebook: str, scale: str, **overrides) -> dict:
    """The scale's settings for `notebook`, with every non-None override applied. A name no
    scale of the notebook holds is refused (a parameter passed here that nothing reads), and so
    is a value its setting does not accept (ACCEPTS), in one line naming both."""
    if notebook not in SCALES:
        raise ValueError(f"no scales defined for notebook {notebook!r}")
    known = SCALES[notebook]
    if scale not in known:
        raise ValueError(f"scale must be one of {sorted(known)}, not {scale!r}")
    unknown = sorted(set(overrides) - set(names(notebook)))
    if unknown:
        raise ValueError(f"{notebook} has no scale setting {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(names(notebook))})")
    out = dict(known[scale])
    for k, v in overrides.items():
        if v is not None:
            check, words = ACCEPTS.get(k, (None, ""))
            if check is not None and not check(v):
                raise ValueError(f"{k} must be {words}, not {v!r}")
            out[k] = v
    out["scale"] = scale
    return out


# Articles that gave their server part of the machine and the generator the rest: the number of
# server CPUs, which a sweep of that notebook asks of sqlitelab.core.layout (where the machine allows).
SERVER_SPLITS = {"03-read-write-mix": 4}


def server_split(notebook: str) -> int | None:
    return SERVER_SPLITS.get(notebook)
