"""What several chart kinds draw on their axes: an article's numbers (draw_reference),
reference values named in the margin, rings and hatches where the generator was the limit
(mark_limits, _bar_limit, _limit_patches), the users axis and plain log-axis labels; and where the
data lies on screen (drawn_data, data_under), so that words are put where none is (place_clear)."""
from __future__ import annotations

import math
import re
import textwrap

import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from sqlitelab.report.analysis import flagged
from sqlitelab.report.summaries import once
from sqlitelab.report.plots.style import (CEILING_STRETCH, CEILING_STYLE, LIMIT_MARKS, REFERENCE_COLORS,
                                          REFERENCE_DASHES, value_title)

def draw_reference(ax, ref: pd.DataFrame, x: str, y: str, label: str, by: str | None = None) -> None:
    """Plot an article's published numbers (`ref`) as dashed grey lines, one per `by` group,
    labelled `label` (with the group's value when `by` is given; the value alone when `label`
    is empty)."""
    groups = ref.groupby(by, sort=False) if by else [(None, ref)]
    for i, (key, g) in enumerate(groups):
        g = g.dropna(subset=[x, y]).sort_values(x)
        name = (f"{label}, {value_title(by, key)}" if label else value_title(by, key)) if by else label
        ax.plot(g[x], g[y], color=REFERENCE_COLORS[i % len(REFERENCE_COLORS)],
                linestyle=REFERENCE_DASHES[i % len(REFERENCE_DASHES)], marker="x", markersize=7,
                linewidth=1.4, label=name)


def mark_limits(ax, g: pd.DataFrame, x: str, y: str) -> None:
    """Ring the points of `g` whose generator was the limit (black circle) or set the pace
    (black square), each kind labelled once in the legend."""
    for col, m in LIMIT_MARKS.items():
        f = g[flagged(g, col)]
        if col == "generator_influenced":  # a bound point is not also ringed as influenced
            f = f[~flagged(f, "generator_bound")]
        if not len(f):
            continue
        labelled = m["label"] in ax.get_legend_handles_labels()[1]
        ax.plot(f[x], f[y], linestyle="none", marker=m["marker"], markersize=12, color=m["color"],
                markerfacecolor="none", markeredgecolor=m["color"], markeredgewidth=1.1,
                label=None if labelled else m["label"], gid="limit")


def _users_axis(ax, s: pd.DataFrame, logx: bool, xlabel: str | None = "concurrent users (closed loop)",
                thin: bool = False) -> None:
    """Ticks at the levels measured; `thin`: on a narrow panel, no label for a level too close
    to the last one labelled (8 but not 10)."""
    levels = sorted(s["users"].unique())
    log = logx and len(levels) > 1 and levels[-1] / max(levels[0], 1) > 8
    if log:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    labels, last = [], None
    for u in levels:
        close = last is not None and (u / max(last, 1e-9) < 1.5 if log else
                                      u - last < (levels[-1] - levels[0]) / 12)
        labels.append("" if thin and close else str(u))
        last = last if thin and close else u
    ax.set_xticklabels(labels)
    ax.minorticks_off()
    if xlabel:
        ax.set_xlabel(xlabel)


def split_ceilings(ceilings: dict[str, float] | None, top: float) -> tuple[dict, dict]:
    """The machine's limits (analysis.machine_limits) a chart whose data reach `top` draws as
    lines — those within CEILING_STRETCH of it — and those it names above its plot instead, so
    that a limit fifty times the data never flattens the curves."""
    ceilings = ceilings or {}
    if not top or top <= 0:
        return {}, dict(ceilings)
    return ({k: v for k, v in ceilings.items() if v <= CEILING_STRETCH * top},
            {k: v for k, v in ceilings.items() if v > CEILING_STRETCH * top})


def name_above(ax, above: dict[str, float]) -> None:
    """Limits too far above the data to draw, named in a band at the top of the plot (which is
    raised to hold it): "above the chart: HTTP alone … 48,000/s", at three significant figures."""
    if not above:
        return
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, lo + (hi - lo) * 1.14)
    text = "Above this chart — " + "; ".join(f"{label} {once(v, '/s')}" for label, v in above.items())
    ax.text(0.01, 0.985, textwrap.fill(text, 95), transform=ax.transAxes, ha="left", va="top",
            fontsize=7.5, color=CEILING_STYLE["color"], gid="ceiling-above")


def _ref_line_labels(ax, ref_lines: dict[str, float], ceilings: dict[str, float] | None = None,
                     across: str = "y") -> None:
    """Reference values as grey dashed lines across the plot, and the machine's limits within
    view as dotted dark lines (CEILING_STYLE), drawn over the data, each named in the margin at
    its own place — never over a bar, a dot or a line; names too close together are spread
    apart, each with a leader to its line. `across="y"`: values on the y axis, lines across
    it, names in the right margin; `"x"`: values on the x axis (a dot chart's), lines up it,
    names above the plot. Call once the scale is set."""
    items = sorted([(k, v, False) for k, v in (ref_lines or {}).items()]
                   + [(k, v, True) for k, v in (ceilings or {}).items()], key=lambda kv: kv[1])
    line = ax.axhline if across == "y" else ax.axvline
    k = 0
    for _, v, ceiling in items:
        if ceiling:
            line(v, gid="ceiling", **CEILING_STYLE)
        else:
            line(v, color="#555555", linewidth=1, zorder=4, linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)])
            k += 1
    lo, hi = ax.get_ylim() if across == "y" else ax.get_xlim()
    if (ax.get_yscale() if across == "y" else ax.get_xscale()) == "log":
        def frac(v):
            return (np.log10(v) - np.log10(lo)) / (np.log10(hi) - np.log10(lo))
    else:
        def frac(v):
            return (v - lo) / (hi - lo)
    # a limit this machine measured once: at the figures one window keeps (summaries.once); a
    # reference value (an article's, a published load) as it was given
    texts = [f"{textwrap.fill(label, 22 if across == 'y' else 16)}\n{once(v, '/s') if ceiling else f'{v:,.0f}'}"
             for label, v, ceiling in items]
    if across == "x":  # names above the plot, spread over its width (spread_line_names)
        for label_text, (_, v, _c) in zip(texts, items):
            ax.annotate(label_text, xy=(v, 1.0), xycoords=("data", "axes fraction"), xytext=(frac(v), 1.03),
                        textcoords="axes fraction", ha="center", va="bottom", fontsize=7.5,
                        color="#333333", annotation_clip=False, clip_on=False, gid=LINE_NAME,
                        arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.8,
                                    "shrinkA": 0, "shrinkB": 0})
        spread_line_names(ax.figure)
        return
    # a name's half extent in axes fractions: its lines of 7.5-pt text (1.25 apart) and a point
    # of air over at most half the figure's height (what the axes keep beside legend and caption)
    half = [(1.25 * 7.5 * (t.count("\n") + 1) + 2) / 2 / (0.5 * 72 * ax.figure.get_figheight()) for t in texts]
    placed: list[float] = []
    for i, (_, v, _c) in enumerate(items):
        placed.append(max(frac(v), placed[-1] + half[i - 1] + half[i]) if placed else frac(v))
    for (label, v, ceiling), text, at in zip(items, texts, placed):
        moved = abs(at - frac(v)) > 1e-9
        ax.annotate(text, xy=(1.0, v), xycoords=("axes fraction", "data"), xytext=(1.02, at),
                    ha="left", va="center", textcoords="axes fraction", fontsize=7.5,
                    color="#333333", annotation_clip=False, clip_on=False,
                    arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.8, "shrinkA": 0,
                                "shrinkB": 0} if moved else None)


# The gid of a line's name above a plot (a dot chart's reference lines and limits: _ref_line_labels)
LINE_NAME = "line-name"


def spread_line_names(fig) -> None:
    """The names above each plot (LINE_NAME) where the figure's layout has left its axes: each
    over its line, and where neighbours would touch (their widths as drawn and 6 points of air),
    moved apart, all within the axes' width, each with a leader to its line (none where it did
    not move). Within that width a name never makes the layout narrow the axes (a name centred
    on a line at the right edge would, and the names then stand where the axes were): run by
    the chart and again by lay_out, once the legends are fitted. Twice each time: the first
    placing can still move the axes the layout fits around it."""
    for _ in range(2):
        _spread_line_names_once(fig)


def _spread_line_names_once(fig) -> None:
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    air = 6 * fig.dpi / 72
    for ax in fig.axes:
        names = [t for t in ax.texts if t.get_gid() == LINE_NAME]
        if not names:
            continue
        box = ax.get_window_extent(renderer)
        at = [float(ax.transData.transform((t.xy[0], 1.0))[0]) for t in names]  # the lines, in pixels
        order = sorted(range(len(names)), key=lambda i: at[i])
        half = {i: (Text.get_window_extent(names[i], renderer).width + air) / 2 for i in order}
        pos = {i: at[i] for i in order}
        for a, b in zip(order, order[1:]):  # left to right, each clear of the one before
            pos[b] = max(pos[b], pos[a] + half[a] + half[b])
        pos[order[-1]] = min(pos[order[-1]], box.x1 - half[order[-1]] + air / 2)
        for a, b in reversed(list(zip(order, order[1:]))):  # then within the axes' right edge
            pos[a] = min(pos[a], pos[b] - half[a] - half[b])
        pos[order[0]] = max(pos[order[0]], box.x0 + half[order[0]] - air / 2)
        for i in order:
            names[i].set_position(((pos[i] - box.x0) / box.width, 1.03))
            names[i].arrow_patch.set_visible(abs(pos[i] - at[i]) > 0.5)


def draw_ceilings(axes, ceilings, ref_lines: dict[str, float] | None = None) -> None:
    """The machine's limits on the panels of a chart whose y limits are set: those in view as
    dotted lines named in the margin (beside `ref_lines`, placed together), the rest named above
    the plot (split_ceilings, on the panels' highest data). `ceilings`: one {label: value} for
    every panel, or a list of them, one per panel (03's NORMAL and FULL panels)."""
    per_axis = list(ceilings) if isinstance(ceilings, (list, tuple)) else [ceilings] * len(axes)
    top = max((float(v) for ax in axes for ln in ax.get_lines()
               for v in np.asarray(ln.get_ydata(), dtype=float) if v == v), default=0.0)
    top = max([top] + [float(p.get_height()) for ax in axes for p in ax.patches
                       if isinstance(p, Rectangle) and p.get_height() == p.get_height()])
    split = [split_ceilings(c, top) for c in per_axis]
    reach = max((v for shown, _ in split for v in shown.values()), default=None)
    for ax, (shown, above) in zip(axes, split):
        if reach is not None:  # shared y axes: every panel reaches the highest line drawn
            lo, hi = ax.get_ylim()
            ax.set_ylim(lo, max(hi, reach * 1.05))
    for ax, (shown, above) in zip(axes, split):
        name_above(ax, above)
        if shown or ref_lines:
            _ref_line_labels(ax, ref_lines or {}, shown)


DIRECT_LABEL = "direct-label"  # the gid of a label naming series drawn on one line
PANEL_NOTE = "panel-note"  # the gid of a note on a panel placed clear of its data (a series not in it)


def series_lines(ax) -> list:
    """The measured series of an axes: its lines drawn for a stack or a value (a label of their
    own, starting with `_`, that is their title), not rings, references or bounds."""
    return [ln for ln in ax.get_lines() if ln.get_label().startswith("_")
            and not re.fullmatch(r"_child\d+|_nolegend_", ln.get_label())  # matplotlib's, not a title
            and ln.get_gid() not in ("bound", "limit") and len(ln.get_xdata())
            and ln.get_linestyle() not in ("None", "none")]


def coincident_groups(ax, tolerance_px: float = 2.0) -> list[list]:
    """Groups of two or more series lines of `ax` drawn on one another: the same x values and,
    at each, y within `tolerance_px` on screen (one would hide the other)."""
    ax.get_xlim(), ax.get_ylim()  # the view limits as they stand (autoscaled)
    lines = series_lines(ax)
    xy = {}
    for ln in lines:
        pts = np.column_stack([np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)])
        xy[ln] = ax.transData.transform(pts)
    groups: list[list] = []
    for ln in lines:
        for g in groups:
            a, b = xy[g[0]], xy[ln]
            if a.shape == b.shape and np.all(np.abs(a - b) <= tolerance_px):
                g.append(ln)
                break
        else:
            groups.append([ln])
    return [g for g in groups if len(g) > 1]


MIN_STRETCH = 0.05  # a stretch of one line under another narrower than this share of its panel is not said


def _screen_width(ax, x0: float, x1: float) -> float:
    return abs(ax.transData.transform([[x1, 1]])[0, 0] - ax.transData.transform([[x0, 1]])[0, 0])


def coincident_runs(ax, tolerance_px: float = 2.0) -> list[tuple[list, float, float]]:
    """Pairs of series lines drawn on one another over part of their length: two or more
    consecutive x values both were measured at, at each y within `tolerance_px` on screen (the
    segment between them hidden), over at least MIN_STRETCH of the panel's width (a distribution's
    curves touch for a few pixels where they converge), as (the two lines, the run's first x,
    its last x). Lines that cross between two x values are not on one another; lines that
    coincide over their whole length are coincident_groups'."""
    whole = {frozenset(g) for g in coincident_groups(ax, tolerance_px)}
    lines = series_lines(ax)
    screen = {}
    for ln in lines:
        x = np.asarray(ln.get_xdata(), float)
        y = ax.transData.transform(np.column_stack([x, np.asarray(ln.get_ydata(), float)]))[:, 1]
        screen[ln] = dict(zip(x, y))
    runs = []
    for i, a in enumerate(lines):
        for b in lines[i + 1:]:
            if any({a, b} <= g for g in whole):
                continue
            shared = sorted(set(screen[a]) & set(screen[b]))
            on = [abs(screen[a][x] - screen[b][x]) <= tolerance_px for x in shared] + [False]
            start = None
            for k, hit in enumerate(on):
                if hit and start is None:
                    start = k
                elif not hit and start is not None:
                    x0, x1 = shared[start], shared[k - 1]
                    if k - start >= 2 and _screen_width(ax, x0, x1) >= MIN_STRETCH * ax.bbox.width:
                        runs.append(([a, b], x0, x1))
                    start = None
    return runs


def _x_words(ax, x: float) -> str:
    """An x value as its axis prints it (a share as "50%"), else as a plain number: a whole one
    as it is, another to two significant figures (where a stretch of latency starts and ends,
    read off a distribution: "from 1 to 3.7", not "from 1.014 to 3.689")."""
    try:
        words = str(ax.xaxis.get_major_formatter()(x)).strip()
    except (TypeError, ValueError, IndexError):
        words = ""
    if "%" in words or (words and "$" not in words and float(x).is_integer()):
        return words
    return f"{x:,.0f}" if float(x).is_integer() else f"{float(f'{x:.2g}'):,g}"  # unlabelled, mathtext, a fraction


def coincidence_notes(ax, tolerance_px: float = 2.0) -> list[tuple[list[str], str]]:
    """What label_coincident writes, as (the series' names, their heading): "one line:" over
    series that coincide over their whole length, "one line from 8 to 64:" over those that
    coincide over part of it (pairs over the same stretch that share a line: one group)."""
    notes = [([ln.get_label().lstrip("_") for ln in g], "one line:") for g in coincident_groups(ax, tolerance_px)]
    stretches: list[tuple[list, float, float]] = []
    for pair, x0, x1 in coincident_runs(ax, tolerance_px):
        for group in stretches:
            if (group[1], group[2]) == (x0, x1) and set(pair) & set(group[0]):
                group[0].extend(ln for ln in pair if ln not in group[0])
                break
        else:
            stretches.append((list(pair), x0, x1))
    notes += [([ln.get_label().lstrip("_") for ln in lines], f"one line from {_x_words(ax, x0)} to {_x_words(ax, x1)}:")
              for lines, x0, x1 in stretches]
    return notes


# Where a note goes in a panel, in the order tried (place_clear): its corners, then its sides,
# then (INSIDE) anywhere on a grid over the panel, top rows first
CORNERS = [{"position": (x, y), "ha": ha, "va": va}
           for (x, ha) in ((0.02, "left"), (0.98, "right")) for (y, va) in ((0.97, "top"), (0.03, "bottom"))] + \
          [{"position": (x, 0.5), "ha": ha, "va": "center"} for (x, ha) in ((0.02, "left"), (0.98, "right"))]
INSIDE = [{"position": (x, y), "ha": "center", "va": "center"}
          for y in (0.85, 0.7, 0.55, 0.4, 0.25) for x in (0.3, 0.5, 0.7)]


def label_coincident(ax) -> None:
    """Name series that coincide over their whole length or part of it (coincidence_notes, a
    pixel more generous than the figure check's, so that a later layout cannot leave one
    unnamed), one name a line under "one line:" or "one line from 8 to 64:", in one note where
    it covers no data and no other words (note_clear), so that none is hidden unannounced under
    another."""
    notes = coincidence_notes(ax, tolerance_px=3.0)
    if not notes:
        return
    whole = [set(names) for names, head in notes if head == "one line:"]
    sections = []
    for names, head in notes:
        if head != "one line:" and any(g <= set(names) for g in whole):  # a line joins a group over a stretch
            head = head.replace("one line from", "with them from")
            names = [n for n in names if not any(n in g for g in whole if g <= set(names))]
        sections.append(head + "\n" + "\n".join(textwrap.shorten(n, NOTE_NAME_WIDTH) for n in compact_names(names)))
    note_clear(ax, "\n".join(sorted(sections, key=lambda t: not t.startswith("one line:"))), gid=DIRECT_LABEL)


NOTE_NAME_WIDTH = 52  # a series' name in a note, cut to this many characters


def _stem(name: str) -> tuple[str, str]:
    """A series' name cut after its last "=" or ", ": (what names share, its own end); (name, "")
    where it has neither."""
    cut = max(name.rfind("="), name.rfind(", ") + 1)
    return (name[:cut + 1], name[cut + 1:]) if cut > 0 else (name, "")


def compact_names(names: list[str]) -> list[str]:
    """Series names as a note lists them: names that differ only after their last "=" or ", "
    written once, their differing ends joined by " / " ("the lab's writer, synchronous=FULL /
    NORMAL"), in the order first named; other names as they are."""
    out: dict[str, list[str]] = {}
    for name in names:
        head, tail = _stem(name)
        out.setdefault(head if tail else name, []).append(tail)
    return [head + " / ".join(t.strip() for t in tails) if tails != [""] and len(tails) > 1
            else head + tails[0] for head, tails in out.items()]


def named_in(note: str, name: str) -> bool:
    """Whether a note (or the caption it joined) names a series: its name as a note cuts it, or
    written once with others' (compact_names: its shared part, then its end among the " / ")."""
    if textwrap.shorten(name, NOTE_NAME_WIDTH) in note:
        return True
    head, tail = _stem(name)
    if not tail:
        return False
    for part in note.split(head)[1:]:
        ends = re.split(r"[\n;·]", part, maxsplit=1)[0]
        if tail.strip() in [e.strip() for e in ends.split(" / ")]:
            return True
    return False


def settle_notes(fig) -> int:
    """label_coincident's and note_clear's notes placed again once the figure is laid out (the
    panels at their final size, a note's text not scaled with them), each at the first spot
    where it is clear, as when it was first placed (place_clear). A note with no clear spot on
    its panel leaves it for the figure's caption (its words on one line, the panel's title
    before them where the figure has several): no note over data. Returns the caption's lines
    those notes added (about: a line of the canvas's width each)."""
    added = 0
    for ax in fig.axes:
        for text in list(ax.texts):
            if text.get_gid() == PANEL_NOTE or (text.get_gid() == DIRECT_LABEL
                                                and text.get_text().startswith("one line")):
                if not place_clear(ax, text, CORNERS + INSIDE):
                    added += _to_caption(fig, ax, text)
    return added


def _to_caption(fig, ax, text) -> int:
    """A panel's note added to the figure's caption (figure.CAPTION's gid), and gone from the
    panel; the caption's lines it added (0: the figure has no caption, or says it already)."""
    caption = next((t for t in fig.texts if t.get_gid() == "caption"), None)
    if caption is None:
        return 0
    sections, words = [], text.get_text().split("\n")
    for line in words:
        if line.endswith(":") or not sections:
            sections.append([line])
        else:
            sections[-1].append(line)
    flat = " · ".join(f"{s[0]} {'; '.join(s[1:])}" if len(s) > 1 else s[0] for s in sections)
    title = " ".join(next((t for t in (ax.get_title(loc) for loc in ("center", "left", "right")) if t), "").split())
    line = f"{title}: {flat}" if title and sum(a.axison for a in fig.axes) > 1 else flat
    line = line[0:1].upper() + line[1:]
    text.remove()
    if line in caption.get_text().split("\n"):
        return 0
    caption.set_text(f"{caption.get_text()}\n{line}")
    return math.ceil(len(line) / (fig.get_figwidth() * 72 / (0.55 * 7.5)))  # 7.5-pt characters a line


def note_clear(ax, words: str, gid: str = PANEL_NOTE) -> None:
    """A note on a panel where it covers no data and no other words: a corner, a side, or
    inside (CORNERS, INSIDE; placed again once the figure is laid out, settle_notes)."""
    note = ax.text(0, 0, words, transform=ax.transAxes, fontsize=6.5, color="#333333", gid=gid,
                   zorder=7, in_layout=False, linespacing=1.1)
    place_clear(ax, note, CORNERS + INSIDE)


def plain_numbers(*axes) -> None:
    """Linear axes in plain numbers: thousands separated, no offset or `1e6` above the axis."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if abs(v) >= 1000 or v == int(v) else f"{v:g}")
    for ax in axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "linear" and isinstance(axis.get_major_formatter(), matplotlib.ticker.ScalarFormatter):
                axis.set_major_formatter(fmt)


class PlainLogFormatter(matplotlib.ticker.LogFormatter):
    """A log axis's labels as plain numbers: thousands separated, small ones as %g."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 100 else f"{x:g}"


def _limit_patches(shown: set) -> list:
    """Legend entries for the hatches in use (LIMIT_MARKS)."""
    return [Patch(facecolor="#bbbbbb", hatch=m["hatch"], edgecolor="white",
                  label=f"{m['label']} (server capacity ≥ bar)")
            for col, m in LIMIT_MARKS.items() if col in shown]


def _bar_limit(rows: pd.DataFrame, hatch_col: str | None) -> str | None:
    """Which LIMIT_MARKS key a bar is hatched with (bound before influenced), or None.
    `hatch_col` None: no hatching; "generator_bound" (the default): both kinds."""
    if not hatch_col:
        return None
    cols = list(LIMIT_MARKS) if hatch_col == "generator_bound" else [hatch_col]
    for col in cols:
        if flagged(rows, col).any():
            return col if col in LIMIT_MARKS else "generator_bound"
    return None


# ------------------------------------------------------------------ where the data lies on screen

def _segments_cross(box: Bbox, xy: np.ndarray) -> bool:
    """Whether the polyline `xy` (display units, rows of x, y) enters `box` (Liang–Barsky on
    each segment; a single point: whether the box holds it)."""
    xy = xy[np.isfinite(xy).all(axis=1)] if len(xy) else xy
    if len(xy) == 1:
        return bool(box.contains(*xy[0]))
    for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
        dx, dy = x1 - x0, y1 - y0
        lo, hi = 0.0, 1.0
        for p, q in ((-dx, x0 - box.x0), (dx, box.x1 - x0), (-dy, y0 - box.y0), (dy, box.y1 - y0)):
            if p == 0:
                if q < 0:
                    break
            else:
                t = q / p
                if p < 0:
                    lo = max(lo, t)
                else:
                    hi = min(hi, t)
                if lo > hi:
                    break
        else:
            return True
    return False


def renderer_of(fig):
    """The renderer of `fig` with every artist where the figure's last draw put it, drawn again
    only when something changed since (`fig.stale`): the checks of a figure save_figure has laid
    out for good read one draw between them instead of one each."""
    if fig.stale:
        fig.draw_without_rendering()
    return fig.canvas.get_renderer()


def overlaps(a, b, gap_px: float = 0.0) -> bool:
    """Two drawn boxes (display units) that overlap, or come closer than `gap_px` each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > -gap_px
            and min(a.y1, b.y1) - max(a.y0, b.y0) > -gap_px)


def words_in(ax, renderer) -> list[tuple[object, str, Bbox]]:
    """The words a panel prints over its area, each as (artist, text, box): its texts and
    annotations (Text's own box: an annotation's would take in its leader line), and a legend
    inside it."""
    out = [(t, t.get_text(), Text.get_window_extent(t, renderer)) for t in ax.texts
           if t.get_visible() and t.get_text().strip()]
    lg = ax.get_legend()
    if lg is not None and lg.get_visible():
        out.append((lg, "the legend", lg.get_window_extent(renderer)))
    return out


def _finite_box(b: Bbox) -> bool:
    return bool(np.isfinite(b.get_points()).all() and b.width > 0 and b.height > 0)


def drawn_data(ax, renderer) -> list[tuple[str, str, object]]:
    """What a panel draws of its data, in display units, each as (name, kind, geometry): the
    lines ("line": points) and markers ("marker": boxes) of its Line2Ds, its bars ("bar") and the
    segments of its line collections (reference lines drawn with vlines/hlines)."""
    out = []
    for ln in ax.get_lines():
        if not ln.get_visible() or len(ln.get_xdata(orig=False)) == 0:
            continue
        xy = ln.get_transform().transform(np.column_stack([ln.get_xdata(orig=False), ln.get_ydata(orig=False)]))
        name = ln.get_label().lstrip("_") or "a line"
        if ln.get_linestyle() not in ("None", "none", "", " "):
            out.append((name, "line", xy))
        if ln.get_marker() not in (None, "None", "none", ""):
            r = ln.get_markersize() * ax.figure.dpi / 72 / 2
            out += [(name, "marker", Bbox.from_extents(x - r, y - r, x + r, y + r)) for x, y in xy
                    if np.isfinite([x, y]).all()]
    for p in ax.patches:
        if isinstance(p, Rectangle) and p.get_visible():
            box = p.get_window_extent(renderer)
            if _finite_box(box):
                out.append((p.get_label().lstrip("_") or "a bar", "bar", box))
    for c in ax.collections:
        if isinstance(c, LineCollection) and c.get_visible():
            t = c.get_transform()
            out += [(c.get_label().lstrip("_") or "a line", "line", t.transform(seg)) for seg in c.get_segments()]
    return out


def data_under(ax, box: Bbox, drawn: list, renderer=None) -> tuple[str, str] | None:
    """(name, kind) of the first of `drawn` (drawn_data) that `box` covers inside the panel —
    a series is clipped to its axes, so what lies outside them is not drawn there — else None."""
    area = ax.get_window_extent(renderer)
    inside = Bbox.intersection(box, area)
    if inside is None or inside.width <= 0 or inside.height <= 0:
        return None
    for name, kind, geometry in drawn:
        if _segments_cross(inside, geometry) if kind == "line" else overlaps(inside, geometry):
            return name, kind
    return None


def tick_labels(ax, renderer) -> list[tuple[str, str, Bbox]]:
    """The tick labels a panel's axes print (those inside the view, as draw() takes them), each
    as (its axis, "x" or "y"; its text; its box)."""
    if not ax.axison:
        return []
    return [(which, lab.get_text(), Text.get_window_extent(lab, renderer))
            for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")) if axis.get_visible()
            for t in axis._update_ticks() for lab in (t.label1, t.label2)
            if lab.get_visible() and lab.get_text().strip()]


def place_clear(ax, text, positions: list[dict], inside: bool = True) -> bool:
    """Put `text` (a Text or an annotation of `ax`) at the first of `positions` — each a dict of
    its properties: `position` (an annotation's offset with xytext), ha, va — where it covers no
    data, no other words of the panel and none of its tick labels and, `inside`, lies within the
    panel. True when one was; else it stays at the first (and the figure check names it)."""
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    drawn = drawn_data(ax, renderer)
    others = ([box for artist, _, box in words_in(ax, renderer) if artist is not text]
              + [box for _, _, box in tick_labels(ax, renderer)])
    area = ax.get_window_extent(renderer)
    for props in positions:
        text.update(props)
        box = Text.get_window_extent(text, renderer)
        within = area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
        if ((within or not inside)
                and data_under(ax, box, drawn, renderer) is None and not any(overlaps(box, o) for o in others)):
            return True
    text.update(positions[0])
    return False
