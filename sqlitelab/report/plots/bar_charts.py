"""The bar and dot charts: grouped bars of a measure per category (bar_chart), capacity's dumbbells
— the capacity at the objective against the naive peak per workload and stack, in daily users
(capacity_chart) — dots on one row per category (dot_chart: ratios, or rates that span
decades, on a log axis), and two measures of each row side by side (pair_chart: a trade-off)."""
from __future__ import annotations

import math
import textwrap

import matplotlib
import matplotlib.font_manager
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib import patheffects
from matplotlib.collections import LineCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sqlitelab.report.analysis import flagged
from sqlitelab.report.plots.figure import _titled, caption_room, new_figure, new_panels
from sqlitelab.report.plots.legends import _extra_handles, _legend_below, fit_legends, panel_legend
from sqlitelab.report.plots.marks import (CORNERS, PlainLogFormatter, _bar_limit, _limit_patches,
                                          _ref_line_labels, draw_ceilings, mark_limits, place_clear,
                                          plain_numbers)
from sqlitelab.report.plots.style import (BAR_INTERVAL, INTERVAL_CAPSIZE, KEY_GREY, LIMIT_MARKS, REFERENCE_COLORS,
                                          REFERENCE_DASHES, STACK_STYLES, _order, colours_for, value_title)

def _bar_styles(sers: list, reference_series: str | None, column: str | None = None) -> dict:
    """Face colour (and a stack's gid) of each series of bars: a stack's own, an article's grey,
    else a shade of the ramp of `column` (colours_for)."""
    out = {s: {"color": c["color"], **({"gid": c["gid"]} if "gid" in c else {})}
           for s, c in colours_for([s for s in sers if s != reference_series], column).items()}
    if reference_series in sers:
        out[reference_series] = {"color": REFERENCE_COLORS[1]}
    return out


def _wrap_at(fig, slots: int) -> int:
    """Characters per line of a category name under vertical bars: as many as its slot of the
    figure's width holds at the tick labels' size (18 at most), so that neighbours never touch
    (check.overlapping_texts refuses a figure where they still do)."""
    size = matplotlib.font_manager.FontProperties(size=plt.rcParams["xtick.labelsize"]).get_size_in_points()
    slot_pt = 0.75 * fig.get_figwidth() * 72 / max(slots, 1)  # the axes keep about 3/4 of the width
    return max(6, min(18, int(slot_pt / (0.65 * size))))


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
              percent: bool = False, ceilings: dict[str, float] | None = None,
              zeros_in_note: bool = False, interval: tuple[str, str] | None = None):
    """Grouped bars (mean over repeats) on a linear axis from zero (a bar's length is its value:
    never on a log axis; values that span decades are dot_chart's), a stack's own colour when the
    series are stacks, else shades of its column's ramp (colours_for); hatched where `hatch_col`
    is true (generator-bound); a bar of zero says "0". `category`: a column, or several (their
    values in plain words, joined). `horizontal` puts the categories on the y axis, for long
    lists of labels. The series named `reference_series` (an article's own numbers) comes first,
    in grey. `ref_lines`: reference values, drawn over the bars and named in the right margin
    (vertical bars) or in the legend (horizontal, its value written by `ref_format`). `percent`:
    the values are shares (0–1), drawn as %. `ceilings`: the machine's own limits
    (analysis.machine_limits), dotted like ref_lines' dashes (draw_ceilings; vertical bars).
    `zeros_in_note`: the categories that are zero in every series get no row of "0"s but are
    named in a note where no bar is (zero_note; horizontal bars). `interval`: the columns of each
    bar's 95 % interval (low, high), drawn as an error bar over it (BAR_INTERVAL) where both are
    known; a bar of several rows has no one interval: refused."""
    if ceilings and horizontal:
        raise ValueError("ceilings are drawn on vertical bars (not horizontal)")
    if zeros_in_note and not horizontal:
        raise ValueError("zeros_in_note names the zero rows of horizontal bars")
    if interval and df.duplicated([*([category] if isinstance(category, str) else category), series]).any():
        raise ValueError("an interval belongs to one row per bar: these bars are means of several rows")
    df, note = _zero_rows(df, category, value, series) if zeros_in_note else (df, None)
    if not isinstance(category, str):
        df = df.assign(_category=_labels(df, list(category)))
        category = "_category"
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=lambda v: (v != reference_series, _order(v)))
    styles = _bar_styles(sers, reference_series, series)
    # horizontal: the figure grows with its categories, 0.275 in each (a pair of bars and the
    # "0" beside each apart; 0.22 put a fifth stack's 15 rows' labels over each other)
    # a note of zero rows gets rows of its own below the bars (NOTE_LINE_IN a line)
    spare = math.ceil((note.count("\n") + 1) * NOTE_LINE_IN / 0.275) + 1 if note else 0
    kw = {"figsize": (8, max(4.5, 1.2 + 0.275 * (len(cats) * max(1, len(sers) / 2) + spare)))} if horizontal else {}
    fig, ax = new_figure(caption=caption, **kw)
    width = 0.8 / max(len(sers), 1)
    for i, s in enumerate(sers):
        g = df[df[series] == s]
        vals = [g[g[category] == c][value].mean() for c in cats]
        flags = [_bar_limit(g[g[category] == c], hatch_col) for c in cats]
        pos = np.arange(len(cats)) + (i - (len(sers) - 1) / 2) * width
        bars = (ax.barh(pos, vals, width, **styles[s]) if horizontal else ax.bar(pos, vals, width, **styles[s]))
        tops = (_interval_bars(ax, pos, vals, [g[g[category] == c] for c in cats], interval, horizontal)
                if interval else [None] * len(cats))
        for b, flag, v, top in zip(bars, flags, vals, tops):
            if flag:
                b.set_hatch(LIMIT_MARKS[flag]["hatch"])
                b.set_edgecolor("white")
            if v == 0:  # a zero, not a missing bar (beyond its interval's cap, where it has one)
                xy = ((top or 0, b.get_y() + b.get_height() / 2) if horizontal
                      else (b.get_x() + b.get_width() / 2, top or 0))
                gap = 2 if top is None else INTERVAL_CAPSIZE + 2  # clear of a cap's marker box
                ax.annotate("0", xy, xytext=(gap + 1, 0) if horizontal else (0, gap), textcoords="offset points",
                            ha="left" if horizontal else "center", va="center" if horizontal else "bottom",
                            fontsize=7, color="#333333")
    if horizontal:
        ax.set_yticks(range(len(cats)))
        ax.set_yticklabels([value_title(category, c) for c in cats], fontsize=8)
        ax.set_ylim(len(cats) - 0.5 + spare / max(1, len(sers) / 2), -0.5)  # top down, the note's rows last
        ax.set_xlabel(ylabel)
        ax.set_xlim(left=0)
    else:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([_fill(value_title(category, c), _wrap_at(fig, len(cats))) for c in cats])
        ax.set_ylim(bottom=0)
        ax.set_ylabel(ylabel)
    if percent:
        (ax.xaxis if horizontal else ax.yaxis).set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=None))
    plain_numbers(ax)
    handles = [Patch(facecolor=styles[s]["color"], label=value_title(series, s)) for s in sers]
    if horizontal:  # labels of nearby vertical lines collide: name them in the legend
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            handles.append(ax.axvline(v, color="#555555", linewidth=1.2, zorder=4,
                                      linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)],
                                      label=f"{label}: {ref_format.format(v)}"))
    elif ref_lines or ceilings:
        draw_ceilings([ax], ceilings, ref_lines)
    handles += _limit_patches({_bar_limit(df[(df[category] == c) & (df[series] == s)], hatch_col)
                               for c in cats for s in sers})
    ax.set_title(title)
    # below the axes: bars fill the plot area
    _legend_below(ax, handles, ncols=3 if horizontal else min(len(handles), 5))
    return _noted(fit_legends(fig), ax, note)


def _interval_bars(ax, pos, vals, rows: list[pd.DataFrame], interval: tuple[str, str],
                   horizontal: bool) -> list[float | None]:
    """Each bar's interval (its row's `interval` columns, low and high) as an error bar over it,
    near-black in a white outline (BAR_INTERVAL); a bar without both is left bare. Returns each
    bar's interval top (None: bare)."""
    low_col, high_col = interval
    at, mid, below, above, tops = [], [], [], [], []
    for p, v, r in zip(pos, vals, rows):
        known = len(r) and r[low_col].notna().iloc[0] and r[high_col].notna().iloc[0] and v == v
        tops.append(float(r[high_col].iloc[0]) if known else None)
        if known:
            lo, hi = float(r[low_col].iloc[0]), float(r[high_col].iloc[0])
            at.append(p), mid.append(v), below.append(max(0.0, v - lo)), above.append(max(0.0, hi - v))
    if not at:
        return tops
    err = [below, above]
    bar = (ax.errorbar(mid, at, xerr=err, fmt="none", **BAR_INTERVAL) if horizontal
           else ax.errorbar(at, mid, yerr=err, fmt="none", **BAR_INTERVAL))
    for line in bar.lines[1] + bar.lines[2]:
        line.set_path_effects([patheffects.withStroke(linewidth=2.6, foreground="white")])
    return tops


def _noted(fig, ax, note: str | None):
    """`fig` with `note` in a lower corner of `ax` where it covers no bar (the rows kept for it)."""
    if note:
        words = ax.text(0, 0, note, transform=ax.transAxes, fontsize=NOTE_LINE_IN * 72 / 1.15, color="#333333",
                        linespacing=1.15, in_layout=False, gid="zero-note")
        place_clear(ax, words, [c for c in CORNERS if c["va"] == "bottom"])
    return fig


def _zero_rows(df: pd.DataFrame, category, value: str, series: str) -> tuple[pd.DataFrame, str | None]:
    """`df` without the categories whose mean `value` is zero in every series, and the note naming
    them (zero_note); `df` as it is and None when none is, or when every one is."""
    columns = [category] if isinstance(category, str) else list(category)
    zero = df.groupby(columns, sort=False)[value].apply(lambda v: bool((v.fillna(0) == 0).all()))
    zero_keys = [k if isinstance(k, tuple) else (k,) for k, z in zero.items() if z]
    if not zero_keys or len(zero_keys) == len(zero):
        return df, None
    note = zero_note(df, columns, zero_keys, [value_title(series, v) for v in sorted(df[series].unique(), key=_order)])
    return df[~df[columns].apply(tuple, axis=1).isin(set(zero_keys))], note


def zero_note(df: pd.DataFrame, columns: list[str], zero_keys: list[tuple], series_titles: list[str]) -> str:
    """The note naming the categories that are zero in every series, a first column's value
    once when every one of its categories is ("Go · net/http, every profile")."""
    first = columns[0]
    every = {k[0] for k in zero_keys if len(columns) > 1
             and all(z in zero_keys for z in df[df[first] == k[0]][columns].apply(tuple, axis=1))}
    lines, named = [], set()
    for k in zero_keys:
        if k[0] in every:
            if k[0] not in named:
                named.add(k[0])
                lines.append(f"{value_title(first, k[0])}, every {columns[1]}")
        else:
            lines.append(", ".join(value_title(c, v) for c, v in zip(columns, k)))
    head = "None with " + " or ".join(series_titles) + ":" if len(series_titles) > 1 else "None:"
    return "\n".join([head] + lines)


NOTE_LINE_IN = 7.5 * 1.15 / 72  # inches a line of a note takes (7.5 pt, line spacing 1.15)
CAPACITY_WIDTH_IN = 8  # the capacity chart's width; its height grows with its rows (CAPACITY_ROW_IN each)


def _workload_title(scenario, database, profiles) -> str:
    """A workload in plain words: the scenario, the profile (or "each stack's best profile"),
    Postgres when it is not SQLite."""
    sub = value_title("profile", profiles[0]) if len(profiles) == 1 else "each stack's best profile"
    top = value_title("scenario", scenario) + (", on Postgres" if database not in (None, "sqlite") else "")
    return f"{top} · {sub}"


def _users(n: float) -> str:
    """A number of users to two significant figures (a capacity moves more than 5 % between
    runs of this machine): 1.2 M, 35 k, 870."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            v = float(f"{n / scale:.2g}")
            return f"{v:g} {unit}"
    return f"{float(f'{n:.2g}'):,.0f}"


CAPACITY_ROW_IN = 0.22  # inches per stack's row of the capacity chart
LINE_OVERHANG = 0.45  # rows a reference line reaches past a block's first and last stack


CAPACITY_INTERVAL = "95 % interval of the capacity over its level's runs"  # its legend entry


def _dumbbell(ax, y: float, server: str, st: dict, peaks: pd.DataFrame, slos: pd.DataFrame,
              value: str) -> tuple[float, bool, tuple[float, float] | None, float]:
    """One stack's row of capacity_chart: its capacity's dot joined to its naive peak's tick, a
    ring where a load generator set the pace, and the capacity's 95 % interval as an error bar in
    its colour where its frame row has one (`<value>_low`, `<value>_high`). Returns the capacity,
    whether it is a lower bound (a generator set the pace there), its interval (or None) and the
    naive peak."""
    peak_rows, slo_rows = peaks[peaks["server"] == server], slos[slos["server"] == server]
    peak = float(peak_rows[value].max()) if len(peak_rows) else 0.0
    cap = float(slo_rows[value].max()) if len(slo_rows) else 0.0
    interval = None
    if cap > 0 and {f"{value}_low", f"{value}_high"} <= set(slo_rows):
        best = slo_rows.loc[slo_rows[value].idxmax()]
        low, high = float(best[f"{value}_low"]), float(best[f"{value}_high"])
        if low == low and high == high:
            interval = (max(low, 0.0), high)
            bar = ax.errorbar([cap], [y], xerr=[[cap - interval[0]], [interval[1] - cap]], fmt="none",
                              ecolor=st["color"], capsize=INTERVAL_CAPSIZE * 0.6, linewidth=1, zorder=3,
                              label="_interval")
            for line in bar.get_children():
                line.set_gid(st.get("gid"))
    if peak > 0:
        ax.plot([cap if cap > 0 else peak, peak], [y, y], color=st["color"], linewidth=1.6, zorder=2,
                gid=st.get("gid"), label="_" + value_title("server", server))
        ax.plot([peak], [y], marker="|", markersize=10, markeredgewidth=2, color=st["color"],
                linestyle="none", zorder=3, gid=st.get("gid"), label="_peak")
    if cap > 0:
        ax.plot([cap], [y], marker=st["marker"], markersize=6.5, color=st["color"],
                markerfacecolor=st["color"], linestyle="none", zorder=4, gid=st.get("gid"), label="_capacity")
    lower = False
    for is_cap, v, rows_ in ((True, cap, slo_rows), (False, peak, peak_rows)):
        flag = _bar_limit(rows_, "generator_bound") if len(rows_) else None
        if flag and v > 0:
            m = LIMIT_MARKS[flag]
            ax.plot([v], [y], marker=m["marker"], markersize=11, markerfacecolor="none",
                    markeredgecolor=m["color"], markeredgewidth=1.1, linestyle="none", zorder=5,
                    gid="limit", label=m["label"])
            lower |= is_cap
    return cap, lower, interval, peak


def capacity_chart(frame: pd.DataFrame, title: str, caption: str | None = None,
                   ref_lines: dict[str, float] | None = None, value: str = "rps",
                   users: tuple[float, str] | None = None):
    """sqlitelab.notebooks.capacity.chart_frame() as one dumbbell chart on a log axis of
    requests/s: a block of rows per workload (its name on a row of its own), a row per stack in
    its colour and marker, a dot at the capacity at the objective (the frame's second `kind`)
    joined to a tick at the naive peak (its first) — the line is what the naive peak overstates.
    `users`: (daily active users per request/s, what that assumes): the top axis in those users,
    and at the end of each row, in the right margin, the daily active users the capacity serves
    ("objective not met" where no level met it; "≥" where a load generator set the
    pace: LIMIT_MARKS rings the point), with its interval's ends where the frame has one
    (`<value>_low`, `<value>_high`: an error bar on the dot). `ref_lines`: reference loads, each one dashed line
    through every block, named in the legend."""
    kinds = list(dict.fromkeys(frame["kind"]))
    peak_kind, slo_kind = (kinds + [None, None])[:2]
    has = "server" in frame and frame["server"].notna().any() and frame[value].fillna(0).gt(0).any()
    blocks = []
    if has:
        frame = frame.assign(database=frame["database"].fillna("sqlite") if "database" in frame else "sqlite")
        for (_nb, sc, db), g in frame.groupby(["notebook", "scenario", "database"], sort=True):
            if g[value].fillna(0).gt(0).any():
                present = list(dict.fromkeys(g["server"]))
                stacks = [s for s in STACK_STYLES if s in present] + sorted(s for s in present if s not in STACK_STYLES)
                blocks.append((_workload_title(sc, db, list(dict.fromkeys(g["profile"]))), g, stacks))
    n_rows = sum(1 + len(b[2]) for b in blocks) or 1
    fig, ax = new_figure(caption=caption, figsize=(CAPACITY_WIDTH_IN, 2.2 + CAPACITY_ROW_IN * n_rows))
    styles = colours_for([s for b in blocks for s in b[2]])
    ticks, tick_labels, header_rows, spans, ends = [], [], [], [], []
    y = 0
    for name, g, stacks in blocks:
        header_rows.append((y, name))
        first = y + 1
        for server in stacks:
            y += 1
            ticks.append(y)
            tick_labels.append(value_title("server", server))
            ends.append((y, *_dumbbell(ax, y, server, styles[server], g[g["kind"] == peak_kind],
                                       g[g["kind"] == slo_kind], value)))
        spans.append((first - LINE_OVERHANG, y + LINE_OVERHANG))
        y += 1
    values = frame[value][frame[value].fillna(0) > 0] if has else pd.Series(dtype=float)
    low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 10.0)
    shown_refs = {k: v for k, v in (ref_lines or {}).items() if v and v > 0}
    low = min([low] + list(shown_refs.values()))
    ax.set_xscale("log")
    ax.set_xlim(low / 1.6, high * 1.6)
    for k, (label, v) in enumerate(shown_refs.items()):
        segs = spans or [(-0.5, n_rows - 0.5)]
        ax.vlines([v] * len(segs), [a for a, _ in segs], [b for _, b in segs], color="#444444", linewidth=1.0,
                  zorder=1, linestyles=[REFERENCE_DASHES[k % len(REFERENCE_DASHES)]],
                  label=f"{label}: {v:,.0f}/s")
    ax.xaxis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(0, 0)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("requests/s (log scale)" if value == "rps" else value)
    ax.set_yticks(ticks)
    ax.set_yticklabels(tick_labels, fontsize=8.5)
    ax.set_ylim(n_rows - 0.5, -0.6)
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="y", length=0)
    names = [ax.text(0.005, yh, name, transform=ax.get_yaxis_transform(), fontsize=8.5, fontweight="bold",
                     va="center", ha="left", color="#222222", gid="workload")
             for yh, name in header_rows]  # a block's name on its own row, where no data and no line is drawn
    if users and blocks:
        per_rps, assumption = users
        top = ax.secondary_xaxis("top", functions=(lambda r: r * per_rps, lambda u: u / per_rps))
        top.set_xlabel(f"daily active users ({assumption})", fontsize=8.5)
        top.xaxis.set_major_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(0, 0)))
        top.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        top.tick_params(labelsize=8)
        ax.text(1.01, -0.6, "daily users", transform=ax.get_yaxis_transform(), fontsize=8, ha="left",
                va="bottom", color="#222222", fontweight="bold", gid="daily-users")
        for yr, cap, lower, interval, _ in ends:
            words = (("≥ " if lower else "") + _users(cap * per_rps)) if cap > 0 else "objective not met"
            if cap > 0 and interval:
                words += f" ({_users(interval[0] * per_rps)}–{_users(interval[1] * per_rps)})"
            ax.text(1.01, yr, words, transform=ax.get_yaxis_transform(), fontsize=8 if cap > 0 else 7.5,
                    va="center", ha="left", color="#222222" if cap > 0 else "#555555", gid="daily-users")
    if not blocks:
        ax.text(0.5, 0.5, "no points at this scale", transform=ax.transAxes, ha="center", va="center",
                color="#555555")
    ax.set_title(title)
    handles = []
    if slo_kind:
        handles.append(Line2D([], [], color=KEY_GREY, marker="o", linestyle="none",
                              label=f"capacity at the objective ({slo_kind})"))
    if peak_kind:  # a capacity that is its naive peak hides the tick under its dot: said in the key
        hidden = any(cap > 0 and cap >= peak for _, cap, _, _, peak in ends)
        handles.append(Line2D([], [], color=KEY_GREY, marker="|", markersize=10, markeredgewidth=2,
                              linestyle="none", label=peak_kind + (" (under the dot where the capacity is the "
                                                                   "peak)" if hidden else "")))
    if any(e[3] for e in ends):  # an error bar's key, drawn by the legend alone
        bare = any(cap > 0 and not interval for _, cap, _, interval, _ in ends)
        handles.append(ErrorbarContainer(
            (Line2D([], [], color=KEY_GREY, linestyle="none"),
             (Line2D([], [], color=KEY_GREY, marker="|", markersize=INTERVAL_CAPSIZE * 1.2),),
             (LineCollection([], colors=KEY_GREY, linewidths=1),)),
            has_xerr=True, has_yerr=False,
            label=CAPACITY_INTERVAL + " (daily users: its ends" + ("; none: one run" if bare else "") + ")"))
    handles += _extra_handles(ax)
    _legend_below(ax, handles, ncols=2)
    fit_legends(fig)
    return _rows_clear_names(fig, ax, n_rows + 0.1, names, captioned=bool(caption))


def _rows_clear_names(fig, ax, rows: float, names: list, captioned: bool):
    """`fig` made taller where its rows are too short for a block's name, on its own row, to
    stay clear of the reference lines LINE_OVERHANG of a row from it, with a quarter to spare:
    the title, the top axis, the legend and the caption take their room first (a chart of one
    stack kept 0.1 in a row, and its block's name met the line of a reference load below it).
    `rows`: the axes' height in rows."""
    for _ in range(3):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        tallest = max((t.get_window_extent(renderer).height for t in names), default=0.0) / fig.dpi
        short = rows * 1.25 * tallest / (2 * (1 - LINE_OVERHANG)) - ax.get_window_extent(renderer).height / fig.dpi
        if short <= 0.005:
            break
        fig.set_figheight(fig.get_figheight() + short)
        if captioned:
            caption_room(fig)
        fit_legends(fig)
    return fig


def dot_chart(df: pd.DataFrame, category: str | list[str], value: str, series: str, title: str,
              xlabel: str, caption: str | None = None, logx: bool = False,
              ref_value: tuple[str, float] | None = None,
              missing_why: str = "no value", reference_series: str | None = None,
              ref_lines: dict[str, float] | None = None, ceilings: dict[str, float] | None = None,
              limits: bool = False):
    """A dot per series (a stack in its colour and marker) on one row per category, on a log axis
    if asked — lengths mean nothing here, positions do (ratios, or rates that span decades).
    `ref_value`: (label, x) of a vertical grey reference line (`("as fast", 1)`). A row a series
    has without a value gets no dot; its legend entry counts them and says `missing_why`. The
    series named `reference_series` (an article's own numbers) is drawn as the articles' are,
    grey × first in each row. `ref_lines` (reference loads) and `ceilings` (the machine's own
    limits, analysis.machine_limits): lines up the plot, each named above it (_ref_line_labels).
    `limits`: a dot whose generator was the limit or set the pace is ringed (mark_limits)."""
    if not isinstance(category, str):
        df = df.assign(_category=_labels(df, list(category)))
        category = "_category"
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=lambda v: (v != reference_series, _order(v)))
    styles = colours_for([s for s in sers if s != reference_series], series)
    if reference_series in sers:
        styles[reference_series] = {"color": REFERENCE_COLORS[0], "marker": "x", "markerfacecolor": REFERENCE_COLORS[0]}
    row_in = max(0.42, 0.12 * len(sers))  # room for every series' dot, a marker apart
    fig, ax = new_figure(caption=caption, figsize=(8, max(3.5, 1.4 + row_in * len(cats))))
    step = 0.75 / max(len(sers), 1)
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
        ax.plot(vals, pos, linestyle="none", marker=st["marker"], color=st["color"], markersize=6.5,
                markerfacecolor=st["markerfacecolor"], gid=st.get("gid"), label=label)
        if limits and s != reference_series:
            rows = g.assign(**{c: flagged(g, c) for c in LIMIT_MARKS}).groupby(category, sort=False).agg(
                {value: "mean", **{c: "any" for c in LIMIT_MARKS}})
            rows["_pos"] = [pos[cats.index(c)] for c in rows.index]
            mark_limits(ax, rows, value, "_pos")
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
        lo, hi = ax.get_xlim()
        if hi < 10 * lo:  # within a decade: ticks at round numbers inside it, each labelled
            ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(xlabel)
    plain_numbers(ax)
    if ref_lines or ceilings:  # the x axis reaches every line, then each is named above the plot
        reach = [v for v in [*(ref_lines or {}).values(), *(ceilings or {}).values()] if v > 0 or not logx]
        lo, hi = ax.get_xlim()
        ax.set_xlim(min([lo, *(v / 1.3 if logx else v for v in reach)]), max([hi, *(v * 1.3 if logx else v for v in reach)]))
        _ref_line_labels(ax, ref_lines or {}, ceilings or {}, across="x")
        _titled(fig, title)
    else:
        ax.set_title(title)
    _legend_below(ax, ax.get_legend_handles_labels()[0], ncols=min(len(sers) + 1, 5))
    return fit_legends(fig)


def pair_chart(df: pd.DataFrame, category: str, left: str, right: str, series: str, title: str,
               left_label: str, right_label: str, caption: str | None = None):
    """A trade-off read across each row: two panels on the same rows (one per category), a dot
    per series (a stack in its colour and marker) in each — on the left what a category costs
    (`left`), on the right what it gives (`right`), each on its own axis: linear from zero; where
    the values span more than 30×, logarithmic — linear to 1 and logarithmic above it where one
    is 0 (a count of 1 stays apart from 0). A row a series has no value for gets no dot in that
    panel."""
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=_order)
    styles = colours_for(sers, series)
    row_in = max(0.42, 0.12 * len(sers))
    fig, axes, key = new_panels(1, 2, caption=caption, figsize=(8, max(3.5, 1.9 + row_in * len(cats))), sharey=True)
    step = 0.75 / max(len(sers), 1)
    handles = []
    for ax, column, label in ((axes[0], left, left_label), (axes[1], right, right_label)):
        for i, s in enumerate(sers):
            g = df[df[series] == s]
            vals = [g[g[category] == c][column].mean() for c in cats]
            pos = np.arange(len(cats)) + (i - (len(sers) - 1) / 2) * step
            st = styles[s]
            ax.plot(vals, pos, linestyle="none", marker=st["marker"], color=st["color"], markersize=6.5,
                    markerfacecolor=st["markerfacecolor"], gid=st.get("gid"), label="_" + value_title(series, s))
            if ax is axes[0]:
                handles.append(Line2D([], [], linestyle="none", marker=st["marker"], color=st["color"],
                                      markersize=6.5, markerfacecolor=st["markerfacecolor"],
                                      gid=st.get("gid"), label=value_title(series, s)))
        values = pd.to_numeric(df[column], errors="coerce").dropna()
        top = values.max() if len(values) else float("nan")
        small = values[values > 0].min() if (values > 0).any() else float("nan")
        if top == top and small == small and top / small > 30 and (values == 0).any():
            ax.set_xscale("symlog", linthresh=1, linscale=0.5)  # counts from 0 to thousands: 1 apart from 0
            ax.set_xlim(-0.3, top * 1.5)  # a dot at 0 clear of the axis
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
            label += " (log scale above 1)"
        elif top == top and small == small and top / small > 30:  # rates over decades
            ax.set_xscale("log")
            ax.set_xlim(small / 1.5, top * 1.5)
            ax.xaxis.set_major_formatter(PlainLogFormatter())
            ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
            label += " (log scale)"
        else:
            top = top if top == top and top > 0 else 1
            ax.set_xlim(-0.02 * top, 1.08 * top)
        ax.set_xlabel(label)
        plain_numbers(ax)
    axes[0].set_yticks(range(len(cats)))  # a row's name in lines of at most a third of the canvas
    axes[0].set_yticklabels([textwrap.fill(value_title(category, c), 34, break_long_words=False) for c in cats],
                            fontsize=8.5)
    axes[0].set_ylim(len(cats) - 0.5, -0.5)
    _titled(fig, title)
    panel_legend(key, handles)
    fig.canvas.draw()  # each panel's label in lines no wider than its panel, once the layout has sized it
    for ax in axes:
        inches = ax.get_position().width * fig.get_figwidth()
        ax.set_xlabel(textwrap.fill(ax.get_xlabel(), max(16, int(inches * 72 / (0.55 * plt.rcParams["axes.labelsize"])))))
    return fit_legends(fig)
