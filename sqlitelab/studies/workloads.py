"""SQLite or Postgres (notebook 07, issue 15): the seed workloads, declared once, each run on
both databases by the same servers with the same load.

Each workload is one of the collection's article workloads with the profile its notebook runs
(01: seed 000's Rails writes; 02: seed 001's ten-statement request with the fixed Rails 8 set-up;
03: seed 002's 90/10 mix through one writer; 05: seed 004's read, 100 KB page and update). On
Postgres the profile's SQLite-only knobs (pragmas, transaction mode, busy handler) fall away and
its `synchronous` picks Postgres' commit durability (sqlitelab.infra.postgres.durability_for).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    seed: str                 # the article (seeds/000 ...)
    notebook: str             # the notebook that reproduces it on SQLite
    scenarios: tuple[str, ...]  # one sweep runs them in turn on one database per server
    profile: str              # servers/profiles.toml
    what: str                 # one line for tables and captions
    scenario_params: dict = field(default_factory=dict)
    seed_items: int = 0       # rows the database holds before the load
    payload_bytes: int = 2048
    seeds_users: bool = False  # seeded with the scale's `users_rows` wide users rows


WORKLOADS: dict[str, Workload] = {
    "000-writes": Workload("000", "01-linear-writes", ("rails-writes",), "rails71",
                           "seed 000: POST /requests, one INSERT per request (Rails 7.1)"),
    "001-metrics": Workload("001", "02-busy-errors", ("metrics-writes",), "rails8",
                            "seed 001: POST /metrics, ten statements in one transaction (Rails 8)"),
    "002-mix": Workload("002", "03-read-write-mix", ("mix",), "single-writer",
                        "seed 002: 90 % GET /items, 10 % POST /items of 2 KB, one writer",
                        scenario_params={"write_share": 0.1}, seed_items=1000),
    "004-users": Workload("004", "05-single-machine", ("user-read", "user-page", "user-update"),
                          "go-seed004", "seed 004: GET /users/{uid}, its 100 KB page, POST /users/{uid}",
                          seeds_users=True),
}


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
