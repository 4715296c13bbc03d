"""make report: an executed notebook becomes a page without code, headed by its run's provenance.
(The notebook tier converts each real smoke run too: tests/test_notebooks.py.)"""
import base64
import io
import sqlite3

import matplotlib
import nbformat
import pytest

from sqlitelab.report import __main__ as report_cli
from sqlitelab.report import publish

matplotlib.use("Agg")
NOTEBOOK = "05-single-machine"


def _png() -> str:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([1, 2], [3, 4])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _executed(path, run_id, scale="quick", exception=False, replay=None, duration=None):
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# 05 · One machine"),
        v4.new_markdown_cell("## Setup"),
        v4.new_code_cell("from sqlitelab.notebook import *", outputs=[
            v4.new_output("stream", name="stderr", text="a log line\n")]),
        v4.new_markdown_cell("## Parameters\nwhat each one means"),
        v4.new_code_cell("scale = 'quick'", outputs=[v4.new_output("execute_result", data={"text/plain": "{'a': 1}"},
                                                                      execution_count=1)]),
        v4.new_markdown_cell("## Findings"),
        v4.new_code_cell("display(Markdown(this.single_machine(t)))", outputs=[
            v4.new_output("display_data", data={"text/markdown": "- **hello**: best go at 1,234 req/s",
                                                "text/plain": "<Markdown>"}),
            v4.new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "x"},
                                                "text/plain": "progress"}),
            v4.new_output("display_data", data={"image/png": _png(), "text/plain": "<Figure>"}),
            v4.new_output("stream", name="stdout", text="printed\n")]),
    ]
    nb.metadata["papermill"] = {"parameters": {"scale": scale, "run_id": run_id, **({"replay": replay} if replay else {})},
                                "start_time": f"2026-11-25T10:00:{len(run_id) % 60:02d}",
                                "end_time": "2026-11-25T10:05:00",
                                "exception": exception or None, **({"duration": duration} if duration else {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture()
def store(tmp_path):
    runs_dir, db = tmp_path / "runs", tmp_path / "results.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (notebook TEXT, notebook_run TEXT, run_id TEXT, git_commit TEXT, machine TEXT, "
                "lock_hash TEXT, lock_ok INTEGER, server_cpus TEXT, generator_cpus TEXT, started TEXT, finished TEXT)")
    for run_id in ("20261125T100000Z-05-single-machine-aaaa", "20261125T110000Z-05-single-machine-bbbb"):
        con.execute("INSERT INTO runs VALUES (?, ?, ?, 'abc1234', '2 cores (AMD EPYC)', 'f00d', 1, '0', '1', "
                    "'2026-11-25T10:00:00', '2026-11-25T10:05:00')", (NOTEBOOK, run_id, run_id + "/hello"))
    con.commit()
    con.close()
    _executed(runs_dir / "20261125T100000Z-05-single-machine-aaaa" / f"{NOTEBOOK}.ipynb",
              "20261125T100000Z-05-single-machine-aaaa")
    _executed(runs_dir / "20261125T110000Z-05-single-machine-bbbb" / f"{NOTEBOOK}.ipynb",
              "20261125T110000Z-05-single-machine-bbbb")
    _executed(runs_dir / "20261125T120000Z-05-single-machine-cccc" / f"{NOTEBOOK}.ipynb",  # failed: never reported
              "20261125T120000Z-05-single-machine-cccc", exception=True)
    _executed(runs_dir / "20261125T130000Z-05-single-machine-dddd" / f"{NOTEBOOK}.ipynb",  # another scale
              "20261125T130000Z-05-single-machine-dddd", scale="seed")
    return runs_dir, db


def test_the_newest_finished_run_at_the_scale_is_reported(store):
    runs_dir, db = store
    found = publish.newest("quick", runs_dir=runs_dir, db=db)
    assert [r.run_id for r in found] == ["20261125T110000Z-05-single-machine-bbbb"]
    assert found[0].provenance["git_commit"] == "abc1234"
    assert [r.run_id for r in publish.newest("seed", runs_dir=runs_dir, db=db)] == \
        ["20261125T130000Z-05-single-machine-dddd"]
    assert publish.newest("quick", only=["01"], runs_dir=runs_dir, db=db) == []
    with pytest.raises(ValueError, match="quick or seed"):
        publish.newest("fast", runs_dir=runs_dir, db=db)


def test_a_report_has_no_code_and_says_where_its_numbers_come_from(store, tmp_path):
    runs_dir, db = store
    run = publish.newest("quick", runs_dir=runs_dir, db=db)[0]
    paths = publish.write(run, tmp_path / "out")
    md = paths["markdown"].read_text()
    assert md.startswith("# 05 · One machine")
    assert "20261125T110000Z-05-single-machine-bbbb" in md and "`abc1234`" in md and "2 cores (AMD EPYC)" in md
    assert "best go at 1,234 req/s" in md
    for code in ("from sqlitelab", "display(", "scale = ", "a log line", "printed", "progress", "{'a': 1}",
                 "## Setup", "## Parameters"):
        assert code not in md, code
    figures = list((tmp_path / "out" / f"{NOTEBOOK}_files").glob("*.png"))
    assert len(figures) == 1 and f"{NOTEBOOK}_files/{figures[0].name}" in md
    html = paths["html"].read_text()
    assert f'src="{NOTEBOOK}_files/{figures[0].name}"' in html and "best go at 1,234 req/s" in html
    assert "<script" not in html and "base64" not in html  # a page of its own, no copies of the figures
    assert "from sqlitelab" not in html and "20261125T110000Z-05-single-machine-bbbb" in html


def test_the_command_writes_an_index_and_refuses_an_empty_store(store, tmp_path, capsys):
    runs_dir, db = store
    out = tmp_path / "reports"
    assert report_cli.main(["--scale", "quick", "--runs-dir", str(runs_dir), "--db", str(db), "--out", str(out)]) == 0
    assert "20261125T110000Z-05-single-machine-bbbb" in (out / "index.md").read_text()
    assert report_cli.main(["--scale", "quick", "--runs-dir", str(tmp_path / "none"), "--db", str(db)]) == 2
    assert "No finished quick run" in capsys.readouterr().err


def test_the_markdown_carries_pipe_tables_and_the_html_page_keeps_pandas_styling(store, tmp_path):
    import pandas as pd
    runs_dir, db = store
    run = publish.newest("quick", runs_dir=runs_dir, db=db)[0]
    nb = nbformat.read(run.executed, as_version=4)
    plain = pd.DataFrame({"server": ["go", "rust"], "rps": [1234.5, 99.0], "note": ["a | b", "c"]})
    pivot = pd.DataFrame({"server": ["go", "go", "rust", "rust"], "sync": ["full", "normal"] * 2,
                          "users": [8] * 4, "rps": [1, 2, 3, 4]}).pivot_table(index="users",
                                                                              columns=["server", "sync"], values="rps")
    styled = plain.style.hide(axis="index").set_properties(**{"text-align": "left"})
    pages = [plain._repr_html_(), pivot._repr_html_(), styled._repr_html_()]
    assert all("<style" in p for p in pages)  # what pandas gives a notebook: CSS a blog engine shows as text
    nb.cells[-1].outputs += [nbformat.v4.new_output("display_data", data={"text/html": p, "text/plain": "<table>"})
                             for p in pages]
    nbformat.write(nb, run.executed)
    paths = publish.write(run, tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "<style" not in md and "#T_" not in md and "<table" not in md
    assert "|  | server | rps | note |\n|---|---|---|---|---|" not in md  # one separator cell per column
    assert "|  | server | rps | note |\n|---|---|---|---|\n| 0 | go | 1234.5 | a \\| b |" in md
    assert "| server · sync · users | go · full | go · normal | rust · full | rust · normal |" in md
    assert "| 8 | 1.0 | 2.0 | 3.0 | 4.0 |" in md
    assert "| server | rps | note |\n|---|---|---|\n| go | 1234.500000 | a \\| b |" in md
    assert "best go at 1,234 req/s" in md  # the notebook's own Markdown as it was
    html = paths["html"].read_text()
    assert html.count("<table") == 3 and "#T_" in html  # the page keeps pandas' styling


def test_a_page_without_a_table_is_left_as_it_is():
    assert publish.pipe_tables("<p>no table here</p>") is None
    spanned = ("<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>"
               "<tr><th rowspan='2'>x</th><td>1</td></tr><tr><td>2</td></tr></tbody></table><p>2 rows × 1 columns</p>")
    assert publish.pipe_tables(spanned) == "| a | b |\n|---|---|\n| x | 1 |\n| x | 2 |\n\n2 rows × 1 columns"


def test_a_page_re_made_from_its_stored_run_says_so(tmp_path):
    """A run's notebook re-made by sqlitelab.replay (its `replay` parameter: nothing measured
    again, its words and figures drawn by later code) says so in its page's first line; a run's
    own executed notebook does not."""
    run_id = "20261125T100000Z-05-single-machine-aaaa"
    for replay, says in ((None, False), (run_id, True)):
        nb = _executed(tmp_path / str(says) / f"{NOTEBOOK}.ipynb", run_id, replay=replay)
        run = publish.Run(NOTEBOOK, run_id, nb, "quick", "2026-11-25T10:00:00", {})
        page = publish.write(run, tmp_path / f"out-{says}")["markdown"].read_text()
        assert ("re-made from the stored run by `python -m sqlitelab.replay` (nothing measured again" in page) == says


def test_a_re_made_page_is_dated_when_its_run_started_not_when_it_was_re_made(tmp_path):
    run_id = "20261125T100000Z-05-single-machine-aaaa"
    _executed(tmp_path / "runs" / run_id / f"{NOTEBOOK}.ipynb", run_id, replay=run_id)  # re-made at 10:00:xx
    found, = publish.runs(tmp_path / "runs", tmp_path / "none.db")
    assert found.started == "2026-11-25T10:00:00+00:00"
    _executed(tmp_path / "own" / run_id / f"{NOTEBOOK}.ipynb", run_id)  # its own: papermill's start
    assert publish.runs(tmp_path / "own", tmp_path / "none.db")[0].started.startswith("2026-11-25T10:00:")
