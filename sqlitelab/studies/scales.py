"""How big a notebook run is. A *scale* (quick | seed) is not a *profile* (server knobs).

`quick` finishes the whole collection in minutes; `seed` uses the articles' own levels and
durations. A notebook's `parameters` cell names the scale; any parameter left `None` takes
the scale's value (its module's SCALES), anything else overrides it. The functions here take
the notebook's module (`study`: what it declares, sqlitelab.studies.declarations).
`crosscheck_users`: the level (or levels) at which a sweep adds one point of a reference client
— wrk, hey or oha — per server and profile (sweep's `crosscheck`, `crosscheck_tool`);
`ceiling_seconds`: each half (commits, then point reads) of the raw-SQLite ceiling on the server's
core (baseline.ceiling).

`seed` keeps every setting an article states (its levels, durations, request counts, record
totals, rows per transaction, connection behaviour, repeats) and must finish within 90 minutes
on a 2-core machine (DESIGN). What the lab adds beyond an article is sized to fit
(`python -m sqlitelab.report.timing` and timing.phases show where a run's time went): each
notebook's module (sqlitelab.notebooks.<notebook>, SCALES) says in its docstring what its seed
scale keeps and cuts.
"""
from __future__ import annotations

from types import ModuleType
from typing import Iterable

from sqlitelab.core.vocabulary import JOURNAL_MODES, SYNCHRONOUS
from sqlitelab.infra import servers as stacks
from sqlitelab.load import commands

# The collection's wall time per scale on the reference machine (2 cores, set-up warm): `make run`
# (quick) within 15 minutes of notebooks, `make seed` within 90 (DESIGN), no quick notebook over
# QUICK_MOST. Each notebook's BUDGET_SECONDS is its own wall time with a margin, never a share lent
# to or from another; what they leave of the collection's is spare(), which a new notebook takes
# without editing another's. tests/test_studies.py checks they fit.
COLLECTION_BUDGET_SECONDS: dict[str, float] = {"quick": 15 * 60, "seed": 90 * 60}
QUICK_MOST = 150.0


def budget(study: ModuleType | None, scale: str) -> float | None:
    """The notebook's wall-time budget at `scale` in seconds (its BUDGET_SECONDS), None for a
    scale it has none for, or for no notebook (None: one of a LAB_NOTEBOOKS_DIR of one's own)."""
    return None if study is None else study.BUDGET_SECONDS.get(scale)


def budgets(studies: Iterable[ModuleType], scale: str) -> dict[str, float]:
    """Every notebook's budget at `scale` by ID, in the order given (sqlitelab.notebooks.studies)."""
    return {s.ID: b for s in studies if (b := budget(s, scale)) is not None}


def spare(studies: Iterable[ModuleType], scale: str) -> float:
    """What the notebooks' budgets at `scale` leave of the collection's (negative: over it)."""
    return COLLECTION_BUDGET_SECONDS[scale] - sum(budgets(studies, scale).values())


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


# What each setting accepts — a notebook's (checked by `settings` before it starts anything) and a
# sweep's (sqlitelab.experiments.sweep.Settings names its checks here) — a check and the words an
# error gives (one line: "<name> must be <words>, not <value>").
ACCEPTS: dict[str, tuple] = {
    **{k: (_integers(1), "a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4]")
       for k in ("levels", "article_levels", "synchronous_levels", "beyond_levels")},
    **{k: (_integers(1, empty=True), "a list of integers >= 1 (concurrent users; []: none)")
       for k in ("fine_levels", "client_levels")},
    "worker_levels": (_integers(1), "a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4]"),
    "worker_counts": (_integers(1, empty=True), "a list of integers >= 1 (Puma workers; []: no sweep)"),
    **{k: (lambda v: _number(v) and v > 0, "a number of seconds > 0")
       for k in ("duration", "ceiling_seconds", "crosscheck_seconds", "max_seconds", "op_duration",
                 "max_duration")},
    **{k: (lambda v: _number(v) and v >= 0, "a number of seconds >= 0") for k in ("warmup", "at_s", "pause")},
    "processes": (lambda v: v == "auto" or (_integer(v) and v >= 1), '"auto" or an integer >= 1 (generator processes)'),
    **{k: (lambda v: _integer(v) and v >= 1, "an integer >= 1 (runs of each level)")
       for k in ("repeats", "beyond_repeats")},
    "rounds": (lambda v: _integer(v) and v >= 1, "an integer >= 1 (rounds of the whole sweep)"),
    "order_seed": (lambda v: _integer(v) and v >= 0, "an integer >= 0 (the rounds' shuffle)"),
    **{k: (lambda v: _number(v) and 0 < v < 1, "a share of the mean, 0 < share < 1 (e.g. 0.05: "
                   "a 95 % interval within ±5 %)") for k in ("half_width", "peak_half_width")},
    "peak_rounds": (lambda v: _integer(v) and v >= 3, "an integer >= 3 (the most rounds of the peaks sweep)"),
    "cpu_cap": (lambda v: _number(v) and 0 < v <= 1, "a share of the server's CPUs, 0 < share <= 1 "
                "(e.g. 0.8: held to 80 %)"),
    **{k: (lambda v: _integer(v) and v >= 1, "an integer >= 1 (concurrent users)")
       for k in ("share_users", "paths_users", "open_users")},
    "plain_users": (lambda v: _integer(v) and v >= 0, "an integer >= 0 (concurrent users; 0: no plain run)"),
    "crosscheck_users": (lambda v: (_integer(v) and v >= 1) or _integers(1)(v),
                         "an integer >= 1 or a non-empty list of them (concurrent users)"),
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
    "users_scenarios": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, str) for x in v),
                        "a non-empty list of seed 004's endpoints, e.g. [\"user-read\"]"),
    "generator": (lambda v: v in commands.GENERATORS, f"one of {', '.join(commands.GENERATORS)}"),
    **{k: (lambda v: isinstance(v, str) and bool(v.strip()),
           "a run: its id, newest:<scale>:<NN> or reference:<NN>") for k in ("run_a", "run_b")},
    "write_paths": (lambda v: isinstance(v, (list, tuple)) and bool(v)
                    and all(w in stacks.KNOBS["write_path"]["values"] for w in v),
                    "a non-empty list of write paths: pool, writer, batch"),
    "modes": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(
        isinstance(m, str) and m.partition("-")[0] in JOURNAL_MODES and m.partition("-")[2] in SYNCHRONOUS.values()
        for m in v), "a non-empty list of <journal>-<synchronous> modes (journal wal or delete; synchronous "
                     "off, normal, full or extra), e.g. [\"wal-normal\", \"wal-full\"]"),
    "writebacks": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(_number(b) and 0 <= b <= 1 for b in v),
                   "a non-empty list of shares of dirty pages written back at a cut, 0 to 1, e.g. [0, 0.5]"),
    "write_rates": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(r is None or (_number(r) and r > 0) for r in v),
                    "a non-empty list of writes per second > 0, or null: as fast as answered, e.g. [100, null]"),
    "checkpoints": (lambda v: isinstance(v, (list, tuple)) and bool(v) and all(c is None or (_integer(c) and c >= 0) for c in v),
                    "a non-empty list of wal_autocheckpoint pages >= 0, or null: SQLite's 1,000, e.g. [100, null]"),
    "litestream": (lambda v: isinstance(v, bool), "true or false (each WAL mode's cuts again with Litestream replicating)"),
    "cut_window": (lambda v: isinstance(v, (list, tuple)) and len(v) == 2 and all(_number(x) for x in v)
                   and 0 <= v[0] <= v[1] <= 60, "[from, to]: seconds after the load began, 0 <= from <= to <= 60"),
}


def refuse(name: str, value, accepts: str | None = None) -> None:
    """Refuse `value` of setting `name` unless its check in ACCEPTS (under `accepts`, else its own
    name) takes it, in one line naming both: "<name> must be <words>, not <value>"."""
    check, words = ACCEPTS[accepts or name]
    if not check(value):
        raise ValueError(f"{name} must be {words}, not {value!r}")


def names(study: ModuleType) -> list[str]:
    """Every setting a scale of the notebook holds: each is a `None` parameter of the notebook."""
    return sorted({k for scale in study.SCALES.values() for k in scale})


def settings(study: ModuleType, scale: str, **overrides) -> dict:
    """The scale's settings for the notebook `study` declares, with every non-None override
    applied. A name no scale of the notebook holds is refused (a parameter passed here that
    nothing reads), and so is a value its setting does not accept (ACCEPTS), in one line naming
    both."""
    known = study.SCALES
    if scale not in known:
        raise ValueError(f"scale must be one of {sorted(known)}, not {scale!r}")
    unknown = sorted(set(overrides) - set(names(study)))
    if unknown:
        raise ValueError(f"{study.ID} has no scale setting {', '.join(map(repr, unknown))} "
                         f"(known: {', '.join(names(study))})")
    out = dict(known[scale])
    for k, v in overrides.items():
        if v is not None:
            if k in ACCEPTS:
                refuse(k, v)
            out[k] = v
    out["scale"] = scale
    out["budget_seconds"] = budget(study, scale)
    return out


def from_parameters(study: ModuleType, scale: str, namespace: dict, **renamed) -> dict:
    """`settings` with the notebook's own parameters: each scale setting of the notebook that its
    namespace (a notebook's `globals()`) holds, None for the scale's value — so a notebook passes
    its parameters through without typing each name again. `renamed`: a setting whose parameter
    has another name (04's `methods_run`, as `methods` is a module there). A module or function
    in the namespace under a setting's name is refused, naming it: no parameter holds one."""
    given = {}
    for name in names(study):
        if name in renamed or name not in namespace:
            continue
        value = namespace[name]
        if isinstance(value, ModuleType) or callable(value):
            raise ValueError(f"{name}: the notebook holds {value!r} by that name, not a parameter; "
                             f"pass its parameter as from_parameters(..., {name}=...)")
        given[name] = value
    return settings(study, scale, **given, **renamed)
