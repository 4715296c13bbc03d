"""The house in layers (issue 28): import-linter's contracts of pyproject.toml hold, they fail on
an upward import, and no module imports inside a function unless it says why (`# lazy: …`)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from sqlitelab.core import config

LINT = Path(sys.executable).with_name("lint-imports")
PACKAGE = config.PROJ_ROOT / "sqlitelab"


def _lint(root: Path) -> subprocess.CompletedProcess:
    """lint-imports with `root`'s pyproject.toml, on the sqlitelab package under `root`."""
    return subprocess.run([str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})


def test_the_layers_and_no_cycles_hold():
    proc = _lint(config.PROJ_ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_an_upward_import_breaks_the_layers(tmp_path):
    """The contract can fail: the same package with core importing report is refused."""
    shutil.copytree(PACKAGE, tmp_path / "sqlitelab",
                    ignore=shutil.ignore_patterns("__pycache__", "bin", "target", "*.go", "*.rs"))
    shutil.copy(config.PROJ_ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "sqlitelab" / "core" / "config.py", "a") as f:
        f.write("\nfrom sqlitelab.report import plots  # a deliberate upward import\n")
    proc = _lint(tmp_path)
    assert proc.returncode != 0
    assert "sqlitelab.core.config -> sqlitelab.report.plots" in proc.stdout, proc.stdout[-3000:]


def _imports_in_functions(path: Path) -> list[tuple[int, str, bool]]:
    """(line, module, has a `# lazy:` reason) of every import nested in a function."""
    src = path.read_text()
    lines = src.splitlines()
    found = []
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = (("." * node.level) + (node.module or "") if isinstance(node, ast.ImportFrom)
                          else node.names[0].name)
                here = lines[node.lineno - 1] + (lines[node.lineno - 2] if node.lineno > 1 else "")
                found.append((node.lineno, module, "# lazy:" in here))
    return sorted(set(found))


def test_no_import_inside_a_function_without_its_reason():
    """The lab's own modules are imported at the top, always (a layer below never needs a trick
    to reach one above); a third-party import inside a function stays only with `# lazy: why`."""
    own, unexplained = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, module, reason in _imports_in_functions(path):
            where = f"{path.relative_to(config.PROJ_ROOT)}:{line} {module}"
            if module.startswith((".", "sqlitelab")):
                own.append(where)
            elif not reason:
                unexplained.append(where)
    assert not own, "the lab's modules imported inside a function:\n" + "\n".join(own)
    assert not unexplained, "imports inside a function without a `# lazy: why`:\n" + "\n".join(unexplained)


# What runs load, a sweep or an operation: a table, a sentence or a figure needs none of it, only
# words and arithmetic, which live low in the house (core.vocabulary, load.verdicts, ...).
RUNNERS = ("sqlitelab.experiments", "sqlitelab.load.driver", "sqlitelab.load.crosscheck",
           "sqlitelab.load.sampler", "sqlitelab.load.wrk", "sqlitelab.load.hey", "sqlitelab.load.oha",
           "sqlitelab.load.reference", "sqlitelab.load.calibrate", "sqlitelab.infra.operations",
           "sqlitelab.infra.link", "sqlitelab.infra.netns")


def test_the_report_layer_reaches_no_runner():
    """Numbers, sentences and figures (sqlitelab.report, directly or through what it imports)
    import no module that runs load, a sweep or an operation."""
    import grimp  # import-linter's own graph of the package
    graph = grimp.build_graph("sqlitelab")
    reached = {m: sorted(u for u in graph.find_upstream_modules(m) if u.startswith(RUNNERS))
               for m in graph.modules if m.startswith("sqlitelab.report")}
    assert not {m: r for m, r in reached.items() if r}
