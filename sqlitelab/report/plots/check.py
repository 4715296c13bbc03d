"""The figure check: what save_figure refuses, so that the vocabulary (plots.style) holds in every
figure the lab writes.

    problems(fig)          # every breach, one line each ([] when the figure is fine)
    check(fig, name)       # raises FigureError naming them all

What it asserts, mechanically:
- a stack's colour: every artist drawn for a stack (gid `stack:<name>`, style_for) has that
  stack's colour, and no other line, bar or mark takes a stack's colour;
- no internal id in any text of a figure (titles, labels, ticks, legends, captions, notes): the
  ids of the registries themselves — stacks, profiles, scenarios, notebooks and the studies'
  headline experiments — wherever they are not one plain word ("hello", "mix" read as words);
- no bar on a log axis (a bar's length is its value);
- no series drawn entirely under another without a direct label (marks.label_coincident).
"""
from __future__ import annotations

import functools
import re
import textwrap

import matplotlib.colors as mcolors
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from sqlitelab.infra.servers import STACKS, load_profiles
from sqlitelab.load.scenarios import SCENARIOS
from sqlitelab.report.plots.marks import DIRECT_LABEL, coincident_groups
from sqlitelab.report.plots.style import STACK_GID, STACK_STYLES
from sqlitelab.studies import registry


class FigureError(ValueError):
    """A figure that breaks the lab's visual vocabulary (check.problems)."""


@functools.cache
def internal_ids() -> frozenset[str]:
    """Every id a reader should never meet in a figure: stacks, profiles, scenarios, notebooks and
    the experiments the studies declare — those that are not one plain word."""
    ids = set(STACKS) | set(load_profiles()) | set(SCENARIOS) | set(registry.ids())
    for study in registry.studies():
        ids |= set(getattr(study, "HEADLINE_EXPERIMENTS", None) or ())
    return frozenset(i for i in ids if not re.fullmatch(r"[a-z]+", i))


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    for ax in fig.axes:  # tick labels not yet drawn are not Text objects of the figure yet
        for axis in (ax.xaxis, ax.yaxis):
            out += [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
    return out


def internal_words(fig) -> list[str]:
    """Texts of `fig` that name an internal id, with the id."""
    found = []
    for text in dict.fromkeys(_texts(fig)):
        for i in internal_ids():
            if re.search(rf"(?<![\w/+-]){re.escape(i)}(?![\w+-])", text):
                found.append(f"text {text!r} names the internal id {i!r}")
    return found


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
    """Series lines drawn entirely under another with no direct label (marks.label_coincident)."""
    found = []
    for ax in fig.axes:
        labelled = {t.get_text() for t in ax.texts if t.get_gid() == DIRECT_LABEL}
        for group in coincident_groups(ax):
            names = [ln.get_label().lstrip("_") for ln in group]
            if not any(all(textwrap.shorten(n, 44) in t for n in names) for t in labelled):
                found.append(f"{' and '.join(names)} drawn on one line with no direct label")
    return found


def problems(fig) -> list[str]:
    """Every breach of the vocabulary in `fig`, one line each."""
    return stack_colours(fig) + internal_words(fig) + bars_on_log_axes(fig) + hidden_series(fig)


def check(fig, name: str) -> None:
    found = problems(fig)
    if found:
        raise FigureError(f"figure {name!r}: " + "; ".join(dict.fromkeys(found)))
