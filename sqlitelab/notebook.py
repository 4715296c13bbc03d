"""What every notebook's first cell takes, in two lines:

    from sqlitelab.notebook import *   # pandas as pd, plt, Markdown, display, the lab's modules
    from sqlitelab.notebooks import read_write_mix as this   # this notebook's own code

It applies the lab's one figure style (sqlitelab/report/blog.mplstyle) and names the shared
modules the notebooks read by the names they use: `analysis.…`, `plots.…`, and the one way to run
an experiment: `run(spec(…))`, or `run(this.specs(…))` of sweeps a notebook's module builds. What a
notebook declares and what only it computes are its module (sqlitelab.notebooks, imported as
`this`), which it hands to what needs it (`scales.from_parameters(this, …)`,
`methods.show(this.ARTICLE, …)`, `plots.save_figure(fig, name, notebook=this)`); `studies()` is
every notebook's module by ID, for the notebooks that read the others' runs. Nothing here
computes.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from sqlitelab.core import config, results
from sqlitelab.experiments import baseline, buffer, your_app
from sqlitelab.experiments.sweep import run, spec
from sqlitelab.infra import link, operations, postgres
from sqlitelab.infra import servers as stacks
from sqlitelab.notebooks import studies
from sqlitelab.report import analysis, capacity, compare, findings, methods, plots, power
from sqlitelab.studies import scales

plt.style.use("sqlitelab.report.blog")

__all__ = ["plt", "pd", "Markdown", "display", "config", "results", "baseline", "buffer",
           "your_app", "run", "spec", "link", "operations", "postgres", "stacks", "analysis", "capacity",
           "compare", "findings", "methods", "plots", "power", "scales", "studies"]
