"""One module per notebook: the code only that notebook uses — its tables, findings sentences,
capacity arithmetic, figures' choices and its row of the README — beside what its study declares.

The module of notebook `NN-title` has the name of its study (sqlitelab.studies): notebook 03's
study is sqlitelab.studies.read_write_mix, its code sqlitelab.notebooks.read_write_mix, which the
notebook imports as `this`:

    from sqlitelab.notebooks import read_write_mix as this
    table = this.mix_table(df)

What two or more notebooks use stays in sqlitelab.report (tables, capacity, findings, figures);
a notebook module imports from there and never from another notebook's module. A module that
defines `summary(study, tables)` writes its article's row of the README (sqlitelab.readme).
"""
from __future__ import annotations

import importlib
from types import ModuleType

from sqlitelab.studies import registry


def module(notebook: str) -> ModuleType | None:
    """The code module of `notebook` (its ID), or None when it has no code of its own."""
    name = registry.study(notebook).__name__.rsplit(".", 1)[1]
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        return None
