"""Distributions: every measured request's latency, from the merged HdrHistograms."""
from __future__ import annotations

import matplotlib.ticker
import numpy as np
import pandas as pd
from hdrh.histogram import HdrHistogram

from sqlitelab.report.plots.figure import new_figure
from sqlitelab.report.plots.legends import _legend, fit_legends
from sqlitelab.report.plots.style import SeriesStyles

def latency_histogram(df: pd.DataFrame, series: list[str], title: str, caption: str | None = None,
                      bins: int = 60):
    """Distribution of every measured request's latency (merged HdrHistograms), log-spaced bins;
    a colour per stack and a dash per profile when those are series columns (SeriesStyles)."""
    fig, ax = new_figure(caption=caption)
    merged = {}
    for key, g in df.groupby(series, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        h = HdrHistogram(1, 100_000_000, 3)
        for enc in g["histogram"].dropna():
            h.add(HdrHistogram.decode(enc))
        if h.get_total_count():
            merged[key] = h
    if merged:
        styles = SeriesStyles(pd.DataFrame(list(merged), columns=list(series)), series)
        lo = min(h.get_min_value() for h in merged.values()) / 1000
        hi = max(h.get_max_value() for h in merged.values()) / 1000
        edges = np.geomspace(max(lo, 0.01), max(hi, lo * 1.01, 0.02), bins)
        for key, h in merged.items():
            vals = np.array([(it.value_iterated_to / 1000, it.count_at_value_iterated_to)
                             for it in h.get_recorded_iterator()])
            counts, _ = np.histogram(vals[:, 0], bins=edges, weights=vals[:, 1])
            kw = styles(key)
            ax.stairs(counts, edges, label=f"{styles.title(key)} (n={h.get_total_count():,})",
                      linewidth=1.6, color=kw["color"], linestyle=kw["linestyle"])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("requests")
    ax.set_title(title)
    _legend(ax)
    return fit_legends(fig)
