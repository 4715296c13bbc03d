"""Two runs compared point by point (sqlitelab.report.compare): one dumbbell per point per metric,
from run a (hollow, at 1: as fast as a) to run b (its stack's mark, at b / a), over the point's
noise band shaded grey; a log axis, so that twice as fast and half as fast lie as far from 1."""
from __future__ import annotations

from types import ModuleType

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from sqlitelab.core import vocabulary
from sqlitelab.report.plots.figure import _titled, new_panels
from sqlitelab.report.plots.legends import fit_legends, panel_legend
from sqlitelab.report.plots.marks import PlainLogFormatter
from sqlitelab.report.plots.style import KEY_GREY, REFERENCE_DASHES, colours_for, value_title
from sqlitelab.studies.declarations import experiment_title

METRIC_TITLES = {"rps": "throughput, run b / run a", "p99_ms": "p99 latency, run b / run a"}
BAND_COLOUR = "#d9d9d9"


def _label(row: dict, varying: list[str], studies: dict[str, ModuleType]) -> str:
    parts = [value_title("server", row["server"])]
    parts += [experiment_title(studies[row["notebook"]], row[k]) if k == "experiment" else value_title(k, row[k])
              for k in varying if row.get(k) not in ("", None)]
    users = vocabulary.users(row['users']) + (
        f" at {row['rate']}/s" if row.get("rate") else "")
    return ", ".join(parts + [users])


def comparison_chart(table: pd.DataFrame, title: str, studies: dict[str, ModuleType],
                     caption: str | None = None):
    """`table`: compare.Comparison.table (its *_ratio and *_band columns). Rows in the table's
    order; a point without a band shows none (its verdict: no noise band), a point without a ratio
    no marker (its verdict: none finished in a or b). `studies`: every notebook's module by ID
    (sqlitelab.notebooks.studies), whose words name the experiments."""
    varying = [k for k in ("experiment", "profile", "scenario", "database")
               if k in table and table[k].nunique() > 1]
    labels = [_label(r, varying, studies) for r in table.to_dict("records")]
    n = len(labels)
    fig, axes, key = new_panels(1, len(METRIC_TITLES), caption=caption,
                                figsize=(11, max(3.2, 1.3 + 0.3 * n)), sharey=True)
    styles = colours_for(sorted(table["server"].unique()))
    pos = np.arange(n)
    for ax, (metric, xlabel) in zip(axes, METRIC_TITLES.items()):
        ratio, band = table[f"{metric}_ratio"].to_numpy(float), table[f"{metric}_band"].to_numpy(float)
        seen = ratio[np.isfinite(ratio) & (ratio > 0)]
        lo, hi = min([1.0, *seen]) / 1.5, max([1.0, *seen]) * 1.5  # the ratios in view, not the bands
        for y, r, b in zip(pos, ratio, band):
            if b == b:  # the noise band: 1 ± band, as the verdict reads it (cut at the axis' ends)
                ax.fill_betweenx([y - 0.35, y + 0.35], max(1 - b, lo), min(1 + b, hi), color=BAND_COLOUR,
                                 linewidth=0, zorder=0)
        for server in table["server"].unique():
            st = styles[server]
            rows = (table["server"] == server).to_numpy()
            for y, r in zip(pos[rows], ratio[rows]):
                if r == r:
                    ax.plot([1, r], [y, y], color=st["color"], linewidth=1.4, zorder=2, gid=st.get("gid"))
            ax.plot(ratio[rows], pos[rows], linestyle="none", marker=st["marker"], color=st["color"],
                    markerfacecolor=st["markerfacecolor"], markersize=6.5, zorder=3, gid=st.get("gid"),
                    label=value_title("server", server) + " (run b)")
        ax.plot(np.ones(n), pos, linestyle="none", marker="o", color=KEY_GREY, markerfacecolor="white",
                markersize=5, zorder=3, label="run a")
        ax.axvline(1, color="#444444", linestyle=REFERENCE_DASHES[0], linewidth=1.0, zorder=1)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.xaxis.set_major_formatter(PlainLogFormatter())
        ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        ax.set_xlabel(xlabel + " (log scale)")
        ax.set_yticks(pos)
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_ylim(n - 0.5, -0.5)
    _titled(fig, title)
    handles, _ = axes[0].get_legend_handles_labels()
    seen, unique = set(), []
    for h in handles:
        if h.get_label() not in seen:
            seen.add(h.get_label())
            unique.append(h)
    banded = np.isfinite(table[[f"{m}_band" for m in METRIC_TITLES]].to_numpy(float)).any()
    unique.append(Patch(color=BAND_COLOUR, label=_band_words(table)) if banded else
                  Patch(color="none", label="no noise band: neither run's spread was measured"))
    panel_legend(key, unique)
    return fit_legends(fig)


def _band_words(table: pd.DataFrame) -> str:
    """What the shaded bands are, in the legend: the runs' own spread (repeats or the machine's
    stored one), the same code run twice (a power check's A/A: compare.aa_band_of), the
    comparison's own points' scatter (compare.own_band), or which of them."""
    sources = {v for m in METRIC_TITLES for v in table.get(f"{m}_spread_from_a", pd.Series(dtype=object)).dropna()
               if v != "none"}
    kinds = {"the comparison's own": "the points' own scatter", "the same code twice": "the same code run twice"}
    named = [words for start, words in kinds.items() if any(v.startswith(start) for v in sources)]
    if any(not any(v.startswith(start) for start in kinds) for v in sources) or not named:
        named.insert(0, "both runs' spread")
    return f"noise band ({', or '.join(named)})"
