"""Notebook 07, SQLite against Postgres (issue 15): its sweeps — each workload of its study
(sqlitelab.studies.sqlite_vs_postgres) on both databases, by the same servers with the same load —
then the best level per workload, stack and database, the ratios of the two, and the findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core.vocabulary import store_label
from sqlitelab.experiments.sweep import Spec, spec
from sqlitelab.infra import servers as stacks
from sqlitelab.report import analysis, capacity, findings
from sqlitelab.studies.sqlite_vs_postgres import WORKLOADS, check, experiment, workload_of


def specs(*, notebook: str, workloads: list[str], servers: list[str] | None, levels: list[int],
          duration: float, warmup: float, repeats: int, users_rows: int, user_bytes: int,
          databases=("sqlite", "postgres"), db_link_workloads: list[str] = (),
          db_delays_us: list[int] = (), postgres_readers: int | None = None, **common) -> list[Spec]:
    """Every workload on every database (each a sweep: the database made, seeded and audited
    per server and profile), then the workloads of `db_link_workloads` on Postgres behind a link
    of each delay: the sweeps, each checked, for `sweep.run`. `servers`: as servers.chosen
    reads it (None: every bundled stack). `postgres_readers`: the connections
    each server process keeps to Postgres (LAB_READERS; None: the stack's default, which follows
    its CPUs as on SQLite). `common`: the rest of sweep's arguments (generator, CPUs, run_id, ...)."""
    check(workloads)
    servers = stacks.chosen(servers)
    if postgres_readers is not None and (not isinstance(postgres_readers, int) or postgres_readers < 1):
        raise ValueError(f"postgres_readers must be an integer >= 1 or None, not {postgres_readers!r}")
    for w in db_link_workloads:
        if w not in workloads:
            raise ValueError(f"db_link_workloads: {w!r} is not among the workloads run")
    sweeps = []

    def one(name: str, database: str, delay: int | None = None):
        w = WORKLOADS[name]
        scenario = w.scenarios[0] if len(w.scenarios) == 1 else list(w.scenarios)
        sweeps.append(spec(notebook=notebook, experiment=experiment(name, database, delay), servers=servers,
                           profiles=[w.profile], scenario=scenario, levels=levels,
                           duration=duration, warmup=warmup, repeats=repeats,
                           scenario_params=w.scenario_params or None, seed_items=w.seed_items,
                           payload_bytes=w.payload_bytes,
                           seed_users=users_rows if w.seeds_users else 0,
                           seed_user_bytes=user_bytes if w.seeds_users else 0,
                           database=database, db_link_delay_us=delay,
                           knobs=({"readers": postgres_readers}
                                  if database == "postgres" and postgres_readers else None),
                           **common))

    for name in workloads:
        for database in databases:
            one(name, database)
    for name in db_link_workloads:
        for delay in db_delays_us:
            one(name, "postgres", delay)
    return sweeps


def versus_table(df: pd.DataFrame, slo_p99_ms: float = 100.0) -> pd.DataFrame:
    """Notebook 07: per workload, endpoint (scenario), stack and store (sqlite, postgres, postgres
    behind a link): how many levels it ran (`levels`), the best level's throughput and that level's p99 (repeats averaged, p99 the
    worst repeat), how it must be read (generator-bound...), and the capacity at the SLO (the
    best level with p99 ≤ SLO and no errors, capacity.capacity_at_slo)."""
    if df.empty:
        return pd.DataFrame()
    links = df["db_link_delay_us"] if "db_link_delay_us" in df else pd.Series(None, index=df.index)
    d = df.assign(workload=df["experiment"].map(workload_of),
                  store=[store_label(db, l) for db, l in zip(df["database"], links)])
    keys = ["workload", "scenario", "server", "store"]
    lv = analysis.over_repeats(d, keys + ["users"], ["rps", "p99_ms", "errors", "server_cpu_pct"], p99_ms="max")
    best = lv.loc[lv.groupby(keys)["rps"].idxmax()].copy()
    best = best.merge(lv.groupby(keys)["users"].nunique().rename("levels").reset_index(), on=keys)
    best["limit"] = [analysis.limit_note(r) for r in best.to_dict("records")]
    best["generator_bound"] = best["limit"] == "generator-bound"
    best["generator_influenced"] = best["limit"] == "generator-influenced"
    cap = capacity.capacity_at_slo(d, slo_p99_ms, by=tuple(keys))[keys + ["slo_rps", "slo_users"]]
    out = best.merge(cap, on=keys, how="left")
    out = out.rename(columns={"users": "best_users", "rps": "best_rps", "p99_ms": "best_p99_ms"})
    return out[keys + ["levels", "best_users", "best_rps", "best_p99_ms", "errors", "server_cpu_pct", "limit",
                       "generator_bound", "generator_influenced", "slo_rps", "slo_users",
                       "audit_ok"]].sort_values(keys).reset_index(drop=True)


def versus_ratios(table: pd.DataFrame, against: str = "postgres") -> pd.DataFrame:
    """SQLite against `against` (a store of versus_table) per workload, endpoint and stack:
    throughput and p99 at each one's best level, their ratios (SQLite / Postgres: above 1, SQLite
    serves more; a p99 ratio below 1, SQLite answers faster), and both capacities at the SLO.
    Where no request finished on a side at any of its levels (`stalled` names it), no ratio."""
    if table.empty:
        return pd.DataFrame()
    keys = ["workload", "scenario", "server"]
    a = table[table["store"] == "sqlite"].set_index(keys)
    b = table[table["store"] == against].set_index(keys)
    both = a.index.intersection(b.index)
    a, b = a.loc[both], b.loc[both]
    # a side where no request finished at any level (a stall longer than the window) has no rate
    # to divide: no ratio, and `stalled` names the side
    ran_a, ran_b = a["best_rps"] > 0, b["best_rps"] > 0
    out = pd.DataFrame({
        "sqlite_rps": a["best_rps"], "postgres_rps": b["best_rps"],
        "rps_ratio": (a["best_rps"] / b["best_rps"]).where(ran_a & ran_b),
        "stalled": [", ".join(n for n, ran in (("sqlite", x), (against, y)) if not ran)
                    for x, y in zip(ran_a, ran_b)],
        "sqlite_p99_ms": a["best_p99_ms"], "postgres_p99_ms": b["best_p99_ms"],
        "p99_ratio": a["best_p99_ms"] / b["best_p99_ms"],
        "sqlite_slo_rps": a["slo_rps"], "postgres_slo_rps": b["slo_rps"],
        "limits": [", ".join(x for x in (f"sqlite {la}" if la else "", f"postgres {lb}" if lb else "") if x)
                   for la, lb in zip(a["limit"], b["limit"])],
        # either side's generator set the pace: the ratio is a bound, not a measurement
        "generator_bound": a["generator_bound"] | b["generator_bound"],
        "generator_influenced": a["generator_influenced"] | b["generator_influenced"],
        "audit_ok": a["audit_ok"].astype(bool) & b["audit_ok"].astype(bool),
    }, index=both)
    return out.reset_index().sort_values(keys).reset_index(drop=True)


def versus(ratios: pd.DataFrame, table: pd.DataFrame) -> str:
    """Notebook 07: SQLite against Postgres per workload and stack (versus_ratios), where
    Postgres won, and what a link to a database on its own host cost (versus_table)."""
    if ratios.empty:
        return "- No workload ran on both databases."
    lines = []
    one = table.empty or table["levels"].max() == 1  # "best" of one level says more than it ran
    at = (f"at the one level measured ({', '.join(map(str, sorted(set(table['best_users']))))} users)"
          if one and not table.empty else "at each one's best level")
    stalled = ratios["stalled"].astype(bool) if "stalled" in ratios else pd.Series(False, index=ratios.index)
    for (workload, scenario), g in ratios.groupby(["workload", "scenario"], sort=True):
        parts = [f"{r.server} {r.sqlite_rps:,.0f} vs {r.postgres_rps:,.0f} req/s "
                 + (f"(×{r.rps_ratio:.2f}; p99 {r.sqlite_p99_ms:.1f} vs {r.postgres_p99_ms:.1f} ms"
                    if not stalled[i] else f"(no ratio: on {r.stalled}, {findings.STALLED}")
                 + (f"; {r.limits}" if r.limits else "") + ")" for i, r in zip(g.index, g.itertuples())]
        lines.append(f"- **{workload} · {scenario}** — SQLite vs Postgres {at}: "
                     + "; ".join(parts) + ".")
    wins = ratios[(ratios["rps_ratio"] < 1) | ((ratios["sqlite_rps"] <= 0) & (ratios["postgres_rps"] > 0))]
    if len(wins):
        lines.append("- **Where Postgres served more**: " + "; ".join(
            f"{r.server} on {r.scenario} ("
            + (f"{1 / r.rps_ratio:.2f}× SQLite's rate" if findings.finished(r.sqlite_rps) else "SQLite finished no request")
            + ")" for r in wins.itertuples()) + ".")
    else:
        lines.append("- **Postgres served more nowhere**: SQLite's " + ("rate" if one else "best rate")
                     + " was higher for every workload and stack measured.")
    slo = ratios[ratios["postgres_slo_rps"] > ratios["sqlite_slo_rps"]]
    if len(slo):
        lines.append("- **Where Postgres had more capacity at the SLO** (p99 within it and no errors): " + "; ".join(
            f"{r.server} on {r.scenario} ({r.postgres_slo_rps:,.0f} vs {r.sqlite_slo_rps:,.0f} req/s"
            + (": SQLite's levels all had errors or a p99 over the SLO" if r.sqlite_slo_rps == 0 else "") + ")"
            for r in slo.itertuples()) + ".")
    faster = ratios[ratios["p99_ratio"] > 1]
    if len(faster):
        lines.append("- **Where Postgres answered with the lower p99** " + ("at that level" if one else "at the best levels") + ": " + "; ".join(
            f"{r.server} on {r.scenario} ({r.postgres_p99_ms:.1f} vs {r.sqlite_p99_ms:.1f} ms)"
            for r in faster.itertuples()) + ".")
    measured = ratios["rps_ratio"].dropna()
    unmeasured = (f" (no ratio for {int(stalled.sum())} pair(s): on one side no request finished in any window)"
                  if stalled.any() else "")
    lines.append(f"- Median SQLite/Postgres throughput ratio over every workload and stack: "
                 f"{measured.median():.2f} (range {measured.min():.2f}–{measured.max():.2f}){unmeasured}."
                 if len(measured) else f"- No SQLite/Postgres throughput ratio{unmeasured}.")
    linked = table[table["store"].str.contains("link", na=False)]
    for r in linked.itertuples():
        base = table[(table["workload"] == r.workload) & (table["scenario"] == r.scenario)
                     & (table["server"] == r.server) & (table["store"] == "postgres")]
        if len(base):
            b = base.iloc[0]
            lines.append(f"- {r.server}, {r.scenario} with Postgres on its own host ({r.store}): "
                         f"{r.best_rps:,.0f} req/s, {r.best_rps / b.best_rps:.0%} of Postgres over its "
                         f"socket; p99 {r.best_p99_ms:.1f} ms (was {b.best_p99_ms:.1f}).")
    bad = int((~ratios["audit_ok"]).sum())
    lines.append("- Audits: every acknowledged write was in its database, on both databases."
                 if bad == 0 else f"- **AUDIT FAILED** in {bad} workload/stack pair(s).")
    return "\n".join(lines)
