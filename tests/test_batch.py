"""batch's own path (`make run`): every notebook runs whatever the one before did; a notebook
that errors, or that stored a point whose audit failed, makes the batch exit 1, and the summary
names the failing rows under its table. Over small notebooks of the test's own
(LAB_NOTEBOOKS_DIR), real ones for papermill: the `sqlitelab` kernel, a `parameters` cell,
points stored through sqlitelab.core.results."""
from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest

from sqlitelab import batch
from sqlitelab.core import config, results


def point(run_id: str, notebook: str, audit_ok: bool = True, **more) -> dict:
    """A stored point as a sweep stores one (the columns batch's summary reads)."""
    return {"run_id": run_id, "notebook": notebook, "notebook_run": run_id, "experiment": None,
            "scale": "quick", "server": "go-nethttp", "profile": "rails71", "scenario": "rails-writes",
            "users": 8, "repeat": 1, "generator": "loadgen", "rps": 1234.5, "headline": True,
            "generator_bound": False, "generator_influenced": False, "acked_writes": 500,
            "rows_written": 500 if audit_ok else 497, "integrity": "ok", "audit_ok": audit_ok, **more}


def store(run_id: str, notebook: str, points: list[dict], path=None) -> None:
    results.store_run({"run_id": run_id, "notebook": notebook, "notebook_run": run_id, "scale": "quick",
                       "started": results.now_iso()}, points, path)


def notebook(folder, stem: str, body: str) -> None:
    """A notebook like the lab's: markdown title, imports, a `parameters` cell, then `body`."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": config.KERNEL_NAME, "display_name": "Python (sqlitelab)",
                                 "language": "python"}
    params = nbformat.v4.new_code_cell('scale = "quick"  # quick or seed\n'
                                       'run_id = None  # id of this run in data/results.db\n'
                                       'audit_ok = True  # whether the point stored passes its audit')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {stem}"),
                nbformat.v4.new_code_cell("from sqlitelab.core import results\n"
                                          f"NOTEBOOK = {stem!r}"),
                params,
                nbformat.v4.new_code_cell("run_id = run_id or results.new_run_id(NOTEBOOK)\n" + body)]
    nbformat.write(nb, folder / f"{stem}.ipynb")


# what the notebooks store: one point, as a sweep would (`audit_ok` from the parameter)
STORES_A_POINT = """
point = {"run_id": run_id, "notebook": NOTEBOOK, "notebook_run": run_id, "scale": scale,
         "server": "go-nethttp", "profile": "rails71", "scenario": "rails-writes", "users": 8,
         "repeat": 1, "generator": "loadgen", "rps": 1234.5, "headline": True,
         "generator_bound": False, "generator_influenced": False, "acked_writes": 500,
         "inflight_writes": 3, "rows_written": 500 if audit_ok else 497, "integrity": "ok",
         "audit_ok": audit_ok}
results.store_run({"run_id": run_id, "notebook": NOTEBOOK, "notebook_run": run_id, "scale": scale,
                   "started": results.now_iso()}, [point])
"""


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """Notebooks, data and figures folders of the test's own, for batch (config's paths) and
    the notebooks' kernels (the environment they inherit)."""
    nbs, data = tmp_path / "notebooks", tmp_path / "data"
    nbs.mkdir()
    for var, value in {"LAB_NOTEBOOKS_DIR": nbs, "LAB_DATA_DIR": data,
                       "LAB_FIGURES_DIR": tmp_path / "figures"}.items():
        monkeypatch.setenv(var, str(value))
    for name, value in {"NOTEBOOKS_DIR": nbs, "DATA_DIR": data, "RESULTS_DB": data / "results.db",
                        "RUNS_DIR": data / "runs", "TMP_DIR": data / "tmp",
                        "FIGURES_DIR": tmp_path / "figures"}.items():
        monkeypatch.setattr(config, name, value)
    notebook(nbs, "01-fine", STORES_A_POINT)
    notebook(nbs, "02-boom", 'raise RuntimeError("boom: the notebook broke")')
    notebook(nbs, "03-lossy", "audit_ok = False\n" + STORES_A_POINT)
    notebook(nbs, "04-after", STORES_A_POINT)
    return tmp_path


def stored_notebooks() -> list[str]:
    return sorted(results.load_points()["notebook"])


def summary_of(out: str) -> str:
    return out.split("\nSummary (", 1)[1]


# ------------------------------------------------------------------ fast: the summary alone

def test_config_takes_its_notebooks_folder_from_the_environment(tmp_path):
    got = subprocess.run([sys.executable, "-c", "from sqlitelab.core import config; print(config.NOTEBOOKS_DIR)"],
                         env={**os.environ, "LAB_NOTEBOOKS_DIR": str(tmp_path)},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert got == str(tmp_path)


def test_failed_audits_lists_the_failing_rows_of_each_audited_table(tmp_path, monkeypatch):
    import pandas as pd
    monkeypatch.setattr(config, "RESULTS_DB", tmp_path / "results.db")
    assert batch.failed_audits("nothing-yet") == {}  # no results.db
    store("r1", "01-x", [point("r1", "01-x"), point("r1", "01-x", audit_ok=False, users=16)])
    store("r2", "02-x", [point("r2", "02-x")])
    results.store_table("r3", "04-sqlite-as-buffer", "buffer_points", pd.DataFrame([
        {"method": "article", "variant": "as_published", "rows_per_txn": 10, "synchronous": "full",
         "total": 1000, "repeat": 1, "rows": 9, "rows_expected": 10, "records_in_payloads": 900,
         "journal_mode": "wal", "audit_ok": False},
        {"method": "tuned", "variant": None, "rows_per_txn": 10, "synchronous": "full", "total": 1000,
         "repeat": 1, "rows": 10, "rows_expected": 10, "records_in_payloads": 1000,
         "journal_mode": "wal", "audit_ok": True}]), path=tmp_path / "results.db")
    one = batch.failed_audits("r1")
    assert list(one) == ["points"] and one["points"].to_dict("records") == [
        {"server": "go-nethttp", "profile": "rails71", "scenario": "rails-writes", "users": 16,
         "repeat": 1, "generator": "loadgen", "acked_writes": 500, "rows_written": 497, "integrity": "ok"}]
    assert batch.failed_audits("r2") == {}
    buf = batch.failed_audits("r3")
    assert list(buf) == ["buffer_points"] and buf["buffer_points"]["method"].tolist() == ["article"]
    done = [{"notebook": n, "run_id": r, "seconds": 1.0, "error": None}
            for n, r in (("01-x", "r1"), ("02-x", "r2"), ("04-sqlite-as-buffer", "r3"))]
    text = batch.summary(done)
    table, *below = text.split("\n\n")
    assert [line.split()[-1] for line in table.splitlines()[1:]] == ["(1)", "ok", "(1)"]
    assert below[0].startswith("AUDIT FAILED: 01-x (r1), 1 row(s) of `points`")
    assert "acked_writes" in below[0] and "497" in below[0] and "inflight_writes" not in below[0]
    assert below[1].startswith("AUDIT FAILED: 04-sqlite-as-buffer (r3), 1 row(s) of `buffer_points`")


def test_the_failing_rows_show_inflight_writes_when_the_points_have_it(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "RESULTS_DB", tmp_path / "results.db")
    store("r1", "01-x", [point("r1", "01-x", audit_ok=False, inflight_writes=3)])
    bad = batch.failed_audits("r1")["points"]
    assert list(bad.columns) == ["server", "profile", "scenario", "users", "repeat", "generator",
                                 "acked_writes", "inflight_writes", "rows_written", "integrity"]
    assert bad["inflight_writes"].tolist() == [3]


def test_a_notebook_over_its_budget_is_named_with_where_its_time_went(tmp_path, monkeypatch):
    import json
    from sqlitelab.notebooks import studies
    from sqlitelab.studies import scales
    monkeypatch.setattr(config, "RESULTS_DB", tmp_path / "results.db")
    allowed = scales.budget(studies()["03-read-write-mix"], "quick")
    pts = [point("r3", "03-read-write-mix", time_window_s=30.0, time_startup_s=10.0,
                 time_shutdown_s=5.0)]
    results.store_run({"run_id": "r3", "notebook": "03-read-write-mix", "notebook_run": "r3",
                       "scale": "quick", "started": results.now_iso(), "wall_seconds": 50.0,
                       "server_timing": json.dumps([{"start_s": 5.0}])}, pts)
    store("r9", "09-network-delay", [point("r9", "09-network-delay")])
    done = [{"notebook": "03-read-write-mix", "run_id": "r3", "seconds": allowed + 1, "error": None},
            {"notebook": "09-network-delay", "run_id": "r9", "seconds": 1.0, "error": None},
            {"notebook": "99-mine", "run_id": "r9", "seconds": 1e6, "error": None}]  # no study, no budget
    text = batch.summary(done, {}, "quick")
    table, over = text.split("\n\n")
    assert table.splitlines()[0].split()[:3] == ["notebook", "seconds", "budget"]
    assert over.splitlines() == [
        f"OVER BUDGET: 03-read-write-mix took {allowed + 1:.0f} s against its {allowed:.0f} s (quick); "
        "window 30 s (60%), generator start-up 10 s (20%), generator shutdown 5 s (10%), "
        "server start 5 s (10%) of the sweeps' 50 s"]
    assert batch.total_line(done[:2], "quick", 10.0) == (
        f"10 s in all, within the budget of {allowed + scales.budget(studies()['09-network-delay'], 'quick'):.0f} s")
    every = [{"notebook": n} for n in scales.budgets(studies().values(), "quick")]
    assert batch.total_line(every, "quick", 901.0) == "901 s in all, OVER the budget of 900 s"
    assert batch.total_line(done[2:], "quick", 5.0) == "5 s in all"


# ------------------------------------------------------------------ notebook: batch.main

@pytest.mark.notebook
def test_a_batch_that_ran_clean_exits_0(lab, capsys):
    assert batch.main(["--only", "01"]) == 0
    out = summary_of(capsys.readouterr().out)
    assert "AUDIT FAILED" not in out and "error" not in out
    assert stored_notebooks() == ["01-fine"]


@pytest.mark.notebook
def test_two_notebooks_run_at_once_from_one_folder(lab):
    """Two papermill runs started together from the same folder (two `make run`s, or the notebook
    tier on two workers) each get their own kernel sockets: neither kernel answers the other's
    client (which papermill reports as "Invalid Signature" and a dead kernel)."""
    from concurrent.futures import ThreadPoolExecutor
    nbs = lab / "notebooks"
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(batch.execute, nbs / f"0{i}-{n}.ipynb", lab / f"out-{i}.ipynb",
                            {"run_id": f"at-once-{i}"}) for i, n in ((1, "fine"), (4, "after"))]
        for run in runs:
            run.result(timeout=120)
    assert sorted(results.load_points()["run_id"]) == ["at-once-1", "at-once-4"]


@pytest.mark.notebook
def test_a_notebook_that_errors_fails_the_batch_and_the_others_still_run(lab, capsys):
    assert batch.main([]) == 1
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("== ")] == \
        ["01-fine", "02-boom", "03-lossy", "04-after"]
    assert "   FAILED: RuntimeError: boom: the notebook broke" in out
    summary = summary_of(out)
    assert "error: RuntimeError: boom: the notebook broke" in summary
    assert stored_notebooks() == ["01-fine", "03-lossy", "04-after"]  # after 02's error and 03's audit
    table = summary.split("\n\n")[0]
    assert "03-lossy" in table and "FAILED (1)" in table


@pytest.mark.notebook
def test_a_failed_audit_fails_the_batch_and_names_the_points(lab, capsys):
    assert batch.main(["--only", "03", "04"]) == 1
    out = summary_of(capsys.readouterr().out)
    table, failed, _ = out.split("\n\n", 2)
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert rows["03-lossy"].rstrip().endswith("FAILED (1)") and rows["04-after"].rstrip().endswith("ok")
    assert " ok " in rows["03-lossy"]  # the notebook itself ran: only its audit failed
    head, columns, values = failed.splitlines()
    assert head.startswith("AUDIT FAILED: 03-lossy (") and "1 row(s) of `points`" in head
    assert columns.split() == ["server", "profile", "scenario", "users", "repeat", "generator",
                               "acked_writes", "inflight_writes", "rows_written", "integrity"]
    assert values.split() == ["go-nethttp", "rails71", "rails-writes", "8", "1", "loadgen",
                              "500", "3", "497", "ok"]
    assert stored_notebooks() == ["03-lossy", "04-after"]


# a real sweep of the lossy server (tests/stacks/lossy-python: it acknowledges before it commits
# and drops a share of its writes), as a notebook would run one
SWEEPS_THE_LOSSY_SERVER = """
from sqlitelab.experiments.sweep import sweep
sweep(notebook=NOTEBOOK, run_id=run_id, servers=["lossy-python"], profiles=["rails71"],
      scenario="mix", scenario_params={"write_share": 1.0, "items": 10}, seed_items=10,
      levels=[4], duration=2, warmup=0.3, calibration=False, generator="loadgen", progress=False)
"""


@pytest.mark.notebook
def test_a_real_lossy_server_fails_its_audit_and_the_batch(lab, monkeypatch, capsys):
    monkeypatch.setenv("LAB_EXTRA_STACKS", str(config.PROJ_ROOT / "tests" / "stacks" / "lossy-python"))
    monkeypatch.setenv("LAB_LOSSY_DROP", "0.2")
    notebook(lab / "notebooks", "05-lossy-server", SWEEPS_THE_LOSSY_SERVER)
    assert batch.main(["--only", "05", "04"]) == 1
    out = summary_of(capsys.readouterr().out)
    table, failed, _ = out.split("\n\n", 2)
    rows = {line.split()[0]: line for line in table.splitlines()[1:]}
    assert rows["05-lossy-server"].rstrip().endswith("FAILED (1)") and rows["04-after"].rstrip().endswith("ok")
    head, columns, values = failed.splitlines()
    assert head.startswith("AUDIT FAILED: 05-lossy-server (") and "1 row(s) of `points`" in head
    got = dict(zip(columns.split(), values.split()))
    assert got["server"] == "lossy-python" and got["integrity"] == "ok"
    assert int(got["rows_written"]) < int(got["acked_writes"])  # acknowledged, never committed
    print(f"\nthe lossy server's point: {got}")
