"""Notebook 12's cuts and words: a real server cut on the lazy filesystem (go-nethttp: FULL keeps
every acknowledged write, OFF loses them, and the audit catches a filesystem that ignores fsync),
and each verdict of its findings tested both ways on rows whose answer is known."""
from __future__ import annotations

import pandas as pd
import pytest

from sqlitelab.experiments import power_cut
from sqlitelab.notebooks import power_cut as this
from sqlitelab.report import plots


def test_modes_are_a_journal_and_a_synchronous_setting_and_anything_else_is_refused():
    assert power_cut.parse_mode("wal-normal") == ("wal", "normal")
    assert "journal_mode=delete" in power_cut.pragmas("delete-extra")
    assert "synchronous=extra" in power_cut.pragmas("delete-extra")
    for bad in ("wal", "wal-fast", "memory-full", ""):
        with pytest.raises(ValueError, match="must be one of"):
            power_cut.parse_mode(bad)
    assert this.mode_title("delete-full") == "rollback journal, synchronous=FULL"


@pytest.mark.parametrize("kw, message", [
    ({"write_paths": ["queue"]}, "write path must be one of"),
    ({"modes": ["wal-sometimes"]}, "synchronous must be one of"),
    ({"rounds": 0}, "rounds must be"),
    ({"window": (2.0, 1.0)}, "window must be"),
])
def test_a_bad_plan_is_refused_before_anything_starts(kw, message):
    args = {"stacks": ["go-nethttp"], "write_paths": ["pool"], "modes": ["wal-full"], "levels": [1],
            "rounds": 1, "window": (0.1, 0.2), "seed": 1, **kw}
    with pytest.raises(ValueError, match=message):
        power_cut.cuts(**args)


def test_the_audit_counts_what_the_file_lacks_and_the_seconds_it_spans(tmp_path):
    db = power_cut.fresh_file(tmp_path / "lab.db", "wal")
    import sqlite3
    con = sqlite3.connect(db)
    con.executemany("INSERT INTO items (id, payload, created_at) VALUES (?, 'p', 'now')", [(1,), (2,)])
    con.commit()
    con.close()
    found = power_cut.audit(db, {1: 10.0, 2: 10.5, 3: 11.0, 4: 11.5}, cut_at=12.0)
    assert (found["lost"], found["kept"], found["rows"], found["integrity"]) == (2, 2, 2, "ok")
    assert found["lost_seconds"] == pytest.approx(1.0)  # from the oldest lost answer (3, at 11.0) to the cut
    assert power_cut.audit(db, {1: 10.0, 2: 10.5}, cut_at=12.0)["lost"] == 0
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 300)
    broken = power_cut.audit(tmp_path / "junk.db", {1: 1.0}, cut_at=2.0)
    assert not broken["readable"] and broken["lost"] == 1 and broken["integrity"].startswith("unreadable")


def _loss(**kw) -> pd.DataFrame:
    row = {"server": "go-nethttp", "write_path": "pool", "mode": "wal-full", "users": 8, "lost": 0,
           "lost_span_s": None,
           "acked": 500, "writeback": 0.0, "rate": None, "checkpoint": None, "replica": False, "integrity": "ok", "restarted": True, "lost_seconds": 0.0, "acked_per_s": 900.0}
    same = {k: kw[k] for k in ("mode", "replica", "write_path") if k in kw}  # what makes the group
    rows = [{**row, **kw}, {**row, **same}]  # two cuts of one mode and setting, the first changed
    return this.loss_table(pd.DataFrame(rows))


def test_a_mode_that_lost_nothing_says_so_with_the_interval_of_its_cuts_and_one_that_lost_says_how_much():
    kept = _loss()
    words = this.verdict(kept.iloc[0])
    assert "kept every one of 1,000 acknowledged writes in all 2 cuts" in words
    assert "0 of 2, 95 % interval up to 66 %" in words
    assert "passed integrity_check after every cut" in words and "started again" in words
    lost = _loss(lost=120, lost_seconds=0.25, mode="wal-normal")
    words = this.verdict(lost.iloc[0])
    assert "lost acknowledged writes in 1 of 2 cuts: at most 120 in one cut, 0.25 s of writes, at 900" in words
    assert "kept every" not in words
    assert "each answered as the power went" in this.verdict(_loss(lost=1, mode="delete-full").iloc[0])


def test_integrity_and_restart_failures_are_counted_in_bold():
    words = this.verdict(_loss(integrity="*** in database main ***", restarted=False).iloc[0])
    assert "**the file failed integrity_check after 1 of 2 cuts**" in words
    assert "**the server did not start again, or refused a write, after 1 of 2 cuts**" in words


def test_a_durable_setting_that_loses_a_write_is_a_defect_and_one_that_does_not_is_not():
    assert this.defects(_loss()) == []
    assert this.defects(_loss(mode="delete-full", lost=1)) == []  # FULL's last commit, in DELETE mode: documented
    assert this.defects(_loss(mode="delete-full", lost=2)) == [  # two commits of a pool: one too many
        "Go · net/http, a connection pool, rollback journal, synchronous=FULL: 2 acknowledged writes lost, "
        "more than the last commit in 1 of 2 cuts"]
    assert this.defects(_loss(mode="delete-full", write_path="batch", lost=8)) == []  # one group commit of 8 writers
    assert this.defects(_loss(mode="delete-full", write_path="batch", lost=9))  # more than one write of each
    one = _loss(mode="delete-full", lost=1)
    last = this.power_cut_findings(one, this.tradeoff(one, pd.DataFrame()))
    assert "lost its last commit in 1 of 2 cuts (at most 1 acknowledged write:" in last and "❌" not in last
    bad = this.defects(_loss(lost=3))
    assert bad == ["Go · net/http, a connection pool, WAL, synchronous=FULL: 3 acknowledged writes lost"]
    text = this.power_cut_findings(_loss(lost=3), this.tradeoff(_loss(lost=3), pd.DataFrame()))
    assert "❌ **A setting SQLite documents as durable lost writes**" in text
    assert "❌" not in this.power_cut_findings(_loss(), this.tradeoff(_loss(), pd.DataFrame()))


def test_the_trade_off_figure_keeps_a_count_of_one_apart_from_zero(tmp_path):
    rows = pd.DataFrame({"mode_title": ["WAL, synchronous=OFF", "rollback journal, synchronous=FULL",
                                        "WAL, synchronous=FULL"],
                         "most_lost": [2300, 1, 0], "writes_per_s": [17000.0, 300.0, 2700.0],
                         "server": "go-nethttp"})
    fig = plots.pair_chart(rows, category="mode_title", left="most_lost", right="writes_per_s", series="server",
                           title="t", left_label="lost", right_label="writes/s", caption="c")
    left = fig.axes[0]
    assert left.get_xscale() == "symlog"
    one, zero = left.transData.transform([(1, 0), (0, 0)])[:, 0]
    assert one - zero > 20  # pixels: a lost write is seen
    assert fig.axes[1].get_xscale() == "log"  # 300 to 17,000 writes/s, none 0
    plots.save_figure(fig, "trade-off", notebook="test", figures_dir=tmp_path)  # the figure check passes


@pytest.mark.contract
def test_a_real_cut_keeps_every_write_at_full_and_loses_them_at_off(tmp_path):
    full = power_cut.cut_once("go-nethttp", "pool", "wal-full", 4, (0.3, 0.6), 1, tmp_path / "full")
    off = power_cut.cut_once("go-nethttp", "pool", "wal-off", 4, (0.3, 0.6), 2, tmp_path / "off")
    assert full["acked"] > 0 and full["lost"] == 0 and full["integrity"] == "ok" and full["restarted"]
    assert off["acked"] > 0 and off["lost"] > 0 and off["restarted"], off


@pytest.mark.contract
def test_the_cut_catches_a_filesystem_that_ignores_fsync(tmp_path):
    row = power_cut.cut_once("go-nethttp", "pool", "wal-full", 4, (0.3, 0.6), 3, tmp_path / "broken",
                             ignore_fsync=True)
    assert row["acked"] > 0 and row["lost"] == row["acked"], row


def test_normals_loss_is_said_in_seconds_of_writes_at_each_rate_it_was_measured_at():
    cuts = pd.DataFrame([{"server": "go-nethttp", "write_path": "pool", "mode": "wal-normal", "users": 8,
                          "writeback": 0.0, "rate": rate, "checkpoint": None, "replica": False, "lost": lost,
                          "acked": 500, "integrity": "ok", "restarted": True, "lost_seconds": secs,
                          "acked_per_s": per_s} for rate, lost, secs, per_s in
                         ((100.0, 180, 1.8, 99.0), (None, 60, 0.04, 1500.0), (400.0, 0, 0.0, 398.0))])
    loss = this.loss_table(cuts)
    text = this.power_cut_findings(loss, this.tradeoff(loss, pd.DataFrame()))
    assert ("In plain words (Go · net/http, a connection pool, SQLite's default checkpoint (1,000 pages)): WAL at "
            "NORMAL lost, in one cut, at 100 writes/s up to 1.8 s of writes (180 writes); at 400 writes/s nothing "
            "in its one cut; as fast as answered (1,500 acknowledged writes/s on the mount) up to 0.04 s of writes "
            "(60 writes).") in text
    full = this.loss_table(cuts.assign(mode="wal-full", lost=0))
    assert "In plain words" not in this.power_cut_findings(full, this.tradeoff(full, pd.DataFrame()))


def test_the_plan_gives_checkpoints_and_litestream_to_the_wal_modes_alone_and_refuses_what_it_cannot_cut():
    todo = power_cut.plan(["go-nethttp"], ["pool"], ["wal-normal", "delete-full"], [8], 2,
                          writebacks=(0.0, 0.5), rates=(None, 100), checkpoints=(None, 100), litestream=True)
    wal = [c for c in todo if c["name"] == "wal-normal"]
    delete = [c for c in todo if c["name"] == "delete-full"]
    assert len(wal) == 2 * 2 * 2 * 2 * 2 and len(delete) == 2 * 2 * 2  # rounds × writebacks × rates (× checkpoints × Litestream)
    assert {c["checkpoint"] for c in delete} == {None} and not any(c["replica"] for c in delete)
    assert {(c["checkpoint"], c["replica"]) for c in wal} == {(None, False), (None, True), (100, False), (100, True)}
    for kw, says in (({"rates": (0,)}, "a rate must be"), ({"checkpoints": (-1,)}, "a checkpoint must be"),
                     ({"writebacks": (1.5,)}, "writeback must be")):
        with pytest.raises(ValueError, match=says):
            power_cut.plan(["go-nethttp"], ["pool"], ["wal-full"], [1], 1, **kw)
    assert "wal_autocheckpoint=100" in power_cut.pragmas("wal-normal", 100)
    assert "wal_autocheckpoint" not in power_cut.pragmas("wal-normal")


def test_a_litestream_cut_says_what_its_replica_lost_or_that_it_could_not_be_restored():
    row = _loss(mode="wal-normal", lost=300, lost_seconds=2.0, replica=True, replica_lost=20,
                replica_lost_seconds=0.2).iloc[0]
    assert "the Litestream replica, restored, lost at most 20 in one cut (0.2 s of writes)" in this.verdict(row)
    gone = _loss(mode="wal-normal", replica=True, replica_lost=None).iloc[0]
    assert "could not be restored" in this.verdict(gone)
    assert "Litestream" not in this.verdict(_loss().iloc[0])
    assert "Litestream replicating" in this.settings_words(row)


@pytest.mark.contract
def test_a_litestream_replica_is_restored_after_the_cut_and_audited_against_the_ledger(tmp_path):
    row = power_cut.cut_once("go-nethttp", "pool", "wal-normal", 4, (1.5, 2.0), 4, tmp_path / "ls",
                             replica=True, rate=100)
    assert row["acked"] > 0 and row["replica_error"] == "" and row["replica_integrity"] == "ok", row
    assert 0 <= row["replica_lost"] <= row["acked"] and 80 <= row["acked_per_s"] <= 110, row


def test_the_table_says_once_what_every_row_shares_and_shows_only_the_settings_the_run_set():
    rows = pd.DataFrame([{"server": "go-nethttp", "write_path": "pool", "mode": "wal-full", "users": 8,
                          "writeback": b, "rate": None, "checkpoint": None, "replica": False, "lost": 0, "acked": 10,
                          "integrity": "ok", "restarted": True, "lost_seconds": 0.0, "acked_per_s": 9.0}
                         for b in (0.0, 0.5)])
    loss = this.loss_table(rows)
    assert this.shown_above(loss) == "Go · net/http, a connection pool, 8 users"
    html = this.shown(loss).to_html()
    assert "journal, synchronous" in html and "written back at the cut" in html
    for gone in ("stack", "Litestream", "offered writes/s", "wal_autocheckpoint", ">server<", ">mode<"):
        assert gone not in html


def test_the_throughput_sweeps_are_one_per_write_path_and_mode_with_every_stack_in_each():
    from sqlitelab.experiments.sweep import spec
    cfg = {**this.SCALES["quick"], "write_paths": ["pool", "batch"], "modes": ["wal-normal", "wal-full"]}
    specs = this.speed_specs(spec, cfg, ["go-nethttp", "rust-axum"], this.ID, "run-1", {}, None, None)
    assert len(specs) == 4 and len({s.run_id("mix") for s in specs}) == 4  # no two share a run id
    assert all(s.servers == ("go-nethttp", "rust-axum") for s in specs)


def test_a_cut_before_any_acknowledged_write_tests_nothing_and_says_so():
    none = this.verdict(_loss(acked=0, lost=0).iloc[0])
    assert "1 more cut came before any write was acknowledged: nothing tested there" in none
    assert "(cuts that lose some: 0 of 1," in none  # the interval over the cut that had writes
    rows = pd.DataFrame([{"server": "go-nethttp", "write_path": "pool", "mode": "wal-full", "users": 8,
                          "writeback": 0.0, "rate": None, "checkpoint": None, "replica": False, "lost": 0,
                          "acked": 0, "integrity": "ok", "restarted": True, "lost_seconds": 0.0,
                          "acked_per_s": 0.0}] * 2)
    assert this.verdict(this.loss_table(rows).iloc[0]) == ("had no write acknowledged before any of its 2 cuts: "
                                                           "nothing to lose, nothing tested")


def test_each_modes_throughput_is_a_ratio_with_its_interval_over_runs_or_says_there_is_none():
    loss = this.loss_table(pd.DataFrame([
        {"server": "go-nethttp", "write_path": "pool", "mode": m, "users": 8, "writeback": 0.0, "rate": None,
         "checkpoint": None, "replica": False, "lost": lost, "acked": 100, "integrity": "ok", "restarted": True,
         "lost_seconds": 0.0, "acked_per_s": 500.0} for m, lost in (("wal-normal", 10), ("wal-full", 0))]))

    def speed(normal, full):
        return pd.DataFrame([{"server": "go-nethttp", "write_path": "pool", "mode": m, "rps": r}
                             for m, rates in (("wal-normal", normal), ("wal-full", full)) for r in rates])
    once = " ".join(this.speed_words(this.tradeoff(loss, speed([4000.0], [1000.0]))))
    assert "one run each: no interval" in once and "WAL, synchronous=NORMAL 4.00×" in once
    three = " ".join(this.speed_words(this.tradeoff(loss, speed([3900.0, 4000.0, 4100.0], [990.0, 1000.0, 1010.0]))))
    assert "no interval" not in three and "95 % interval" in three and "3 runs" in three
