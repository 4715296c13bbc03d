"""Notebook 08, operations under load (no article: the operators' questions, issue 16): capacity
from offered load, and the day the backup runs. Everything that is this notebook's, declared once.

Seed scale: open-loop rates of 5-s windows and 30-s windows around each operation, on 5,000,000
users rows (seed 004's size).

Its code: capacity from offered load, then a steady open-loop load at a fraction of it while, at a
marked second, one heavy operation runs.

1. `capacity_specs`: per stack, closed-loop levels (experiment `closed`) and open-loop arrival
   rates (experiment `open`, `open_users` at most in flight) of one workload;
   capacity.three_ways sets the open-loop capacity beside the closed-loop one and the naive peak,
   and `steady_rates` picks each stack's steady rate.
2. `operation_specs`: per stack and operation (sqlitelab.infra.operations.OPERATIONS), a sweep of
   one open-loop level at `fraction` of that stack's open-loop capacity (experiment
   `op/<operation>`), the operation started `at_s` seconds into the window on the server's CPUs
   (as an operator's command on the server machine), every point audited, its window stored
   second by second (results.db `seconds`).
Then the second-by-second timeline of an operation's window, what each operation cost the users
(`cost_table`), and the findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core import results
from sqlitelab.core.vocabulary import OPERATION_TITLES
from sqlitelab.experiments.sweep import Spec, spec
from sqlitelab.infra import operations as ops
from sqlitelab.infra.servers import stack_title
from sqlitelab.report import capacity, findings
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY


# What each constant means: sqlitelab.studies.declarations.
ID = "08-operations-under-load"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "operations under load"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "Capacity from offered load, and the day the backup runs"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "hockey-stick"

SCALES: dict[str, dict] = {
    # Quick: six rates from well under the quick closed-loop peaks to past them (the hockey
    # stick's flat part, its knee and its wall) in 1.5-s windows, and 4-s windows with the
    # operation at second 1.5: every operation but Litestream's replication ended within 1.2 s
    # of its start at quick (2026-11-26 at 3e90405), so the window still shows the load before,
    # during and after it.
    "quick": {"levels": [8, 64], "rates": [2000, 4000, 8000, 12000, 16000, 20000],
              "open_users": 64,
              "duration": 1.5, "warmup": 0.3, "op_duration": 4.0, "at_s": 1.5,
              "users_rows": 1_000_000, "fraction": 0.5},
    "seed": {"levels": [8, 16, 64], "rates": [2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000, 18000, 20000, 24000],
             "open_users": 64, "duration": 5.0, "warmup": 0.5, "op_duration": 30.0, "at_s": 10.0,
             "users_rows": 5_000_000, "fraction": 0.5},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 120, "seed": 570}  # seed: 540 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
# Its closed-loop levels (its open-loop rates: capacity.three_ways).
HEADLINE_EXPERIMENTS: set[str] | None = {"closed"}

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {"closed": "closed loop", "open": "open loop",
                           r"op/([a-z-]+)/([a-z-]+)": lambda op, server: f"{OPERATION_TITLES[op]} on {stack_title(server)}"}

# The workload, declared once: seed 002's 90/10 mix through one writer (notebook 03), on a
# database whose users table is large (the index builds on it; the mix never reads it).
# sqlitelab.notebooks.operations_under_load runs it.
WORKLOAD = {"scenario": "mix", "profile": "single-writer", "scenario_params": {"write_share": 0.1},
            "seed_items": 1000, "payload_bytes": 2048,
            "what": "seed 002's mix: 90 % GET /items/{id}, 10 % POST /items of 2 KB, one writer"}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["go-nethttp", "python-fastapi"],
               "levels": [4],
               "rates": [100, 400],
               "open_users": 16,
               "duration": 0.5,
               "warmup": 0.2,
               "op_duration": 2.0,
               "at_s": 1.0,
               "users_rows": 20000,
               "fraction": 0.5,
               "operations_run": ["checkpoint"]}
STORES: str | None = "points"

READING: dict[str, str] = {
    "hockey-stick":
        "Follow each stack's line to where it leaves the objective's line: below it the server keeps up "
        "with what arrives and p99 is its own service time; past the knee requests queue, and "
        "p99 (from their due time) climbs by orders of magnitude for a small step in load (a rate "
        "whose window left requests unsent, the table's backlog, fell behind even below the line).",
    "timeline":
        "Each panel starts its operation at 0: look at how far each second's p99 rose while the "
        "shade lasts, and how fast it came back after (errors and late requests are in the table).",
    "wal":
        "What the WAL did while the operation ran: a checkpoint empties it; a long reader (a "
        "backup, VACUUM INTO) keeps it from being reset, so it grows.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002", "capacity as operators measure it, and the day the backup runs", (
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
    Detail("load tool", "hey (000); the author's own Rust tool on reqwest + tokio (002)",
           "col:generator", expect=None,
           why="loadgen (the lab's Go generator, calibrated against wrk) at every rate: one "
               "Locust core is the limit first"),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

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


def timeline(run_id: str, path=None) -> pd.DataFrame:
    """The `seconds` rows of a notebook run's operation sweeps, with the WAL in MiB (the chart,
    plots.timeline_chart, counts each second from its operation's start)."""
    sec = results.load_table("seconds", run_id, path)
    if sec.empty:
        return sec
    sec = sec[sec["operation"].notna()].copy()
    sec["wal_mib"] = sec["wal_bytes"] / 2**20
    return sec.sort_values(["server", "operation", "second"]).reset_index(drop=True)


def cost_table(points: pd.DataFrame, seconds: pd.DataFrame) -> pd.DataFrame:
    """Per stack and operation: how long it took, and the users' p99 in the seconds before it
    against the worst second while it ran (and the second after), errors, late requests and the
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


def operations(three: pd.DataFrame, cost: pd.DataFrame) -> str:
    """Notebook 08: open-loop capacity against the closed-loop one and the naive peak
    (capacity.three_ways), then what each operation cost the users (cost_table), the
    one that hurt most named."""
    lines = []
    for r in three.itertuples():
        bound = " (kept up with every rate offered: a lower bound)" if r.open_lower_bound else ""
        knee = f", the first rate it fell behind {r.knee_rate:,.0f}/s" if pd.notna(r.knee_rate) else ""
        lines.append(f"- **{stack_title(r.server)}**: open-loop capacity {r.open_rps:,.0f} req/s{bound}{knee}; "
                     f"closed-loop capacity {r.slo_rps:,.0f} req/s ({r.slo_users} users); naive peak "
                     f"{r.peak_rps:,.0f} req/s at p99 {findings.ms(r.peak_p99_ms)}.")
    if three.empty:
        lines.append("- No stack has both open- and closed-loop points.")
    if cost.empty:
        lines.append("- No operation ran under load.")
        return "\n".join(lines)
    for r in cost.itertuples():
        cost_x = f" (×{r.p99_cost_x:.1f})" if pd.notna(r.p99_cost_x) else ""
        # no whole second before it (an operation started within the window's first second) or
        # none while it ran: said so, not a number
        before = (f"p99 {r.p99_before_ms:.1f} ms in the seconds before" if pd.notna(r.p99_before_ms)
                  else "no whole second before it to compare")
        during = (f"{r.worst_p99_during_ms:.1f} ms" if pd.notna(r.worst_p99_during_ms) else "not measured")
        lines.append(f"- {stack_title(r.server)} · **{r.operation}**: {r.op_seconds:.2f} s at {r.rate:,.0f} req/s offered; "
                     f"{before}, worst second while it ran "
                     f"{during}{cost_x}; {r.errors_during} errors and {r.late_during} "
                     f"late requests then; backlog at the close {r.backlog}; audit "
                     f"{'ok' if r.audit_ok else 'FAILED'}.")
    ranked = cost.dropna(subset=["p99_cost_x"]).sort_values("p99_cost_x", ascending=False)
    if len(ranked):
        w = ranked.iloc[0]
        lines.append(f"- **Hurt most**: {w.operation} on {stack_title(w.server)}, its worst second's p99 "
                     f"{findings.ms(w.worst_p99_during_ms)} against {findings.ms(w.p99_before_ms)} before "
                     f"(×{w.p99_cost_x:.1f}).")
    if not cost["audit_ok"].all():
        lines.append("- **AUDIT FAILED** for some operation: acknowledged writes are missing.")
    return "\n".join(lines)
