"""The studies: one module of sqlitelab.studies per notebook, found by what it declares.

A module of this package that defines `ID` (the notebook's name, `NN-title`, as in
notebooks/NN-title.ipynb) is that notebook's study: what it declares — its scales, server split,
article, figure sentences, place in the capacity collection. Its code (tables, findings, figures'
choices, README row) is in sqlitelab.notebooks, in the module of the same name. A new notebook needs
its .ipynb, one such study, its module there and its test; nothing else names it.

    registry.ids()                    # every study's ID, in the notebooks' order
    registry.study("03-read-write-mix").SCALES["seed"]

What a study declares (tests/test_studies.py checks every one is there):
- `ID`: the notebook's name, `NN-title`; `TITLE`: the notebook in a reader's words.
- `SCALES`: how big a run is, per scale (quick, seed); sqlitelab.studies.scales.settings reads
  it, and each setting is a `None` parameter of the notebook.
- `SERVER_SPLIT`: the server CPUs the article gave its server (the generator had the rest),
  which a sweep asks of sqlitelab.core.layout where the machine allows; None: the lab's own split.
- `ARTICLE`: its method rows against its article (sqlitelab.studies.method; the table:
  sqlitelab.report.methods).
- `IN_COLLECTION`, `HEADLINE_EXPERIMENTS`: whether notebook 06 reads its newest run
  (sqlitelab.notebooks.capacity.COLLECTION), and which of its experiments reproduce its article
  (None: every one; the others are "beyond" sweeps: write shares, write paths...).
- `READS_THE_OTHERS`: it reads the newest runs of the other notebooks (a batch runs it last).
- `SMOKE`, `STORES`: its papermill smoke run's tiny parameters (tests/test_notebooks.py,
  tests/test_lab_browser.py), and the table its measurements land in (None: none of its own).
- `BUDGET_SECONDS`: its own wall time per scale on the reference machine (2 cores, set-up warm)
  with a margin; the budgets together fit the collection's (scales.COLLECTION_BUDGET_SECONDS,
  what they leave is scales.spare), and sqlitelab.batch names a run over its budget with where
  its time went.
- `READING`: what to look for in each of its figures, one sentence shown under the figure when
  the notebook saves it (sqlitelab.report.plots.save_figure refuses a figure without one).
- `EXPERIMENT_TITLES`: its experiments in plain words, by id or by a pattern whose groups fill
  the words (a format string, or a function of the groups); experiment_title reads them, and the
  figure check refuses any of those ids in a figure's text.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

from sqlitelab.infra.servers import STACKS, load_profiles, profile_title, stack_title
from sqlitelab.load.scenarios import SCENARIOS, scenario_title

# Experiments every notebook may store: the machine's limits measured beside its sweeps.
COMMON_EXPERIMENT_TITLES: dict = {"ceiling": "the machine's own limits"}


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


def experiment_patterns() -> list[str]:
    """Every experiment id or pattern the studies name (EXPERIMENT_TITLES), with the common ones."""
    found = dict.fromkeys(COMMON_EXPERIMENT_TITLES)
    for s in studies():
        found.update(dict.fromkeys(s.EXPERIMENT_TITLES))
    return list(found)


def experiment_title(notebook: str, experiment: str | None) -> str:
    """An experiment of `notebook` in plain words ("" for none): the whole id by its study's
    EXPERIMENT_TITLES, else each `/`-separated part by them or as the scenario, profile or stack
    it names (a sweep of several scenarios stores `<experiment>/<scenario>`), joined by ", ".
    An id with a part nothing names is refused: a reader would meet the raw id."""
    if experiment is None or experiment != experiment or str(experiment) == "":
        return ""
    titles = {**COMMON_EXPERIMENT_TITLES, **study(notebook).EXPERIMENT_TITLES}

    def one(part: str) -> str | None:
        for pattern, words in titles.items():
            m = re.fullmatch(pattern, part)
            if m:
                return words(*m.groups()) if callable(words) else words.format(*m.groups())
        for known, title in ((SCENARIOS, scenario_title), (load_profiles(), profile_title),
                             (STACKS, stack_title)):
            if part in known:
                return title(part)
        return None

    whole = one(str(experiment))
    if whole is not None:
        return whole
    parts = [one(p) for p in str(experiment).split("/")]
    if None in parts:
        raise ValueError(f"{notebook}: no words for the experiment {experiment!r} (its study's "
                         "EXPERIMENT_TITLES, sqlitelab/studies)")
    return ", ".join(parts)
