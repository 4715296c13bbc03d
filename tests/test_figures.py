"""Figures that read at a glance: every chart function drawn from realistic synthetic data —
every stack, several profiles, long labels — with one colour and marker per stack in every
figure, a second variable in panels, every legend inside the canvas, and the figure check
(plots.check) refusing what breaks the vocabulary."""
from __future__ import annotations

import functools
import json
import re
import textwrap

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from sqlitelab.notebooks import studies
from sqlitelab.report import plots  # noqa: E402
from sqlitelab.report.plots import marks  # noqa: E402
from sqlitelab.core import config, intervals
from sqlitelab.core.vocabulary import link_label, link_title
from sqlitelab.infra import servers
from sqlitelab import notebooks
from sqlitelab.notebooks import capacity as capacity_notebook

STACKS = list(servers.STACKS)
PROFILES = ["rails71", "rails8", "rails71-retries+rails-dev"]
LEVELS = [1, 2, 4, 8, 10, 16, 32, 64, 128, 256]
LONG = "a deliberately long label that would run off a narrow figure"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def points(stacks=STACKS, profiles=PROFILES, levels=LEVELS, scenario="rails-writes") -> pd.DataFrame:
    """Two repeats of every level, a few generator-bound and generator-influenced points."""
    from hdrh.histogram import HdrHistogram
    rng = np.random.default_rng(7)
    rows = []
    for si, server in enumerate(stacks):
        for pi, profile in enumerate(profiles):
            for users in levels:
                for rep in (1, 2):
                    rps = 400 * (si + 1) * min(users, 16) ** 0.5 * (1 + 0.1 * pi) + rep
                    p50 = 0.3 * (si + 1) * users ** 0.8
                    h = HdrHistogram(1, 100_000_000, 3)
                    for v in rng.lognormal(np.log(p50 * 1000), 0.6, 200):
                        h.record_value(int(max(v, 1)))
                    rows.append({
                        "server": server, "profile": profile, "users": users, "repeat": rep,
                        "scenario": scenario, "rps": rps, "mean_ms": p50 * 1.2, "p50_ms": p50,
                        "p90_ms": p50 * 2, "p95_ms": p50 * 3, "p99_ms": p50 * 4, "p999_ms": p50 * 6,
                        "max_ms": p50 * 9, "errors": 0, "busy_errors": 0,
                        "generator_bound": server == "rust-axum" and users >= 64,
                        "generator_influenced": server == "go-nethttp" and users >= 32,
                        "audit_ok": True, "status_counts": json.dumps({"200": 10}),
                        "machine": "test box", "server_pinning": "0", "generator_pinning": "1",
                        "generator": "locust", "txn_mode": "deferred" if pi % 2 == 0 else "immediate",
                        "busy": "busy_timeout:5000", "write_path": "pool", "server_processes": 1,
                        "server_threads": 4, "histogram": h.encode().decode(),
                    })
    return pd.DataFrame(rows)


def estimate() -> pd.DataFrame:
    """capacity_notebook.estimate over seven workloads of four notebooks, like notebook 06's."""
    parts = []
    for nb, scen, prof in (("01-linear-writes", "rails-writes", ["rails71"]),
                           ("02-busy-errors", "metrics-writes", ["rails71", "rails8"]),
                           ("03-read-write-mix", "mix", ["single-writer"]),
                           *(("05-single-machine", s, ["go-seed004"])
                             for s in ("hello", "user-read", "user-page", "user-update"))):
        # each notebook's headline sweep (01's unnamed main sweep is stored without one)
        experiment = {"01-linear-writes": None, "02-busy-errors": "profiles",
                      "03-read-write-mix": "article"}.get(nb, scen)
        parts.append(points(profiles=prof, levels=[1, 8, 64, 256], scenario=scen).assign(
            notebook=nb, experiment=experiment))
    return capacity_notebook.estimate(pd.concat(parts, ignore_index=True), slo_p99_ms=100)


@functools.cache
def _estimate() -> pd.DataFrame:
    return estimate()


@functools.cache
def _points() -> pd.DataFrame:
    return points()


def charts() -> dict:
    """Every chart function, drawn as the notebooks draw them (and harder: long labels)."""
    df = _points()
    one = df[df.profile == "rails71"]
    one_p = one.copy()
    ref = pd.DataFrame({"users": [1, 2, 4, 8, 16], "rps": [700, 1000, 1900, 2600, 600]})
    article = {"ref": ref, "x": "users", "y": "rps", "label": "article: Rails on Puma 10×3, M1 Max (hey)"}
    busy = df.assign(busy_share=df["users"] / 1000.0)
    endpoints = ["hello", "user-read", "user-page", "user-update"]
    bars = pd.DataFrame([{"server": s, "scenario": e, "rps": 1500.0 * (i + 1) + 700 * j,
                          "generator_bound": i == 1 and j == 0, "generator_influenced": i == 2 and j == 1}
                         for i, s in enumerate(STACKS) for j, e in enumerate(endpoints)])
    bars = pd.concat([pd.DataFrame({"server": "article: Go, M1 (8 cores)", "scenario": endpoints,
                                    "rps": [9000.0, 6000, 4000, 2000], "generator_bound": False,
                                    "generator_influenced": False}), bars], ignore_index=True)
    summary = df.groupby(["server", "profile", "txn_mode"], as_index=False)["busy_errors"].sum()
    cap = _estimate()
    refs = capacity_notebook.reference_loads()
    cal_points = pd.DataFrame([{"generator": g, "endpoint": "delay", "users": u, "gen_util": u / 200,
                                "rps_ratio": 1 - u / 1000 * i, "p99_ratio": 1 + u / 500 * i}
                               for i, g in enumerate(["locust", "loadgen"]) for u in (4, 16, 64, 160)])
    calibrations = pd.DataFrame([{"generator": g, "machine": "test box", "target": "go-nethttp",
                                  "server_pinning": "0", "generator_pinning": "1", "delay_ms": 10,
                                  "reference": "wrk", "tolerance": 0.1, "p99_tolerance": 0.25,
                                  "onset_util": 0.6 if g == "locust" else None}
                                 for g in ("locust", "loadgen")])
    return {
        "throughput": lambda: plots.throughput_chart(df, caption=plots.caption_for(df) + " · " + LONG,
                                                     reference=article),
        "throughput-one-profile": lambda: plots.throughput_chart(one, caption="c"),
        "latency": lambda: plots.latency_chart(one_p, title=LONG, caption="c"),
        "busy-share": lambda: plots.line_chart(busy, x="users", y="busy_share", series=["server"], panels="profile",
                                               percent=True, title=LONG, xlabel="users", ylabel="share",
                                               caption="c"),
        "line-long-labels": lambda: plots.line_chart(
            df.assign(method=df.profile.map(servers.profile_title) + " · " + LONG), x="users", y="rps", series=["server"], panels="method",
            title="t", xlabel="x", ylabel="y", logx=True, reference=article,
            ref_lines={"Twitter 2007": 600}),
        "ecdf": lambda: plots.latency_ecdf(df[df.server == "ruby-puma"], "txn_mode", panels="profile",
                                           title="POST /metrics latency", caption="c"),
        "rps-bars": lambda: plots.bar_chart(bars, category="scenario", value="rps", series="server",
                                            ref_lines={"Twitter 6K tweets/s": 6000, "Yahoo 1,388 req/s": 1388},
                                            reference_series="article: Go, M1 (8 cores)", title="rps",
                                            ylabel="requests/s", caption="c"),
        "horizontal-bars": lambda: plots.bar_chart(
            summary, category=["server", "profile"], value="busy_errors", series="txn_mode", hatch_col=None, horizontal=True, title="t",
            ylabel="busy", caption="c", ref_lines={LONG: 3, "Shopify 2013": 5, "Twitter 2007": 4}),
        "capacity": lambda: plots.capacity_chart(
            capacity_notebook.chart_frame(cap, 100, studies()), title="Capacity at a latency objective vs the naive peak",
            caption="c", ref_lines={r.name: r.rps for r in refs.itertuples()}, users=capacity_notebook.users_axis()),
        "ratio-dots": lambda: plots.dot_chart(
            bars[bars.server.isin(STACKS)].assign(ratio=bars.rps / 1000), category="scenario", value="ratio",
            series="server", title="t", xlabel="x", logx=True, ref_value=("as fast", 1.0), caption="c"),
        "rps-dots": lambda: plots.dot_chart(
            bars, category="scenario", value="rps", series="server", logx=True, limits=True,
            ref_lines={"Twitter's tweets": 6000, "Yahoo's visits": 1388},
            ceilings={"SQLite alone: point reads": 30000, "HTTP alone: wrk on /hello (Rust · Axum)": 28000},
            reference_series="article: Go, M1 (8 cores)", title="rps", xlabel="requests/s", caption="c"),
        "calibration": lambda: plots.calibration_chart(cal_points, calibrations),
    }


def legends(fig) -> list:
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


@pytest.mark.parametrize("name", list(charts()))
def test_every_legend_lies_inside_the_canvas(name):
    """Every chart: its legends inside the canvas, and no problem plots.problems finds (each
    stack's artists in its colour and no other artist in it, ...)."""
    fig = charts()[name]()
    assert plots.problems(plots.lay_out(fig)) == [], name
    fig.canvas.draw()
    found = legends(fig)
    assert found, f"{name}: no legend"
    for lg in found:
        e = lg.get_window_extent()
        assert (e.x0 >= fig.bbox.x0 - 1 and e.y0 >= fig.bbox.y0 - 1 and e.x1 <= fig.bbox.x1 + 1
                and e.y1 <= fig.bbox.y1 + 1), f"{name}: legend {e.extents} outside {fig.bbox.extents}"
    assert plots.clipped_legends(fig) == []


def test_every_stack_has_one_style_of_its_own():
    assert set(servers.STACKS) <= set(plots.STACK_STYLES), "a stack in STACKS has no style"
    styles = [plots.style_for(s) for s in servers.STACKS]
    assert len({s["color"] for s in styles}) == len(styles)
    assert len({s["marker"] for s in styles}) == len(styles)
    limit_colours = {m["color"].lower() for m in plots.LIMIT_MARKS.values()}
    assert not {s["color"].lower() for s in styles} & limit_colours
    with pytest.raises(ValueError, match="no style"):
        plots.style_for("cobol-cics")
    # room for another database behind the same stack: same colour and marker, hollow
    pg = plots.style_for("python-fastapi", database="postgres")
    assert pg["color"] == styles[0]["color"] and pg["markerfacecolor"] == "white"


def _rgba(c):
    return mcolors.to_rgba(c)


def _line_colours(fig) -> dict:
    """Legend label → colour of the legend's line entries."""
    out = {}
    for lg in legends(fig):
        for h, t in zip(lg.legend_handles, lg.get_texts()):
            if hasattr(h, "get_color") and not hasattr(h, "get_facecolor"):
                out[t.get_text()] = _rgba(h.get_color())
    return out


def test_a_stack_has_the_same_colour_in_every_figure():
    want = {s: _rgba(plots.STACK_STYLES[s]["color"]) for s in STACKS}
    df = _points()
    # different subsets and orders of stacks: the colour follows the stack, not the series index
    for stacks in (STACKS, ["rust-axum", "go-nethttp"], ["ruby-puma", "go-nethttp", "python-fastapi"]):
        sub = df[df.server.isin(stacks) & (df.profile == "rails71")]
        for fig in (plots.throughput_chart(sub), plots.latency_chart(sub),
                    plots.line_chart(sub, x="users", y="rps", series=["server"], title="t", xlabel="x",
                                     ylabel="y")):
            got = _line_colours(fig)  # the legend names a stack in plain words (stack.toml's title)
            assert {s: got[servers.stack_title(s)] for s in stacks} == {s: want[s] for s in stacks}
            for ax in fig.axes:  # the drawn lines too, not only the legend: each carries its stack
                for line in ax.get_lines():
                    gid = line.get_gid() or ""
                    if gid.startswith("stack:") and line.get_linestyle() != "None":  # caps: markers only
                        assert _rgba(line.get_color()) == want[gid[6:]]
            assert plots.problems(plots.lay_out(fig)) == []
    bars = df[(df.profile == "rails71") & (df.users == 16)].assign(path="pool")
    fig = plots.bar_chart(bars, category="path", value="rps", series="server", title="t", ylabel="y")
    patches = {p.get_label(): p.get_facecolor() for p in fig.axes[0].get_legend().legend_handles}
    assert {s: patches[servers.stack_title(s)] for s in STACKS} == want
    # every chart's artists checked by plots.problems: test_every_legend_lies_inside_the_canvas
    fig = charts()["capacity"]()
    drawn = {ln.get_gid()[6:]: _rgba(ln.get_color()) for ax in fig.axes for ln in ax.get_lines()
             if (ln.get_gid() or "").startswith("stack:")}
    assert drawn == want


def test_a_second_variable_goes_into_panels_never_a_dash():
    df = _points()
    fig = plots.throughput_chart(df)  # three profiles: three panels, each titled in plain words
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert [t.replace("\n", " ") for t in titles] == [servers.profile_title(p) for p in
                                                      sorted(df.profile.unique(), key=plots._order)]
    for ax in fig.axes:  # every measured line solid
        assert {ln.get_linestyle() for ln in ax.get_lines()
                if (ln.get_gid() or "").startswith("stack:")} <= {"-", "None"}  # "None": the error bars' caps
    with pytest.raises(ValueError, match="panels"):
        plots.SeriesStyles(df, ["server", "profile"])
    with pytest.raises(ValueError, match="one profile"):
        plots.latency_chart(df)
    # Postgres: the same colour and marker, hollow; SQLite filled
    both = df[df.profile == "rails71"].assign(database="sqlite")
    both = pd.concat([both, both.assign(database="postgres", rps=both.rps / 2)])
    styles = plots.SeriesStyles(both, ["server", "database"])
    assert styles(("go-nethttp", "postgres"))["markerfacecolor"] == "white"
    assert styles(("go-nethttp", "sqlite"))["markerfacecolor"] == plots.STACK_STYLES["go-nethttp"]["color"]
    assert styles(("go-nethttp", "postgres"))["linestyle"] == styles(("go-nethttp", "sqlite"))["linestyle"] == "-"


def test_other_categories_keep_their_colours_too():
    gens = plots.colours_for(["wrk", "loadgen", "locust"])
    assert {g: s["color"] for g, s in gens.items()} == {g: s["color"] for g, s in plots.GENERATOR_STYLES.items()}
    # rows per transaction: the same colour whether written 10 or "10 rows", whatever else is drawn
    a = plots.colours_for([100, 10, 25])
    b = plots.colours_for(["25 rows", "10 rows", "100 rows"])
    assert [a[k]["color"] for k in (10, 25, 100)] == [b[k]["color"] for k in ("10 rows", "25 rows", "100 rows")]
    stack_colours = {s["color"] for s in plots.STACK_STYLES.values()}
    assert not {s["color"] for s in a.values()} & stack_colours


def test_reference_lines_are_named_clear_of_the_bars():
    fig = charts()["rps-bars"]()
    fig.canvas.draw()
    ax = fig.axes[0]
    bar_z = max(p.get_zorder() for p in ax.patches)
    names = [t for t in ax.texts if "Twitter" in t.get_text() or "Yahoo" in t.get_text()]
    assert len(names) == 2
    boxes = [t.get_window_extent() for t in names]
    for box in boxes:  # in the right margin, inside the canvas: never over a bar
        assert box.x0 >= ax.bbox.x1 and box.x1 <= fig.bbox.x1
    assert not boxes[0].overlaps(boxes[1])  # 1,388 and 6,000 are close on this scale
    lines = [line for line in ax.get_lines() if line.get_ydata()[0] in (6000, 1388)]
    assert len(lines) == 2 and all(line.get_zorder() > bar_z for line in lines)


@pytest.mark.parametrize("rps", [1124.0, 1546.0])
def test_a_capacity_chart_of_one_stack_keeps_its_workload_name_clear_of_the_reference_lines(rps, tmp_path):
    """06 over one stack's one level (its notebook test's sweep): the workload's name, on its own
    row, stays clear of the reference loads' lines below it whatever the top axis, the legend and
    the caption take (at 1,546/s, a generator's ring in the legend, the top axis's label left
    each row 0.1 in, and the name was printed over Twitter's line: the figure check refused it)."""
    one = points(stacks=["go-nethttp"], profiles=["rails71"], levels=[1])
    one = one[one["repeat"] == 1].assign(rps=rps, notebook="01-linear-writes", experiment=None,
                                         generator_bound=True)  # its legend's fourth row
    frame = capacity_notebook.chart_frame(capacity_notebook.estimate(one, slo_p99_ms=100), 100, studies())
    refs = capacity_notebook.reference_loads()
    fig = plots.capacity_chart(frame, title="Capacity at a latency objective vs the naive peak, in daily users",
                               caption="2 cores, 23.5 GiB · quick scale · latency objective p99 ≤ 100 ms",
                               ref_lines={r.name: r.rps for r in refs.itertuples()},
                               users=capacity_notebook.users_axis(35, 4))
    assert plots.save_figure(fig, "capacity", figures_dir=tmp_path)  # checked: no words over a line


def test_a_capacity_with_repeated_runs_shows_its_interval_and_one_run_shows_none():
    """06's dot carries an error bar of its 95 % interval where its level ran three times, and its
    daily users at the row's end the interval's ends; a level of one run has neither."""
    base = points(stacks=["go-nethttp"], profiles=["rails71"], levels=[1])
    base = base[base["repeat"] == 1].assign(notebook="01-linear-writes", experiment=None)
    three = pd.concat([base.assign(rps=r, repeat=i) for i, r in enumerate((380.0, 400.0, 420.0), 1)],
                      ignore_index=True)
    per_rps, assumption = capacity_notebook.users_axis(35, 4)
    drawn = {}
    for name, pts in (("three", three), ("one", base.assign(rps=400.0))):
        frame = capacity_notebook.chart_frame(capacity_notebook.estimate(pts, slo_p99_ms=100), 100, studies())
        fig = plots.lay_out(plots.capacity_chart(frame, title="t", caption="c", users=(per_rps, assumption)))
        ax = fig.axes[0]
        ends = [t.get_text() for t in ax.texts if t.get_gid() == "daily-users"][1:]
        keys = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else \
            [t.get_text() for lg in fig.legends for t in lg.get_texts()]
        drawn[name] = (len(ax.containers), ends, any(plots.bar_charts.CAPACITY_INTERVAL in k for k in keys))
    bars, ends, key = drawn["three"]
    iv = intervals.mean_interval([380.0, 400.0, 420.0])
    users = plots.bar_charts._users
    assert bars == 1 and key and ends == [f"{users(400 * per_rps)} ({users(iv.low * per_rps)}–{users(iv.high * per_rps)})"]
    assert drawn["one"] == (0, [plots.bar_charts._users(400 * per_rps)], False)


def test_capacity_is_one_block_of_rows_per_workload_on_one_axis_with_daily_users():
    """06's figure answers its question: one log axis, a block per workload (its name on a row
    with no data), a row per stack; daily users on the top axis and at each row's end, in the
    margin; each reference load one line, named once in the legend; a workload two notebooks
    measured is shown once, and Postgres (07's question) not at all."""
    cap = _estimate()
    frame = capacity_notebook.chart_frame(cap, 100, studies())
    per_rps, assumption = capacity_notebook.users_axis(35, 4)
    assert per_rps == pytest.approx(4 * 3600 / 35) and "35 requests" in assumption
    fig = plots.lay_out(plots.capacity_chart(frame, title="t", caption="c", users=(per_rps, assumption),
                                             ref_lines={"Twitter 2007": 600, "Shopify 2013": 833}))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len([a for a in fig.axes if a.axison]) == 1
    workloads = frame[["notebook", "scenario"]].drop_duplicates()
    headers = [t for t in ax.texts if t.get_gid() == "workload"]
    assert len(headers) == len(workloads)
    assert {t.get_text().split(" · ")[0] for t in headers} == {plots.value_title("scenario", w) for w in workloads["scenario"]}
    stacks = frame[frame["kind"] == "naive peak"]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        plots.value_title("server", s) for _, g in stacks.groupby(["notebook", "scenario"], sort=True)
        for s in plots.STACK_STYLES if s in set(g["server"])]
    # daily users at each row's end, outside the axes: the capacity's, "≥" where a generator set the pace
    ends = [t for t in ax.texts if t.get_gid() == "daily-users"]
    slo = frame[frame["kind"] == "p99 ≤ 100 ms"]
    assert len(ends) == len(slo) + 1  # and the column's heading
    for t in ends:
        assert t.get_window_extent().x0 >= ax.get_window_extent().x1
    best = slo.loc[slo["rps"].idxmax()]
    words = plots.bar_charts._users(best["rps"] * per_rps)
    assert any(re.fullmatch(rf"(≥ )?{re.escape(words)}( \(.+–.+\))?", t.get_text()) for t in ends)
    assert sum(t.get_text() == "objective not met" for t in ends) == int((slo["rps"] <= 0).sum())
    assert sum(t.get_text().startswith("≥ ") for t in ends) == int((slo["generator_bound"] | slo["generator_influenced"]).sum())
    assert [s.get_xlabel() for s in ax.child_axes][0].startswith("daily active users (35 requests each")
    refs = [c for c in ax.collections if c.get_label().startswith(("Twitter", "Shopify"))]
    assert len(refs) == 2  # one line each, through every block
    labels = [t.get_text() for t in legends(fig)[0].get_texts()]
    assert "Twitter 2007: 600/s" in labels and any("was the limit" in t or "set the pace" in t for t in labels)
    rings = [ln for ln in ax.get_lines() if ln.get_gid() == "limit"]
    assert rings and {ln.get_markeredgecolor() for ln in rings} == {"#000000"}
    assert plots.problems(fig) == []
    # the same workload measured again by another notebook, and on Postgres: shown once, on SQLite
    writes = points(profiles=["rails71"], levels=[1, 8, 64, 256], scenario="rails-writes").assign(experiment=None)
    again = capacity_notebook.estimate(pd.concat([
        writes.assign(notebook="01-linear-writes", database="sqlite"),
        writes.assign(notebook="07-sqlite-vs-postgres", database="sqlite", experiment="000-writes/sqlite"),
        writes.assign(notebook="07-sqlite-vs-postgres", database="postgres", experiment="000-writes/postgres")],
        ignore_index=True), 100)
    assert set(capacity_notebook.headline(again, studies())["database"]) == {"sqlite", "postgres"}
    twice = capacity_notebook.chart_frame(again, 100, studies())
    assert set(twice["database"]) == {"sqlite"} and set(twice["notebook"]) == {"01-linear-writes"}
    # with no points: one axes that says so
    empty = plots.capacity_chart(capacity_notebook.chart_frame(capacity_notebook.estimate(pd.DataFrame(), 100), 100, studies()),
                                 title="t", caption="c")
    assert any(t.get_text() == "no points at this scale" for t in empty.axes[0].texts)


def test_limit_marks_still_ring_points_and_hatch_bars():
    df = points(profiles=["rails71"])
    fig = plots.throughput_chart(df)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert plots.LIMIT_MARKS["generator_bound"]["label"] in labels
    assert plots.LIMIT_MARKS["generator_influenced"]["label"] in labels
    bars = df[df.users == 64].assign(path="pool")
    fig = plots.bar_chart(bars, category="path", value="rps", series="server", title="t", ylabel="y")
    assert {p.get_hatch() for p in fig.axes[0].patches} >= {"//", "xx"}


@pytest.mark.filterwarnings("ignore:constrained_layout not applied")  # the off-canvas legend squeezes the axes
def test_save_figure_refuses_a_clipped_legend(tmp_path):
    plots.use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label=LONG)
    ax.legend(loc="center left", bbox_to_anchor=(1.6, 0.5))  # off the canvas, to the right
    with pytest.raises(plots.ClippedLegendError, match="outside the canvas"):
        plots.save_figure(fig, "clipped", notebook="unit", figures_dir=tmp_path)
    assert not (tmp_path / "unit" / "clipped.png").exists()
    # a legend wider than the canvas is narrowed until it fits
    fig, ax = plt.subplots()
    for i in range(8):
        ax.plot([1, 2], [i, i + 1], label=f"{LONG} {i}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=8)
    paths = plots.save_figure(fig, "narrowed", notebook="unit", figures_dir=tmp_path)
    assert paths[0].exists() and ax.get_legend()._ncols < 8


def test_figures_are_deterministic_and_fixed_in_size(tmp_path):
    """The same data draws the same bytes (PNG and SVG, no date in the SVG), panels or not, and a
    figure's size does not follow its title or caption (1200 × 675; small multiples have a size
    of their own)."""
    from PIL import Image
    digests, sizes = [], set()
    for i in range(2):
        paths = []
        for name in ("throughput", "capacity", "latency"):  # one panel or several, long captions
            paths += plots.save_figure(charts()[name](), name, notebook="unit", figures_dir=tmp_path / str(i))
        digests.append([p.read_bytes() for p in paths])
        sizes |= {Image.open(p).size for p in paths if p.suffix == ".png" and p.stem != "capacity"}
        plt.close("all")
    fig = plots.throughput_chart(_points(), title="a much longer title that could change a tight bounding box",
                                 caption="x" * 200)
    sizes.add(Image.open(plots.save_figure(fig, "long", notebook="unit", figures_dir=tmp_path)[0]).size)
    assert digests[0] == digests[1]
    assert sizes == {(1200, 675)}
    assert (tmp_path / "0" / "unit" / "throughput.png").stat().st_size > 10_000
    assert "<dc:date>" not in (tmp_path / "0" / "unit" / "throughput.svg").read_text()


def test_dau_table_scales_every_row_the_same_way():
    cap = _estimate()
    table = capacity_notebook.dau_table(cap, capacity_notebook.reference_loads(), studies(), per_user=[1, 35])
    assert list(table.columns) == ["what", "capacity_rps", "dau_at_1", "dau_at_35"]
    assert (table["dau_at_1"] / table["dau_at_35"]).round(9).eq(35).all()
    assert table["what"].str.endswith("(reference)").sum() == len(capacity_notebook.reference_loads())


def test_every_notebook_figure_says_what_to_look_for(tmp_path):
    """One sentence under every figure of every notebook (its module's READING), none for a figure
    that no notebook saves; a notebook's figure without one is refused before it is written, and so
    is a figure named by a notebook's ID instead of its module."""
    import json
    import re
    saved = set()
    for path in config.NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            for name in re.findall(r'save_figure\(fig, "([^"]+)", notebook=this[,)]', "".join(cell["source"])):
                saved.add((path.stem, name))
    declared = {(s.ID, name): sentence for s in notebooks.studies().values() for name, sentence in s.READING.items()}
    assert saved and saved == set(declared), (saved ^ set(declared))
    for (notebook, name), sentence in declared.items():
        assert plots.reading(notebooks.study(notebook), name) == sentence
        assert sentence.count(". ") == 0 and sentence.endswith("."), sentence  # one sentence
    fig = charts()["latency"]()
    with pytest.raises(ValueError, match="01-linear-writes/unnamed has no sentence"):
        plots.save_figure(fig, "unnamed", notebook=notebooks.study("01-linear-writes"), figures_dir=tmp_path)
    with pytest.raises(ValueError, match="pass the notebook's module"):
        plots.save_figure(fig, "latency", notebook="01-linear-writes", figures_dir=tmp_path)
    assert not list(tmp_path.rglob("*.png"))


def _one_line(colour: str, label: str = "_Go · net/http", gid: str | None = "stack:go-nethttp"):
    plots.use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 2, 3], color=colour, label=label, gid=gid)
    ax.set_title("Writes per second")
    return fig, ax


def test_the_figure_check_refuses_a_wrong_colour_then_passes(tmp_path):
    go = plots.STACK_STYLES["go-nethttp"]["color"]
    fig, _ = _one_line(plots.STACK_STYLES["rust-axum"]["color"])  # Go drawn in Rust's colour
    with pytest.raises(plots.FigureError, match="go-nethttp drawn in"):
        plots.save_figure(fig, "wrong", notebook="unit", figures_dir=tmp_path)
    assert not list(tmp_path.rglob("*.png"))
    fig, _ = _one_line(go, label="_a category", gid=None)  # something else in a stack's colour
    with pytest.raises(plots.FigureError, match="takes go-nethttp's colour"):
        plots.save_figure(fig, "borrowed", notebook="unit", figures_dir=tmp_path)
    fig, _ = _one_line(go)
    assert plots.save_figure(fig, "right", notebook="unit", figures_dir=tmp_path)[0].exists()


@pytest.mark.parametrize("word", ["rails71", "single-writer", "go-nethttp", "metrics-writes", "01-linear-writes",
                                  "002-mix/sqlite", "synchronous-normal", "share-10", "link-100us", "path-batch"])
def test_the_figure_check_refuses_an_internal_id_then_passes(tmp_path, word):
    # read from the registries: stacks, profiles, scenarios, notebooks, the shown notebooks' experiments
    every = tuple(notebooks.studies().values())
    assert word in plots.internal_ids(every) or any(re.fullmatch(p, word) for p in plots.internal_patterns(every))
    fig, ax = _one_line(plots.STACK_STYLES["go-nethttp"]["color"])
    ax.set_xlabel(f"users ({word})")
    with pytest.raises(plots.FigureError, match=f"internal id '{word}'"):
        plots.save_figure(fig, "internal", notebook="unit", figures_dir=tmp_path, shows=every)
    ax.set_xlabel("concurrent users")
    assert plots.save_figure(fig, "plain", notebook="unit", figures_dir=tmp_path, shows=every)[0].exists()
    assert "hello" not in plots.internal_ids() and "mix" not in plots.internal_ids()  # one plain word reads as one


def test_the_figure_check_refuses_bars_on_a_log_axis_and_hidden_series(tmp_path):
    plots.use_style()
    fig, ax = plt.subplots()
    ax.bar([0, 1], [10, 1000], color="#444444")
    ax.set_yscale("log")
    assert any("log axis" in p for p in plots.problems(fig))
    fig, ax = plt.subplots()
    for stack in ("rust-axum", "go-nethttp"):  # two stacks at zero: one line hides the other
        ax.plot([1, 2, 4], [0, 0, 0], label="_" + servers.stack_title(stack), **plots.style_for(stack))
    assert any("no direct label" in p for p in plots.problems(fig))
    plots.label_coincident(ax)
    assert plots.problems(fig) == []
    assert any("one line" in t.get_text() for t in ax.texts)


def test_a_series_hidden_under_another_over_part_of_its_length_is_named_with_where():
    """03's seed latency: Go's line ran under Ruby's at p95 from 8 to 64 users, then parted. The
    check refuses the stretch unnamed; label_coincident names both with the stretch; lines
    that only cross between two levels are not on one another."""
    plots.use_style()
    fig, ax = plt.subplots()
    users = [8, 16, 32, 64, 128]
    ax.plot(users, [5, 9, 20, 41, 300], label="_" + servers.stack_title("ruby-puma"), **plots.style_for("ruby-puma"))
    ax.plot(users, [5, 9, 20, 41, 90], label="_" + servers.stack_title("go-nethttp"), **plots.style_for("go-nethttp"))
    ax.plot(users, [60, 1, 60, 1, 60], label="_" + servers.stack_title("rust-axum"), **plots.style_for("rust-axum"))
    ax.set_yscale("log")
    found = [p for p in plots.problems(fig) if "no direct label" in p]
    assert len(found) == 1 and "Ruby · Puma and Go · net/http" in found[0] and "from 8 to 64" in found[0], found
    plots.label_coincident(ax)
    assert plots.problems(fig) == []
    notes = [t.get_text() for t in ax.texts]
    assert notes == ["one line from 8 to 64:\nRuby · Puma\nGo · net/http"], notes


def test_a_note_with_no_clear_spot_on_its_panel_joins_the_caption_and_the_check_passes():
    """04's seed peak-memory: the note naming the lines drawn as one had no clear spot in its
    panel; it leaves the panel for the caption (its words on one line), and the figure check
    takes it there as it takes a note on the panel."""
    plots.use_style()
    fig, ax = plots.new_figure(caption="machine words")
    for k in range(61):  # data over the whole panel, a line every 2 % of its height: nothing is clear
        ax.plot([1, 10], [k * 2, k * 2], color="#dddddd", label=f"_f{k}")
    for stack in ("rust-axum", "go-nethttp"):
        ax.plot([1, 5, 10], [61, 61, 61], label="_" + servers.stack_title(stack), **plots.style_for(stack))
    plots.label_coincident(ax)
    plots.lay_out(fig)
    caption = next(t for t in fig.texts if t.get_gid() == "caption").get_text()
    assert caption.startswith("machine words\nOne line: Rust · Axum; Go · net/http"), caption
    assert not [t for t in ax.texts if "one line" in t.get_text()], "the note left the panel"
    assert not [p for p in plots.problems(fig) if "no direct label" in p]


def test_names_that_differ_at_their_end_are_written_once_in_a_note():
    """04's peak-memory: "the lab's tuned writer, synchronous=FULL" and "…=NORMAL" drawn as one
    line took two lines of the note each time; they are written once, their ends joined."""
    names = ["the lab's tuned writer, synchronous=FULL", "the author's method, synchronous=FULL",
             "the lab's tuned writer, synchronous=NORMAL"]
    assert marks.compact_names(names) == ["the lab's tuned writer, synchronous=FULL / NORMAL",
                                          "the author's method, synchronous=FULL"]
    assert marks.compact_names(["Ruby · Puma", "Go · net/http"]) == ["Ruby · Puma", "Go · net/http"]
    assert marks.compact_names(["batch, 10 rows", "batch, 100 rows"]) == ["batch, 10 rows / 100 rows"]


def test_a_note_over_the_tick_labels_is_refused_and_notes_are_placed_inside_their_panel():
    """04's seed peak-memory: a note centred near the panel's left edge ran over the y axis's
    numbers. The check refuses it; a note placed by note_clear stays inside its panel."""
    fig, ax = _one_line(plots.STACK_STYLES["go-nethttp"]["color"])
    ax.set_ylim(0, 4)
    note = ax.text(0.0, 3.0, "a note over the numbers", transform=ax.get_yaxis_transform(), ha="center",
                   va="center")  # at the panel's left edge, level with the y axis's "3"
    assert any("printed over its y tick label" in p for p in plots.problems(fig)), plots.problems(fig)
    note.remove()
    marks.note_clear(ax, "a note of several words\nthat must stay inside")
    fig.draw_without_rendering()
    box, area = ax.texts[0].get_window_extent(), ax.get_window_extent()
    assert area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
    assert plots.problems(fig) == []


def test_the_machines_limits_are_drawn_in_view_or_named_above_the_chart():
    """A limit near the data is a dotted line named in the margin, within the y axis; one far
    above it (CEILING_STRETCH) is named in a band at the top instead of flattening the curves;
    per panel, each panel its own (03's NORMAL and FULL); the figure check passes."""
    df = points(profiles=PROFILES[:1])
    top = float(df.groupby(["server", "users"])["rps"].mean().max())
    near, far = "SQLite alone: one-row commits (FULL)", "HTTP alone: wrk on /hello (Rust · Axum)"
    fig = plots.throughput_chart(df, caption="test", ceilings={near: top * 1.5, far: top * 40})
    fig.canvas.draw()
    ax = fig.axes[0]
    drawn = [ln for ln in ax.get_lines() if ln.get_gid() == "ceiling"]
    assert [ln.get_ydata()[0] for ln in drawn] == [top * 1.5]
    assert ax.get_ylim()[1] >= top * 1.5
    # measured once: at three significant figures (summaries.once), not every digit
    from sqlitelab.report.summaries import once
    assert any(near.split(":")[0] in t.get_text() and once(top * 1.5, "/s") in t.get_text() for t in ax.texts)
    above = [t for t in ax.texts if t.get_gid() == "ceiling-above"]
    assert len(above) == 1 and once(top * 40, "/s") in above[0].get_text()
    assert f"{top * 40:,.0f}/s" != once(top * 40, "/s")  # the test's limits have more digits than that
    assert ax.get_ylim()[1] < top * 3  # the far limit did not flatten the curves
    assert plots.problems(fig) == []
    both = pd.concat([df.assign(synchronous="normal"), df.assign(synchronous="full")])
    fig = plots.line_chart(both, x="users", y="rps", series=["server"], panels="synchronous",
                           title="t", xlabel="users", ylabel="requests/s",
                           ceilings={"full": {near: top * 1.2}, "normal": {"SQLite alone (NORMAL)": top * 2}})
    got = [[ln.get_ydata()[0] for ln in a.get_lines() if ln.get_gid() == "ceiling"]
           for a in fig.axes if a.get_lines()]
    assert sorted(got) == [[top * 1.2], [top * 2]]  # one line in each panel, each its own


def test_the_figure_check_refuses_words_printed_over_words_then_passes(tmp_path):
    """Category names side by side that run into each other are refused (04's variants once
    printed "no checkpoint on close" over its neighbours); wrapped, they pass. Numbers the lab
    puts at the levels it measured are thinned instead (8 beside 10 on a narrow log axis), so a
    saved figure keeps its first and last level and never prints two numbers as one."""
    names = ["as published", "no checkpoint on close", "no logging", "one connection", "8 KiB pages",
             "closed by the garbage collector", "synchronous=NORMAL"]

    def bars(labels):
        plots.use_style()
        fig, ax = plt.subplots(figsize=(8, 3.5))
        ax.bar(range(len(labels)), range(1, len(labels) + 1), color="#444444")
        ax.set_xticks(range(len(labels)), labels)
        return fig

    with pytest.raises(plots.FigureError, match="'no checkpoint on close' printed over"):
        plots.save_figure(bars(names), "crowded", notebook="unit", figures_dir=tmp_path)
    assert not list(tmp_path.rglob("*.png"))
    wrapped = [textwrap.fill(n, 10) for n in names]
    assert plots.save_figure(bars(wrapped), "wrapped", notebook="unit", figures_dir=tmp_path)[0].exists()
    fig, ax = _one_line(plots.STACK_STYLES["go-nethttp"]["color"])
    fig.set_size_inches(2.5, 3)
    levels = [1, 2, 4, 8, 10, 16, 32, 64, 128, 256]
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(u) for u in levels])
    assert any("printed over" in p for p in plots.problems(fig))
    plots.lay_out(fig)
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert shown[0] == "1" and shown[-1] == "256" and len(shown) < len(levels)
    assert plots.problems(fig) == []


def test_the_figure_check_refuses_text_on_data_a_wide_title_and_words_not_plain_then_passes(tmp_path):
    """A note, a legend or a label whose box a series crosses is refused (the "one line: …" note
    of 02's busy share once lay under its own data), and so is a title wider than the canvas,
    an article named by its seed number and a version; moved clear, they pass."""
    go = plots.STACK_STYLES["go-nethttp"]["color"]
    fig, ax = _one_line(go, label="Go · net/http")  # the line from (1, 1) to (3, 3)
    note = ax.text(2, 2, "a note on the line", ha="center", va="center")
    with pytest.raises(plots.FigureError, match="'a note on the line' printed over the line of 'Go"):
        plots.save_figure(fig, "on-data", notebook="unit", figures_dir=tmp_path)
    note.set_position((1.2, 2.9))  # top left: where no data is
    ax.set_ylim(0.5, 3.5)
    assert plots.problems(fig) == []
    ax.legend(loc="center")  # the legend box over the middle of the line
    assert any("'the legend' printed over the line" in p for p in plots.problems(fig))
    ax.legend(loc="lower right")
    assert plots.problems(fig) == []
    fig.draw_without_rendering()
    under = ax.transData.inverted().transform(ax.get_legend().get_window_extent().corners().mean(axis=0))
    ax.plot(*[[v] for v in under], marker="o", color="#444444", linestyle="none", label="_a mark")  # under the legend
    assert any("printed over the marker of 'a mark'" in p for p in plots.problems(fig))
    ax.lines[-1].remove()
    ax.vlines([2.0], 0.5, 3.5, color="#444444", label="_a reference")  # through the note's column? no: at x=2
    note.set_position((2.0, 3.3))
    assert any("printed over the line of 'a reference'" in p for p in plots.problems(fig))
    note.set_position((1.2, 2.9))
    assert plots.problems(fig) == []
    ax.set_title("A title far too long for the canvas it is printed on, running on and on past its right edge")
    assert any("wider than the canvas" in p for p in plots.problems(fig))
    ax.set_title("Writes per second")
    ax.set_xlabel("users (seed 004's levels, SQLite 3.40.1-2+deb12u1)")
    found = plots.problems(fig)
    assert any("seed number: 'seed 004'" in p for p in found) and any("version number: '3.40.1-2+deb12u1'" in p for p in found)
    ax.set_xlabel("users (the Go article's levels)")
    assert plots.save_figure(fig, "plain", notebook="unit", figures_dir=tmp_path)[0].exists()


def test_reference_names_in_the_margin_never_overlap_on_a_tall_axis():
    """05's quick run: bars up to 135,000 req/s put Twitter's 6,000 and Yahoo's 1,388 a hair
    apart on the axis; their names in the margin are spread apart by their own height, each
    with a leader to its line (the figure check refused it: 'printed over')."""
    rows = [{"server": s, "scenario": e, "rps": v * (i + 1), "generator_bound": False}
            for i, s in enumerate(STACKS) for e, v in (("hello", 33_000), ("user-read", 12_000))]
    fig = plots.bar_chart(pd.DataFrame(rows), category="scenario", value="rps", series="server",
                          ref_lines={"Twitter 6K tweets/s": 6000, "Yahoo 1,388 req/s": 1388},
                          ceilings={"SQLite alone: point reads": 290_000}, title="Requests per second",
                          ylabel="requests/s", caption="c")
    assert plots.problems(plots.lay_out(fig)) == []


def test_a_small_log_panel_keeps_its_numbers_apart():
    """08's timeline: a log axis from 2 to 400 ms in a panel an inch high printed its minor
    labels (20, 30, 40, 60...) over each other; laid out, the labels that would touch one kept
    before are dropped, the decades first."""
    plots.use_style()
    fig, ax = plt.subplots(figsize=(2.2, 1.6))
    ax.plot([1, 2, 3], [2, 40, 400], color="#444444")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plots.PlainLogFormatter())
    ax.yaxis.set_minor_formatter(plots.PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    assert any("printed over" in p for p in plots.problems(fig))
    plots.lay_out(fig)
    assert plots.problems(fig) == []
    shown = [t.label1.get_text() for t in ax.yaxis._update_ticks() if t.label1.get_text()]
    assert {"10", "100"} <= set(shown), shown


def test_a_row_of_counts_that_are_all_zero_starts_at_zero():
    """08's timeline: a panel of errors per second that never erred is drawn from 0 up (it was
    centred on zero, -0.05 to 0.05: a negative count)."""
    sec = pd.DataFrame([{"server": s, "operation": "litestream", "second": t, "span_s": 1.0,
                         "p99_ms": 3.0 + t, "errors": 0, "late": 0, "wal_mib": 4.0,
                         "operation_started_s": 1.5, "operation_seconds": 2.0}
                        for s in ("go-nethttp", "rust-axum") for t in range(4)])
    fig = plots.timeline_chart(sec, title="t", caption="c", value="errors_late")
    errors = fig.axes[0]  # one panel per operation
    assert errors.get_ylim()[0] == 0 and errors.get_ylim()[1] >= 1


def test_a_latency_ecdf_under_a_decade_keeps_its_numbers_plain_and_apart(tmp_path):
    """02's smoke run once measured Rails 8 between 0.2 and 7.3 ms: the ECDF's log axis then
    labelled its minor ticks in matplotlib's 6×10⁻¹ and printed them over each other. Plain
    numbers, thinned like any other axis's."""
    from hdrh.histogram import HdrHistogram
    rng = np.random.default_rng(3)
    df = points(stacks=["ruby-puma"], profiles=["rails8"], levels=[1, 2])
    hists = []
    for _ in range(len(df)):
        h = HdrHistogram(1, 100_000_000, 3)
        for v in rng.uniform(200, 7300, 300):
            h.record_value(int(v))
        hists.append(h.encode().decode())
    fig = plots.latency_ecdf(df.assign(histogram=hists), "txn_mode", panels="profile", title="Metrics writes")
    paths = plots.save_figure(fig, "ecdf", notebook="unit", figures_dir=tmp_path)
    assert paths[0].exists()
    shown = [t.get_text() for ax in fig.axes if ax.axison for t in ax.get_xticklabels() if t.get_text()]
    assert shown and not any("mathdefault" in t for t in shown), shown


def test_rows_of_zeros_are_named_in_a_note_where_no_bar_is():
    """02's deferred-vs-immediate: the stacks and profiles with no 'database is locked' at all
    get no rows of "0"s but one note, in a corner no bar reaches; a stack none of whose profiles
    had one is named once."""
    rows = [{"server": s, "profile": p, "txn_mode": m, "busy_errors": v}
            for s, p, m, v in (("ruby-puma", "rails71", "deferred", 900), ("ruby-puma", "rails71", "immediate", 0),
                               ("ruby-puma", "rails8", "deferred", 0), ("ruby-puma", "rails8", "immediate", 0),
                               ("go-nethttp", "rails71", "deferred", 0), ("go-nethttp", "rails71", "immediate", 0),
                               ("go-nethttp", "rails8", "deferred", 0), ("go-nethttp", "rails8", "immediate", 0),
                               ("python-fastapi", "rails71", "deferred", 300), ("python-fastapi", "rails71", "immediate", 40))]
    df = pd.DataFrame(rows)
    fig = plots.lay_out(plots.bar_chart(df, category=["server", "profile"], value="busy_errors", series="txn_mode",
                                        hatch_col=None, horizontal=True, zeros_in_note=True, title="t", ylabel="busy"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Ruby · Puma, Rails 7.1 defaults",
                                                            "Python · FastAPI, Rails 7.1 defaults"]
    note = [t for t in ax.texts if t.get_gid() == "zero-note"]
    assert len(note) == 1 and note[0].get_text().splitlines() == [
        "None with deferred transactions or immediate transactions:", "Ruby · Puma, Rails 8 defaults",
        "Go · net/http, every profile"]
    assert sum(t.get_text() == "0" for t in ax.texts) == 1  # Puma's immediate zero, beside a bar it has
    assert plots.problems(fig) == []
    with pytest.raises(ValueError, match="horizontal"):
        plots.bar_chart(df, category=["server", "profile"], value="busy_errors", series="txn_mode", title="t",
                        ylabel="busy", zeros_in_note=True)


def test_bars_carry_their_intervals_and_a_zero_says_so_above_its_cap():
    """02's article runs: each share with its Wilson interval as an error bar over its bar (on the
    darkest face and above the lightest alike), none where a bar has no interval, a zero's "0"
    above its interval's cap; a bar that is the mean of several rows has no one interval: refused."""
    from sqlitelab.notebooks import busy_errors
    runs = pd.DataFrame({"setup": ["a", "b"], "users": [3, 3], "article_errors": [15, 0], "article_responses": [168, 150],
                         "oha_errors": [30, 0], "oha_responses": [1000, 900], "oha_share": [0.03, 0.0],
                         "busy_errors": [50, 0], "requests": [1000, 0], "run_busy_errors": [60, 0],
                         "run_responses": [1100, 1000], "article_error_share": [15 / 168, 0.0],
                         "busy_share": [0.05, None], "run_busy_share": [60 / 1100, 0.0]})
    bars = busy_errors.article_run_bars(runs)
    wilson = intervals.share_interval(15, 168)
    first = bars[(bars["set-up"] == "a, 3 users") & (bars["measured"] == "article")].iloc[0]
    assert (first["low"], first["high"]) == (wilson.low, wilson.high)
    assert bars["low"].isna().sum() == 1  # the window of b counted no request: no share, no interval
    fig = plots.lay_out(plots.bar_chart(bars, category="set-up", value="error share", series="measured",
                                        reference_series="article", hatch_col=None, title="t", ylabel="share",
                                        percent=True, interval=("low", "high")))
    ax = fig.axes[0]
    tops = sorted(round(max(seg[:, 1]), 6) for c in ax.collections for seg in c.get_segments())
    assert tops == sorted(round(v, 6) for v in bars["high"].dropna())  # one error bar per known interval
    zeros = [t for t in ax.texts if t.get_text() == "0"]
    assert len(zeros) == 3 and all(t.xy[1] > 0 for t in zeros)  # above their caps; the missing share none
    assert plots.problems(fig) == []
    with pytest.raises(ValueError, match="one row per bar"):
        plots.bar_chart(pd.concat([bars, bars]), category="set-up", value="error share", series="measured",
                        title="t", ylabel="s", interval=("low", "high"))


def test_a_footer_names_the_profile_only_when_its_points_ran_as_it_says():
    """03's write paths ran the single-writer profile with the write path overridden (pool,
    writer, batch): the footer said "One writer thread" over three write paths."""
    rows = pd.DataFrame([{"profile": "single-writer", "write_path": w, "txn_mode": "immediate"}
                         for w in ("pool", "writer", "batch")])
    title = servers.profile_title("single-writer")
    assert title not in plots.caption_for(rows)
    assert title in plots.caption_for(rows[rows["write_path"] == "writer"])
    assert title in plots.caption_for(rows.drop(columns="write_path"))  # nothing recorded: nothing contradicts it


@pytest.mark.parametrize("delay, words", [(None, "direct"), (0, "proxy, no delay"), (100, "proxy, 100 µs each way")])
def test_a_path_from_load_to_server_reads_in_plain_words(delay, words):
    assert link_title(link_label(delay)) == words == plots.value_title("link", link_label(delay))


def test_a_dot_chart_names_its_lines_above_it_and_rings_the_dots_a_generator_bounded():
    """05's requests per endpoint span two decades, from Rails' hundreds to the article's 110 K
    and SQLite's own 295 K: dots on a log axis, the article's as grey ×, each line named above
    the plot (two limits 7 % apart spread with a leader), the generator-bound dots ringed."""
    fig = plots.lay_out(charts()["rps-dots"]())
    ax = fig.axes[0]
    names = [t for t in ax.texts if t.get_text().strip()]
    assert len(names) == 4 and all(t.get_position()[1] > 1 for t in names)  # above the plot
    assert plots.problems(fig) == []
    rings = [ln for ln in ax.get_lines() if ln.get_gid() == "limit"]
    assert sum(len(ln.get_xdata()) for ln in rings) == 2  # one bound dot, one that set the pace
    article = [ln for ln in ax.get_lines() if ln.get_label() == "article: Go, M1 (8 cores)"]
    assert article and article[0].get_marker() == "x"


def test_rows_per_transaction_have_a_ramp_of_their_own_and_every_other_variable_the_violet():
    """04 drew its methods and its rows per transaction in the same violet: light violet was
    "the author's method" in one figure and "10 rows per transaction" in the next."""
    rows = plots.colours_for([10, 25, 100], "rows_per_txn")
    assert {s["color"] for s in rows.values()} <= set(plots.RAMPS["rows_per_txn"])
    other = plots.colours_for(["a", "b", "c"], "series")
    assert {s["color"] for s in other.values()} <= set(plots.ORDERED)
    assert not set(plots.RAMPS["rows_per_txn"]) & set(plots.ORDERED)
    styles = plots.SeriesStyles(pd.DataFrame({"rows_per_txn": [10, 25]}), ["rows_per_txn"])
    assert styles((10,))["color"] in plots.RAMPS["rows_per_txn"]


def test_a_panel_says_which_series_of_the_legend_it_does_not_hold():
    """02's latency distribution: Rails 8 makes every transaction immediate, so its panel has no
    deferred curve, while the legend names both: the panel says so, where no curve is."""
    df = points(stacks=["ruby-puma", "go-nethttp"], profiles=["rails71", "rails8"], levels=[1, 2])
    slower = df[(df.server == "go-nethttp") & (df.profile == "rails71")].assign(server="ruby-puma", txn_mode="deferred")
    df = pd.concat([df[df.server == "ruby-puma"].assign(txn_mode="immediate"), slower])
    fig = plots.lay_out(plots.latency_ecdf(df, "txn_mode", panels="profile", title="t", caption="c"))
    notes = {ax.get_title(loc="left"): [t.get_text() for t in ax.texts] for ax in fig.axes if ax.get_title(loc="left")}
    assert notes == {"Rails 7.1 defaults": [], "Rails 8 defaults": ["not run here:\ndeferred transactions"]}, notes
    assert plots.problems(fig) == []


def test_an_axis_label_longer_than_its_side_is_wrapped_and_one_cut_is_refused():
    """01's "writes/s, counted as the article counted them" ran off the top of a short chart."""
    plots.use_style()
    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.plot([1, 2, 3], [1, 2, 3], color="#444444")
    ax.set_ylabel("writes per second, counted exactly as the article counted them")
    assert any("runs off the canvas" in p for p in plots.problems(fig))
    plots.lay_out(fig)
    assert "\n" in ax.get_ylabel() and plots.problems(fig) == []


def test_a_stretch_of_one_line_under_another_is_said_in_the_axis_own_numbers():
    """03's write share: a stretch from 0.5 to 1 on an axis printed as 50 % to 100 %."""
    fig = plots.line_chart(pd.DataFrame([{"server": s, "write_share": x, "rps": y}
                                         for s, ys in (("go-nethttp", [900, 500, 300]), ("python-fastapi", [600, 500, 300]))
                                         for x, y in zip([0.0, 0.5, 1.0], ys)]),
                           x="write_share", y="rps", series=["server"], xpercent=True, title="t", xlabel="share",
                           ylabel="requests/s", caption="c")
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text().startswith("one line")]
    assert notes and notes[0].startswith("one line from 50% to 100%:"), notes


def test_a_minor_tick_label_touching_a_major_one_beside_it_is_dropped_whatever_order_they_are_drawn_in():
    """matplotlib lists an axis's major ticks before its minor ones (100 before 90): the labels
    are compared with their neighbours along the axis, so a log axis's minor 90 touching its
    major 100 in a narrow panel is thinned, not left for the check to refuse (02's
    latency-distribution, three panels of 37-110 ms)."""
    from sqlitelab.report.plots.marks import PlainLogFormatter
    fig, axes, key = plots.new_panels(1, 3, caption="c")
    for ax in axes:
        ax.plot([37, 110], [0, 1], color="#444444")
        ax.set_xscale("log")
        ax.set_xlim(37, 110)
        ax.xaxis.set_major_formatter(PlainLogFormatter())
        ax.xaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    fig.set_dpi(plt.rcParams["savefig.dpi"])
    before = {t.get_text() for t in axes[2].xaxis.get_ticklabels(which="both") if t.get_text()}
    assert {"90", "100"} <= before
    assert not [p for p in plots.problems(plots.lay_out(fig)) if "printed over" in p]



def test_a_caption_says_when_every_point_is_one_run_with_no_interval():
    """01's Puma workers at seed: one run per level, drawn bare; caption_for says the points carry
    no interval, and says nothing of it where every point ran twice (or in two rounds)."""
    base = pd.DataFrame([{"server": "ruby-rails", "profile": "rails71", "users": u, "repeat": 1,
                          "rps": 100.0, "machine": "m", "generator": "loadgen", "server_pinning": "0",
                          "generator_pinning": "1"} for u in (1, 4)])
    assert plots.caption_for(base, extra="YJIT on").endswith("YJIT on · one run per point: no interval")
    assert "no interval" not in plots.caption_for(pd.concat([base, base.assign(repeat=2)], ignore_index=True))
    rounds = pd.concat([base.assign(round=1), base.assign(round=2)], ignore_index=True)
    assert "no interval" not in plots.caption_for(rounds)
    assert "no interval" not in plots.caption_for(base.drop(columns="repeat"))  # not stored points: not said
    mixed = pd.concat([base, base[base["users"] == 1].assign(repeat=2)], ignore_index=True)  # 1 user twice, 4 once
    assert plots.caption_for(mixed).endswith("a point of one run has no interval")
