"""A notebook re-made from a run it stored, measuring nothing (results.replay): every experiment
that would measure returns the stored rows in the order they were measured, a sweep or parameter
the run did not store is refused with a line that says which, and nothing is written."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from sqlitelab.core import config, results
from sqlitelab.experiments import baseline, buffer
from sqlitelab.experiments.sweep import run, spec

NOTEBOOK = "03-read-write-mix"


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """A results.db holding one notebook run: a sweep's points (stored out of users' order, as
    a confirming generator's re-measured level would be), a ceiling and a buffer table."""
    db = tmp_path / "results.db"
    monkeypatch.setattr(config, "RESULTS_DB", db)
    monkeypatch.setattr(config, "RUNS_DIR", tmp_path / "runs")
    params = {"scale": "quick", "levels": [8, 32]}
    s = spec(notebook=NOTEBOOK, servers=["go-nethttp"], profiles=["single-writer"], scenario="mix",
             levels=[8, 32], duration=1.0, run_id="nbrun", experiment="article", parameters=params)
    key = s.run_id("mix")
    described = results.describe(NOTEBOOK, "nbrun", "article", params)
    points = [{"run_id": key, "server": "go-nethttp", "users": u, "repeat": 1, "rps": rps, "headline": h, "audit_ok": True}
              for u, rps, h in ((32, 900.0, True), (8, 500.0, True), (8, 100.0, False))]
    results.store_run({"run_id": key, **described, "parameters": params}, points)
    results.store_table("nbrun", NOTEBOOK, "ceilings", pd.DataFrame([{"commits_per_s": 1234.0, "cpus": "0"}]),
                        parameters=params, experiment="ceiling")
    results.store_table("nbrun", NOTEBOOK, "buffer_points", pd.DataFrame([{"total": 10, "records_per_s": 5.0}]),
                        parameters=params)
    yield s, params, db
    results.replay(NOTEBOOK, None)


def test_a_replay_returns_what_the_run_stored_in_its_order_and_stores_nothing(stored):
    s, params, db = stored
    before = sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0]
    assert results.replay(NOTEBOOK, "nbrun") == "nbrun" and results.replaying() == "nbrun"
    df = run(s)
    assert df["users"].tolist() == [32, 8] and df["rps"].tolist() == [900.0, 500.0]  # headline only
    raw = baseline.ceiling(NOTEBOOK, "nbrun", 1.0, "0", params)
    assert raw["commits_per_s"] == 1234.0 and "notebook_run" not in raw
    bf = buffer.sweep_buffer(db.parent / "work", [10], [10])
    assert bf["records_per_s"].tolist() == [5.0] and not (db.parent / "work").exists()
    results.store_table("nbrun", NOTEBOOK, "ceilings", pd.DataFrame([{"commits_per_s": 1.0}]))
    results.store_run({"run_id": "other", "notebook": NOTEBOOK, "notebook_run": "other"}, [{"rps": 1}])
    assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone()[0] == before
    assert results.replay(NOTEBOOK, "newest", "quick") == "nbrun"
    assert results.replay(NOTEBOOK, None) is None and results.replaying() is None


def test_a_replay_refuses_a_run_or_a_sweep_or_parameters_it_cannot_remake(stored):
    s, params, db = stored
    with pytest.raises(results.ReplayError, match="no stored run 'nope' of 03-read-write-mix"):
        results.replay(NOTEBOOK, "nope")
    with pytest.raises(results.ReplayError, match="no stored run 'nbrun' of 01-linear-writes"):
        results.replay("01-linear-writes", "nbrun")
    with pytest.raises(results.ReplayError, match="no stored run 'newest' of 03-read-write-mix at seed scale"):
        results.replay(NOTEBOOK, "newest", "seed")
    with pytest.raises(results.ReplayError, match="must be a run id"):
        results.replay(NOTEBOOK, 3)
    results.replay(NOTEBOOK, "nbrun")
    other = spec(notebook=NOTEBOOK, servers=["go-nethttp"], profiles=["single-writer"], scenario="mix",
                 levels=[8, 32], duration=1.0, run_id="nbrun", experiment="fine", parameters=params)
    with pytest.raises(results.ReplayError, match="stored no 'nbrun/fine'"):
        run(other)
    moved = spec(notebook=NOTEBOOK, servers=["go-nethttp"], profiles=["single-writer"], scenario="mix",
                 levels=[8, 32], duration=1.0, run_id="nbrun", experiment="article",
                 parameters={**params, "levels": [8, 64]})
    with pytest.raises(results.ReplayError, match=r"levels: stored \[8, 32\], given \[8, 64\]"):
        run(moved)
    assert json.loads(sqlite3.connect(db).execute("SELECT parameters FROM runs WHERE run_id = 'nbrun/article'")
                      .fetchone()[0]) == params


def _executed(path, outputs: list[dict]) -> None:
    cells = [{"cell_type": "code", "source": "", "metadata": {}, "execution_count": 1, "outputs": outputs}]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def test_two_remakings_are_compared_by_what_they_showed_and_by_their_figures_bytes(tmp_path):
    """replay's comparison: a notebook's text (printed lines, Markdown, tables, a styled table's
    cells; not its progress bars, object addresses or where its figures went) and every figure's
    SVG; a difference in either is named."""
    from sqlitelab import replay
    shown = [{"output_type": "stream", "name": "stderr", "text": "sweep:  10%|#  | 1/10"},
             {"output_type": "display_data", "data": {"application/vnd.jupyter.widget-view+json": {},
                                                      "text/plain": "01:  0%|"}},
             {"output_type": "stream", "name": "stdout", "text": "24 points; audit ok: True\n"},
             {"output_type": "display_data", "data": {"text/markdown": "- **go** peaks at 4,000/s"}},
             {"output_type": "display_data", "data": {
                 "text/plain": "<pandas.io.formats.style.Styler at 0x7f00>",
                 "text/html": "<style>#T_ab12_row0 {x: y}</style><table><tr><th>aspect</th><td>a &amp; b</td></tr></table>"}},
             {"output_type": "execute_result", "data": {
                 "text/plain": "[PosixPath('/tmp/x/figures/01/a.png')]"}, "metadata": {}, "execution_count": 1}]
    for side, where in (("old", "/tmp/x"), ("new", "/elsewhere")):
        (tmp_path / side / "figures" / "01").mkdir(parents=True)
        _executed(tmp_path / side / "01.ipynb", json.loads(json.dumps(shown).replace("/tmp/x", where)))
        (tmp_path / side / "01.txt").write_text(replay.shown_text(tmp_path / side / "01.ipynb"))
        (tmp_path / side / "figures" / "01" / "a.svg").write_text("<svg/>")
    text = (tmp_path / "new" / "01.txt").read_text()
    assert text == ("--- cell 0\n24 points; audit ok: True\n- **go** peaks at 4,000/s\naspect | a & b |\n"
                    "[PosixPath('…/figures/01/a.png')]\n")
    assert replay.differences(tmp_path / "new", tmp_path / "old") == []
    (tmp_path / "new" / "01.txt").write_text(text.replace("4,000", "4,100"))
    (tmp_path / "new" / "figures" / "01" / "a.svg").write_text("<svg></svg>")
    (tmp_path / "new" / "figures" / "01" / "b.svg").write_text("<svg/>")
    found = replay.differences(tmp_path / "new", tmp_path / "old")
    assert [f.splitlines()[0] for f in found] == ["01.txt: text differs", "figures/01/a.svg: SVG differs",
                                                  "figures/01/b.svg: only in the new re-making"]
    assert "-- **go** peaks at 4,000/s" in found[0] and "+- **go** peaks at 4,100/s" in found[0]


def test_a_path_in_the_runs_own_folder_is_compared_from_that_folder_on(stored):
    """10's example database is made in the run's folder: a re-making, whose folder is elsewhere,
    gives the same parameters; a path outside the run's folder must be the same path."""
    s, params, db = stored
    made = {"scale": "quick", "db": "/home/a/lab/data/runs/apprun/shop.db", "command": "/home/a/lab/.venv/bin/app"}
    results.store_run({"run_id": "apprun", "notebook": "10-your-app", "notebook_run": "apprun",
                       "scale": "quick", "parameters": made}, [{"run_id": "apprun", "users": 1, "rps": 5.0}])
    results.replay("10-your-app", "apprun")
    remade = {**made, "db": "/tmp/remade/runs/apprun/shop.db"}
    assert results.replayed("apprun", remade)["rps"].tolist() == [5.0]
    with pytest.raises(results.ReplayError, match="command: stored '/home/a/lab/.venv/bin/app', given '/x/app'"):
        results.replayed("apprun", {**remade, "command": "/x/app"})
    with pytest.raises(results.ReplayError, match="db: stored '<runs>/apprun/shop.db', given '/tmp/other/shop.db'"):
        results.replayed("apprun", {**made, "db": "/tmp/other/shop.db"})
    results.replay("10-your-app", None)
