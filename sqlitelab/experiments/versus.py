"""SQLite or Postgres (notebook 07, issue 15): each workload of its study
(sqlitelab.studies.sqlite_vs_postgres) on both databases, by the same servers with the same load."""
from __future__ import annotations

from sqlitelab.experiments.sweep import Spec, spec
from sqlitelab.infra import servers as stacks
from sqlitelab.studies.sqlite_vs_postgres import WORKLOADS, check, experiment


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
