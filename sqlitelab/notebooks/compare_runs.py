"""Notebook 11, two runs compared (no article: the readers' "how does my machine, or my change,
compare?"): any two runs of one notebook point by point, with a noise band measured on the
machine. Everything that is this notebook's, declared once.

By default it compares the newest run of notebook 03 at the notebook's scale on this machine with
notebook 03 of the committed reference run (seed scale, the reference machine): at quick, the
levels both ran.

Its code: the comparison in words.
"""
from __future__ import annotations

import math
from types import ModuleType

import pandas as pd

from sqlitelab.core import vocabulary
from sqlitelab.infra import servers
from sqlitelab.report import findings, power, reference_tables
from sqlitelab.report.compare import NONE_FINISHED, OUTLASTED, OWN_POINTS
from sqlitelab.studies.declarations import experiment_title
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY, NOT_STATED


# What each constant means: sqlitelab.studies.declarations.
ID = "11-compare-runs"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "two runs compared"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = ("Two runs of a notebook point by point: which points moved beyond the noise (`python -m"
            " sqlitelab.compare A B` does the same)")
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "comparison"

SCALES: dict[str, dict] = {
    "quick": {"run_a": "reference:03", "run_b": "newest:quick:03"},
    "seed": {"run_a": "reference:03", "run_b": "newest:seed:03"},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget). It measures
# nothing (the noise band: `python -m sqlitelab.compare --noise`).
BUDGET_SECONDS: dict[str, float] = {"quick": 8, "seed": 10}  # seed: 5.7 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (declarations.experiment_title): none: it reads two runs.
EXPERIMENT_TITLES: dict = {}

# it reads the newest run of another notebook: a batch runs it after them
READS_THE_OTHERS = True


# the smoke run: the committed reference run against itself (every ratio 1)
SMOKE: dict = {"run_a": "reference:03", "run_b": "reference:03"}
STORES: str | None = None

READING: dict[str, str] = {
    "comparison":
        "A dot outside its grey band moved more than the two runs' own spread: faster to the right "
        "of 1 on throughput, slower to the right of 1 on latency.",
}

ARTICLE = Article(ID, "—", "two runs of a notebook, point by point", (
    Detail("which points", "—", lambda r: "the points both runs have, aligned on notebook, "
           "experiment, stack, profile, scenario, database, users and rate", expect=NOT_STATED,
           why="a point only one run has is listed apart, never compared"),
    Detail("noise band", "—", lambda r: "each run's (max − min) / mean from its repeats, else its "
           "machine's stored spread for the scenario's family, measured over the windows nearest the "
           "point's, combined as sqrt(a² + b²); else the comparison's own points: the robust scatter of "
           "their ratios",
           expect=NOT_STATED, why="the band is measured within minutes; runs hours apart on a VM can "
                                  "differ by more and still be the machine"),
    Detail("machine", "—", "col:machine", expect=NOT_STATED, why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

def comparison(c, studies: dict[str, ModuleType]) -> str:
    """Notebook 11: what the comparison of two runs says (report.compare.Comparison): what they
    ran on, per metric how many points moved beyond the noise and the largest moves, and the
    points without a band. `studies`: every notebook's module by ID (their experiments' words)."""
    lines = []
    diff = c.provenance[~c.provenance["same"]]
    if len(diff):
        lines.append("- The runs differ in " + ", ".join(diff["what"]) + ": a move may come from any of "
                     "them (an inference, not a measurement of which).")
    if c.table.empty:
        lines.append(f"- No point in common: run a has {len(c.only_a)}, run b {len(c.only_b)}; nothing "
                     "to compare (listed above).")
        return "\n".join(lines)
    for metric, words in (("rps", "throughput"), ("p99_ms", "p99 latency")):
        v = c.table[f"{metric}_verdict"]
        moved = c.table[v.isin(["faster", "slower"])]
        stalls = "; ".join([f"{int((v == word).sum())} where {findings.STALLED.replace('its window', 'the window of run ' + s)}"
                            for s, word in NONE_FINISHED.items() if (v == word).any()]
                           + [f"{int((v == word).sum())} where {word} (a stall: no ratio)"
                              for word in OUTLASTED.values() if (v == word).any()])
        lines.append(f"- {words.capitalize()}: {int((v == 'faster').sum())} of {len(v)} points faster, "
                     f"{int((v == 'slower').sum())} slower, {int((v == 'within noise').sum())} within "
                     f"noise, {int((v == 'no noise band').sum())} without a noise band"
                     + (f"; {stalls}" if stalls else "") + f"; {c.overall[metric].words(metric)}.")
        if len(moved):
            far = moved.loc[(moved[f"{metric}_ratio"].apply(lambda r: abs(math.log(r)))).idxmax()]
            users = vocabulary.users(far['users'])
            lines.append(f"  The largest move: {servers.stack_title(far['server'])}, {users}"
                         + (f" ({experiment_title(studies[far['notebook']], far['experiment'])})" if far["experiment"] else "")
                         + f": {far[f'{metric}_ratio']:.2f}× (band ±{far[f'{metric}_band']:.0%}).")
    if (c.table["rps_verdict"] == "no noise band").any():
        lines.append(f"- Points without repeats, with fewer than {OWN_POINTS} points to compare, have a "
                     "band only from the machine's own measurement: `python -m sqlitelab.compare --noise` "
                     "stores one.")
    return "\n".join(lines)


def lab_power(table, reference_dir=None) -> str:
    """What the lab's power checks on this machine found (report.power's stored rows, newest of
    each notebook, scale, check and metric), in lines; where none is stored, the reference
    machine's (the committed export's power rows, from `reference_dir`: default
    data/reference-run/) and how to measure this one's."""
    if table.empty:
        how = ("No power check is stored on this machine: `python -m sqlitelab.compare --power 03` runs "
               "notebook 03 twice as it is and once with its servers held to 80 % of their CPUs, the "
               "three taking turns server by server, and stores how many points compare judged as it should.")
        try:
            x = reference_tables.load(reference_dir)
            reference, machine = x.get(reference_tables.POWER, pd.DataFrame()), reference_tables.machine_of(x)
        except FileNotFoundError:
            reference, machine = pd.DataFrame(), None
        if reference.empty:
            return how
        return "\n".join([how, "", "On the reference machine (`data/reference-run/power.csv`):", ""]
                         + [f"- {power.said(r, machine)}" for r in reference.to_dict("records")])
    newest = table.drop_duplicates(["notebook", "scale", "check", "metric"])
    return "\n".join(f"- {power.said(r)}" for r in newest.to_dict("records"))