"""The figure check: what save_figure refuses, so that the vocabulary (plots.style) holds in every
figure the lab writes.

    problems(fig, studies)     # every breach, one line each ([] when the figure is fine)
    check(fig, name, studies)  # raises FigureError naming them all

`studies`: the notebooks whose runs the figure shows (their modules, sqlitelab.notebooks: what
each declares); their experiments' ids are refused with the registries' own.

What it asserts, mechanically:
- a stack's colour: every artist drawn for a stack (gid `stack:<name>`, style_for) has that
  stack's colour, and no other line, bar or mark takes a stack's colour;
- no internal id in any text of a figure (titles, labels, ticks, legends, captions, notes): the
  ids of the registries themselves — stacks, profiles, scenarios, notebooks (config.NOTEBOOKS_DIR)
  and the experiments of the notebooks shown (EXPERIMENT_TITLES' ids and patterns: `share-10`,
  `link-100us`) — wherever they are not one plain word ("hello", "mix" read as words);
- no bar on a log axis (a bar's length is its value);
- no series drawn entirely under another without a direct label (marks.label_coincident);
- no text printed over another: tick labels of one axis, the panels' titles, the words drawn
  inside one panel, among themselves and over its tick labels (overlapping_texts);
- no text on data: a note, label or legend drawn in a panel whose box a series crosses — a line,
  a marker, a bar, a line of a collection (text_on_data) — and no title wider than the canvas
  (wide_titles);
- plain words: no "seed 00N" and no version number of three parts in any text (plain_words).
"""
from __future__ import annotations

import functools
import re
from types import ModuleType

import matplotlib.colors as mcolors
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from sqlitelab.core import config
from sqlitelab.infra.servers import STACKS, load_profiles
from sqlitelab.load.scenarios import SCENARIOS
from sqlitelab.report.plots.marks import (DIRECT_LABEL, coincidence_notes, data_under, drawn_data, named_in,
                                          overlaps, renderer_of, tick_labels, words_in)
from sqlitelab.report.plots.style import STACK_GID, STACK_STYLES
from sqlitelab.studies.declarations import experiment_patterns


class FigureError(ValueError):
    """A figure that breaks the lab's visual vocabulary (check.problems)."""


@functools.cache
def internal_ids(studies: tuple[ModuleType, ...] = ()) -> frozenset[str]:
    """Every id a reader should never meet in a figure: stacks, profiles, scenarios, notebooks and
    the experiments `studies` declare — those that are not one plain word (the empty id, a
    notebook's unnamed main sweep, names nothing)."""
    notebooks = {p.stem for p in config.NOTEBOOKS_DIR.glob("*.ipynb")} | {s.ID for s in studies}
    ids = set(STACKS) | set(load_profiles()) | set(SCENARIOS) | notebooks
    for study in studies:
        ids |= set(study.HEADLINE_EXPERIMENTS or ())
    return frozenset(i for i in ids if i and not re.fullmatch(r"[a-z]+", i))


@functools.cache
def internal_patterns(studies: tuple[ModuleType, ...] = ()) -> tuple[str, ...]:
    """The experiments' ids as `studies` name them (EXPERIMENT_TITLES: an id, or a pattern of ids
    such as `share-(\\d+)`), those that are not one plain word."""
    return tuple(p for p in experiment_patterns(studies) if not re.fullmatch(r"[a-z]+", p))


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    for ax in fig.axes:  # tick labels not yet drawn are not Text objects of the figure yet
        for axis in (ax.xaxis, ax.yaxis):
            out += [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    return out


def _matches(fig, patterns: dict[str, str]) -> list[str]:
    """Each text of `fig` a regular expression of `patterns` finds, with what that means."""
    found = []
    for text in dict.fromkeys(_texts(fig)):
        for pattern, what in patterns.items():
            m = re.search(pattern, text)
            if m:
                found.append(f"text {text!r} names {what} {m.group(0)!r}")
    return found


def internal_words(fig, studies=()) -> list[str]:
    """Texts of `fig` that name an internal id (of `studies`' notebooks too), with the id."""
    studies = tuple(studies)
    wanted = [re.escape(i) for i in internal_ids(studies)] + list(internal_patterns(studies))
    return _matches(fig, {rf"(?<![\w/+-])(?:{p})(?![\w+-])": "the internal id" for p in wanted})


def _rgb(c) -> str | None:
    try:
        rgba = mcolors.to_rgba(c)
    except (ValueError, TypeError):
        return None
    return None if rgba[3] == 0 else mcolors.to_hex(rgba[:3])


def _colours(artist) -> set[str]:
    if isinstance(artist, Line2D):  # what is drawn: the line (if any), the markers (if any)
        cs = {artist.get_color()} if artist.get_linestyle() not in ("None", "none", "", " ") else set()
        if artist.get_marker() not in (None, "None", "none", ""):
            cs |= {artist.get_markeredgecolor()}
            face = artist.get_markerfacecolor()
            if MarkerStyle(artist.get_marker()).is_filled() and _rgb(face) not in ("#ffffff", None):  # white: hollow
                cs.add(face)
        return {c for c in map(_rgb, cs) if c}
    if isinstance(artist, Rectangle):
        return {c for c in (_rgb(artist.get_facecolor()),) if c}
    return set()


def stack_colours(fig) -> list[str]:
    """Artists drawn for a stack in another colour than its own, and artists of no stack in a
    stack's colour."""
    own = {name: _rgb(s["color"]) for name, s in STACK_STYLES.items()}
    by_colour = {c: name for name, c in own.items()}
    found = []
    for ax in fig.axes:
        artists = list(ax.get_lines()) + [p for p in ax.patches if isinstance(p, Rectangle)]
        for a in artists:
            gid = a.get_gid() or ""
            cs = _colours(a)
            if gid.startswith(STACK_GID):
                stack = gid[len(STACK_GID):]
                wrong = cs - {own.get(stack)}
                if wrong:
                    found.append(f"{stack} drawn in {', '.join(sorted(wrong))}, not its own {own.get(stack)}")
            else:
                for c in cs & set(by_colour):
                    what = a.get_label() or type(a).__name__
                    found.append(f"{what!r} takes {by_colour[c]}'s colour {c} and is not {by_colour[c]}")
    return found


def bars_on_log_axes(fig) -> list[str]:
    found = []
    for ax in fig.axes:
        for c in ax.containers:
            if isinstance(c, BarContainer) and len(c.patches):
                horizontal = c.orientation == "horizontal"
                if (ax.get_xscale() if horizontal else ax.get_yscale()) == "log":
                    found.append(f"bars on a log axis in {ax.get_title() or 'an axes'!r}")
                    break
    return found


def hidden_series(fig) -> list[str]:
    """Series lines drawn under another, over their whole length or part of it, with no direct
    label saying so (marks.label_coincident), on the panel or, where it had no clear spot, in the
    caption (marks.settle_notes)."""
    found = []
    captions = {t.get_text() for t in fig.texts if t.get_gid() == "caption"}
    for ax in fig.axes:
        labelled = {t.get_text() for t in ax.texts if t.get_gid() == DIRECT_LABEL} | captions
        for names, head in coincidence_notes(ax):
            # any note naming them: the label's looser tolerance may see a longer stretch
            if not any("one line" in t.lower() and all(named_in(t, n) for n in names)
                       for t in labelled):
                found.append(f"{' and '.join(names)} drawn on one line ({head.rstrip(':')}) with no direct label")
    return found


TICK_GAP_PT = 1.0  # two tick labels of one axis closer than this read as one number ("128256")


def _clashes(texts, renderer, where: str, gap_px: float = 0.0) -> list[str]:
    # a text's own box (Text's: an annotation's would take in its leader line too)
    shown = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in texts
             if t.get_visible() and t.get_text().strip()]
    return [f"{where}: {a!r} printed over {b!r}"
            for i, (a, ea) in enumerate(shown) for b, eb in shown[i + 1:] if overlaps(ea, eb, gap_px)]


def overlapping_texts(fig) -> list[str]:
    """Texts printed over each other: the tick labels of one axis (long category names side by
    side, or numbers closer than TICK_GAP_PT), the panels' titles, and the words drawn inside one
    panel (direct labels, notes, a legend), among themselves and over the panel's tick labels."""
    renderer = renderer_of(fig)  # every text where the saved file will put it
    gap = TICK_GAP_PT * fig.dpi / 72
    found = []
    for ax in fig.axes:
        name = ax.get_title() or ax.get_title(loc="left") or "a panel"
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if not (ax.axison and axis.get_visible()):  # an axes only holding a legend or words
                continue
            drawn = axis._update_ticks()  # the ticks inside the view, as draw() takes them
            labels = [lab for t in drawn for lab in (t.label1, t.label2)]
            found += _clashes(labels, renderer, f"{which} tick labels of {name!r}", gap)
        found += [f"{words!r} inside {name!r} printed over its {which} tick label {tick!r}"
                  for _, words, box in words_in(ax, renderer) for which, tick, tbox in tick_labels(ax, renderer)
                  if overlaps(box, tbox)]
        found += _clashes(ax.texts, renderer, f"words inside {name!r}")
    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    return found + _clashes(titles, renderer, "panel titles")


# Words a reader should not meet: the articles by their seed numbers, versions of software
NOT_PLAIN = {r"\bseed 0\d\d\b": "an article by its seed number:",
             r"(?<![\w.])\d+\.\d+\.\d+(?:[-+~][\w.+~-]*)?": "a version number:"}


def plain_words(fig) -> list[str]:
    """Texts of `fig` that name an article by its seed number or print a version (NOT_PLAIN)."""
    return _matches(fig, NOT_PLAIN)


def text_on_data(fig) -> list[str]:
    """Notes, labels and legends a drawn series crosses, within the panel (marks.data_under)."""
    renderer = renderer_of(fig)
    found = []
    for ax in fig.axes:
        if not ax.axison:
            continue
        drawn = drawn_data(ax, renderer)
        for _, words, box in words_in(ax, renderer):
            hit = data_under(ax, box, drawn, renderer)
            if hit:
                found.append(f"{words!r} printed over the {hit[1]} of {hit[0]!r}")
    return found


def wide_titles(fig) -> list[str]:
    """Titles wider than the canvas (cut at its edge in the saved file)."""
    renderer = renderer_of(fig)
    canvas = fig.bbox
    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    if fig._suptitle is not None:
        titles.append(fig._suptitle)
    boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in titles if t.get_visible() and t.get_text()]
    return [f"title {text!r} is wider than the canvas" for text, b in boxes
            if b.x0 < canvas.x0 - 0.5 or b.x1 > canvas.x1 + 0.5]


def cut_axis_labels(fig) -> list[str]:
    """Axis labels longer than the canvas holds (cut at its edge in the saved file)."""
    renderer = renderer_of(fig)
    canvas = fig.bbox
    boxes = [(lab.get_text(), lab.get_window_extent(renderer)) for ax in fig.axes if ax.axison
             for lab in (ax.xaxis.label, ax.yaxis.label) if lab.get_visible() and lab.get_text()]
    return [f"axis label {text!r} runs off the canvas" for text, b in boxes
            if b.x0 < canvas.x0 - 0.5 or b.x1 > canvas.x1 + 0.5 or b.y0 < canvas.y0 - 0.5 or b.y1 > canvas.y1 + 0.5]


def problems(fig, studies=()) -> list[str]:
    """Every breach of the vocabulary in `fig`, one line each (`studies`: the notebooks it shows)."""
    return (stack_colours(fig) + internal_words(fig, studies) + plain_words(fig) + bars_on_log_axes(fig)
            + hidden_series(fig) + overlapping_texts(fig) + text_on_data(fig) + wide_titles(fig)
            + cut_axis_labels(fig))


def check(fig, name: str, studies=()) -> None:
    found = problems(fig, studies)
    if found:
        raise FigureError(f"figure {name!r}: " + "; ".join(dict.fromkeys(found)))
