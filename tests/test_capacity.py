"""sqlitelab.report.capacity reproduces the articles' own napkin math."""
from __future__ import annotations

import pandas as pd
import pytest

from sqlitelab.notebooks import studies
from sqlitelab.report import capacity
from sqlitelab.notebooks import capacity as capacity_notebook


def test_a_million_requests_a_day_is_about_70_per_second():
    assert capacity.rps_needed(1_000_000) == pytest.approx(69.44, abs=0.01)
    assert round(capacity.rps_needed(1_000_000)) == 69  # the article rounds 69.4 up to "70"


def test_2500_writes_per_second_is_over_35_million_a_day_and_a_million_dau():
    assert capacity.requests_per_day(2500) == 36_000_000 > 35_000_000
    assert capacity.daily_active_users(2500, requests_per_user=35) == pytest.approx(1_028_571, abs=1)
    assert capacity.daily_active_users(2500, 35) > 1_000_000


def test_1107_requests_per_second_is_about_11000_active_users():
    assert capacity.active_users(1107, seconds_between_requests=10) == 11_070
    assert capacity.active_users(6680, 10) == pytest.approx(66_800)  # seed 002's Rust: "~66,000"


def test_yahoo_monthly_visits_are_about_1388_per_second():
    assert capacity.rps_from_monthly(3.6e9) == pytest.approx(1388.9, abs=0.1)


def test_reference_loads():
    ref = capacity_notebook.reference_loads().set_index("name")["rps"]
    assert ref["Twitter 2007"] == 600 and ref["Shopify 2013"] == 833
    assert ref["Yahoo (3.6 B visits/month)"] == pytest.approx(1388.9, abs=0.1)


@pytest.mark.parametrize("bad", [0, -1, "70", None, True])
def test_bad_inputs_are_refused(bad):
    with pytest.raises(ValueError, match="positive number"):
        capacity.rps_needed(bad)


def test_capacity_at_slo_is_not_the_peak():
    pts = pd.DataFrame([
        # users, rps, p99, errors, generator_bound  (two repeats of each level)
        {"users": u, "rps": r + d, "p99_ms": p, "errors": e, "generator_bound": False,
         "server": "s", "profile": "p", "scenario": "x"}
        for (u, r, p, e) in [(1, 100, 5, 0), (4, 300, 40, 0), (16, 500, 400, 0), (32, 450, 900, 7)]
        for d in (-1, 1)])
    out = capacity.capacity_at_slo(pts, slo_p99_ms=100).iloc[0]
    assert out["peak_rps"] == 500 and out["peak_users"] == 16
    assert out["slo_rps"] == 300 and out["slo_users"] == 4
    none = capacity.capacity_at_slo(pts, slo_p99_ms=1).iloc[0]
    assert none["slo_rps"] == 0 and none["slo_users"] is None


def _pts(notebook, run, experiment, started, scale="quick", rps=100.0, server="s", profile="p",
         scenario="x", users=(1, 4)):
    return [{"notebook": notebook, "run_id": f"{run}/{experiment}" if experiment else run,
             "notebook_run": run, "experiment": experiment, "started": started, "scale": scale, "server": server,
             "profile": profile, "scenario": scenario, "users": u, "rps": rps * u, "p99_ms": 10.0 * u,
             "errors": 0, "generator_bound": False} for u in users]


def test_latest_runs_keeps_every_experiment_of_the_newest_run_only():
    pts = pd.DataFrame(
        _pts("03-read-write-mix", "old", "article", "2026-01-01T00:00") +
        _pts("03-read-write-mix", "new", "article", "2026-02-01T00:00") +
        _pts("03-read-write-mix", "new", "path-batch", "2026-02-01T00:05") +  # a later sweep, same run
        _pts("01-linear-writes", "one", None, "2026-01-15T00:00") +
        _pts("01-linear-writes", "seedrun", None, "2026-03-01T00:00", scale="seed") +
        _pts("adhoc", "mine", None, "2026-04-01T00:00", scale=None))
    quick = capacity_notebook.latest_runs(pts, studies(), scale="quick")
    assert set(quick["run_id"]) == {"new/article", "new/path-batch", "one"}
    assert set(capacity_notebook.latest_runs(pts, studies(), scale="seed")["run_id"]) == {"seedrun"}
    assert set(capacity_notebook.latest_runs(pts, studies())["run_id"]) == {"new/article", "new/path-batch", "seedrun"}
    assert capacity_notebook.latest_runs(pts, studies(), notebooks=["adhoc"])["run_id"].unique().tolist() == ["mine"]
    assert capacity_notebook.latest_runs(pts, studies(), scale="nope").empty


def test_estimate_keeps_experiments_apart_and_headline_picks_the_article():
    pts = pd.DataFrame(
        _pts("03-read-write-mix", "r", "article", "t", rps=100, users=(8, 32)) +
        _pts("03-read-write-mix", "r", "share-100", "t", rps=10, users=(8, 32)) +
        _pts("02-busy-errors", "q", "profiles", "t", rps=50, profile="a", scenario="m", users=(1, 3)) +
        _pts("02-busy-errors", "q", "profiles", "t", rps=60, profile="b", scenario="m", users=(1, 3)) +
        _pts("01-linear-writes", "o", None, "t", rps=70, scenario="w", users=(1, 16)))
    est = capacity_notebook.estimate(pts, slo_p99_ms=100, requests_per_user=35, seconds_between_requests=10)
    art = est[(est.experiment == "article")].iloc[0]
    assert art.peak_rps == 3200 and art.slo_rps == 800  # 32 users has p99 320 ms > 100
    assert art.slo_dau == pytest.approx(capacity.daily_active_users(800, 35))
    assert art.slo_active_users == 8000
    assert est[est.experiment == "share-100"].iloc[0].peak_rps == 320  # not averaged with the article
    h = capacity_notebook.headline(est, studies())
    assert set(zip(h.notebook, h.experiment, h.profile)) == {
        ("03-read-write-mix", "article", "p"), ("02-busy-errors", "profiles", "b"), ("01-linear-writes", "", "p")}
    long = capacity_notebook.chart_frame(est, 100, studies())
    assert len(long) == 2 * len(h) and set(long["kind"]) == {"naive peak", "p99 ≤ 100 ms"}
    dau = capacity_notebook.dau_table(est, capacity_notebook.reference_loads(), studies(), per_user=[1, 35])
    assert len(dau) == len(h) + len(capacity_notebook.reference_loads())
    text = capacity_notebook.capacity_findings(est, studies())
    assert text.count("\n") == len(h) - 1 and "800 req/s within the latency objective" in text


def test_estimate_of_nothing_says_so():
    empty = capacity_notebook.estimate(pd.DataFrame(), 100)
    assert empty.empty and capacity_notebook.headline(empty, studies()).empty
    assert "No points" in capacity_notebook.capacity_findings(empty, studies())
    assert capacity_notebook.chart_frame(empty, 100, studies())["what"].tolist() == ["(no points)"]


def test_capacity_carries_its_levels_interval_over_runs_and_none_for_one_run():
    """The capacity at the objective is a level's mean over its runs: three runs give Student's t
    interval of that mean (slo_interval), one run none; daily users carry it, scaled."""
    def pts(runs):
        return pd.DataFrame([{"users": u, "rps": r, "p99_ms": 10.0 * u, "errors": 0, "generator_bound": False,
                              "server": "s", "profile": "p", "scenario": "x"}
                             for u in (1, 4) for r in runs])
    three = capacity.capacity_at_slo(pts([380.0, 400.0, 420.0]), 100).iloc[0]
    iv = capacity.slo_interval(three.to_dict())
    assert three["slo_runs"] == 3 and iv.n == 3 and iv.estimate == 400
    assert iv.low == pytest.approx(400 - 4.302653 * 20 / 3 ** 0.5, rel=1e-5) and iv.contains(400)
    one = capacity.capacity_at_slo(pts([400.0]), 100).iloc[0]
    iv1 = capacity.slo_interval(one.to_dict())
    assert one["slo_runs"] == 1 and not iv1.bounded and iv1.method == "one run: no interval"
    est = capacity_notebook.estimate(pts([380.0, 400.0, 420.0]).assign(notebook="n", experiment=""), 100)
    assert est["slo_dau_low"].iloc[0] == pytest.approx(capacity.daily_active_users(iv.low))
    assert est["slo_dau_high"].iloc[0] == pytest.approx(capacity.daily_active_users(iv.high))


def test_findings_give_daily_users_with_their_interval_only_where_runs_repeat():
    """06's findings: each headline row's daily users at the precision its interval supports,
    with the interval where its level ran three times, and 'one run: no interval' once where it
    ran once; a row that met the objective nowhere has no daily users."""
    repeated = pd.DataFrame(_pts("01-linear-writes", "o", None, "t", rps=100, scenario="rails-writes", users=(1,)) * 1)
    repeated = pd.concat([repeated.assign(rps=r) for r in (380.0, 400.0, 420.0)], ignore_index=True)
    text = capacity_notebook.capacity_findings(capacity_notebook.estimate(repeated, 100), studies())
    dau = capacity.daily_active_users(400)
    assert f"{round(dau, -3):,.0f} (95 % interval" in text and "3 runs) DAU" in text and "no interval" not in text
    once = repeated.iloc[:1]
    text1 = capacity_notebook.capacity_findings(capacity_notebook.estimate(once, 100), studies())
    assert "(one run: no interval)." in text1 and text1.count("no interval") == 1 and "95 %" not in text1
    slow = once.assign(p99_ms=500.0)
    assert "no daily users to count on" in capacity_notebook.capacity_findings(
        capacity_notebook.estimate(slow, 100), studies())
