"""results.db rows describe themselves: every row keyed by run_id says its notebook, notebook
run, experiment, scale, machine and commit in its own columns, readers select by those columns
and never split a run id, and a file from before is migrated once."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from sqlitelab.notebooks import studies
from sqlitelab.experiments import baseline
from sqlitelab import browse
from sqlitelab.report import timing
from sqlitelab.core import machine, results, schema
from sqlitelab.notebooks import capacity as capacity_notebook


def _store(db, notebook_run, experiment, rps, minute, scale="quick", notebook="03-read-write-mix"):
    run = {"run_id": results.sweep_id(notebook_run, experiment),
           **results.describe(notebook, notebook_run, experiment, {"scale": scale}),
           "started": f"2026-01-01T00:{minute:02d}:00+00:00", "parameters": {"scale": scale}}
    pts = [{"run_id": run["run_id"], "server": "s", "profile": "p", "scenario": "mix", "users": u,
            "rps": rps * u, "p99_ms": 5.0 * u, "errors": 0, "generator_bound": False}
           for u in (1, 2)]
    results.store_run(run, pts, db)
    return run["run_id"]


def test_points_say_what_they_belong_to_and_readers_select_by_those_columns(tmp_path):
    db = tmp_path / "results.db"
    nb_run = results.new_run_id("03-read-write-mix")
    # an experiment name holding a slash (a list of scenarios inside an experiment): nothing
    # may take it apart again
    a = _store(db, nb_run, "article", 100.0, 0)
    b = _store(db, nb_run, "paths/mix", 200.0, 1)
    seed_run = results.new_run_id("03-read-write-mix")
    _store(db, seed_run, None, 300.0, 2, scale="seed")
    every = results.load_points(db)
    for col in set(schema.DESCRIBED) - {"experiment"}:
        assert every[col].notna().all(), col
    mine = results.load_points(db, run_id=nb_run)
    assert sorted(mine["experiment"].unique()) == ["article", "paths/mix"]
    assert set(mine["notebook_run"]) == {nb_run} and set(mine["scale"]) == {"quick"}
    assert (mine["machine"] == machine.machine_label()).all()
    assert (mine["git_commit"] == results.git_commit()).all()
    assert set(results.load_points(db, run_id=b)["experiment"]) == {"paths/mix"}  # one sweep
    assert set(results.load_table("runs", nb_run, db)["run_id"]) == {a, b}
    latest = capacity_notebook.latest_runs(every, studies(), scale="quick", notebooks=["03-read-write-mix"])
    assert set(latest["run_id"]) == {a, b}
    assert dict(timing.newest_runs(db)) == {"03-read-write-mix": seed_run}  # it started last


def test_a_run_without_its_notebook_run_is_refused(tmp_path):
    with pytest.raises(ValueError, match="notebook_run"):
        results.store_run({"run_id": "x", "notebook": "n"}, [{"run_id": "x", "rps": 1.0}],
                          tmp_path / "results.db")
    assert not (tmp_path / "results.db").exists()


def _old_file(db):
    """A results.db as the lab wrote it before rows described themselves: the experiment only
    inside run ids, the scale only inside the run's parameters."""
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, notebook TEXT, experiment TEXT, started TEXT,
                           finished TEXT, parameters TEXT, machine TEXT, git_commit TEXT, points INT);
        CREATE TABLE points (run_id TEXT, server TEXT, profile TEXT, scenario TEXT, users INT,
                             rps REAL, p99_ms REAL, errors INT, generator_bound INT, machine TEXT);
        CREATE TABLE crosschecks (run_id TEXT, server TEXT, users INT, rps REAL);
    """)
    params = json.dumps({"scale": "quick"})
    for rid, exp, started in (("old-run/article", "article", "2026-01-01T00:00:00+00:00"),
                              ("old-run/fine", "fine", "2026-01-01T00:05:00+00:00"),
                              ("old-run/slow-sync", None, "2026-01-01T00:06:00+00:00"),
                              ("other-run", None, "2025-12-01T00:00:00+00:00")):
        con.execute("INSERT INTO runs VALUES (?, '03-read-write-mix', ?, ?, ?, ?, 'old box', 'c0ffee', 2)",
                    (rid, exp, started, started, params))
        for u in (1, 2):
            con.execute("INSERT INTO points VALUES (?, 's', 'p', 'mix', ?, ?, 5.0, 0, 0, NULL)",
                        (rid, u, 100.0 * u))
    con.execute("INSERT INTO crosschecks VALUES ('old-run/article', 's', 2, 210.0)")
    con.commit()
    con.close()


def test_a_file_from_before_is_migrated_once(tmp_path):
    db = tmp_path / "results.db"
    _old_file(db)
    pts = results.load_points(db, run_id="old-run")
    assert len(pts) == 6 and set(pts["notebook_run"]) == {"old-run"}
    assert set(pts["scale"]) == {"quick"} and set(pts["machine"]) == {"old box"}
    assert set(pts["git_commit"]) == {"c0ffee"} and set(pts["notebook"]) == {"03-read-write-mix"}
    assert set(pts["experiment"]) == {"article", "fine", "slow-sync"}  # stored tables had none
    checks = results.load_table("crosschecks", "old-run", db)
    assert list(checks["notebook_run"]) == ["old-run"] and list(checks["experiment"]) == ["article"]
    assert dict(timing.newest_runs(db)) == {"03-read-write-mix": "old-run"}
    before = sqlite3.connect(db).execute("SELECT count(*) FROM points").fetchone()
    results.migrate(db)  # again: nothing to do, nothing changes
    assert sqlite3.connect(db).execute("SELECT count(*) FROM points").fetchone() == before
    assert browse.undescribed(db) == []
    # a new sweep's rows land beside the migrated ones
    _store(db, "new-run", "article", 50.0, 9)
    assert set(results.load_points(db)["notebook_run"]) == {"old-run", "other-run", "new-run"}


def test_the_ceiling_is_measured_and_stored_with_its_run(tmp_path):
    db = tmp_path / "results.db"
    raw = baseline.ceiling("05-single-machine", "nb-run", 0.2, None, {"scale": "quick"}, path=db)
    assert raw["commits_per_s"] > 0 and raw["reads_per_s"] > 0 and raw["seconds"] == 0.2
    assert raw["full_commits_per_s"] > 0 and raw["fsync_per_s"] > 0 and raw["fdatasync_per_s"] > 0
    row = results.load_table("ceilings", "nb-run", db).iloc[0]
    for k in ("commits_per_s", "reads_per_s", "full_commits_per_s", "fsync_per_s", "fdatasync_per_s"):
        assert row[k] == raw[k], k
    assert (row["notebook"], row["experiment"], row["scale"]) == ("05-single-machine", "ceiling", "quick")
    assert row["run_id"] == results.sweep_id("nb-run", "ceiling")
    assert browse.undescribed(db) == []
    for bad in (0, -1, "2", True, None):
        with pytest.raises(ValueError, match="ceiling seconds"):
            baseline.ceiling("05-single-machine", "nb-run", bad, None, path=db)
    assert len(results.load_table("ceilings", path=db)) == 1
    assert isinstance(pd.read_csv(tmp_path / "runs" / "nb-run" / "ceiling" / "ceilings.csv"), pd.DataFrame)


def test_a_commit_is_dirty_for_code_not_for_the_labs_own_outputs(tmp_path, monkeypatch):
    """A run that rewrote the committed figures ran unchanged code: its commit is not "-dirty"."""
    import subprocess
    repo = tmp_path / "repo"
    for d in ("figures", "sqlitelab"):
        (repo / d).mkdir(parents=True)
    (repo / "figures" / "a.svg").write_text("1")
    (repo / "sqlitelab" / "x.py").write_text("1")
    git = lambda *a: subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *a], cwd=repo,
                                    check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "x")
    monkeypatch.setattr(results.config, "PROJ_ROOT", repo)
    clean = results.git_commit()
    assert len(clean) == 40 and not clean.endswith("-dirty")
    (repo / "figures" / "a.svg").write_text("2")
    assert results.git_commit() == clean
    (repo / "sqlitelab" / "x.py").write_text("2")
    assert results.git_commit() == clean + "-dirty"


def _store_many(args):
    db, worker = args
    nb_run = f"03-read-write-mix-race-{worker}"
    return [_store(db, nb_run, f"e{i}", 100.0 + i, i) for i in range(8)]


def test_processes_storing_into_a_fresh_file_at_once_all_land(tmp_path):
    """Two notebooks storing at the same moment into a results.db that does not exist yet (CI's
    notebook tier on two workers): creating the tables raced inside SQLite's locks and one of
    them failed at once with "database is locked". Every run and point must land."""
    import multiprocessing
    db = tmp_path / "results.db"
    with multiprocessing.get_context("fork").Pool(6) as pool:
        stored = [r for rs in pool.map(_store_many, [(db, w) for w in range(6)]) for r in rs]
    con = sqlite3.connect(db)
    try:
        runs = {r[0] for r in con.execute("SELECT run_id FROM runs")}
        points = con.execute("SELECT count(*) FROM points").fetchone()[0]
    finally:
        con.close()
    assert runs == set(stored) and len(stored) == 48
    assert points == 2 * len(stored)
