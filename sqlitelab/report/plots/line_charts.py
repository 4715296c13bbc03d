"""The line charts: throughput and latency against concurrent users, any measure against any
x (line_chart, and hockey_stick_chart on it), the generators' calibration against
wrk, and each operation's window second by second (timeline_chart)."""
from __future__ import annotations

from typing import Callable

import matplotlib.ticker
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sqlitelab.core.vocabulary import OPERATION_TITLES
from sqlitelab.report.analysis import flagged, rate_interval, rate_points
from sqlitelab.report.plots.figure import (A_POINT_ONE_RUN, _titled, finish_legend, new_figure, new_panels,
                                           panel_grid, panel_title, panel_values)
from sqlitelab.report.plots.legends import _extra_handles, fit_legends, panel_legend
from sqlitelab.report.plots.marks import (PlainLogFormatter, _users_axis, draw_ceilings,
                                          draw_reference, label_coincident, mark_limits, place_clear,
                                          plain_numbers)
from sqlitelab.report.plots.style import (BOUND_STYLE, INTERVAL_CAPSIZE, KEY_GREY, LIMIT_MARKS, STACK_STYLES,
                                          SeriesStyles, colours_for, value_title)
from sqlitelab.report.plots.tables import summarise

def _from_zero(axes, bottom: float, also=()) -> None:
    """Every panel's y axis from `bottom`, its top from all the panels' data (shared axes
    autoscale over their siblings) and `also` (reference values to keep in view). After the
    panels are drawn: a limit set earlier would freeze the top at the first panel's data."""
    drawn = [float(v) for ax in axes for ln in ax.get_lines() for v in ln.get_ydata()
             if isinstance(v, (int, float)) and v == v]
    for ax in axes:
        ax.autoscale_view(scalex=False)
        top = max([ax.get_ylim()[1]] + [v * 1.05 for v in also])
        if drawn and 0 < max(drawn):  # the highest point and its marker clear of the frame (flat lines too)
            top = max(top, max(drawn) * 1.05)
        ax.set_ylim(bottom, top)


def level_intervals(s: pd.DataFrame, runs: Callable[[str, str, int], list[float]]) -> pd.DataFrame:
    """Each level of `s` (summarise's rows: server, profile, users) with the 95 % interval of
    its mean over its runs (intervals.mean_interval, Student's t), `runs(server, profile, users)`
    giving the rates of its runs: columns estimate, low, high (NaN: fewer than two runs, no
    interval), n and level, on `s`'s index."""
    rows = {}
    for i, r in s.iterrows():
        iv = rate_interval(runs(r["server"], r["profile"], r["users"]))
        rows[i] = {"estimate": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n, "level": iv.level}
    return pd.DataFrame.from_dict(rows, orient="index",
                                  columns=["estimate", "low", "high", "n", "level"]).reindex(s.index)


def interval_words(bars: pd.DataFrame, caption: str | None = None) -> str:
    """What a chart's interval bars (level_intervals) are, in a reader's words, for its caption:
    "Bars: 95 % interval of each point's mean over its 3 runs (Student's t), drawn from zero where
    it reaches below; a point of one run has none." — each clause only where it holds; "" when
    no bar is drawn; the last clause left out where `caption` says it already (caption_for)."""
    drawn = bars[bars["low"].notna() & bars["high"].notna()]
    if not len(drawn):
        return ""
    ns = sorted({int(n) for n in drawn["n"]})
    runs = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
    levels = sorted({float(v) for v in drawn["level"]})
    level = " or ".join(f"{v:.0%}".replace("%", " %") for v in levels)
    words = f"Bars: {level} interval of each point's mean over its {runs} runs (Student's t)"
    if (drawn["low"] < 0).any():  # drawn from zero: a rate is never negative
        words += ", drawn from zero where it reaches below"
    if (bars["n"] == 1).any() and A_POINT_ONE_RUN not in (caption or ""):  # caption_for's may say it
        words += "; a point of one run has none"
    return words + "."


def throughput_chart(df: pd.DataFrame, title: str = "Throughput vs concurrent users",
                     caption: str | None = None, y: str = "rps", ylabel: str = "requests/s",
                     logx: bool = True, reference: dict | None = None,
                     ceilings: dict[str, float] | None = None,
                     runs: Callable[[str, str, int], list[float]] | None = None):
    """Mean over repeats with min–max bars (or, with `runs`, interval bars), a colour per stack;
    one panel per profile when there are several; rings where the generator was the limit or set the pace (LIMIT_MARKS).
    `reference`: the article's numbers on the same axes, as draw_reference's keyword
    arguments (`{"ref": df, "x": "users", "y": "rps", "label": "article", "by": None}`).
    `ceilings`: the machine's own limits (analysis.machine_limits), dotted (draw_ceilings).
    `runs`: each level's runs (`runs(server, profile, users)` -> the rates of its runs, those
    the point's mean is over; 01's linear_writes.runs_of): its bar is then the 95 % interval of
    that mean (level_intervals) in place of the min–max one, in the stack's colour, a lower end
    below zero drawn at zero, none for a level of one run, and the caption says what the bars
    are (interval_words) when one is drawn."""
    s = summarise(df)
    bars = level_intervals(s, runs) if runs is not None else None
    words = interval_words(bars, caption) if bars is not None else ""
    if words:
        caption = f"{caption}\n{words}" if caption else words
    values = panel_values(s, "profile")
    fig, axes, key = panel_grid(len(values), caption, title)
    styles = SeriesStyles(s, ["server"])
    for ax, value in zip(axes, values):
        part = s if value is None else s[s["profile"] == value]
        for server, g in part.groupby("server", sort=True):
            kw = styles(server)
            ax.plot(g["users"], g[y], label="_" + styles.title(server), **kw)
            bar = None
            if bars is not None:
                b = bars.loc[g.index]
                b = b[b["low"].notna() & b["high"].notna()]
                if len(b):  # the interval around its mean, from zero at the lowest (a rate is never negative),
                    low = b["low"].clip(lower=0)  # its caps wider than the marker: one within it still shows
                    bar = ax.errorbar(g.loc[b.index, "users"], b["estimate"],
                                      yerr=[b["estimate"] - low, b["high"] - b["estimate"]],
                                      fmt="none", ecolor=kw["color"], capsize=INTERVAL_CAPSIZE, linewidth=1)
            elif y == "rps":
                bar = ax.errorbar(g["users"], g[y], yerr=[g[y] - g["rps_min"], g["rps_max"] - g[y]],
                                  fmt="none", ecolor=kw["color"], capsize=3, linewidth=1)
            if bar is not None:
                for cap in bar.get_children():  # the caps are lines of the stack's colour
                    cap.set_gid(kw.get("gid"))  # a stack's (an app of the user's has none)
            mark_limits(ax, g, "users", y)
        shown = part
        if reference:
            draw_reference(ax, **reference)
            shown = pd.concat([part, reference["ref"][[reference["x"]]].rename(columns={reference["x"]: "users"})])
        _users_axis(ax, shown, logx)
        if value is not None:
            panel_title(ax, "profile", value)
    _from_zero(axes, 0)
    draw_ceilings(axes, ceilings)
    for ax in axes:
        label_coincident(ax)
    axes[0].set_ylabel(ylabel)
    plain_numbers(*axes)
    return finish_legend(fig, axes, key, styles.handles(), title, below=bool(reference))


PERCENTILE_NAMES = {"p50_ms": "p50", "p90_ms": "p90", "p95_ms": "p95", "p99_ms": "p99",
                    "p999_ms": "p99.9", "max_ms": "max", "mean_ms": "mean"}


def latency_chart(df: pd.DataFrame, title: str = "Latency percentiles vs concurrent users",
                  caption: str | None = None, percentiles=("p50_ms", "p95_ms", "p99_ms"),
                  logx: bool = True):
    """One panel per percentile on a shared log-scale milliseconds axis; in each, a colour per
    stack, as in every other figure (one profile: a second one would need panels of its own). A
    level where no request finished has no latency (a gap in its line); where none finished at
    any level, the axis says so instead of a scale."""
    s = summarise(df)
    measured = bool((s[list(percentiles)] > 0).to_numpy().any())
    if "profile" in s and s["profile"].nunique() > 1:
        raise ValueError("latency_chart draws one profile (its panels are the percentiles); "
                         f"got {sorted(s['profile'].unique())}")
    fig, axes, key = new_panels(1, len(percentiles), caption=caption, sharey=True)
    styles = SeriesStyles(s, ["server"])
    for ax, col in zip(axes, percentiles):
        for k, g in s.groupby("server", sort=True):
            ax.plot(g["users"], g[col], label="_" + styles.title(k), **styles(k))
            mark_limits(ax, g, "users", col)  # latency there is an upper bound
        _users_axis(ax, s, logx, xlabel="concurrent users", thin=True)
        ax.tick_params(axis="x", labelsize=8)
        ax.xaxis.label.set_fontsize(9)
        if measured:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(PlainLogFormatter())
        else:
            ax.set_yticks([])
        ax.set_title(PERCENTILE_NAMES.get(col, col), fontsize=10)
        label_coincident(ax)
    axes[0].set_ylabel("latency (ms, log scale)" if measured else
                       "latency: no request finished\nin any window (a stall)")
    _titled(fig, title)
    panel_legend(key, styles.handles() + _extra_handles(*axes))
    return fit_legends(fig)


def line_chart(df: pd.DataFrame, x: str, y: str, series: list[str], title: str, xlabel: str,
               ylabel: str, caption: str | None = None, logx: bool = False, logy: bool | str = False,
               ref_lines: dict[str, float] | None = None, panels: str | None = None,
               reference: dict | None = None, markevery=None, percent: bool = False,
               bounds: pd.DataFrame | None = None, bounds_label: str = "bound (computed)", figsize=None,
               xpercent: bool = False, ceilings=None):
    """One line per combination of `series` columns (mean over duplicates of x), styled by
    SeriesStyles (the stack's colour and marker when `server` is a series column); `panels`:
    one panel per value of that column, side by side on a shared y axis; `reference`: the
    article's numbers on the same axes (draw_reference's keyword arguments); `bounds`: computed
    bounds drawn dotted in their series' colour (same columns as `df`); `logy="auto"`: a log axis
    only when the values span more than 30×; `percent`: y is a share (0–1) drawn as %;
    `xpercent`: x is a share, drawn as %; a linear y axis starts at zero; `markevery`: as
    `ax.plot`'s, for dense lines. Series that coincide are labelled directly. `ceilings`: the
    machine's own limits (analysis.machine_limits), for every panel or, with `panels`, a dict
    of them by panel value (03's NORMAL and FULL panels; draw_ceilings)."""
    values = panel_values(df, panels)
    fig, axes, key = panel_grid(len(values), caption, title, figsize=figsize)
    styles = SeriesStyles(df, series)
    if logy == "auto":
        pos = df[y][df[y] > 0]
        logy = bool(len(pos)) and pos.max() / pos.min() > 30
    for ax, value in zip(axes, values):
        part = df if value is None else df[df[panels] == value]
        for k, g in part.groupby(series, sort=True):
            k = k if isinstance(k, tuple) else (k,)
            m = g.groupby(x, sort=True)[y].mean()
            ax.plot(m.index, m.values, label="_" + styles.title(k), markevery=markevery, **styles(k))
            flags = pd.DataFrame({c: g.assign(_f=flagged(g, c)).groupby(x, sort=True)["_f"].any()
                                  for c in LIMIT_MARKS}).assign(**{y: m}).reset_index()
            mark_limits(ax, flags, x, y)
        if bounds is not None:
            bpart = bounds if value is None or panels not in bounds else bounds[bounds[panels] == value]
            for k, g in bpart.groupby(series, sort=True):
                k = k if isinstance(k, tuple) else (k,)
                m = g.groupby(x, sort=True)[y].mean()
                ax.plot(m.index, m.values, color=styles(k)["color"], gid="bound", label="_bound", **BOUND_STYLE)
        if reference:  # in panels: the article's numbers of that panel, when they say which
            ref = reference if value is None or panels not in reference["ref"] else \
                {**reference, "ref": reference["ref"][reference["ref"][panels] == value]}
            draw_reference(ax, **ref)
        if x == "users":  # ticks at the levels measured, as in every users axis
            _users_axis(ax, df, logx, xlabel=None)
        elif logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
            # plain numbers (0.6, 2, 1,000), not 6×10⁻¹: minor ticks labelled where few decades show
            ax.yaxis.set_major_formatter(PlainLogFormatter())
            ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        elif percent:
            ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=None))
        if xpercent:
            ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0, decimals=None))
        if value is not None:
            panel_title(ax, panels, value)
        ax.set_xlabel(xlabel)
    if not logy:  # a linear axis starts at zero (below it only for negative values)
        _from_zero(axes, min(0, float(df[y].min())) if len(df) else 0, list((ref_lines or {}).values()))
    if isinstance(ceilings, dict) and panels and any(isinstance(c, dict) for c in ceilings.values()):
        ceilings = [ceilings.get(v) or {} for v in values]  # each panel's own limits
    draw_ceilings(axes, ceilings, ref_lines)  # once every panel's limits are final
    for ax in axes:
        label_coincident(ax)
    axes[0].set_ylabel(ylabel)
    plain_numbers(*axes)
    handles = styles.handles()
    if bounds is not None and len(bounds):
        handles.append(Line2D([], [], color=KEY_GREY, label=bounds_label, **BOUND_STYLE))
    return finish_legend(fig, axes, key, handles, title, below=bool(reference))


# Where a point's label goes, in offset points from it, in the order tried (marks.place_clear)
POINT_LABEL_SPOTS = [{"position": (d * dx, d * dy), "ha": ha, "va": va} for d in (3, 7)
                     for dx, dy, ha, va in ((1, 1, "left", "bottom"), (1, -1, "left", "top"), (-1, 1, "right", "bottom"),
                                            (-1, -1, "right", "top"), (0, 2, "center", "bottom"), (0, -2, "center", "top"),
                                            (2, 0, "left", "center"), (-2, 0, "right", "center"))]


def calibration_chart(points: pd.DataFrame, calibrations: pd.DataFrame):
    """Each generator against wrk on GET /delay/{ms}, as a function of the generator's own CPU:
    its throughput over wrk's (left) and its p99 over wrk's (right), the tolerance band, and
    the onset from which every level drifts (sqlitelab.load.calibrate). Each generator in its own
    colour (GENERATOR_STYLES)."""
    d = points[points["endpoint"] == "delay"].sort_values("gen_util")
    first = calibrations.iloc[0] if len(calibrations) else None
    caption = (f"{first['machine']} · target {value_title('server', first['target'])} (server CPU {first['server_pinning']}), "
               f"generators and wrk on CPU {first['generator_pinning']} · GET /delay/{first['delay_ms']} · "
               f"reference {str(first['reference']).split()[0]}") if first is not None else None  # its name, not its package
    fig, (left, right) = new_figure(ncols=2, caption=caption, figsize=(10, 4.5))
    tol = float(first["tolerance"]) if first is not None else 0.1
    p99_tol = float(first["p99_tolerance"]) if first is not None else 0.25
    gen_styles = colours_for(d["generator"].unique())
    labels = []
    for k, (gen, g) in enumerate(d.groupby("generator", sort=True)):
        st = gen_styles[gen]
        c = st["color"]
        for ax, col in ((left, "rps_ratio"), (right, "p99_ratio")):
            ax.plot(100 * g["gen_util"], g[col], marker=st["marker"], color=c, linestyle="-", label=gen)
            for r in g.itertuples():  # its users beside each point, on a side no line crosses
                label = ax.annotate(f"{r.users}", (100 * r.gen_util, getattr(r, col)), fontsize=6.5,
                                    color="#555555", xytext=(3, 3), textcoords="offset points")
                labels.append((ax, label, k))
        cal = calibrations[calibrations["generator"] == gen]
        if len(cal) and pd.notna(cal["onset_util"].iloc[0]):
            for ax in (left, right):
                ax.axvline(100 * cal["onset_util"].iloc[0], color=c, linestyle=":", linewidth=1.2,
                           label=f"{gen} onset {cal['onset_util'].iloc[0]:.0%}")
    left.axhline(1 - tol, color="#777777", linestyle=(0, (2, 2)), linewidth=1, label=f"tolerance {tol:.0%}")
    right.axhline(1 + p99_tol, color="#777777", linestyle=(0, (2, 2)), linewidth=1,
                  label=f"tolerance {p99_tol:.0%}")
    left.set_ylabel("requests/s ÷ wrk's")
    right.set_ylabel("p99 ÷ wrk's")
    for ax in (left, right):
        ax.set_xlabel("generator CPU (% of its core); labels: users")
        ax.set_xlim(0, 105)
        ax.legend(fontsize=7.5)
    left.set_title("Throughput against wrk")
    right.set_title("p99 against wrk")
    fig = fit_legends(fig)
    for ax, label, k in labels:  # every line drawn first: the first generator's above, the next's below
        if not place_clear(ax, label, POINT_LABEL_SPOTS[k % 2:] + POINT_LABEL_SPOTS[:k % 2], inside=False):
            label.set_visible(False)  # no spot clear of the lines: left out (every level is in the printed table)
    return fig


# What a timeline can draw of each second (timeline_chart's `value`), and its axis.
TIMELINE_VALUES = {"p99_ms": "p99 of each second, ms (log scale)",
                   "errors_late": "errors and late requests per second",
                   "wal_mib": "WAL, MiB"}


def timeline_chart(sec: pd.DataFrame, title: str, caption: str | None = None, value: str = "p99_ms"):
    """sqlitelab.notebooks.operations_under_load.timeline(): one panel per operation (two
    columns past three), on shared axes: `value` of each second (TIMELINE_VALUES; p99 from due
    times by default), a line per stack in its colour, against the seconds from the operation's
    start (0 for every stack, so panels and stacks line up); the operation shaded, in each
    stack's colour, from its start to its end."""
    if value not in TIMELINE_VALUES:
        raise ValueError(f"value must be one of {', '.join(TIMELINE_VALUES)}, not {value!r}")
    ops = list(dict.fromkeys(sec["operation"])) if len(sec) else ["(no operations)"]
    ncols = 1 if len(ops) <= 3 else 2
    nrows = -(-len(ops) // ncols)
    fig, axes, key = new_panels(nrows, ncols, caption=caption, n=len(ops), sharex=True, sharey=True,
                                figsize=(7.5 if ncols == 2 else 6.0, 1.5 * nrows + 1.9))
    stacks = [s for s in STACK_STYLES if s in set(sec.get("server", []))]
    stacks += sorted(set(sec.get("server", [])) - set(stacks))
    colours = colours_for(stacks)
    for ax, op in zip(axes, ops):
        g = sec[sec["operation"] == op] if len(sec) else sec
        for server, s in (g.groupby("server", sort=True) if len(g) else []):
            s = s.sort_values("second")
            start, length = s["operation_started_s"].iloc[0], s["operation_seconds"].iloc[0]
            at = s["second"] + s["span_s"] / 2 - (start if pd.notna(start) else 0)
            y = (s["errors"] + s["late"]) if value == "errors_late" else s[value]
            gid = colours[server].get("gid")
            ax.plot(at, y, color=colours[server]["color"], gid=gid, label="_" + value_title("server", server),
                    marker=colours[server].get("marker", "o"), markersize=3, linewidth=1.3)
            if pd.notna(start):  # to its end, or the window's (Litestream replicates past it)
                end = min(length if pd.notna(length) else 0, (at + s["span_s"] / 2).max())
                ax.axvspan(0, end, alpha=0.12, color=colours[server]["color"], linewidth=0, gid=gid)
        if len(g):
            ax.axvline(0, color=KEY_GREY, linewidth=0.9, zorder=1)
        ax.set_title(OPERATION_TITLES.get(op, op), fontsize=9.5)
    if value == "p99_ms" and len(sec) and (sec[value].dropna() > 0).all() and sec[value].notna().any():
        axes[0].set_yscale("log")  # shared: every panel
        axes[0].yaxis.set_major_formatter(PlainLogFormatter())
        axes[0].yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:  # counts and sizes from zero (a row of zeros is not drawn around -0.05..0.05)
        _from_zero(axes, 0, also=[1.0] if value == "errors_late" else [])
        plain_numbers(*axes)
    fig.supylabel(TIMELINE_VALUES[value], fontsize=9)  # one label for the whole column of panels
    for i, ax in enumerate(axes):
        label_coincident(ax)
        if i + ncols >= len(axes):
            ax.set_xlabel("seconds from the operation's start")
            ax.tick_params(labelbottom=True)
    handles = [Line2D([], [], color=colours[s]["color"], marker=colours[s].get("marker", "o"),
                      gid=colours[s].get("gid"), label=value_title("server", s)) for s in stacks]
    handles += [Line2D([], [], color=KEY_GREY, linewidth=0.9, label="the operation starts"),
                Patch(color="#888888", alpha=0.25, label="running (in each stack's colour)")]
    panel_legend(key, handles, ncols=4)
    _titled(fig, title)
    return fit_legends(fig)


def hockey_stick_chart(points: pd.DataFrame, slo_p99_ms: float, title: str, caption: str | None = None):
    """Open-loop points: p99 (from due times; the worst repeat's is not shown, the mean is)
    against the rate offered, a line per stack (log-log), the SLO as a horizontal line: the knee
    is where each line leaves it."""
    fig = line_chart(rate_points(points), x="rate", y="p99_ms", series=["server"], title=title,
                     xlabel="offered load, requests/s (open loop, log scale)",
                     ylabel="p99 from due time, ms (log scale)", caption=caption, logx=True, logy=True,
                     ref_lines={"p99 objective, ms": slo_p99_ms})
    fig.axes[0].xaxis.set_major_formatter(PlainLogFormatter())
    fig.axes[0].xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    return fig
