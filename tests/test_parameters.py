"""Every knob a notebook uses is a parameter (issue 13): each scale setting is a `None` parameter
of its notebook, every parameter says what it is in a comment `papermill --help-notebook`
shows, and a name nothing reads is refused with one line (scales.settings, batch -p)."""
import subprocess
import sys

import pytest

from sqlitelab import batch, config, scales


NOTEBOOKS = batch.notebooks()


def test_every_notebook_has_scales():
    assert sorted(p.stem for p in NOTEBOOKS) == sorted(scales.SCALES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_every_scale_setting_is_a_none_parameter_and_every_parameter_has_help(path):
    declared = batch.parameters(path)
    renamed = {"methods": "methods_run"}  # 04: `methods` is the methods module there
    for name in scales.names(path.stem):
        name = renamed.get(name, name)
        assert name in declared, f"{path.stem}: scale setting {name!r} is not a parameter"
        assert declared[name]["default"] == "None", f"{path.stem}: {name} must default to None"
    for name, p in declared.items():
        assert p["help"].strip(), f"{path.stem}: parameter {name!r} has no comment"


def test_help_notebook_lists_every_parameter_with_its_comment():
    path = config.NOTEBOOKS_DIR / "03-read-write-mix.ipynb"
    out = subprocess.run([sys.executable, "-m", "papermill", "--help-notebook", str(path)],
                         capture_output=True, text=True, timeout=60).stdout
    for name, p in batch.parameters(path).items():
        assert f"  {name}: " in out and p["help"] in out, name


def test_settings_refuses_a_name_no_scale_holds():
    assert scales.settings("03-read-write-mix", "quick", share_users=5)["share_users"] == 5
    assert scales.settings("04-sqlite-as-buffer", "quick", large=None).get("large") is None
    with pytest.raises(ValueError, match=r"no scale setting 'shares_users' \(known: .*share_users"):
        scales.settings("03-read-write-mix", "quick", shares_users=5)


def test_batch_refuses_an_unknown_parameter_in_one_line(capsys):
    assert batch.main(["--only", "03", "-p", "shares_users", "16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown parameter 'shares_users' for notebook 03" in err


def test_batch_passes_a_name_only_to_the_notebooks_that_declare_it():
    paths = batch.notebooks(["03", "04"])
    taken = batch.check_overrides(paths, {"share_users": 16, "consume": False})
    assert taken[paths[0]] == {"share_users": 16} and taken[paths[1]] == {"consume": False}


def test_smoke_parameters_are_all_declared():
    from test_notebooks import SMOKE
    paths = {p.stem: p for p in NOTEBOOKS}
    for stem, params in SMOKE.items():
        assert batch.check_overrides([paths[stem]], params)[paths[stem]] == params
