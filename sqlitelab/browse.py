"""`make browse`: data/results.db in Datasette, on 127.0.0.1 only, with every table and column
described and canned queries for the questions people ask of it.

    python -m sqlitelab.browse [--port 8001] [--db data/results.db] [--print-metadata]

What each table and column means is declared once, in sqlitelab.core.schema (TABLES, SHARED),
beside the columns' types; everything else Datasette shows besides the data is declared here,
as Python data: TITLE, VIEW (a table's sort and facets), FILLS (the constants some descriptions
name) and QUERIES (the canned queries). `metadata(db)` assembles them for one database — a
query is offered only when the tables it reads exist, and columns added later (`lock_hash`) are
read only where the file has them — and `main` writes it to a temporary JSON file for
`datasette serve --metadata`. Where the lab already defines a number in Python (capacity,
the newest run, the generator flags) the query computes it by that definition and its
description names the function; tests/test_browse.py checks that they agree.

The database is opened read-only (Datasette's `mode=ro`), not `--immutable`: a sweep may be
writing to it, and results.db is in WAL mode, whose newest commits an immutable reader would
not see.
"""
from __future__ import annotations

import argparse
import inspect
import json
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlitelab import notebooks
from sqlitelab.core import config, processes, results
from sqlitelab.core import schema as stored  # (browse has a `schema(db)`: the file's own)
from sqlitelab.core.vocabulary import NOISE_STACK
from sqlitelab.infra import servers
from sqlitelab.load import commands, scenarios, verdicts
from sqlitelab.notebooks import capacity  # notebook 06's estimate, mirrored in SQL
from sqlitelab.report import compare as report_compare

HOST = "127.0.0.1"          # loopback only: results.db names the machine and its runs
DEFAULT_PORT = 8001
SETTINGS = {                # `datasette serve --setting NAME VALUE`
    "sql_time_limit_ms": 5000,     # the capacity query on a large results.db on a slow machine
    "truncate_cells_html": 200,    # points.histogram is tens of KB of base64
}
# the objective when the capacity query is given none: capacity.estimate's own default
SLO_P99_MS = inspect.signature(capacity.estimate).parameters["slo_p99_ms"].default
TITLE = "SQLite Production Lab — results"
DESCRIPTION = (
    "Every run and measurement of this machine's lab: sweeps of the bundled servers under "
    "Locust, loadgen and wrk (points, crosschecks), the buffer notebook (buffer_points, "
    "buffer_slow_sync) and the generators' calibration against wrk. Start with the canned "
    "queries below; `python -m sqlitelab.browse` serves this view."
)
SOURCE = "Measured on this machine by sqlitelab (make run, make seed); raw files in data/runs/<run_id>/"


# ----------------------------------------------------------------------------- tables

# What each table and column means is declared in sqlitelab.core.schema (TABLES, SHARED); here
# only how Datasette shows a table: its default sort and its facets (where the file has them).
VIEW: dict[str, dict] = {
    "runs": {"sort_desc": "started", "facets": ["notebook"]},
    "points": {"facets": ["server", "profile", "scenario", "generator"]},
    "seconds": {"facets": ["server", "operation"]},
    "calibrations": {"sort_desc": "started"},
    "buffer_points": {"facets": ["method", "variant"]},
}

# The constants declared above core that some of the schema's descriptions name (schema.Filled).
FILLS = {
    "STACKS": ", ".join(servers.STACKS),
    "SCENARIOS": ", ".join(scenarios.SCENARIOS),
    "GENERATORS": ", ".join(commands.GENERATORS),
    "SERVER_SATURATED_CPU": verdicts.SERVER_SATURATED_CPU,
    "GENERATOR_BOUND_CPU": verdicts.GENERATOR_BOUND_CPU,
    "GENERATOR_BUSY_CPU": verdicts.GENERATOR_BUSY_CPU,
}


def described(text: str) -> str:
    """A description as Datasette shows it: a schema.Filled one with FILLS filled in."""
    return text.format(**FILLS) if isinstance(text, stored.Filled) else text


# ----------------------------------------------------------------------------- canned queries

def _limit_note(bound: str, influenced: str) -> str:
    """SQL for analysis.limit_note: how a point's or level's number must be read."""
    return (f"CASE WHEN coalesce({bound}, 0) != 0 THEN 'generator-bound' "
            f"WHEN coalesce({influenced}, 0) != 0 THEN 'generator-influenced' ELSE '' END")


def _fit(sql: str, schema: dict, **aliases: str) -> str:
    """`alias.column` (alias: a table) made NULL where the file's table lacks the column, so a
    query reads older files (without columns added since) too."""
    def sub(m: re.Match) -> str:
        table = aliases.get(m.group(1))
        return "NULL" if table and m.group(2) not in schema.get(table, ()) else m.group(0)
    return re.sub(r"\b([a-z]\w*)\.([a-z_]\w*)\b", sub, sql)


def _newest_runs(schema: dict) -> str:
    return """-- capacity.latest_runs()'s rule, over every run in `runs`
WITH sweeps AS (
  SELECT * FROM runs
  WHERE coalesce(:scale, '') = '' OR scale = :scale
  ORDER BY started
),
grouped AS (
  SELECT notebook, notebook_run AS run_id, min(started) AS started, max(finished) AS finished,
         max(scale) AS scale, group_concat(DISTINCT git_commit) AS git_commit,
         sum(points) AS points, count(*) AS sweeps,
         group_concat(experiment, ', ') AS experiments,
         row_number() OVER (PARTITION BY notebook ORDER BY min(started) DESC, notebook_run) AS newest
  FROM sweeps
  GROUP BY notebook, notebook_run
)
SELECT notebook, run_id, started, finished, scale, git_commit, points, sweeps, experiments
FROM grouped WHERE newest = 1
ORDER BY notebook"""


def _capacity(schema: dict) -> str:
    collection = ", ".join(f"'{n}'" for n in capacity.collection(notebooks.studies()))
    return _fit(f"""-- capacity.estimate(capacity.latest_runs(results.load_points(), scale), slo_p99_ms)
WITH params AS (
  SELECT CAST(coalesce(nullif(trim(:slo_p99_ms), ''), {SLO_P99_MS!r}) AS REAL) AS slo,
         coalesce(:scale, '') AS scale
),
pts AS (  -- results.load_points(): headline points, each with its run's start
  SELECT p.run_id, p.server, p.profile, p.scenario, p.users, p.rps, p.p99_ms, p.errors,
         p.generator_bound AS bound, p.generator_influenced AS influenced,
         p.notebook, coalesce(p.experiment, '') AS experiment, r.started, p.notebook_run,
         coalesce(p.database, 'sqlite') AS database
  FROM points p JOIN runs r USING (run_id)
  WHERE coalesce(p.headline, 1) = 1
    AND p.notebook IN ({collection})
    AND ((SELECT scale FROM params) = '' OR p.scale = (SELECT scale FROM params))
),
newest AS (  -- capacity.latest_runs(): per notebook, the run whose first sweep started last
  SELECT notebook_run FROM (
    SELECT notebook_run, row_number() OVER (
             PARTITION BY notebook ORDER BY min(started) DESC, notebook_run) AS k
    FROM pts GROUP BY notebook, notebook_run)
  WHERE k = 1
),
levels AS (  -- capacity_at_slo(): repeats of a level averaged (p99: the worst, errors: summed)
  SELECT notebook, experiment, server, profile, scenario, database, users, notebook_run,
         avg(rps) AS rps, max(p99_ms) AS p99_ms, total(errors) AS errors,
         max(coalesce(bound, 0) != 0) AS bound, max(coalesce(influenced, 0) != 0) AS influenced
  FROM pts
  WHERE notebook_run IN (SELECT notebook_run FROM newest)
    AND server IS NOT NULL AND profile IS NOT NULL AND scenario IS NOT NULL AND users IS NOT NULL
  GROUP BY notebook, experiment, server, profile, scenario, database, users
),
peak AS (  -- the naive peak: the highest rps at any latency, any errors
  SELECT * FROM (SELECT *, row_number() OVER (
      PARTITION BY notebook, experiment, server, profile, scenario, database ORDER BY rps DESC, users) AS k
    FROM levels) WHERE k = 1
),
within AS (  -- capacity at the objective: the highest rps of a level with p99 <= SLO, no errors
  SELECT * FROM (SELECT *, row_number() OVER (
      PARTITION BY notebook, experiment, server, profile, scenario, database ORDER BY rps DESC, users) AS k
    FROM levels WHERE p99_ms <= (SELECT slo FROM params) AND errors = 0) WHERE k = 1
)
SELECT pk.notebook, pk.experiment, pk.server, pk.profile, pk.scenario, pk.database,
       pk.rps AS peak_rps, pk.users AS peak_users, pk.p99_ms AS peak_p99_ms,
       CAST(pk.errors AS INTEGER) AS peak_errors,
       (pk.bound OR pk.influenced) AS peak_lower_bound,
       {_limit_note('pk.bound', 'pk.influenced')} AS peak_limit,
       coalesce(w.rps, 0.0) AS slo_rps, w.users AS slo_users, w.p99_ms AS slo_p99_ms,
       coalesce(w.bound OR w.influenced, 0) AS slo_lower_bound,
       CASE WHEN w.users IS NULL THEN '' ELSE {_limit_note('w.bound', 'w.influenced')} END AS slo_limit,
       (SELECT slo FROM params) AS objective_p99_ms, pk.notebook_run
FROM peak pk LEFT JOIN within w USING (notebook, experiment, server, profile, scenario, database)
ORDER BY pk.notebook, pk.experiment, pk.scenario, slo_rps DESC, pk.server, pk.profile, pk.database""",
                schema, p="points", r="runs")


def _failed_audits(schema: dict) -> str | None:
    def audited(table: str) -> bool:
        return "audit_ok" in schema.get(table, ())

    parts = []
    if audited("points"):
        parts.append("""SELECT 'points' AS source, p.run_id, r.notebook, r.started,
       printf('%s · %s · %s · %s users · repeat %s · %s', p.server, p.profile, p.scenario,
              p.users, p.repeat, coalesce(p.generator, 'locust')) AS what,
       printf('%s rows written, %s expected from %s acknowledged writes (%s); integrity %s',
              p.rows_written, p.expected_rows, p.acked_writes, p.audit_rule, p.integrity) AS detail
FROM points p LEFT JOIN runs r USING (run_id) WHERE p.audit_ok = 0""")
    if audited("crosschecks"):
        parts.append("""SELECT 'crosschecks', c.run_id, r.notebook, r.started,
       printf('%s · %s · %s · %s users · wrk', c.server, c.profile, c.scenario, c.users),
       printf('%s rows written, %s acknowledged, %s unknown outcomes (%s); integrity %s',
              c.rows_written, c.acked_responses, c.unknown_outcomes, c.audit_rule, c.integrity)
FROM crosschecks c LEFT JOIN runs r USING (run_id) WHERE c.audit_ok = 0""")
    if audited("buffer_points"):
        parts.append("""SELECT 'buffer_points', b.run_id, r.notebook, coalesce(b.started, r.started),
       printf('%s/%s · %s rows per transaction · %s records · synchronous %s · repeat %s',
              b.method, b.variant, b.rows_per_txn, b.total, b.synchronous, b.repeat),
       printf('%s rows of %s expected, %s of %s records in the payloads, journal %s',
              CAST(b.rows AS INTEGER), CAST(b.rows_expected AS INTEGER),
              CAST(b.records_in_payloads AS INTEGER), b.total, b.journal_mode)
FROM buffer_points b LEFT JOIN runs r USING (run_id) WHERE b.audit_ok = 0""")
    if audited("buffer_slow_sync"):
        parts.append("""SELECT 'buffer_slow_sync', s.run_id, r.notebook, r.started,
       printf('%s/%s · %s rows per transaction · %s records · syncs delayed %s ms',
              s.method, s.variant, s.rows_per_txn, s.total, s.sync_delay_ms),
       'rows or records in the payloads differ from what was written (buffer_point._audit)'
FROM buffer_slow_sync s LEFT JOIN runs r USING (run_id) WHERE s.audit_ok = 0""")
    if not parts:
        return None
    return _fit("\nUNION ALL\n".join(parts) + "\nORDER BY started DESC, source, what", schema,
                p="points", c="crosschecks", b="buffer_points", s="buffer_slow_sync", r="runs")


def _generator_limited(schema: dict) -> str:
    return _fit(f"""-- the flags driver.run_level and sweep stored; limit: analysis.limit_note()
SELECT p.run_id, r.notebook, r.started, p.server, p.profile, p.scenario, p.users, p.repeat,
       coalesce(p.generator, 'locust') AS generator,
       {_limit_note('p.generator_bound', 'p.generator_influenced')} AS "limit",
       p.influence AS influence, p.rps, p.p99_ms, p.gen_cpu_pct, p.gen_cpus,
       p.server_cpu_pct, p.server_util AS server_util, p.gen_onset_util AS gen_onset_util,
       coalesce(p.headline, 1) AS headline, p.replaced_by AS replaced_by
FROM points p JOIN runs r USING (run_id)
WHERE (coalesce(p.generator_bound, 0) != 0 OR coalesce(p.generator_influenced, 0) != 0)
  AND (coalesce(:run_id, '') = '' OR p.notebook_run = :run_id OR p.run_id = :run_id)
ORDER BY r.started DESC, p.run_id, p.server, p.profile, p.users, p.repeat""", schema, p="points", r="runs")


PROVENANCE_COLUMNS = ("run_id", "notebook", "notebook_run", "experiment", "scale", "started", "finished", "git_commit",
                      "lock_hash", "lock_ok", "lock_drift", "machine", "machine_info", "versions", "server_cpus",
                      "generator_cpus", "calibrations", "parameters", "sweep")


def _provenance(schema: dict) -> str:
    have = schema["runs"]
    cols = [f"r.{c}" for c in PROVENANCE_COLUMNS if c in have]
    if "calibrations" in have and "calibrations" in schema:
        cols.append("""(SELECT group_concat(printf('%s: %s (%s vs %s, target %s, drift onset %s)',
                   j.key, j.value, c.version, c.reference, c.target,
                   CASE WHEN c.onset_util IS NULL THEN 'none'
                        ELSE printf('%.0f%% of its CPU', 100 * c.onset_util) END), '; ')
         FROM json_each(CASE WHEN json_valid(r.calibrations) THEN r.calibrations END) j
         JOIN calibrations c ON c.calib_id = j.value) AS calibration_details""")
    if "points" in schema and {"server", "server_versions"} <= set(schema["points"]):
        sqlite = "' sqlite ' || p.sqlite_version" if "sqlite_version" in schema["points"] else "''"
        cols.append(f"""(SELECT group_concat(DISTINCT p.server || ' ' || p.server_versions || {sqlite})
         FROM points p WHERE p.run_id = r.run_id) AS server_versions""")
    select = ",\n       ".join(cols)
    return f"""WITH target AS (
  SELECT CASE WHEN coalesce(:run_id, '') != '' THEN :run_id
         ELSE (SELECT notebook_run FROM runs ORDER BY started DESC LIMIT 1) END AS id
)
SELECT {select}
FROM runs r, target t
WHERE r.notebook_run = t.id OR r.run_id = t.id
ORDER BY r.started"""


def _compare_runs(schema: dict) -> str:
    """report.compare.compare(side(:a), side(:b)) in SQL: the same keys, spreads, bands and verdicts
    (the machine's stored spread per family where a point has no repeats — its own stack's where
    that was measured — over the windows nearest the point's, when the file has a `noise` table)."""
    families = ", ".join(f"('{n}', '{s.family}')" for n, s in scenarios.SCENARIOS.items())
    keys = ("notebook", "experiment", "server", "profile", "scenario", "database", "users", "rate")
    on = " AND ".join(f"a.{k} = b.{k}" for k in keys)

    def band(metric: str) -> str:
        family = f"""coalesce((SELECT f.family FROM fam f WHERE f.scenario = lv.scenario),
                  (SELECT n2.family FROM noise n2 WHERE n2.machine = lv.machine AND n2.metric = '{metric}'
                   ORDER BY n2.spread DESC LIMIT 1))"""

        def same(n: str) -> str:  # noise rows of the point's machine, metric and family
            return f"{n}.machine = lv.machine AND {n}.metric = '{metric}' AND {n}.family = {family}"
        # whose measurement (compare.measured_on): the point's own stack, else NOISE_STACK, else max()
        on = f"""coalesce((SELECT lv.server WHERE EXISTS (SELECT 1 FROM noise n4 WHERE {same("n4")} AND n4.server = lv.server)),
                  (SELECT '{NOISE_STACK}' WHERE EXISTS (SELECT 1 FROM noise n5 WHERE {same("n5")} AND n5.server = '{NOISE_STACK}')),
                  (SELECT max(n6.server) FROM noise n6 WHERE {same("n6")}))"""

        def mine(n: str) -> str:  # ... and measured on that stack
            return f"{same(n)} AND {n}.server IS {on}"

        def distance(n: str) -> str:  # how far a row's window is from the point's, as a ratio (0: unknown)
            return (f"coalesce(CASE WHEN lv.window_s > 0 THEN CASE WHEN {n}.duration_s > 0 THEN "
                    f"max({n}.duration_s / lv.window_s, lv.window_s / {n}.duration_s) ELSE 1e308 END END, 0)")
        # the window nearest the point's (a file whose noise rows predate windows: the newest row)
        nearest = (f"""AND {distance("n")} = (SELECT min({distance("n3")}) FROM noise n3 WHERE {mine("n3")})"""
                   if "duration_s" in schema.get("noise", ()) else "")
        stored_spread = (f"""(SELECT n.spread FROM noise n WHERE {mine("n")}
                {nearest}
              ORDER BY n.measured DESC LIMIT 1)""" if "noise" in schema else "NULL")
        return f"coalesce(lv.{metric}_spread, {stored_spread}) AS {metric}_spread"

    def verdict(metric: str, better: int) -> str:
        r, b2 = f"b.{metric} / a.{metric}", f"(a.{metric}_spread * a.{metric}_spread + b.{metric}_spread * b.{metric}_spread)"
        up, down = ("faster", "slower") if better > 0 else ("slower", "faster")
        return f"""CASE WHEN a.{metric} = 0 THEN '{report_compare.NONE_FINISHED["a"]}'
       WHEN b.{metric} = 0 THEN '{report_compare.NONE_FINISHED["b"]}'
       WHEN a.outlasted = 1 THEN '{report_compare.OUTLASTED["a"]}'
       WHEN b.outlasted = 1 THEN '{report_compare.OUTLASTED["b"]}'
       WHEN a.{metric} IS NULL OR b.{metric} IS NULL THEN 'not measured'
       WHEN a.{metric}_spread IS NULL OR b.{metric}_spread IS NULL THEN 'no noise band'
       WHEN ({r} - 1) * ({r} - 1) <= {b2} THEN 'within noise'
       WHEN {r} > 1 THEN '{up}' ELSE '{down}' END AS {metric}_verdict"""
    return _fit(f"""-- report.compare: two notebook runs point by point (python -m sqlitelab.compare :a :b)
WITH fam(scenario, family) AS (VALUES {families}),
pts AS (
  SELECT p.notebook_run AS run, p.notebook, coalesce(p.experiment, '') AS experiment, p.server,
         coalesce(p.profile, '') AS profile, p.scenario, coalesce(p.database, '') AS database, p.users,
         coalesce(CAST(p.rate AS TEXT), '') AS rate, p.rps, p.p99_ms, p.machine, p.window_s AS window_s,
         p.outlasted AS outlasted
  FROM points p WHERE coalesce(p.headline, 1) = 1 AND p.notebook_run IN (:a, :b)
),
lv AS (
  SELECT run, notebook, experiment, server, profile, scenario, database, users, rate, max(machine) AS machine,
         avg(window_s) AS window_s, max(coalesce(outlasted, 0)) AS outlasted, avg(rps) AS rps, CASE WHEN count(*) > 1 THEN (max(rps) - min(rps)) / avg(rps) END AS rps_spread,
         avg(p99_ms) AS p99_ms,
         CASE WHEN count(*) > 1 THEN (max(p99_ms) - min(p99_ms)) / avg(p99_ms) END AS p99_ms_spread
  FROM pts GROUP BY run, notebook, experiment, server, profile, scenario, database, users, rate
),
side AS (
  SELECT lv.run, lv.notebook, lv.experiment, lv.server, lv.profile, lv.scenario, lv.database, lv.users,
         lv.rate, lv.rps, lv.p99_ms, lv.outlasted, {band("rps")}, {band("p99_ms")}
  FROM lv
)
SELECT a.notebook, a.experiment, a.server, a.profile, a.scenario, a.database, a.users, a.rate,
       a.rps AS rps_a, b.rps AS rps_b,
       CASE WHEN a.rps <> 0 AND b.rps <> 0 AND a.outlasted = 0 AND b.outlasted = 0 THEN b.rps / a.rps END AS rps_ratio,
       {verdict("rps", +1)},
       a.p99_ms AS p99_ms_a, b.p99_ms AS p99_ms_b,
       CASE WHEN a.p99_ms <> 0 AND b.p99_ms <> 0 AND a.outlasted = 0 AND b.outlasted = 0
            THEN b.p99_ms / a.p99_ms END AS p99_ms_ratio,
       {verdict("p99_ms", -1)}
FROM side a JOIN side b ON {on}
WHERE a.run = :a AND b.run = :b
ORDER BY a.experiment, a.server, a.profile, a.scenario, a.database, a.users, a.rate""", schema, p="points",
                n="noise", n2="noise", n3="noise", n4="noise", n5="noise", n6="noise")


# name -> the tables it needs, title, description, parameters, and its SQL built for a schema
# (None: nothing for it to read)
QUERIES: dict[str, dict] = {
    "newest_runs": {
        "needs": ("runs",),
        "title": "The newest run of each notebook",
        "description": "Per notebook, its newest run: the run whose first sweep started last, the "
                       "rule of capacity.latest_runs() (here over every run in `runs`, with points "
                       "or not), its sweeps' span, scale, commit(s) and points. `scale`: only runs "
                       "at that scale (quick or seed); empty: any.",
        "params": ["scale"],
        "sql": _newest_runs,
    },
    "capacity": {
        "needs": ("runs", "points"),
        "title": "Capacity per stack: the naive peak and the highest throughput within a p99 objective",
        "description": "Mirrors capacity.estimate(capacity.latest_runs(results.load_points(), "
                       "scale=…), slo_p99_ms) — notebook 06's table without its user counts: the "
                       "newest run of each of notebooks " + ", ".join(capacity.collection(notebooks.studies())) + " "
                       "(headline points only), repeats of a level averaged (p99 the worst, errors "
                       "summed), then per notebook, experiment, server, profile and scenario the "
                       "naive peak (highest rps, any latency, any errors) and capacity_at_slo()'s "
                       "capacity: the highest rps of a level with p99 ≤ slo_p99_ms and no errors "
                       "(0 when none). *_lower_bound / *_limit: the generator was the limit or "
                       "set the pace (analysis.limit_note): at least this. `slo_p99_ms`: the "
                       f"objective in ms (empty: {SLO_P99_MS:g}); `scale`: quick or seed (empty: any).",
        "params": ["slo_p99_ms", "scale"],
        "sql": _capacity,
    },
    "failed_audits": {
        "needs": (),
        "title": "Audits that failed",
        "description": "Every measurement whose audit failed (audit_ok = 0): points and wrk "
                       "crosschecks (rows written ≠ acknowledged writes, or integrity_check ≠ ok — "
                       "sweep.audit), buffer_points and buffer_slow_sync (rows or records in the "
                       "payloads ≠ what was written — buffer_point._audit). No rows: every audit passed.",
        "params": [],
        "sql": _failed_audits,
    },
    "generator_limited": {
        "needs": ("runs", "points"),
        "title": "Generator-bound and generator-influenced points",
        "description": "Points whose generator was the limit (generator_bound, set by "
                       "driver.run_level) or plausibly set the pace (generator_influenced, "
                       "verdicts.influence and sweep's cross-check), as stored — confirmed levels "
                       "included (headline 0, replaced_by names the re-measuring generator). "
                       "`limit` is analysis.limit_note(). `run_id`: one run (a notebook run "
                       "includes its experiments); empty: every run.",
        "params": ["run_id"],
        "sql": _generator_limited,
    },
    "compare_runs": {
        "needs": ("points",),
        "title": "Two runs of a notebook, point by point",
        "description": "report.compare in SQL (python -m sqlitelab.compare a b): the points both "
                       "notebook runs `a` and `b` have, aligned on notebook, experiment, stack, "
                       "profile, scenario, database, users and rate; per metric the ratio b / a and "
                       "faster, slower or within noise, the noise band each side's repeats' "
                       "(max − min) / mean, or this machine's stored spread for the scenario's family "
                       "(the `noise` table), combined as sqrt(a² + b²); 'no noise band' without either; "
                       "'none finished in a' (or b) where that side's rate was 0 (a stall: no ratio).",
        "params": ["a", "b"],
        "sql": _compare_runs,
    },
    "provenance": {
        "needs": ("runs",),
        "title": "A run's provenance",
        "description": "How a run was made: its sweeps' machine, versions, commit, dependency lock "
                       "(hash and drift, where recorded), CPU pinning, the calibrations its generator flags "
                       "used, its parameters, and the servers' own versions. `run_id`: a notebook "
                       "run (all its experiments) or one sweep; empty: the newest run.",
        "params": ["run_id"],
        "sql": _provenance,
    },
}


# ----------------------------------------------------------------------------- metadata

def schema(db: Path | str) -> dict[str, list[str]]:
    """Tables (without SQLite's own) and their columns, read-only."""
    con = sqlite3.connect(f"file:{Path(db)}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: [r[1] for r in con.execute(f"PRAGMA table_info([{t}])")] for t in names}
    finally:
        con.close()


def database_name(db: Path | str) -> str:
    """The name Datasette gives a database file (its stem): `results`."""
    return Path(db).stem


def metadata(db: Path | str) -> dict:
    """Datasette metadata for `db`: TITLE, every table of schema.TABLES with its descriptions
    (VIEW's sort and facets where the file has their columns) and the QUERIES whose tables
    exist, their SQL built for the columns the file has."""
    sch = schema(db)
    tables = {}
    for name, t in stored.TABLES.items():
        entry = {"description": t["description"],
                 "columns": {c: described(text) for c, text in t["columns"].items()}}
        view = VIEW.get(name, {})
        if view.get("sort_desc") in sch.get(name, ()):
            entry["sort_desc"] = view["sort_desc"]
        facets = [f for f in view.get("facets", ()) if f in sch.get(name, ())]
        if facets:
            entry["facets"] = facets
        tables[name] = entry
    queries = {}
    for name, q in QUERIES.items():
        sql = q["sql"](sch) if all(t in sch for t in q["needs"]) else None
        if sql is None:  # nothing for it to read in this file
            continue
        queries[name] = {"title": q["title"], "description": q["description"], "sql": sql}
        if q["params"]:
            queries[name]["params"] = list(q["params"])
    return {"title": TITLE, "description": DESCRIPTION, "source": SOURCE,
            "databases": {database_name(db): {"description": DESCRIPTION, "source": SOURCE,
                                              "tables": tables, "queries": queries}}}


def undescribed(db: Path | str) -> list[str]:
    """Tables and `table.column`s of `db` without a description in schema.TABLES: empty when
    the metadata covers the file (a new column must be described there)."""
    missing = []
    for table, cols in schema(db).items():
        t = stored.TABLES.get(table)
        if t is None or not t.get("description"):
            missing.append(table)
            continue
        missing += [f"{table}.{c}" for c in cols if not t["columns"].get(c)]
    return missing


# ----------------------------------------------------------------------------- serving

def command(db: Path | str, port: int, metadata_path: Path | str) -> list[str]:
    cmd = [sys.executable, "-m", "datasette", "serve", str(db), "--host", HOST, "--port", str(port),
           "--metadata", str(metadata_path)]
    for name, value in SETTINGS.items():
        cmd += ["--setting", name, str(value)]
    return cmd


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((HOST, port)) == 0


def stop(proc: subprocess.Popen) -> None:
    """Stop Datasette by its PID: SIGTERM, then SIGKILL after 5 s."""
    processes.stop(proc, grace=5)


def _error(message: str) -> int:
    print(f"browse: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.browse",
                                 description="Datasette on results.db (127.0.0.1 only), with "
                                             "descriptions and canned queries.")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--db", type=Path, default=config.RESULTS_DB, help="default: %(default)s")
    ap.add_argument("--print-metadata", action="store_true",
                    help="print the metadata JSON for --db and exit")
    args = ap.parse_args(argv)
    db = args.db
    if not db.is_file():
        return _error(f"{db} does not exist: run `make run` first")
    try:
        if "runs" not in schema(db):
            return _error(f"{db} holds no runs yet: run `make run` first")
        results.migrate(db)  # a file from before rows described themselves (Datasette reads it ro)
    except sqlite3.DatabaseError as e:
        return _error(f"{db} is not a readable SQLite database ({e})")
    meta = metadata(db)
    if args.print_metadata:
        print(json.dumps(meta, indent=2, ensure_ascii=False))
        return 0
    if not 0 < args.port < 65536:
        return _error(f"--port must be 1–65535, not {args.port}")
    if _listening(args.port):
        return _error(f"port {args.port} on {HOST} is in use: pass --port N (make browse BROWSE_PORT=N)")
    work = Path(tempfile.mkdtemp(prefix="lab-browse-"))
    meta_path = work / "metadata.json"
    meta_path.write_text(json.dumps(meta, indent=2, ensure_ascii=False))
    proc = None

    def _terminate(signum, frame):  # Ctrl-C, or stopped by PID: stop Datasette too
        raise KeyboardInterrupt

    # explicit, also where SIGINT arrives ignored (a background job of a non-interactive shell)
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        proc = processes.spawn(command(db, args.port, meta_path), "Datasette", stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not _listening(args.port):
            if proc.poll() is not None:
                return _error(f"datasette exited with code {proc.returncode} before serving")
            if time.monotonic() > deadline:
                return _error("datasette did not start listening within 30 s")
            time.sleep(0.1)
        url = f"http://{HOST}:{args.port}/{database_name(db)}"
        print(f"Datasette (pid {proc.pid}) serving {db} at {url}\n"
              f"  canned queries: {', '.join(meta['databases'][database_name(db)]['queries'])}\n"
              f"  Ctrl-C to stop", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None:
            stop(proc)
        meta_path.unlink(missing_ok=True)
        work.rmdir()


if __name__ == "__main__":
    sys.exit(main())
