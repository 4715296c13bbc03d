"""Every knob a notebook uses is a parameter (issue 13): each scale setting is a `None` parameter
of its notebook, every parameter says what it is in a comment `papermill --help-notebook`
shows, and a name nothing reads is refused with one line (scales.settings, batch -p). A bad
value, run through a real notebook with papermill, stops it with one line naming the parameter
and what it accepts, before any server starts (scales.ACCEPTS, sweep's Spec checks)."""
import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import nbformat
import psutil
import pytest

from sqlitelab import batch
from sqlitelab.core import config, results
from sqlitelab.infra import apps
from sqlitelab import notebooks
from sqlitelab.studies import scales
from sqlitelab.infra import servers as stacks
from sqlitelab.report import methods


NOTEBOOKS = batch.notebooks()


def test_every_notebook_has_scales():
    assert sorted(p.stem for p in NOTEBOOKS) == notebooks.ids()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_scale_setting_is_a_none_parameter_and_every_parameter_has_help(path):
    declared = batch.parameters(path)
    renamed = {"methods": "methods_run"}  # 04: `methods` is the methods module there
    for name in scales.names(notebooks.study(path.stem)):
        name = renamed.get(name, name)
        assert name in declared, f"{path.stem}: scale setting {name!r} is not a parameter"
        assert declared[name]["default"] == "None", f"{path.stem}: {name} must default to None"
    for name, p in declared.items():
        assert p["help"].strip(), f"{path.stem}: parameter {name!r} has no comment"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_papermill_reads_every_line_of_the_parameters_cell(path):
    """papermill skips a line it cannot parse (a second `=` in the comment, say) with a warning
    only: that parameter would then be unknown to `batch -p` and `--help-notebook`."""
    cell = next(c for c in json.loads(path.read_text())["cells"]
                if "parameters" in c.get("metadata", {}).get("tags", []))
    assigned = [re.match(r"(\w+) = ", line).group(1) for line in "".join(cell["source"]).splitlines()
                if re.match(r"\w+ = ", line)]
    assert sorted(assigned) == sorted(batch.parameters(path)), path.stem


def test_help_notebook_lists_every_parameter_with_its_comment():
    path = config.NOTEBOOKS_DIR / "03-read-write-mix.ipynb"
    out = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(path)],
                         capture_output=True, text=True, timeout=60).stdout
    for name, p in batch.parameters(path).items():
        assert f"  {name}: " in out and p["help"] in out, name


def test_settings_refuses_a_name_no_scale_holds():
    assert scales.settings(notebooks.study("03-read-write-mix"), "quick", share_users=5)["share_users"] == 5
    assert scales.settings(notebooks.study("04-sqlite-as-buffer"), "quick", large=None).get("large") is None
    with pytest.raises(ValueError, match=r"no scale setting 'shares_users' \(known: .*share_users"):
        scales.settings(notebooks.study("03-read-write-mix"), "quick", shares_users=5)


def test_a_notebook_passes_its_parameters_through_by_name():
    """from_parameters takes each scale setting the namespace holds (None: the scale's), a renamed
    one as given, and refuses a module under a setting's name rather than passing it on."""
    ns = {"levels": [2, 4], "duration": None, "share_users": 7, "unrelated": object()}
    cfg = scales.from_parameters(notebooks.study("03-read-write-mix"), "quick", ns)
    assert cfg == scales.settings(notebooks.study("03-read-write-mix"), "quick", levels=[2, 4], share_users=7)
    assert cfg["duration"] == scales.settings(notebooks.study("03-read-write-mix"), "quick")["duration"]
    with pytest.raises(ValueError, match=r"^levels must be a non-empty list"):
        scales.from_parameters(notebooks.study("03-read-write-mix"), "quick", {"levels": []})
    with pytest.raises(ValueError, match=r"^methods: the notebook holds <module 'sqlitelab.report.methods'"):
        scales.from_parameters(notebooks.study("04-sqlite-as-buffer"), "quick", {"methods": methods})
    got = scales.from_parameters(notebooks.study("04-sqlite-as-buffer"), "quick", {"methods": methods}, methods=["article"])
    assert got["methods"] == ["article"]


def test_every_scale_value_is_one_its_setting_accepts():
    """ACCEPTS refuses bad values, not the scales' own: each passes as an override; and every
    setting but the named strings and 04's `large` dict has a check."""
    unchecked = {"synchronous", "methods", "variants", "large"}
    for nb in notebooks.ids():
        by_scale = notebooks.study(nb).SCALES
        assert set(scales.names(notebooks.study(nb))) - set(scales.ACCEPTS) <= unchecked, nb
        for scale, values in by_scale.items():
            assert scales.settings(notebooks.study(nb), scale, **values) == {**values, "scale": scale,
                                                            "budget_seconds": scales.budget(notebooks.study(nb), scale)}


@pytest.mark.parametrize("name,value,says", [
    ("levels", [-1], "levels must be a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4], not [-1]"),
    ("levels", [], "levels must be a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4], not []"),
    ("levels", [True], "levels must be a non-empty list of integers >= 1"),
    ("duration", 0, "duration must be a number of seconds > 0, not 0"),
    ("duration", "ten", "duration must be a number of seconds > 0, not 'ten'"),
    ("warmup", -1, "warmup must be a number of seconds >= 0, not -1"),
    ("repeats", 0, "repeats must be an integer >= 1 (runs of each level), not 0"),
    ("repeats", 1.5, "repeats must be an integer >= 1 (runs of each level), not 1.5"),
    ("generator", "wrk", "generator must be one of locust, loadgen, not 'wrk'"),
])
def test_settings_refuses_a_bad_value_in_one_line(name, value, says):
    with pytest.raises(ValueError) as e:
        scales.settings(notebooks.study("01-linear-writes"), "quick", **{name: value})
    assert str(e.value).startswith(says) and "\n" not in str(e.value)


@pytest.mark.parametrize("name,value,says", [
    ("duration", 0, "duration must be a number of seconds > 0, not 0"),
    ("duration", "ten", "duration must be a number of seconds > 0, not 'ten'"),
    ("warmup", -0.5, "warmup must be a number of seconds >= 0, not -0.5"),
    ("warmup", None, "warmup must be a number of seconds >= 0, not None"),
    ("levels", [0], "levels must be a non-empty list of integers >= 1 (concurrent users), e.g. [1, 2, 4], not [0]"),
    ("repeats", True, "repeats must be an integer >= 1 (runs of each level), not True"),
    ("processes", 0, 'processes must be "auto" or an integer >= 1 (generator processes), not 0'),
    ("crosscheck", [0], "crosscheck must be an integer >= 1 or a non-empty list of them (concurrent users), not [0]"),
    ("rates", 100, "rates must be a non-empty list of numbers > 0 (requests/s), e.g. [100, 200], not 100"),
    ("server_repeats", {"go-nethttp": 0}, "server_repeats['go-nethttp'] must be an integer >= 1 (runs of each level), not 0"),
    ("servers", ["nope"], "unknown servers ['nope']; known: "),
])
def test_a_sweep_refuses_a_bad_value_before_anything_starts(name, value, says):
    from sqlitelab.experiments import sweep
    with pytest.raises(ValueError) as e:
        sweep.spec(notebook="01-linear-writes", **{name: value})
    assert str(e.value).startswith(says) and "\n" not in str(e.value)


def test_a_sweep_refuses_an_argument_it_has_not_and_needs_its_notebook():
    from sqlitelab.experiments import sweep
    with pytest.raises(TypeError, match=r"sweep has no argument 'level' \(known: notebook, experiment, "):
        sweep.spec(notebook="01-linear-writes", level=[1])
    with pytest.raises(TypeError, match="a sweep needs 'notebook'"):
        sweep.spec(levels=[1])


def test_every_setting_of_a_sweep_is_documented_once_with_its_default():
    """sweep's documentation is its Settings': every argument, its default and its meaning."""
    from sqlitelab.experiments import sweep
    for f in dataclasses.fields(sweep.Settings):
        assert f.metadata["doc"], f.name
        assert f"    {f.name} (" in sweep.sweep.__doc__, f.name
        accepts = f.metadata["accepts"]
        assert accepts is None or accepts in scales.ACCEPTS, f"{f.name}: no check {accepts!r} in scales.ACCEPTS"


def test_batch_refuses_an_unknown_parameter_in_one_line(capsys, lab_data):
    assert batch.main(["--only", "01", "03", "-p", "shares_users", "16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown parameter 'shares_users' for notebooks 01, 03" in err
    assert not (lab_data / "runs").exists(), "batch ran a notebook before refusing"


def test_batch_passes_a_name_only_to_the_notebooks_that_declare_it():
    paths = batch.notebooks(["03", "04"])
    taken = batch.check_overrides(paths, {"share_users": 16, "consume": False})
    assert taken[paths[0]] == {"share_users": 16} and taken[paths[1]] == {"consume": False}


def test_smoke_parameters_are_all_declared():
    from test_notebooks import SMOKE
    paths = {p.stem: p for p in NOTEBOOKS}
    for stem, params in SMOKE.items():
        assert batch.check_overrides([paths[stem]], params)[paths[stem]] == params


@pytest.fixture
def lab_data(tmp_path, monkeypatch):
    """A data and figures folder of the test's own: for this process (config's paths) and for
    the notebooks' kernels (LAB_DATA_DIR, LAB_FIGURES_DIR, inherited)."""
    data = tmp_path / "data"
    monkeypatch.setenv("LAB_DATA_DIR", str(data))
    monkeypatch.setenv("LAB_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.delenv("LAB_PORT", raising=False)  # marks a server's process (servers_started)
    for name, value in {"DATA_DIR": data, "RESULTS_DB": data / "results.db", "RUNS_DIR": data / "runs",
                        "TMP_DIR": data / "tmp", "FIGURES_DIR": tmp_path / "figures"}.items():
        monkeypatch.setattr(config, name, value)
    return data


@contextlib.contextmanager
def servers_started():
    """The command lines of the processes started under this one (a notebook's kernel and its
    children) that carry a server's LAB_PORT (servers.Server.start), watched while the block runs."""
    seen, stop, me = [], threading.Event(), psutil.Process()

    def watch():
        while not stop.is_set():
            for p in me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if "LAB_PORT" in p.environ():
                        seen.append(" ".join(p.cmdline()))
            stop.wait(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        stop.set()
        t.join()


def assert_refused_before_anything_ran(done: dict, data, started: list, *words: str):
    """One line, saying `words` (the parameter and what it accepts); the notebook stopped before
    its first measurement: no server process, no stored row, nothing in data/ but the executed
    notebook."""
    error = done["error"]
    assert error and "\n" not in error, f"not one line: {error!r}"
    for w in words:
        assert w in error, f"{w!r} not in {error!r}"
    assert not started, f"a server started: {started}"
    assert not (data / "results.db").exists(), "the run stored something"
    assert not (data / "tmp").exists() or not any((data / "tmp").iterdir()), "a sweep made a scratch database"
    runs = data / "runs"
    assert sorted(p.relative_to(runs).as_posix() for p in runs.rglob("*")) == \
        [done["run_id"], f"{done['run_id']}/{done['notebook']}.ipynb"], "a server log or run folder was written"
    cells = nbformat.read(done["executed"], as_version=4).cells
    ran = [c for c in cells if c.cell_type == "code" and c.get("execution_count")]
    err, = [o for o in ran[-1].get("outputs", []) if o.get("output_type") == "error"]
    # the cell shows the refusal's one line and where its traceback is kept, and it is kept there
    assert err["traceback"] == [error, f"(its traceback: {data / 'logs' / 'refusals.log'})"], err["traceback"]
    assert "Traceback (most recent call last)" in (data / "logs" / "refusals.log").read_text()
    assert not any("sweep(" in c.source or "baseline." in c.source for c in ran[:-1]), \
        "a cell that measures ran before the error"


LEVELS = "a non-empty list of integers >= 1"
# (notebook, parameter, value, what the error must say it accepts): each kind of value once, on
# a notebook it applies to (a papermill run costs a kernel's start; the checks are one function,
# scales.settings, tested on every value in the fast tier above)
BAD = [
    ("01", "levels", [-1], LEVELS),
    ("02", "levels", [], LEVELS),      # 02 sweeps its article_levels first: refused before that
    ("09", "duration", 0, "a number of seconds > 0"),
    ("07", "duration", "ten", "a number of seconds > 0"),
    ("03", "servers", ["nope"], f"known: {list(stacks.STACKS)}"),
    ("05", "repeats", 0, "an integer >= 1"),
    ("04", "totals", [], "a non-empty list of integers >= 1"),
]


@pytest.mark.notebook
@pytest.mark.parametrize("prefix,name,value,accepts", BAD,
                         ids=[f"{b[0]}-{b[1]}={b[2]!r}" for b in BAD])
def test_a_bad_value_stops_the_notebook_in_one_line_before_any_server(prefix, name, value, accepts, lab_data):
    path, = batch.notebooks([prefix])
    with servers_started() as started:
        done = batch.run_notebook(path, "quick", {name: value}, log_output=False)
    said = f"unknown {name}" if name == "servers" else f"{name} must be"
    assert_refused_before_anything_ran(done, lab_data, started, said, repr(value), accepts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_notebook_checks_its_settings_in_the_cell_after_its_parameters(path):
    nb = nbformat.read(path, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    assert "scales.from_parameters(this, scale, globals()" in nb.cells[i + 1].source


@pytest.mark.notebook
@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.stem[:2] in ("01", "08")], ids=lambda p: p.stem[:2])
def test_an_unknown_scale_stops_the_notebook_in_one_line(path, lab_data):
    """Every notebook calls scales.settings in the cell after its parameters (checked for each in
    the fast tier); two of them run here."""
    with servers_started() as started:
        done = batch.run_notebook(path, "huge", log_output=False)
    assert_refused_before_anything_ran(done, lab_data, started, "scale must be one of ['quick', 'seed'], not 'huge'")


@pytest.mark.notebook
def test_batch_reports_a_bad_value_and_exits_1(lab_data, capsys):
    with servers_started() as started:
        assert batch.main(["--only", "01", "-p", "duration", "ten"]) == 1
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if "FAILED:" in line]
    assert failed == ["   FAILED: ValueError: duration must be a number of seconds > 0, not 'ten'"], out
    assert not started and not (lab_data / "results.db").exists()


@pytest.mark.notebook
def test_notebook_10_refuses_a_bad_app_in_one_line_before_anything_starts(lab_data, tmp_path):
    """Your own app (example None): a URL off loopback, and a locustfile that defines no user,
    each stop notebook 10 in one line before any process of the app or any load."""
    nouser = tmp_path / "nouser.py"
    nouser.write_text("from locust import HttpUser\n\nREADERS = 3\n")
    path, = batch.notebooks(["10"])
    for given, words in [
        ({"url": "http://10.0.0.1:80", "locustfile": str(nouser)}, ("url", "loopback only")),
        ({"command": "python3 -m http.server {port}", "locustfile": str(nouser)},
         ("cannot be run", "defines no User class")),
    ]:
        shutil.rmtree(lab_data, ignore_errors=True)
        with servers_started() as started:
            done = batch.run_notebook(path, "quick", {"example": None, **given}, log_output=False)
        assert_refused_before_anything_ran(done, lab_data, started, *words)


@pytest.mark.notebook
def test_notebook_10_measures_a_strangers_app_that_makes_its_own_table_first_try(lab_data, tmp_path):
    """An app the suite did not write (tests/apps/notes_app.py: the standard library's HTTP server,
    its table created at start, a lock answered as a 500 HTML page) started by its command, its
    database file not there yet, `example` left at its default, `writes` as the JSON text
    papermill's -p passes, run by papermill itself to a path of the user's: it is the user's app
    that is measured, every acknowledged write in the file the app made, its figures in its run's
    folder; `make report`'s re-making puts the run where reports look, and its page shows the
    audit. A named example beside the app's settings is refused in one line naming both."""
    import papermill as pm
    from sqlitelab import replay
    from sqlitelab.report import publish
    apps_dir = config.PROJ_ROOT / "tests" / "apps"
    given = {"name": "notes", "command": f"{sys.executable} {apps_dir / 'notes_app.py'} --port {{port}} --db {{db}}",
             "db": str(tmp_path / "notes.db"), "locustfile": str(apps_dir / "notes_locustfile.py"),
             "writes": '{"method": "POST", "path": "^/notes$", "status": [201]}',
             "count_query": "SELECT count(*) FROM notes", "levels": [1, 8], "plain_users": 0}
    path, = batch.notebooks(["10"])
    pm.execute_notebook(str(path), str(tmp_path / "mine.ipynb"), parameters=given, kernel_name=config.KERNEL_NAME,
                        progress_bar=False)
    pts = results.load_points(lab_data / "results.db")
    run_id, = set(pts["notebook_run"])
    assert set(pts["server"]) == {"notes"} and list(pts["users"]) == [1, 8]
    assert pts["audit_ok"].all() and (pts["acked_writes"] > 0).all() and (pts["integrity"] == "ok").all()
    assert not (tmp_path / "notes.db").exists(), "the app wrote where the user's file would be"
    made = lab_data / "runs" / run_id / "app" / "notes.db"
    assert apps.count(made, "SELECT count(*) FROM notes") >= int(pts["acked_writes"].sum())
    # its figures in its run's folder, none in the collection's
    assert (lab_data / "runs" / run_id / "figures" / "10-your-app" / "throughput.png").exists()
    assert not (tmp_path / "figures" / "10-your-app").exists()
    # reports look in the run's folder: the re-making puts the executed notebook there, and nothing else
    assert [m["run_id"] for m in publish.missing("quick")] == [run_id] and publish.newest("quick") == []
    before = sorted(p for p in (lab_data / "runs" / run_id).rglob("*"))
    assert replay.remake_missing("quick") == [(run_id, None)]
    assert sorted(p for p in (lab_data / "runs" / run_id).rglob("*")) == sorted(
        before + [lab_data / "runs" / run_id / "10-your-app.ipynb"])
    found, = publish.newest("quick")
    assert found.run_id == run_id and publish.missing("quick") == []
    page = publish.write(found, tmp_path / "report")["html"].read_text()
    assert "rows gained" in page and "writes acknowledged" in page and ">ok<" in page and run_id in page
    shutil.rmtree(lab_data, ignore_errors=True)
    with servers_started() as started:
        done = batch.run_notebook(path, "quick", {**given, "example": "bundled"}, log_output=False)
    assert_refused_before_anything_ran(done, lab_data, started, "example 'bundled' and settings of your own")


def test_notebook_10_stores_the_files_it_was_given_as_absolute_paths(tmp_path, monkeypatch):
    """A papermill run started from the checkout names `tests/apps/notes_locustfile.py`; its
    re-making (make report) runs from the notebooks' folder and must find the same file."""
    from sqlitelab.notebooks import your_app as this
    monkeypatch.chdir(tmp_path)
    got = this.notebook_parameters({"locustfile": "apps/l.py", "db": "~/x.db", "command": "python3 app.py",
                                    "scenario": None})
    assert got["locustfile"] == str(tmp_path / "apps" / "l.py")
    assert got["db"] == os.path.expanduser("~/x.db") and got["command"] == "python3 app.py"
    assert got["scenario"] is None
