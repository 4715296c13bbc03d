"""Notebook 03, reads and writes together (seed 002): the mix table per stack and level, active
users at a think time, the stacks' ratios and the write paths in words, and its row of the README.
"""
from __future__ import annotations

from types import ModuleType

import pandas as pd

from sqlitelab.infra import servers
from sqlitelab.load.verdicts import writer_batches
from sqlitelab.report import analysis, capacity, claims, findings, summaries


def mix_table(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's layout: per stack, workers (users), rps, p50, p95, p99, errors."""
    return analysis.over_repeats(df, ["server", "users"], ["rps", "p50_ms", "p95_ms", "p99_ms", "errors"])


def best_rps(df: pd.DataFrame, keys: list[str] | tuple = ("profile", "users")) -> pd.DataFrame:
    """Per stack, its best mean rate over `keys` (the means over repeats of each combination)
    and whether that point's generator was the limit: the `peak_rps` findings.ceiling reads."""
    t = analysis.over_repeats(df, ["server", *keys], ["rps"])
    best = t.loc[t.groupby("server")["rps"].idxmax()]
    return pd.DataFrame({"server": best["server"].values, "peak_rps": best["rps"].values,
                         "peak_generator_bound": [analysis.limited(r) for r in best.to_dict("records")]})


def stack_ratios(table: pd.DataFrame, base: str = "python-fastapi") -> str:
    """Each stack's peak as a multiple of `base`'s. A peak whose generator was the limit or set
    the pace is a lower bound: its ratio is written "≥" (the base's: "≤"; both: "?")."""
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    if base not in best.index or len(best) < 2:
        return ""
    b = best.loc[base]
    if not findings.finished(b["rps"]):
        return f"No ratio to {base}'s peak: at every level of {base}, {findings.STALLED}."
    parts, none = [], [s for s, r in best.iterrows() if not findings.finished(r["rps"])]
    for s, r in best.iterrows():
        if s == base or s in none:
            continue
        sign = {(True, False): "≥ ", (False, True): "≤ ", (True, True): "? "}.get(
            (analysis.limited(r), analysis.limited(b)), "")
        parts.append(f"{s} {sign}{r['rps'] / b['rps']:.1f}×")
    text = "".join(parts)
    notes = [n for mark, n in (("≥", "≥: that stack's peak was generator-bound or -influenced, the server can do more"),
                               ("≤", f"≤: {base}'s peak was generator-bound or -influenced"),
                               ("?", "?: both were")) if mark in text]
    stalls = f" At every level of {', '.join(none)}, {findings.STALLED}." if none else ""
    if not parts:
        return stalls.strip()
    return ", ".join(parts) + f" the peak of {base} ({b['rps']:,.0f} rps)" + \
        (f" ({'; '.join(notes)})." if notes else ".") + stalls


def write_path(paths: pd.DataFrame) -> str:
    """Group commit (`batch`) against the single writer and the connection pool, per stack, and
    how much it grouped: the writes per transaction the writer counted in the batch path's
    windows (mean and largest; verdicts.writer_batches)."""
    pv = paths.pivot_table(index="server", columns="write_path", values="rps")
    lines = []
    for s, r in pv.iterrows():
        if {"batch", "writer", "pool"} <= set(r.index) and r["writer"] > 0 and r["pool"] > 0:
            line = (f"- **{servers.stack_title(s)}**: group commit {r['batch'] / r['writer']:.1f}× the single "
                    f"writer, {r['batch'] / r['pool']:.1f}× the pool ({r['batch']:,.0f} vs "
                    f"{r['writer']:,.0f} vs {r['pool']:,.0f} req/s)")
            counted = writer_batches(paths[(paths["server"] == s) & (paths["write_path"] == "batch")])
            if counted["mean_batch"] is not None:
                line += (f"; its transactions held {counted['mean_batch']:.1f} writes on average, "
                         f"{counted['largest_batch']} at most, {counted['commits_per_s']:,.0f} commits/s")
            lines.append(line)
    return "\n".join(lines)


def active_users_table(table: pd.DataFrame, seconds_between_requests: float = 10) -> pd.DataFrame:
    best = table.loc[table.groupby("server")["rps"].idxmax()].copy()
    best["active_users"] = [capacity.active_users(r, seconds_between_requests) for r in best["rps"]]
    return best[["server", "users", "rps", "p99_ms", "active_users"]
                + [c for c in ("generator", "generator_bound", "generator_influenced") if c in best]]


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 002: FastAPI against Axum under a 90/10 mix, the ratio of their peaks."""
    ref, meta = analysis.reference("seed002_read_write_mix")
    peaks = ref.loc[ref.groupby("stack")["rps"].idxmax()].set_index("stack")
    art_ratio = peaks.loc["rust-axum", "rps"] / peaks.loc["python-fastapi", "rps"]
    article = (f"{meta['hardware'].split(';')[0]}, 4 server cores: FastAPI peaks at "
               f"{peaks.loc['python-fastapi', 'rps']:,.0f} rps ({int(peaks.loc['python-fastapi', 'users'])} users), "
               f"Axum at {peaks.loc['rust-axum', 'rps']:,.0f} ({int(peaks.loc['rust-axum', 'users'])}): "
               f"Axum {art_ratio:.1f}×")
    pts = summaries.points(study, x)
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    table = mix_table(pts)
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    parts = [f"{s} {r.rps:,.0f} rps ({int(r.users)} users, p99 {r.p99_ms:,.0f} ms){summaries.limit(r)}"
             for s, r in best.iterrows()]
    here = f"One server core, {summaries.run_shape(pts)}: " + ", ".join(parts)
    if {"rust-axum", "python-fastapi"} <= set(best.index):
        ratio = best.loc["rust-axum", "rps"] / best.loc["python-fastapi", "rps"]
        here += f"; Axum {claims.ratio_words(ratio, art_ratio)}"
    return article, here + "."
