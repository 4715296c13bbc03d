"""Every notebook: committed clean, parameterised properly, and a real smoke run with tiny
parameters under papermill that must leave points, a passing audit and figures behind."""
from __future__ import annotations

import ast
import sqlite3

import nbformat
import pytest

from sqlitelab.core import config, results
from sqlitelab.batch import execute, notebooks
from sqlitelab.report import publish
from sqlitelab.notebooks import studies, study

NOTEBOOKS = notebooks()

# Tiny parameters per notebook (seconds, not minutes) and the table its measurements land in:
# its module's. The contract suite, not these, covers every stack.
SMOKE = {s.ID: s.SMOKE for s in studies().values()}
STORES = {s.ID: s.STORES for s in studies().values()}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_clean_and_parameterised(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert all(not c.get("outputs") and not c.get("execution_count")
               for c in nb.cells if c.cell_type == "code"), "commit notebooks without outputs"
    assert nb.metadata["kernelspec"]["name"] == config.KERNEL_NAME
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged parameters"
    tree = ast.parse(params[0].source)
    for node in tree.body:  # literals only: derived values belong in the next cell
        assert isinstance(node, ast.Assign), ast.dump(node)
        ast.literal_eval(node.value)
    names = {t.id for n in tree.body for t in n.targets}
    assert {"scale", "run_id"} <= names
    assert path.stem in SMOKE, f"{path.stem} has no module (sqlitelab/notebooks/) with its SMOKE parameters"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_smoke_run(path, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAB_FIGURES_DIR", str(tmp_path / "figures"))
    run_id = results.new_run_id(path.stem)
    out = tmp_path / path.name
    execute(path, out, {"scale": "quick", "run_id": run_id, **SMOKE[path.stem]})
    table = STORES[path.stem]
    if table:
        con = sqlite3.connect(tmp_path / "data" / "results.db")
        count = con.execute(f"SELECT count(*) FROM {table} WHERE run_id LIKE ?", (run_id + "%",)).fetchone()[0]
        done, measured = (("requests", "1") if table == "points" else  # what a measurement counts
                          ("total", "skipped IS NULL"))
        audit = con.execute(f"SELECT min(audit_ok), count(audit_ok), sum({done}) FROM {table} "
                            f"WHERE run_id LIKE ? AND {measured}", (run_id + "%",)).fetchone()
        con.close()
        assert count > 0, "the notebook stored no measurements"
        assert audit[1] > 0 and audit[0] == 1, f"the audit failed or never ran: {audit}"
        assert audit[2] > 0
    from sqlitelab import browse
    if (tmp_path / "data" / "results.db").exists():  # make browse describes every column it wrote
        assert not browse.undescribed(tmp_path / "data" / "results.db")
        con = sqlite3.connect(tmp_path / "data" / "results.db")  # every experiment it stored has words
        stored = [r[0] for r in con.execute("SELECT DISTINCT experiment FROM runs WHERE notebook_run = ?",
                                            (run_id,))]
        con.close()
        from sqlitelab.studies import declarations
        assert all(declarations.experiment_title(study(path.stem), e) is not None for e in stored)
    method = tmp_path / "data" / "runs" / run_id / "method.csv"
    assert method.exists(), "the notebook printed no method table"
    import pandas as pd
    table = pd.read_csv(method)
    from sqlitelab.report import methods
    assert methods.unrecorded(table) == [], \
        f"the method table names what the run did not record:\n{table[table['this run'] == methods.NOT_RECORDED]}"
    figures = list((tmp_path / "figures" / path.stem).glob("*.png"))
    assert figures and all(f.with_suffix(".svg").exists() for f in figures)
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    # make report turns it into a page without code that names its run
    run = publish.Run(path.stem, run_id, out, "quick", "", publish.provenance(run_id, tmp_path / "data" / "results.db"))
    page = publish.write(run, tmp_path / "report")["markdown"].read_text()
    assert run_id in page and "from sqlitelab" not in page and "![" in page
    if path.stem in REPLAYED:
        remade_from_the_stored_run(path, out, run_id, tmp_path, monkeypatch)


# Notebooks whose smoke run is also re-made from what it stored (sqlitelab.replay): one that
# stores sweeps' points, one that stores a table of its own, and 10, whose parameters name files
# the lab made in the run's folder.
REPLAYED = ("03-read-write-mix", "04-sqlite-as-buffer", "10-your-app")


def markdown(nb) -> list:
    """Every Markdown an executed notebook showed (its findings), in order."""
    return [o["data"]["text/markdown"] for c in nbformat.read(nb, as_version=4).cells
            for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]


def stored_files(folder) -> dict:
    """Every file under `folder` with its size and modification time (results.db's own files
    aside: their pages move when they are read)."""
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in sorted(folder.rglob("*"))
            if f.is_file() and not f.name.startswith("results.db")}


def same_figures(live, remade) -> bool:
    """The same figures, by name, each SVG the same bytes (at least one)."""
    svgs = sorted(live.glob("*.svg"))
    return bool(svgs) and [f.name for f in svgs] == sorted(f.name for f in remade.glob("*.svg")) \
        and all(f.read_bytes() == (remade / f.name).read_bytes() for f in svgs)


def remade_from_the_stored_run(path, executed, run_id, tmp_path, monkeypatch):
    """The run re-made from results.db, measuring and storing nothing: the same findings (every
    Markdown the notebook showed) and every figure's SVG the same bytes."""
    from sqlitelab import replay
    runs = lambda: sqlite3.connect(tmp_path / "data" / "results.db").execute("SELECT count(*) FROM runs").fetchone()[0]  # noqa: E731
    before = runs()
    kept = stored_files(tmp_path / "data" / "runs")
    remade = tmp_path / "remade"
    remade.mkdir()
    assert replay.remake(path, remade, "quick", run_id, SMOKE[path.stem]) is None
    assert runs() == before, "a replay stored something"
    assert stored_files(tmp_path / "data" / "runs") == kept, "a replay wrote into data/runs"
    assert markdown(remade / path.name) == markdown(executed)
    assert same_figures(tmp_path / "figures" / path.stem, remade / "figures" / path.stem)


@pytest.mark.notebook
def test_capacity_notebook_reads_the_newest_run_at_its_scale(tmp_path, monkeypatch):
    """06 over real stored points: a notebook-made quick sweep is estimated, an ad-hoc sweep
    (no scale) and the older run of the same notebook are not."""
    import pandas as pd
    from sqlitelab.experiments.sweep import sweep
    monkeypatch.setenv("LAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAB_FIGURES_DIR", str(tmp_path / "figures"))
    db, runs = tmp_path / "data" / "results.db", tmp_path / "data" / "runs"
    tiny = dict(servers=["go-nethttp"], profiles=["rails71"], scenario="rails-writes", levels=[1],
                duration=0.5, warmup=0.2, repeats=1, progress=False, results_db=db, runs_dir=runs)
    old = sweep(notebook="01-linear-writes", parameters={"scale": "quick"}, **tiny)
    new = sweep(notebook="01-linear-writes", parameters={"scale": "quick"}, **tiny)
    sweep(notebook="scratch", **tiny)
    run_id = results.new_run_id("06-capacity")
    execute(config.NOTEBOOKS_DIR / "06-capacity.ipynb", tmp_path / "06.ipynb",
            {"scale": "quick", "run_id": run_id})
    cap = pd.read_csv(runs / run_id / "capacity.csv")
    assert cap["notebook"].tolist() == ["01-linear-writes"]
    assert cap["peak_rps"].iloc[0] == pytest.approx(new["rps"].max())
    assert old["run_id"].iloc[0] != new["run_id"].iloc[0]
    assert (tmp_path / "figures" / "06-capacity" / "capacity.png").exists()
    # re-made (sqlitelab.replay): executed as it is over the same runs, its exports in the
    # re-making's folder, the same findings and figures
    from sqlitelab import replay
    kept = stored_files(tmp_path / "data")
    remade = tmp_path / "remade"
    remade.mkdir()
    assert replay.remake(config.NOTEBOOKS_DIR / "06-capacity.ipynb", remade, "quick") is None
    assert stored_files(tmp_path / "data") == kept, "a re-making wrote into data/"
    assert list((remade / "runs").glob("*/capacity.csv"))
    assert markdown(remade / "06-capacity.ipynb") == markdown(tmp_path / "06.ipynb")
    assert same_figures(tmp_path / "figures" / "06-capacity", remade / "figures" / "06-capacity")
