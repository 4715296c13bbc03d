"""The operations notebook 08 runs under load (sqlitelab.infra.operations), each against a real WAL
database while a writer commits to it, in a process of its own: what each leaves behind is
checked (copies whole and holding what was committed before they started, the index there,
the WAL truncated, Litestream's replica restorable), each copy recorded and then removed unless
kept (one that fails its check is kept), bad input refused, nothing left running."""
from __future__ import annotations

import sqlite3
import threading
import time

import psutil
import pytest

from sqlitelab.infra import databases, operations


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


COPIES = {"backup": ["backup.db"], "vacuum-into": ["vacuum-into.db"],  # the last: a database
          "litestream": ["litestream-replica", "litestream-restored.db"]}


@pytest.mark.parametrize("keep", [False, True], ids=["removed", "kept"])
@pytest.mark.parametrize("name", list(COPIES))
def test_a_copy_under_writes_is_whole_recorded_and_removed_unless_kept(live, tmp_path, name, keep):
    if name == "litestream" and not operations.LITESTREAM.exists():
        pytest.skip("litestream not built (make setup)")
    db, w = live
    before = _items(db)
    scratch = tmp_path / "scratch"
    params = ({"seconds": 2.0} if name == "litestream" else {}) | ({"keep_copies": True} if keep else {})
    with operations.start(name, db, scratch, **params) as op:
        r = op.wait(120)
    assert r["operation"] == name and r["finished"] >= r["started"] and r["seconds"] >= 0
    assert sorted(r["copies"]) == sorted(COPIES[name])
    for file, copy in r["copies"].items():
        assert copy["verified"] and copy["bytes"] > 0 and copy["kept"] is keep
        assert copy["path"] == str(scratch / file) and (scratch / file).exists() is keep
    made = r["copies"][COPIES[name][-1]]
    assert made["integrity"] == "ok"
    if name == "litestream":  # the replica restored: its rows recorded
        assert made["rows"]["items"] >= before and made["rows"]["users"] == 50_000
    if keep:
        assert _items(made["path"]) >= before
    else:  # the operation's own result and log stay, and nothing else
        assert {f.name for f in scratch.iterdir()} <= {f"{name}.json", f"{name}.log", "litestream.log"}
        assert {f"{name}.json", f"{name}.log"} <= {f.name for f in scratch.iterdir()}
    assert not psutil.pid_exists(op.pid) or psutil.Process(op.pid).status() == psutil.STATUS_ZOMBIE


def test_a_copy_that_fails_its_check_is_recorded_and_kept(live, tmp_path, monkeypatch):
    db, w = live
    verify = operations._verify

    def truncated(path, **kw):  # the copy damaged between its making and its check
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
        return verify(path, **kw)
    monkeypatch.setattr(operations, "_verify", truncated)
    r = operations.run_here("vacuum-into", db, tmp_path / "s")  # keep_copies left False
    copy = r["copies"]["vacuum-into.db"]
    assert copy["integrity"] != "ok" and not copy["verified"] and copy["kept"]
    assert (tmp_path / "s" / "vacuum-into.db").exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    assert verify(garbage)["integrity"].startswith("unreadable: ")
    missing = verify(tmp_path / "missing.db")
    assert missing["integrity"] == "missing" and not missing["verified"] and missing["bytes"] == 0
    assert not (tmp_path / "missing.db").exists()


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
    with pytest.raises(ValueError, match="keep_copies must be True or False"):
        operations.start("backup", db, tmp_path, keep_copies="yes")
    with pytest.raises(ValueError, match="no parameter 'keep_copies'"):  # it makes no copy
        operations.check({"name": "checkpoint", "keep_copies": True})
    with pytest.raises(SystemExit):
        operations.main(["backup", str(db), str(tmp_path), "--keep-copies=maybe"])
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


def test_every_operation_has_its_plain_words_in_the_vocabulary():
    """An operation's plain words live in sqlitelab.core.vocabulary (a figure names it without
    importing this module); operations declares the ids, so the two are held to the same ids here."""
    from sqlitelab.core import vocabulary
    assert set(vocabulary.OPERATION_TITLES) == set(operations.OPERATIONS) == set(operations.PARAMS)
    assert vocabulary.OPERATION_TITLES["backup"] == "online backup"
