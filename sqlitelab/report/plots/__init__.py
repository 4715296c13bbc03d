"""Figures: one style, one deterministic save, the standard charts.

    plt.style.use("sqlitelab.report.blog")
    fig = throughput_chart(df, caption=caption_for(df))
    save_figure(fig, "throughput", notebook=this)   # the notebook's module (sqlitelab.notebooks)

The visual vocabulary (one meaning per mark in every figure) is declared once, in
plots.style's docstring: a colour and marker per stack (STACK_STYLES, style_for), shades of one
violet for a figure's other variable (ORDERED; browns for rows per transaction, RAMPS), solid
for measured, dashed grey for an article or a reference, dotted for a computed bound, hollow for
Postgres, black rings for generator-limited points; a second variable beside the stack goes
into panels. save_figure refuses a figure whose
legend is clipped (legends) or that breaks the vocabulary (check).

The package's public face: `plots.X` for every name below, whichever module holds it —
style (the visual vocabulary), check (what save_figure refuses), legends (legends that fit the canvas), figure (new figures,
captions, save_figure), tables (summarise, status_table), marks (what several charts draw on
their axes), line_charts, bar_charts, distributions, comparison (the chart kinds).
"""
from __future__ import annotations

from sqlitelab.report.plots.bar_charts import CAPACITY_WIDTH_IN, bar_chart, capacity_chart, dot_chart, pair_chart
from sqlitelab.report.plots.check import FigureError, internal_ids, internal_patterns, problems
from sqlitelab.report.plots.comparison import comparison_chart
from sqlitelab.report.plots.distributions import latency_ecdf
from sqlitelab.report.plots.figure import (caption_for, lay_out, new_figure, new_panels, reading, save_figure,
                                           set_caption, use_style)
from sqlitelab.report.plots.legends import (ClippedLegendError, clipped_legends, fit_legends,
                                            panel_legend)
from sqlitelab.report.plots.line_charts import (PERCENTILE_NAMES, TIMELINE_VALUES, calibration_chart,
                                                hockey_stick_chart, latency_chart, line_chart,
                                                throughput_chart, timeline_chart)
from sqlitelab.report.plots.marks import (PlainLogFormatter, draw_reference, label_coincident,
                                          mark_limits)
from sqlitelab.report.plots.style import (BOUND_STYLE, CATEGORY_COLORS, GENERATOR_STYLES, KEY_GREY,
                                          LIMIT_MARKS, MARKERS, ORDERED, RAMPS, REFERENCE_COLORS,
                                          REFERENCE_DASHES, STACK_STYLES, SeriesStyles, _order,
                                          colours_for, ordered_colours, style_for, value_title)
from sqlitelab.report.plots.tables import plain_table, status_table, summarise

__all__ = [
    # style: the visual vocabulary
    "GENERATOR_STYLES", "CATEGORY_COLORS", "MARKERS", "STACK_STYLES", "ORDERED", "RAMPS", "KEY_GREY",
    "REFERENCE_COLORS", "REFERENCE_DASHES", "BOUND_STYLE", "LIMIT_MARKS", "style_for",
    "ordered_colours", "colours_for", "value_title", "SeriesStyles",
    "_order",  # where a value goes in a legend: STACKS' order (tests/test_stacks.py reads it)
    # marks
    "draw_reference", "mark_limits", "label_coincident", "PlainLogFormatter",
    # check: what save_figure refuses
    "FigureError", "problems", "internal_ids", "internal_patterns",
    # legends
    "panel_legend", "clipped_legends", "fit_legends", "ClippedLegendError",
    # figure
    "use_style", "new_figure", "new_panels", "set_caption", "reading", "save_figure", "lay_out", "caption_for",
    # tables
    "summarise", "status_table",
    # the chart kinds
    "throughput_chart", "PERCENTILE_NAMES", "latency_chart", "line_chart",
    "calibration_chart", "TIMELINE_VALUES", "timeline_chart", "hockey_stick_chart",
    "bar_chart", "dot_chart", "CAPACITY_WIDTH_IN", "capacity_chart", "latency_ecdf",
    "comparison_chart",
]
