"""SQLite or Postgres (issue 15): the lab's real Postgres (sqlitelab.infra.postgres), the knobs that
choose it, sweeps on it (audited, its CPU counted, behind a delayed link), notebook 07's tables."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import psutil
import pytest
from conftest import command_line

from sqlitelab import notebooks
from sqlitelab import batch
from sqlitelab.infra import databases, postgres, servers
from sqlitelab.load import verdicts
from sqlitelab.experiments import sweep
from sqlitelab.notebooks import capacity as capacity_notebook, sqlite_vs_postgres
from sqlitelab.notebooks import sqlite_vs_postgres as workloads


# ---------------------------------------------------------------------------- fast: declarations

@pytest.mark.parametrize("pragmas, durability", [
    (None, "full"), ("", "full"), ("journal_mode=wal,synchronous=normal", "normal"),
    ("synchronous=FULL", "full"), ("synchronous=3", "full"), ("synchronous=off,journal_mode=off", "off"),
    ("synchronous=1", "normal"),
])
def test_durability_follows_the_profiles_synchronous(pragmas, durability):
    assert postgres.durability_for(pragmas) == durability


def test_every_profile_has_a_postgres_durability():
    for name, p in servers.load_profiles().items():
        assert postgres.durability_for(p.get("pragmas")) in postgres.DURABILITY, name


def test_settings_are_declared_once_and_sized_to_the_machine():
    s = postgres.settings("normal", ram_bytes=24 * 2**30)
    assert s["shared_buffers"] == "6144MB" and s["effective_cache_size"] == "12288MB"
    assert s["synchronous_commit"] == "off" and s["fsync"] == "on"
    assert postgres.settings("full", ram_bytes=2**40)["shared_buffers"] == "8192MB"  # capped
    assert postgres.settings("off")["fsync"] == "off"
    with pytest.raises(ValueError, match="durability must be one of"):
        postgres.settings("sometimes")


def test_sqlite_only_knobs_fall_away_on_postgres():
    env = servers.knob_env("rails8", database="postgres", readers=3)
    assert env["LAB_DATABASE"] == "postgres" and env["LAB_READERS"] == "3"
    assert not {"LAB_PRAGMAS", "LAB_TXN_MODE", "LAB_BUSY"} & set(env)
    assert "LAB_DATABASE" not in servers.knob_env("rails8")
    with pytest.raises(ValueError, match="is SQLite's"):
        servers.knob_env("rails8", database="postgres", busy="none")
    with pytest.raises(ValueError, match="database must be one of"):
        servers.knob_env("rails8", database="mysql")


@pytest.mark.parametrize("kwargs, message", [
    ({"database": "mysql"}, "database must be one of"),
    ({"db_link_delay_us": 100}, "database='postgres' only"),
    ({"database": "postgres", "knobs": {"busy": "none"}}, "is SQLite's"),
    ({"database": "postgres", "db_link_delay_us": -5}, "delay"),
])
def test_bad_database_arguments_are_refused_before_anything_starts(kwargs, message, tmp_path):
    before = set(postgres.our_processes())  # the contract tier's session cluster, if it runs
    with pytest.raises(ValueError, match=message):
        sweep.sweep(notebook="scratch", servers=["go-nethttp"], levels=[1], progress=False,
                    results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False, **kwargs)
    assert set(postgres.our_processes()) <= before


def test_workloads_name_their_runs_per_database():
    assert workloads.experiment("002-mix", "sqlite") == "002-mix/sqlite"
    assert workloads.experiment("001-metrics", "postgres", 100) == "001-metrics/postgres-link-100us"
    for e in ("002-mix/sqlite", "004-users/postgres/user-read", "001-metrics/postgres-link-500us"):
        assert workloads.workload_of(e) in workloads.WORKLOADS
    with pytest.raises(ValueError):
        workloads.workload_of("nope/sqlite")
    with pytest.raises(ValueError):
        workloads.check(["000-writes", "999-x"])
    # 06 reads each workload on each database, not the linked runs
    assert "004-users/postgres/user-page" in workloads.experiments()
    assert not [e for e in workloads.experiments() if "link" in e]
    assert workloads.HEADLINE_EXPERIMENTS == workloads.experiments()


def test_capacity_reads_notebooks_after_the_load_notebooks():
    """06 and 11 (each module READS_THE_OTHERS) come after every notebook they read, 07 among them."""
    names = [p.stem for p in batch.notebooks()]
    readers = [n for n in names if notebooks.study(n).READS_THE_OTHERS]
    assert {"06-capacity", "11-compare-runs"} <= set(readers) and "07-sqlite-vs-postgres" not in readers
    assert names[len(names) - len(readers):] == readers


def _point(**kw) -> dict:
    base = {"notebook": "07-sqlite-vs-postgres", "server": "go-nethttp", "profile": "rails71",
            "scenario": "rails-writes", "users": 8, "repeat": 1, "rps": 100.0, "p99_ms": 5.0, "errors": 0,
            "server_cpu_pct": 90.0, "generator_bound": False, "generator_influenced": False,
            "audit_ok": True, "db_link_delay_us": None}
    return {**base, **kw}


def test_versus_ratios_compare_each_ones_best_level():
    pts = pd.DataFrame([
        _point(experiment="000-writes/sqlite", database="sqlite", users=8, rps=900.0, p99_ms=4.0),
        _point(experiment="000-writes/sqlite", database="sqlite", users=32, rps=1200.0, p99_ms=20.0),
        _point(experiment="000-writes/postgres", database="postgres", users=8, rps=700.0, p99_ms=6.0),
        _point(experiment="000-writes/postgres", database="postgres", users=32, rps=600.0, p99_ms=150.0),
        _point(experiment="000-writes/postgres", database="postgres", users=32, repeat=2, rps=400.0,
               p99_ms=30.0),
        _point(experiment="000-writes/postgres-link-100us", database="postgres", db_link_delay_us=100,
               users=8, rps=300.0, p99_ms=9.0, generator_bound=True),
    ])
    table = sqlite_vs_postgres.versus_table(pts, slo_p99_ms=100.0)
    assert set(table["store"]) == {"sqlite", "postgres", "postgres, link 100 µs"}
    pg = table[table["store"] == "postgres"].iloc[0]
    assert pg.best_users == 8 and pg.best_rps == 700.0  # 32 users averaged to 500 over repeats
    assert pg.slo_rps == 700.0  # 32 users' worst repeat p99 150 ms misses the SLO
    assert table[table["store"].str.contains("link")].iloc[0].generator_bound
    r = sqlite_vs_postgres.versus_ratios(table).iloc[0]
    assert r.rps_ratio == pytest.approx(1200 / 700) and r.p99_ratio == pytest.approx(20 / 6)
    assert r.sqlite_slo_rps == 1200.0 and r.audit_ok and not r.generator_bound
    assert sorted(table["levels"]) == [1, 2, 2]  # the link ran one level
    assert "at each one's best level" in sqlite_vs_postgres.versus(sqlite_vs_postgres.versus_ratios(table), table)
    one = pts[pts["users"] == 8]  # one level: no "best" of it
    table = sqlite_vs_postgres.versus_table(one, slo_p99_ms=100.0)
    text = sqlite_vs_postgres.versus(sqlite_vs_postgres.versus_ratios(table), table)
    assert "at the one level measured (8 users)" in text and "best" not in text
    assert "Median SQLite/Postgres throughput ratio over every workload and stack: 1.29× (1 value: too few " in text


# ---------------------------------------------------------------------------- a real Postgres

@pytest.mark.contract
def test_a_postgres_is_started_pinned_seeded_and_stopped_by_pid(tmp_path):
    with postgres.Postgres(tmp_path / "pg", cpus="0") as pg:
        pid = pg.pid
        assert psutil.Process(pid).cpu_affinity() == [0]
        assert psutil.Process(pid).username() == ("postgres" if os.geteuid() == 0 else psutil.Process().username())
        pg.prepare(users=50, items=7, user_bytes=10, payload_bytes=5)
        assert pg.counts() == {"requests": 0, "metrics": 0, "items": 7, "users": 50, "user_updates": 0}
        assert databases.row(pg, "SELECT payload, created_at FROM items WHERE id = ?", (7,)) == \
            ("xxxxx", "2026-01-01T00:00:00.000000Z")
        assert databases.row(pg, "SELECT length(bio) FROM users WHERE uid = 50") == (10,)
        with pg.connect() as con:  # new rows continue after the seeded ids
            assert con.execute("INSERT INTO items (payload, created_at) VALUES ('a', 'b') RETURNING id").fetchone() == (8,)
            assert con.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert pg.integrity_check() == "ok"
        assert databases.integrity_check(pg) == "ok" and databases.page_cache(pg) is None
        pg.prepare(items=2)  # a database already used is made afresh: nothing of the first seeding
        assert pg.counts() == {"requests": 0, "metrics": 0, "items": 2, "users": 0, "user_updates": 0}
    assert not psutil.pid_exists(pid) and pid not in postgres.our_processes()
    assert not pg.socket_dir.exists()
    with postgres.Postgres(tmp_path / "pg2") as second:  # the next cluster: a fresh copy, database lab empty
        with second.connect() as con:
            assert con.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").fetchone() == (0,)


@pytest.mark.contract
def test_a_postgres_that_cannot_start_says_why(tmp_path):
    before = set(postgres.our_processes())
    with postgres.Postgres(tmp_path / "a") as first:
        with pytest.raises(postgres.PostgresError, match="(?s)postgres exited.*port"):
            postgres.Postgres(tmp_path / "b", port=first.port).start(timeout=30)
    assert set(postgres.our_processes()) <= before


# ---------------------------------------------------------------------------- sweeps on Postgres

@pytest.mark.harness
def test_a_sweep_on_postgres_is_audited_and_counts_its_cpu(tmp_path):
    """go-nethttp on a Postgres the sweep starts: audited there, the request count within 1 %
    of the server's own, Postgres' CPU counted with the server's, nothing left running."""
    before = set(postgres.our_processes())
    df = sweep.sweep(notebook="scratch", servers=["go-nethttp"], profiles=["rails71"],
                     scenario="rails-writes-noredirect", levels=[8], duration=3, warmup=1, progress=False,
                     results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                     database="postgres", generator="loadgen")
    p = df.iloc[0]
    assert p.database == "postgres" and p.database_version.startswith(("15", "16", "17"))
    assert p.audit_ok and p.integrity == "ok" and p.rows_written == p.acked_writes > 0
    assert verdicts.counts_agree(p), p
    assert '"synchronous_commit": "off"' in p.postgres_settings  # rails71: synchronous=normal
    knobs = __import__("json").loads(p.knobs)
    assert knobs["database"] == "postgres" and knobs["pragmas"] is None
    # the server alone (go-nethttp's tree) would not be all of it: its Postgres backends work too
    assert p.server_cpu_pct > 0
    assert set(postgres.our_processes()) <= before and not servers.our_processes()


@pytest.mark.harness
def test_postgres_behind_a_delayed_link_pays_a_round_trip_per_statement(tmp_path):
    """POST /metrics is ten statements plus BEGIN/COMMIT: with 500 µs each way between the server
    and Postgres, one user's request takes at least 12 round trips of 1 ms."""
    before = set(postgres.our_processes())
    df = sweep.sweep(notebook="scratch", servers=["go-nethttp"], profiles=["rails8"],
                     scenario="metrics-writes", levels=[1], duration=2, warmup=0.5, progress=False,
                     results_db=tmp_path / "r.db", runs_dir=tmp_path / "runs", calibration=False,
                     database="postgres", db_link_delay_us=500, generator="loadgen")
    p = df.iloc[0]
    assert p.audit_ok and p.db_link_delay_us == 500 and p.db_link_late_mean_us is not None
    assert p.mean_ms >= 12 * 1.0
    assert set(postgres.our_processes()) <= before


@pytest.mark.harness
def test_an_interrupted_postgres_sweep_leaves_nothing_running(tmp_path):
    script = textwrap.dedent(f"""
        import signal
        # a shell that starts the tests in the background (`make test &`) passes SIGINT on
        # ignored, and Python then keeps ignoring it: take it as a notebook kernel does
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from sqlitelab.experiments import sweep
        sweep.sweep(notebook="scratch", servers=["go-nethttp"], profiles=["rails71"],
                    scenario="rails-writes-noredirect", levels=[4], duration=60, progress=False,
                    results_db={str(tmp_path / 'r.db')!r}, runs_dir={str(tmp_path / 'runs')!r},
                    calibration=False, database="postgres", generator="loadgen")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        started = []
        while time.monotonic() < deadline and not started:
            kids = psutil.Process(proc.pid).children(recursive=True)
            lines = [command_line(k) for k in kids]
            # the generator itself (its -spec), not a `go build` of it that comes and goes
            if any("loadgen" in c and "-spec" in c for c in lines):
                started = kids
            time.sleep(0.2)
        assert started, "the level never started"
        pg = [k for k in started if command_line(k).split(" ")[0].endswith("postgres")]
        assert pg, [command_line(k) for k in started]
        time.sleep(1)
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert b"KeyboardInterrupt" in out
    time.sleep(0.5)
    assert not [k.pid for k in started if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
