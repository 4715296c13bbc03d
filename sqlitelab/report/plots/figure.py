"""Figure plumbing: the lab's style, a figure (or a grid of panels) of the fixed size with room
for its caption, the caption's line (caption_for: machine, pinning, knobs), and save_figure's
byte-for-byte reproducible PNG and SVG, refused when a legend is clipped and shown in a notebook
with its notebook's sentence (reading)."""
from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Iterable

import matplotlib
import matplotlib.font_manager
import matplotlib.pyplot as plt
import pandas as pd

from sqlitelab.core import config
from sqlitelab.report.plots.check import TICK_GAP_PT, check
from sqlitelab.report.plots.legends import (ClippedLegendError, _extra_handles, _legend, clipped_legends,
                                            fit_legends, panel_legend)
from sqlitelab.report.plots.marks import overlaps, settle_notes, spread_line_names
from sqlitelab.report.plots.style import _order, value_title
from sqlitelab.infra.servers import profile_knobs, profile_title
from sqlitelab.report.compare import KEYS

def use_style() -> None:
    plt.style.use("sqlitelab.report.blog")


def new_figure(ncols: int = 1, nrows: int = 1, caption: str | None = None, **kw):
    """A figure of the lab's fixed size (the style's, unless a chart type fixes its own
    `figsize`) with room for a caption line at the bottom."""
    use_style()
    fig, axes = plt.subplots(nrows, ncols, **kw)
    if caption:
        set_caption(fig, caption)
    return fig, axes


def new_panels(nrows: int, ncols: int, caption: str | None = None, figsize=None,
               sharex: bool = False, sharey: bool = False, n: int | None = None):
    """Small multiples: a grid of `n` panels (all of it by default) and, below them, a row that
    holds the figure's one legend (`panel_legend`), inside the canvas and above the caption.
    Shared axes show their tick labels only on the outer panels. Returns the figure, the panels
    (a list, row by row) and the legend's row."""
    use_style()
    fig = plt.figure(figsize=figsize)
    if caption:
        set_caption(fig, caption)
    gs = fig.add_gridspec(nrows + 1, ncols, height_ratios=[1] * nrows + [1e-3])
    n = nrows * ncols if n is None else n
    axes = []
    for i in range(n):
        r, c = divmod(i, ncols)
        ax = fig.add_subplot(gs[r, c], sharex=axes[0] if sharex and axes else None,
                             sharey=axes[0] if sharey and axes else None)
        if sharey and c:
            ax.tick_params(labelleft=False)
        if sharex and i + ncols < n:  # another panel below this one
            ax.tick_params(labelbottom=False)
        axes.append(ax)
    key = fig.add_subplot(gs[nrows, :])
    key.axis("off")
    return fig, axes, key


def panel_values(df: pd.DataFrame, panels: str | None) -> list:
    """The values of `panels` in legend order (one panel each), or [None]: one panel."""
    if not panels or panels not in df or df[panels].nunique() < 2:
        return [None]
    return sorted(df[panels].dropna().unique(), key=_order)


def panel_grid(n: int, caption, title, figsize=None, sharey=True):
    """One axes (a plain figure) or `n` panels side by side sharing y, with a legend row and
    the figure's title above them. Returns the figure, the axes (a list) and the legend's row
    (None for one axes)."""
    if n == 1:
        fig, ax = new_figure(caption=caption, **({"figsize": figsize} if figsize else {}))
        return fig, [ax], None
    fig, axes, key = new_panels(1, n, caption=caption, figsize=figsize, sharey=sharey)
    _titled(fig, title)
    return fig, axes, key


def panel_title(ax, column: str, value, width: int = 30, fontsize: float = 9.5) -> None:
    """A panel's title: its value of `column` in plain words (value_title), wrapped at `width`
    characters or fewer where the panel is narrower (four panels across: 09's link delays), so
    that two titles side by side never meet (check: panel titles printed over each other)."""
    inches = ax.get_position().width * ax.figure.get_figwidth()
    fits = max(10, int(0.8 * inches * 72 / (0.6 * fontsize)))  # bold characters across 80 % of the panel
    ax.set_title(textwrap.fill(value_title(column, value), min(width, fits), break_long_words=False),
                 fontsize=fontsize)


def finish_legend(fig, axes, key, handles, title, below=False):
    """The legend of a panel_grid figure (with the labelled artists of its axes) and, for one
    axes, its title; every legend fitted to the canvas."""
    if key is None:
        axes[0].set_title(title)
        _legend(axes[0], handles + _extra_handles(*axes), below=below)
    else:
        panel_legend(key, handles + _extra_handles(*axes))
    return fit_legends(fig)


CAPTION = "caption"  # the caption's gid: a note with no clear spot on its panel joins it (settle_notes)


def set_caption(fig, text: str) -> None:
    caption_room(fig)
    fig.text(0.01, 0.012, text, fontsize=7.5, color="#555555", ha="left", va="bottom", wrap=True, gid=CAPTION)


def caption_room(fig, extra_lines: int = 0) -> None:
    """The caption's room at the foot of the canvas, about half an inch for two lines (and a
    sixth of an inch for each of `extra_lines`: notes that joined it, settle_notes), at the
    figure's height now (a chart that makes its figure taller asks again)."""
    room = min(0.3 + 0.05 * extra_lines, (0.5 + 0.17 * extra_lines) / fig.get_figheight())
    fig.get_layout_engine().set(rect=(0, room, 1, 1 - room))


def _titled(fig, title: str) -> None:
    """A figure's title, left-aligned and bold like an axes title (for figures of panels), in
    lines no wider than the canvas (check.wide_titles)."""
    size = matplotlib.font_manager.FontProperties(size=plt.rcParams["axes.titlesize"]).get_size_in_points()
    fits = int(0.97 * fig.get_figwidth() * 72 / (0.62 * size))  # characters of a bold line across the canvas
    fig.suptitle(textwrap.fill(title, fits, break_long_words=False), x=0.01, ha="left", fontsize=size,
                 fontweight=plt.rcParams["axes.titleweight"])


LAYOUT_ROUNDS = 12  # solves of the layout at most before it is kept


def _freeze_layout(fig):
    """Solve the layout for the figure as it now is until it stops moving (each solve starts from
    the panels' last sizes: their tick labels move with them), and keep it, rounded to a
    millionth of the figure, for the checks and every file written: constrained layout solved
    again for each format differs in the last bits between runs of a figure of several rows, and
    the SVG's clip-path ids hash those bits; and each check draws the figure, which no longer
    solves it. Returns what undoes it (a refused figure is laid out again when saved again)."""
    engine = fig.get_layout_engine()
    if engine is None:
        return lambda: None
    was = [(ax, ax.get_in_layout()) for ax in fig.axes]  # set_position takes a panel out of it

    def thaw():
        for ax, inside in was:
            ax.set_in_layout(inside)
        fig.set_layout_engine(engine)
    laid = None
    for _ in range(LAYOUT_ROUNDS):
        fig.draw_without_rendering()
        now = [[round(float(v), 6) for v in ax.get_position().bounds] for ax in fig.axes]
        if now == laid:
            break
        laid = now
    for ax, bounds in zip(fig.axes, laid):
        ax.set_position(bounds)
    fig.set_layout_engine("none")
    return thaw


# a tick label that is a number: plain, or matplotlib's mathtext for a log axis (6×10⁻¹)
_NUMBER = re.compile(r"[−-]?[\d,.]+[%kKMG]?|\$\\mathdefault\{[^$]*\}\$")


def thin_tick_labels(fig, rounds: int = 6) -> None:
    """Numbers on an axis never printed over each other: where drawn tick labels touch, an axis
    matplotlib counts out itself (linear) gets fewer ticks; any other (the levels the lab
    measured, 8 beside 10; a log axis's minor labels in a small panel) keeps its ticks and
    drops the labels that would touch one kept before — major labels first, the last level's
    kept. Category names are never dropped: they are wrapped where they are drawn, and
    check.overlapping_texts refuses a figure whose names still collide."""
    gap = 3 * TICK_GAP_PT * fig.dpi / 72  # room to spare over what the check asks
    for _ in range(rounds):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        changed = False
        for ax in fig.axes:
            if not ax.axison:
                continue
            for axis in (ax.xaxis, ax.yaxis):
                changed |= _thin(axis, renderer, gap)
        if not changed:
            return


def _thin(axis, renderer, gap: float) -> bool:
    """One axis of thin_tick_labels; whether it changed anything."""
    drawn = axis._update_ticks()
    majors = {id(t) for t in axis.get_major_ticks()}
    shown = [(t, id(t) in majors, t.label1.get_window_extent(renderer)) for t in drawn
             if t.label1.get_visible() and t.label1.get_text().strip()]
    # neighbours along the axis (drawn lists the major ticks before the minor ones: 100 before 90)
    shown.sort(key=lambda s: s[2].x0 if axis.axis_name == "x" else s[2].y0)
    if not any(overlaps(a, b, gap) for (_, _, a), (_, _, b) in zip(shown, shown[1:])):
        return False
    if not all(_NUMBER.fullmatch(t.label1.get_text().strip()) for t, _, _ in shown):
        return False
    locator = axis.get_major_locator()
    linear = not isinstance(locator, (matplotlib.ticker.FixedLocator, matplotlib.ticker.LogLocator))
    if linear and len(shown) > 2 and not any(not major for _, major, _ in shown):
        axis.set_major_locator(matplotlib.ticker.MaxNLocator(len(shown) // 2))
        return True
    kept: list = []
    last = max((t.get_loc() for t, major, _ in shown if major), default=None)
    for want_major in (True, False):  # major labels first, then the minor ones that fit
        for t, major, e in shown:
            if major != want_major:
                continue
            clash = [k for k in kept if overlaps(k[2], e, gap)]
            if not clash:
                kept.append((t, major, e))
            elif major and t.get_loc() == last and all(k[1] for k in clash):  # the last level keeps its label
                kept = [k for k in kept if k not in clash] + [(t, major, e)]
    keep = {t.get_loc() for t, _, _ in kept}
    for which, locs, formatter in (("major", axis.get_majorticklocs(), axis.get_major_formatter()),
                                   ("minor", axis.get_minorticklocs(), axis.get_minor_formatter())):
        labels = formatter.format_ticks(locs) if len(locs) else []
        drawn_locs = {t.get_loc() for t, major, _ in shown if major == (which == "major")}
        fixed = ["" if (loc in drawn_locs and loc not in keep) else lab for loc, lab in zip(locs, labels)]
        getattr(axis, f"set_{which}_locator")(matplotlib.ticker.FixedLocator(locs))
        getattr(axis, f"set_{which}_formatter")(matplotlib.ticker.FixedFormatter(fixed))
    return True


def lay_out(fig):
    """What save_figure does to a figure before checking it: y axis labels taller than their axes
    wrapped, legends fitted to the canvas, numbers on an axis thinned where they would touch,
    the names of lines above a plot spread where the layout left it, and notes on hidden series
    placed where they are clear. Returns `fig` (tests check what a
    saved figure would be: plots.problems(lay_out(fig)))."""
    wrap_axis_labels(fig)
    if added := settle_notes(fig):  # notes moved to the caption: its room, then the legends
        caption_room(fig, added)
    fit_legends(fig)
    thin_tick_labels(fig)
    spread_line_names(fig)
    settle_notes(fig)
    return fig


def wrap_axis_labels(fig) -> None:
    """A y axis label taller than its axes (01's "writes/s, counted as the article counted them"
    beside a short chart) in two lines, broken between words (check.cut_axis_labels refuses any
    axis label still cut at the canvas's edge; an x label overhangs its panel's width freely)."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        if not ax.axison:
            continue
        label, room = ax.yaxis.label, ax.get_window_extent(renderer).height
        text = label.get_text()
        if text and "\n" not in text and label.get_window_extent(renderer).height > room:
            fits = int(room / (0.6 * label.get_fontsize() * fig.dpi / 72))  # characters of a line
            label.set_text(textwrap.fill(text, max(fits, len(text) // 2 + 1), break_long_words=False))


def reading(notebook: ModuleType | str, name: str) -> str | None:
    """What to look for in a notebook's figure: one sentence, from the READING (figure name ->
    sentence) its module declares, shown under the figure when the notebook saves it. A figure of
    one of the lab's notebooks without a sentence is refused, and so is one named by the ID of a
    notebook of config.NOTEBOOKS_DIR rather than by its module; other callers (tests, scripts)
    name a folder and need none."""
    if isinstance(notebook, ModuleType):
        sentence = notebook.READING.get(name)
        if sentence is None:
            raise ValueError(f"figure {notebook.ID}/{name} has no sentence in its module's READING "
                             f"({notebook.__name__}: what to look for)")
        return sentence
    if (config.NOTEBOOKS_DIR / f"{notebook}.ipynb").exists():
        raise ValueError(f"figure {notebook}/{name}: pass the notebook's module (`notebook=this`), "
                         "whose READING holds the figure's sentence, not its ID")
    return None


def save_figure(fig, name: str, notebook: ModuleType | str | None = None, figures_dir: Path | None = None,
                shows: Iterable[ModuleType] = ()) -> list[Path]:
    """Write figures/<notebook>/<name>.png and .svg, byte-for-byte reproducible. Raises
    ClippedLegendError, writing nothing, when a legend does not fit the canvas, and
    check.FigureError when the figure breaks the lab's vocabulary (plots.check). `notebook`: the
    notebook's module (`this`: its ID names the folder, its READING the sentence), or a folder's
    name. `shows`: the other notebooks whose runs the figure draws (06's, 11's), whose
    experiments' ids the check refuses too. In a notebook, the saved PNG itself is shown (at
    savefig.dpi, 1,200 pixels across, which a report fits to its page: a 7.5-pt caption reads
    at about 12 px in a 60-rem page, where the figure drawn at figure.dpi read at 10), with its
    sentence (reading) under it."""
    shown = ((notebook,) if isinstance(notebook, ModuleType) else ()) + tuple(shows)
    dpi = fig.dpi
    fig.set_dpi(plt.rcParams["savefig.dpi"] if plt.rcParams["savefig.dpi"] != "figure" else dpi)
    try:  # laid out at the PNG's resolution: text does not scale quite linearly with it
        lay_out(fig)
        thaw = _freeze_layout(fig)
        try:
            clipped = clipped_legends(fig)
            if clipped:
                raise ClippedLegendError(f"figure {name!r}: " + "; ".join(clipped))
            check(fig, name, shown)
        except Exception:  # refused: laid out again when it is changed and saved again
            thaw()
            raise
    finally:
        fig.set_dpi(dpi)
    notebook = notebook or os.environ.get("LAB_NOTEBOOK") or "misc"
    sentence = reading(notebook, name)
    out = Path(figures_dir or config.FIGURES_DIR) / getattr(notebook, "ID", notebook)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "sqlitelab"}):
        fig.savefig(paths[0], metadata={"Software": None})
        fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    if _in_notebook():
        from IPython.display import Image, Markdown, display  # lazy: only when shown in a notebook
        display(Image(filename=str(paths[0])))  # the PNG as published (savefig.dpi), fitted to the page
        if sentence:
            display(Markdown(f"*{sentence}*"))
        plt.close(fig)  # shown here, as saved, not again at the cell's end
    return paths


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # lazy: only when asking whether it runs in a notebook
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _profile_holds(rows: pd.DataFrame, profile: str) -> bool:
    """Whether the points of `rows` ran as `profile` says: none of its knobs stored as a column
    (write_path, txn_mode, busy) took another value (03's write paths override its writer)."""
    try:
        knobs = profile_knobs(profile)
    except ValueError:  # a profile profiles.toml does not know: nothing to contradict
        return True
    return all(set(rows[k].dropna().astype(str)) <= {str(v)} for k, v in knobs.items() if k in rows)


# What caption_for says of points without an interval (runs_per_point): every one, or some.
EVERY_POINT_ONE_RUN = "one run per point: no interval"
A_POINT_ONE_RUN = "a point of one run has no interval"


def caption_for(df: pd.DataFrame, extra: str = "") -> str:
    """One human line under a figure: the machine, where the server and the load generator ran,
    the profile in plain words (when the points have one or two and ran as it says) and `extra`
    (the figure's key knob), and that the points carry no interval where each ran once, or that a
    point of one run has none where some did (runs_per_point). The full configuration is in the report's method table, not here."""
    if df.empty:
        return extra
    first = df.iloc[0]
    parts = []
    if "machine" in df:
        parts.append(str(first["machine"]))
    names = {"locust": "Locust", "loadgen": "the lab's Go load generator"}
    gens = sorted(set(df["generator"].fillna("locust")), key=lambda g: g != "locust") \
        if "generator" in df else ["locust"]
    gen = " and ".join(names.get(g, g) for g in gens)
    server_cpu, gen_cpu = first.get("server_pinning"), first.get("generator_pinning")
    parts.append((f"server on CPU {server_cpu}" if server_cpu else "server unpinned")
                 + f", {gen} " + (f"on CPU {gen_cpu}" if gen_cpu else "unpinned"))
    if "profile" in df:
        profiles = list(dict.fromkeys(df["profile"].dropna()))
        if 0 < len(profiles) <= 2 and all(_profile_holds(df[df["profile"] == p], p) for p in profiles):
            parts.append(" and ".join(profile_title(p) for p in profiles))
    if extra:
        parts.append(extra)
    once = runs_per_point(df)
    if len(once) and int(once.max()) == 1:
        parts.append(EVERY_POINT_ONE_RUN)
    elif len(once) and int(once.min()) == 1:
        parts.append(A_POINT_ONE_RUN)
    return " · ".join(parts)


def runs_per_point(df: pd.DataFrame) -> pd.Series:
    """How many runs (repeats, and rounds where they ran) each of the stored points of `df` (a
    `repeat` column) is over, by what identifies a point (compare.KEYS); empty for rows that are
    not stored points."""
    if df.empty or "repeat" not in df:
        return pd.Series(dtype=int)
    keys = [k for k in KEYS if k in df]
    runs = df["repeat"].astype(str) + "/" + (df["round"].astype(str) if "round" in df else "")
    return runs.groupby([df[k] for k in keys], dropna=False).nunique() if keys else pd.Series([runs.nunique()])
