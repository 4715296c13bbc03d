"""The load generator is never the story: wrk as the reference client, the calibration of
Locust and loadgen against it, the `generator_influenced` flag, and sweeps that re-measure
with loadgen where Locust set the pace and cross-check one level with wrk.

Real servers, real wrk, real generators; the checks are of correctness and self-consistency,
never of speed.
"""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from sqlitelab.report import analysis, findings, plots
from sqlitelab.load import calibrate, driver as load, verdicts, wrk
from sqlitelab.core import config, layout, machine, results
from sqlitelab.infra import databases, servers
from sqlitelab.experiments.sweep import sweep
from sqlitelab.notebooks import linear_writes, read_write_mix

needs_wrk = pytest.mark.skipif(not wrk.available(), reason="wrk is not installed (make setup)")


# --------------------------------------------------------------------------- wrk's scripts

def test_every_scenario_is_sent_by_wrk_or_refused_with_a_reason():
    for name in load.SCENARIOS:
        why = wrk.expressible(name, {})
        if why:
            assert name == "rails-writes" and "redirect" in why
            with pytest.raises(ValueError, match="redirect"):
                wrk.script(name, {})
        else:
            text = wrk.script(name, {"write_share": 0.5, "users_rows": 10, "items": 5})
            assert "WRKJSON" in text and "done = function" in text
    assert wrk.expressible("rails-writes", {"follow_redirects": 0}) is None
    assert "alive" in wrk.expressible("hello", {}, keepalive=False)


def test_wrk_sends_locusts_bodies_and_paths():
    body = json.dumps({"payload": "p" * 2048})  # what locustfile.py's Mix posts
    fixed = wrk.script("mix", {"write_share": 1.0, "payload_bytes": 2048})
    assert 'wrk.method = "POST"' in fixed and json.dumps(body) in fixed
    assert 'wrk.path = "/delay/7"' in wrk.script("delay", {"delay_ms": 7})
    mixed = wrk.script("mix", {"write_share": 0.1, "items": 1000})
    assert "math.random() < 0.1" in mixed and '"/items/" .. math.random(1, 1000)' in mixed
    assert '"/page"' in wrk.script("user-page", {"users_rows": 50})


@needs_wrk
@pytest.mark.harness
def test_wrk_point_is_complete_and_its_writes_audited(tmp_path):
    db = databases.prepare_database(tmp_path / "w.db")
    lay = layout.plan()
    server_cpus, gen_cpus = lay.server_cpus, lay.generator_cpus
    with servers.start_server("go-nethttp", db, profile="rails71", cpus=server_cpus,
                              log_path=tmp_path / "s.log") as srv:
        hello = wrk.run_point(srv, "hello", 4, tmp_path / "hello", duration=1, warmup=0.5, cpus=gen_cpus)
        before = databases.table_counts(db)["items"]
        post = wrk.run_point(srv, "mix", 4, tmp_path / "post", duration=1, warmup=0.5, cpus=gen_cpus,
                             scenario_params={"write_share": 1.0, "payload_bytes": 100})
        written = databases.table_counts(db)["items"] - before
    for p in (hello, post):
        assert p["requests"] > 0 and p["errors"] == 0 and p["generator"] == "wrk"
        assert p["rps"] == pytest.approx(p["requests"] / p["window_s"])
        assert 0 < p["p50_ms"] <= p["p99_ms"] <= p["max_ms"]
        assert 0 < p["gen_cpu_pct"] and 0 < p["server_cpu_pct"]
    # every acknowledged write is a row; at most the requests in flight at each run's stop more
    assert post["acked_responses"] <= written <= post["acked_responses"] + post["unknown_outcomes"]
    assert post["acked_responses"] > post["requests"]  # the warm-up run's writes count too


def test_wrk_refuses_a_scenario_it_cannot_send(tmp_path):
    srv = servers.Server("go-nethttp", tmp_path / "x.db", 9, {}, tmp_path / "x.log")
    with pytest.raises(ValueError, match="redirect"):
        wrk.run_point(srv, "rails-writes", 1, tmp_path / "x")


# --------------------------------------------------------------------------- the flags

def point(**kw) -> dict:
    base = {"gen_cpu_pct": 40.0, "gen_cpus": 1, "server_util": 0.95, "generator_bound": False,
            "busy_errors": 0, "errors": 0, "max_ms": 30.0, "requests": 100, "db_cached_before": 1.0,
            "knobs": json.dumps({"pragmas": {"synchronous": "1"}}), "scenario": "mix"}
    return {**base, **kw}


def test_influence_past_the_calibrated_onset():
    assert verdicts.influence(point(gen_cpu_pct=70.0), onset=0.67) is not None
    assert verdicts.influence(point(gen_cpu_pct=60.0), onset=0.67) is None
    assert verdicts.influence(point(gen_cpu_pct=99.0), onset=None) is None  # no drift: no onset
    # a generator-bound point is not also influenced
    assert verdicts.influence(point(gen_cpu_pct=99.0, generator_bound=True), onset=0.5) is None
    # two generator CPUs: the onset is a share of both
    assert verdicts.influence(point(gen_cpu_pct=120.0, gen_cpus=2), onset=0.67) is None


def test_a_generator_sets_the_pace_only_when_it_is_busy():
    """A cross-check's gap blames the generator only where it was busy (half its CPUs or more):
    at 0–15 % of its CPU it waited on the server (Rails' stalls in 01), and the gap is the
    clients' difference."""
    assert verdicts.generator_busy(point(gen_cpu_pct=50.0)) and verdicts.generator_busy(point(gen_cpu_pct=83.0))
    for idle in (0.0, 0.6, 15.0, 49.9):
        assert not verdicts.generator_busy(point(gen_cpu_pct=idle))
    assert not verdicts.generator_busy(point(gen_cpu_pct=90.0, gen_cpus=2))  # 45 % of two CPUs
    assert not verdicts.generator_busy(point(gen_cpu_pct=None))


def test_window_and_server_counts_agree_within_the_edges_and_the_late_mark():
    def counted(requests, late_ms, server=2000, users=8, rps=650.0):
        return {"requests": requests, "server_requests": server, "users": users, "rps": rps,
                "server_mark_late_ms": late_ms}
    # 1 % of the server's count, or one request per user at each edge: 20 here
    assert verdicts.counts_agree(counted(1980, None)) and not verdicts.counts_agree(counted(1979, None))
    assert verdicts.count_tolerance(counted(1900, 0.0, users=16)) == 32
    # a closing count read 40 ms late: 650/s × 0.04 s more the server may have handled
    assert verdicts.counts_agree(counted(1960, 40.0)) and not verdicts.counts_agree(counted(1957, 40.0))
    assert not verdicts.counts_agree(counted(1999, None, server=None))  # no count: no agreement


def test_influence_of_a_busy_generator_on_an_idle_server():
    idle = point(gen_cpu_pct=85.0, server_util=0.70)
    assert "server at 70%" in verdicts.influence(idle, onset=None)
    # a server busier than the generator, or saturated, set its own pace
    assert verdicts.influence(point(gen_cpu_pct=60.0, server_util=0.65), onset=None) is None
    assert verdicts.influence(point(gen_cpu_pct=85.0, server_util=0.90), onset=None) is None
    # something else explains the idle server: a lock wait, errors, a stall, disk reads
    for explained in ({"busy_errors": 3}, {"errors": 1}, {"max_ms": 1500.0}, {"requests": 0},
                      {"db_cached_before": 0.3}):
        assert verdicts.influence({**idle, **explained}, onset=None) is None, explained
    assert verdicts.influence({**idle, "max_overrun_ms": 1500.0}, onset=None)  # after the window
    # an fsync per commit is no excuse (see verdicts.influence)
    assert verdicts.influence({**idle, "knobs": json.dumps({"pragmas": {"synchronous": "2"}})}, onset=None)


def test_drift_and_onset():
    ref = {"rps": 1000.0, "p50_ms": 10.0, "p99_ms": 12.0}
    assert not calibrate.drift({"rps": 950.0, "p50_ms": 10.3, "p99_ms": 14.0}, ref)["drift"]
    assert calibrate.drift({"rps": 850.0, "p50_ms": 11.0, "p99_ms": 12.0}, ref)["drift"]
    assert calibrate.drift({"rps": 990.0, "p50_ms": 11.0, "p99_ms": 16.0}, ref)["drift"]
    pts = pd.DataFrame({"endpoint": "delay", "gen_util": [0.1, 0.2, 0.4, 0.6, 0.8, 0.95],
                        "drift": [False, True, False, True, True, True]})
    assert calibrate.onset(pts) == 0.6          # the isolated drift at 0.2 is not an onset
    assert calibrate.onset(pts.assign(drift=False)) is None
    assert calibrate.onset(pts.assign(drift=True)) == 0.1


def test_tables_treat_an_influenced_peak_as_a_lower_bound():
    rows = []
    for server, influenced in (("python-fastapi", False), ("ruby-puma", True)):
        for users, rps in ((8, 1000.0), (32, 2000.0)):
            rows.append({"server": server, "profile": "p", "users": users, "rps": rps if server == "python-fastapi" else rps * 1.5,
                         "p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "errors": 0, "audit_ok": True,
                         "generator_bound": False, "generator_influenced": influenced and users == 32,
                         "generator": "locust", "mean_ms": 1.0, "max_ms": 4.0, "busy_errors": 0})
    df = pd.DataFrame(rows)
    table = read_write_mix.mix_table(df)
    assert table.set_index(["server", "users"]).loc[("ruby-puma", 32), "generator_influenced"]
    assert "Ruby · Puma ≥ 1.5×" in read_write_mix.stack_ratios(table)
    pk = linear_writes.peak(linear_writes.seed_table(df)).set_index("server")
    assert pk.loc["ruby-puma", "peak_generator_bound"] and pk.loc["ruby-puma", "peak_limit"] == "generator-influenced"
    assert "generator-influenced" in findings.health(df.assign(influence="x"))
    fig = plots.throughput_chart(df)
    assert plots.LIMIT_MARKS["generator_influenced"]["label"] in fig.axes[0].get_legend_handles_labels()[1]


def test_a_test_session_reuses_the_calibration_the_set_up_stored(tmp_path):
    """conftest copies the machine's calibrations (data/results.db) into the session's own file:
    the copy is found as the current one, with its points and numbers unchanged."""
    src, dst = tmp_path / "results.db", tmp_path / "session.db"
    assert calibrate.copy_calibrations(src, dst) == 0 and not dst.exists()  # nothing stored yet
    con = sqlite3.connect(src)
    con.execute("CREATE TABLE calibrations (calib_id TEXT, generator TEXT, version TEXT, machine TEXT, "
                "method TEXT, generator_pinning TEXT, started TEXT, onset_util REAL)")
    con.execute("CREATE TABLE calibration_points (calib_id TEXT, users INTEGER, rps REAL)")
    con.execute("INSERT INTO calibrations VALUES ('c1', 'loadgen', ?, ?, ?, '1', '2026-11-26', 0.61)",
                (calibrate.generator_version("loadgen"), machine.machine_label(), calibrate.METHOD))
    con.executemany("INSERT INTO calibration_points VALUES ('c1', ?, ?)", [(4, 399.5), (6, 598.25)])
    con.commit()
    con.close()
    assert calibrate.copy_calibrations(src, dst) == 1
    got = calibrate.current("loadgen", "1", dst)
    assert got["calib_id"] == "c1" and got["onset_util"] == 0.61
    assert calibrate.load_calibrations(dst)[1]["rps"].tolist() == [399.5, 598.25]
    assert calibrate.current("loadgen", "0", dst) is None  # another pinning is not this one


def _stored_calibration(db, calib_id: str, started: str, onset: float) -> None:
    """A loadgen calibration row of this machine and method, with two points and a folder."""
    with results.writing(db) as d:
        d["calibrations"].insert({"calib_id": calib_id, "generator": "loadgen",
                                  "version": calibrate.generator_version("loadgen"),
                                  "machine": machine.machine_label(), "method": calibrate.METHOD,
                                  "generator_pinning": "1", "started": started, "onset_util": onset},
                                 pk="calib_id")
        d["calibration_points"].insert_all([{"calib_id": calib_id, "users": 4, "rps": 399.5},
                                            {"calib_id": calib_id, "users": 6, "rps": 598.25}])
    folder = db.parent / "runs" / calib_id
    folder.mkdir(parents=True)
    (folder / "calibration_points.csv").write_text("users,rps\n4,399.5\n6,598.25\n")


def test_a_fresh_clone_takes_the_calibration_measured_on_its_machine(tmp_path, monkeypatch):
    """A calibration measured in one clone is kept for the machine too (config.MACHINE_CACHE);
    a clone with none takes it, points and folder, instead of measuring (this test starts no
    server: a measurement would fail it), and a clone's own current one is what the machine keeps."""
    monkeypatch.setattr(config, "MACHINE_CACHE", tmp_path / "machine")
    first, fresh = tmp_path / "first" / "results.db", tmp_path / "fresh" / "results.db"
    _stored_calibration(first, "c1", "2026-11-26T10:00:00", 0.61)
    assert calibrate.current("loadgen", "1", calibrate._machine_db()) is None
    assert calibrate.ensure("loadgen", "0", "1", path=first, progress=False)["calib_id"] == "c1"
    assert calibrate.current("loadgen", "1", calibrate._machine_db())["calib_id"] == "c1"
    got = calibrate.ensure("loadgen", "0", "1", path=fresh, progress=False)
    assert got["calib_id"] == "c1" and got["onset_util"] == 0.61
    assert calibrate.load_calibrations(fresh)[1]["rps"].tolist() == [399.5, 598.25]
    assert (fresh.parent / "runs" / "c1" / "calibration_points.csv").exists()
    # taken once: asking again adds nothing to either file
    calibrate.ensure("loadgen", "0", "1", path=fresh, progress=False)
    assert len(calibrate.load_calibrations(fresh)[0]) == len(calibrate.load_calibrations(calibrate._machine_db())[0]) == 1
    # a newer one measured in the fresh clone becomes the machine's current one
    _stored_calibration(fresh, "c2", "2026-11-27T10:00:00", 0.55)
    assert calibrate.ensure("loadgen", "0", "1", path=fresh, progress=False)["calib_id"] == "c2"
    assert calibrate.current("loadgen", "1", calibrate._machine_db())["calib_id"] == "c2"
    assert calibrate.current("loadgen", "0", calibrate._machine_db()) is None  # another pinning


# --------------------------------------------------------------------------- real runs

@needs_wrk
@pytest.mark.harness
def test_sweep_remeasures_where_locust_set_the_pace_and_crosschecks_with_wrk(tmp_path):
    """Locust against go-nethttp's writes saturates its core long before the server: those
    levels are re-measured with loadgen, on the same server, and those points are the headline;
    wrk measures one level; every write of every generator is audited."""
    db = tmp_path / "results.db"
    df = sweep(notebook="test", servers=["go-nethttp"], profiles=["rails71"], scenario="mix",
               scenario_params={"write_share": 1.0}, payload_bytes=200, seed_items=10, levels=[16],
               duration=1.5, warmup=0.5, confirm="loadgen", crosscheck=16, progress=False,
               results_db=db, runs_dir=tmp_path / "runs")
    every = results.load_points(db, headline_only=False)
    locust = every[every["generator"] == "locust"]
    assert len(locust) == 1 and (locust["generator_bound"] | locust["generator_influenced"]).all()
    assert not locust["headline"].astype(bool).any() and (locust["replaced_by"] == "loadgen").all()
    assert list(df["generator"]) == ["loadgen"] and df["headline"].all()
    assert df["replaced_rps"].iloc[0] == pytest.approx(locust["rps"].iloc[0])
    assert every["audit_ok"].all() and (every["acked_writes"] > 0).all()
    assert len(results.load_points(db)) == 1  # the headline only, by default
    # the calibrations it used are stored, and consistent with their own points
    cal, pts = calibrate.load_calibrations()
    for gen in ("locust", "loadgen"):
        c = calibrate.current(gen, layout.plan().generator_cpus)
        assert c is not None and c["target"] in calibrate.CANDIDATES
        mine = pts[pts["calib_id"] == c["calib_id"]]
        assert (mine["wrk_rps"] > 0).all() and (mine["rps"] > 0).all()
        assert mine["rps_ratio"].round(9).equals((mine["rps"] / mine["wrk_rps"]).round(9))
        stored, again = c["onset_util"], calibrate.onset(mine)
        assert (stored is None and again is None) or stored == pytest.approx(again)
        mine_points = every[every["generator"] == gen]["gen_onset_util"]  # what the flags used
        assert mine_points.isna().all() if stored is None else (mine_points == stored).all()
    # wrk's point at the same level, audited, beside both generators
    checks = analysis.crosscheck_table(df["run_id"].iloc[0], db)
    assert set(checks["generator"]) == {"wrk", "locust", "loadgen"}
    w = checks[checks["generator"] == "wrk"].iloc[0]
    assert w["rps"] > 0 and w["note"].startswith("audit ok")
    assert checks.loc[checks["generator"] == "loadgen", "rps_vs_ref"].iloc[0] == pytest.approx(
        df["rps"].iloc[0] / w["rps"])


@pytest.mark.harness
def test_confirming_with_the_sweeps_own_generator_confirms_nothing(tmp_path):
    """05 at seed scale runs loadgen and keeps `confirm="loadgen"`: every point is loadgen's own
    headline, nothing is re-measured, and the run records that there was no confirmation."""
    db = tmp_path / "results.db"
    df = sweep(notebook="test", servers=["go-nethttp"], profiles=["rails71"], scenario="mix",
               scenario_params={"write_share": 1.0}, seed_items=10, levels=[4, 16], duration=1.0, warmup=0.3,
               generator="loadgen", confirm="loadgen", progress=False, results_db=db,
               runs_dir=tmp_path / "runs")
    every = results.load_points(db, headline_only=False)
    assert len(every) == 2 and set(every["generator"]) == {"loadgen"}
    assert every["headline"].astype(bool).all() and every["replaced_by"].isna().all()
    assert every["audit_ok"].all() and (every["acked_writes"] > 0).all()
    run = results.load_table("runs", df["run_id"].iloc[0], db).iloc[0]
    recorded = json.loads(run["sweep"])
    assert recorded["generator"] == "loadgen" and recorded["confirm"] is None
    assert json.loads(run["server_timing"])[0]["confirmed_levels"] == 0


@needs_wrk
@pytest.mark.harness
def test_crosscheck_of_a_scenario_wrk_cannot_send_is_recorded_as_skipped(tmp_path):
    db = tmp_path / "results.db"
    df = sweep(notebook="test", servers=["go-nethttp"], profiles=["rails71"], scenario="rails-writes",
               levels=[2], duration=1, warmup=0.3, crosscheck=2, calibration=False, progress=False,
               results_db=db, runs_dir=tmp_path / "runs")
    checks = analysis.crosscheck_table(df["run_id"].iloc[0], db)
    assert len(checks) == 1 and "redirect" in checks["note"].iloc[0]
    assert df["gen_onset_util"].isna().all()  # not calibrated: no onset


def test_bad_confirm_and_crosscheck_are_refused_before_anything_starts(tmp_path):
    for kw, match in (({"confirm": "wrk"}, "generator must be"),
                      ({"crosscheck": 0}, "crosscheck"), ({"crosscheck": "8"}, "crosscheck")):
        with pytest.raises(ValueError, match=match):
            sweep(notebook="test", progress=False, results_db=tmp_path / "r.db", **kw)
    assert not (tmp_path / "r.db").exists()
