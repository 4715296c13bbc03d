"""The bar charts: grouped bars of a measure per category (bar_chart) and capacity's small
multiples, the capacity at the objective over the naive peak per stack (capacity_chart)."""
from __future__ import annotations

import math

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from sqlitelab.report.plots.figure import _titled, new_figure, new_panels
from sqlitelab.report.plots.legends import _extra_handles, _legend_below, fit_legends, panel_legend
from sqlitelab.report.plots.marks import (PlainLogFormatter, _bar_limit, _limit_patches,
                                          _ref_line_labels)
from sqlitelab.report.plots.style import (LIMIT_MARKS, REFERENCE_COLORS, REFERENCE_DASHES,
                                          STACK_STYLES, _order, colours_for, value_title)

def _bar_colours(sers: list, reference_series: str | None) -> dict:
    colours = {s: c["color"] for s, c in colours_for([s for s in sers if s != reference_series]).items()}
    if reference_series in sers:
        colours[reference_series] = REFERENCE_COLORS[1]
    return colours


def bar_chart(df: pd.DataFrame, category: str, value: str, series: str, title: str, ylabel: str,
              caption: str | None = None, ref_lines: dict[str, float] | None = None, logy: bool = False,
              hatch_col: str | None = "generator_bound", horizontal: bool = False,
              reference_series: str | None = None, ref_format: str = "{:,.0f}/s"):
    """Grouped bars (mean over repeats), a stack's own colour when the series are stacks;
    hatched where `hatch_col` is true (generator-bound). `horizontal` puts the categories on
    the y axis, for long lists of labels. The series named `reference_series` (an article's own
    numbers) comes first, in dark grey. `ref_lines`: reference values, drawn over the bars and
    named in the right margin (vertical bars) or in the legend (horizontal, its value written by
    `ref_format`)."""
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=lambda v: (v != reference_series, _order(v)))
    kw = {"figsize": (8, max(4.5, 1.2 + 0.22 * len(cats) * max(1, len(sers) / 2)))} if horizontal else {}
    fig, ax = new_figure(caption=caption, **kw)
    width = 0.8 / max(len(sers), 1)
    colours = _bar_colours(sers, reference_series)
    handles = []
    for i, s in enumerate(sers):
        g = df[df[series] == s]
        vals = [g[g[category] == c][value].mean() for c in cats]
        flags = [_bar_limit(g[g[category] == c], hatch_col) for c in cats]
        pos = np.arange(len(cats)) + (i - (len(sers) - 1) / 2) * width
        color = colours[s]
        bars = (ax.barh(pos, vals, width, color=color) if horizontal
                else ax.bar(pos, vals, width, color=color))
        for b, flag in zip(bars, flags):
            if flag:
                b.set_hatch(LIMIT_MARKS[flag]["hatch"])
                b.set_edgecolor("white")
        handles.append(Patch(facecolor=color, label=value_title(series, s)))
    if horizontal:  # labels of nearby vertical lines collide: name them in the legend
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            handles.append(ax.axvline(v, color="#555555", linewidth=1.2, zorder=4,
                                      linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)],
                                      label=f"{label}: {ref_format.format(v)}"))
    if horizontal:
        ax.set_yticks(range(len(cats)))
        ax.set_yticklabels([str(c) for c in cats], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(ylabel)
    else:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([str(c) for c in cats])
        ax.set_ylabel(ylabel)
    if not logy and df[value].abs().max() >= 10_000:  # 1,000,000 rather than an offset "1e6"
        (ax.xaxis if horizontal else ax.yaxis).set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    if logy:
        (ax.set_xscale if horizontal else ax.set_yscale)("log")
        axis = ax.xaxis if horizontal else ax.yaxis
        axis.set_major_formatter(PlainLogFormatter())  # 0.5, 2, 1,000
        axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    if ref_lines and not horizontal:
        _ref_line_labels(ax, ref_lines)
    ax.set_title(title)
    handles += _limit_patches({_bar_limit(df[(df[category] == c) & (df[series] == s)], hatch_col)
                               for c in cats for s in sers})
    # below the axes: bars fill the plot area
    _legend_below(ax, handles, ncols=3 if horizontal else min(len(handles), 5))
    return fit_legends(fig)


def _pale(colour: str, share: float = 0.35) -> tuple:
    """`colour` mixed with white (share of the colour kept)."""
    r, g, b = matplotlib.colors.to_rgb(colour)
    return tuple(1 - share * (1 - c) for c in (r, g, b))


CAPACITY_FIGSIZE = (10, 6.5)


def capacity_chart(frame: pd.DataFrame, title: str, caption: str | None = None,
                   ref_lines: dict[str, float] | None = None, value: str = "rps", ncols: int = 4):
    """Small multiples of capacity.chart_frame(): one panel per workload (notebook, scenario and
    database: a Postgres panel says so in its title), one bar per stack in its own colour — the naive peak (the frame's first `kind`)
    pale, the capacity at the objective (its second) solid over it — on a shared requests/s
    axis; hatched where a generator was the limit (LIMIT_MARKS); `ref_lines` as vertical lines
    in every panel, named in the one legend below the panels."""
    kinds = list(dict.fromkeys(frame["kind"]))
    if "server" not in frame or frame["server"].isna().all():
        workloads = [(("", "(no points)", "sqlite"), frame.iloc[0:0])]
    else:
        # one panel per workload and database (07 runs each workload on SQLite and on Postgres)
        frame = frame.assign(database=frame["database"].fillna("sqlite") if "database" in frame else "sqlite")
        workloads = [((nb, sc, db), g) for (nb, sc, db), g in
                     frame.groupby(["notebook", "scenario", "database"], sort=True)]
        workloads.sort(key=lambda w: (w[0][0], w[0][1], w[0][2] != "sqlite", w[0][2]))  # SQLite first
    n = len(workloads)
    rows = math.ceil(n / ncols)
    cols = math.ceil(n / rows)  # 5 panels: 3 + 2, not 4 + 1
    fig, axes, key = new_panels(rows, cols, caption=caption, figsize=CAPACITY_FIGSIZE,
                                sharex=True, sharey=True, n=n)
    present = list(frame["server"].dropna().unique()) if "server" in frame else []
    stacks = [s for s in STACK_STYLES if s in present] + sorted(s for s in present if s not in STACK_STYLES)
    colours = {s: c["color"] for s, c in colours_for(stacks).items()}
    top = float(frame[value].max()) if len(frame) and frame[value].notna().any() else 1.0
    top = max([top] + list((ref_lines or {}).values())) * 1.05 or 1.0
    shown: set = set()
    for ax, ((notebook, scenario, database), g) in zip(axes, workloads):
        profiles = list(dict.fromkeys(g["profile"])) if len(g) else []
        for j, kind in enumerate(kinds[:2]):
            for r in g[g["kind"] == kind].itertuples():
                y = stacks.index(r.server)
                c = colours[r.server]
                face = _pale(c) if j == 0 else c
                bar = ax.barh(y, getattr(r, value), 0.72 if j == 0 else 0.5, color=face, zorder=2 + j)[0]
                flag = _bar_limit(pd.DataFrame([r._asdict()]), "generator_bound")
                if flag:
                    shown.add(flag)
                    bar.set_hatch(LIMIT_MARKS[flag]["hatch"])
                    bar.set_edgecolor(c if j == 0 else "white")
                    bar.set_linewidth(0)
                if len(profiles) > 1 and j == 0:  # say which profile each stack's best was
                    inside = getattr(r, value) > 0.6 * top  # a long bar: at its end, inside it
                    ax.annotate(value_title("profile", r.profile), (getattr(r, value), y), xytext=(-3 if inside else 3, 0),
                                textcoords="offset points", fontsize=6.5, va="center", zorder=6,
                                color="#222222" if inside else "#555555", ha="right" if inside else "left",
                                in_layout=False)
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            ax.axvline(v, color="#444444", linewidth=1.1, zorder=5,
                       linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)], label=f"{label}: {v:,.0f}/s")
        number = str(notebook).split("-")[0]
        sub = value_title("profile", profiles[0]) if len(profiles) == 1 else ("best profile per stack" if profiles else "")
        ax.set_title(f"{scenario}" + (f" · {number}" if number else "")
                     + (f" · {database}" if database != "sqlite" else "") + (f"\n{sub}" if sub else ""),
                     fontsize=9, fontweight="normal")
        ax.grid(axis="y", visible=False)
        if not len(g):
            ax.text(0.5, 0.5, "no points at this scale", transform=ax.transAxes, ha="center",
                    va="center", color="#555555")
    for i, ax in enumerate(axes):
        ax.tick_params(labelsize=8.5)
        if i + cols >= n:  # no panel below
            ax.set_xlabel(value if value != "rps" else "requests/s", fontsize=9)
    first = axes[0]
    first.set_yticks(range(len(stacks)))
    first.set_yticklabels(stacks)
    if stacks:
        first.set_ylim(len(stacks) - 0.5, -0.5)
    first.set_xlim(0, top)
    first.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
    first.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(
        lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"))
    _titled(fig, title)
    grey = "#777777"
    handles = [Patch(facecolor=_pale(grey), label=kinds[0])] if kinds else []
    handles += [Patch(facecolor=grey, label=kinds[1])] if len(kinds) > 1 else []
    handles += _extra_handles(axes[0])
    handles += _limit_patches(shown)
    panel_legend(key, handles, ncols=3)
    return fit_legends(fig)
