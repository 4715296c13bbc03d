"""The bar and dot charts: grouped bars of a measure per category (bar_chart), capacity's small
multiples — the capacity at the objective against the naive peak per stack (capacity_chart) — and
dots on one row per category (dot_chart: ratios, on a log axis)."""
from __future__ import annotations

from types import ModuleType

import math
import textwrap

import matplotlib
import matplotlib.font_manager
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sqlitelab.report.plots.figure import _titled, new_figure, new_panels
from sqlitelab.report.plots.legends import _extra_handles, _legend_below, fit_legends, panel_legend
from sqlitelab.report.plots.marks import (PlainLogFormatter, _bar_limit, _limit_patches,
                                          draw_ceilings, plain_numbers)
from sqlitelab.report.plots.style import (KEY_GREY, LIMIT_MARKS, REFERENCE_COLORS, REFERENCE_DASHES,
                                          STACK_STYLES, _order, colours_for, value_title)

def _bar_styles(sers: list, reference_series: str | None) -> dict:
    """Face colour (and a stack's gid) of each series of bars: a stack's own, an article's grey,
    else a shade of ORDERED."""
    out = {s: {"color": c["color"], **({"gid": c["gid"]} if "gid" in c else {})}
           for s, c in colours_for([s for s in sers if s != reference_series]).items()}
    if reference_series in sers:
        out[reference_series] = {"color": REFERENCE_COLORS[1]}
    return out


def _wrap_at(fig, slots: int) -> int:
    """Characters per line of a category name under vertical bars: as many as its slot of the
    figure's width holds at the tick labels' size (18 at most), so that neighbours never touch
    (check.overlapping_texts refuses a figure where they still do)."""
    size = matplotlib.font_manager.FontProperties(size=plt.rcParams["xtick.labelsize"]).get_size_in_points()
    slot_pt = 0.8 * fig.get_figwidth() * 72 / max(slots, 1)
    return max(6, min(18, int(slot_pt / (0.62 * size))))


def _fill(text: str, width: int) -> str:
    """`text` in lines of `width` characters, broken between words or after an "=" (a knob and
    its value), never inside a word."""
    return textwrap.fill(text.replace("=", "= "), width, break_long_words=False).replace("= ", "=")


def _labels(df: pd.DataFrame, columns: list[str]) -> pd.Series:
    """Each row's values of `columns` in plain words (value_title), joined by ", "."""
    return df[columns].apply(lambda r: ", ".join(value_title(c, r[c]) for c in columns), axis=1)


def bar_chart(df: pd.DataFrame, category: str | list[str], value: str, series: str, title: str,
              ylabel: str, caption: str | None = None, ref_lines: dict[str, float] | None = None,
              hatch_col: str | None = "generator_bound", horizontal: bool = False,
              reference_series: str | None = None, ref_format: str = "{:,.0f}/s",
              percent: bool = False, own_scales: bool = False, ceilings: dict[str, float] | None = None):
    """Grouped bars (mean over repeats) on a linear axis from zero (a bar's length is its value:
    never on a log axis), a stack's own colour when the series are stacks, else shades of
    ORDERED; hatched where `hatch_col` is true (generator-bound); a bar of zero says "0".
    `category`: a column, or several (their values in plain words, joined). `horizontal` puts
    the categories on the y axis, for long lists of labels. The series named `reference_series`
    (an article's own numbers) comes first, in grey. `ref_lines`: reference values, drawn over the
    bars and named in the right margin (vertical bars) or in the legend (horizontal, its value
    written by `ref_format`). `percent`: the values are shares (0–1), drawn as %. `own_scales`:
    one panel per category, each on its own scale (values that span decades). `ceilings`: the
    machine's own limits (analysis.machine_limits), dotted like ref_lines' dashes (draw_ceilings;
    vertical bars on one axis)."""
    if ceilings and (horizontal or own_scales):
        raise ValueError("ceilings are drawn on vertical bars on one axis (not horizontal, not own_scales)")
    if not isinstance(category, str):
        df = df.assign(_category=_labels(df, list(category)))
        category = "_category"
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=lambda v: (v != reference_series, _order(v)))
    styles = _bar_styles(sers, reference_series)
    if own_scales:
        fig, axes, key = new_panels(1, len(cats), caption=caption)
        _titled(fig, title)
        groups = [(ax, [c]) for ax, c in zip(axes, cats)]
    else:
        # horizontal: the figure grows with its categories, 0.275 in each (a pair of bars and the
        # "0" beside each apart; 0.22 put a fifth stack's 15 rows' labels over each other)
        kw = {"figsize": (8, max(4.5, 1.2 + 0.275 * len(cats) * max(1, len(sers) / 2)))} if horizontal else {}
        fig, ax = new_figure(caption=caption, **kw)
        axes, key, groups = [ax], None, [(ax, cats)]
    width = 0.8 / max(len(sers), 1)
    for ax, shown in groups:
        for i, s in enumerate(sers):
            g = df[df[series] == s]
            vals = [g[g[category] == c][value].mean() for c in shown]
            flags = [_bar_limit(g[g[category] == c], hatch_col) for c in shown]
            pos = np.arange(len(shown)) + (i - (len(sers) - 1) / 2) * width
            bars = (ax.barh(pos, vals, width, **styles[s]) if horizontal else ax.bar(pos, vals, width, **styles[s]))
            for b, flag, v in zip(bars, flags, vals):
                if flag:
                    b.set_hatch(LIMIT_MARKS[flag]["hatch"])
                    b.set_edgecolor("white")
                if v == 0:  # a zero, not a missing bar
                    xy = (0, b.get_y() + b.get_height() / 2) if horizontal else (b.get_x() + b.get_width() / 2, 0)
                    ax.annotate("0", xy, xytext=(3, 0) if horizontal else (0, 2), textcoords="offset points",
                                ha="left" if horizontal else "center", va="center" if horizontal else "bottom",
                                fontsize=7, color="#333333")
        if horizontal:
            ax.set_yticks(range(len(shown)))
            ax.set_yticklabels([value_title(category, c) for c in shown], fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(ylabel)
            ax.set_xlim(left=0)
        elif own_scales:  # the panel's one category is its title
            ax.set_xticks([])
            ax.set_title(textwrap.fill(value_title(category, shown[0]), 22), fontsize=9)
            ax.set_ylim(bottom=0)
        else:
            ax.set_xticks(range(len(shown)))
            ax.set_xticklabels([_fill(value_title(category, c), _wrap_at(fig, len(shown))) for c in shown])
            ax.set_ylim(bottom=0)
        axis = ax.xaxis if horizontal else ax.yaxis
        if percent:
            axis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=None))
    if not horizontal:
        axes[0].set_ylabel(ylabel)
    plain_numbers(*axes)
    handles = [Patch(facecolor=styles[s]["color"], label=value_title(series, s)) for s in sers]
    if horizontal:  # labels of nearby vertical lines collide: name them in the legend
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            handles.append(axes[0].axvline(v, color="#555555", linewidth=1.2, zorder=4,
                                           linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)],
                                           label=f"{label}: {ref_format.format(v)}"))
    elif ref_lines or ceilings:
        draw_ceilings(axes, ceilings, ref_lines)
    handles += _limit_patches({_bar_limit(df[(df[category] == c) & (df[series] == s)], hatch_col)
                               for c in cats for s in sers})
    if key is not None:
        panel_legend(key, handles, ncols=min(len(handles), 5))
    else:
        axes[0].set_title(title)
        # below the axes: bars fill the plot area
        _legend_below(axes[0], handles, ncols=3 if horizontal else min(len(handles), 5))
    return fit_legends(fig)


CAPACITY_FIGSIZE = (10, 6.5)


def _panel_title(scenario, database, profiles) -> str:
    """A workload's panel title in plain words: the scenario, the profile (or "each stack's best
    profile"), Postgres when it is not SQLite."""
    sub = value_title("profile", profiles[0]) if len(profiles) == 1 else "each stack's best profile"
    top = value_title("scenario", scenario) + (", on Postgres" if database not in (None, "sqlite") else "")
    return f"{textwrap.fill(top, 30)}\n{textwrap.fill(sub, 30)}"


def capacity_chart(frame: pd.DataFrame, title: str, caption: str | None = None,
                   ref_lines: dict[str, float] | None = None, value: str = "rps", ncols: int = 4,
                   studies: dict[str, ModuleType] | None = None):
    """Small multiples of sqlitelab.notebooks.capacity.chart_frame(), a dot plot: one panel per workload that has
    points (notebook, scenario and database), each on its own requests/s scale from zero; per
    stack, in its colour, a dot at the capacity at the objective (the frame's second `kind`) and a
    bar-end tick at the naive peak (its first), joined by a line — the gap is what the naive
    peak overstates. A stack that never met the objective says so. Black rings where a generator
    was the limit (LIMIT_MARKS). `ref_lines`: reference loads as grey dashed lines, in the panels
    whose scale they fall in, named in the one legend below the panels. `studies`: every
    notebook's module by ID (sqlitelab.notebooks.studies), whose TITLE goes under a panel's title
    where one workload has panels from several notebooks' runs."""
    kinds = list(dict.fromkeys(frame["kind"]))
    has = "server" in frame and frame["server"].notna().any()
    if has:
        frame = frame.assign(database=frame["database"].fillna("sqlite") if "database" in frame else "sqlite")
        workloads = [((nb, sc, db), g) for (nb, sc, db), g in
                     frame.groupby(["notebook", "scenario", "database"], sort=True) if g[value].fillna(0).gt(0).any()]
        workloads.sort(key=lambda w: (w[0][0], w[0][1], w[0][2] != "sqlite", w[0][2]))  # SQLite first
    else:
        workloads = []
    n = max(len(workloads), 1)
    rows = math.ceil(n / ncols)
    cols = math.ceil(n / rows)  # 5 panels: 3 + 2, not 4 + 1
    # the panels keep their height however many rows there are (07's Postgres runs add rows)
    size = (CAPACITY_FIGSIZE[0], max(CAPACITY_FIGSIZE[1], 1.6 + 2.3 * rows))
    fig, axes, key = new_panels(rows, cols, caption=caption, figsize=size, sharey=True, n=n)
    present = list(frame["server"].dropna().unique()) if has else []
    stacks = [s for s in STACK_STYLES if s in present] + sorted(s for s in present if s not in STACK_STYLES)
    styles = colours_for(stacks)
    peak_kind, slo_kind = (kinds + [None, None])[:2]
    refs_shown: dict = {}
    titles = [_panel_title(sc, db, list(dict.fromkeys(g["profile"]))) for (_, sc, db), g in workloads]
    repeated = {t for t in titles if titles.count(t) > 1}  # the same workload in several notebooks' runs
    titles = [t + (f"\n({studies[nb].TITLE})" if t in repeated else "")
              for t, ((nb, _, _), _g) in zip(titles, workloads)]
    for ax, (_, g), panel in zip(axes, workloads, titles):
        top = float(g[value].max()) * 1.08
        for r in g[g["kind"] == peak_kind].itertuples():
            y = stacks.index(r.server)
            st = styles[r.server]
            slo = g[(g["kind"] == slo_kind) & (g["server"] == r.server)]
            cap = float(slo[value].iloc[0]) if len(slo) else 0.0
            peak = float(getattr(r, value))
            ax.plot([cap, peak], [y, y], color=st["color"], linewidth=1.6, zorder=2, gid=st.get("gid"),
                    label="_" + value_title("server", r.server))
            ax.plot([peak], [y], marker="|", markersize=11, markeredgewidth=2, color=st["color"],
                    linestyle="none", zorder=3, gid=st.get("gid"), label="_peak")
            if cap > 0:
                ax.plot([cap], [y], marker=st["marker"], markersize=7, color=st["color"],
                        markerfacecolor=st["color"], linestyle="none", zorder=4, gid=st.get("gid"),
                        label="_capacity")
            else:
                ax.annotate("never within the objective", (0, y), xytext=(3, 5), textcoords="offset points",
                            fontsize=6.5, color="#333333", va="bottom")
            for kind_value, rows_ in ((cap, slo), (peak, g[(g["kind"] == peak_kind) & (g["server"] == r.server)])):
                flag = _bar_limit(rows_, "generator_bound") if len(rows_) else None
                if flag and kind_value > 0:
                    m = LIMIT_MARKS[flag]
                    ax.plot([kind_value], [y], marker=m["marker"], markersize=12, markerfacecolor="none",
                            markeredgecolor=m["color"], markeredgewidth=1.1, linestyle="none", zorder=5,
                            gid="limit", label=m["label"])
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            if v <= top:
                refs_shown[label] = ax.axvline(v, color="#444444", linewidth=1.0, zorder=1,
                                               linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)],
                                               label=f"{label}: {v:,.0f}/s")
        ax.set_xlim(0, top)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
        ax.set_title(panel, fontsize=8.5, fontweight="normal")
        ax.grid(axis="y", visible=False)
        ax.tick_params(labelsize=8)
        ax.set_xlabel("requests/s" if value == "rps" else value, fontsize=8.5)
    if not workloads:
        axes[0].text(0.5, 0.5, "no points at this scale", transform=axes[0].transAxes, ha="center",
                     va="center", color="#555555")
    plain_numbers(*axes)
    first = axes[0]
    first.set_yticks(range(len(stacks)))
    first.set_yticklabels([value_title("server", s) for s in stacks])
    if stacks:
        first.set_ylim(len(stacks) - 0.5, -0.5)
    _titled(fig, title)
    handles = []
    if slo_kind:
        handles.append(Line2D([], [], color=KEY_GREY, marker="o", linestyle="none",
                              label=f"capacity at the objective ({slo_kind})"))
    if peak_kind:
        handles.append(Line2D([], [], color=KEY_GREY, marker="|", markersize=11, markeredgewidth=2,
                              linestyle="none", label=peak_kind))
    handles += _extra_handles(*axes)
    panel_legend(key, handles, ncols=3)
    return fit_legends(fig)


def dot_chart(df: pd.DataFrame, category: str | list[str], value: str, series: str, title: str,
              xlabel: str, caption: str | None = None, logx: bool = False,
              ref_value: tuple[str, float] | None = None,
              missing_why: str = "no value"):
    """A dot per series (a stack in its colour and marker) on one row per category, on a log axis
    if asked — lengths mean nothing here, positions do (ratios). `ref_value`: (label, x) of a
    vertical grey reference line (`("as fast", 1)`). A row a series has without a value gets no dot;
    its legend entry counts them and says `missing_why`."""
    if not isinstance(category, str):
        df = df.assign(_category=_labels(df, list(category)))
        category = "_category"
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=_order)
    styles = colours_for(sers)
    fig, ax = new_figure(caption=caption, figsize=(8, max(3.5, 1.4 + 0.42 * len(cats))))
    step = 0.6 / max(len(sers), 1)
    for i, s in enumerate(sers):
        g = df[df[series] == s]
        vals = [g[g[category] == c][value].mean() for c in cats]
        pos = np.arange(len(cats)) + (i - (len(sers) - 1) / 2) * step
        st = styles[s]
        # a row without a value (e.g. a ratio with a side where no request finished) has no dot,
        # and the legend says how many
        missing = sum(1 for v in vals if v != v) - sum(1 for c in cats if g[g[category] == c].empty)
        label = value_title(series, s) + (f" (no dot in {missing} row{'' if missing == 1 else 's'}: "
                                          f"{missing_why})" if missing else "")
        ax.plot(vals, pos, linestyle="none", marker=st["marker"], color=st["color"], markersize=7,
                markerfacecolor=st["markerfacecolor"], gid=st.get("gid"), label=label)
    if ref_value:
        ax.axvline(ref_value[1], color="#444444", linestyle=REFERENCE_DASHES[0], linewidth=1.1, zorder=1,
                   label=f"{ref_value[0]}")
    ax.set_yticks(range(len(cats)))
    ax.set_yticklabels([value_title(category, c) for c in cats], fontsize=8.5)
    ax.set_ylim(len(cats) - 0.5, -0.5)
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(PlainLogFormatter())
        ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    plain_numbers(ax)
    _legend_below(ax, ax.get_legend_handles_labels()[0], ncols=min(len(sers) + 1, 5))
    return fit_legends(fig)
