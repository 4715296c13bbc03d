"""Operations under load (notebook 08, issue 16): capacity from offered load, then a steady
open-loop load at a fraction of it while, at a marked second, one heavy operation runs.

1. `capacity`: per stack, closed-loop levels (experiment `closed`) and open-loop arrival rates
   (experiment `open`, `open_users` at most in flight) of one workload; capacity.three_ways
   sets the open-loop capacity beside the closed-loop one and the naive peak.
2. `operations`: per stack and operation (sqlitelab.operations.OPERATIONS), a sweep of one
   open-loop level at `fraction` of that stack's open-loop capacity (experiment
   `op/<operation>`), the operation started `at_s` seconds into the window on the server's CPUs
   (as an operator's command on the server machine), every point audited, its window stored
   second by second (results.db `seconds`).
`cost_table` reads what each operation cost the users from those seconds.
"""
from __future__ import annotations

import pandas as pd

from . import capacity, results

# The workload, declared once: seed 002's 90/10 mix through one writer (notebook 03), on a
# database whose users table is large (the index builds on it; the mix never reads it).
WORKLOAD = {"scenario": "mix", "profile": "single-writer", "scenario_params": {"write_share": 0.1},
            "seed_items": 1000, "payload_bytes": 2048,
            "what": "seed 002's mix: 90 % GET /items/{id}, 10 % POST /items of 2 KB, one writer"}


def experiment(operation: str | None) -> str:
    return "open" if operation is None else f"op/{operation}"


def _workload_args(users_rows: int) -> dict:
    """sweep's arguments for WORKLOAD, on a users table of `users_rows` rows."""
    return dict(profiles=[WORKLOAD["profile"]], scenario=WORKLOAD["scenario"],
                scenario_params=WORKLOAD["scenario_params"], seed_items=WORKLOAD["seed_items"],
                payload_bytes=WORKLOAD["payload_bytes"], seed_users=users_rows)


def run_capacity(*, notebook: str, servers: list[str], levels: list[int], rates: list[float],
                 open_users: int, duration: float, warmup: float, users_rows: int,
                 arrivals: str = "constant", **common) -> pd.DataFrame:
    """The closed-loop levels, then the open-loop rates, of the workload on every stack."""
    from .sweep import sweep
    args = dict(notebook=notebook, servers=servers, duration=duration, warmup=warmup,
                **_workload_args(users_rows), **common)
    closed = sweep(experiment="closed", levels=levels, **args)
    opened = sweep(experiment="open", levels=[open_users], rates=rates, arrivals=arrivals, **args)
    return pd.concat([closed, opened], ignore_index=True)


def steady_rates(points: pd.DataFrame, fraction: float, slo_p99_ms: float) -> pd.DataFrame:
    """Per stack: its open-loop capacity and the steady rate (`fraction` of it) the operations
    run under; a stack that kept up with no rate offered gets none (it is left out)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction!r}")
    cap = capacity.open_loop_capacity(points, slo_p99_ms, by=("server",))
    if cap.empty:
        return cap
    cap = cap.loc[cap.groupby("server")["open_rps"].idxmax()].reset_index(drop=True)
    cap["steady_rate"] = (cap["open_rps"] * fraction).where(cap["open_rps"] > 0)
    return cap


def run_operations(*, notebook: str, steady: pd.DataFrame, operations: list[str], open_users: int,
                   duration: float, warmup: float, at_s: float, users_rows: int,
                   op_params: dict | None = None, keep_copies: bool = False, **common) -> pd.DataFrame:
    """Every operation under every stack's steady rate (a sweep each: a fresh copy of the
    database and a fresh start of the server, so one operation's leftovers never meet the next).
    The copies an operation makes are checked, recorded and removed unless `keep_copies`
    (sqlitelab.operations; `op_params` may still set it per operation)."""
    from . import operations as ops
    from .sweep import sweep
    if not 0 <= at_s < duration:
        raise ValueError(f"at_s must be within the window (0 <= at_s < duration={duration}), not {at_s!r}")
    for name in operations:
        if name not in ops.OPERATIONS:
            raise ValueError(f"unknown operation {name!r}; known: {', '.join(ops.OPERATIONS)}")
    keep = {name: {"keep_copies": keep_copies} for name in operations  # those that make copies
            if "keep_copies" in ops.PARAMS[name]}
    frames = []
    for row in steady.dropna(subset=["steady_rate"]).itertuples():
        for name in operations:
            frames.append(sweep(
                notebook=notebook, experiment=experiment(name), servers=[row.server],
                **_workload_args(users_rows), levels=[open_users],
                rates=[round(float(row.steady_rate), 1)], duration=duration, warmup=warmup,
                operation={"name": name, "at_s": at_s, **keep.get(name, {}),
                           **(op_params or {}).get(name, {})},
                **common))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def timeline(run_id: str, path=None) -> pd.DataFrame:
    """The `seconds` rows of a notebook run's operation sweeps, with the second relative to the
    operation's start (`since_op_s`) and the WAL in MiB."""
    sec = results.load_table("seconds", run_id, path)
    if sec.empty:
        return sec
    sec = sec[sec["operation"].notna()].copy()
    sec["since_op_s"] = sec["second"] - sec["operation_started_s"]
    sec["wal_mib"] = sec["wal_bytes"] / 2**20
    return sec.sort_values(["server", "operation", "second"]).reset_index(drop=True)


def cost_table(points: pd.DataFrame, seconds: pd.DataFrame) -> pd.DataFrame:
    """Per stack and operation: how long it took, and the users' p99 in the seconds before it
    against the worst second while it ran (and the second after), errors, late sends and the
    backlog while it ran, the WAL's peak, and the audit."""
    rows = []
    if points.empty or "operation" not in points or seconds.empty:
        return pd.DataFrame(rows)
    for p in points[points["operation"].notna()].itertuples():
        s = seconds[(seconds["run_id"] == p.run_id) & (seconds["server"] == p.server)
                    & (seconds["operation"] == p.operation)]
        start, length = p.operation_started_s, p.operation_seconds or 0.0
        before = s[s["second"] + 1 <= start]
        during = s[(s["second"] + 1 > start) & (s["second"] <= start + length + 1)]
        worst = during["p99_ms"].max() if len(during) else None
        base = before["p99_ms"].median() if len(before) else None
        rows.append({
            "server": p.server, "operation": p.operation, "rate": p.rate,
            "op_started_s": start, "op_seconds": length,
            "p99_before_ms": base, "worst_p99_during_ms": worst,
            "p99_cost_x": (worst / base) if worst is not None and base else None,
            "errors_during": int(during["errors"].sum()) if len(during) else 0,
            "late_during": int(during["late"].sum()) if len(during) else 0,
            "window_p99_ms": p.p99_ms, "backlog": p.backlog, "errors": p.errors,
            "wal_peak_mib": (s["wal_bytes"].max() / 2**20) if s["wal_bytes"].notna().any() else None,
            "audit_ok": p.audit_ok,
        })
    return pd.DataFrame(rows)
