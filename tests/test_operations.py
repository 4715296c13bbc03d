"""The operations notebook 08 runs under load (sqlitelab.operations), each against a real WAL
database while a writer commits to it, in a process of its own: what each leaves behind is
checked (copies whole and holding what was committed before they started, the index there,
the WAL truncated, Litestream's replica restorable), bad input refused, nothing left running."""
from __future__ import annotations

import sqlite3
import threading
import time

import psutil
import pytest

from sqlitelab import databases, operations


class Writer(threading.Thread):
    """Commits one items row at a time (autocommit, busy timeout 5 s) until stopped."""

    def __init__(self, db):
        super().__init__(daemon=True)
        self.db, self.stopping, self.committed = db, threading.Event(), 0

    def run(self):
        con = sqlite3.connect(self.db, timeout=5, isolation_level=None)
        while not self.stopping.is_set():
            con.execute("INSERT INTO items (payload, created_at) VALUES (?, datetime('now'))", ("x" * 200,))
            self.committed += 1
            time.sleep(0.001)
        con.close()

    def stop(self):
        self.stopping.set()
        self.join(10)


@pytest.fixture
def live(tmp_path):
    db = databases.prepare_database(tmp_path / "live.db", users=50_000, items=100)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    w = Writer(db)
    w.start()
    time.sleep(0.2)
    yield db, w
    w.stop()


def _items(path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT count(*) FROM items").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("name", ["backup", "vacuum-into"])
def test_a_copy_under_writes_is_whole_and_holds_what_was_committed_before(live, tmp_path, name):
    db, w = live
    before = _items(db)
    with operations.start(name, db, tmp_path / "scratch") as op:
        r = op.wait(120)
    assert r["operation"] == name and r["finished"] >= r["started"] and r["seconds"] >= 0
    assert r["integrity"] == "ok" and r["bytes"] > 0
    assert _items(r["dest"]) >= before
    assert not psutil.pid_exists(op.pid) or psutil.Process(op.pid).status() == psutil.STATUS_ZOMBIE


def test_create_index_builds_it_on_the_users_table_while_writes_go_on(live, tmp_path):
    db, w = live
    r = operations.start("create-index", db, tmp_path / "scratch").wait(120)
    assert r["rows"] == 50_000 and r["index"] == "users_departname_lab"
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM sqlite_master WHERE type='index' AND name=?",
                       (r["index"],)).fetchone()[0] == 1
    con.close()
    with pytest.raises(operations.OperationError, match="already exists"):  # its error, its stderr
        operations.start("create-index", db, tmp_path / "again").wait(60)


def test_checkpoint_truncates_the_wal_when_nothing_holds_it(live, tmp_path):
    db, w = live
    r = operations.start("checkpoint", db, tmp_path / "s1").wait(60)  # with the writer going
    assert r["busy"] in (0, 1) and r["wal_before"] > 0
    w.stop()
    r = operations.start("checkpoint", db, tmp_path / "s2").wait(60)
    assert r["busy"] == 0 and r["wal_after"] == 0 and r["log_frames"] == r["checkpointed_frames"]


@pytest.mark.skipif(not operations.LITESTREAM.exists(), reason="litestream not built (make setup)")
def test_litestream_replicates_under_writes_and_its_replica_restores(live, tmp_path):
    db, w = live
    before = _items(db)
    r = operations.start("litestream", db, tmp_path / "scratch", seconds=2.0).wait(120)
    assert r["restored_integrity"] == "ok" and r["replica_bytes"] > 0
    assert r["restored_counts"]["items"] >= before and r["restored_counts"]["users"] == 50_000


@pytest.mark.skipif(not operations.LITESTREAM.exists(), reason="litestream not built (make setup)")
def test_a_stopped_operation_leaves_nothing_running(live, tmp_path):
    db, w = live
    op = operations.start("litestream", db, tmp_path / "scratch", seconds=60.0)
    deadline = time.monotonic() + 10
    tree = []
    while time.monotonic() < deadline and not any("litestream" in p.name() for p in tree):
        time.sleep(0.1)
        tree = psutil.Process(op.pid).children(recursive=True)
    assert any("litestream" in p.name() for p in tree)
    op.stop()
    time.sleep(0.2)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)


def test_bad_input_is_refused_with_a_clear_error(tmp_path, live):
    db, _ = live
    with pytest.raises(ValueError, match="unknown operation 'defrag'"):
        operations.start("defrag", db, tmp_path)
    with pytest.raises(FileNotFoundError, match="no database"):
        operations.start("backup", tmp_path / "missing.db", tmp_path)
    with pytest.raises(ValueError, match="no parameter 'pages'"):
        operations.start("backup", db, tmp_path, pages=5)
    with pytest.raises(ValueError, match="lower-case SQL name"):
        operations.start("create-index", db, tmp_path, table="users; DROP TABLE items")
    with pytest.raises(ValueError, match="positive number"):
        operations.start("litestream", db, tmp_path, seconds=-1)
    for bad in ({}, {"name": "backup", "at_s": -1}, {"name": "backup", "at_s": "soon"}, "backup"):
        with pytest.raises(ValueError):
            operations.check(bad)
    assert operations.check({"name": "checkpoint", "at_s": 3})["at_s"] == 3.0
    with pytest.raises(operations.OperationError, match="no such table"):
        operations.start("create-index", db, tmp_path / "s", table="nosuch").wait(60)


def test_during_waits_for_its_second_and_reports_when_it_started(live, tmp_path):
    db, _ = live
    run = operations.during({"name": "checkpoint", "at_s": 0.3}, db, None, tmp_path / "d")
    t0 = time.time()
    r = run(t0, t0 + 5, {})
    assert r["operation"] == "checkpoint" and 0.3 <= r["started_s"] < 2.0
    assert run(time.time() + 60, 0, {"stop": True}) is None  # the level ended first: nothing ran
