"""The studies: one module of sqlitelab.studies per notebook, found by what it declares.

A module of this package that defines `ID` (the notebook's name, `NN-title`, as in
notebooks/NN-title.ipynb) is that notebook's study: its scales, server split, article, figure
sentences, place in the capacity collection, and whatever else is only its own. A new notebook
needs its .ipynb and one such module; nothing else names it.

    registry.ids()                    # every study's ID, in the notebooks' order
    registry.study("03-read-write-mix").SCALES["seed"]
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType


@functools.cache
def _studies() -> dict[str, ModuleType]:
    """Every study module of the package by its ID, in ID order (found once, then kept)."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"{__package__}.{info.name}")
        notebook = getattr(module, "ID", None)
        if notebook is None:
            continue
        if notebook in found:
            raise ValueError(f"two studies declare ID {notebook!r}: {found[notebook].__name__}, {module.__name__}")
        found[notebook] = module
    return dict(sorted(found.items()))


def ids() -> list[str]:
    """Every study's notebook ID, sorted (the notebooks' reading order)."""
    return list(_studies())


def study(notebook: str) -> ModuleType:
    """The study module of `notebook` (its ID); an unknown ID is refused, naming the known ones."""
    found = _studies()
    if notebook not in found:
        raise ValueError(f"no study declares notebook {notebook!r} (sqlitelab/studies/*.py with "
                         f"ID = {notebook!r}); known: {', '.join(found)}")
    return found[notebook]


def studies() -> list[ModuleType]:
    """Every study module, in ID order."""
    return list(_studies().values())
