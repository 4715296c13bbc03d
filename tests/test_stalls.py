"""A level in which nothing completed is a measured fact, not an error of the lab.

A stall longer than the window (Rails 7.1's busy timeout, which holds Ruby's GVL) leaves a level
with no request finished in it: rps 0, no latency, no status. Every table, ratio and findings
sentence takes such a point and says it in words — never a division by zero, never "nan" or "inf".
Each findings function is run here on the tables its notebook builds, from points where one level
of a series stalled and where a series' only level did.
"""
from __future__ import annotations

import inspect
import json
import math
import re

import pandas as pd
import pytest

from sqlitelab.notebooks import studies
from sqlitelab import notebooks
from sqlitelab.notebooks import (busy_errors, capacity as capacity_notebook, compare_runs, linear_writes,
                                 network_delay, operations_under_load, power_cut, read_write_mix,
                                 single_machine, sqlite_vs_postgres, your_app)
from sqlitelab.core import config
from sqlitelab.report import analysis, capacity, compare, findings
from sqlitelab import notebooks

# A findings function that takes no request-level points: why it is not run here.
NOT_REQUEST_LEVELS = {
    "buffer": "seed 003's buffer points count records written by one process, not requests",
    "lab_power": "notebook 11's power checks count compare's verdicts, not a level's requests",
    "ms": "a latency in words (or 'not measured'), for the findings functions that are run here",
    "shown_above": "notebook 12's table heading: the settings every row of its cuts shares, no level's requests",
}


def point(server: str, users: int, rps: float, **extra) -> dict:
    """One stored point as the driver writes it; rps 0: no request finished in the window."""
    window = extra.pop("window_s", 1.0)
    requests = int(rps * window)
    done = requests > 0
    lat = (lambda ms: ms * users if done else None)
    row = {"notebook": "07-sqlite-vs-postgres", "experiment": "000-writes/sqlite", "run_id": "r",
           "server": server, "profile": "rails71", "scenario": "rails-writes", "database": "sqlite",
           "db_link_delay_us": None, "users": users, "rate": None, "repeat": 1, "window_s": window,
           "requests": requests, "rps": float(rps), "mean_ms": lat(1.0), "p50_ms": lat(0.8),
           "p90_ms": lat(1.5), "p95_ms": lat(2.0), "p99_ms": lat(3.0), "p999_ms": lat(4.0),
           "max_ms": lat(5.0), "errors": 0, "busy_errors": 0, "server_errors": 0,
           "status_counts": json.dumps({"201": requests} if done else {}),
           "run_counts": json.dumps({"POST 201": requests} if done else {}),
           "overran_window": 0 if done else users, "max_overrun_ms": 20.0 if done else 4200.0,
           "time_drain_s": 0.02 if done else 4.2, "bytes_per_s": 1000.0 * rps,
           "server_rss_mb": 40.0, "server_cpu_pct": 90.0, "gen_cpu_pct": 30.0,
           "generator": "loadgen", "generator_bound": False, "generator_influenced": False,
           "influence": None, "audit_ok": True, "machine": "test box", "server_pinning": "0",
           "generator_pinning": "1", "txn_mode": "deferred", "write_path": "pool",
           "knobs": json.dumps({"pragmas": {"journal_mode": "wal", "synchronous": "1"}}),
           "acked_writes": requests, "rows_written": requests, "db_cached_before": 1.0, "db_cached_after": 1.0,
           "db_mib": 1.0}
    row.update(extra)
    return row


def curves(stalled_users: set[int], levels=(1, 2, 4, 8), repeats: int = 1, no_percentiles: bool = False,
           one_database: bool = False) -> pd.DataFrame:
    """Two stacks over `levels`, each level `repeats` times (3 % apart); ruby-puma stalled (no
    request finished) at `stalled_users`; `no_percentiles`: latencies not measured (NaN) where
    requests finished too. (`one_database`: versus_points' — 07 with SQLite only.)"""
    rows = []
    for server, base in (("ruby-puma", 900.0), ("go-nethttp", 4000.0)):
        for u in levels:
            for rep in range(1, repeats + 1):
                rate = 0.0 if server == "ruby-puma" and u in stalled_users else base * min(u, 2) * (1 + 0.03 * (rep - 1))
                row = point(server, u, rate, repeat=rep)
                if no_percentiles:
                    row.update({k: None for k in ("mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms")})
                rows.append(row)
    return pd.DataFrame(rows)


# Where the stall is: one level of several (the curve goes on after it), and a series' only level
# (07's quick scale: one level per workload, and that level stalled).
SHAPES = {"one level of several": dict(stalled_users={4}),
          "the only level": dict(stalled_users={8}, levels=(8,))}


def versus_points(**shape) -> pd.DataFrame:
    on_sqlite = curves(**shape)
    if shape.get("one_database"):
        return on_sqlite
    on_pg = curves(set(), shape.get("levels", (1, 2, 4, 8)), shape.get("repeats", 1)).assign(
        database="postgres", experiment="000-writes/postgres")
    return pd.concat([on_sqlite, on_pg], ignore_index=True)


def comparison(**shape) -> compare.Comparison:
    runs = pd.DataFrame([{"run_id": "r", "machine": "test box", "git_commit": "abc1234", "scale": "quick",
                          "started": "2026-11-27T00:00:00", "parameters": "{}"}])
    def repeated(df):  # two repeats 4 % apart: each point has its own noise band
        return pd.concat([df, df.assign(repeat=2, rps=df["rps"] * 1.04)], ignore_index=True)
    a = compare.Side("a", repeated(curves(set(), shape.get("levels", (1, 2, 4, 8)))), runs)
    b = compare.Side("b", repeated(curves(**shape)), runs)
    return compare.compare(a, b)


def cases(shape: dict) -> dict:
    """Each findings function with the inputs its notebook gives it."""
    df = curves(**shape)
    seed = linear_writes.seed_table(df)
    summary = busy_errors.busy_summary(df)
    sm = df.assign(scenario="user-update", profile="go-seed004")
    paths = pd.concat([df[df["users"] == df["users"].max()].assign(write_path=w) for w in ("pool", "writer", "batch")],
                      ignore_index=True)
    raw = {"commits_per_s": 50_000.0, "reads_per_s": 200_000.0}
    links = pd.concat([df.assign(link_delay_us=None), df.assign(link_delay_us=500.0)], ignore_index=True)
    vs = sqlite_vs_postgres.versus_table(versus_points(**shape))
    app = df[df["server"] == "ruby-puma"].assign(server="your app", lock_share=0.0)
    # 01's worker sweep: one stack at two Puma shapes, the stalling curve the one-worker shape's
    shapes = pd.concat([df[df["server"] == "ruby-puma"].assign(server_processes=1),
                        df[df["server"] == "go-nethttp"].assign(server="ruby-puma", server_processes=2)],
                       ignore_index=True).assign(server_threads=3)
    # 03's peaks sweep: the article's two stacks at the highest level, in three rounds
    top = df[df["users"] == df["users"].max()]
    again = pd.concat([top.assign(server=top["server"].map({"ruby-puma": "python-fastapi", "go-nethttp": "rust-axum"}),
                                  round=r) for r in (1, 2, 3)], ignore_index=True)
    # 02's article runs: each of the article's set-ups at its levels, the stalled level's counts;
    # oha's cross-check at the top level learnt no outcome either
    ref, _ = analysis.reference("seed001_busy_errors")
    one = summary[(summary["server"] == summary["server"].iloc[0]) & (summary["users"] == summary["users"].max())]
    art = pd.concat([one.assign(profile=p, users=u) for p in ref["profile"].unique() for u in (1, 3)], ignore_index=True)
    oha = pd.DataFrame({"profile": ref["profile"].unique(), "users": 3, "generator": "oha", "skipped": None,
                        "ok_responses": 0, "errors": 0})
    # 12's throughput on the real disk: the stacks' curves as two modes' sweeps, beside cuts
    # (NORMAL's from the stalling curve)
    speed = power_cut.speeds(pd.concat([df[df["server"] == s].assign(server="go-nethttp", experiment=f"speed-{m}-pool")
                                        for s, m in (("ruby-puma", "wal-normal"), ("go-nethttp", "wal-full"))],
                                       ignore_index=True))
    loss = power_cut.loss_table(pd.DataFrame([
        {"server": "go-nethttp", "write_path": "pool", "mode": m, "users": 8, "writeback": 0.0, "rate": None,
         "checkpoint": None, "replica": False, "lost": lost, "acked": 100, "integrity": "ok", "restarted": True,
         "lost_seconds": 0.1 if lost else 0.0, "acked_per_s": 500.0} for m, lost in (("wal-normal", 10), ("wal-full", 0))]))
    # 02's clients: the top level from oha and from the lab's generator, kept alive and not
    top_level = int(df["users"].max())
    checks = pd.DataFrame([{"experiment": e, "server": "ruby-puma", "profile": "rails71", "users": top_level,
                            "generator": g, "responses": int(r.requests), "failed": int(r.errors)}
                           for e in ("profiles", "new-connection") for g in ("oha", "locust")
                           for r in df[(df["server"] == "ruby-puma") & (df["users"] == top_level)].head(1).itertuples()])
    return {
        "clients": lambda: busy_errors.clients(checks, "ruby-puma", [top_level]),
        "article_words": lambda: busy_errors.article_words(busy_errors.article_runs(art, ref, oha)),
        "peaks_text": lambda: read_write_mix.peaks_text(read_write_mix.peaks_again(again, 3, 0.05), 6.0),
        "linear_writes": lambda: linear_writes.linear_writes(seed),
        "napkin_first": lambda: linear_writes.napkin_first(linear_writes.napkin_table(seed, "ruby-puma", points=df), df),
        "workers_finding": lambda: linear_writes.workers_finding(linear_writes.workers_peaks(shapes), "0"),
        "busy": lambda: busy_errors.busy(summary),
        "txn_mode": lambda: busy_errors.txn_mode(pd.concat([summary, summary.assign(txn_mode="immediate")])),
        "stack_ratios": lambda: read_write_mix.stack_ratios(read_write_mix.mix_table(df), base="ruby-puma"),
        "write_path": lambda: read_write_mix.write_path(paths),
        "ceiling": lambda: findings.ceiling(linear_writes.peak(seed), analysis.machine_limits(raw, "writes")),
        "endpoint_ceilings": lambda: findings.endpoint_ceilings(
            analysis.single_machine_table(sm), raw, (100_000.0, "go-nethttp"), analysis.synchronous_of(sm)),
        "single_machine": lambda: single_machine.single_machine(analysis.single_machine_table(sm), raw, 1388.9),
        "beyond": lambda: single_machine.beyond(
            single_machine.beyond_table(pd.concat([sm, sm.assign(profile="go-seed004-pool")]), "go-seed004",
                                  "go-seed004-pool"), "go-seed004", "go-seed004-pool"),
        "health": lambda: findings.health(df),
        "generators": lambda: findings.generators(df),
        "capacity_findings": lambda: capacity_notebook.capacity_findings(capacity_notebook.estimate(df), studies()),
        "network": lambda: network_delay.network(network_delay.network_table(links)),
        "versus": lambda: sqlite_vs_postgres.versus(sqlite_vs_postgres.versus_ratios(vs), vs),
        "operations": lambda: operations_under_load.operations(capacity.three_ways(df), pd.DataFrame()),
        "your_app": lambda: your_app.your_app(
            your_app.app_levels(app), capacity.capacity_at_slo(app, 100.0, by=("server",)), pd.DataFrame(),
            100.0, 35, 4, lambda a, b: "agree", None, points=app),
        "comparison": lambda: compare_runs.comparison(comparison(**shape), studies()),
        "power_cut_findings": lambda: power_cut.power_cut_findings(loss, power_cut.tradeoff(loss, speed)),
    }


def findings_functions() -> set[str]:
    """Every function that writes findings sentences: the shared ones (sqlitelab.report.findings's
    public functions returning str) and each notebook's own (a function of its module,
    sqlitelab.notebooks, returning str that the notebook shows as Markdown)."""
    def sentences(module, names) -> set[str]:
        return {n for n in names if inspect.signature(getattr(module, n)).return_annotation in ("str", str)}
    found = sentences(findings, [n for n, f in inspect.getmembers(findings, inspect.isfunction)
                                 if f.__module__ == findings.__name__ and not n.startswith("_")])
    for notebook, module in notebooks.studies().items():
        cells = json.loads((config.NOTEBOOKS_DIR / f"{notebook}.ipynb").read_text())["cells"]
        shown = {n for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines()
                 if "Markdown(" in line for n in re.findall(r"\bthis\.(\w+)\(", line)}
        found |= sentences(module, shown)
    return found


def test_every_findings_function_is_run_on_a_stalled_level():
    public = findings_functions()
    covered = set(cases(SHAPES["the only level"])) | set(NOT_REQUEST_LEVELS)
    assert public == covered, f"findings functions without a stalled-level case: {sorted(public - covered)}"


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
@pytest.mark.parametrize("name", sorted(cases(SHAPES["the only level"])))
def test_a_stalled_level_is_said_in_words(name, shape):
    text = cases(SHAPES[shape])[name]()
    for bad in ("nan", "inf", "None"):
        assert bad not in text.replace("infl", "").replace("info", ""), f"{name}: {bad!r} in {text!r}"
    if name in SAYS_IT[shape]:
        assert "no request finished in" in text, f"{name} does not say the stall: {text!r}"


# Where each shape's stall is in what the function reports (a function that reports a stack's best
# level or its peak does not show a stall at another level).
SAYS_IT = {"one level of several": {"network", "comparison"},
           "the only level": {"peaks_text", "linear_writes", "napkin_first", "workers_finding", "stack_ratios", "ceiling", "beyond", "network",
                              "versus", "your_app", "capacity_findings", "comparison", "power_cut_findings"}}


def test_a_side_that_finished_nothing_has_no_ratio_and_its_own_verdict():
    c = comparison(**SHAPES["one level of several"])
    row = c.table.set_index(["server", "users"]).loc[("ruby-puma", "4")]
    assert row["rps_verdict"] == compare.NONE_FINISHED["b"] and math.isnan(row["rps_ratio"])
    assert row["p99_ms_verdict"] == "not measured"
    ran = c.table[c.table["users"] != "4"]
    assert set(ran["rps_verdict"]) <= {"within noise", "faster", "slower"}
    vs = sqlite_vs_postgres.versus_ratios(sqlite_vs_postgres.versus_table(versus_points(**SHAPES["the only level"])))
    stalled = vs.set_index("server").loc["ruby-puma"]
    assert stalled["stalled"] == "sqlite" and math.isnan(stalled["rps_ratio"])
    assert vs.set_index("server").loc["go-nethttp", "rps_ratio"] == pytest.approx(1.0)


def test_a_point_that_outlasted_its_window_has_no_ratio_and_says_so_and_the_rest_are_judged_without_it():
    runs = pd.DataFrame([{"run_id": "r", "machine": "test box", "git_commit": "abc1234", "scale": "quick",
                          "started": "2026-11-27T00:00:00", "parameters": "{}"}])
    a = curves(set()).assign(outlasted=False)
    b = a.assign(rps=a["rps"] * 1.01)
    b.loc[(b["server"] == "ruby-puma") & (b["users"] == 4), ["rps", "outlasted"]] = (9_000.0, True)
    both = [pd.concat([d, d.assign(repeat=2, rps=d["rps"] * 1.02)], ignore_index=True) for d in (a, b)]
    c = compare.compare(compare.Side("a", both[0], runs), compare.Side("b", both[1], runs))
    row = c.table.set_index(["server", "users"]).loc[("ruby-puma", "4")]
    assert row["rps_verdict"] == compare.OUTLASTED["b"] and math.isnan(row["rps_ratio"]) and math.isnan(row["rps_low"])
    assert row["rps_a"] > 0 and row["rps_b"] == pytest.approx(9_000 * 1.01), "both rates are still shown"
    rest = c.table[~((c.table["server"] == "ruby-puma") & (c.table["users"] == "4"))]
    assert set(rest["rps_verdict"]) == {"within noise"}
    assert c.overall["rps"].ratio == pytest.approx(1.01), "the run as a whole leaves the outlasted point out"
    flipped = compare.compare(compare.Side("b", both[1], runs), compare.Side("a", both[0], runs))
    assert flipped.table.set_index(["server", "users"]).loc[("ruby-puma", "4"), "rps_verdict"] == compare.OUTLASTED["a"]
    plain = compare.compare(compare.Side("a", both[0].drop(columns="outlasted"), runs),
                            compare.Side("b", both[1].drop(columns="outlasted"), runs))
    assert plain.table.set_index(["server", "users"]).loc[("ruby-puma", "4"), "rps_verdict"] == "faster", \
        "runs stored before the flag are judged on their rates"


@pytest.mark.parametrize("stalled", [{4}, {1, 2, 4, 8}], ids=["one level", "every level"])
def test_the_curves_are_drawn_with_a_stalled_level(stalled):
    """A stalled level has no latency: a gap in its latency line; a stack that stalled at every
    level (10's smoke run met one) leaves a latency chart with no scale, and its axis says why."""
    from sqlitelab.report import plots
    df = curves(stalled)
    for fig in (plots.throughput_chart(df, title="Writes per second", caption="c"),
                plots.latency_chart(df[df["server"] == "ruby-puma"], title="Latency", caption="c")):
        assert plots.problems(plots.lay_out(fig)) == []
    label = fig.axes[0].get_ylabel()
    assert ("no request finished" in label) == (stalled == {1, 2, 4, 8})
