"""The lab's Go load generator (`generator="loadgen"`): the same measurement as Locust's —
window counts against the server's own counter, exact means, audits, exact request counts —
and the same refusals. Correctness only, never speed."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import psutil
import pytest
from test_harness import assert_hey_accounting, level_files

from sqlitelab.core import config, processes
from sqlitelab.infra import databases, servers
from sqlitelab.load import commands, driver as load, scenarios, verdicts
from sqlitelab.experiments.sweep import sweep

pytestmark = pytest.mark.harness


@pytest.fixture(scope="module", autouse=True)
def built():
    return commands.build_loadgen()


@pytest.mark.parametrize("stack", ["go-nethttp", "python-fastapi"])
def test_window_count_matches_server_count_and_means_agree(tmp_path, stack):
    db = databases.prepare_database(tmp_path / "h.db")
    with servers.start_server(stack, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        p = load.run_level(srv, "hello", 8, tmp_path / "level", duration=3, warmup=0.5, cpus="1",
                           generator="loadgen")
    assert p["generator"] == "loadgen" and (tmp_path / "level" / "loadgen.log").exists()
    assert p["requests"] > 0 and p["server_requests"] is not None
    assert verdicts.counts_agree(p), p
    assert p["hist_mean_ms"] == pytest.approx(p["mean_ms"], rel=0.002)
    assert p["p50_ms"] <= p["p99_ms"] <= p["max_ms"]
    assert json.loads(p["status_counts"]) == {"200": p["requests"]}
    assert p["errors"] == 0 and p["rps"] == pytest.approx(p["requests"] / p["window_s"], rel=0.01)
    assert not p["ramp_in_window"] and p["overran_window"] <= 8 and p["max_overrun_ms"] < 1000
    assert p["locust_window_requests"] is None  # Locust's cross-check does not apply
    assert p["keepalive"] is True
    assert_hey_accounting(p, tmp_path / "level")
    (proc,) = [json.loads(f.read_text()) for f in (tmp_path / "level").glob("proc-*.json")]
    assert proc["run_max_us"] >= max(v for v, _ in proc["hist_values"])  # exact values here


def test_a_session_steps_one_loadgen_process_through_its_levels(tmp_path):
    """Levels [1, 4, 2] from one loadgen process (load.Session, generator="loadgen"): each its
    own file, log and self-consistent counts, no load between levels, the process started once."""
    db = databases.prepare_database(tmp_path / "s.db")
    levels = (1, 4, 2)
    with servers.start_server("go-nethttp", db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        with load.Session(srv, "hello", tmp_path / "session", cpus="1", generator="loadgen") as gen:
            points = [gen.level(u, tmp_path / f"u{u}", duration=1.5, warmup=0.3) for u in levels]
            pid = gen.started.popen.pid
    assert not psutil.pid_exists(pid), "the session's loadgen outlived it"
    procs = [level_files(tmp_path / f"u{u}", "proc") for u in levels]
    assert [len(p) for p in procs] == [1, 1, 1] and {p[0]["pid"] for p in procs} == {pid}
    for before, after in zip(procs, procs[1:]):  # one level's load ended before the next began
        assert before[0]["run_last_end"] < after[0]["run_first_start"]
    for users, p in zip(levels, points):
        level_dir = tmp_path / f"u{users}"
        assert p["generator"] == "loadgen" and p["users"] == users and (level_dir / "loadgen.log").exists()
        assert p["requests"] > 0 and p["errors"] == 0 and verdicts.counts_agree(p), p
        assert p["hist_mean_ms"] == pytest.approx(p["mean_ms"], rel=0.002)
        assert json.loads(p["status_counts"]) == {"200": p["requests"]}
        assert not p["ramp_in_window"] and p["overran_window"] <= users and p["locust_exit"] is None
        assert p["time_window_s"] == pytest.approx(1.5, abs=0.05)
        assert_hey_accounting(p, level_dir)
    assert all(p["time_startup_s"] < 0.1 for p in points[1:]), [p["time_startup_s"] for p in points]


def test_a_generator_started_after_its_window_is_measured_again_and_only_once(tmp_path):
    """A window fixed in advance that closed before loadgen started (here: no start-up allowed,
    so it closes at the launch): the process sends nothing, its files are set aside, and the
    level is measured again with twice the start-up it took. With an operation running during
    the level, which would run twice, it is refused instead."""
    db = databases.prepare_database(tmp_path / "late.db")
    with servers.start_server("go-nethttp", db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=1.5, warmup=0.3, cpus="1",
                           generator="loadgen", startup=-1.8)
        with pytest.raises(load.LoadError, match="after its window had closed: nothing was measured"):
            load.run_level(srv, "hello", 4, tmp_path / "during", duration=1.5, warmup=0.3, cpus="1",
                           generator="loadgen", startup=-1.8, during=lambda t0, t1, out: None)
    (missed,) = level_files(tmp_path / "level" / "started-late", "proc")
    assert missed["run_results"] == 0 and missed["count"] == 0 and missed["spawned_at"] >= missed["t1"]
    assert len(level_files(tmp_path / "level", "proc")) == 1
    assert p["requests"] > 0 and p["errors"] == 0 and not p["ramp_in_window"], p
    assert verdicts.counts_agree(p), p
    assert_hey_accounting(p, tmp_path / "level")


def test_level_by_request_count_is_exact_and_writes_are_audited(tmp_path):
    db = databases.prepare_database(tmp_path / "c.db", items=100)
    with servers.start_server("rust-axum", db, profile="single-writer", cpus="0") as srv:
        p = load.run_level(srv, "mix", 16, tmp_path / "level", warmup=0.3, requests=3000,
                           max_duration=60, cpus="1", scenario_params={"items": 100, "write_share": 0.5},
                           generator="loadgen")
        after = databases.table_counts(db)
    assert p["requests"] == 3000
    assert p["acked_writes"] == after["items"] - 100 > 0
    posts = sum(v for k, v in json.loads(p["run_counts"]).items() if k.startswith("POST"))
    gets = sum(v for k, v in json.loads(p["run_counts"]).items() if k.startswith("GET"))
    assert 0.4 < posts / (posts + gets) < 0.6


def test_write_sweep_with_loadgen_audits(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TMP_DIR", tmp_path / "tmp")
    df = sweep(notebook="test", servers=["go-nethttp", "python-fastapi"], profiles=["rails71"],
               scenario="rails-writes", levels=[4], duration=1.5, warmup=0.3, progress=False,
               generator="loadgen", keepalive=False, results_db=tmp_path / "r.db",
               runs_dir=tmp_path / "runs")
    assert (df["generator"] == "loadgen").all() and (df["acked_writes"] > 0).all()
    assert not df["keepalive"].any()
    with sqlite3.connect(tmp_path / "r.db") as con:
        (sweep_args,) = con.execute("SELECT sweep FROM runs").fetchone()
    assert json.loads(sweep_args)["keepalive"] is False
    assert (df["rows_written"] == df["acked_writes"]).all() and df["audit_ok"].all()
    assert set(df["status_counts"].map(lambda s: tuple(json.loads(s)))) == {("200",)}  # redirect followed
    assert not processes.descendants(), "a process outlived the sweep"


@pytest.fixture
def hello_spec(tmp_path):
    return str(scenarios.write_spec("hello", {}, tmp_path / "hello.json"))


@pytest.mark.parametrize("args, message", [
    (["-spec", "HELLO", "-users", "1", "-host", "http://10.0.0.1:80", "-max-seconds", "1"], "loopback"),
    (["-spec", "/nonexistent/spec.json", "-users", "1", "-host", "http://127.0.0.1:9", "-max-seconds", "1"], "-spec"),
    (["-scenario", "hello", "-users", "1", "-host", "http://127.0.0.1:9", "-max-seconds", "1"], "-scenario"),
    (["-spec", "HELLO", "-users", "0", "-host", "http://127.0.0.1:9", "-max-seconds", "1"], "users"),
])
def test_loadgen_refuses_bad_arguments_with_one_line(args, message, hello_spec):
    args = [hello_spec if a == "HELLO" else a for a in args]
    r = subprocess.run([str(config.LOADGEN_BIN), *args], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: ") and message in lines[0]


@pytest.mark.parametrize("value", ["yes", "2", "true"])
def test_loadgen_refuses_a_bad_keepalive_with_one_line(value, hello_spec):
    args = ["-spec", hello_spec, "-users", "1", "-host", "http://127.0.0.1:9", "-max-seconds", "1"]
    r = subprocess.run([str(config.LOADGEN_BIN), *args], capture_output=True, text=True,
                       timeout=10, env={**os.environ, "LAB_KEEPALIVE": value})
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: LAB_KEEPALIVE=") and "1 or 0" in lines[0]


def test_bad_generator_choices_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="generator must be one of"):
        sweep(notebook="test", generator="wrk", progress=False, results_db=tmp_path / "r.db")
    with pytest.raises(ValueError, match="Locust only"):
        sweep(notebook="test", generator="loadgen", processes=2, progress=False,
              results_db=tmp_path / "r.db")
    assert not (tmp_path / "r.db").exists()


def test_loadgen_unit_tests_pass():
    """The generator's own Go tests (in-process servers: redirects, timeouts, signals, targets)."""
    env = {**os.environ, "PATH": os.pathsep.join([os.environ.get("PATH", ""), *commands.GO_BIN_DIRS])}
    r = subprocess.run(["go", "test", "-count=1", "."], cwd=config.LOADGEN_DIR, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
