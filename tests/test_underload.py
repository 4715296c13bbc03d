"""Issue 16's analysis, from made-up points (no server, no load): open-loop capacity from
offered load beside the closed-loop capacity and the naive peak, the window second by second,
what an operation cost, the findings and the figures that say it."""
from __future__ import annotations

import types

import pandas as pd
import pytest
from hdrh.histogram import HdrHistogram

from sqlitelab.report import capacity, plots
from sqlitelab.load import driver as load
from sqlitelab.experiments import sweep
from sqlitelab.core import vocabulary
from sqlitelab.notebooks import capacity as capacity_notebook, operations_under_load


def _open(server, rate, p99, served=None, backlog=0, errors=0, rep=1):
    return {"notebook": "08-operations-under-load", "experiment": "open", "server": server,
            "profile": "single-writer", "scenario": "mix", "users": 64, "rate": rate, "repeat": rep,
            "open_loop": True, "offered_rps": rate, "rps": served or rate, "p99_ms": p99, "requests": 100,
            "errors": errors, "backlog": backlog, "late": 0, "offered": 100}


def _closed(server, users, rps, p99, errors=0):
    return {"notebook": "08-operations-under-load", "experiment": "closed", "server": server,
            "profile": "single-writer", "scenario": "mix", "users": users, "rate": None, "repeat": 1,
            "open_loop": False, "rps": rps, "p99_ms": p99, "requests": 100, "errors": errors,
            "generator_bound": False, "generator_influenced": False}


POINTS = pd.DataFrame([
    _open("go-nethttp", 1000, 2.0), _open("go-nethttp", 2000, 3.0), _open("go-nethttp", 4000, 40.0),
    _open("go-nethttp", 8000, 900.0, served=5000, backlog=3000),
    _open("go-nethttp", 16000, 20.0),  # past the knee, whatever it shows: never counted
    _open("rust-axum", 1000, 1.0), _open("rust-axum", 2000, 1.5),
    _open("rust-axum", 2000, 150.0, rep=2),  # one repeat over the SLO: the rate is not kept up with
    _closed("go-nethttp", 8, 6000, 4.0), _closed("go-nethttp", 64, 7000, 180.0),
    _closed("rust-axum", 8, 6500, 3.0), _closed("rust-axum", 64, 7200, 120.0, errors=2),
])


def test_open_loop_capacity_is_the_rate_below_the_first_it_fell_behind():
    cap = capacity.open_loop_capacity(POINTS, 100.0, by=("server",)).set_index("server")
    assert cap.loc["go-nethttp", "open_rps"] == 4000 and cap.loc["go-nethttp", "knee_rate"] == 8000
    assert not cap.loc["go-nethttp", "open_lower_bound"] and cap.loc["go-nethttp", "open_p99_ms"] == 40.0
    # every repeat of a rate must keep up
    assert cap.loc["rust-axum", "open_rps"] == 1000 and cap.loc["rust-axum", "knee_rate"] == 2000
    up = capacity.open_loop_capacity(POINTS[POINTS["rate"].fillna(0) < 8000], 100.0, by=("server",))
    assert up.set_index("server").loc["go-nethttp", "open_lower_bound"]  # never fell behind
    with pytest.raises(ValueError):
        capacity.open_loop_capacity(POINTS, 0)


def test_three_ways_sets_open_loop_beside_closed_loop_and_the_naive_peak():
    t = capacity.three_ways(POINTS, 100.0).set_index("server")
    go = t.loc["go-nethttp"]
    assert (go["open_rps"], go["slo_rps"], go["peak_rps"]) == (4000, 6000, 7000)
    assert go["slo_users"] == 8 and go["open_over_closed"] == pytest.approx(4000 / 6000)
    axum = t.loc["rust-axum"]
    assert (axum["open_rps"], axum["slo_rps"], axum["peak_rps"]) == (1000, 6500, 7200)
    # the closed-loop estimate never reads open-loop points as levels of users
    est = capacity_notebook.estimate(POINTS, 100.0)
    assert set(est["experiment"]) == {"closed"} and est["peak_rps"].max() == 7200
    assert capacity.three_ways(POINTS[~POINTS["open_loop"]], 100.0).empty
    # a level with an operation running is not a capacity rate (08 stores both)
    busy = pd.DataFrame([{**_open("go-nethttp", 2000, 400.0), "experiment": "op/backup",
                          "operation": "backup"}])
    with_ops = pd.concat([POINTS.assign(operation=None), busy], ignore_index=True)
    assert capacity.three_ways(with_ops, 100.0).set_index("server").loc["go-nethttp", "open_rps"] == 4000


def test_keeps_up_is_what_the_capacity_reads():
    assert vocabulary.keeps_up(_open("x", 1, 99.0), 100) and not vocabulary.keeps_up(_open("x", 1, 101.0), 100)
    assert not vocabulary.keeps_up(_open("x", 1, 5.0, backlog=1), 100)


def _hist(values):
    h = HdrHistogram(1, 100_000_000, 3)
    for v in values:
        h.record_value(v)
    return h.encode().decode()


def test_series_merges_processes_second_by_second_with_the_servers_samples():
    procs = [
        {"seconds": [{"s": 0, "n": 2, "failures": {}, "late": 0, "hist": _hist([1000, 3000])},
                     {"s": 2, "n": 1, "failures": {"busy": 1}, "late": 1, "hist": _hist([9000])}]},
        {"seconds": [{"s": 0, "n": 1, "failures": {}, "late": 0, "hist_values": [[2000, 1]]}]},
    ]
    t0 = 1000.0
    # (t, server CPU s, RSS, generator CPU s, WAL bytes) every half second
    samples = [(t0 - 0.1 + 0.5 * i, 0.25 * i, (100 + i) * 2**20, 0.0, 4096 * i) for i in range(8)]
    rows = load.series(procs, types.SimpleNamespace(samples=samples), t0, t0 + 2.5)
    assert [r["second"] for r in rows] == [0, 1, 2]
    assert [r["completed"] for r in rows] == [3, 0, 1] and [r["errors"] for r in rows] == [0, 0, 1]
    assert rows[2]["late"] == 1 and rows[2]["failures"] == '{"busy": 1}'
    assert rows[0]["p50_ms"] == pytest.approx(2.0, rel=0.01) and rows[0]["max_ms"] == pytest.approx(3.0, rel=0.01)
    assert rows[1]["p99_ms"] is None
    assert rows[2]["span_s"] == pytest.approx(0.5)  # the window's last, partial second
    for r in rows:  # 0.25 CPU s per half second: half a CPU
        assert r["server_cpu_pct"] == pytest.approx(50.0)
        assert r["server_rss_mb"] >= 100 and r["wal_bytes"] > 0


SECONDS = pd.DataFrame([
    {"run_id": "r/op/backup", "server": "go-nethttp", "operation": "backup", "second": s, "span_s": 1.0,
     "p99_ms": p, "errors": e, "late": 0, "wal_bytes": w, "operation_started_s": 3.0, "operation_seconds": 1.5}
    for s, p, e, w in [(0, 2.0, 0, 4096), (1, 2.2, 0, 8192), (2, 1.8, 0, 8192), (3, 30.0, 1, 2**20),
                       (4, 12.0, 0, 2**21), (5, 2.0, 0, 0), (6, 2.1, 0, 0)]])
OP_POINTS = pd.DataFrame([{"run_id": "r/op/backup", "server": "go-nethttp", "operation": "backup",
                           "operation_started_s": 3.0, "operation_seconds": 1.5, "rate": 2000.0,
                           "p99_ms": 12.0, "backlog": 0, "errors": 1, "audit_ok": True}])


def test_cost_table_compares_the_seconds_before_with_the_worst_while_it_ran():
    cost = operations_under_load.cost_table(OP_POINTS, SECONDS).iloc[0]
    assert cost["p99_before_ms"] == pytest.approx(2.0) and cost["worst_p99_during_ms"] == 30.0
    assert cost["p99_cost_x"] == pytest.approx(15.0) and cost["errors_during"] == 1
    assert cost["wal_peak_mib"] == pytest.approx(2.0) and cost["audit_ok"]
    text = operations_under_load.operations(capacity.three_ways(POINTS, 100.0), operations_under_load.cost_table(OP_POINTS, SECONDS))
    assert "Hurt most**: backup on Go · net/http" in text and "×15.0" in text
    assert "open-loop capacity 4,000 req/s" in text and "closed-loop capacity 6,000" in text
    # an operation started within the window's first second: no second before it to compare
    early = operations_under_load.cost_table(OP_POINTS.assign(operation_started_s=0.5), SECONDS)
    assert early["p99_before_ms"].isna().all()
    text = operations_under_load.operations(capacity.three_ways(POINTS, 100.0), early)
    assert "no whole second before it to compare" in text and "Hurt most" not in text


def test_steady_rates_take_a_fraction_of_each_stacks_open_loop_capacity():
    steady = operations_under_load.steady_rates(POINTS, 0.5, 100.0).set_index("server")
    assert steady.loc["go-nethttp", "steady_rate"] == 2000 and steady.loc["rust-axum", "steady_rate"] == 500
    for bad in (0, 1.5, -1):
        with pytest.raises(ValueError, match="fraction"):
            operations_under_load.steady_rates(POINTS, bad, 100.0)


def test_the_timeline_and_the_hockey_stick_draw_with_their_legends_inside():
    sec = pd.concat([SECONDS, SECONDS.assign(server="rust-axum", p99_ms=SECONDS["p99_ms"] / 2)])
    for value in plots.TIMELINE_VALUES:
        fig = plots.timeline_chart(sec.assign(wal_mib=sec["wal_bytes"] / 2**20), title="t", caption="c", value=value)
        assert not plots.clipped_legends(fig)
        assert len(fig.axes) == 1 + 1  # a panel for the one operation, and the legend's row
    with pytest.raises(ValueError, match="value must be one of"):
        plots.timeline_chart(sec, title="t", value="p95_ms")
    fig = plots.hockey_stick_chart(POINTS, 100.0, title="h", caption="c")
    assert not plots.clipped_legends(fig)
    lines = [l for l in fig.axes[0].get_lines() if not l.get_label().startswith("_ref")]
    assert lines


def test_operation_specs_pass_keep_copies_to_the_operations_that_make_copies():
    """The operation sweeps are built and checked before any starts: each a real sweep.Spec."""
    steady = pd.DataFrame([{"server": "go-nethttp", "steady_rate": 2000.0}])
    args = dict(notebook="t", steady=steady, operations=["backup", "checkpoint", "litestream"],
                open_users=8, duration=10.0, warmup=0.5, at_s=3.0, users_rows=100)
    specs = operations_under_load.operation_specs(**args)
    assert all(isinstance(s, sweep.Spec) for s in specs)
    assert [s.operation for s in specs] == [{"name": "backup", "at_s": 3.0, "keep_copies": False},
                                            {"name": "checkpoint", "at_s": 3.0},  # it makes no copy
                                            {"name": "litestream", "at_s": 3.0, "keep_copies": False}]
    specs = operations_under_load.operation_specs(**args, keep_copies=True, op_params={"litestream": {"keep_copies": False}})
    assert [s.operation.get("keep_copies") for s in specs] == [True, None, False]
    with pytest.raises(ValueError, match="rows_per_txn|no parameter|unknown"):  # checked before anything runs
        operations_under_load.operation_specs(**{**args, "op_params": {"backup": {"rows_per_txn": 5}}})
    two = pd.DataFrame([{"server": "go-nethttp", "steady_rate": 2000.0},
                        {"server": "rust-axum", "steady_rate": 4000.0}])
    specs = operations_under_load.operation_specs(**{**args, "steady": two, "operations": ["backup"]})
    # each stack's sweep its own runs row (one shared id: the second replaced the first's)
    assert [s.experiment for s in specs] == ["op/backup/go-nethttp", "op/backup/rust-axum"]
