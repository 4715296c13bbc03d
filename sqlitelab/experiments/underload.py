"""Operations under load (notebook 08, issue 16): capacity from offered load, then a steady
open-loop load at a fraction of it while, at a marked second, one heavy operation runs.

1. `capacity`: per stack, closed-loop levels (experiment `closed`) and open-loop arrival rates
   (experiment `open`, `open_users` at most in flight) of one workload; capacity.three_ways
   sets the open-loop capacity beside the closed-loop one and the naive peak.
2. `operations`: per stack and operation (sqlitelab.infra.operations.OPERATIONS), a sweep of one
   open-loop level at `fraction` of that stack's open-loop capacity (experiment
   `op/<operation>`), the operation started `at_s` seconds into the window on the server's CPUs
   (as an operator's command on the server machine), every point audited, its window stored
   second by second (results.db `seconds`).
Notebook 08's module (sqlitelab.notebooks.operations_under_load) reads what each operation cost
the users from those seconds (cost_table) and picks each stack's steady rate (steady_rates).
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.experiments.sweep import Spec, spec
from sqlitelab.infra import operations as ops
from sqlitelab.studies.operations_under_load import WORKLOAD


def experiment(operation: str | None, server: str | None = None) -> str:
    """The open-loop sweep's experiment, or an operation's on one server (`op/<operation>/<server>`:
    each stack's sweep its own runs row)."""
    return "open" if operation is None else "/".join(e for e in ("op", operation, server) if e)


def _workload_args(users_rows: int) -> dict:
    """sweep's arguments for the study's WORKLOAD, on a users table of `users_rows` rows."""
    return dict(profiles=[WORKLOAD["profile"]], scenario=WORKLOAD["scenario"],
                scenario_params=WORKLOAD["scenario_params"], seed_items=WORKLOAD["seed_items"],
                payload_bytes=WORKLOAD["payload_bytes"], seed_users=users_rows)


def capacity_specs(*, notebook: str, servers: list[str], levels: list[int], rates: list[float],
                   open_users: int, duration: float, warmup: float, users_rows: int,
                   arrivals: str = "constant", **common) -> list[Spec]:
    """The closed-loop levels, then the open-loop rates, of the workload on every stack: two
    sweeps, checked, for `sweep.run`."""
    args = dict(notebook=notebook, servers=servers, duration=duration, warmup=warmup,
                **_workload_args(users_rows), **common)
    return [spec(experiment="closed", levels=levels, **args),
            spec(experiment="open", levels=[open_users], rates=rates, arrivals=arrivals, **args)]


def operation_specs(*, notebook: str, steady: pd.DataFrame, operations: list[str], open_users: int,
                    duration: float, warmup: float, at_s: float, users_rows: int,
                    op_params: dict | None = None, keep_copies: bool = False, **common) -> list[Spec]:
    """Every operation under every stack's steady rate (a sweep each: a fresh copy of the
    database and a fresh start of the server, so one operation's leftovers never meet the next).
    The copies an operation makes are checked, recorded and removed unless `keep_copies`
    (sqlitelab.infra.operations; `op_params` may still set it per operation). The sweeps, each
    checked, for `sweep.run`."""
    if not 0 <= at_s < duration:
        raise ValueError(f"at_s must be within the window (0 <= at_s < duration={duration}), not {at_s!r}")
    for name in operations:
        if name not in ops.OPERATIONS:
            raise ValueError(f"unknown operation {name!r}; known: {', '.join(ops.OPERATIONS)}")
    keep = {name: {"keep_copies": keep_copies} for name in operations  # those that make copies
            if "keep_copies" in ops.PARAMS[name]}
    sweeps = []
    for row in steady.dropna(subset=["steady_rate"]).itertuples():
        for name in operations:
            sweeps.append(spec(
                notebook=notebook, experiment=experiment(name, row.server), servers=[row.server],
                **_workload_args(users_rows), levels=[open_users],
                rates=[round(float(row.steady_rate), 1)], duration=duration, warmup=warmup,
                operation={"name": name, "at_s": at_s, **keep.get(name, {}),
                           **(op_params or {}).get(name, {})},
                **common))
    return sweeps


