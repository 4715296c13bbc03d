"""The measuring instrument: real servers, real Locust, real SQLite files.

These check correctness and self-consistency of measurements (counts, means, audits,
process hygiene), never speed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from sqlitelab import config, load, results, servers
from sqlitelab.sweep import sweep

pytestmark = pytest.mark.slow
STACK = "python-fastapi"


@pytest.fixture()
def lab_dirs(tmp_path, monkeypatch):
    """Results, runs and scratch files of these tests stay out of the real data/."""
    monkeypatch.setattr(config, "RESULTS_DB", tmp_path / "results.db")
    monkeypatch.setattr(config, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setattr(config, "TMP_DIR", tmp_path / "tmp")
    return tmp_path


def processes_mentioning(marker: str) -> list[psutil.Process]:
    """Live processes whose command line or environment names `marker`."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.pid == os.getpid():
                continue
            text = " ".join(p.info["cmdline"] or [])
            if marker in text or any(marker in v for v in p.environ().values()):
                found.append(p)
        except (psutil.Error, OSError):
            pass
    return found


def test_window_count_matches_server_count_and_means_agree(tmp_path):
    db = servers.prepare_database(tmp_path / "h.db")
    with servers.start_server(STACK, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=4, warmup=1, cpus="1")
    assert p["requests"] > 500
    assert p["server_requests"] is not None
    # the harness's window count vs the server's own counter over the same window
    assert abs(p["requests"] - p["server_requests"]) <= 0.01 * p["server_requests"], p
    # HdrHistogram mean vs the exact mean of the same requests, and vs Locust's own average
    assert p["hist_mean_ms"] == pytest.approx(p["mean_ms"], rel=0.002)
    # Locust's own stats, reset at the window's start, counted the same requests
    assert p["locust_window_requests"] == pytest.approx(p["requests"], rel=0.01)
    assert p["hist_mean_ms"] == pytest.approx(p["locust_window_avg_ms"], rel=0.02), p
    assert p["p50_ms"] <= p["p99_ms"] <= p["max_ms"]
    assert json.loads(p["status_counts"]) == {"200": p["requests"]}
    assert p["errors"] == 0 and p["rps"] == pytest.approx(p["requests"] / p["window_s"], rel=0.01)
    assert not p["ramp_in_window"]
    # only the requests in flight at the close overran it, and briefly
    assert p["overran_window"] <= 4 and p["max_overrun_ms"] < 1000


def test_level_by_request_count_is_exact(tmp_path):
    db = servers.prepare_database(tmp_path / "c.db", items=100)
    with servers.start_server(STACK, db, profile="single-writer", cpus="0") as srv:
        p = load.run_level(srv, "mix", 8, tmp_path / "level", warmup=0.5, requests=1500,
                           max_duration=60, cpus="1", params={"items": 100, "write_share": 0.5})
        after = servers.table_counts(db)
    assert p["requests"] == 1500
    assert p["acked_writes"] == after["items"] - 100 > 0


def test_locust_processes_are_merged(tmp_path):
    db = servers.prepare_database(tmp_path / "m.db")
    with servers.start_server(STACK, db, cpus="0") as srv:
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=3, warmup=1,
                           processes=2, cpus="1")
    assert len(list((tmp_path / "level").glob("proc-*.json"))) == 2
    assert p["requests"] > 0 and p["errors"] == 0
    assert abs(p["requests"] - p["server_requests"]) <= 0.01 * p["server_requests"]


def test_write_sweep_audits_and_stores(lab_dirs):
    df = sweep(notebook="test", servers=[STACK], profiles=["rails71"], scenario="rails-writes",
               levels=[1, 4], duration=2, warmup=0.5, progress=False)
    assert len(df) == 2
    assert (df["acked_writes"] > 0).all()
    assert (df["rows_written"] == df["acked_writes"]).all() and df["audit_ok"].all()
    assert (df["integrity"] == "ok").all()
    stored = results.load_points(lab_dirs / "results.db")
    assert len(stored) == 2 and set(stored["users"]) == {1, 4}
    run_dir = lab_dirs / "runs" / df["run_id"].iloc[0]
    assert (run_dir / f"server-{STACK}-rails71.log").exists()
    assert list(run_dir.rglob("locust_stats.csv")) and list(run_dir.rglob("proc-*.json"))
    assert not psutil.Process().children(recursive=True), "a process outlived the sweep"


def test_audit_mismatch_is_loud(lab_dirs, monkeypatch):
    """If acknowledgements and rows disagree, the point says so and a warning is raised."""
    real = servers.table_counts
    calls = {"n": 0}

    def undercount(path):  # pretend one acknowledged row is missing from the file
        c = real(path)
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            c["requests"] -= 1
        return c
    monkeypatch.setattr(servers, "table_counts", undercount)
    with pytest.warns(UserWarning, match="AUDIT FAILED"):
        df = sweep(notebook="test", servers=[STACK], profiles=["rails71"],
                   scenario="rails-writes-noredirect", levels=[2], duration=1, warmup=0.2,
                   progress=False)
    assert not df["audit_ok"].any()


def test_interrupted_sweep_leaves_nothing_running(lab_dirs):
    """SIGINT (what interrupting a notebook cell sends) in the middle of a level."""
    marker = f"interrupt-{os.getpid()}-{time.time_ns()}"
    script = textwrap.dedent(f"""
        from pathlib import Path
        from sqlitelab import config
        config.RESULTS_DB = Path({str(lab_dirs)!r}) / "results.db"
        config.RUNS_DIR = Path({str(lab_dirs)!r}) / "runs"
        config.TMP_DIR = Path({str(lab_dirs)!r}) / "tmp"
        from sqlitelab.sweep import sweep
        sweep(notebook="test", servers=["{STACK}"], profiles=["rails71"], scenario="hello",
              levels=[2, 2, 2], duration=20, warmup=0.5, progress=False, run_id="{marker}")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=config.PROJ_ROOT)
    deadline = time.time() + 60
    while time.time() < deadline and not any("locust" in " ".join(p.cmdline())
                                              for p in processes_mentioning(marker)):
        time.sleep(0.2)
    assert processes_mentioning(marker), "the sweep never started its generator"
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    assert proc.returncode != 0
    time.sleep(0.5)
    left = processes_mentioning(marker)
    assert not left, [p.cmdline() for p in left]


def test_server_that_will_not_start_shows_its_log(tmp_path):
    db = servers.prepare_database(tmp_path / "bad.db")
    with pytest.raises(servers.ServerStartError, match=r"lab: LAB_TXN_MODE"):
        servers.start_server(STACK, db, txn_mode="sometimes")
    assert not servers.our_processes()


def test_bad_sweep_arguments_are_refused_before_anything_starts(lab_dirs):
    with pytest.raises(ValueError, match="unknown servers"):
        sweep(notebook="t", servers=["cobol-cgi"], progress=False)
    with pytest.raises(ValueError, match="unknown profiles"):
        sweep(notebook="t", profiles=["turbo"], progress=False)
    with pytest.raises(ValueError, match="levels"):
        sweep(notebook="t", levels=[0], progress=False)
    with pytest.raises(ValueError, match="scenario"):
        sweep(notebook="t", scenario="everything", progress=False)
    with pytest.raises(ValueError, match="CPU set"):
        sweep(notebook="t", server_cpus="99", progress=False)
    assert not (lab_dirs / "runs").exists() or not any((lab_dirs / "runs").iterdir())
