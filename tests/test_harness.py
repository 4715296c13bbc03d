"""The measuring instrument: real servers, real Locust, real SQLite files.

These check correctness and self-consistency of measurements (counts, means, audits,
process hygiene), never speed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from conftest import command_line
from hdrh.histogram import HdrHistogram

from sqlitelab.core import config, processes, results
from sqlitelab.infra import databases, servers
from sqlitelab.load import driver as load, verdicts
from sqlitelab.experiments.sweep import sweep

pytestmark = pytest.mark.harness
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


def interrupt_and_check(proc: subprocess.Popen, marker: str, err_path: Path, what: str) -> None:
    """SIGINT to `proc` (what interrupting a notebook cell sends): it must exit within 60 s (else
    every thread's stack, from its faulthandler, fails the test) with an error status, leaving
    no process that mentions `marker`."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)       # every thread's stack into its stderr
        time.sleep(2)
        pytest.fail(f"the interrupted {what} did not exit within 60 s; its stacks:\n"
                    + err_path.read_text(errors="replace")[-6000:])
    assert proc.returncode != 0
    time.sleep(0.5)
    left = processes_mentioning(marker)
    assert not left, [command_line(p) for p in left]


def reap(proc: subprocess.Popen, marker: str) -> None:
    """Never leave the interrupted process behind (nor a zombie for the next test to trip on),
    nor anything that mentions `marker`."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for p in processes_mentioning(marker):
        try:
            p.kill()
        except psutil.Error:
            pass


class CountingRelay:
    """A TCP relay in front of a real server that counts the connections a generator opens:
    each accepted connection gets its own upstream connection to the server, bytes pass
    unchanged both ways, and a close on one side is passed on to the other. Per connection
    it notes how many request lines and `Connection: close` headers the client sent.
    `relay.server` is the server itself (same process, same /health) at the relay's URL."""

    def __init__(self, server: servers.Server):
        self.upstream = (server.host, server.port)
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.server = dataclasses.replace(server, port=self.listener.getsockname()[1])
        self.lock = threading.Lock()
        self.accepted = 0
        self.connections: list[tuple[int, int]] = []  # (request lines, Connection: close)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client):
        sent: list[bytes] = []
        try:
            upstream = socket.create_connection(self.upstream, timeout=60)
        except OSError:
            upstream = None
        if upstream is not None:
            back = threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True)
            back.start()
            self._pipe(client, upstream, sent)
            back.join(60)
            upstream.close()
        client.close()
        text = b"".join(sent).lower()
        with self.lock:
            self.connections.append((text.count(b" http/1.1\r\n"),
                                     text.count(b"\r\nconnection: close\r\n")))

    @staticmethod
    def _pipe(src, dst, keep):
        try:
            while data := src.recv(65536):
                if keep is not None:
                    keep.append(data)
                dst.sendall(data)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def finish(self, timeout: float = 20.0) -> list[tuple[int, int]]:
        """Stop accepting, wait for every relayed connection to end, return their notes."""
        self.listener.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.connections) >= self.accepted:
                    return list(self.connections)
            time.sleep(0.05)
        raise AssertionError(f"{self.accepted - len(self.connections)} relayed connections still open")


def connections_per_request(server: servers.Server, tmp: Path, generator: str) -> dict:
    """rails-writes (POST, then the GET of the redirect) at 4 users without keep-alive, then
    with it, each through a CountingRelay: returns {keepalive: (point, connections)}."""
    out = {}
    for keepalive in (False, True):
        relay = CountingRelay(server)
        p = load.run_level(relay.server, "rails-writes", 4, tmp / f"ka{int(keepalive)}",
                           duration=1.5, warmup=0.3, cpus="1", generator=generator,
                           keepalive=keepalive)
        out[keepalive] = (p, relay.finish())
    return out


def assert_new_connection_per_request(levels: dict, users: int = 4) -> None:
    """Without keep-alive: one connection per request and per hop of its redirect, each with
    one request that says Connection: close. With it: one connection per user. Besides the
    generator, the harness's two /health reads (the window's marks) connect once each."""
    (off, conns_off), (on, conns_on) = levels[False], levels[True]
    assert off["keepalive"] is False and on["keepalive"] is True
    for p in (off, on):
        assert p["errors"] == 0 and p["hey_results"] > 0
        assert json.loads(p["run_counts"]) == {"POST POST /requests 200": p["hey_results"]}
    assert len(conns_off) == 2 * off["hey_results"] + 2, (len(conns_off), off["hey_results"])
    assert all(c == (1, 1) for c in conns_off), [c for c in conns_off if c != (1, 1)][:5]
    assert len(conns_on) == users + 2, conns_on
    assert sum(n for n, _ in conns_on) == 2 * on["hey_results"] + 2
    assert sum(close for _, close in conns_on) <= 2  # only urllib's /health reads say close


def assert_hey_accounting(p: dict, level_dir: Path) -> None:
    """hey's whole-run accounting against the window's and against the per-process files."""
    procs = [json.loads(f.read_text()) for f in level_dir.glob("proc-*.json")]
    counts = json.loads(p["run_counts"])
    # every finished request is in run_counts once, transport errors under status 0
    assert p["hey_results"] == sum(counts.values()) == sum(q["run_results"] for q in procs)
    ok = sum(q["run_ok"] for q in procs)
    assert ok == sum(n for k, n in counts.items() if not k.endswith(" 0"))
    assert p["hey_results"] >= p["requests"] > 0 and p["hey_seconds"] >= p["window_s"]
    assert p["hey_rps"] * p["hey_seconds"] == pytest.approx(p["hey_results"], rel=1e-12)
    assert p["hey_mean_ms"] == pytest.approx(sum(q["run_sum_us"] for q in procs) / ok / 1000)
    assert p["hey_seconds"] == pytest.approx(max(q["run_last_end"] for q in procs)
                                             - min(q["run_first_start"] for q in procs))
    assert min(q["run_first_start"] for q in procs) <= min(q["first_start"] for q in procs)
    assert max(q["run_last_end"] for q in procs) >= max(q["last_end"] for q in procs)
    # the window's maximum is in the run's (its histogram bucket reaches down to it; with no
    # transport error in the window, whose latency hey leaves out)
    if p["errors"] == 0:
        hist = HdrHistogram.decode(p["histogram"])
        # hey_max_ms is whole µs over 1000: back to µs exactly (4.044 * 1000 is 4043.9999…)
        assert round(p["hey_max_ms"] * 1000) >= hist.get_lowest_equivalent_value(hist.get_max_value())


def assert_locust_window_agrees(p: dict, users: int) -> None:
    """Locust's own count over the window (its stats reset at t0, read at t1: the requests that
    completed between) against the harness's (those that started in the window and finished):
    they differ by the requests crossing an edge, at most one per user at each, or by 1 %."""
    assert abs(p["locust_window_requests"] - p["requests"]) <= max(0.01 * p["requests"], 2 * users), p


def test_window_count_matches_server_count_and_means_agree(tmp_path):
    db = databases.prepare_database(tmp_path / "h.db")
    with servers.start_server(STACK, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=4, warmup=1, cpus="1")
    assert p["requests"] > 0 and p["server_requests"] is not None
    # the harness's window count vs the server's own counter over the same window: they differ by
    # the requests crossing its edges (at most one per user at each) and the sampling's slack
    assert verdicts.counts_agree(p), p
    # HdrHistogram mean vs the exact mean of the same requests, and vs Locust's own average
    assert p["hist_mean_ms"] == pytest.approx(p["mean_ms"], rel=0.002)
    # Locust's own stats, reset at the window's start, counted the same requests
    assert_locust_window_agrees(p, 4)
    assert p["hist_mean_ms"] == pytest.approx(p["locust_window_avg_ms"], rel=0.02), p
    assert p["p50_ms"] <= p["p99_ms"] <= p["max_ms"]
    assert json.loads(p["status_counts"]) == {"200": p["requests"]}
    assert p["errors"] == 0 and p["rps"] == pytest.approx(p["requests"] / p["window_s"], rel=0.01)
    assert not p["ramp_in_window"]
    # only the requests in flight at the close overran it, and briefly
    assert p["overran_window"] <= 4 and p["max_overrun_ms"] < 1000
    assert p["keepalive"] is True
    assert_hey_accounting(p, tmp_path / "level")
    # one Locust process opens its window `warmup` s after its users spawned (its window file)
    assert list((tmp_path / "level").glob("window-*.json"))
    assert p["time_startup_s"] == pytest.approx(p["time_spawn_s"]) and p["time_warmup_s"] == 1
    assert p["time_window_s"] == pytest.approx(4, abs=0.05) and p["time_shutdown_s"] >= 0


def test_a_window_with_no_warm_up_opens_when_the_users_run(tmp_path):
    db = databases.prepare_database(tmp_path / "w.db")
    with servers.start_server(STACK, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=2, warmup=0, cpus="1")
    (w,) = [json.loads(f.read_text()) for f in (tmp_path / "level").glob("window-*.json")]
    assert w["t0"] == pytest.approx(w["spawned_at"]) and w["t1"] == pytest.approx(w["t0"] + 2)
    assert p["requests"] > 0 and not p["ramp_in_window"] and p["time_warmup_s"] == 0
    assert abs(p["requests"] - p["server_requests"]) <= max(2 * 4, 0.02 * p["server_requests"]), p
    assert p["hey_results"] >= p["requests"]


@pytest.mark.parametrize("generator, stack", [("locust", "go-nethttp"), ("loadgen", "python-fastapi")])
def test_without_keepalive_a_generator_opens_a_connection_per_request(tmp_path, generator, stack):
    """LAB_KEEPALIVE=0, counted at a relay in front of a real server. (Locust not against
    python-fastapi: uvicorn sends a 302's body after its head, and geventhttpclient, which
    follows the redirect before that body has arrived, then closes the kept-alive connection
    now and then, so "one connection per user" would not hold exactly there.)"""
    db = databases.prepare_database(tmp_path / "k.db")
    with servers.start_server(stack, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        levels = connections_per_request(srv, tmp_path, generator)
    assert_new_connection_per_request(levels)
    for keepalive, (p, _) in levels.items():
        assert_hey_accounting(p, tmp_path / f"ka{int(keepalive)}")


def test_bad_keepalive_is_refused_before_anything_starts(tmp_path):
    srv = SimpleNamespace(url="http://127.0.0.1:9")  # never reached
    with pytest.raises(ValueError, match="keepalive must be True or False"):
        load.run_level(srv, "hello", 1, tmp_path / "l", keepalive="no")
    with pytest.raises(ValueError, match="not scenario_params"):
        load.run_level(srv, "hello", 1, tmp_path / "l", scenario_params={"KEEPALIVE": 0})
    assert not (tmp_path / "l").exists()


def test_level_by_request_count_is_exact(tmp_path):
    db = databases.prepare_database(tmp_path / "c.db", items=100)
    with servers.start_server(STACK, db, profile="single-writer", cpus="0") as srv:
        p = load.run_level(srv, "mix", 8, tmp_path / "level", warmup=0.5, requests=1500,
                           max_duration=60, cpus="1", scenario_params={"items": 100, "write_share": 0.5})
        after = databases.table_counts(db)
    assert p["requests"] == 1500
    # the users still sending when the count was reached were stopped mid-request: each such
    # write may have been committed, unacknowledged (counted, not assumed)
    assert 0 < p["acked_writes"] <= after["items"] - 100 <= p["acked_writes"] + p["inflight_writes"]
    assert 0 <= p["inflight_writes"] < 8


@pytest.mark.parametrize("generator", ["locust", "loadgen"])
def test_a_count_based_write_level_audits_its_writes_in_flight(lab_dirs, generator):
    """A count-based level as notebook 03 runs it (ruby-puma, single writer, 8 users): the writes
    in flight when the generator stopped are counted by the generator (none at a clean stop:
    users finish their request), and rows lie between the acknowledged writes and those plus
    the in-flight ones. (loadgen's count of requests it abandoned: main_test.go.)"""
    df = sweep(notebook="test", servers=["ruby-puma"], profiles=["single-writer"], scenario="mix",
               scenario_params={"write_share": 1.0, "items": 100}, seed_items=100, levels=[8],
               repeats=2, requests=1000, warmup=0.3, progress=False, calibration=False,
               generator=generator)
    assert df["audit_ok"].all() and (df["integrity"] == "ok").all()
    for p in df.itertuples():
        assert p.acked_writes <= p.rows_written <= p.acked_writes + p.inflight_writes
        assert p.audit_rule == "exact" + (f", {p.inflight_writes} in flight" if p.inflight_writes else "")
    # both generators let each user finish the request it is in (Locust's --stop-timeout): none
    # is in flight at a clean stop, and then the count is exact
    assert (df["inflight_writes"] == 0).all() and (df["rows_written"] == df["acked_writes"]).all()


def test_locust_processes_are_merged(tmp_path):
    db = databases.prepare_database(tmp_path / "m.db")
    with servers.start_server(STACK, db, cpus="0") as srv:
        p = load.run_level(srv, "hello", 4, tmp_path / "level", duration=3, warmup=1,
                           processes=2, cpus="1")
    assert len(list((tmp_path / "level").glob("proc-*.json"))) == 2
    assert p["requests"] > 0 and p["errors"] == 0
    assert verdicts.counts_agree(p), p
    # the master opened the window once both processes' users had spawned, and told them
    assert len(list((tmp_path / "level").glob("window-*.json"))) == 1 and not p["ramp_in_window"]


def level_files(level_dir: Path, kind: str) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(level_dir.glob(f"{kind}-*.json"))]


def test_a_session_steps_one_locust_process_through_its_levels(tmp_path):
    """Levels [1, 4, 2] from one Locust process (load.Session): each level measured as a process
    of its own measures it — its own files, window after its spawn, self-consistent counts —
    with no load between levels (the next starts after the last request of the one before
    ended) and no connection left open into the next."""
    db = databases.prepare_database(tmp_path / "s.db")
    levels = (1, 4, 2)
    with servers.start_server(STACK, db, profile="rails71", cpus="0") as srv:
        load.prime(srv)
        with load.Session(srv, "hello", tmp_path / "session", cpus="1") as gen:
            points = []
            for users in levels:
                points.append(gen.level(users, tmp_path / f"u{users}", duration=1.5, warmup=0.3))
                pid = gen.started.popen.pid
                left = [c for c in psutil.Process(pid).net_connections("tcp")
                        if c.raddr and c.raddr.port == srv.port]
                assert not left, left
            with pytest.raises(ValueError, match="a folder of its own"):  # its old files would end it at once
                gen.level(1, tmp_path / "u1", duration=1.5, warmup=0.3)
        assert gen.exit_s > 0
    assert not psutil.pid_exists(pid), "the session's Locust outlived it"
    procs = [level_files(tmp_path / f"u{u}", "proc") for u in levels]
    windows = [level_files(tmp_path / f"u{u}", "window") for u in levels]
    assert [len(p) for p in procs] == [len(w) for w in windows] == [1, 1, 1]
    assert {p[0]["pid"] for p in procs} == {pid}
    for before, after in zip(procs, procs[1:]):  # one level's load ended before the next began
        assert before[0]["run_last_end"] < after[0]["run_first_start"]
    for users, p, (w,) in zip(levels, points, windows):
        level_dir = tmp_path / f"u{users}"
        assert p["users"] == users and p["requests"] > 0 and p["errors"] == 0, p
        assert w["t1"] == pytest.approx(w["t0"] + 1.5) and w["t0"] == pytest.approx(w["spawned_at"] + 0.3)
        assert verdicts.counts_agree(p), p
        assert p["hist_mean_ms"] == pytest.approx(p["mean_ms"], rel=0.002)
        assert_locust_window_agrees(p, users)
        assert p["hist_mean_ms"] == pytest.approx(p["locust_window_avg_ms"], rel=0.02), p
        assert p["locust_avg_ms"] is not None  # the level's own locust_stats.csv
        assert json.loads(p["status_counts"]) == {"200": p["requests"]}
        assert not p["ramp_in_window"] and p["overran_window"] <= users
        assert p["locust_exit"] is None  # the process ran on
        assert_hey_accounting(p, level_dir)
        assert (level_dir / "scenario.json").read_text() == (tmp_path / "session" / "scenario.json").read_text()
        assert p["time_startup_s"] == pytest.approx(p["time_spawn_s"])
        assert p["time_window_s"] == pytest.approx(1.5, abs=0.05) and 0 <= p["time_shutdown_s"] < 1
    # the process started once, in the first level; a later level only asks it
    assert all(p["time_startup_s"] < 0.5 for p in points[1:]), [p["time_startup_s"] for p in points]
    spans = sorted((w[0]["t0"], w[0]["t1"]) for w in windows)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("generator", ["locust", "loadgen"])
def test_a_write_sweep_in_one_generator_process_audits_every_level(lab_dirs, monkeypatch, generator):
    """A write scenario's levels through one generator process (the sweep's session): each
    level's audit is exact, and the levels' acknowledged writes add up to the rows the file
    gained."""
    sc = load.SCENARIOS["rails-writes-noredirect"]
    seen = {}
    real = databases.integrity_check

    def checked(db):  # the file after its last level, beside its template, before both are removed
        seen["gained"] = (databases.count_rows(db, sc.counter)
                          - databases.count_rows(db.parent / "template.db", sc.counter))
        return real(db)
    monkeypatch.setattr(databases, "integrity_check", checked)
    df = sweep(notebook="test", servers=[STACK], profiles=["rails71"],
               scenario="rails-writes-noredirect", levels=[1, 4, 2], duration=1.5, warmup=0.3,
               processes=1, progress=False, calibration=False, generator=generator)
    assert len(df) == 3 and df["audit_ok"].all() and (df["integrity"] == "ok").all()
    assert (df["acked_writes"] > 0).all() and (df["inflight_writes"] == 0).all()
    assert (df["rows_written"] == df["acked_writes"] * sc.rows_per_ack).all()
    assert seen["gained"] == df["acked_writes"].sum() * sc.rows_per_ack
    assert (df["generator"] == generator).all() and df["locust_exit"].isna().all()
    run_dir = lab_dirs / "runs" / df["run_id"].iloc[0]
    pids = {p["pid"] for f in run_dir.rglob("proc-*.json") for p in [json.loads(f.read_text())]}
    assert len(pids) == 1 and len(list(run_dir.rglob("proc-*.json"))) == 3
    assert not processes.descendants(), "a process outlived the sweep"


def test_a_session_whose_locust_dies_raises_with_its_log(tmp_path):
    """A Locust killed in the middle of a session's level: a LoadError with its log's tail at
    once (not after the level's bound), and the session refuses further levels."""
    db = databases.prepare_database(tmp_path / "d.db")
    with servers.start_server(STACK, db, profile="rails71", cpus="0") as srv:
        with load.Session(srv, "hello", tmp_path / "session", cpus="1") as gen:
            gen.level(2, tmp_path / "first", duration=0.5, warmup=0)
            pid = gen.started.popen.pid
            killer = threading.Timer(1.0, os.kill, (pid, signal.SIGKILL))
            killer.start()
            t = time.monotonic()
            with pytest.raises(load.LoadError, match="exited mid-session") as err:
                gen.level(2, tmp_path / "killed", duration=60, warmup=0)
            assert time.monotonic() - t < 10
            assert processes.log_tail(gen.log) in str(err.value)
            with pytest.raises(load.LoadError, match="has ended"):
                gen.level(1, tmp_path / "after", duration=0.5, warmup=0)
        killer.join()
    assert not psutil.pid_exists(pid)


def test_an_interrupted_session_leaves_nothing_running(tmp_path):
    """SIGINT (a notebook cell's interrupt) in the middle of a session's second level: the
    server and the session's Locust are stopped."""
    marker = f"session-{os.getpid()}-{time.time_ns()}"
    root = tmp_path / marker
    root.mkdir()
    script = textwrap.dedent(f"""
        import faulthandler, signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a Jupyter kernel
        from pathlib import Path
        from sqlitelab.infra import databases, servers
        from sqlitelab.load import driver as load
        root = Path({str(root)!r})
        db = databases.prepare_database(root / "i.db")
        with servers.start_server("{STACK}", db, profile="rails71", cpus="0") as srv:
            with load.Session(srv, "hello", root / "session", cpus="1") as gen:
                gen.level(1, root / "u1", duration=0.5, warmup=0)
                gen.level(2, root / "u2", duration=30, warmup=0)
    """)
    err_path = tmp_path / "interrupted-session.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=config.PROJ_ROOT, stderr=err)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not list((root / "u2").glob("window-*.json")):
            time.sleep(0.1)
        assert list((root / "u2").glob("window-*.json")), err_path.read_text(errors="replace")[-3000:]
        assert any("locust" in command_line(p) for p in processes_mentioning(marker))
        time.sleep(0.5)
        interrupt_and_check(proc, marker, err_path, "session")
    finally:
        reap(proc, marker)


def test_write_sweep_audits_and_stores(lab_dirs):
    df = sweep(notebook="test", servers=[STACK], profiles=["rails71"], scenario="rails-writes",
               levels=[1, 4], duration=2, warmup=0.5, progress=False)
    assert len(df) == 2
    assert (df["acked_writes"] > 0).all()
    assert (df["rows_written"] == df["acked_writes"]).all() and df["audit_ok"].all()
    assert (df["integrity"] == "ok").all()
    assert df["keepalive"].all()
    stored = results.load_points(lab_dirs / "results.db")
    assert len(stored) == 2 and set(stored["users"]) == {1, 4}
    run_dir = lab_dirs / "runs" / df["run_id"].iloc[0]
    assert (run_dir / f"server-{STACK}-rails71.log").exists()
    assert list(run_dir.rglob("locust_stats.csv")) and list(run_dir.rglob("proc-*.json"))
    assert not processes.descendants(), "a process outlived the sweep"


def test_a_sweep_of_several_scenarios_shares_one_file_per_server(lab_dirs):
    """Each scenario stored as its own experiment, on one copy of the database per server (the
    server restarted per scenario); per-stack repeats; where the time went, per point and run."""
    from sqlitelab.report import timing
    df = sweep(notebook="test", servers=[STACK], profiles=["rails71"],
               scenario=["hello", "rails-writes-noredirect"], levels=[2], duration=1, warmup=0,
               server_repeats={STACK: 2}, progress=False, calibration=False)
    assert len(df) == 4 and set(df["scenario"]) == {"hello", "rails-writes-noredirect"}
    assert df["audit_ok"].all() and (df["repeat"].max() == 2)
    base = df["run_id"].iloc[0].rpartition("/")[0]
    assert set(df["run_id"]) == {f"{base}/hello", f"{base}/rails-writes-noredirect"}
    writes = df[df["scenario"] == "rails-writes-noredirect"]
    assert (writes["rows_written"] == writes["acked_writes"]).all() and writes["acked_writes"].gt(0).all()
    for name in ("hello", "rails-writes-noredirect"):
        assert (lab_dirs / "runs" / base / name / f"server-{STACK}-rails71.log").exists()
    runs = results.load_table("runs", base, lab_dirs / "results.db")
    assert sorted(runs["experiment"]) == ["hello", "rails-writes-noredirect"]
    timing_rows = [r for v in runs["server_timing"] for r in json.loads(v)]
    assert sum(r["copy_s"] > 0 for r in timing_rows) == 1          # one copy for both scenarios
    assert sum(r["integrity_s"] > 0 for r in timing_rows) == 1     # one check, at the end
    b = timing.phases(base, lab_dirs / "results.db").set_index("phase")
    assert b.loc["window", "seconds"] == pytest.approx(4, abs=0.1)
    assert b.loc["sweeps' wall time", "seconds"] == pytest.approx(runs["wall_seconds"].sum())
    assert abs(b.loc["unaccounted", "seconds"]) < 0.2 * b.loc["sweeps' wall time", "seconds"]


def test_rounds_measure_every_stack_and_level_once_a_round_in_the_stored_shuffled_order(lab_dirs):
    """Two rounds of two stacks and two levels, each server started afresh on a fresh copy each
    round: every point audited, numbered by its round, its cores probed before and after, run
    in the order the stored seed gives."""
    from sqlitelab.experiments import sweep as sweeps
    stacks = [STACK, "go-nethttp"]
    kw = dict(notebook="test", servers=stacks, profiles=["rails71"], scenario="rails-writes-noredirect",
              levels=[1, 2], duration=0.5, warmup=0, rounds=2, order_seed=11, generator="loadgen",
              progress=False, calibration=False)
    df = sweep(**kw)
    assert len(df) == 8 and df["audit_ok"].all() and (df["integrity"] == "ok").all()
    assert sorted(df["round"].unique()) == [1, 2] and sorted(df["repeat"].unique()) == [1, 2]
    assert (df["round"] == df["repeat"]).all()
    assert (df["rows_written"] == df["acked_writes"]).all() and df["acked_writes"].gt(0).all()
    for col in ("probe_server_before_ms", "probe_server_after_ms", "probe_generator_before_ms"):
        assert df[col].gt(0).all(), col
    assert df["core_slowdown"].ge(1).all()
    runs = results.load_table("runs", df["run_id"].iloc[0], lab_dirs / "results.db")
    recorded = json.loads(runs["sweep"].iloc[0])
    assert (recorded["rounds"], recorded["order_seed"]) == (2, 11)
    order = sweeps.spec(**kw).order()  # the servers' starts, in the order they ran
    timing_rows = json.loads(runs["server_timing"].iloc[0])
    assert [(r["round"], r["server"]) for r in timing_rows] == [
        (n, stack) for n, r in enumerate(order, 1) for stack, _, _ in r]
    assert not processes.descendants(), "a process outlived the sweep"


def test_a_held_back_server_runs_in_a_cgroup_that_goes_with_it(lab_dirs):
    if not (processes.CGROUP_V1 / "cpu.cfs_quota_us").exists() and not (processes.CGROUP_V2 / "cgroup.controllers").exists():
        pytest.skip("no cgroup CPU controller here")
    df = sweep(notebook="test", servers=[STACK], profiles=["rails71"], scenario="hello", levels=[2],
               duration=0.5, warmup=0, server_cpu_cap=0.5, generator="loadgen", progress=False,
               calibration=False)
    assert df["server_cpu_cap"].tolist() == [0.5] and df["rps"].gt(0).all()
    left = [p.name for root in (processes.CGROUP_V1, processes.CGROUP_V2) if root.is_dir()
            for p in root.glob(f"sqlitelab-{os.getpid()}-*")]
    assert not left, f"cgroups left behind: {left}"


def test_audit_mismatch_is_loud(lab_dirs, monkeypatch):
    """If acknowledgements and rows disagree, the point says so and a warning is raised."""
    real = databases.count_rows
    calls = {"n": 0}

    def undercount(path, counter):  # pretend one acknowledged row is missing from the file
        c = real(path, counter)
        calls["n"] += 1
        return c - 1 if calls["n"] % 2 == 0 else c
    monkeypatch.setattr(databases, "count_rows", undercount)
    with pytest.warns(UserWarning, match="AUDIT FAILED"):
        df = sweep(notebook="test", servers=[STACK], profiles=["rails71"],
                   scenario="rails-writes-noredirect", levels=[2], duration=1, warmup=0.2,
                   progress=False)
    assert not df["audit_ok"].any()


def test_interrupted_sweep_leaves_nothing_running(lab_dirs):
    """SIGINT (what interrupting a notebook cell sends) in the middle of a level."""
    marker = f"interrupt-{os.getpid()}-{time.time_ns()}"
    script = textwrap.dedent(f"""
        import faulthandler, signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for stacks if it hangs
        # as in a Jupyter kernel: a shell that starts the tests in the background (`make test &`)
        # passes SIGINT on ignored, and Python then keeps ignoring it
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from pathlib import Path
        from sqlitelab.core import config
        config.RESULTS_DB = Path({str(lab_dirs)!r}) / "results.db"
        config.RUNS_DIR = Path({str(lab_dirs)!r}) / "runs"
        config.TMP_DIR = Path({str(lab_dirs)!r}) / "tmp"
        from sqlitelab.experiments.sweep import sweep
        sweep(notebook="test", servers=["{STACK}"], profiles=["rails71"], scenario="hello",
              levels=[2, 2, 2], duration=20, warmup=0.5, progress=False, run_id="{marker}",
              calibration=False)
    """)
    err_path = lab_dirs / "interrupted-sweep.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=config.PROJ_ROOT, stderr=err)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not any("locust" in command_line(p)
                                                  for p in processes_mentioning(marker)):
            time.sleep(0.2)
        assert processes_mentioning(marker), "the sweep never started its generator"
        time.sleep(1)
        interrupt_and_check(proc, marker, err_path, "sweep")
    finally:
        reap(proc, marker)


def test_server_that_will_not_start_shows_its_log(tmp_path):
    db = databases.prepare_database(tmp_path / "bad.db")
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
