"""Figures: one style, one deterministic save, the two standard charts.

    plt.style.use("sqlitelab.blog")
    fig = throughput_chart(df, caption=caption_for(df))
    save_figure(fig, "throughput", notebook="01-linear-writes")
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import pandas as pd

from . import config
from .analysis import flagged

MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
PERCENTILE_STYLES = {"p50_ms": ("p50", "-"), "p95_ms": ("p95", "--"), "p99_ms": ("p99", ":"),
                     "p999_ms": ("p99.9", "-.")}


# The articles' own numbers, drawn on the same axes as ours: greys, dashed, "x" markers.
REFERENCE_COLORS = ["#111111", "#666666", "#999999", "#444444"]
REFERENCE_DASHES = [(0, (5, 2)), (0, (2, 2)), (0, (6, 2, 1, 2)), (0, (1, 1))]


def draw_reference(ax, ref: pd.DataFrame, x: str, y: str, label: str, by: str | None = None) -> None:
    """Plot an article's published numbers (`ref`) as dashed grey lines, one per `by` group,
    labelled `label` (with the group's value when `by` is given)."""
    groups = ref.groupby(by, sort=False) if by else [(None, ref)]
    for i, (key, g) in enumerate(groups):
        g = g.dropna(subset=[x, y]).sort_values(x)
        ax.plot(g[x], g[y], color=REFERENCE_COLORS[i % len(REFERENCE_COLORS)],
                linestyle=REFERENCE_DASHES[i % len(REFERENCE_DASHES)], marker="x", markersize=7,
                linewidth=1.4, label=f"{label} · {key}" if by else label)


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
    plt.style.use("sqlitelab.blog")


def new_figure(ncols: int = 1, nrows: int = 1, caption: str | None = None, **kw):
    """A figure of the lab's fixed size (the style's, unless a chart type fixes its own
    `figsize`) with room for a caption line at the bottom."""
    use_style()
    fig, axes = plt.subplots(nrows, ncols, **kw)
    if caption:
        set_caption(fig, caption)
    return fig, axes


def set_caption(fig, text: str) -> None:
    height = fig.get_figheight()
    room = min(0.3, 0.5 / height)  # about half an inch for two lines of caption
    fig.get_layout_engine().set(rect=(0, room, 1, 1 - room))
    fig.text(0.01, 0.012, text, fontsize=7.5, color="#555555", ha="left", va="bottom", wrap=True)


def save_figure(fig, name: str, notebook: str | None = None, figures_dir: Path | None = None) -> list[Path]:
    """Write figures/<notebook>/<name>.png and .svg, byte-for-byte reproducible."""
    notebook = notebook or os.environ.get("LAB_NOTEBOOK") or "misc"
    out = Path(figures_dir or config.FIGURES_DIR) / notebook
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "sqlitelab"}):
        fig.savefig(paths[0], metadata={"Software": None})
        fig.savefig(paths[1], metadata={"Date": None, "Creator": None})
    return paths


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
    parts.append(f"server CPU {first.get('server_pinning') or 'unpinned'}, "
                 f"{gen} CPU {first.get('generator_pinning') or 'unpinned'}")
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


def series_label(server: str, profile: str, many_profiles: bool, many_servers: bool) -> str:
    if many_profiles and many_servers:
        return f"{server} · {profile}"
    return profile if many_profiles else server


def summarise(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Mean and spread over repeats of each point; generator_bound if any repeat was."""
    cols = [c for c in ("rps", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
                        "errors", "busy_errors", "server_cpu_pct", "gen_cpu_pct", "server_rss_mb",
                        "bytes_per_s") if c in df]
    df = df.assign(_influenced=flagged(df, "generator_influenced"))
    g = df.groupby(list(by), sort=True)
    out = g[cols].mean()
    out["rps_min"], out["rps_max"] = g["rps"].min(), g["rps"].max()
    out["repeats"] = g.size()
    out["generator_bound"] = g["generator_bound"].any()
    out["generator_influenced"] = g["_influenced"].any()
    if "audit_ok" in df:
        out["audit_ok"] = g["audit_ok"].all()
    return out.reset_index()


def throughput_chart(df: pd.DataFrame, title: str = "Throughput vs concurrent users",
                     caption: str | None = None, y: str = "rps", ylabel: str = "requests/s",
                     logx: bool = True, reference: dict | None = None):
    """Mean over repeats with min–max bars; rings where the generator was the limit or set the
    pace (LIMIT_MARKS).
    `reference`: the article's numbers on the same axes, as draw_reference's keyword
    arguments (`{"ref": df, "x": "users", "y": "rps", "label": "article", "by": None}`)."""
    s = summarise(df)
    fig, ax = new_figure(caption=caption)
    many_p, many_s = s["profile"].nunique() > 1, s["server"].nunique() > 1
    cycle = plt.rcParams["axes.prop_cycle"].by_key()
    colors, styles = cycle["color"], cycle.get("linestyle", ["-"])
    for i, ((server, profile), g) in enumerate(s.groupby(["server", "profile"], sort=True)):
        label = series_label(server, profile, many_p, many_s)
        # colour and style by series index: the error bars and rings must not advance the cycle
        line, = ax.plot(g["users"], g[y], marker=MARKERS[i % len(MARKERS)], label=label,
                        color=colors[i % len(colors)], linestyle=styles[i % len(styles)])
        if y == "rps":
            ax.errorbar(g["users"], g[y], yerr=[g[y] - g["rps_min"], g["rps_max"] - g[y]],
                        fmt="none", ecolor=line.get_color(), capsize=3, linewidth=1)
        mark_limits(ax, g, "users", y)
    if reference:
        draw_reference(ax, **reference)
        s = pd.concat([s, reference["ref"][[reference["x"]]].rename(columns={reference["x"]: "users"})])
    _users_axis(ax, s, logx)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    _legend(ax, below=bool(reference))
    return fig


def _legend(ax, below: bool = False) -> None:
    """In the axes when there are few lines; below them, clear of the data, when there are many
    or when an article's line crosses the plot (it goes wherever its numbers go)."""
    n = len(ax.get_legend_handles_labels()[1])
    if below or n > 6:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3, fontsize=8)
    else:
        ax.legend()


def latency_chart(df: pd.DataFrame, title: str = "Latency percentiles vs concurrent users",
                  caption: str | None = None, percentiles=("p50_ms", "p95_ms", "p99_ms"),
                  logx: bool = True):
    """Colour per server/profile, line style per percentile, log-scale milliseconds."""
    s = summarise(df)
    fig, ax = new_figure(caption=caption)
    many_p, many_s = s["profile"].nunique() > 1, s["server"].nunique() > 1
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ((server, profile), g) in enumerate(s.groupby(["server", "profile"], sort=True)):
        label = series_label(server, profile, many_p, many_s)
        for col in percentiles:
            name, style = PERCENTILE_STYLES[col]
            ax.plot(g["users"], g[col], color=colors[i % len(colors)], linestyle=style,
                    marker=MARKERS[i % len(MARKERS)], label=f"{label} {name}")
        mark_limits(ax, g, "users", percentiles[-1])  # latency there is an upper bound
    _users_axis(ax, s, logx)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title(title)
    ax.legend(ncols=2 if s.groupby(["server", "profile"]).ngroups > 2 else 1)
    return fig


def _users_axis(ax, s: pd.DataFrame, logx: bool) -> None:
    levels = sorted(s["users"].unique())
    if logx and len(levels) > 1 and levels[-1] / max(levels[0], 1) > 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(u) for u in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent users (closed loop)")


def status_table(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Status-code distribution per point, summed over repeats."""
    rows = []
    for _, r in df.iterrows():
        counts = json.loads(r["status_counts"]) if isinstance(r["status_counts"], str) else {}
        rows.append({**{k: r[k] for k in by}, **{f"[{k}]": v for k, v in counts.items()}})
    t = pd.DataFrame(rows).fillna(0)
    return t.groupby(list(by)).sum().astype(int).reset_index()


def line_chart(df: pd.DataFrame, x: str, y: str, series: list[str], title: str, xlabel: str,
               ylabel: str, caption: str | None = None, logx: bool = False, logy: bool = False,
               ref_lines: dict[str, float] | None = None, style_by: str | None = None,
               reference: dict | None = None):
    """One line per combination of `series` columns (mean over duplicates of x);
    `style_by` (a series column) picks the line style, the rest the colour; `reference`:
    the article's numbers on the same axes (draw_reference's keyword arguments)."""
    fig, ax = new_figure(caption=caption)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    colour_keys = [c for c in series if c != style_by]
    ckeys = sorted({tuple(r) for r in df[colour_keys].itertuples(index=False)}) if colour_keys else [()]
    skeys = sorted(df[style_by].unique()) if style_by else [None]
    for key, g in df.groupby(series, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        kd = dict(zip(series, key))
        ci = ckeys.index(tuple(kd[c] for c in colour_keys)) if colour_keys else 0
        si = skeys.index(kd[style_by]) if style_by else 0
        m = g.groupby(x, sort=True)[y].mean()
        ax.plot(m.index, m.values, color=colors[ci % len(colors)], linestyle=styles[si % len(styles)],
                marker=MARKERS[ci % len(MARKERS)], label=" · ".join(str(v) for v in key))
        flags = pd.DataFrame({c: g.assign(_f=flagged(g, c)).groupby(x, sort=True)["_f"].any()
                              for c in LIMIT_MARKS}).assign(**{y: m}).reset_index()
        mark_limits(ax, flags, x, y)
    for i, (label, value) in enumerate((ref_lines or {}).items()):
        ax.axhline(value, color="#777777", linewidth=1, linestyle=(0, (2, 2)))
        ax.annotate(f"{label} ({value:,.0f})", xy=(0.01, value), xycoords=("axes fraction", "data"),
                    fontsize=8, color="#555555", va="bottom")
    if reference:
        draw_reference(ax, **reference)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend(ax, below=bool(reference))
    return fig


def _natural(v) -> list:
    """Sort key where numbers inside names sort as numbers: "10 rows" < "25 rows" < "100 rows"."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(v)) if t]


def bar_chart(df: pd.DataFrame, category: str, value: str, series: str, title: str, ylabel: str,
              caption: str | None = None, ref_lines: dict[str, float] | None = None, logy: bool = False,
              hatch_col: str | None = "generator_bound", horizontal: bool = False,
              reference_series: str | None = None):
    """Grouped bars (mean over repeats); hatched where `hatch_col` is true (generator-bound).
    `horizontal` puts the categories on the y axis, for long lists of labels. The series
    named `reference_series` (an article's own numbers) comes first, in dark grey."""
    import numpy as np
    from matplotlib.patches import Patch
    cats = list(dict.fromkeys(df[category]))
    sers = sorted(df[series].unique(), key=lambda v: (v != reference_series, _natural(v)))
    kw = {"figsize": (8, max(4.5, 1.2 + 0.22 * len(cats) * max(1, len(sers) / 2)))} if horizontal else {}
    fig, ax = new_figure(caption=caption, **kw)
    width = 0.8 / max(len(sers), 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = []
    for i, s in enumerate(sers):
        g = df[df[series] == s]
        vals = [g[g[category] == c][value].mean() for c in cats]
        flags = [_bar_limit(g[g[category] == c], hatch_col) for c in cats]
        pos = np.arange(len(cats)) + (i - (len(sers) - 1) / 2) * width
        k = i - (reference_series in sers)
        color = REFERENCE_COLORS[1] if s == reference_series else colors[k % len(colors)]
        bars = (ax.barh(pos, vals, width, color=color) if horizontal
                else ax.bar(pos, vals, width, color=color))
        for b, flag in zip(bars, flags):
            if flag:
                b.set_hatch(LIMIT_MARKS[flag]["hatch"])
                b.set_edgecolor("white")
        handles.append(Patch(facecolor=color, label=str(s)))
    dashes = [(0, (2, 2)), (0, (6, 2)), (0, (1, 1)), (0, (6, 2, 1, 2))]
    for k, (label, v) in enumerate((ref_lines or {}).items()):
        if horizontal:  # labels of nearby vertical lines collide: name them in the legend
            handles.append(ax.axvline(v, color="#555555", linewidth=1.2, linestyle=dashes[k % len(dashes)],
                                      label=f"{label}: {v:,.0f}/s"))
        else:
            ax.axhline(v, color="#777777", linewidth=1, linestyle=(0, (2, 2)))
            ax.annotate(f"{label} ({v:,.0f})", xy=(1.0, v), xycoords=("axes fraction", "data"),
                        fontsize=8, color="#555555", ha="right", va="bottom")
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
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_title(title)
    shown = {_bar_limit(df[(df[category] == c) & (df[series] == s)], hatch_col)
             for c in cats for s in sers}
    for col, m in LIMIT_MARKS.items():
        if col in shown:
            handles.append(Patch(facecolor="#bbbbbb", hatch=m["hatch"], edgecolor="white",
                                 label=f"{m['label']} (server capacity ≥ bar)"))
    # below the axes: bars fill the plot area
    label_lines = 1 if horizontal else max(str(c).count("\n") + 1 for c in cats)
    ax.legend(handles=handles, loc="upper center",
              bbox_to_anchor=(0.5, -0.14 if horizontal else -0.1 - 0.065 * (label_lines - 1)),
              ncols=3 if horizontal else min(len(handles), 5), fontsize=8)
    return fig


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


def latency_histogram(df: pd.DataFrame, series: list[str], title: str, caption: str | None = None,
                      bins: int = 60):
    """Distribution of every measured request's latency (merged HdrHistograms), log-spaced bins."""
    import numpy as np
    from hdrh.histogram import HdrHistogram
    fig, ax = new_figure(caption=caption)
    merged = {}
    for key, g in df.groupby(series, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        h = HdrHistogram(1, 100_000_000, 3)
        for enc in g["histogram"].dropna():
            h.add(HdrHistogram.decode(enc))
        if h.get_total_count():
            merged[" · ".join(map(str, key))] = h
    if merged:
        lo = min(h.get_min_value() for h in merged.values()) / 1000
        hi = max(h.get_max_value() for h in merged.values()) / 1000
        edges = np.geomspace(max(lo, 0.01), max(hi, lo * 1.01, 0.02), bins)
        for i, (label, h) in enumerate(merged.items()):
            vals = np.array([(it.value_iterated_to / 1000, it.count_at_value_iterated_to)
                             for it in h.get_recorded_iterator()])
            counts, _ = np.histogram(vals[:, 0], bins=edges, weights=vals[:, 1])
            ax.stairs(counts, edges, label=f"{label} (n={h.get_total_count():,})", linewidth=1.6)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("requests")
    ax.set_title(title)
    ax.legend()
    return fig


def calibration_chart(points: pd.DataFrame, calibrations: pd.DataFrame):
    """Each generator against wrk on GET /delay/{ms}, as a function of the generator's own CPU:
    its throughput over wrk's (left) and its p99 over wrk's (right), the tolerance band, and
    the onset from which every level drifts (sqlitelab.calibrate)."""
    d = points[points["endpoint"] == "delay"].sort_values("gen_util")
    first = calibrations.iloc[0] if len(calibrations) else None
    caption = (f"{first['machine']} · target {first['target']} (server CPU {first['server_pinning']}), "
               f"generators and wrk on CPU {first['generator_pinning']} · GET /delay/{first['delay_ms']} · "
               f"reference {first['reference']}") if first is not None else None
    fig, (left, right) = new_figure(ncols=2, caption=caption, figsize=(10, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    tol = float(first["tolerance"]) if first is not None else 0.1
    p99_tol = float(first["p99_tolerance"]) if first is not None else 0.25
    for i, (gen, g) in enumerate(d.groupby("generator", sort=True)):
        c = colors[i % len(colors)]
        for ax, col in ((left, "rps_ratio"), (right, "p99_ratio")):
            ax.plot(100 * g["gen_util"], g[col], marker=MARKERS[i % len(MARKERS)], color=c, label=gen)
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
    return fig
