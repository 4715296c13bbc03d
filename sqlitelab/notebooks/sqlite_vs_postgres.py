"""Notebook 07, SQLite or Postgres? (no article: the readers' "why not Postgres?", issue 15): the
seed workloads, declared once, each run on both databases by the same servers with the same load.
Everything that is this notebook's, declared once.

Each workload is one of the collection's article workloads with the profile its notebook runs
(01: seed 000's Rails writes; 02: seed 001's ten-statement request with the fixed Rails 8 set-up;
03: seed 002's 90/10 mix through one writer; 05: seed 004's read, 100 KB page and update). On
Postgres the profile's SQLite-only knobs (pragmas, transaction mode, busy handler) fall away and
its `synchronous` picks Postgres' commit durability (sqlitelab.infra.postgres.durability_for).

Seed scale: one 5-s run per level, two levels (8 and 64 users: every workload, stack and
database is 112 levels), on 100,000 users rows (seed 004's 5 M would take minutes to copy into
each Postgres).

Its code: its sweeps — each workload on both databases, by the same servers with the same load —
then the best level per workload, stack and database, the ratios of the two, and the findings.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import store_label, store_title
from sqlitelab.experiments.sweep import Spec, spec
from sqlitelab.infra import servers as stacks
from sqlitelab.report import analysis, capacity, findings
from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, postgres_durability, postgres_memory, stores)


# What each constant means: sqlitelab.studies.declarations.
ID = "07-sqlite-vs-postgres"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "SQLite vs Postgres"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "SQLite or Postgres: the same servers and load on both"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "ratio"

SCALES: dict[str, dict] = {
    # Quick: the seed's first level only (8 users, so a quick ratio meets a seed one on the same
    # level), 1-s windows, and no Postgres behind a link: 48 server starts (seed 004's three
    # endpoints each start their own) and 16 Postgres clusters leave no room for a second level
    # or the link within the notebook's budget. The ratio is then the one level's, not the best of two;
    # the throughput curves and the link are left to the seed scale. Seed 004's workload runs one
    # of its three endpoints at quick (`users_scenarios`), the read its article headlined: each
    # endpoint is a server start per stack and database, and with all six stacks and the three,
    # 07 quick took 186 s of its 125 (2026-12-02 at 9ee6dc4, 69 points); 05 runs all three. No
    # warm-up at quick (each server is primed before its window; 0.3 s until 2026-12-02, 14 s of
    # the 137 s of a quick run with one endpoint of seed 004's).
    "quick": {"levels": [8], "duration": 1.0, "warmup": 0.0, "repeats": 1,
              "users_rows": 10_000, "user_bytes": 700, "users_scenarios": ["user-read"],
              "db_delays_us": [], "ceiling_seconds": 1.0},
    "seed": {"levels": [8, 64], "duration": 5.0, "warmup": 0.5, "repeats": 1,
             "users_rows": 100_000, "user_bytes": 700,
             "users_scenarios": ["user-read", "user-page", "user-update"], "db_delays_us": [100, 500],
             "ceiling_seconds": 2.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
# Quick: 122.3 s with every bundled stack (make run of 2026-12-02 at d3a296c, fresh clone).
BUDGET_SECONDS: dict[str, float] = {"quick": 130, "seed": 740}  # seed: 709 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = True


@dataclass(frozen=True)
class Workload:
    seed: str                 # the article (seeds/000 ...)
    scenarios: tuple[str, ...]  # one sweep runs them in turn on one database per server
    profile: str              # servers/profiles.toml
    what: str                 # one line for tables and captions
    scenario_params: dict = field(default_factory=dict)
    seed_items: int = 0       # rows the database holds before the load
    payload_bytes: int = 2048
    seeds_users: bool = False  # seeded with the scale's `users_rows` wide users rows


WORKLOADS: dict[str, Workload] = {
    "000-writes": Workload("000", ("rails-writes",), "rails71",
                           "seed 000: POST /requests, one INSERT per request (Rails 7.1)"),
    "001-metrics": Workload("001", ("metrics-writes",), "rails8",
                            "seed 001: POST /metrics, ten statements in one transaction (Rails 8)"),
    "002-mix": Workload("002", ("mix",), "single-writer",
                        "seed 002: 90 % GET /items, 10 % POST /items of 2 KB, one writer",
                        scenario_params={"write_share": 0.1}, seed_items=1000),
    "004-users": Workload("004", ("user-read", "user-page", "user-update"),
                          "go-seed004", "seed 004: GET /users/{uid}, its 100 KB page, POST /users/{uid}",
                          seeds_users=True),
}


def scenarios_run(name: str, users_scenarios: list[str] | None = None) -> tuple[str, ...]:
    """The scenarios of workload `name` that run: all of them, or for the workload seeded with
    users rows the ones of `users_scenarios` (None: all), in the workload's order."""
    w = WORKLOADS[name]
    return tuple(s for s in w.scenarios if s in users_scenarios) if w.seeds_users and users_scenarios else w.scenarios


def workloads_table(workloads: list[str], users_scenarios: list[str] | None = None) -> pd.DataFrame:
    """The workloads a run measures, one row each: seed, what, profile and the scenarios that run."""
    return pd.DataFrame([{"workload": k, "seed": w.seed, "what": w.what, "profile": w.profile,
                          "scenarios": ", ".join(scenarios_run(k, users_scenarios))}
                         for k, w in WORKLOADS.items() if k in workloads])


def workload_of(experiment: str) -> str:
    """The WORKLOADS key of a point's experiment (`002-mix/sqlite`, `004-users/postgres/user-read`,
    `001-metrics/postgres-link-100us`)."""
    head = str(experiment).split("/", 1)[0]
    if head not in WORKLOADS:
        raise ValueError(f"experiment {experiment!r} names no workload of {', '.join(WORKLOADS)}")
    return head


def experiment(workload: str, database: str, db_link_delay_us: int | None = None) -> str:
    """A workload's run on one database (each its own run folder: the levels of two databases
    never share one), `<workload>/<database>[-link-<n>us]`."""
    return f"{workload}/{database}" + (f"-link-{db_link_delay_us}us" if db_link_delay_us is not None else "")


def check(workloads: list[str]) -> list[str]:
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        raise ValueError(f"workloads must name some of {', '.join(WORKLOADS)}, not {workloads!r}")
    return list(workloads)


def experiments() -> set[str]:
    """Every experiment a workload's run on a database is stored as (not the linked ones)."""
    return {experiment(name, db) + ("" if len(w.scenarios) == 1 else f"/{s}")
            for name, w in WORKLOADS.items() for s in w.scenarios for db in ("sqlite", "postgres")}


# Each workload on each database, not Postgres behind a link.
HEADLINE_EXPERIMENTS: set[str] | None = experiments()

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {r"(\d{3})-[a-z]+": "seed {}'s workload",
                           r"(sqlite|postgres)(?:-link-(\d+)us)?": lambda db, link: store_title(store_label(db, link))}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["rust-axum", "ruby-puma"],
               "workloads": ["001-metrics", "004-users"],
               "db_link_workloads": ["001-metrics"],
               "levels": [4],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1,
               "users_rows": 200,
               "db_delays_us": [500],
               "figure_workload": "001-metrics"}
STORES: str | None = "points"

READING: dict[str, str] = {
    "ratio":
        "Bars right of 1: SQLite served more requests per second than Postgres, each at its best level measured, "
        "with the same server code on the same cores (left of 1, Postgres did; hatched, the generator "
        "set the pace of one of the two, so that ratio is a bound).",
    "throughput":
        "Solid lines SQLite, dashed Postgres, one colour per stack: where the two lines of a colour part, "
        "the database (not the stack) sets the pace; where they run together, the application does.",
    "db-link":
        "Each of seed 001's ten statements per request waits a round trip when Postgres has a host of "
        "its own: the bars fall with the link's delay, which SQLite, inside the server, never pays.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 001, 002, 004", "the articles' workloads, on Postgres too", (
    Detail("database", "SQLite only: every article argues against “just use Postgres” without "
           "measuring it", stores, expect=["sqlite"],
           why="this notebook's question: the same servers and load on a real Postgres 15 beside "
               "SQLite (sqlitelab.infra.postgres), and Postgres on a host of its own (a delayed link)"),
    Detail("application code", "each article's own server", "col:server", expect=None,
           why="the lab's four servers, one code path per stack with a database seam: the same "
               "endpoints, statements, transactions and acknowledgements on both databases"),
    Detail("durability", "SQLite's synchronous as each profile sets it (NORMAL for Rails; FULL "
           "for seed 002's drivers, inferred: its article does not state it; OFF for seed 004)",
           postgres_durability, expect=None,
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
    Detail("load tool", "hey (000), oha (001), the author's own Rust tool on reqwest + tokio "
           "(002), not stated (004)",
           "col:generator", expect=None,
           why="one generator for every row (loadgen by default, calibrated against wrk), so its "
               "own cost is the same on both databases"),
    Detail("windows", "000: 10 s; 001: 5 s; 002: 50,000 requests; 004: not stated",
           "param:duration", expect=None,
           why="one window length for every workload, so that each pair is measured alike"),
    Detail("seed 004's endpoints", "GET /users/{uid}, its 100 KB page and POST /users/{uid}",
           "param:users_scenarios", expect=list(WORKLOADS["004-users"].scenarios), compare="superset",
           why="all three at seed; quick runs the read alone (`users_scenarios`: each endpoint is a "
               "server start per stack and database), and 05 runs all three on SQLite"),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

def specs(*, notebook: str, workloads: list[str], servers: list[str] | None, levels: list[int],
          duration: float, warmup: float, repeats: int, users_rows: int, user_bytes: int,
          users_scenarios: list[str] | None = None,
          databases=("sqlite", "postgres"), db_link_workloads: list[str] = (),
          db_delays_us: list[int] = (), postgres_readers: int | None = None, **common) -> list[Spec]:
    """Every workload on every database (each a sweep: the database made, seeded and audited
    per server and profile), then the workloads of `db_link_workloads` on Postgres behind a link
    of each delay: the sweeps, each checked, for `sweep.run`. `users_scenarios`: the endpoints
    of the workload seeded with users rows that run (None: all its scenarios). `servers`: as servers.chosen
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
    for name, w in WORKLOADS.items():
        if w.seeds_users and users_scenarios is not None and (
                not users_scenarios or any(s not in w.scenarios for s in users_scenarios)):
            raise ValueError(f"users_scenarios must be a non-empty list of the endpoints of {name} "
                             f"({', '.join(w.scenarios)}), not {users_scenarios!r}")
    sweeps = []

    def one(name: str, database: str, delay: int | None = None):
        w = WORKLOADS[name]
        run = scenarios_run(name, users_scenarios)
        scenario = run[0] if len(run) == 1 else list(run)
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
        parts = [f"{stacks.stack_title(r.server)} {r.sqlite_rps:,.0f} vs {r.postgres_rps:,.0f} req/s "
                 + (f"(×{r.rps_ratio:.2f}; p99 {findings.ms(r.sqlite_p99_ms)} vs {findings.ms(r.postgres_p99_ms)}"
                    if not stalled[i] else f"(no ratio: on {r.stalled}, {findings.STALLED}")
                 + (f"; {r.limits}" if r.limits else "") + ")" for i, r in zip(g.index, g.itertuples())]
        lines.append(f"- **{workload} · {scenario}** — SQLite vs Postgres {at}: "
                     + "; ".join(parts) + ".")
    wins = ratios[(ratios["rps_ratio"] < 1) | ((ratios["sqlite_rps"] <= 0) & (ratios["postgres_rps"] > 0))]
    if len(wins):
        lines.append("- **Where Postgres served more**: " + "; ".join(
            f"{stacks.stack_title(r.server)} on {r.scenario} ("
            + (f"{1 / r.rps_ratio:.2f}× SQLite's rate" if findings.finished(r.sqlite_rps) else "SQLite finished no request")
            + ")" for r in wins.itertuples()) + ".")
    else:
        lines.append("- **Postgres served more nowhere**: SQLite's " + ("rate" if one else "best rate")
                     + " was higher for every workload and stack measured.")
    slo = ratios[ratios["postgres_slo_rps"] > ratios["sqlite_slo_rps"]]
    if len(slo):
        lines.append("- **Where Postgres had more capacity at the latency objective** (p99 within it and no errors): " + "; ".join(
            f"{stacks.stack_title(r.server)} on {r.scenario} ({r.postgres_slo_rps:,.0f} vs {r.sqlite_slo_rps:,.0f} req/s"
            + (": SQLite's levels all had errors, a p99 over the objective or none measured" if r.sqlite_slo_rps == 0 else "") + ")"
            for r in slo.itertuples()) + ".")
    faster = ratios[ratios["p99_ratio"] > 1]
    if len(faster):
        lines.append("- **Where Postgres answered with the lower p99** " + ("at that level" if one else "at the best levels") + ": " + "; ".join(
            f"{stacks.stack_title(r.server)} on {r.scenario} ({findings.ms(r.postgres_p99_ms)} vs {findings.ms(r.sqlite_p99_ms)})"
            for r in faster.itertuples()) + ".")
    measured = ratios["rps_ratio"].dropna()
    unmeasured = (f" (no ratio for {int(stalled.sum())} pair(s): on one side no request finished in any window)"
                  if stalled.any() else "")
    lines.append(f"- Median SQLite/Postgres throughput ratio over every workload and stack: "
                 f"{intervals.shown(intervals.median_interval(measured), '×', of='pairs')}, range "
                 f"{measured.min():.2f}–{measured.max():.2f}× (each pair one window per level: its ratio has no "
                 f"interval of its own){unmeasured}."
                 if len(measured) else f"- No SQLite/Postgres throughput ratio{unmeasured}.")
    linked = table[table["store"].str.contains("link", na=False)]
    for r in linked.itertuples():
        base = table[(table["workload"] == r.workload) & (table["scenario"] == r.scenario)
                     & (table["server"] == r.server) & (table["store"] == "postgres")]
        if len(base):
            b = base.iloc[0]
            lines.append(f"- {stacks.stack_title(r.server)}, {r.scenario} with Postgres on its own host ({r.store}): "
                         f"{r.best_rps:,.0f} req/s, {r.best_rps / b.best_rps:.0%} of Postgres over its "
                         f"socket; p99 {findings.ms(r.best_p99_ms)} (was {findings.ms(b.best_p99_ms)}).")
    bad = int((~ratios["audit_ok"]).sum())
    lines.append("- Audits: every acknowledged write was in its database, on both databases."
                 if bad == 0 else f"- **AUDIT FAILED** in {bad} workload/stack pair(s).")
    return "\n".join(lines)
