"""What a notebook declares, and the words of its experiments.

A notebook `NN-title` (notebooks/NN-title.ipynb) is one module of sqlitelab.notebooks, which the
notebook imports as `this`: what it declares — the constants below — and the code only it uses.
The layers below take what they need of it as an argument (the module itself, called `study`
there, or one of its declarations): its scales (sqlitelab.studies.scales), its article's method
rows (sqlitelab.report.methods), its figures' sentences (sqlitelab.report.plots.save_figure), the
words of its experiments (experiment_title here). A new notebook needs its .ipynb, its module and
its test; nothing else names it.

What a notebook's module declares (tests/test_studies.py checks every one is there):
- `ID`: the notebook's name, `NN-title`; `TITLE`: the notebook in a reader's words.
- `SCALES`: how big a run is, per scale (quick, seed); sqlitelab.studies.scales.settings reads
  it, and each setting is a `None` parameter of the notebook.
- `SERVER_SPLIT`: the server CPUs the article gave its server (the generator had the rest),
  which its sweeps ask of sqlitelab.core.layout where the machine allows (sweep's
  `server_split`); None: the lab's own split.
- `ARTICLE`: its method rows against its article (sqlitelab.studies.method; the table:
  sqlitelab.report.methods).
- `IN_COLLECTION`, `HEADLINE_EXPERIMENTS`: whether notebook 06 reads its newest run, and which of
  its experiments reproduce its article (None: every one; the others are "beyond" sweeps: write
  shares, write paths...).
- `READS_THE_OTHERS`: it reads the newest runs of the other notebooks (a batch runs it last).
- `SMOKE`, `STORES`: its papermill smoke run's tiny parameters (tests/test_notebooks.py,
  tests/test_lab_browser.py), and the table its measurements land in (None: none of its own).
- `BUDGET_SECONDS`: its own wall time per scale on the reference machine (2 cores, set-up warm)
  with a margin; the budgets together fit the collection's (scales.COLLECTION_BUDGET_SECONDS,
  what they leave is scales.spare), and sqlitelab.batch names a run over its budget with where
  its time went.
- `READING`: what to look for in each of its figures, one sentence shown under the figure when
  the notebook saves it (sqlitelab.report.plots.save_figure refuses a figure without one).
- `QUESTION`, `README_FIGURE`: the question it answers and its figure (a key of READING) whose
  message reads at thumbnail size, in the README's table of notebooks (sqlitelab.readme).
- `EXPERIMENT_TITLES`: its experiments in plain words, by id or by a pattern whose groups fill
  the words (a format string, or a function of the groups); experiment_title reads them, and the
  figure check refuses any of those ids in a figure's text.

Every notebook's module, by ID: sqlitelab.notebooks.studies().
"""
from __future__ import annotations

import re
from types import ModuleType
from typing import Iterable

from sqlitelab.infra.servers import STACKS, load_profiles, profile_title, stack_title
from sqlitelab.load.scenarios import SCENARIOS, scenario_title

# Experiments every notebook may store: the machine's limits measured beside its sweeps.
COMMON_EXPERIMENT_TITLES: dict = {"ceiling": "the machine's own limits"}


def experiment_patterns(studies: Iterable[ModuleType]) -> list[str]:
    """Every experiment id or pattern `studies` name (EXPERIMENT_TITLES), with the common ones."""
    found = dict.fromkeys(COMMON_EXPERIMENT_TITLES)
    for s in studies:
        found.update(dict.fromkeys(s.EXPERIMENT_TITLES))
    return list(found)


def experiment_title(study: ModuleType, experiment: str | None) -> str:
    """An experiment of the notebook `study` declares, in plain words ("" for none): the whole id
    by its EXPERIMENT_TITLES, else each `/`-separated part by them or as the scenario, profile or
    stack it names (a sweep of several scenarios stores `<experiment>/<scenario>`), joined by
    ", ". An id with a part nothing names is refused: a reader would meet the raw id."""
    if experiment is None or experiment != experiment or str(experiment) == "":
        return ""
    titles = {**COMMON_EXPERIMENT_TITLES, **study.EXPERIMENT_TITLES}

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
        raise ValueError(f"{study.ID}: no words for the experiment {experiment!r} (its "
                         "EXPERIMENT_TITLES, sqlitelab/notebooks)")
    return ", ".join(parts)
