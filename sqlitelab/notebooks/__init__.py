"""One module per notebook: what the notebook declares (sqlitelab.studies.declarations: its
scales, article, figures' sentences, budget...) and the code only it uses — its tables, findings
sentences, capacity arithmetic, figures' choices and its row of the README. Notebook 03 imports
its module as `this`:

    from sqlitelab.notebooks import read_write_mix as this
    cfg = scales.from_parameters(this, scale, globals())
    table = this.mix_table(df)

What two or more notebooks use stays below (sqlitelab.report, sqlitelab.experiments...), which
takes what it needs of a notebook as an argument; a notebook's module never imports another's
(the import-linter contract). The notebooks that read the others' runs (06, 11) are given them:
`studies()` here, which the entry points and the notebooks' first cell (sqlitelab.notebook) read.
A module that defines `summary(study, tables)` writes its article's row of the README
(sqlitelab.readme).

    notebooks.ids()                    # every notebook's ID, in reading order
    notebooks.study(notebook).SCALES["seed"]   # a notebook's module, by its ID
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType


@functools.cache
def _studies() -> dict[str, ModuleType]:
    """Every notebook's module by its ID, in ID order (found once, then kept)."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__name__}.{info.name}")
        notebook = getattr(module, "ID", None)
        if notebook is None:
            continue
        if notebook in found:
            raise ValueError(f"two modules declare ID {notebook!r}: {found[notebook].__name__}, "
                             f"{module.__name__}")
        found[notebook] = module
    return dict(sorted(found.items()))


def ids() -> list[str]:
    """Every notebook's ID, sorted (the notebooks' reading order)."""
    return list(_studies())


def study(notebook: str) -> ModuleType:
    """The module of `notebook` (its ID); an unknown ID is refused, naming the known ones."""
    found = _studies()
    if notebook not in found:
        raise ValueError(f"no module declares notebook {notebook!r} (sqlitelab/notebooks/*.py with "
                         f"ID = {notebook!r}); known: {', '.join(found)}")
    return found[notebook]


def studies() -> dict[str, ModuleType]:
    """Every notebook's module by ID, in ID order."""
    return dict(_studies())
