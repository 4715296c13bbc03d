"""sqlitelab.experiments.buffer_point and buffer on tiny totals: the article method as the author wrote it,
the tuned method, projections, argument checks, and timeouts that leave no process behind."""
from __future__ import annotations

import json
import math
import os
import sqlite3

import pandas as pd
import pytest

from sqlitelab.experiments import buffer, buffer_point
from sqlitelab.core import processes
from sqlitelab.notebooks import sqlite_as_buffer


def _rows(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT id, payload, metadata, created_at, status FROM queue ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("total,rpt", [(1, 10), (999, 25), (1000, 25), (2500, 2), (12_345, 10)])
def test_article_rows_payloads_metadata(tmp_path, total, rpt):
    path = str(tmp_path / "q.db")
    out = buffer_point.article_point(path, total, rpt)
    rows = _rows(path)
    assert len(rows) == math.ceil(total / 1000) == out["rows"] == out["rows_expected"]
    n = 0
    for i, (id_, payload, meta, created_at, status) in enumerate(rows):
        recs = json.loads(payload)               # one json.dumps per chunk: a list of dicts
        assert isinstance(recs, list) and all(set(r) == {"uri", "text"} for r in recs)
        assert all(r["uri"].startswith("at://") and "/post/" in r["uri"] and len(r["uri"]) == 36 for r in recs)
        assert all(r["text"].startswith("Test post content ") and len(r["text"]) == 68 for r in recs)
        assert json.loads(meta) == {"batch_size": 1000, "actual_batch_size": len(recs)}
        assert status == "pending" and len(created_at) == len("2025-01-31-05:00:00")
        assert len(recs) == (1000 if i < len(rows) - 1 else total - 1000 * (len(rows) - 1))
        n += len(recs)
    assert n == total == out["records_in_payloads"]
    assert out["audit_ok"] and out["journal_mode"] == "wal"
    assert out["groups"] == out["connections"] == math.ceil(len(rows) / rpt)
    assert out["synchronous"] == "full" and out["synchronous_level"] == 2   # SQLite's default
    assert out["page_size"] == 4096                  # page_size=8192 after WAL is ignored
    # every group's close found itself the last connection: checkpointed, WAL deleted
    assert out["close_checkpoints"] == out["groups"]
    assert out["db_mib"] == pytest.approx(os.path.getsize(path) / 2**20)
    assert out["seconds"] > 0 and out["records_per_s"] == pytest.approx(total / out["seconds"])
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"   # WAL in the file
    cols = {r[1]: (r[2], r[4]) for r in con.execute("PRAGMA table_info(queue)")}
    con.close()
    assert cols["created_at"] == ("TIMESTAMP", "CURRENT_TIMESTAMP") and cols["status"] == ("TEXT", "'pending'")


def test_article_one_dump_per_chunk(tmp_path, monkeypatch):
    calls = []
    real = buffer_point.json.dumps

    def counting(obj, *a, **k):
        calls.append(type(obj).__name__)
        return real(obj, *a, **k)
    monkeypatch.setattr(buffer_point.json, "dumps", counting)
    records = buffer_point.author_records(2500)
    path = str(tmp_path / "q.db")
    buffer_point._init_queue_db(path, "as_published")
    buffer_point.batch_add_items_to_queue(path, records, batch_write_size=25)
    # per chunk: the payload (a list of 1,000 dicts) and the metadata dict, nothing per record
    assert calls == ["list", "dict"] * 3


@pytest.mark.parametrize("variant", sorted(buffer_point.VARIANTS))
def test_article_variants(tmp_path, variant):
    path = str(tmp_path / "q.db")
    out = buffer_point.article_point(path, 5000, 2, variant=variant)
    assert out["audit_ok"] and out["rows"] == 5
    assert out["synchronous_level"] == (1 if variant == "sync_normal" else 2)
    assert out["page_size"] == (8192 if variant == "page_size_8192" else 4096)
    assert out["connections"] == (1 if variant == "one_connection" else 3)
    if variant in ("as_published", "sync_normal", "page_size_8192", "no_logging"):
        assert out["close_checkpoints"] == 3
    if variant == "no_ckpt_on_close":
        assert out["close_checkpoints"] == 0 and out["wal_mib"] > 0
    if variant == "one_connection":
        assert out["close_checkpoints"] == 1


@pytest.mark.parametrize("sync", ["normal", "full"])
def test_tuned(tmp_path, sync):
    path = str(tmp_path / "q.db")
    out = buffer_point.tuned_point(path, 12_345, 5, synchronous=sync)
    assert out["synchronous"] == sync and out["synchronous_level"] == buffer_point.SYNCHRONOUS[sync]
    assert out["audit_ok"] and out["rows"] == 13 and out["records_in_payloads"] == 12_345
    assert out["groups"] == 3 and out["connections"] == 1
    rows = _rows(path)
    assert sum(len(json.loads(r[1])) for r in rows) == 12_345
    assert all(set(d) == {"uri", "text"} and len(d["uri"]) == 36 and len(d["text"]) == 68
               for r in rows for d in json.loads(r[1]))
    c = buffer_point.consume_point(path, 5)
    assert c["consumed"] == 12_345 and c["rows_left"] == 0


def test_fast_records_same_shape():
    a, b = buffer_point.fast_records(3000), buffer_point.author_records(3)
    assert len(a) == 3000
    for r in a + b:
        assert set(r) == {"uri", "text"} and len(r["uri"]) == 36 and len(r["text"]) == 68
        body = r["uri"][5:15] + r["uri"][21:] + r["text"][18:]
        assert set(body) <= set(buffer_point.ALNUM)
    assert len({c for r in a for c in r["text"][18:]}) == 62   # the whole alphabet shows up


def test_run_point_in_own_process(tmp_path):
    out = buffer_point.run_point(tmp_path / "a.db", 3000, 2, method="article", synchronous=None, timeout=60)
    assert out["audit_ok"] and out["synchronous"] == "full"
    out = buffer_point.run_point(tmp_path / "t.db", 3000, 2, method="tuned", synchronous="full", timeout=60)
    assert out["audit_ok"] and out["synchronous"] == "full" and out["consumed"] == 3000


def test_sweep_is_tidy(tmp_path):
    df = buffer.sweep_buffer(tmp_path, [1000, 3000], [2], ["normal", "full"], max_seconds=60,
                             variants=["sync_normal"], variant_totals=[3000], progress=False)
    assert list(df["total"]) == [1000, 1000, 1000, 3000, 3000, 3000, 3000]       # smallest first
    got = set(zip(df["method"], df["variant"], df["synchronous"], df["total"]))
    assert ("article", "as_published", "full", 1000) in got
    assert ("article", "sync_normal", "normal", 3000) in got
    assert ("tuned", "lab", "normal", 3000) in got and ("tuned", "lab", "full", 3000) in got
    assert df["audit_ok"].all() and df["skipped"].isna().all()
    tab = sqlite_as_buffer.article_tables(df)
    assert list(tab["rows_per_txn"].drop_duplicates()) == [25, 100, 10, 2]   # the article's order
    assert {"published_records_per_s", "records_per_s", "published_mib", "db_mib"} <= set(tab)


def test_projection_skips_oversized_point(tmp_path, monkeypatch):
    huge = 10**12
    p = buffer.project_point("article", huge, 25, work_dir=tmp_path)
    assert p["skipped"] and "memory" in p["skipped"]
    # the projection says whether it used the measured bytes per record or the safety floor above them
    floor = buffer.project_point("article", huge, 25, work_dir=tmp_path, bytes_per_record=564.0)["skipped"]
    assert "projected at 660 B per record, the safety floor: above the 564 B measured" in floor
    measured = buffer.project_point("article", huge, 25, work_dir=tmp_path, bytes_per_record=700.0)["skipped"]
    assert "projected at 700 B per record, as measured" in measured
    p = buffer.project_point("tuned", huge, 25, work_dir=tmp_path)
    assert p["skipped"] and "disk" in p["skipped"]
    assert buffer.project_point("article", 1000, 25, work_dir=tmp_path)["skipped"] is None

    def never(*a, **k):
        raise AssertionError("an over-large point was run")
    monkeypatch.setattr(buffer, "run_point", never)
    df = buffer.sweep_buffer(tmp_path, [huge], [25], ["normal"], progress=False)
    assert len(df) == 2 and df["skipped"].str.contains("GiB").all()
    assert df["projected_peak_gib"].iloc[0] > 1000


@pytest.mark.parametrize("kwargs,match", [
    ({"method": "nope"}, "method must be one of"),
    ({"method": "article", "variant": "nope"}, "variant must be one of"),
    ({"method": "article", "synchronous": "normal"}, "takes no synchronous"),
    ({"method": "tuned", "synchronous": "sometimes"}, "synchronous must be one of"),
    ({"method": "tuned", "synchronous": None}, "synchronous must be one of"),
    ({"method": "tuned", "synchronous": "full", "variant": "one_connection"}, "has no variants"),
    ({"method": "article", "total": 0}, "total must be a positive integer"),
    ({"method": "article", "total": -5}, "total must be a positive integer"),
    ({"method": "article", "total": 1.5}, "total must be a positive integer"),
    ({"method": "article", "rows_per_txn": 0}, "rows_per_txn must be a positive integer"),
])
def test_bad_arguments(kwargs, match):
    args = {"method": "article", "total": 1000, "rows_per_txn": 25, "variant": None, "synchronous": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        buffer_point.check_point(**args)
    with pytest.raises(ValueError, match=match):    # before any process starts
        buffer_point.run_point("unused.db", args["total"], args["rows_per_txn"], args["method"], args["variant"],
                         args["synchronous"], timeout=5)


def test_bad_sweep_arguments(tmp_path):
    with pytest.raises(ValueError, match="variant must be one of"):
        buffer.sweep_buffer(tmp_path, [1000], [2], variants=["fast"], progress=False)
    with pytest.raises(ValueError, match="method must be one of"):
        buffer.sweep_buffer(tmp_path, [1000], [2], methods=["article", "kafka"], progress=False)
    with pytest.raises(ValueError, match="total must be a positive integer"):
        buffer.sweep_buffer(tmp_path, [0], [2], progress=False)
    with pytest.raises(ValueError, match="synchronous must be one of"):
        buffer.sweep_buffer(tmp_path, [1000], [2], ["fast"], progress=False)


def test_timeout_stops_the_point(tmp_path):
    with pytest.raises(buffer_point.PointTimeout) as e:
        buffer_point.run_point(tmp_path / "slow.db", 50_000_000, 25, method="tuned", synchronous="normal",
                         consume=False, timeout=2)
    pid = e.value.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                          # stopped and reaped: no process left behind
    assert not processes.descendants()   # nor multiprocessing's resource tracker


def test_a_point_leaves_no_process(tmp_path):
    out = buffer_point.run_point(tmp_path / "one.db", 2000, 1, method="article", probe=False)
    assert out["audit_ok"]
    assert not processes.descendants()


@pytest.mark.skipif(not buffer.shutil.which("strace"), reason="strace is not installed")
def test_syscall_counts(tmp_path):
    out = buffer.syscall_counts(tmp_path, 3000, 1)             # 3 groups, 3 connections
    assert out["audit_ok"] and out["close_checkpoints"] == 3
    assert out["fdatasync_calls"] >= 3 * 3                     # commit + checkpoint (WAL, db)
    assert out["unlink_calls"] >= 2 * 3                        # -wal and -shm per close
    slow = buffer.syscall_counts(tmp_path, 1000, 1, sync_delay_ms=20)
    assert slow["seconds"] >= 0.02 * 3
    with pytest.raises(ValueError, match="sync_delay_ms"):
        buffer.syscall_counts(tmp_path, 1000, 1, sync_delay_ms=-1)
    assert not list(tmp_path.glob("*.db*"))


def test_lab_records_are_the_authors_records_in_blocks():
    a = buffer_point.lab_records(2_345, block=1000)
    assert len(a) == 2_345
    for r in a:
        assert set(r) == {"uri", "text"} and len(r["uri"]) == 36 and len(r["text"]) == 68
        assert r["uri"].startswith("at://") and r["uri"][15:21] == "/post/"
        assert r["text"].startswith("Test post content ")
        assert set(r["uri"][5:15] + r["uri"][21:] + r["text"][18:]) <= set(buffer_point.ALNUM)
    assert len({r["uri"] for r in a}) == len(a)                 # fresh random text, no repeats


@pytest.mark.parametrize("generator", ["author", "lab"])
def test_article_point_with_either_generator(tmp_path, generator):
    out = buffer_point.article_point(str(tmp_path / "q.db"), 2500, 2, record_generator=generator)
    assert out["audit_ok"] and out["records_in_payloads"] == 2500 and out["rows"] == 3


def test_the_consumers_pass_is_the_audit(tmp_path):
    path = str(tmp_path / "q.db")
    out = buffer_point.tuned_point(path, 12_345, 5, synchronous="full", audit=False)
    assert "audit_ok" not in out
    c = buffer_point.consume_point(path, 5, audit=(12_345, 1000))
    assert c["audit_ok"] and c["rows"] == c["rows_expected"] == 13 and c["records_in_payloads"] == 12_345
    assert c["consumed"] == 12_345 and c["rows_left"] == 0 and c["audit_seconds"] >= 0
    # a row lost, a row's metadata wrong, a row no longer pending: each fails the audit
    for damage in ("DELETE FROM queue WHERE id = 7",
                   "UPDATE queue SET metadata = '{\"batch_size\": 1000, \"actual_batch_size\": 999}' WHERE id = 2",
                   "UPDATE queue SET status = 'done' WHERE id = 4"):
        buffer_point.tuned_point(path, 12_345, 5, synchronous="normal", audit=False)
        con = sqlite3.connect(path)
        con.execute(damage)
        con.commit()
        con.close()
        c = buffer_point.consume_point(path, 5, audit=(12_345, 1000))
        assert not c["audit_ok"], damage


def test_run_point_audits_by_consuming(tmp_path):
    out = buffer_point.run_point(tmp_path / "t.db", 3000, 2, method="tuned", synchronous="full", timeout=60)
    assert out["audit_ok"] and out["consumed"] == 3000 and out["rows"] == 3 and out["audit_seconds"] >= 0
    out = buffer_point.run_point(tmp_path / "t.db", 3000, 2, method="tuned", synchronous="full", consume=False,
                           timeout=60)
    assert out["audit_ok"] and "consumed" not in out and out["rows"] == 3


def test_large_totals_run_only_the_named_settings_and_no_consumer(tmp_path):
    large = {"above": 1000, "rows_per_txn": [2], "synchronous": ["full"], "consume": False}
    pts = buffer.plan([1000, 3000], [1, 2], ["normal", "full"], large=large)
    tuned = [(p["total"], p["rows_per_txn"], p["synchronous"]) for p in pts if p["method"] == "tuned"]
    assert tuned == [(1000, 1, "normal"), (1000, 1, "full"), (1000, 2, "normal"), (1000, 2, "full"),
                     (3000, 2, "full")]
    assert sum(p["method"] == "article" and p["total"] == 3000 for p in pts) == 2   # the article's stay
    df = buffer.sweep_buffer(tmp_path, [1000, 3000], [1, 2], ["normal", "full"], methods=["tuned"],
                             max_seconds=60, progress=False, large=large)
    assert df["audit_ok"].all() and len(df) == 5
    big = df[df["total"] == 3000].iloc[0]
    assert pd_isna(big.get("consumed")) and big["rows"] == 3
    assert (df[df["total"] == 1000]["consumed"] == 1000).all()
    with pytest.raises(ValueError, match="large must be a dict"):
        buffer.plan([1000], [1], large={"rows_per_txn": [1]})
    # a total of its own: the article's 100 M ran 25 rows only
    at = {**large, "rows_per_txn_at": {5000: [1]}}
    tuned = [(p["total"], p["rows_per_txn"]) for p in buffer.plan([3000, 5000], [1, 2], ["full"], large=at)
             if p["method"] == "tuned"]
    assert tuned == [(3000, 2), (5000, 1)]
    with pytest.raises(ValueError, match="rows_per_txn_at must map"):
        buffer.plan([1000], [1], large={"above": 1, "rows_per_txn_at": {5000: 1}})


def pd_isna(v) -> bool:
    return v is None or v != v


def test_the_vocabulary_names_the_points_ids_and_the_point_imports_only_the_standard_library():
    """The buffer methods' and variants' plain words live in sqlitelab.core.vocabulary; the point's
    module keeps its ids to itself (it imports nothing beyond the standard library), so the two are
    held to the same ids here."""
    import ast
    import sys
    from sqlitelab.core import vocabulary
    assert set(vocabulary.METHOD_TITLES) == set(buffer_point.METHODS)
    assert set(vocabulary.VARIANT_TITLES) == set(buffer_point.VARIANTS)
    assert vocabulary.TUNED_VARIANT == buffer_point.TUNED_VARIANT
    tree = ast.parse(open(buffer_point.__file__, encoding="utf-8").read())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_each_change_is_read_against_the_method_as_published_at_its_own_batch_size():
    """04's variants figure: a dot per change and rows per transaction, at `records/s of the
    change / records/s as published` with as many rows per transaction (the line at 1×)."""
    bf = pd.DataFrame([{"method": "article", "variant": v, "rows_per_txn": r, "total": 100_000,
                        "records_per_s": rate, "skipped": None, "error": None}
                       for v, r, rate in [("as_published", 10, 100.0), ("as_published", 25, 400.0),
                                          ("one_connection", 10, 300.0), ("one_connection", 25, 200.0),
                                          ("one_connection", 25, 600.0)]])
    got = sqlite_as_buffer.variant_ratios(bf).set_index("rows_per_txn")
    assert list(got["variant"]) == ["one connection", "one connection"]  # as published is the line, not a row
    assert got.loc[10, "against_published"] == 3.0 and got.loc[25, "against_published"] == 1.0  # median of 200, 600
    assert sqlite_as_buffer.variant_ratios(bf[bf["method"] == "tuned"]).empty
