"""The figures' visual vocabulary, one meaning for each mark in every figure of the collection:

- **colour and marker: a stack** — its stack.toml's `color` and `marker` (STACK_STYLES). No other
  series takes a stack's colour; the figure check (sqlitelab.report.plots.check) refuses one that does.
- **shades of one violet, light to dark: the values of a figure's one other variable**, in their
  order (ORDERED: link delay, deferred then immediate, the buffer's methods...) — a variable
  that is not the stack; **shades of brown: rows per transaction** (RAMPS), which 04 draws
  beside its methods' violet. The load generators of the calibration figure are greys, each its own
  marker (GENERATOR_STYLES).
- **a solid line: measured here.** **Dashed grey with × markers: the article's own numbers or another
  reference** (REFERENCE_COLORS, REFERENCE_DASHES; reference loads and objectives as grey dashed
  lines across the plot). **Dotted: a bound** — computed, in its series' colour (BOUND_STYLE), or
  the machine's own limit measured without the rest of the stack, dark and named in the margin
  (CEILING_STYLE: SQLite alone, HTTP alone; a limit far above the data is named above the plot).
- **a filled marker: SQLite; a hollow marker: Postgres** behind the same stack.
- **a black ring: the generator was the limit; a black square: it plausibly set the pace**
  (LIMIT_MARKS; hatched bars) — black, which no stack and no category uses.
- a second variable beside the stack goes into panels of its own (small multiples), never into
  a dash pattern; shares are drawn as %, numbers with thousands separators, memory in MiB.

SeriesStyles puts them together for the series of one figure."""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import pandas as pd
from matplotlib.lines import Line2D

from sqlitelab.core.vocabulary import link_title, store_title
from sqlitelab.infra.servers import STACKS, knob_value_title, load_profiles, profile_title, stack_title
from sqlitelab.load.scenarios import scenario_title

# The load generators, where a figure compares them (calibration): greys, told apart by their
# markers, so that no generator reads as a stack or as a value of the violet ramp.
GENERATOR_STYLES: dict[str, dict] = {
    "locust": {"color": "#222222", "marker": "o"},
    "loadgen": {"color": "#888888", "marker": "s"},
    "wrk": {"color": "#BBBBBB", "marker": "^"},
}
# The values of a figure's one variable that is not the stack (rows per transaction, link delay,
# buffer methods, transaction modes...): shades of one violet, light to dark in the values'
# natural order (ordered_colours picks as many as a figure needs, spread over the ramp).
ORDERED = ["#C5BDE6", "#A093D1", "#7D6BBB", "#5C48A3", "#3F2C85", "#271866"]
# A variable with a ramp of its own, so that a shade means one thing in a notebook: rows per
# transaction in browns (04 draws it beside its methods, which take the violet).
RAMPS = {"rows_per_txn": ["#E6D2B5", "#CDAA7D", "#A98054", "#855F34", "#5E421F", "#3B2912"]}
# A spare colour for an extra stack whose stack.toml declares none (never a category's).
CATEGORY_COLORS = ["#999933", "#56B4E9", "#882255", "#44AA99", "#E69F00", "#777777"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "h", "<", ">", "p", "*"]


class _StackStyles(Mapping):
    """One colour and one marker per stack, the same in every figure: what its stack.toml
    declares (sqlitelab.infra.servers.STACKS, read live: an extra stack registered later is in
    it), in STACKS' order. The bundled stacks' are Okabe–Ito and Tol colours, safe for
    colour-blind readers, each with a marker of its own, so that a stack is told apart in grey
    too; LIMIT_MARKS' rings are black. A stack that declares none (an extra
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
MEASURED = "-"  # a line measured here: always solid
BOUND_STYLE = {"linestyle": (0, (1, 1.6)), "linewidth": 1.2, "marker": None}  # dotted: a computed bound
# dotted dark: the machine's own limit (analysis.machine_limits), drawn across a chart's panels
CEILING_STYLE = {"color": "#222222", "linestyle": (0, (1, 1.6)), "linewidth": 1.3, "zorder": 4}
CEILING_STRETCH = 2.5  # a limit above this many times a chart's highest data is named, not drawn
# The caps of an interval's bar, in points each side: wider than a marker (the style's 5-pt
# markers), so that an interval narrower than its point still shows above and below it.
INTERVAL_CAPSIZE = 5
# An interval drawn over a bar: near-black, outlined in white, so that it shows on the darkest
# bar's face and on the background above the lightest alike.
BAR_INTERVAL = {"ecolor": "#111111", "linewidth": 1.1, "capsize": INTERVAL_CAPSIZE, "zorder": 5}
KEY_GREY = "#555555"  # legend entries that stand for a mark whatever its colour (hollow: Postgres)


def ordered_colours(n: int, ramp: list[str] = ORDERED) -> list[str]:
    """`n` shades of `ramp` (ORDERED's violet unless told), light to dark, spread over it (two:
    its ends' neighbours)."""
    if n <= 0:
        return []
    if n == 1:
        return [ramp[3]]
    idx = [round(1 + i * (len(ramp) - 2) / (n - 1)) if n <= len(ramp) - 1 else i for i in range(n)]
    return [ramp[min(i, len(ramp) - 1)] for i in idx]


STACK_GID = "stack:"  # the gid prefix of every artist drawn for a stack (stack_gid)


def style_for(server: str, database: str | None = None) -> dict:
    """The colour and marker of a stack, as keyword arguments for `ax.plot`. `database`: the
    store behind it — SQLite (None or "sqlite") fills the marker; another database (a later
    Postgres variant) keeps the stack's colour and marker, hollow."""
    if server not in STACK_STYLES:
        raise ValueError(f"no style for stack {server!r}: it is no stack of "
                         f"sqlitelab.infra.servers.STACKS (known: {', '.join(STACK_STYLES)})")
    s = STACK_STYLES[server]
    fill = s["color"] if database in (None, "sqlite") else "white"
    return {"color": s["color"], "marker": s["marker"], "markerfacecolor": fill,
            "gid": stack_gid(server)}


def stack_gid(server: str) -> str:
    """The id an artist drawn for a stack carries (`stack:<name>`): the figure check finds the
    stack's series by it and holds them to the stack's colour."""
    return f"{STACK_GID}{server}"


@functools.cache
def _profile_order() -> tuple[str, ...]:
    return tuple(load_profiles())


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


def colours_for(values, column: str | None = None) -> dict:
    """Colour and marker of each value: a stack's or a generator's own, anything else a shade of
    the ramp of the `column` they are values of (RAMPS; ORDERED's violet for any other) in the
    natural order of the values given (light to dark)."""
    values = sorted(dict.fromkeys(values), key=_order)
    out, others = {}, [v for v in values if _known_style(v) is None]
    shades = ordered_colours(len(others), RAMPS.get(column, ORDERED))
    for v in values:
        if (s := _known_style(v)) is None:
            i = others.index(v)
            s = {"color": shades[i], "marker": MARKERS[i % len(MARKERS)], "markerfacecolor": shades[i]}
        out[v] = s
    return out


def value_title(column: str, value) -> str:
    """A series' value in plain words for legends and labels: a stack's title (stack.toml), a
    profile's (profiles.toml); any other value as it is."""
    if column == "server":
        return stack_title(value)
    if column == "profile":
        return profile_title(value)
    if column == "scenario":
        return scenario_title(value)
    if column == "database":
        return {"sqlite": "SQLite", "postgres": "Postgres"}.get(str(value), str(value))
    if column == "store":
        return store_title(value)
    if column == "link":
        return link_title(value)
    if column == "synchronous":
        return f"synchronous={str(value).upper()}"
    if column == "rows_per_txn":
        return f"{value} rows per transaction"
    return knob_value_title(column, value)  # a knob's value (shared.toml's titles), else as it is


class SeriesStyles:
    """Colour and marker of every series of a figure, from the columns that name them: the
    stack's (`server` among the columns), else the generator's, else a shade of ORDERED per value
    of the one other column. `database` only hollows the marker (Postgres). Every line is solid:
    a second variable beside the stack is drawn in panels (line_chart's `panels`), and a series
    key with one is refused."""

    def __init__(self, frame: pd.DataFrame, series: list[str]):
        self.series = list(series)
        rest = [c for c in self.series if c != "database"]
        if "server" in rest:
            colour = ["server"]
        elif "generator" in rest:
            colour = ["generator"]
        else:
            colour = rest[:1] or list(self.series)
        extra = [c for c in rest if c not in colour]
        if extra:
            raise ValueError(f"series {self.series}: {', '.join(extra)} beside {colour[0]} has no mark "
                             "of its own in the lab's vocabulary; draw it in panels (panels=...)")
        self.colour_cols = colour
        keys = frame[self.series].drop_duplicates()
        self.colour_values = sorted({self._part(k, colour) for k in keys.itertuples(index=False)},
                                    key=lambda t: [_order(v) for v in t])
        self.databases = sorted({str(d) for d in frame["database"].dropna()}, key=lambda d: d != "sqlite") \
            if "database" in self.series else []
        singles = colours_for([t[0] for t in self.colour_values], column=colour[0])
        self._colour = {t: singles[t[0]] for t in self.colour_values}

    def _part(self, key, cols) -> tuple:
        d = dict(zip(self.series, key))
        return tuple(d[c] for c in cols)

    def __call__(self, key) -> dict:
        """`ax.plot` keyword arguments of the series `key` (its values of `series`, in order)."""
        key = key if isinstance(key, tuple) else (key,)
        out = {**self._colour[self._part(key, self.colour_cols)], "linestyle": MEASURED}
        if dict(zip(self.series, key)).get("database", "sqlite") != "sqlite":
            out["markerfacecolor"] = "white"  # another database than SQLite: hollow (style_for)
        return out

    @staticmethod
    def label(key) -> str:
        """The series' key as stored (`go-nethttp · postgres`): a drawn line's own label."""
        key = key if isinstance(key, tuple) else (key,)
        return " · ".join(str(v) for v in key)

    def title(self, key, cols: list[str] | None = None) -> str:
        """The series `key` (its values of `cols`, all the series' columns by default) in plain
        words, for a legend: `Go · net/http, Postgres` (value_title)."""
        key = key if isinstance(key, tuple) else (key,)
        return ", ".join(value_title(c, v) for c, v in zip(cols or self.series, key))

    def handles(self) -> list:
        """Legend entries: one per colour (stack or value), then one per database when there are
        several (filled SQLite, hollow Postgres, in grey)."""
        out = [Line2D([], [], **s, linestyle=MEASURED, label=self.title(t, self.colour_cols))
               for t, s in self._colour.items()]
        if len(self.databases) > 1:
            for d in self.databases:
                out.append(Line2D([], [], color=KEY_GREY, marker="o", linestyle=MEASURED,
                                  markerfacecolor=KEY_GREY if d == "sqlite" else "white",
                                  label=value_title("database", d)))
        return out


# The articles' own numbers, drawn on the same axes as ours: greys, dashed, "x" markers.
REFERENCE_COLORS = ["#111111", "#666666", "#999999", "#444444"]
REFERENCE_DASHES = [(0, (5, 2)), (0, (9, 3)), (0, (3, 1.5)), (0, (7, 2, 2, 2))]  # dashes, never dots (bounds)


# How a point whose generator was the limit, or plausibly set the pace, is drawn: a ring
# around it (lines) or a hatch (bars). Its throughput is a lower bound for the server's.
LIMIT_MARKS = {
    "generator_bound": {"label": "load generator was the limit", "color": "#000000", "marker": "o",
                        "linestyle": "-", "hatch": "//"},
    "generator_influenced": {"label": "load generator may have set the pace", "color": "#000000",
                             "marker": "s", "linestyle": "-", "hatch": "xx"},
}
