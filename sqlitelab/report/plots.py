"""Figures: one style, one deterministic save, the standard charts.

    plt.style.use("sqlitelab.report.blog")
    fig = throughput_chart(df, caption=caption_for(df))
    save_figure(fig, "throughput", notebook=NOTEBOOK)   # a study's ID (sqlitelab.studies)

Every stack has one colour and one marker in every figure (STACK_STYLES, style_for), every
profile one dash pattern (profile_dash, in the order of servers/profiles.toml), and every
figure's legends lie inside its canvas (save_figure refuses a figure whose legend is clipped).
"""
from __future__ import annotations

from matplotlib.transforms import IdentityTransform
from matplotlib.transforms import ScaledTranslation
import textwrap
import numpy as np
from hdrh.histogram import HdrHistogram
import functools
import json
import math
import os
import re
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sqlitelab.core import config
from sqlitelab.infra.servers import STACKS, load_profiles
from sqlitelab.report.analysis import flagged, over_repeats, rate_points
from sqlitelab.studies import registry

# --------------------------------------------------------------------------- one style per thing

# The load generators, where a figure compares them (calibration).
GENERATOR_STYLES: dict[str, dict] = {
    "locust": {"color": "#882255", "marker": "o"},
    "loadgen": {"color": "#44AA99", "marker": "s"},
    "wrk": {"color": "#332288", "marker": "^"},
}
# Anything else a figure colours (buffer methods, rows per transaction, transaction modes...):
# in the natural order of its values in that figure, in colours no stack uses.
CATEGORY_COLORS = ["#332288", "#E69F00", "#44AA99", "#882255", "#999933", "#56B4E9", "#AA4499", "#777777"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


class _StackStyles(Mapping):
    """One colour and one marker per stack, the same in every figure: what its stack.toml
    declares (sqlitelab.infra.servers.STACKS, read live: an extra stack registered later is in
    it), in STACKS' order. The bundled stacks' are Okabe–Ito colours, safe for colour-blind
    readers; red and orange are left to LIMIT_MARKS' rings. A stack that declares none (an extra
    stack's folder) takes a spare one, in its place among them: CATEGORY_COLORS and MARKERS that
    no stack declares."""

    def _styles(self) -> dict[str, dict]:
        used_colours = {str(s["color"]).lower() for s in STACKS.values() if s.get("color")}
        used_markers = {s.get("marker") for s in STACKS.values()}
        colours = [c for c in CATEGORY_COLORS if c.lower() not in used_colours] or CATEGORY_COLORS
        markers = [m for m in MARKERS if m not in used_markers] or MARKERS
        spare = [n for n, s in STACKS.items() if not (s.get("color") and s.get("marker"))]
        out = {}
        for name, s in STACKS.items():
            i = spare.index(name) if name in spare else 0
            out[name] = {"color": s.get("color") or colours[i % len(colours)],
                         "marker": s.get("marker") or markers[i % len(markers)]}
        return out

    def __getitem__(self, stack: str) -> dict:
        return self._styles()[stack]

    def __iter__(self):
        return iter(list(STACKS))

    def __contains__(self, stack) -> bool:
        return stack in STACKS

    def __len__(self) -> int:
        return len(STACKS)


STACK_STYLES: Mapping[str, dict] = _StackStyles()
# Dash patterns: a profile's is its place in servers/profiles.toml (profile_dash); other dashed
# categories take them in their natural order within the figure.
DASHES = ["-", (0, (6, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 1.2)),
          (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (1, 3)), (0, (10, 2, 3, 2)), (0, (2, 2)), (0, (12, 3))]
KEY_GREY = "#555555"  # legend entries that stand for a dash pattern, whatever the colour


def style_for(server: str, database: str | None = None) -> dict:
    """The colour and marker of a stack, as keyword arguments for `ax.plot`. `database`: the
    store behind it — SQLite (None or "sqlite") fills the marker; another database (a later
    Postgres variant) keeps the stack's colour and marker, hollow."""
    if server not in STACK_STYLES:
        raise ValueError(f"no style for stack {server!r}: it is no stack of "
                         f"sqlitelab.infra.servers.STACKS (known: {', '.join(STACK_STYLES)})")
    s = STACK_STYLES[server]
    fill = s["color"] if database in (None, "sqlite") else "white"
    return {"color": s["color"], "marker": s["marker"], "markerfacecolor": fill}


@functools.cache
def _profile_order() -> tuple[str, ...]:
    return tuple(load_profiles())


def profile_dash(profile: str):
    """A profile's dash pattern, the same in every figure: its place in servers/profiles.toml
    (an overlay `a+b` draws as its base profile `a`; a name profiles.toml does not know gets a
    pattern from its name, stably)."""
    base = str(profile).split("+")[0]
    order = _profile_order()
    i = order.index(base) if base in order else zlib.crc32(base.encode()) % len(DASHES)
    return DASHES[i % len(DASHES)]


def _natural(v) -> list:
    """Sort key where numbers inside names sort as numbers: "10 rows" < "25 rows" < "100 rows"."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(v)) if t]


def _order(value) -> tuple:
    """Where a value goes in a legend or a group of bars: stacks in STACKS' order, profiles in
    profiles.toml's, anything else in natural order."""
    if value in STACK_STYLES:
        return (0, list(STACK_STYLES).index(value), [])
    base = str(value).split("+")[0]
    if base in _profile_order():
        return (1, _profile_order().index(base), _natural(value))
    return (2, 0, _natural(value))


def _known_style(value) -> dict | None:
    if value in STACK_STYLES:
        return style_for(value)
    if value in GENERATOR_STYLES:
        return {**GENERATOR_STYLES[value], "markerfacecolor": GENERATOR_STYLES[value]["color"]}
    return None


def colours_for(values) -> dict:
    """Colour and marker of each value: a stack's or a generator's own, anything else in the
    natural order of the values given (CATEGORY_COLORS)."""
    values = sorted(dict.fromkeys(values), key=_order)
    out, others = {}, [v for v in values if _known_style(v) is None]
    for v in values:
        if (s := _known_style(v)) is None:
            i = others.index(v)
            c = CATEGORY_COLORS[i % len(CATEGORY_COLORS)]
            s = {"color": c, "marker": MARKERS[i % len(MARKERS)], "markerfacecolor": c}
        out[v] = s
    return out


class SeriesStyles:
    """Colour, marker and dash of every series of a figure, from the columns that name them.

    Colour and marker: the stack's (`server` among the columns), else the generator's, else the
    other columns' values in natural order. Dash: `style_by`'s value — a profile's own
    (profile_dash) when that is `profile` — or, with no `style_by`, the profile, and whatever
    columns the colour leaves over, in natural order."""

    def __init__(self, frame: pd.DataFrame, series: list[str], style_by: str | None = None):
        self.series = list(series)
        dash = [style_by] if style_by else (["profile"] if "profile" in self.series else [])
        if "server" in self.series:
            colour = ["server"]
        elif "generator" in self.series:
            colour = ["generator"]
        else:
            colour = [c for c in self.series if c not in dash] or list(self.series)
        dash += [c for c in self.series if c not in colour and c not in dash]
        self.colour_cols, self.dash_cols = colour, dash
        keys = frame[self.series].drop_duplicates()
        self.colour_values = sorted({self._part(k, colour) for k in keys.itertuples(index=False)},
                                    key=lambda t: [_order(v) for v in t])
        self.dash_values = sorted({self._part(k, dash) for k in keys.itertuples(index=False)},
                                  key=lambda t: [_order(v) for v in t])
        singles = colours_for([t[0] for t in self.colour_values]) if len(colour) == 1 else None
        self._colour = {t: (singles[t[0]] if singles else
                            {"color": CATEGORY_COLORS[i % len(CATEGORY_COLORS)],
                             "marker": MARKERS[i % len(MARKERS)],
                             "markerfacecolor": CATEGORY_COLORS[i % len(CATEGORY_COLORS)]})
                        for i, t in enumerate(self.colour_values)}
        self._dash = {t: (profile_dash(t[0]) if dash == ["profile"] else DASHES[i % len(DASHES)])
                      for i, t in enumerate(self.dash_values)}
        if dash == ["database"]:  # SQLite solid, another database dashed (and hollow: style_for)
            others = [t for t in self.dash_values if t != ("sqlite",)]
            self._dash = {("sqlite",): "-", **{t: DASHES[1 + i % (len(DASHES) - 1)] for i, t in enumerate(others)}}

    def _part(self, key, cols) -> tuple:
        d = dict(zip(self.series, key))
        return tuple(d[c] for c in cols)

    def __call__(self, key) -> dict:
        """`ax.plot` keyword arguments of the series `key` (its values of `series`, in order)."""
        key = key if isinstance(key, tuple) else (key,)
        out = {**self._colour[self._part(key, self.colour_cols)],
               "linestyle": self._dash[self._part(key, self.dash_cols)]}
        if dict(zip(self.series, key)).get("database", "sqlite") != "sqlite":
            out["markerfacecolor"] = "white"  # another database than SQLite: hollow (style_for)
        return out

    @staticmethod
    def label(key) -> str:
        key = key if isinstance(key, tuple) else (key,)
        return " · ".join(str(v) for v in key)

    def handles(self) -> list:
        """Legend entries that read at a glance: one per colour (stack) and one per dash
        (profile), rather than one per combination."""
        if self.colour_cols == self.dash_cols:  # one key drawn twice: one entry each
            return [Line2D([], [], **self._colour[t], linestyle=self._dash[t], label=self.label(t))
                    for t in self.colour_values]
        many_c, many_d = len(self.colour_values) > 1, len(self.dash_values) > 1
        only_dash = self._dash[self.dash_values[0]] if self.dash_values else "-"
        out = []
        if many_c or not many_d:
            for t, s in self._colour.items():
                out.append(Line2D([], [], **s, linestyle="-" if many_d else only_dash,
                                  label=self.label(t)))
        if many_d:
            only = None if many_c else self._colour[self.colour_values[0]]
            for t, dash in self._dash.items():
                kw = {**only} if only else {"color": KEY_GREY}
                if only and self.dash_cols == ["database"] and t != ("sqlite",):
                    kw["markerfacecolor"] = "white"
                out.append(Line2D([], [], **kw, linestyle=dash, label=self.label(t)))
        return out


# The articles' own numbers, drawn on the same axes as ours: greys, dashed, "x" markers.
REFERENCE_COLORS = ["#111111", "#666666", "#999999", "#444444"]
REFERENCE_DASHES = [(0, (5, 2)), (0, (2, 2)), (0, (6, 2, 1, 2)), (0, (1, 1))]


def draw_reference(ax, ref: pd.DataFrame, x: str, y: str, label: str, by: str | None = None) -> None:
    """Plot an article's published numbers (`ref`) as dashed grey lines, one per `by` group,
    labelled `label` (with the group's value when `by` is given; the value alone when `label`
    is empty)."""
    groups = ref.groupby(by, sort=False) if by else [(None, ref)]
    for i, (key, g) in enumerate(groups):
        g = g.dropna(subset=[x, y]).sort_values(x)
        name = (f"{label} · {key}" if label else str(key)) if by else label
        ax.plot(g[x], g[y], color=REFERENCE_COLORS[i % len(REFERENCE_COLORS)],
                linestyle=REFERENCE_DASHES[i % len(REFERENCE_DASHES)], marker="x", markersize=7,
                linewidth=1.4, label=name)


# How a point whose generator was the limit, or plausibly set the pace, is drawn: a ring
# around it (lines) or a hatch (bars). Its throughput is a lower bound for the server's.
LIMIT_MARKS = {
    "generator_bound": {"label": "generator-bound", "color": "#cc0000", "marker": "o",
                        "linestyle": "-", "hatch": "//"},
    "generator_influenced": {"label": "generator-influenced", "color": "#e08000", "marker": "s",
                             "linestyle": "--", "hatch": "xx"},
}


def mark_limits(ax, g: pd.DataFrame, x: str, y: str) -> None:
    """Ring the points of `g` whose generator was the limit (red circle) or set the pace
    (orange square), each kind labelled once in the legend."""
    for col, m in LIMIT_MARKS.items():
        f = g[flagged(g, col)]
        if col == "generator_influenced":  # a bound point is not also ringed as influenced
            f = f[~flagged(f, "generator_bound")]
        if not len(f):
            continue
        labelled = m["label"] in ax.get_legend_handles_labels()[1]
        ax.plot(f[x], f[y], linestyle="none", marker=m["marker"], markersize=12,
                markerfacecolor="none", markeredgecolor=m["color"], markeredgewidth=1.4,
                label=None if labelled else m["label"])


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


def panel_legend(key_ax, handles: list, ncols: int = 4, fontsize: float = 8):
    """The one legend of a figure of panels, centred in its own row (see new_panels)."""
    return _make_legend(key_ax, handles, loc="upper center", bbox_to_anchor=(0.5, 1.0),
                        ncols=min(ncols, max(len(handles), 1)), fontsize=fontsize)


def set_caption(fig, text: str) -> None:
    height = fig.get_figheight()
    room = min(0.3, 0.5 / height)  # about half an inch for two lines of caption
    fig.get_layout_engine().set(rect=(0, room, 1, 1 - room))
    fig.text(0.01, 0.012, text, fontsize=7.5, color="#555555", ha="left", va="bottom", wrap=True)


def _titled(fig, title: str) -> None:
    """A figure's title, left-aligned and bold like an axes title (for figures of panels)."""
    fig.suptitle(title, x=0.01, ha="left", fontsize=plt.rcParams["axes.titlesize"],
                 fontweight=plt.rcParams["axes.titleweight"])


# --------------------------------------------------------------------------- legends

def _legend(ax, handles: list | None = None, below: bool = False):
    """In the axes when there are four entries or fewer; below them, clear of the data, when
    there are more or when an article's line crosses the plot (it goes wherever its numbers go); to the
    right, in one column, when there are very many."""
    handles = handles if handles is not None else ax.get_legend_handles_labels()[0]
    n = len(handles)
    if n > 12:
        return _make_legend(ax, handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    if below or n > 4:
        return _legend_below(ax, handles, ncols=3)
    return _make_legend(ax, handles)


def _legend_below(ax, handles: list, ncols: int):
    """A legend under the axes' tick labels and label, whatever their height (fit_legends
    measures them and moves it)."""
    lg = _make_legend(ax, handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=ncols,
                      fontsize=8)
    lg._lab_below = True
    return lg


def _make_legend(owner, handles: list, labels: list | None = None, **kw):
    """`owner.legend(...)`, remembering how it was made so that fit_legends can make it again
    with fewer columns."""
    lg = owner.legend(handles, labels, **kw) if labels is not None else owner.legend(handles=handles, **kw)
    lg._lab_spec = (owner, handles, labels, kw)
    return lg


def _narrower(lg):
    """The same legend with one column fewer (None when it has one already)."""
    spec = getattr(lg, "_lab_spec", None)
    if spec is None:  # a legend made elsewhere: rebuilt from what it shows
        owner = lg.axes if lg.axes is not None else lg.figure
        spec = (owner, list(lg.legend_handles), [t.get_text() for t in lg.get_texts()],
                {"loc": lg._loc, "bbox_to_anchor": lg.get_bbox_to_anchor(),  # already in pixels
                 "bbox_transform": IdentityTransform(), "fontsize": lg.prop.get_size(),
                 "ncols": lg._ncols})
    owner, handles, labels, kw = spec
    ncols = kw.get("ncols", 1)
    if ncols <= 1:
        return None
    below = getattr(lg, "_lab_below", False)
    lg.remove()
    new = _make_legend(owner, handles, labels, **{**kw, "ncols": ncols - 1})
    new._lab_below = below
    return new


def _extra_handles(*axes) -> list:
    """The labelled artists of the axes (limit rings, an article's lines, reference lines),
    each label once."""
    out, seen = [], set()
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in seen:
                seen.add(label)
                out.append(h)
    return out


def _legends(fig) -> list:
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


def clipped_legends(fig, tolerance_px: float = 1.0) -> list[str]:
    """The legends of `fig` whose drawn extent is not inside the figure's canvas."""
    fig.canvas.draw()
    fb = fig.bbox
    out = []
    for lg in _legends(fig):
        e = lg.get_window_extent()
        if (e.x0 < fb.x0 - tolerance_px or e.y0 < fb.y0 - tolerance_px
                or e.x1 > fb.x1 + tolerance_px or e.y1 > fb.y1 + tolerance_px):
            labels = [t.get_text() for t in lg.get_texts()][:3]
            out.append(f"legend {labels}… at {tuple(round(v) for v in e.extents)} "
                       f"outside the canvas {tuple(round(v) for v in fb.extents)} (px)")
    return out


def fit_legends(fig):
    """Lay the figure out, put every below-the-axes legend under its axes' tick labels, and
    take columns off any legend wider than the canvas until it fits. Returns `fig`."""
    for _ in range(20):
        with warnings.catch_warnings():  # a legend too wide squeezes the axes until narrowed
            warnings.filterwarnings("ignore", message="constrained_layout not applied")
            fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        moved = False
        for ax in fig.axes:
            lg = ax.get_legend()
            if lg is None or not getattr(lg, "_lab_below", False):
                continue
            under = ax.xaxis.get_tightbbox(renderer)
            drop = (ax.bbox.y0 - under.y0) / fig.dpi + 0.06 if under is not None else 0.06
            if abs(drop - getattr(lg, "_lab_drop", -1)) > 0.01:
                lg._lab_drop = drop
                lg.set_bbox_to_anchor((0.5, 0.0), transform=ax.transAxes + ScaledTranslation(
                    0, -drop, fig.dpi_scale_trans))
                moved = True
        if moved:
            continue
        bad = [lg for lg in _legends(fig) if not _inside(lg, fig)]
        if not bad:
            break
        narrowed = [_narrower(lg) for lg in bad]
        if not any(n is not None for n in narrowed):
            break
    return fig


def _inside(lg, fig, tolerance_px: float = 1.0) -> bool:
    e, fb = lg.get_window_extent(), fig.bbox
    return (e.x0 >= fb.x0 - tolerance_px and e.y0 >= fb.y0 - tolerance_px
            and e.x1 <= fb.x1 + tolerance_px and e.y1 <= fb.y1 + tolerance_px)


def _freeze_layout(fig) -> None:
    """Keep the layout just made (rounded to a millionth of the figure) for every file written:
    constrained layout solved again for each format differs in the last bits between runs of
    a figure of several rows, and the SVG's clip-path ids hash those bits."""
    if fig.get_layout_engine() is None:
        return
    for ax in fig.axes:
        ax.set_position([round(float(v), 6) for v in ax.get_position().bounds])
    fig.set_layout_engine("none")


class ClippedLegendError(ValueError):
    """A figure's legend runs off its canvas: the saved image would cut it."""


def reading(notebook: str, name: str) -> str | None:
    """What to look for in a notebook's figure: one sentence, from its study's READING (figure
    name -> sentence), shown under the figure when a notebook saves it. A figure of one of the
    lab's notebooks without a sentence is refused; other callers (tests, scripts) need none."""
    sentence = registry.study(notebook).READING.get(name) if notebook in registry.ids() else None
    if sentence is None and (config.NOTEBOOKS_DIR / f"{notebook}.ipynb").exists():
        raise ValueError(f"figure {notebook}/{name} has no sentence in its study's READING "
                         "(sqlitelab/studies: what to look for)")
    return sentence


def save_figure(fig, name: str, notebook: str | None = None, figures_dir: Path | None = None) -> list[Path]:
    """Write figures/<notebook>/<name>.png and .svg, byte-for-byte reproducible. Raises
    ClippedLegendError, writing nothing, when a legend does not fit the canvas. In a notebook,
    the figure is shown with its sentence (reading) under it."""
    dpi = fig.dpi
    fig.set_dpi(plt.rcParams["savefig.dpi"] if plt.rcParams["savefig.dpi"] != "figure" else dpi)
    try:  # laid out at the PNG's resolution: text does not scale quite linearly with it
        fit_legends(fig)
        clipped = clipped_legends(fig)
        if clipped:
            raise ClippedLegendError(f"figure {name!r}: " + "; ".join(clipped))
        _freeze_layout(fig)
    finally:
        fig.set_dpi(dpi)
    notebook = notebook or os.environ.get("LAB_NOTEBOOK") or "misc"
    sentence = reading(notebook, name)
    out = Path(figures_dir or config.FIGURES_DIR) / notebook
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "sqlitelab"}):
        fig.savefig(paths[0], metadata={"Software": None})
        fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    if sentence and _in_notebook():
        from IPython.display import Markdown, display  # lazy: only when shown in a notebook
        display(fig)
        display(Markdown(f"*{sentence}*"))
        plt.close(fig)  # shown here, with its sentence, not again at the cell's end
    return paths


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # lazy: only when asking whether it runs in a notebook
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


# --------------------------------------------------------------------------- tables

def caption_for(df: pd.DataFrame, extra: str = "") -> str:
    """Machine, pinning and the key knobs of the points drawn, compactly."""
    if df.empty:
        return extra
    first = df.iloc[0]
    parts = []
    if "machine" in df:
        parts.append(str(first["machine"]))
    names = {"locust": "Locust", "loadgen": "loadgen"}
    gens = sorted(set(df["generator"].fillna("locust")), key=lambda g: g != "locust") \
        if "generator" in df else ["locust"]
    gen = " + ".join(names.get(g, g) for g in gens)
    procs = int(df["processes"].max()) if "processes" in df and df["processes"].notna().any() else 1
    parts.append(f"server CPU {first.get('server_pinning') or 'unpinned'}, "
                 f"{gen} CPU {first.get('generator_pinning') or 'unpinned'}"
                 + (f" ({procs} Locust processes)" if procs > 1 else ""))
    notes = sorted({n for n in df.get("layout_note", pd.Series(dtype=object)).dropna() if n})
    parts.extend(notes)
    if "txn_mode" in df:
        profiles = sorted({f"{r.profile} ({r.txn_mode}, {r.busy}, {r.write_path})"
                           for r in df.itertuples()})
        if len(profiles) <= 3:
            parts.append("; ".join(profiles))
        shapes = sorted({f"{r.server.split('-')[0]} {r.server_processes}×{r.server_threads}"
                         for r in df.itertuples()})
        parts.append("processes×threads: " + ", ".join(shapes))
    if extra:
        parts.append(extra)
    return " · ".join(parts)


def summarise(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Each level over its repeats, for drawing: every column the mean (errors and memory too:
    a chart shows one typical repeat), the rps range, and the generator flags."""
    cols = [c for c in ("rps", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
                        "errors", "busy_errors", "server_cpu_pct", "gen_cpu_pct", "server_rss_mb",
                        "bytes_per_s") if c in df]
    return over_repeats(df, by, cols + ["rps_min", "rps_max"], **{c: "mean" for c in cols},
                        rps_min=("rps", "min"), rps_max=("rps", "max"))


def status_table(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Status-code distribution per point, summed over repeats."""
    rows = []
    for _, r in df.iterrows():
        counts = json.loads(r["status_counts"]) if isinstance(r["status_counts"], str) else {}
        rows.append({**{k: r[k] for k in by}, **{f"[{k}]": v for k, v in counts.items()}})
    t = pd.DataFrame(rows).fillna(0)
    return t.groupby(list(by)).sum().astype(int).reset_index()


# --------------------------------------------------------------------------- line charts

def throughput_chart(df: pd.DataFrame, title: str = "Throughput vs concurrent users",
                     caption: str | None = None, y: str = "rps", ylabel: str = "requests/s",
                     logx: bool = True, reference: dict | None = None):
    """Mean over repeats with min–max bars, a colour per stack and a dash per profile; rings
    where the generator was the limit or set the pace (LIMIT_MARKS).
    `reference`: the article's numbers on the same axes, as draw_reference's keyword
    arguments (`{"ref": df, "x": "users", "y": "rps", "label": "article", "by": None}`)."""
    s = summarise(df)
    fig, ax = new_figure(caption=caption)
    styles = SeriesStyles(s, ["server", "profile"])
    for key, g in s.groupby(["server", "profile"], sort=True):
        kw = styles(key)
        ax.plot(g["users"], g[y], label="_" + styles.label(key), **kw)
        if y == "rps":
            ax.errorbar(g["users"], g[y], yerr=[g[y] - g["rps_min"], g["rps_max"] - g[y]],
                        fmt="none", ecolor=kw["color"], capsize=3, linewidth=1)
        mark_limits(ax, g, "users", y)
    if reference:
        draw_reference(ax, **reference)
        s = pd.concat([s, reference["ref"][[reference["x"]]].rename(columns={reference["x"]: "users"})])
    _users_axis(ax, s, logx)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    _legend(ax, styles.handles() + _extra_handles(ax), below=bool(reference))
    return fit_legends(fig)


PERCENTILE_NAMES = {"p50_ms": "p50", "p90_ms": "p90", "p95_ms": "p95", "p99_ms": "p99",
                    "p999_ms": "p99.9", "max_ms": "max", "mean_ms": "mean"}


def latency_chart(df: pd.DataFrame, title: str = "Latency percentiles vs concurrent users",
                  caption: str | None = None, percentiles=("p50_ms", "p95_ms", "p99_ms"),
                  logx: bool = True):
    """One panel per percentile on a shared log-scale milliseconds axis; in each, a colour per
    stack and a dash per profile, as in every other figure."""
    s = summarise(df)
    fig, axes, key = new_panels(1, len(percentiles), caption=caption, sharey=True)
    styles = SeriesStyles(s, ["server", "profile"])
    for ax, col in zip(axes, percentiles):
        for k, g in s.groupby(["server", "profile"], sort=True):
            ax.plot(g["users"], g[col], label="_" + styles.label(k), **styles(k))
            mark_limits(ax, g, "users", col)  # latency there is an upper bound
        _users_axis(ax, s, logx, xlabel="concurrent users", thin=True)
        ax.tick_params(axis="x", labelsize=8)
        ax.xaxis.label.set_fontsize(9)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_title(PERCENTILE_NAMES.get(col, col), fontsize=10)
    axes[0].set_ylabel("latency (ms, log scale)")
    _titled(fig, title)
    panel_legend(key, styles.handles() + _extra_handles(*axes))
    return fit_legends(fig)


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


def _ref_line_labels(ax, ref_lines: dict[str, float]) -> None:
    """Reference values as grey lines across the plot, drawn over the data, each named in the
    right margin at its own height — never over a bar or a line; names too close together are
    spread apart, each with a leader to its line. Call once the y scale is set."""
    items = sorted(ref_lines.items(), key=lambda kv: kv[1])
    for k, (_, v) in enumerate(items):
        ax.axhline(v, color="#555555", linewidth=1, zorder=4,
                   linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)])
    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log":
        def frac(v):
            return (np.log10(v) - np.log10(lo)) / (np.log10(hi) - np.log10(lo))
    else:
        def frac(v):
            return (v - lo) / (hi - lo)
    gap = 2.6 * 7.5 / (0.6 * 72 * ax.figure.get_figheight())  # two lines of 7.5-pt text
    placed: list[float] = []
    for _, v in items:
        placed.append(max(frac(v), placed[-1] + gap) if placed else frac(v))
    for (label, v), y in zip(items, placed):
        moved = abs(y - frac(v)) > 1e-9
        ax.annotate(f"{textwrap.fill(label, 22)}\n{v:,.0f}", xy=(1.0, v), xycoords=("axes fraction", "data"),
                    xytext=(1.02, y), textcoords="axes fraction", ha="left", va="center", fontsize=7.5,
                    color="#333333", annotation_clip=False, clip_on=False,
                    arrowprops={"arrowstyle": "-", "color": "#999999", "linewidth": 0.8, "shrinkA": 0,
                                "shrinkB": 0} if moved else None)


class PlainLogFormatter(matplotlib.ticker.LogFormatter):
    """A log axis's labels as plain numbers: thousands separated, small ones as %g."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 100 else f"{x:g}"


def line_chart(df: pd.DataFrame, x: str, y: str, series: list[str], title: str, xlabel: str,
               ylabel: str, caption: str | None = None, logx: bool = False, logy: bool = False,
               ref_lines: dict[str, float] | None = None, style_by: str | None = None,
               reference: dict | None = None, markevery=None):
    """One line per combination of `series` columns (mean over duplicates of x), styled by
    SeriesStyles: the stack's colour and marker when `server` is a series column, a dash per
    `style_by` value (a profile's own dash for `profile`); `reference`: the article's numbers
    on the same axes (draw_reference's keyword arguments); `markevery`: as `ax.plot`'s, for
    dense lines."""
    fig, ax = new_figure(caption=caption)
    styles = SeriesStyles(df, series, style_by)
    for key, g in df.groupby(series, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        m = g.groupby(x, sort=True)[y].mean()
        ax.plot(m.index, m.values, label="_" + styles.label(key), markevery=markevery, **styles(key))
        flags = pd.DataFrame({c: g.assign(_f=flagged(g, c)).groupby(x, sort=True)["_f"].any()
                              for c in LIMIT_MARKS}).assign(**{y: m}).reset_index()
        mark_limits(ax, flags, x, y)
    if reference:
        draw_reference(ax, **reference)
    if x == "users":  # ticks at the levels measured, as in every users axis
        _users_axis(ax, df, logx, xlabel=None)
    elif logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
        # plain numbers (0.6, 2, 1,000), not 6×10⁻¹: minor ticks labelled where few decades show
        ax.yaxis.set_major_formatter(PlainLogFormatter())
        ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    if ref_lines:
        _ref_line_labels(ax, ref_lines)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend(ax, styles.handles() + _extra_handles(ax), below=bool(reference))
    return fit_legends(fig)


def dau_chart(frame: pd.DataFrame, title: str, xlabel: str, ylabel: str, caption: str | None = None):
    """capacity.sensitivity(): daily active users against requests per user per day, a colour
    per stack and a dash per workload, the reference loads in grey (as an article's numbers)."""
    ours = frame[frame["server"].notna()]
    refs = frame[frame["server"].isna()]
    if ours.empty:
        ours = pd.DataFrame({"server": ["(no points)"], "scenario": [""], "per_user": [1.0], "dau": [float("nan")]})
    return line_chart(ours, x="per_user", y="dau", series=["server", "scenario"], logx=True, logy=True,
                      title=title, xlabel=xlabel, ylabel=ylabel, caption=caption, markevery=5,
                      reference={"ref": refs, "x": "per_user", "y": "dau", "label": "", "by": "series"}
                      if len(refs) else None)


# --------------------------------------------------------------------------- bar charts

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
        handles.append(Patch(facecolor=color, label=str(s)))
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
                    ax.annotate(r.profile, (getattr(r, value), y), xytext=(-3 if inside else 3, 0),
                                textcoords="offset points", fontsize=6.5, va="center", zorder=6,
                                color="#222222" if inside else "#555555", ha="right" if inside else "left",
                                in_layout=False)
        for k, (label, v) in enumerate((ref_lines or {}).items()):
            ax.axvline(v, color="#444444", linewidth=1.1, zorder=5,
                       linestyle=REFERENCE_DASHES[k % len(REFERENCE_DASHES)], label=f"{label}: {v:,.0f}/s")
        number = str(notebook).split("-")[0]
        sub = profiles[0] if len(profiles) == 1 else ("best profile per stack" if profiles else "")
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


# --------------------------------------------------------------------------- distributions

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
            ax.stairs(counts, edges, label=f"{styles.label(key)} (n={h.get_total_count():,})",
                      linewidth=1.6, color=kw["color"], linestyle=kw["linestyle"])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("requests")
    ax.set_title(title)
    _legend(ax)
    return fit_legends(fig)


def calibration_chart(points: pd.DataFrame, calibrations: pd.DataFrame):
    """Each generator against wrk on GET /delay/{ms}, as a function of the generator's own CPU:
    its throughput over wrk's (left) and its p99 over wrk's (right), the tolerance band, and
    the onset from which every level drifts (sqlitelab.load.calibrate). Each generator in its own
    colour (GENERATOR_STYLES)."""
    d = points[points["endpoint"] == "delay"].sort_values("gen_util")
    first = calibrations.iloc[0] if len(calibrations) else None
    caption = (f"{first['machine']} · target {first['target']} (server CPU {first['server_pinning']}), "
               f"generators and wrk on CPU {first['generator_pinning']} · GET /delay/{first['delay_ms']} · "
               f"reference {first['reference']}") if first is not None else None
    fig, (left, right) = new_figure(ncols=2, caption=caption, figsize=(10, 4.5))
    tol = float(first["tolerance"]) if first is not None else 0.1
    p99_tol = float(first["p99_tolerance"]) if first is not None else 0.25
    gen_styles = colours_for(d["generator"].unique())
    for gen, g in d.groupby("generator", sort=True):
        st = gen_styles[gen]
        c = st["color"]
        for ax, col in ((left, "rps_ratio"), (right, "p99_ratio")):
            ax.plot(100 * g["gen_util"], g[col], marker=st["marker"], color=c, linestyle="-", label=gen)
            for r in g.itertuples():
                ax.annotate(f"{r.users}", (100 * r.gen_util, getattr(r, col)), fontsize=6.5,
                            color="#555555", xytext=(3, 3), textcoords="offset points")
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
    return fit_legends(fig)


TIMELINE_ROWS = (("p99_ms", "p99 of the second, ms (log)"),
                 ("errors_late", "errors + late sends per second"),
                 ("wal_mib", "WAL, MiB"))


def timeline_chart(sec: pd.DataFrame, title: str, caption: str | None = None):
    """analysis.timeline(): one column of panels per operation, rows p99 (from due times) of
    each second, errors and late sends per second, and the WAL's size, a line per stack in its
    colour, seconds from the window's open on x; the operation shaded from its start to its end
    (dotted line at its start) in each stack's colour."""
    ops = list(dict.fromkeys(sec["operation"])) if len(sec) else ["(no operations)"]
    rows = len(TIMELINE_ROWS)
    fig, axes, key = new_panels(rows, len(ops), caption=caption,
                                figsize=(max(7.0, 2.6 * len(ops)), 6.4), sharex=False)
    stacks = [s for s in STACK_STYLES if s in set(sec.get("server", []))]
    stacks += sorted(set(sec.get("server", [])) - set(stacks))
    colours = colours_for(stacks)
    for j, op in enumerate(ops):
        g = sec[sec["operation"] == op] if len(sec) else sec
        for i, (col, label) in enumerate(TIMELINE_ROWS):
            ax = axes[i * len(ops) + j]
            for server, s in (g.groupby("server", sort=True) if len(g) else []):
                s = s.sort_values("second")
                y = (s["errors"] + s["late"]) if col == "errors_late" else s[col]
                ax.plot(s["second"] + s["span_s"] / 2, y, color=colours[server]["color"],
                        marker=colours[server].get("marker", "o"), markersize=2.5, linewidth=1.2)
                start, length = s["operation_started_s"].iloc[0], s["operation_seconds"].iloc[0]
                if pd.notna(start):
                    ax.axvline(start, color=colours[server]["color"], linestyle=":", linewidth=1)
                    ax.axvspan(start, start + (length if pd.notna(length) else 0), alpha=0.10,
                               color=colours[server]["color"], linewidth=0)
            if col == "p99_ms" and len(g) and g[col].notna().any() and (g[col].dropna() > 0).all():
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(PlainLogFormatter())
                ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
            if col == "wal_mib":  # from zero: a few KiB of change is not a jump
                ax.set_ylim(bottom=0)
            if i == 0:
                ax.set_title(op)
            if j == 0:
                ax.set_ylabel(label, fontsize=8)
            if i == rows - 1:
                ax.set_xlabel("seconds into the window")
    handles = [Line2D([], [], color=colours[s]["color"], marker=colours[s].get("marker", "o"), label=s)
               for s in stacks]
    handles.append(Patch(color="#888888", alpha=0.25, label="the operation running"))
    panel_legend(key, handles, ncols=5)
    _titled(fig, title)
    return fit_legends(fig)


def hockey_stick_chart(points: pd.DataFrame, slo_p99_ms: float, title: str, caption: str | None = None):
    """Open-loop points: p99 (from due times; the worst repeat's is not shown, the mean is)
    against the rate offered, a line per stack (log-log), the SLO as a horizontal line: the knee
    is where each line leaves it."""
    fig = line_chart(rate_points(points), x="rate", y="p99_ms", series=["server"], title=title,
                     xlabel="offered load, requests/s (open loop, log scale)",
                     ylabel="p99 from due time, ms (log scale)", caption=caption, logx=True, logy=True,
                     ref_lines={"SLO": slo_p99_ms})
    fig.axes[0].xaxis.set_major_formatter(PlainLogFormatter())
    fig.axes[0].xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    return fig
