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
computes. In a kernel it installs one display rule: a refusal of what the notebook was given
shows as its one line (`refusal`), its traceback kept in data/logs/refusals.log.
"""
from __future__ import annotations

import traceback

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from sqlitelab.core import config, results
from sqlitelab.experiments import baseline, buffer, power_cut, your_app
from sqlitelab.experiments.sweep import run, spec
from sqlitelab.infra import link, operations, postgres
from sqlitelab.infra import servers as stacks
from sqlitelab.notebooks import studies
from sqlitelab.report import analysis, capacity, compare, findings, methods, plots, power
from sqlitelab.studies import scales

plt.style.use("sqlitelab.report.blog")


def refusal(shell, etype, value, tb, tb_offset=None) -> list[str] | None:
    """IPython's handler of a ValueError (AppError, ReplayError… are ValueErrors): one the lab
    raised on purpose — from its own code, in one line: what it was given cannot run — is shown as
    that line and where its traceback is kept (config.REFUSALS_LOG, appended), so that a refused
    parameter reads as one line in the notebook, in papermill's error and in a report; any other
    (a bug, a library's error) as its usual traceback."""
    inner = tb
    while inner is not None and inner.tb_next is not None:
        inner = inner.tb_next
    module = inner.tb_frame.f_globals.get("__name__", "") if inner is not None else ""
    line = f"{etype.__name__}: {value}"
    if not module.startswith("sqlitelab.") or "\n" in str(value) or not str(value).strip():
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)  # shown as IPython shows any error
        return None
    try:
        config.REFUSALS_LOG.parent.mkdir(parents=True, exist_ok=True)
        with config.REFUSALS_LOG.open("a") as f:
            f.write(f"--- {results.now_iso()} {shell.user_ns.get('NOTEBOOK', '')} "
                    f"{shell.user_ns.get('run_id') or ''}\n{''.join(traceback.format_exception(etype, value, tb))}")
        where = f"(its traceback: {config.REFUSALS_LOG})"
    except OSError:
        where = "(its traceback could not be kept)"
    # shown, sent to the notebook (its error output) and kept as the cell's traceback, as
    # IPython's own errors are (its custom handler shows nothing by itself)
    shell._showtraceback(etype, value, [line, where])
    return [line, where]


try:  # in a kernel (JupyterLab's, papermill's): refusals in one line
    get_ipython().set_custom_exc((ValueError,), refusal)  # type: ignore[name-defined]  # noqa: F821
except NameError:  # imported outside IPython (a test, a script): nothing to install
    pass

__all__ = ["plt", "pd", "Markdown", "display", "config", "results", "baseline", "buffer", "power_cut",
           "your_app", "run", "spec", "link", "operations", "postgres", "stacks", "analysis", "capacity",
           "compare", "findings", "methods", "plots", "power", "scales", "studies"]
