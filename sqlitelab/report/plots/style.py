"""The figures' visual vocabulary: one colour and marker per stack (read from each stack's
stack.toml) and per load generator, one dash per profile (in servers/profiles.toml's order),
colours for any other category, the greys of an article's own numbers and the rings and hatches
of generator-limited points; SeriesStyles puts them together for the series of one figure."""
from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Mapping

import pandas as pd
from matplotlib.lines import Line2D

from sqlitelab.infra.servers import STACKS, load_profiles, profile_title, stack_title

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


def value_title(column: str, value) -> str:
    """A series' value in plain words for legends and labels: a stack's title (stack.toml), a
    profile's (profiles.toml); any other value as it is."""
    if column == "server":
        return stack_title(value)
    if column == "profile":
        return profile_title(value)
    return str(value)


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
        """The series' key as stored (`go-nethttp · rails71`): a drawn line's own label."""
        key = key if isinstance(key, tuple) else (key,)
        return " · ".join(str(v) for v in key)

    def title(self, key, cols: list[str] | None = None) -> str:
        """The series `key` (its values of `cols`, all the series' columns by default) in plain
        words, for a legend: `Go · net/http, Rails 7.1 defaults` (value_title)."""
        key = key if isinstance(key, tuple) else (key,)
        return ", ".join(value_title(c, v) for c, v in zip(cols or self.series, key))

    def handles(self) -> list:
        """Legend entries that read at a glance: one per colour (stack) and one per dash
        (profile), rather than one per combination."""
        if self.colour_cols == self.dash_cols:  # one key drawn twice: one entry each
            return [Line2D([], [], **self._colour[t], linestyle=self._dash[t],
                           label=self.title(t, self.colour_cols)) for t in self.colour_values]
        many_c, many_d = len(self.colour_values) > 1, len(self.dash_values) > 1
        only_dash = self._dash[self.dash_values[0]] if self.dash_values else "-"
        out = []
        if many_c or not many_d:
            for t, s in self._colour.items():
                out.append(Line2D([], [], **s, linestyle="-" if many_d else only_dash,
                                  label=self.title(t, self.colour_cols)))
        if many_d:
            only = None if many_c else self._colour[self.colour_values[0]]
            for t, dash in self._dash.items():
                kw = {**only} if only else {"color": KEY_GREY}
                if only and self.dash_cols == ["database"] and t != ("sqlite",):
                    kw["markerfacecolor"] = "white"
                out.append(Line2D([], [], **kw, linestyle=dash, label=self.title(t, self.dash_cols)))
        return out


# The articles' own numbers, drawn on the same axes as ours: greys, dashed, "x" markers.
REFERENCE_COLORS = ["#111111", "#666666", "#999999", "#444444"]
REFERENCE_DASHES = [(0, (5, 2)), (0, (2, 2)), (0, (6, 2, 1, 2)), (0, (1, 1))]


# How a point whose generator was the limit, or plausibly set the pace, is drawn: a ring
# around it (lines) or a hatch (bars). Its throughput is a lower bound for the server's.
LIMIT_MARKS = {
    "generator_bound": {"label": "generator-bound", "color": "#cc0000", "marker": "o",
                        "linestyle": "-", "hatch": "//"},
    "generator_influenced": {"label": "generator-influenced", "color": "#e08000", "marker": "s",
                             "linestyle": "--", "hatch": "xx"},
}
