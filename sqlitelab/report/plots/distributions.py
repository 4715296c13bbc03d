"""Distributions: every measured request's latency, from the merged HdrHistograms, as the share
of requests answered within each latency (an ECDF: curves of different sizes compare, and none
stacks on another)."""
from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram
from matplotlib.lines import Line2D

from sqlitelab.report.plots.figure import finish_legend, panel_grid, panel_title, panel_values
from sqlitelab.report.plots.marks import PlainLogFormatter, label_coincident, note_clear
from sqlitelab.report.plots.style import MEASURED, _order, colours_for, value_title


def _merged(g: pd.DataFrame) -> HdrHistogram | None:
    h = HdrHistogram(1, 100_000_000, 3)
    for enc in g["histogram"].dropna():
        h.add(HdrHistogram.decode(enc))
    return h if h.get_total_count() else None


def latency_ecdf(df: pd.DataFrame, series: str, title: str, panels: str | None = None,
                 caption: str | None = None):
    """The share of requests answered within x ms (log x), one curve per value of `series` (a
    stack's colour, else shades of its column's ramp in order), in one panel per value of
    `panels`; each curve's request count in the legend. Merged over every level and repeat of its rows."""
    pvals = panel_values(df, panels)
    fig, axes, key = panel_grid(len(pvals), caption, title)
    styles = colours_for(df[series].unique(), series)
    handles = {}
    for ax, pv in zip(axes, pvals):
        part = df if pv is None else df[df[panels] == pv]
        for value, g in sorted(part.groupby(series), key=lambda kv: _order(kv[0])):
            h = _merged(g)
            if h is None:
                continue
            vals = np.array([(it.value_iterated_to / 1000, it.count_at_value_iterated_to)
                             for it in h.get_recorded_iterator()])
            share = np.cumsum(vals[:, 1]) / vals[:, 1].sum()
            st = styles[value]
            name = value_title(series, value)
            ax.step(vals[:, 0], share, where="post", color=st["color"], linestyle=MEASURED, linewidth=1.6,
                    label="_" + name, gid=st.get("gid"))
            handles.setdefault(value, []).append(h.get_total_count())
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(PlainLogFormatter())  # minor labels too (less than a decade shown)
        ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylim(0, 1.02)
        ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=0))
        if pv is not None:
            panel_title(ax, panels, pv)
            absent = [v for v in sorted(df[series].unique(), key=_order) if v not in set(part[series])]
            if absent:  # the legend names it: said where it is not, not left to look hidden
                note_clear(ax, "not run here:\n" + "\n".join(value_title(series, v) for v in absent))
        label_coincident(ax)
    axes[0].set_ylabel("requests answered within x")
    legend = [Line2D([], [], color=styles[v]["color"], linestyle=MEASURED, linewidth=1.6,
                     label=f"{value_title(series, v)} ({sum(n):,} requests)")
              for v, n in sorted(handles.items(), key=lambda kv: _order(kv[0]))]
    return finish_legend(fig, axes, key, legend, title)
