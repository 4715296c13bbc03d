"""Notebook 02, "database is locked" (seed 001): busy errors per set-up and level, the article's
runs beside ours, deferred against immediate transactions, their findings, and its row of the
README.
"""
from __future__ import annotations

from types import ModuleType

import pandas as pd

from sqlitelab.core.vocabulary import STALL_MS
from sqlitelab.report import analysis, summaries


def run_busy(run_counts) -> int:
    """Busy 503s over a level's whole run (warm-up, window and overrun), from `run_counts`."""
    return analysis.run_status(run_counts, lambda st: st == 503)


def busy_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per server, profile, transaction mode and users: requests, busy 503s and their share
    in the windows, busy 503s over the whole runs, and stalls (a repeat where no request
    completed in the window, or one finished ≥ STALL_MS after it)."""
    keys = [k for k in ("server", "profile", "txn_mode", "users") if k in df]
    overrun = df["max_overrun_ms"].fillna(0) if "max_overrun_ms" in df else 0.0
    d = df.assign(
        _run_busy=[run_busy(v) for v in df["run_counts"]] if "run_counts" in df else 0,
        _run_all=[analysis.run_status(v, lambda st: True) for v in df["run_counts"]] if "run_counts" in df else 0,
        _overrun=overrun, _stalled=(df["requests"] <= 0) | (overrun >= STALL_MS),
        **({} if "mean_ms" in df else {"mean_ms": float("nan")}))
    out = analysis.over_repeats(d, keys, ["requests", "busy_errors", "errors", "run_busy_errors",
                                 "run_responses", "rps", "mean_ms", "p99_ms", "max_ms",
                                 "stalled_repeats", "max_overrun_ms"],
                       run_busy_errors=("_run_busy", "sum"), run_responses=("_run_all", "sum"),
                       stalled_repeats=("_stalled", "sum"), max_overrun_ms=("_overrun", "max"))
    out.insert(list(out.columns).index("errors"), "other_errors", out["errors"] - out["busy_errors"])
    out = out.drop(columns="errors")
    out["busy_share"] = out["busy_errors"] / out["requests"].where(out["requests"] > 0)
    out["run_busy_share"] = out["run_busy_errors"] / out["run_responses"].where(out["run_responses"] > 0)
    return out


def article_runs(summary: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's runs beside the same set-ups here: per profile and users, the share of
    responses that were errors (the article's 500s, the lab's busy 503s) and req/s."""
    r = ref.assign(article_error_share=ref["status_500"] / (ref["status_200"] + ref["status_500"]))
    r = r[["setup", "profile", "users", "rps", "article_error_share"]].rename(
        columns={"rps": "article_rps"})
    here = summary[["profile", "users", "requests", "busy_errors", "busy_share", "run_responses",
                    "run_busy_errors", "run_busy_share", "rps", "mean_ms"]]
    return r.merge(here, on=["profile", "users"], how="left")


def article_run_bars(runs: pd.DataFrame) -> pd.DataFrame:
    """article_runs() in long form for a grouped bar chart: per set-up and users, the
    article's error share, ours in the window and ours over the whole run."""
    label = [f"{setup}, {int(u)} user{'' if int(u) == 1 else 's'}" for setup, u in zip(runs["setup"], runs["users"])]
    parts = [("article", runs["article_error_share"]), ("here, measured interval only", runs["busy_share"]),
             ("here, every request of the run", runs["run_busy_share"])]
    return pd.concat([pd.DataFrame({"set-up": label, "measured": name, "error share": v})
                      for name, v in parts], ignore_index=True)


def _stall_note(g: pd.DataFrame) -> str:
    st = g[g["stalled_repeats"] > 0]
    if not len(st):
        return ""
    return (f"; **stalls** from {int(st['users'].min())} user(s): {int(st['stalled_repeats'].sum())} of "
            f"{int(g.loc[g['users'] >= st['users'].min(), 'repeats'].sum())} repeats had a request "
            f"finish up to {st['max_overrun_ms'].max() / 1000:.1f} s after the window or none finish in it")


def busy(summary: pd.DataFrame) -> str:
    lines = []
    for (server, profile), g in summary.groupby(["server", "profile"], sort=True):
        erring = g[g["busy_errors"] > 0]
        stalls = _stall_note(g)
        if len(erring):
            first = erring.iloc[0]
            worst = erring.loc[erring["busy_share"].idxmax()]
            lines.append(f"- **{server} · {profile}**: 'database is locked' from {int(first.users)} "
                         f"user(s); worst at {int(worst.users)} users, {worst.busy_share:.1%} of "
                         f"requests{stalls}.")
        else:
            lines.append(f"- **{server} · {profile}**: no busy errors in any window "
                         f"({int(g['requests'].sum()):,} requests){stalls}.")
    return "\n".join(lines)


def txn_mode(summary: pd.DataFrame) -> str:
    """Deferred vs immediate under the same busy policy: the cause of the errors — and, with
    a busy wait that blocks its worker, why immediate alone is not the cure."""
    lines = []
    if "txn_mode" not in summary:
        return ""
    for (server, profile), g in summary.groupby(["server", "profile"], sort=True):
        by = g.groupby("txn_mode").agg(busy=("busy_errors", "sum"), run_busy=("run_busy_errors", "sum"),
                                       rps=("rps", "mean"), stalled=("stalled_repeats", "sum"),
                                       repeats=("repeats", "sum"))
        if {"deferred", "immediate"} <= set(by.index):
            d, i = by.loc["deferred"], by.loc["immediate"]
            text = (f"- **{server} · {profile}**: {int(d.busy):,} busy errors with deferred transactions "
                    f"({d.rps:,.0f} req/s on average over the levels), {int(i.busy):,} with immediate "
                    f"({i.rps:,.0f} req/s)")
            if i.stalled:
                text += (f" — but immediate **stalled** in {int(i.stalled)} of {int(i.repeats)} repeats, "
                         f"and {int(i.run_busy - i.busy):,} busy errors came outside the windows (after "
                         f"the stall): the busy wait blocks its worker")
            lines.append(text + ".")
    return "\n".join(lines)


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 001: the share of 'database is locked' per set-up, the article's three runs."""
    ref, meta = analysis.reference("seed001_busy_errors")
    ref = ref.assign(share=ref["status_500"] / (ref["status_200"] + ref["status_500"]))
    at = ref[ref["users"] == ref["users"].max()]
    article = (f"`rails s` (inferred: development mode, Puma 1 × 5), oha without keep-alive, {int(at['users'].iloc[0])} users: "
               + " → ".join(f"{r.setup} {r.share:.1%}" for r in at.itertuples()))
    pts = x["points"]
    pts = pts[(pts["notebook"] == study.ID) & (pts["experiment"] == "article")] if len(pts) else pts
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    runs = article_runs(busy_summary(pts), ref)
    runs = runs[runs["users"] == at["users"].iloc[0]]
    shares = [(r.setup, r.busy_share, r.article_error_share) for r in runs.itertuples()]
    here = "The same set-ups: " + " → ".join(f"{s} {b:.2%}" for s, b, _ in shares)
    order_same = (sorted(range(len(shares)), key=lambda i: shares[i][1])
                  == sorted(range(len(shares)), key=lambda i: shares[i][2]))
    zero_same = [(b == 0) == (a == 0) for _, b, a in shares]
    here += (" — the article's order and its zero" if order_same and all(zero_same) else
             " — not the article's order" if not order_same else " — the article's order, not its zeros")
    return article, here + "."
