"""One manifest per stack: servers/<stack>/stack.toml says what the lab knows of a stack, and
everything else reads it — servers.STACKS, the figures' colours (plots.style_for), the
calibration's candidates, `make distclean`, .gitignore. No server is started here."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from sqlitelab.core import config
from sqlitelab.experiments import sweep
from sqlitelab.notebooks import sqlite_vs_postgres
from sqlitelab.infra import servers
from sqlitelab.load import calibrate
from sqlitelab.report import plots

SERVERS = config.SERVERS_DIR
BUNDLED = {name: s for name, s in servers.STACKS.items() if s["bundled"]}


def manifest(name: str) -> dict:
    return tomllib.loads((SERVERS / name / servers.MANIFEST).read_text())


def stack_folder(folder: Path, text: str | None = None) -> Path:
    folder.mkdir(parents=True)
    run = folder / "run"
    run.write_text("#!/bin/sh\nexit 0\n")
    run.chmod(0o755)
    if text is not None:
        (folder / servers.MANIFEST).write_text(text)
    return folder


def test_the_registry_is_the_folders_with_a_manifest():
    with_manifest = sorted(p.name for p in SERVERS.iterdir() if (p / servers.MANIFEST).is_file())
    assert sorted(BUNDLED) == with_manifest
    assert list(BUNDLED) == list(servers.STACKS)[:len(BUNDLED)]  # bundled first, extras after
    # every folder with a `run` is a stack: none was left without its manifest
    assert sorted(p.name for p in SERVERS.iterdir() if (p / "run").is_file()) == with_manifest
    for name, s in BUNDLED.items():
        assert servers.stack_dir(name) == SERVERS / name and (SERVERS / name / "run").is_file()


def test_the_bundled_stacks_keep_their_order():
    """Legends and tables list stacks in STACKS' order (plots._order): their `order` keys."""
    assert list(BUNDLED) == sorted(BUNDLED, key=lambda n: (BUNDLED[n]["order"], n))
    assert list(BUNDLED)[:4] == ["python-fastapi", "rust-axum", "go-nethttp", "ruby-puma"]
    assert [plots._order(s)[1] for s in BUNDLED] == list(range(len(BUNDLED)))


def test_every_manifest_sets_the_required_keys_with_their_types():
    for name in BUNDLED:
        data = manifest(name)
        assert set(servers.REQUIRED_KEYS) <= set(data) <= set(servers.MANIFEST_KEYS), name
        for key, value in data.items():
            assert type(value) is servers.MANIFEST_KEYS[key][0], (name, key)
        assert servers.stack_title(name) == data["title"] != name
    assert servers.stack_title("no-such-stack") == "no-such-stack"


@pytest.mark.parametrize("text, error", [
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = false\nmultiprocess = false\n"
     "colour = 'red'\n", r"unknown key\(s\) colour; known: title, order"),
    ("title = 'x'\norder = '1'\ncolor = '#000000'\nmarker = 'o'\ncompiled = false\nmultiprocess = false\n",
     r"order must be of type int, not str '1'"),
    ("title = 'x'\norder = true\ncolor = '#000000'\nmarker = 'o'\ncompiled = false\nmultiprocess = false\n",
     r"order must be of type int, not bool True"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = 'yes'\nmultiprocess = false\n",
     r"compiled must be of type bool, not str 'yes'"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "build_outputs = ['../elsewhere']\n", r"build_outputs must be paths inside the stack's folder"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "[knobs.pool]\nenv = 'POOL'\nvalues = ['a']\ndefault = 'a'\ndescription = 'x'\n",
     r"knobs.pool must have exactly env, values, default, description"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "[knobs.pool]\nenv = 'LAB_POOL'\nvalues = ['a']\ndefault = 'b'\ndescription = 'x'\n",
     r"knobs.pool must have exactly env, values, default, description"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "[cannot.cache]\nvalues = ['public']\nwhy = 'x'\n", r"cannot.cache must have exactly values \(a non-empty "
     r"list of the knob's values: private\|shared\) and why"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "[cannot.cache]\nvalues = ['shared']\n", r"cannot.cache must have exactly values"),
    ("title = 'x'\norder = 1\ncolor = '#000000'\nmarker = 'o'\ncompiled = true\nmultiprocess = false\n"
     "[cannot.threads]\nvalues = ['2']\nwhy = 'x'\n", r"cannot.threads must have exactly values \(a non-empty "
     r"list of the knob's values\) and why \(words\), for a knob of servers/shared.toml with a list of values"),
    ("title = 'x'\norder = 1\n", r"missing key\(s\) color, marker, compiled, multiprocess"),
    ("title = \n", r"not valid TOML"),
])
def test_a_malformed_manifest_is_a_clear_error(tmp_path, text, error):
    folder = stack_folder(tmp_path / "servers" / "bad-stack", text)
    with pytest.raises(servers.StackManifestError, match=re.escape(str(folder / "stack.toml")) + ": " + error):
        servers.bundled_stacks(tmp_path / "servers")
    if "missing" not in error:  # an extra stack's manifest is checked the same way (all keys optional)
        with pytest.raises(servers.StackManifestError, match=error):
            servers.extra_stacks(str(folder))


def test_a_bundled_folder_without_a_manifest_is_no_stack_and_a_missing_one_is_named(tmp_path):
    stack_folder(tmp_path / "servers" / "half-done")
    assert servers.bundled_stacks(tmp_path / "servers") == {}
    with pytest.raises(servers.StackManifestError, match=r"half-done/stack.toml does not exist"):
        servers.read_manifest(tmp_path / "servers" / "half-done")


def test_a_copied_manifest_makes_a_new_bundled_stack(tmp_path):
    """A new bundled stack is its folder: `run` and stack.toml (servers/README.md, Add a stack)."""
    root = tmp_path / "servers"
    for name in BUNDLED:
        stack_folder(root / name, (SERVERS / name / servers.MANIFEST).read_text())
    text = (SERVERS / "go-nethttp" / "stack.toml").read_text().replace("order = 3", "order = 9")
    stack_folder(root / "zig-zap", text)
    found = servers.bundled_stacks(root)
    assert list(found) == list(BUNDLED) + ["zig-zap"]
    assert found["zig-zap"]["compiled"] and found["zig-zap"]["build_outputs"] == ["bin"]


def test_an_extra_stack_takes_its_manifest_or_the_defaults(tmp_path):
    plain = stack_folder(tmp_path / "plain-app")
    own = stack_folder(tmp_path / "own-app", 'title = "My app"\nmultiprocess = true\n')
    found = servers.extra_stacks(os.pathsep.join([str(plain), str(own)]))
    assert found["plain-app"] == {**{k: v for k, (_, v) in servers.MANIFEST_KEYS.items()},
                                  "dir": plain, "bundled": False}
    assert found["own-app"]["title"] == "My app" and found["own-app"]["multiprocess"] is True
    assert found["own-app"]["compiled"] is False and found["own-app"]["color"] is None


def test_style_for_gives_each_stack_its_declared_colour_and_an_extra_stack_a_spare_one(tmp_path, monkeypatch):
    for name in BUNDLED:
        data = manifest(name)
        assert plots.style_for(name) == {"color": data["color"], "marker": data["marker"],
                                         "markerfacecolor": data["color"], "gid": f"stack:{name}"}
    a = stack_folder(tmp_path / "a-app")
    b = stack_folder(tmp_path / "b-app", 'color = "#112233"\n')
    for name, entry in servers.extra_stacks(os.pathsep.join([str(a), str(b)])).items():
        monkeypatch.setitem(servers.STACKS, name, entry)
    styles = {s: plots.style_for(s) for s in servers.STACKS}
    assert styles["b-app"]["color"] == "#112233"
    assert len({s["color"].lower() for s in styles.values()}) == len(styles), "two stacks share a colour"
    assert len({s["marker"] for s in styles.values()}) == len(styles), "two stacks share a marker"
    assert styles["a-app"]["color"] in plots.CATEGORY_COLORS
    limit_colours = {m["color"].lower() for m in plots.LIMIT_MARKS.values()}
    assert not {s["color"].lower() for s in styles.values()} & limit_colours
    assert list(plots.STACK_STYLES)[-2:] == ["a-app", "b-app"]  # after the bundled ones, in legends too
    with pytest.raises(ValueError, match="no style for stack 'cobol-cics'"):
        plots.style_for("cobol-cics")


def test_the_compiled_stacks_are_calibrations_candidates(tmp_path, monkeypatch):
    compiled = tuple(sorted(n for n in BUNDLED if manifest(n)["compiled"]))
    assert calibrate.CANDIDATES == servers.compiled_stacks() == compiled
    assert {"go-nethttp", "rust-axum"} <= set(compiled)  # a new compiled stack joins them
    # an extra stack is never a calibration target, compiled or not
    for name, entry in servers.extra_stacks(str(stack_folder(tmp_path / "x", "compiled = true\n"))).items():
        monkeypatch.setitem(servers.STACKS, name, entry)
    assert servers.compiled_stacks() == compiled


def test_build_outputs_are_what_make_distclean_removes_and_git_ignores():
    declared = {f"servers/{n}/{out}" for n in BUNDLED for out in BUNDLED[n]["build_outputs"]}
    assert declared >= {"servers/rust-axum/target", "servers/go-nethttp/bin"}
    if shutil.which("make"):
        made = subprocess.run(["make", "-s", "-n", "distclean"], cwd=config.PROJ_ROOT,
                              capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        removed = set(made.stdout.replace("\\\n", " ").split())
        assert declared <= removed, f"make distclean does not remove {sorted(declared - removed)}"
    # git's own answer, so that a stack's folder may carry its own .gitignore
    for out in declared:
        ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q", f"{out}/"],
                                 cwd=config.PROJ_ROOT, capture_output=True, text=True, timeout=60)
        assert ignored.returncode == 0, \
            f"{out}/ is not ignored: add it to servers/{Path(out).parts[1]}/.gitignore ({ignored.stderr.strip()})"


def test_a_stack_that_cannot_run_a_profile_sits_out_of_that_profile_alone_and_the_sweep_says_why(tmp_path, monkeypatch):
    """A stack.toml's [cannot] (a driver without shared cache): the sweep runs every other pair,
    records the pair it left out with the reason, and refuses a sweep left with nothing; on
    Postgres, where SQLite's knobs are not set, nothing sits out."""
    folder = stack_folder(tmp_path / "no-cache-app", 'title = "No cache"\n[cannot.cache]\nvalues = ["shared"]\n'
                                                      'why = "its driver has no shared cache"\n')
    for name, entry in servers.extra_stacks(str(folder)).items():
        monkeypatch.setitem(servers.STACKS, name, entry)
    assert servers.cannot("no-cache-app", servers.profile_knobs("go-seed004")) == \
        "No cache cannot run LAB_CACHE=shared: its driver has no shared cache"
    assert servers.cannot("no-cache-app", servers.profile_knobs("rails71")) is None
    assert servers.cannot("no-cache-app", {"cache": "shared"}, database="postgres") is None
    assert servers.cannot("go-nethttp", {"cache": "shared"}) is None
    s = sweep.spec(notebook="t", servers=["go-nethttp", "no-cache-app"], profiles=["rails71", "go-seed004"])
    assert s.pairs() == [("go-nethttp", "rails71"), ("go-nethttp", "go-seed004"), ("no-cache-app", "rails71")]
    assert [(st, p) for r in s.order() for st, p, _ in r] == s.pairs()
    assert s.sat_out() == {"no-cache-app · go-seed004": "No cache cannot run LAB_CACHE=shared: its driver has no shared cache"}
    assert s.record()["sat_out"] == s.sat_out()
    # a knob of the sweep's own counts as the profile's, and one set to None clears it
    assert list(sweep.spec(notebook="t", servers=["go-nethttp", "no-cache-app"], profiles=["rails71"],
                           knobs={"cache": "shared"}).sat_out()) == ["no-cache-app · rails71"]
    assert not sweep.spec(notebook="t", servers=["no-cache-app"], profiles=["go-seed004"], knobs={"cache": None}).sat_out()
    with pytest.raises(ValueError, match="the sweep has nothing its stacks can run: No cache cannot run LAB_CACHE=shared"):
        sweep.spec(notebook="t", servers=["no-cache-app"], profiles=["go-seed004"])


def test_openapi_names_no_stack():
    """/health's `server` is the folder's name: a new stack needs no edit of openapi.yaml."""
    spec = yaml.safe_load((SERVERS / "openapi.yaml").read_text())
    server = spec["components"]["schemas"]["Health"]["properties"]["server"]
    assert server["type"] == "string" and "enum" not in server


def test_every_profile_has_a_title():
    profiles = servers.load_profiles()
    for name, p in profiles.items():
        assert isinstance(p.get("title"), str) and p["title"] and p["title"] != name, name
    assert len({p["title"] for p in profiles.values()}) == len(profiles)
    assert servers.profile_title("rails71") == "Rails 7.1 defaults"
    assert servers.profile_title("rails71-retries+rails-dev") == \
        f"{profiles['rails71-retries']['title']} + {profiles['rails-dev']['title']}"
    assert servers.profile_title("no-such-profile") == "no-such-profile"
    assert servers.profile_title("rails8+nope") == f"{profiles['rails8']['title']} + nope"


def test_a_stack_only_knob_reaches_its_stack_alone():
    """go-nethttp's `pool` and the Ruby stacks' `yjit` (their stack.toml's [knobs]): a profile's goes
    to the stacks that declare it and is left out for the others; set by hand for another stack it
    is refused."""
    assert servers.STACK_ONLY_KNOBS == {
        name: tuple(s for s in BUNDLED if name in manifest(s).get("knobs", {}))
        for stack in BUNDLED for name in manifest(stack).get("knobs", {})}
    assert servers.STACK_ONLY_KNOBS["pool"] == ("go-nethttp",)
    assert servers.STACK_ONLY_KNOBS["yjit"] == ("ruby-puma", "ruby-rails")
    assert servers.knob_env("go-seed004", stack="go-nethttp")["LAB_POOL"] == "default"
    assert "LAB_POOL" not in servers.knob_env("go-seed004", stack="python-fastapi")
    assert servers.knob_env("rails71", stack="ruby-puma", yjit="on")["LAB_YJIT"] == "on"
    with pytest.raises(ValueError, match="knob 'yjit' is taken by ruby-puma, ruby-rails only; go-nethttp does not take it"):
        servers.knob_env("rails71", stack="go-nethttp", yjit="on")
    with pytest.raises(ValueError, match="is taken by go-nethttp only"):
        servers.knob_env("rails71", pool="default")  # no stack named: no stack's own knob
    assert servers.taking("go-seed004-fixed-pool", list(BUNDLED)) == ["go-nethttp"]
    assert servers.taking("rails71", list(BUNDLED)) == [] and servers.taking(None, list(BUNDLED)) == []


def test_a_variant_beyond_the_article_runs_on_the_stacks_it_changes():
    main = sweep.spec(notebook="05-single-machine", servers=["python-fastapi", "go-nethttp"],
                      profiles=["go-seed004"], scenario=["hello"], levels=[4])
    (beyond,) = main.beyond("go-seed004-fixed-pool")
    assert beyond.servers == ("go-nethttp",) and beyond.profiles == ("go-seed004-fixed-pool",)
    assert beyond.levels == main.levels
    # its own runs row beside the sweep's, never in its place
    assert beyond.run_id("hello") == main.run_id("hello").replace("/hello", "/go-seed004-fixed-pool/hello")
    assert main.beyond("rails71") == [] and main.beyond(None) == []
    with pytest.raises(ValueError, match="sweeps 1 and 2 of this run share the run id"):
        sweep.run(main, main)  # refused before anything starts: the second would replace its runs rows
    with pytest.raises(ValueError, match="is taken by ruby-puma, ruby-rails only"):
        sweep.spec(notebook="01-linear-writes", servers=["python-fastapi"], profiles=["rails71"],
                   scenario="hello", levels=[1], knobs={"yjit": "on"})


# ------------------------------------------------------------------ a notebook's `servers` (issue 47)

NOTEBOOKS = sorted(config.NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"))


def parameters_cell(path: Path) -> tuple[str, str]:
    """A notebook's parameters cell and the cell after it, as source text."""
    cells = json.loads(path.read_text())["cells"]
    i = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    return "".join(cells[i]["source"]), "".join(cells[i + 1]["source"])


def test_none_is_every_bundled_stack_in_their_order():
    assert servers.chosen(None) == servers.bundled() == list(BUNDLED)
    assert servers.chosen(None) == sorted(BUNDLED, key=lambda name: manifest(name)["order"])
    four = ["python-fastapi", "rust-axum", "go-nethttp", "ruby-puma"]  # a new stack takes its own place
    assert [s for s in servers.chosen(None) if s in four] == four
    assert servers.chosen(["go-nethttp", "ruby-puma"]) == ["go-nethttp", "ruby-puma"]  # a list: its order
    assert servers.chosen(("rust-axum",)) == ["rust-axum"]


@pytest.mark.parametrize("scale, other", [("quick", "seed"), ("seed", "quick")])
def test_a_scale_leaves_out_a_stack_that_says_so_unless_a_notebook_names_it(scale, other, tmp_path, monkeypatch):
    out = [name for name in BUNDLED if not manifest(name).get(scale, True)]
    every = servers.chosen(None)
    assert servers.chosen(None, scale=scale) == [s for s in every if s not in out]
    for name in out:  # named (01's article_server): kept, in its place
        assert servers.chosen(None, scale=scale, named=[name]) == [s for s in every if s not in out or s == name]
    assert servers.chosen(["ruby-rails"], scale=scale) == ["ruby-rails"]  # a list is what it says
    root = tmp_path / "servers"  # a new folder that sits out this scale: out of it, in the other
    for name in BUNDLED:
        stack_folder(root / name, (SERVERS / name / servers.MANIFEST).read_text())
    text = (SERVERS / "go-nethttp" / "stack.toml").read_text().replace("order = 3", "order = 9")
    stack_folder(root / "zig-zap", text.replace("\nmultiprocess =", f"\n{scale} = false\nmultiprocess =", 1))
    monkeypatch.setattr(servers, "STACKS", servers.bundled_stacks(root))
    assert "zig-zap" in servers.chosen(None) and "zig-zap" in servers.chosen(None, scale=other)
    assert "zig-zap" not in servers.chosen(None, scale=scale)
    assert servers.chosen(None, scale=scale, named=["zig-zap"])[-1] == "zig-zap"


@pytest.mark.parametrize("value, says", [
    (["rust-axum", "cobol-cics"], "unknown servers ['cobol-cics']; known: "),
    ("rust-axum", "servers must be a non-empty list of stacks, not 'rust-axum'"),
    ([], "servers must be a non-empty list of stacks, not []"),
    (["rust-axum", "rust-axum"], "servers names rust-axum more than once"),
])
def test_a_stack_the_lab_does_not_know_is_refused_in_one_line(value, says):
    with pytest.raises(ValueError) as e:
        servers.chosen(value)
    said = str(e.value)
    assert said.startswith(says) and "\n" not in said
    assert "servers: a list of stacks (servers/<stack>), or None: every stack the lab bundles" in said
    with pytest.raises(ValueError, match=r"^unknown txn_mode_servers \['nope'\]"):
        servers.chosen(["nope"], name="txn_mode_servers")


def test_the_sweeps_check_their_stacks_through_chosen():
    with pytest.raises(ValueError, match=r"^servers names go-nethttp more than once"):
        sweep.spec(notebook="01-linear-writes", servers=["go-nethttp", "go-nethttp"])
    specs = sqlite_vs_postgres.specs(notebook="07-sqlite-vs-postgres", workloads=["002-mix"], servers=None, levels=[1],
                         duration=1.0, warmup=0.0, repeats=1, users_rows=10, user_bytes=10)
    assert specs and all(list(s.servers) == servers.bundled() for s in specs)


def test_a_new_bundled_folder_is_under_none_and_an_extra_stack_only_when_named(tmp_path, monkeypatch):
    root = tmp_path / "servers"
    for name in BUNDLED:
        stack_folder(root / name, (SERVERS / name / servers.MANIFEST).read_text())
    text = (SERVERS / "go-nethttp" / "stack.toml").read_text().replace("order = 3", "order = 9")
    stack_folder(root / "zig-zap", text)
    monkeypatch.setattr(servers, "STACKS", servers.bundled_stacks(root))
    assert servers.chosen(None) == list(BUNDLED) + ["zig-zap"]
    for name, entry in servers.extra_stacks(str(stack_folder(tmp_path / "my-app"))).items():
        monkeypatch.setitem(servers.STACKS, name, entry)  # as LAB_EXTRA_STACKS registers it
    assert servers.chosen(None) == list(BUNDLED) + ["zig-zap"]
    assert servers.chosen(["my-app", "zig-zap"]) == ["my-app", "zig-zap"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_no_parameters_cell_lists_every_bundled_stack(path):
    """`servers = None` (every bundled stack) rather than the list typed out: a new stack's folder
    is then swept by every notebook that measures every stack; the cell after the parameters
    resolves it (servers.chosen) before the run stores its parameters."""
    cell, after = parameters_cell(path)
    for node in ast.parse(cell).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
            named = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
            assert not set(BUNDLED) <= named, \
                f"{path.stem}: {ast.unparse(node)} types out every bundled stack; use None (servers.chosen)"
    if re.search(r"^servers = None\b", cell, re.M):
        resolve = after.find("servers = stacks.chosen(servers")
        assert resolve != -1 and (after.find("params = ") == -1 or resolve < after.find("params = ")), \
            f"{path.stem}: the cell after the parameters resolves `servers` before `params`"
