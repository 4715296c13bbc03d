"""The clients a sweep's cross-check can run (`sweep(crosscheck=…, crosscheck_tool=…)`), by name:
wrk, the lab's reference (Debian's package), and the articles' own tools, hey (seed 000) and oha
(seed 001), each installed by its module's `INSTALL` target. Each module has `available()`, `COUNTED_AS` (the lab's column
whose rate is counted as the client counts its own, declared in sqlitelab.core.vocabulary),
`expressible(scenario, scenario_params, keepalive)` (None, or why it cannot send the scenario) and
`run_point(server, scenario, users, out_dir, *, duration, warmup, cpus, scenario_params, keepalive)`,
which returns a row of the crosschecks table (sqlitelab.core.schema)."""
from __future__ import annotations

from types import ModuleType

from sqlitelab.load import driver as load, hey, oha, wrk

TOOLS: dict[str, ModuleType] = {"wrk": wrk, "hey": hey, "oha": oha}


def tool(name: str) -> ModuleType:
    """The client named `name`, built: a clear error for an unknown one or one not installed."""
    if name not in TOOLS:
        raise ValueError(f"crosscheck_tool must be one of {', '.join(TOOLS)}, not {name!r}")
    if not TOOLS[name].available():
        raise load.LoadError(f"the cross-check needs {name}: run {TOOLS[name].INSTALL}")
    return TOOLS[name]
