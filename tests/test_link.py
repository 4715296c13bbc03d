"""The delayed link (sqlitelab.infra.link): its knob, its proxy's real delay, and points through it."""
from __future__ import annotations

import pandas as pd
import psutil
import pytest

from sqlitelab.infra import databases, link, servers
from sqlitelab.load import driver as load
from sqlitelab.experiments import sweep
from sqlitelab.notebooks import network_delay


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True, link.MAX_DELAY_US + 1])
def test_a_link_delay_is_whole_microseconds(bad, tmp_path):
    with pytest.raises(ValueError, match="whole microseconds each way"):
        link.check_delay(bad)
    with pytest.raises(ValueError, match="whole microseconds each way"):
        sweep.sweep(notebook="test-link", servers=["go-nethttp"], levels=[1], progress=False,
                    results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                    link_delay_us=bad)


def test_a_link_is_not_for_a_wrk_crosscheck_or_workers(tmp_path):
    with pytest.raises(ValueError, match="not with generator hosts or a cross-check"):
        sweep.sweep(notebook="test-link", servers=["go-nethttp"], levels=[1], progress=False,
                    results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                    link_delay_us=100, crosscheck=1)


def test_the_paths_of_a_comparison():
    assert link.paths([100, 500]) == [None, 0, 100, 500]
    assert link.paths([100, 500], proxy_alone=False) == [None, 100, 500]
    assert link.paths([0, 500]) == [None, 0, 500]
    assert [link.experiment(d) for d in (None, 0, 500)] == ["direct", "link-0us", "link-500us"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("link")
    db = databases.prepare_database(d / "l.db", items=100)
    with servers.start_server("go-nethttp", db, profile="single-writer", cpus="0") as srv:
        yield srv


@pytest.mark.harness
def test_the_link_adds_its_delay_to_every_round_trip(server, tmp_path):
    direct = link.round_trip(server.url, n=200)
    with link.DelayLink(server.url, 500, "1", tmp_path) as ln:
        delayed = link.round_trip(ln.url, n=200)
        pid = ln.pid
    stats = ln.stats()
    # a request and its response each held 500 µs: at least 1 ms more per round trip
    assert delayed["median_us"] - direct["median_us"] >= 1000
    assert stats["delay_us"] == 500 and stats["connections"] == 1 and stats["chunks"] >= 400
    assert stats["late_mean_us"] >= 0 and stats["late_max_us"] >= stats["late_mean_us"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.harness
@pytest.mark.parametrize("delay", [None, 0, 200])
def test_a_level_through_a_link_records_what_the_link_did(server, tmp_path, delay):
    p = load.run_level(server, "hello", 4, tmp_path / "level", duration=1.0, warmup=0.3,
                       cpus="1", link_delay_us=delay)
    assert p["requests"] > 0 and p["errors"] == 0
    assert p["link_delay_us"] == delay
    if delay is None:
        assert p["link_chunks"] is None and p["link_late_mean_us"] is None
    else:
        # every request and every response crossed it, on the users' kept-alive connections
        assert p["link_connections"] == 4 and p["link_chunks"] >= 2 * p["requests"]
        assert p["link_late_mean_us"] is not None
        if delay:
            assert p["mean_ms"] >= 2 * delay / 1000


def network_points():
    """Closed-loop points built to obey Little's law: service time 1 ms, a cap of 4,000 rps."""
    rows = []
    for delay in (None, 0, 100, 500):
        for users in (1, 8, 64):
            for rep in (1, 2):
                rtt_ms = 0 if delay is None else 2 * (delay + 10) / 1000
                rps = min(users / ((1.0 + rtt_ms) / 1000), 4000.0)
                rows.append({"server": "go-nethttp", "profile": "single-writer", "users": users,
                             "repeat": rep, "rps": rps, "mean_ms": users / rps * 1000,
                             "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0, "gen_cpu_pct": 50.0,
                             "server_cpu_pct": 60.0, "generator": "locust", "audit_ok": True,
                             "link_delay_us": delay, "link_late_mean_us": None if delay is None else 10.0})
    return pd.DataFrame(rows)


def test_the_network_table_puts_each_path_against_littles_law():
    t = network_delay.network_table(network_points())
    assert t["link"].drop_duplicates().tolist() == ["direct", "link 0 µs", "link 100 µs", "link 500 µs"]
    # users = rps × mean latency for every level; the bound holds what the points were built on
    assert t["little_rps"].to_numpy() == pytest.approx(t["rps"].to_numpy())
    assert t["of_bound"].to_numpy() == pytest.approx(1.0)
    r = t[(t.link == "link 500 µs") & (t.users == 1)].iloc[0]
    assert r["added_rtt_ms"] == pytest.approx(1.02) and r["service_ms"] == pytest.approx(1.0)
    text = network_delay.network(t)
    assert "Go · net/http, 1 users" in text and "proxy, 500 µs each way: 495 req/s (50% of direct)" in text
    assert "within 0.0%" in text


def test_link_columns_stay_numbers_when_a_run_begins_with_the_direct_path(tmp_path):
    from sqlitelab.core import results
    db = tmp_path / "r.db"
    direct = {"run_id": "r/direct", "link_delay_us": None, "link_late_mean_us": None}
    linked = {"run_id": "r/link", "link_delay_us": 500, "link_late_mean_us": 9.5}
    results.store_rows("points", [direct], db)
    results.store_rows("points", [linked], db)
    import sqlite3
    con = sqlite3.connect(db)
    got = con.execute("SELECT typeof(link_delay_us), typeof(link_late_mean_us) FROM points "
                      "WHERE run_id = 'r/link'").fetchone()
    assert got == ("integer", "real")
