"""Notebook 01's throughput figure (fast tier: synthetic points, no server, no load): a level
measured in two runs or more carries the 95 % interval of its mean over them as a bar in its
stack's colour, a lower end below zero drawn at zero; a level of one run has no bar; the caption
says what the bars are only when one is drawn."""
from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from sqlitelab.core import intervals  # noqa: E402
from sqlitelab.notebooks import linear_writes  # noqa: E402
from sqlitelab.report import plots  # noqa: E402

# ruby-puma: the article's stack, three runs a level but one at 8 users; go-nethttp one run a
# level; at 16 users Puma's runs spread so far that the interval reaches below zero
PUMA = {1: [3597.0, 3440.0, 3413.0], 2: [4700.0, 2004.0, 4485.0], 8: [207.0], 16: [280.0, 893.0, 1835.0]}
GO = {1: [5252.0], 2: [9979.0], 8: [12348.0], 16: [11814.0]}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def points(stacks=(("ruby-puma", PUMA), ("go-nethttp", GO))) -> pd.DataFrame:
    return pd.DataFrame([{"server": server, "profile": "rails71", "users": users, "repeat": i + 1,
                          "scenario": "rails-writes", "rps": rps, "errors": 0, "busy_errors": 0,
                          "machine": "test box", "server_pinning": "0", "generator_pinning": "1"}
                         for server, levels in stacks for users, runs in levels.items()
                         for i, rps in enumerate(runs)])


def drawn_bars(fig, server: str) -> dict[float, tuple[float, float]]:
    """The interval bars drawn for `server`: users -> (bottom, top) of each bar."""
    out = {}
    for c in fig.axes[0].containers:
        if isinstance(c, matplotlib.container.ErrorbarContainer):
            for col in c.lines[2]:  # the bars' line collections
                if col.get_gid() == plots.style_for(server)["gid"]:
                    for seg in col.get_segments():
                        (x0, y0), (x1, y1) = seg
                        assert x0 == x1
                        out[float(x0)] = (min(y0, y1), max(y0, y1))
    return out


def caption(fig) -> str:
    return "\n".join(t.get_text() for t in fig.texts)


def test_a_level_of_several_runs_carries_its_t_interval_and_one_run_none():
    df = points()
    fig = plots.throughput_chart(df, caption="a test box", runs=linear_writes.runs_of(df))
    bars = drawn_bars(fig, "ruby-puma")
    assert set(bars) == {1.0, 2.0, 16.0}  # not 8 users: one run there
    for users in (1, 2):
        iv = intervals.mean_interval(linear_writes.level_runs(df, "ruby-puma", "rails71", users))
        assert iv.n == 3 and iv.low > 0
        assert bars[users] == pytest.approx((iv.low, iv.high))  # the bar spans t's interval over the runs
    wide = intervals.mean_interval(PUMA[16])
    assert wide.low < 0 and bars[16.0] == pytest.approx((0.0, wide.high))  # a rate is never negative
    assert drawn_bars(fig, "go-nethttp") == {}  # a stack of one run a level: no bar at all
    # each point is the mean over its runs (one run: its value), in the stack's own colour
    line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "_Ruby · Puma")
    assert dict(zip(line.get_xdata(), line.get_ydata())) == pytest.approx(
        {u: float(np.mean(r)) for u, r in PUMA.items()})
    for c in fig.axes[0].containers:
        for col in c.lines[2]:
            assert matplotlib.colors.to_hex(col.get_color()[0]) == plots.STACK_STYLES["ruby-puma"]["color"].lower()
    words = caption(fig)
    assert "a test box" in words
    assert "Bars: 95 % interval of each point's mean over its 3 runs (Student's t)" in words
    assert "drawn from zero where it reaches below" in words and "a point of one run has none" in words
    assert plots.problems(plots.lay_out(fig)) == []  # what save_figure refuses: nothing


def test_no_bar_and_no_words_when_every_level_ran_once():
    df = points(stacks=(("go-nethttp", GO),))
    fig = plots.throughput_chart(df, caption="a test box", runs=linear_writes.runs_of(df))
    assert drawn_bars(fig, "go-nethttp") == {}
    assert not any(isinstance(c, matplotlib.container.ErrorbarContainer) for c in fig.axes[0].containers)
    assert caption(fig) == "a test box"


def test_no_words_of_clipping_where_no_interval_reaches_below_zero():
    df = points(stacks=(("ruby-puma", {u: r for u, r in PUMA.items() if u in (1, 2)}),))
    fig = plots.throughput_chart(df, runs=linear_writes.runs_of(df))
    words = caption(fig)
    assert "over its 3 runs" in words and "drawn from zero" not in words and "one run" not in words
