"""The vocabulary a notebook's method rows are written in (sqlitelab.notebooks.<notebook>.ARTICLE).

A `Detail` names one methodological choice (what is timed, levels, connections, pragmas,
transactions, the statistic reported, the machine…), what the article did — in its words,
with the value in the lab's terms where one exists (`expect`) — and where the run's own value
is read: a notebook parameter the run stored (`param:levels`), a column of its points
(`col:generator`), a knob the server reported in `/health` (`knob:busy`, `pragma:synchronous`),
the number of CPUs it was pinned to (`cpus:server_pinning`), or a function of the points (the
helpers below). Nothing about the run is typed in a notebook's module: sqlitelab.report.methods.table
reads it through a `RunView`, and says `same` or `differs: why`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from sqlitelab.core import layout, sqlite_bugs
from sqlitelab.core.vocabulary import SYNCHRONOUS, link_label, link_title, store_label
from sqlitelab.infra import servers

NOT_STATED = object()   # the article does not say


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


def profile_knobs(name: str) -> dict:
    """A profile of servers/profiles.toml, as the servers read it."""
    return servers.load_profiles()[name]


def profile_pragma(name: str, pragma: str) -> str:
    """What profile `name` (servers/profiles.toml) sets `pragma` to, in the lab's words."""
    for item in profile_knobs(name)["pragmas"].split(","):
        k, _, v = item.partition("=")
        if k.strip() == pragma:
            return SYNCHRONOUS.get(v.strip().lower(), v.strip().lower())
    raise KeyError(f"profile {name} sets no {pragma}")


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


# --------------------------------------------------------------------------- helpers for details

def recorded(column: str, text: str) -> Callable:
    """The run's value is a method (`text`), present when `column` was recorded."""
    def get(run: RunView):
        run.col(column)
        return text
    return get


def window(run: RunView):
    """A level's window as the run set it: its count of requests, or, where it counted none, its
    seconds ("a 1.5-s window")."""
    if run.parameters.get("requests") is not None:
        return run.param("requests")
    return f"a {run.param('duration'):g}-s window"


# The stacks Puma runs (the articles' Rails, and the Rack app with Rails' settings): a notebook's
# Puma workers × threads and YJIT parameters are theirs (puma_knobs).
PUMA_STACKS = ("ruby-rails", "ruby-puma")


def puma_knobs(stacks: "list[str] | tuple[str, ...]", **knobs) -> dict[str, dict]:
    """A sweep's server_knobs giving `knobs` (processes, threads, yjit) to each Puma stack of
    `stacks`."""
    return {s: dict(knobs) for s in stacks if s in PUMA_STACKS}


def puma_shape(stack: str) -> Callable:
    """A Puma stack's processes × threads, from its /health knobs."""
    def get(run: RunView) -> list[str]:
        r = run.where(server=stack).points
        if r[["server_processes", "server_threads"]].isna().any().any():
            raise NotRecorded("col:server_processes/server_threads")
        return [f"{int(p)} × {int(t)}" for p, t in
                sorted({(p, t) for p, t in zip(r["server_processes"], r["server_threads"])})]
    return get


def software(stack: str, keys: tuple[str, ...]) -> Callable:
    """A stack's software as its /health reported it: the `keys` of its versions, each as
    `name version`, then SQLite's (the library the server's driver runs) with its compile options
    that bear on durability and concurrency (sqlite_bugs.SALIENT) and every published data-loss
    bug whose range holds it (sqlite_bugs.flags: ⚠ and the condition that triggers it)."""
    def get(run: RunView) -> list[str]:
        r = run.where(server=stack).points
        if "server_versions" not in r or r["server_versions"].isna().all():
            raise NotRecorded("col:server_versions")
        out = set()
        none = [None] * len(r)
        for versions, sqlite, options in zip(r["server_versions"], r.get("sqlite_version", none),
                                             r.get("sqlite_options", none)):
            v = json.loads(versions) if isinstance(versions, str) else {}
            parts = [f"{k} {v[k]}" for k in keys if k in v]
            if isinstance(sqlite, str) and sqlite:
                said = sqlite_bugs.salient(json.loads(options)) if isinstance(options, str) else []
                parts.append(f"SQLite {sqlite}" + (f" ({', '.join(said)})" if said else "")
                             + "".join(f" ⚠ {f}" for f in sqlite_bugs.flags(sqlite)))
            out.add(", ".join(parts))
        return sorted(out)
    return get


def generator_flags(run: RunView) -> str:
    """How the run's generator flags were settled, counted from its points: the levels measured
    again with another generator (a point that replaced one: `replaced_generator`), and the
    flagged levels that kept their flag; "none flagged" where no point was."""
    pts = run.points
    if pts.empty:
        return "no points"
    flag = lambda col: pts[col].fillna(0).astype(bool) if col in pts else pd.Series(False, index=pts.index)  # noqa: E731
    again = pts["replaced_generator"].notna() if "replaced_generator" in pts else pd.Series(False, index=pts.index)
    kept = (flag("generator_bound") | flag("generator_influenced")) & ~again
    if not again.any() and not kept.any():
        return "none flagged"
    parts = []
    if again.any():
        parts.append(f"{int(again.sum())} point(s) measured again with {', '.join(sorted(set(pts.loc[again, 'generator'])))}")
    if kept.any():
        parts.append(f"{int(kept.sum())} flagged point(s) not measured again (their rate a lower bound)")
    return "; ".join(parts)


def crosscheck_client(run: RunView) -> str:
    """The cross-check's client and levels, from the run's parameters: "hey at 1, 4, 16 users";
    "not run" when the run had none (crosscheck_users None, as at quick scale in some notebooks)."""
    if "crosscheck_users" in run.parameters and not run.parameters["crosscheck_users"]:
        return f"not run (crosscheck_users {run.parameters['crosscheck_users']!r}): no cross-check points"
    levels = run.param("crosscheck_users")
    levels = [levels] if isinstance(levels, int) else levels
    return f"{run.param('crosscheck_tool')} at {', '.join(map(str, levels))} users"


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
    """09: the paths the run measured in plain words (link_title): `direct`, `proxy, no delay`,
    `proxy, <n> µs each way`."""
    if "link_delay_us" not in run.points:
        raise NotRecorded("col:link_delay_us")
    return [link_title(v) for v in sorted({link_label(v) for v in run.points["link_delay_us"]}, key=_sort_key)]


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
        out.add(f"{profile}: synchronous={profile_pragma(profile, 'synchronous')} → "
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


# --------------------------------------------------------------------------- reasons several articles share

MACHINE_WHY = ("another machine: the lab reproduces the article's setup and the shape of its "
               "curves (where they peak, where errors start), not its absolute numbers")
PIN_WHY = ("the lab pins the server to its own CPUs and the load generator to the others, so "
           "neither steals the other's cycles")
GEN_WHY = ("the lab drives load with Locust (FastHttpUser) or its own Go generator `loadgen`: "
           "closed loop, N users each waiting for its answer before the next request, like -c N; "
           "a notebook that passes `confirm` measures again with loadgen each level where Locust was "
           "generator-bound or -influenced, and a level it does not confirm keeps its flag, its rate "
           "a lower bound (the 'generator flags' row says which happened here; both calibrated against wrk, and cross-checked at the scale's `crosscheck_users` by wrk "
           "or the article's own tool: see 'The generator')")
