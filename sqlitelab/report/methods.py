"""Each notebook's method set against its article's: one declared list per article.

A `Detail` names one methodological choice (what is timed, levels, connections, pragmas,
transactions, the statistic reported, the machine…), what the article did — in its words,
with the value in the lab's terms where one exists (`expect`) — and where the run's own value
is read: a notebook parameter the run stored (`param:levels`), a column of its points
(`col:generator`), a knob the server reported in `/health` (`knob:busy`, `pragma:synchronous`),
the number of CPUs it was pinned to (`cpus:server_pinning`), or a function of the points.
Nothing about the run is typed here: `table()` reads it, and says `same` or `differs: why`.
A key the run did not record shows as NOT RECORDED, and `unrecorded()` lists those rows (a
notebook smoke test fails on any).

    method = methods.table("01-linear-writes", points, parameters)
    methods.show("01-linear-writes", points, parameters, run_id)   # display + method.csv
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from sqlitelab.core import config, layout
from sqlitelab.core.vocabulary import SYNCHRONOUS, link_label, store_label
from sqlitelab.infra import servers
from sqlitelab.studies.scales import SERVER_SPLITS

NOT_STATED = object()   # the article does not say
NOT_RECORDED = "NOT RECORDED"


class NotRecorded(KeyError):
    """The run did not record what a method table asks for."""


class NotRun(KeyError):
    """The run has no points of what a detail reads (say, a stack it did not include)."""


@dataclass(frozen=True)
class Detail:
    aspect: str                    # "load tool", "concurrency levels", …
    article: str                   # what the article did, in its words
    run: str | Callable            # where this run's value is read (see the module docstring)
    expect: Any = None             # the article's value in the lab's terms; None: differs by construction
    why: str = ""                  # why the run differs, when it does
    compare: str = "eq"            # eq | superset (the run covers the article's values) | in
    only: dict = field(default_factory=dict)  # read only from points matching these columns


@dataclass(frozen=True)
class Article:
    notebook: str
    seed: str
    title: str
    details: tuple[Detail, ...]


def _profile(name: str) -> dict:
    return servers.load_profiles()[name]


def _profile_pragma(profile: str, pragma: str) -> str:
    for item in _profile(profile)["pragmas"].split(","):
        k, _, v = item.partition("=")
        if k.strip() == pragma:
            return SYNCHRONOUS.get(v.strip().lower(), v.strip().lower())
    raise KeyError(f"profile {profile} sets no {pragma}")


# --------------------------------------------------------------------------- the run's side

class RunView:
    """What one run recorded: its points (one row per level and repeat) and the notebook
    parameters it stored with them."""

    def __init__(self, points: pd.DataFrame | None = None, parameters: dict | None = None):
        self.points = points if points is not None else pd.DataFrame()
        self.parameters = parameters or {}

    def where(self, **match) -> "RunView":
        pts = self.points
        for k, v in match.items():
            if k not in pts:
                raise NotRecorded(k)
            pts = pts[pts[k] == v]
        if pts.empty:
            raise NotRun(", ".join(f"{k}={v}" for k, v in match.items()))
        return RunView(pts, self.parameters)

    def param(self, name: str):
        if name not in self.parameters or self.parameters[name] is None:
            raise NotRecorded(f"param:{name}")
        return self.parameters[name]

    def col(self, name: str) -> list:
        if name not in self.points or self.points[name].isna().all():
            raise NotRecorded(f"col:{name}")
        return sorted(self.points[name].dropna().unique().tolist(), key=_sort_key)

    def _json_col(self, name: str) -> list[dict]:
        if name not in self.points:
            raise NotRecorded(f"col:{name}")
        return [json.loads(v) for v in self.points[name].dropna()]

    def knob(self, name: str) -> list:
        vals = {_hashable(k.get(name)) for k in self._json_col("knobs") if k.get(name) is not None}
        if not vals:
            raise NotRecorded(f"knob:{name}")
        return sorted(vals, key=_sort_key)

    def pragma(self, name: str) -> list:
        vals = {str((k.get("pragmas") or {}).get(name)).lower() for k in self._json_col("knobs")
                if (k.get("pragmas") or {}).get(name) is not None}
        if not vals:
            raise NotRecorded(f"pragma:{name}")
        if name == "synchronous":
            vals = {SYNCHRONOUS.get(v, v) for v in vals}
        return sorted(vals)

    def cpus(self, name: str) -> list:
        specs = self.col(name)
        return sorted({len(layout.cpu_list(s)) for s in specs})

    def get(self, key: str | Callable):
        if callable(key):
            return key(self)
        kind, _, name = key.partition(":")
        getter = {"param": self.param, "col": self.col, "knob": self.knob,
                  "pragma": self.pragma, "cpus": self.cpus}.get(kind)
        if getter is None:
            raise ValueError(f"unknown key kind {kind!r} in {key!r}")
        return getter(name)


def _hashable(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def _sort_key(v):
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def _scalar(v):
    if isinstance(v, (list, tuple, set)) and len(v) == 1:
        return next(iter(v))
    return v


def _norm(v):
    if isinstance(v, str):
        return v.strip().lower()
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _as_set(v) -> set:
    if isinstance(v, (list, tuple, set)):
        return {_norm(x) for x in v}
    return {_norm(v)}


def matches(value, expect, compare: str = "eq") -> bool:
    if compare == "eq":
        return _as_set(value) == _as_set(expect)
    if compare == "superset":
        return _as_set(expect) <= _as_set(value)
    if compare == "in":
        return _as_set(expect) <= _as_set(value) and len(_as_set(expect)) == 1
    raise ValueError(f"compare must be eq|superset|in, not {compare!r}")


def render(v) -> str:
    v = _scalar(v)
    if isinstance(v, (list, tuple, set)):
        return ", ".join(render(x) for x in v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


# --------------------------------------------------------------------------- helpers for details

def recorded(column: str, text: str) -> Callable:
    """The run's value is a method (`text`), present when `column` was recorded."""
    def get(run: RunView):
        run.col(column)
        return text
    return get


def puma_shape(run: RunView) -> list[str]:
    """ruby-puma's processes × threads, from its /health knobs."""
    r = run.where(server="ruby-puma").points
    if r[["server_processes", "server_threads"]].isna().any().any():
        raise NotRecorded("col:server_processes/server_threads")
    return [f"{int(p)} × {int(t)}" for p, t in
            sorted({(p, t) for p, t in zip(r["server_processes"], r["server_threads"])})]


AS_PUBLISHED = {"method": "article", "variant": "as_published"}
ONE_FILE = "one file for every endpoint (a copy of the seeded file per stack), a server start per endpoint"
LARGE_TOTAL = 10_000_000  # 04: above this many records the article's method does not fit here


def large_points(run: RunView) -> list[str]:
    """04: the rows per transaction and synchronous settings the lab's writer ran above 10 M."""
    pts = run.where(method="tuned").points
    pts = pts[pts["total"] > LARGE_TOTAL]
    if "skipped" in pts:
        pts = pts[pts["skipped"].isna()]
    if pts.empty:
        raise NotRun(f"method=tuned, total > {LARGE_TOTAL:,}")
    return sorted({f"{int(r)} rows · {s}" for r, s in zip(pts["rows_per_txn"], pts["synchronous"])})


def consumed_up_to(run: RunView) -> str:
    """04: the largest total the consumer read back."""
    pts = run.where(method="tuned").points
    if "consumed" not in pts or pts["consumed"].isna().all():
        return "not run"
    return f"after the lab's writer, up to {int(pts.loc[pts['consumed'].notna(), 'total'].max()):,} records"


def measured_totals(run: RunView) -> list:
    """Totals of the points that ran (not skipped)."""
    pts = run.points
    if "skipped" in pts:
        pts = pts[pts["skipped"].isna()]
    return RunView(pts, run.parameters).col("total")


def stack_knob(stack: str, knob: str) -> Callable:
    def get(run: RunView):
        return run.where(server=stack).knob(knob)
    return get


def link_paths(run: RunView) -> list[str]:
    """09: the paths the run measured: `direct`, `link <n> µs`."""
    if "link_delay_us" not in run.points:
        raise NotRecorded("col:link_delay_us")
    return sorted({link_label(v) for v in run.points["link_delay_us"]}, key=_sort_key)


def stores(run: RunView) -> list[str]:
    """07: the databases the run measured: `sqlite`, `postgres`, `postgres, link <n> µs`."""
    if "database" not in run.points:
        raise NotRecorded("col:database")
    links = run.points["db_link_delay_us"] if "db_link_delay_us" in run.points else [None] * len(run.points)
    return sorted({store_label(d, l) for d, l in zip(run.points["database"], links)}, key=_sort_key)


def postgres_durability(run: RunView) -> list[str]:
    """07: Postgres' commit durability beside each profile's SQLite `synchronous`."""
    pts = run.points[run.points["database"] == "postgres"] if "database" in run.points else run.points
    if pts.empty or "postgres_settings" not in pts:
        raise NotRecorded("col:postgres_settings")
    out = set()
    for profile, settings in zip(pts["profile"], pts["postgres_settings"]):
        got = json.loads(settings)
        out.add(f"{profile}: synchronous={_profile_pragma(profile, 'synchronous')} → "
                f"synchronous_commit={got['synchronous_commit']}, fsync={got['fsync']}")
    return sorted(out)


def postgres_memory(run: RunView) -> str:
    """07: the memory settings the run's Postgres had."""
    pts = run.points[run.points["database"] == "postgres"] if "database" in run.points else run.points
    if pts.empty or "postgres_settings" not in pts:
        raise NotRecorded("col:postgres_settings")
    got = json.loads(pts["postgres_settings"].iloc[0])
    return (f"shared_buffers {got['shared_buffers']}, effective_cache_size {got['effective_cache_size']}, "
            f"max_connections {got['max_connections']}, wal_level {got['wal_level']}")


def link_lateness(run: RunView) -> str:
    """09: how late the links forwarded bytes past their delay, on average and at worst."""
    pts = run.points[run.points["link_delay_us"].notna()] if "link_delay_us" in run.points else run.points
    if pts.empty or "link_late_mean_us" not in pts or pts["link_late_mean_us"].isna().all():
        raise NotRecorded("col:link_late_mean_us")
    return (f"mean {pts['link_late_mean_us'].mean():,.0f} µs, worst "
            f"{pts['link_late_max_us'].max():,.0f} µs past the delay")


def mean_at(column: str, users: int, unit: str = "ms") -> Callable:
    def get(run: RunView):
        r = run.where(users=users)
        return f"{r.points[column].mean():,.1f} {unit}"
    return get


# --------------------------------------------------------------------------- the articles

MACHINE_WHY = ("another machine: the lab reproduces the article's setup and the shape of its "
               "curves (where they peak, where errors start), not its absolute numbers")
PIN_WHY = ("the lab pins the server to its own CPUs and the load generator to the others, so "
           "neither steals the other's cycles")
GEN_WHY = ("the lab drives load with Locust (FastHttpUser) or its own Go generator `loadgen`: "
           "closed loop, N users each waiting for its answer before the next request, like -c N; "
           "a level where Locust was generator-bound or -influenced is measured again with loadgen "
           "(both calibrated against wrk, and one level cross-checked with wrk: see 'The generator')")

ARTICLES: dict[str, Article] = {a.notebook: a for a in [
    Article("01-linear-writes", "000",
            "Stephen Margheim, “SQLite Myths: Linear writes don't scale” (2023)", (
        Detail("machine", "MacBook Pro 16″ (2021), Apple M1 Max (10 cores), 32 GB; Ruby 3.2.2 + YJIT, "
               "SQLite 3.44.2", "col:machine", why=MACHINE_WHY),
        Detail("server CPUs", "all 10 cores, shared with hey", "cpus:server_pinning", expect=10,
               why=PIN_WHY),
        Detail("application", "the Rails 7.1.2 scaffold's `create` (production env, logging off): one "
               "INSERT, then a 302 to the show page", "col:server", expect=None,
               why="a minimal app in each stack doing what the scaffold does (one INSERT, 302 to a "
                   "~1.5 KB show page); no Rails, so less work per request"),
        Detail("Puma workers × threads", "10 × 3 (WEB_CONCURRENCY=10, RAILS_MAX_THREADS=3)",
               puma_shape, expect="10 × 3", why="set by the notebook's puma_workers/puma_threads"),
        Detail("journal mode", "WAL (Rails 7.1 default)", "pragma:journal_mode",
               expect=_profile_pragma("rails71", "journal_mode"), why="the profile sets another"),
        Detail("synchronous", "NORMAL (Rails 7.1 default)", "pragma:synchronous",
               expect=_profile_pragma("rails71", "synchronous"), why="the profile sets another"),
        Detail("transactions", "deferred (Rails 7.1)", "knob:txn_mode",
               expect=_profile("rails71")["txn_mode"], why="the profile sets another"),
        Detail("busy handling", "`timeout: 5000`: SQLite's busy_timeout, which holds Ruby's GVL while "
               "it waits", "knob:busy", expect=_profile("rails71")["busy"], why="the profile sets another"),
        Detail("request", "POST /requests; hey follows the 302 to the show page", "col:scenario",
               expect="rails-writes", why="another scenario"),
        Detail("load tool", "hey -c N -z 10s -m POST (Go net/http client)", "col:generator",
               expect=None, why=GEN_WHY),
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
    )),
    Article("02-busy-errors", "001", "samarbeid, “SQLite in production” (2024)", (
        Detail("machine", "not stated (a local Rails 7.1 app, oha in Docker)", "col:machine",
               expect=NOT_STATED),
        Detail("server", "`rails s` in development: Puma single mode, 5 threads (RAILS_MAX_THREADS), "
               "a pool of 5", puma_shape, expect="1 × 5", why="set by the notebook"),
        Detail("work per request", "Rails in development mode: 29 ms on average at 1 user (34.6 req/s)",
               mean_at("mean_ms", 1), expect=None,
               why="the lab's Rack app does only the ten statements, so the share of each request spent "
                   "inside a transaction is far larger here and transactions collide more often"),
        Detail("transaction shape", "ActiveRecord: each of the 5 records saved in its own write-first "
               "transaction; the 5 look-ups outside any transaction", "knob:metrics_txn",
               expect="record", why="one transaction per request (SELECT then INSERT, five times)"),
        Detail("development log", "Rails' development log writes every SQL statement to "
               "log/development.log as it runs: a file write, which releases Ruby's GVL inside every "
               "transaction, so another thread can run into the lock mid-transaction",
               "knob:sql_log", expect="on", why="the server logs no SQL"),
        Detail("request", "POST /metrics?load_test=true, empty body (data generated), --redirect 0",
               "col:scenario", expect="metrics-writes", why="another scenario"),
        Detail("load tool", "oha -c N -z 5s -m POST --latency-correction --disable-keepalive --redirect 0 "
               "(--latency-correction changes nothing without -q)", "col:generator", expect=None,
               why=GEN_WHY),
        Detail("keep-alive", "off: a new TCP connection per request (--disable-keepalive)",
               "col:keepalive", expect=False, why="the run kept connections alive"),
        Detail("users", "1 (baseline), then 3", "param:article_levels", expect=[1, 3],
               compare="superset", why="the run's levels do not include the article's"),
        Detail("duration", "5 s per run", "param:duration", expect=5, why="shorter runs at this scale"),
        Detail("warm-up", "none: oha counts from its first request", "param:warmup", expect=0,
               why="the lab warms up before its exact window; the whole-run counts include it"),
        Detail("repeats", "one run per set-up", "param:repeats", expect=1,
               why="the lab repeats each level and sums the status codes over the repeats"),
        Detail("set-ups", "`retries: 1000` → 15 of 168 were 500s; + enhanced adapter → 14 of 150; "
               "adapter with `timeout: 5000` → 0 of 143",
               "col:profile", expect=["rails71-retries+rails-dev", "adapter-retries+rails-dev",
                                      "rails8+rails-dev"], compare="superset",
               why="the run lacks one of the three set-ups"),
        Detail("the adapter and `retries:`", "activerecord-enhancedsqlite3-adapter (≥ 0.4) replaces Rails' "
               "configure_connection, where `retries:` was applied: with `retries:` and no `timeout:` "
               "there is no busy handler at all, and transactions are IMMEDIATE",
               stack_knob("ruby-puma", "busy"), expect=["retries:1000", "none", "sleep_poll:5000"],
               compare="superset", why="the run lacks one of the three busy policies"),
        Detail("the adapter's busy wait", "with `timeout: 5000`: sleeps 60 µs per try (releasing the GVL), "
               "gives up once tries × 60 µs > 5 s", stack_knob("ruby-puma", "busy"), expect=None,
               why="rails8 sleeps 1 ms per try until 5 s have passed (Rails 8's busy_handler_timeout): "
                   "the same GVL-releasing wait, polled more coarsely"),
        Detail("journal mode", "WAL (Rails 7.1 default)", "pragma:journal_mode", expect="wal",
               why="the profile sets another"),
        Detail("synchronous", "NORMAL (Rails 7.1 default)", "pragma:synchronous", expect="normal",
               why="the profile sets another"),
        Detail("statistic", "oha's status-code distribution: 500s among all responses of the run",
               recorded("run_counts", "busy 503s among the window's responses, and over the whole run"),
               expect=None, why="the lab's servers answer 503 for SQLITE_BUSY (Rails answered 500)"),
    )),
    Article("03-read-write-mix", "002", "“SQLite is Enough” (2025)", (
        Detail("machine", "ThinkPad P15v in power-saving mode", "col:machine", why=MACHINE_WHY),
        Detail("server CPUs", "4 (pinned)", "cpus:server_pinning",
               expect=SERVER_SPLITS["03-read-write-mix"], why=PIN_WHY + "; this machine has too "
               "few CPUs to give the server 4 and the generator the rest (sqlitelab.core.layout)"),
        Detail("generator CPUs", "16 (the rest)", "cpus:generator_pinning", expect=16, why=PIN_WHY),
        Detail("stacks", "FastAPI + stdlib sqlite3; Axum + rusqlite", "col:server",
               expect=["python-fastapi", "rust-axum"], compare="superset",
               why="the run lacks one of the article's stacks"),
        Detail("write path", "every write through one dedicated writer thread; reads in parallel",
               "knob:write_path", expect="writer", why="another write path"),
        Detail("journal mode", "WAL", "pragma:journal_mode", expect="wal", why="another journal mode"),
        Detail("synchronous", "not stated, so the drivers' default: FULL (Python's sqlite3 and rusqlite "
               "leave SQLite's default)", "pragma:synchronous", expect="full",
               why="set by the notebook's `synchronous`"),
        Detail("load generator", "own Rust tool (reqwest + tokio), N concurrent async workers",
               "col:generator", expect=None, why=GEN_WHY),
        Detail("mix", "90 % GET by primary key / 10 % POST", "param:write_share", expect=0.1,
               why="another write share"),
        Detail("payload", "2 KB", "param:payload_bytes", expect=2048, why="another payload size"),
        Detail("warm-up rows", "1,000 entries written before the run", "param:warmup_rows",
               expect=1000, why="another number of warm-up rows"),
        Detail("workers", "8, 32, 64, 128, 256", "param:levels", expect=[8, 32, 64, 128, 256],
               compare="superset", why="the run's levels do not include all of the article's"),
        Detail("requests per level", "50,000", "param:requests", expect=50_000,
               why="fewer requests per level at this scale"),
        Detail("warm-up", "none: after its 1,000 rows the tool sends the level's requests, all counted",
               "param:warmup", expect=0, why="the lab starts counting after a short warm-up"),
        Detail("repeats", "one run per level", "param:repeats", expect=1, why="repeated"),
        Detail("statistic", "rps and p50/p95/p99 over each level's requests", recorded(
            "p99_ms", "rps and p50/p95/p99 over the level's N requests"),
               expect=None, why="the lab counts the first N requests that start in its window (after "
                                "the warm-up, if any) and finish, from an HdrHistogram in µs"),
    )),
    Article("04-sqlite-as-buffer", "003", "“The surprising effectiveness of SQLite for non-persistent "
            "use cases” (2025); the author's load test, METResearchGroup/bluesky-research@de1246d9", (
        Detail("machine", "a MacBook (Apple silicon, model not stated); 100 M at 100 rows ran out of "
               "memory on a 40 GB Slurm node", "col:machine", why=MACHINE_WHY),
        Detail("Python", "3.10 (the repository's): a dropped sqlite3 connection closes at once",
               "col:python", expect=None, only=AS_PUBLISHED,
               why="3.11+ keeps a dropped connection open until the cyclic GC runs; `article` closes "
                   "it where 3.10 would have, the `py311_gc` variant leaves it to the GC"),
        Detail("records", "{uri, text}: random strings of 10, 15 and 50 characters, ~127 B of JSON "
               "each, all generated in memory before the timing",
               lambda r: (f"the same records from the lab's generator (buffer.lab_records), all in "
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
                   "them (records/s); at seed scale up to 10 M records, so that the seed run fits "
                   "its 90 minutes"),
    )),
    Article("05-single-machine", "004", "“SQLite is the best database in the world” (Go on a laptop)", (
        Detail("machine", "MacBook Air M1 (8 cores), 8 GB", "col:machine", why=MACHINE_WHY),
        Detail("server CPUs", "all 8 cores, shared with the load tool", "cpus:server_pinning", expect=8,
               why=PIN_WHY),
        Detail("Go threads", "GOMAXPROCS = 8 (every core)", stack_knob("go-nethttp", "threads"),
               expect=8, why="GOMAXPROCS follows the server's CPUs here"),
        Detail("DSN: shared cache", "?cache=shared", "knob:cache", expect="shared",
               why="the profile does not set it"),
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
    )),
    Article("09-network-delay", "000, 002, 004", "the articles' loopback runs, over a network", (
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
        Detail("load tool", "hey (000); a Python/asyncio client (002); not stated (004)",
               "col:generator", expect=None,
               why="one generator for every path (loadgen by default, calibrated against wrk), so "
                   "that its own cost is the same in every row and leaves CPU to the link"),
        Detail("server CPUs", "the whole machine", "cpus:server_pinning", expect=None, why=PIN_WHY),
        Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
    )),
    Article("07-sqlite-vs-postgres", "000, 001, 002, 004", "the articles' workloads, on Postgres too", (
        Detail("database", "SQLite only: every article argues against “just use Postgres” without "
               "measuring it", stores, expect=["sqlite"],
               why="this notebook's question: the same servers and load on a real Postgres 15 beside "
                   "SQLite (sqlitelab.infra.postgres), and Postgres on a host of its own (a delayed link)"),
        Detail("application code", "each article's own server", "col:server", expect=None,
               why="the lab's four servers, one code path per stack with a database seam: the same "
                   "endpoints, statements, transactions and acknowledgements on both databases"),
        Detail("durability", "SQLite's synchronous as each profile sets it (NORMAL for Rails, FULL "
               "for seed 002's drivers, OFF for seed 004)", postgres_durability, expect=None,
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
        Detail("load tool", "hey (000), oha (001), a Python/asyncio client (002), not stated (004)",
               "col:generator", expect=None,
               why="one generator for every row (loadgen by default, calibrated against wrk), so its "
                   "own cost is the same on both databases"),
        Detail("windows", "000: 10 s; 001: 5 s; 002: 50,000 requests; 004: not stated",
               "param:duration", expect=None,
               why="one window length for every workload, so that each pair is measured alike"),
        Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
    )),
    Article("08-operations-under-load", "000, 002", "capacity as operators measure it, and the day the backup runs", (
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
        Detail("load tool", "hey (000); a Python/asyncio client (002)", "col:generator", expect=None,
               why="loadgen (the lab's Go generator, calibrated against wrk) at every rate: one "
                   "Locust core is the limit first"),
        Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
    )),
    Article("06-capacity", "000, 002, 004", "the articles' napkin math", (
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
    )),
]}


# --------------------------------------------------------------------------- the table

def article(notebook: str) -> Article:
    if notebook not in ARTICLES:
        raise ValueError(f"no method table declared for {notebook!r}; known: {', '.join(ARTICLES)}")
    return ARTICLES[notebook]


def table(notebook: str, points: pd.DataFrame | None = None, parameters: dict | None = None,
          details: tuple[Detail, ...] | None = None) -> pd.DataFrame:
    """aspect · the article · this run · verdict (`same`, `differs: why`, `not stated`)."""
    run = RunView(points, parameters)
    rows = []
    for d in details if details is not None else article(notebook).details:
        try:
            value = (run.where(**d.only) if d.only else run).get(d.run)
            shown = render(value)
        except NotRecorded as e:
            rows.append({"aspect": d.aspect, "article": d.article, "this run": NOT_RECORDED,
                         "verdict": f"not recorded ({e.args[0]})"})
            continue
        except NotRun as e:
            rows.append({"aspect": d.aspect, "article": d.article, "this run": "not in this run",
                         "verdict": f"differs: the run has no points with {e.args[0]}"})
            continue
        if d.expect is NOT_STATED:
            verdict = f"not stated by the article; {d.why}" if d.why else "not stated by the article"
        elif d.expect is not None and matches(value, d.expect, d.compare):
            verdict = "same"
        else:
            verdict = f"differs: {d.why}" if d.why else "differs"
        rows.append({"aspect": d.aspect, "article": d.article, "this run": shown, "verdict": verdict})
    return pd.DataFrame(rows, columns=["aspect", "article", "this run", "verdict"])


def unrecorded(method: pd.DataFrame) -> list[str]:
    """Aspects whose run value was not recorded."""
    return method.loc[method["this run"] == NOT_RECORDED, "aspect"].tolist()


def show(notebook: str, points: pd.DataFrame | None, parameters: dict | None, run_id: str,
         details: tuple[Detail, ...] | None = None, runs_dir: Path | None = None) -> pd.DataFrame:
    """Display the method table under its article's title and write it to
    data/runs/<run_id>/method.csv; returns it."""
    from IPython.display import Markdown, display  # lazy: only when shown in a notebook
    m = table(notebook, points, parameters, details)
    a = article(notebook)
    out = Path(runs_dir or config.RUNS_DIR) / run_id
    out.mkdir(parents=True, exist_ok=True)
    m.to_csv(out / "method.csv", index=False)
    same = int((m["verdict"] == "same").sum())
    display(Markdown(f"**Method: seed {a.seed}, {a.title}, against this run** — {same} of {len(m)} "
                     "details the same; every difference says why."))
    with pd.option_context("display.max_colwidth", None):
        display(m.style.hide(axis="index").set_properties(**{"text-align": "left",
                                                                "white-space": "pre-wrap"}))
    return m
