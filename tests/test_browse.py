"""`make browse` (sqlitelab.browse): the real Datasette, started by the module on a loopback port,
answers every canned query with the rows the lab's own Python gives for the same results.db;
every table and column is described."""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time

import httpx
import pandas as pd
import psutil
import pytest

from sqlitelab.notebooks import studies
from sqlitelab.experiments import baseline, noise, sweep
from sqlitelab import browse
from sqlitelab.core import config, processes, results, schema
from sqlitelab.load import driver as load
from sqlitelab.notebooks import capacity as capacity_notebook

T = "2026-01-01T0{}:00:00+00:00"
R1 = "20260101T000000Z-01-linear-writes-aaaa"   # older quick run of 01: must not count
R5 = "20260101T010000Z-01-linear-writes-cccc"   # seed run of 01
R2 = "20260101T020000Z-01-linear-writes-bbbb"   # newest quick run of 01
R3 = "20260101T030000Z-03-read-write-mix-dddd"  # two experiments
R4 = "20260101T040000Z-04-sqlite-as-buffer-eeee"
TRY = "try-1"                                    # an ad-hoc sweep, not in capacity_notebook.COLLECTION
CAL = "20260101T000000Z-calibration-locust-ffff"
CAL2 = "20260101T000000Z-calibration-loadgen-9999"   # no drift seen: no onset


def _run(run_id, notebook, hour, scale, points, experiment=None, **extra):
    """A runs row as sweep() writes it: `run_id` is results.sweep_id(notebook run, experiment)."""
    notebook_run = run_id.removesuffix(f"/{experiment}") if experiment else run_id
    return {"run_id": results.sweep_id(notebook_run, experiment), "notebook": notebook,
            "notebook_run": notebook_run, "experiment": experiment, "scale": scale,
            "started": T.format(hour), "finished": T.format(hour).replace(":00:00+", ":09:00+"),
            "parameters": {"scale": scale} if scale else {}, "git_commit": f"{run_id[-4:]}0000",
            "machine": "2 cores (test), 1 GiB", "machine_info": {"cores": 2},
            "versions": {"python": "3.11"}, "server_cpus": "0", "generator_cpus": "1",
            "points": points, **extra}


def _pt(run_id, server, users, rps, p99, repeat=1, errors=0, bound=False, influenced=False,
        headline=True, generator="locust", audit_ok=True, replaced_by=None):
    return {"run_id": run_id, "server": server, "profile": "rails71", "scenario": "rails-writes",
            "users": users, "repeat": repeat, "rps": rps, "p99_ms": p99, "errors": errors,
            "generator": generator, "generator_bound": bound, "generator_influenced": influenced,
            "influence": "generator at 86% of its CPU" if influenced else None,
            "gen_cpu_pct": 95.0 if bound else 50.0, "gen_cpus": 1, "server_cpu_pct": 40.0,
            "server_util": 0.4, "gen_onset_util": 0.67, "headline": headline,
            "replaced_by": replaced_by, "acked_writes": 12, "rows_written": 12 if audit_ok else 10,
            "expected_rows": 12, "audit_rule": "exact", "audit_ok": audit_ok,
            "integrity": "ok", "sqlite_version": "3.46.0",
            "server_versions": json.dumps({"lang": server})}


def make_results_db(path, lock_hash=True):
    """A results.db written by the lab's own functions (results.store_run / store_rows)."""
    fa, ax = "python-fastapi", "rust-axum"
    store = lambda run, pts, table="points": results.store_run(run, pts, path, table)  # noqa: E731
    store(_run(R1, "01-linear-writes", 0, "quick", 1), [_pt(R1, fa, 1, 9999.0, 1.0)])
    store(_run(R5, "01-linear-writes", 1, "seed", 1), [_pt(R5, fa, 16, 700.0, 30.0)])
    r2 = [_pt(R2, fa, 1, 100.0, 5.0), _pt(R2, fa, 1, 110.0, 6.0, repeat=2, headline=None),
          _pt(R2, fa, 2, 200.0, 50.0), _pt(R2, fa, 4, 300.0, 150.0, influenced=True),
          _pt(R2, fa, 8, 250.0, 80.0, errors=3, audit_ok=False),
          _pt(R2, ax, 1, 1000.0, 1.0, bound=True),
          _pt(R2, ax, 2, 900.0, 2.0, influenced=True, headline=False, replaced_by="loadgen"),
          _pt(R2, ax, 2, 1500.0, 2.0, generator="loadgen"),
          _pt(R2, ax, 4, 1400.0, 120.0)]
    extra = {"calibrations": {"locust": CAL, "loadgen": CAL2},
             **({"lock_hash": "sha256:abc"} if lock_hash else {})}
    store(_run(R2, "01-linear-writes", 2, "quick", len(r2), **extra), r2)
    for minute, (exp, rps) in enumerate((("article", 400.0), ("fine", 420.0))):
        run = _run(f"{R3}/{exp}", "03-read-write-mix", 3, "quick", 1, experiment=exp)
        run["started"] = run["started"].replace(":00:00", f":0{minute}:00")
        store(run, [{**_pt(run["run_id"], fa, 8, rps, 20.0), "scenario": "mix"}])
    store(_run(TRY, "try", 5, None, 1), [_pt(TRY, ax, 64, 5000.0, 9.0, bound=True, audit_ok=False)])
    buf = {"method": "article", "variant": "as_published", "rows_per_txn": 10, "total": 1000,
           "records_per_row": 1000, "synchronous": "full", "repeat": 0, "seconds": 0.01,
           "records_per_s": 1e5, "rows": 1.0, "rows_expected": 1.0, "records_in_payloads": 1000.0,
           "journal_mode": "wal", "skipped": None, "audit_ok": True}
    store(_run(R4, "04-sqlite-as-buffer", 4, "quick", 3), [
        {"run_id": R4, **buf}, {"run_id": R4, **buf, "rows_per_txn": 25, "rows": 0.0, "audit_ok": False},
        {"run_id": R4, **buf, "total": 10**9, "audit_ok": None, "skipped": "needs ~600 GiB of memory"}],
        "buffer_points")
    store(_run(f"{R4}/slow-sync", "04-sqlite-as-buffer", 4, "quick", 1, experiment="slow-sync"),
          [{"run_id": f"{R4}/slow-sync", "method": "article", "variant": "as_published",
            "rows_per_txn": 10, "total": 1000, "sync_delay_ms": 40.0, "fsync_calls": 0,
            "seconds": 1.0, "records_per_s": 1000.0, "audit_ok": True}], "buffer_slow_sync")
    results.store_rows("crosschecks", [
        {"run_id": R2, "server": fa, "profile": "rails71", "scenario": "rails-writes", "users": 4,
         "skipped": None, "generator": "wrk", "rps": 320.0, "rows_written": 5, "acked_responses": 9,
         "unknown_outcomes": 2, "audit_rule": "acked ≤ rows ≤ acked + unknown", "audit_ok": False,
         "integrity": "ok"},
        {"run_id": R2, "server": ax, "profile": "rails71", "scenario": "rails-writes", "users": 4,
         "skipped": "wrk cannot follow redirects", "generator": "wrk", "audit_ok": None}], path)
    con = results.open_db(path)
    con["calibrations"].insert({"calib_id": CAL, "generator": "locust", "version": "locust 2.47.0 + abc",
                                "reference": "wrk 4.1.0", "target": "rust-axum", "onset_util": 0.67,
                                "started": T.format(0)}, pk="calib_id")
    con["calibrations"].insert({"calib_id": CAL2, "generator": "loadgen", "version": "loadgen def",
                                "reference": "wrk 4.1.0", "target": "rust-axum", "onset_util": None,
                                "started": T.format(0)})
    con["calibration_points"].insert({"calib_id": CAL, "generator": "locust", "endpoint": "hello",
                                      "users": 64, "rps": 9000.0, "drift": 1})
    con.conn.close()
    results.store_rows("generator_comparison", [{"run_id": "cmp", "order": 1, "server": fa,
                                                 "generator": "wrk", "repeat": 1, "rps": 4000.0}], path)
    return path


@pytest.fixture(scope="module")
def lab_db(tmp_path_factory):
    return make_results_db(tmp_path_factory.mktemp("browse") / "results.db")


@pytest.fixture(scope="module")
def served(lab_db):
    """`python -m sqlitelab.browse` on a free loopback port; stopped by its PID afterwards, and
    its Datasette checked gone (stopped by its PID too if it were not)."""
    port = processes.free_port()
    log = lab_db.with_name("browse.log")  # Datasette's access log: a file, not a pipe that fills
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "sqlitelab.browse", "--port", str(port),
                                 "--db", str(lab_db)], cwd=config.PROJ_ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=err)
    datasette_pid = None
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 20
        line = ""
        while "Datasette (pid" not in line:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"browse did not start:\n{log.read_text()}")
            if sel.select(timeout=0.5):
                line = proc.stdout.readline()
        datasette_pid = int(line.split("(pid ")[1].split(")")[0])
        url = line.split(" at ")[1].strip()
        assert url == f"http://127.0.0.1:{port}/results"
        yield {"url": url, "pid": datasette_pid, "port": port}
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if datasette_pid is not None and psutil.pid_exists(datasette_pid):
            p = psutil.Process(datasette_pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                os.kill(datasette_pid, signal.SIGKILL)
                raise AssertionError("browse left its Datasette running after SIGTERM")


def query(served, name, **params) -> list[dict]:
    r = httpx.get(f"{served['url']}/{name}.json", params={"_shape": "array", **params}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_listens_on_loopback_only(served):
    listening = [c.laddr for c in psutil.Process(served["pid"]).net_connections("inet")
                 if c.status == psutil.CONN_LISTEN]
    assert listening and {a.ip for a in listening} == {"127.0.0.1"}
    assert {a.port for a in listening} == {served["port"]}


def test_metadata_is_served(served):
    meta = httpx.get(served["url"].rsplit("/", 1)[0] + "/-/metadata.json", timeout=10).json()
    assert meta["title"] == browse.TITLE
    db = meta["databases"]["results"]
    assert set(db["queries"]) == set(browse.QUERIES)
    assert db["tables"]["points"]["columns"]["p99_ms"]


def test_newest_runs(served):
    rows = {r["notebook"]: r for r in query(served, "newest_runs")}
    assert set(rows) == {"01-linear-writes", "03-read-write-mix", "04-sqlite-as-buffer", "try"}
    assert rows["01-linear-writes"]["run_id"] == R2
    assert rows["01-linear-writes"]["scale"] == "quick" and rows["01-linear-writes"]["points"] == 9
    assert rows["01-linear-writes"]["git_commit"] == "bbbb0000"
    r3 = rows["03-read-write-mix"]
    assert (r3["run_id"], r3["sweeps"], r3["experiments"]) == (R3, 2, "article, fine")
    assert (r3["started"], r3["finished"]) == ("2026-01-01T03:00:00+00:00", "2026-01-01T03:09:00+00:00")
    r4 = rows["04-sqlite-as-buffer"]  # an experiment named only in its run_id
    assert (r4["points"], r4["experiments"]) == (4, "slow-sync") and rows["try"]["scale"] is None
    seed = query(served, "newest_runs", scale="seed")
    assert [(r["notebook"], r["run_id"]) for r in seed] == [("01-linear-writes", R5)]


CAP_COLUMNS = ("peak_rps", "peak_users", "peak_p99_ms", "peak_errors", "peak_lower_bound",
               "peak_limit", "slo_rps", "slo_users", "slo_p99_ms", "slo_lower_bound", "slo_limit")


def _same_as_python(rows, db, slo, scale=None):
    """The canned query's rows are capacity_notebook.estimate(capacity_notebook.latest_runs(load_points())) rows."""
    py = capacity_notebook.estimate(capacity_notebook.latest_runs(results.load_points(db), studies(), scale=scale), slo)
    key = lambda r: tuple(r[k] for k in capacity_notebook.GROUP)  # noqa: E731
    assert sorted(map(key, rows)) == sorted(map(key, py.to_dict("records")))
    ours = {key(r): r for r in rows}
    for want in py.to_dict("records"):
        got = ours[key(want)]
        for c in CAP_COLUMNS:
            w = want[c]
            if c.endswith("lower_bound"):
                assert bool(got[c]) == bool(w), (key(want), c)
            elif isinstance(w, str):
                assert got[c] == w, (key(want), c)
            elif w is None or w != w:
                assert got[c] is None, (key(want), c)
            else:
                assert got[c] == pytest.approx(w), (key(want), c)


def test_capacity_mirrors_capacity_estimate(served, lab_db):
    rows = query(served, "capacity")
    _same_as_python(rows, lab_db, 100.0)
    by = {(r["notebook"], r["experiment"], r["server"]): r for r in rows}
    assert set(by) == {("01-linear-writes", "", "python-fastapi"), ("01-linear-writes", "", "rust-axum"),
                       ("03-read-write-mix", "article", "python-fastapi"),
                       ("03-read-write-mix", "fine", "python-fastapi")}  # no R1, R5, try-1
    fa = by[("01-linear-writes", "", "python-fastapi")]
    assert (fa["peak_rps"], fa["peak_users"], fa["peak_limit"]) == (300.0, 4, "generator-influenced")
    assert (fa["slo_rps"], fa["slo_users"], fa["slo_limit"], fa["objective_p99_ms"]) == (200.0, 2, "", 100.0)
    ax = by[("01-linear-writes", "", "rust-axum")]  # the replaced Locust point (900/s) is not counted
    assert (ax["peak_rps"], ax["peak_users"], ax["slo_rps"], ax["peak_limit"]) == (1500.0, 2, 1500.0, "")
    assert fa["notebook_run"] == R2


def test_capacity_takes_the_objective_and_scale(served, lab_db):
    rows = query(served, "capacity", slo_p99_ms="200")
    _same_as_python(rows, lab_db, 200.0)
    fa = next(r for r in rows if r["server"] == "python-fastapi" and r["notebook"] == "01-linear-writes")
    assert (fa["slo_rps"], fa["slo_users"], fa["slo_lower_bound"], fa["slo_limit"]) == \
        (300.0, 4, 1, "generator-influenced")
    tight = query(served, "capacity", slo_p99_ms="1")
    _same_as_python(tight, lab_db, 1.0)
    by = {r["server"]: r for r in tight if r["notebook"] == "01-linear-writes"}
    assert (by["rust-axum"]["slo_rps"], by["rust-axum"]["slo_limit"]) == (1000.0, "generator-bound")
    assert (by["python-fastapi"]["slo_rps"], by["python-fastapi"]["slo_users"]) == (0.0, None)
    seed = query(served, "capacity", scale="seed")
    _same_as_python(seed, lab_db, 100.0, scale="seed")
    assert [(r["notebook_run"], r["peak_rps"]) for r in seed] == [(R5, 700.0)]


def test_failed_audits(served):
    rows = query(served, "failed_audits")
    assert sorted((r["source"], r["run_id"]) for r in rows) == sorted([
        ("points", R2), ("points", TRY), ("crosschecks", R2), ("buffer_points", R4)])
    pt = next(r for r in rows if r["source"] == "points" and r["run_id"] == R2)
    assert pt["what"] == "python-fastapi · rails71 · rails-writes · 8 users · repeat 1 · locust"
    assert pt["detail"].startswith("10 rows written, 12 expected") and pt["notebook"] == "01-linear-writes"
    buf = next(r for r in rows if r["source"] == "buffer_points")
    assert "25 rows per transaction" in buf["what"] and buf["detail"].startswith("0 rows of 1 expected")


def test_generator_limited(served):
    rows = query(served, "generator_limited")
    got = sorted((r["run_id"], r["server"], r["users"], r["generator"], r["limit"], r["headline"])
                 for r in rows)
    assert got == sorted([(R2, "python-fastapi", 4, "locust", "generator-influenced", 1),
                          (R2, "rust-axum", 1, "locust", "generator-bound", 1),
                          (R2, "rust-axum", 2, "locust", "generator-influenced", 0),
                          (TRY, "rust-axum", 64, "locust", "generator-bound", 1)])
    assert next(r for r in rows if r["headline"] == 0)["replaced_by"] == "loadgen"
    assert [r["run_id"] for r in query(served, "generator_limited", run_id=TRY)] == [TRY]
    assert query(served, "generator_limited", run_id=R3) == []


def test_provenance(served):
    (r2,) = query(served, "provenance", run_id=R2)
    assert r2["lock_hash"] == "sha256:abc" and r2["git_commit"] == "bbbb0000"
    assert (r2["server_cpus"], r2["generator_cpus"]) == ("0", "1")
    assert json.loads(r2["machine_info"]) == {"cores": 2}
    assert json.loads(r2["calibrations"]) == {"locust": CAL, "loadgen": CAL2}
    details = sorted(r2["calibration_details"].split("; "))
    assert details == [f"loadgen: {CAL2} (loadgen def vs wrk 4.1.0, target rust-axum, drift onset none)",
                       f"locust: {CAL} (locust 2.47.0 + abc vs wrk 4.1.0, target rust-axum, "
                       "drift onset 67% of its CPU)"]
    assert 'python-fastapi {"lang": "python-fastapi"} sqlite 3.46.0' in r2["server_versions"]
    assert [r["run_id"] for r in query(served, "provenance", run_id=R3)] == [f"{R3}/article", f"{R3}/fine"]
    assert [r["run_id"] for r in query(served, "provenance")] == [TRY]  # empty: the newest run


def test_provenance_without_lock_hash(tmp_path):
    """A results.db from before `lock_hash`: the query selects the columns the file has."""
    import sqlite3
    db = make_results_db(tmp_path / "results.db", lock_hash=False)
    con = sqlite3.connect(db)
    for col in ("lock_hash", "lock_ok", "lock_drift"):  # results.store_run records them now
        if col in browse.schema(db)["runs"]:
            con.execute(f"ALTER TABLE runs DROP COLUMN {col}")
    con.commit()
    sql = browse.metadata(db)["databases"]["results"]["queries"]["provenance"]["sql"]
    con.row_factory = sqlite3.Row
    (row,) = con.execute(sql, {"run_id": R2}).fetchall()
    con.close()
    assert "lock_hash" not in row.keys() and row["git_commit"] == "bbbb0000"


def test_queries_read_an_older_results_db(tmp_path):
    """A file from before the newer columns (headline, generator_influenced, generator, …): every
    canned query still runs, capacity still agrees with the Python."""
    import sqlite3
    db = tmp_path / "results.db"
    old = ("run_id", "server", "profile", "scenario", "users", "repeat", "rps", "p99_ms", "errors",
           "generator_bound", "rows_written", "expected_rows", "audit_rule", "audit_ok", "integrity")
    pts = [{k: v for k, v in _pt(R2, "python-fastapi", u, 100.0 * u, 40.0 * u, bound=u == 4).items()
            if k in old} for u in (1, 2, 4)]
    results.store_run({k: v for k, v in _run(R2, "01-linear-writes", 2, "quick", 3).items()
                       if k not in ("server_cpus", "generator_cpus")}, pts, db)
    queries = browse.metadata(db)["databases"]["results"]["queries"]
    assert set(queries) == set(browse.QUERIES)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        out = {name: [dict(r) for r in con.execute(q["sql"], {p: "" for p in q.get("params", [])})]
               for name, q in queries.items()}
    finally:
        con.close()
    _same_as_python(out["capacity"], db, 100.0)
    assert (out["capacity"][0]["slo_rps"], out["capacity"][0]["peak_limit"]) == (200.0, "generator-bound")
    assert [(r["users"], r["limit"], r["generator"]) for r in out["generator_limited"]] == \
        [(4, "generator-bound", "locust")]
    assert out["failed_audits"] == [] and [r["run_id"] for r in out["provenance"]] == [R2]


def _assert_described(db):
    assert browse.undescribed(db) == [], (
        "describe these in sqlitelab/core/schema.py TABLES (Datasette shows the descriptions)")


def every_table_db(path):
    """make_results_db's file plus the tables it leaves out, each written by the lab's own code:
    a point's window second by second as a sweep stores it (load.series's rows, with
    sweep.SECOND_KEYS from the point), and a ceiling as baseline.ceiling measures and stores it."""
    make_results_db(path)
    point = _pt(R2, "python-fastapi", 1, 100.0, 5.0)
    results.store_rows("seconds", [{**row, **{k: point.get(k) for k in sweep.SECOND_KEYS}}
                                   for row in load.series([], None, 0.0, 2.0)], path)
    baseline.ceiling("05-single-machine", "nb-run", 0.05, None, {"scale": "quick"}, path=path)
    runs = pd.DataFrame([{**_pt(R2, "go-nethttp", 16, r, 5.0), "experiment": f"writes-{i}",
                          "machine": "2 cores (test)", "window_s": 2.0, "notebook_run": "nb-run"}
                         for i, r in enumerate((100.0, 110.0), 1)])
    results.store_rows("noise", noise.spread_rows(runs, 0.5), path)  # as noise.measure stores them
    from sqlitelab.report import power  # a power check's rows, as `compare --power` stores them
    results.store_rows("power", power.rows("test", "quick", 0.8, R1, R2, R2, db=path), path)
    from sqlitelab.experiments import power_cut  # a cut's row, as notebook 12 stores it
    file = power_cut.fresh_file(path.parent / "cut.db", "wal")
    found = power_cut.audit(file, {1: 1.0}, cut_at=2.0)
    row = {**power_cut.cut_row("go-nethttp", "pool", "wal-normal", 8, 1, 0.0, 2.0, {1: 1.0}, 2.0, 0, 1, found,
                               True, ""), "round": 0}
    results.store_table("nb-run", "12-power-cut", "cuts", pd.DataFrame([row]), path=path, experiment="cuts")
    return path


def test_every_table_the_lab_writes_and_every_column_is_described(tmp_path):
    """Every table schema.TABLES describes is one the lab writes, and each of its columns is
    described; so is every column of this machine's data/results.db, when there is one."""
    db = every_table_db(tmp_path / "results.db")
    assert set(browse.schema(db)) == set(schema.TABLES)
    _assert_described(db)
    if config.RESULTS_DB.is_file():  # what real runs wrote here, beside what the code writes
        _assert_described(config.RESULTS_DB)


def test_missing_results_db_is_one_clear_line(tmp_path, capsys):
    assert browse.main(["--db", str(tmp_path / "results.db")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not exist: run `make run` first" in err
