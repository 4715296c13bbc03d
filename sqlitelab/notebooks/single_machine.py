"""Notebook 05, a single machine (seed 004): the article's numbers beside each stack's best level
per endpoint, the pool beyond the article, their findings, and its row of the README.
"""
from __future__ import annotations

import json
from types import ModuleType

import pandas as pd

from sqlitelab.infra import servers
from sqlitelab.report import analysis, claims, findings, summaries


def beyond_table(df: pd.DataFrame, profile: str, beyond: str | None) -> pd.DataFrame:
    """Per stack that ran both, and endpoint: the best level's rate, p99 and failed share under
    the article's `profile` beside the same under `beyond` (a variant beyond the article), and
    the ratio of the two rates; empty without a `beyond`."""
    if beyond is None:
        return pd.DataFrame()
    t = analysis.single_machine_table(df[df["profile"].isin([profile, beyond])])
    both = t.groupby(["server", "scenario"])["profile"].transform("nunique") == 2
    t = t[both]
    if t.empty:
        return pd.DataFrame()
    wide = t.pivot_table(index=["server", "scenario"], columns="profile",
                         values=["users", "rps", "p99_ms", "error_pct"], sort=False)
    out = pd.DataFrame(index=wide.index)
    for name, prof in (("article", profile), ("beyond", beyond)):
        for col in ("users", "rps", "p99_ms", "error_pct"):
            out[f"{col} ({name})"] = wide[(col, prof)]
    out["rps ratio (beyond / article)"] = out["rps (beyond)"] / out["rps (article)"]
    return out.reset_index()


def with_article(table: pd.DataFrame, ref: pd.DataFrame, name: str) -> pd.DataFrame:
    """single_machine_table() plus the article's numbers as one more `server` named `name`."""
    art = pd.DataFrame({"server": name, "scenario": ref["scenario"], "rps": ref["rps"],
                        "mbit_s": ref["mbit_s"], "server_rss_mb": ref["rss_mb"],
                        "generator_bound": False, "generator_influenced": False})
    return pd.concat([art, table], ignore_index=True)


def single_machine(table: pd.DataFrame, raw: dict, yahoo_rps: float,
                            twitter_rps: float = 6000) -> str:
    """Seed 004's comparison: the best stack per endpoint against Twitter's and Yahoo's load."""
    lines = []
    for scenario, g in table.groupby("scenario", sort=False):
        b = g.loc[g["rps"].idxmax()]
        note = f" ({analysis.limit_note(b)}: the server can do more)" if analysis.limited(b) else ""
        lines.append(f"- **{scenario}**: best {b.server} at {b.rps:,.0f} req/s{note} — "
                     f"{b.rps / twitter_rps:.1f}× Twitter's {twitter_rps / 1000:g} K tweets/s, "
                     f"{b.rps / yahoo_rps:.1f}× Yahoo's {yahoo_rps:,.0f} req/s; "
                     f"{b.mbit_s:,.0f} Mbit/s, {b.server_rss_mb:,.0f} MB RSS.")
    lines.append(f"- The ceiling: raw SQLite on the server's core does {raw['reads_per_s']:,.0f} "
                 f"point reads/s and {raw['commits_per_s']:,.0f} one-row commits/s (no HTTP).")
    return "\n".join(lines)


def beyond(table: pd.DataFrame, profile: str | None, beyond_profile: str | None) -> str:
    """Seed 004's pool, beyond the article: per stack and endpoint (beyond_table), the
    article's pool beside the variant's — rates, failed shares and the ratio, no verdict."""
    if not beyond_profile or table is None or table.empty:
        return "No variant beyond the article was run (`beyond_profile` is None, or no stack takes it)."
    a, b = servers.profile_title(profile), servers.profile_title(beyond_profile)
    lines = [f"**Beyond the article**: each endpoint at its best level with *{a}* (the article's "
             f"pool) and with *{b}*:"]
    for r in table.to_dict("records"):
        def side(name, unit=""):
            if not findings.finished(r[f"rps ({name})"]):
                return findings.STALLED
            return (f"{r[f'rps ({name})']:,.0f}{unit} ({r[f'error_pct ({name})']:.1f} % failed, p99 "
                    f"{r[f'p99_ms ({name})']:,.1f} ms)")
        ratio = (f"{r['rps ratio (beyond / article)']:.2f}× the article's pool's rate"
                 if findings.finished(r["rps (article)"]) and findings.finished(r["rps (beyond)"]) else "no ratio")
        lines.append(f"- **{r['scenario']}** on {r['server']}: {side('article', ' req/s')} "
                     f"against {side('beyond')}: {ratio}.")
    return "\n".join(lines)


def _parameter(study: ModuleType, x: summaries.Tables, name: str):
    """A notebook parameter of the study's exported run (its runs rows' `parameters`), or None."""
    runs = x.get("runs", pd.DataFrame())
    runs = runs[runs["notebook"] == study.ID] if len(runs) else runs
    for text in runs.get("parameters", pd.Series(dtype=object)).dropna():
        value = json.loads(text).get(name)
        if value is not None:
            return value
    return None


def _pool(knobs) -> str:
    """go-nethttp's pool as its /health reported it. A run from before LAB_POOL existed (commit
    bfdbb17) reports none: its server had only the fixed pool, one connection per core."""
    pool = json.loads(knobs).get("pool") if isinstance(knobs, str) else None
    return {"default": "database/sql's default pool", "fixed": "a fixed pool"}.get(pool or "fixed", pool)


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 004: each endpoint's best rate per stack, the article's Go beside the lab's Go (with
    each pool the run measured, the article's first), the failed share where requests failed."""
    ref, meta = analysis.reference("seed004_single_machine")
    article = (f"Go on a {meta['hardware'].split(';')[0]}: " +
               ", ".join(f"{r.scenario} {r.rps / 1000:,.0f} K" for r in ref.itertuples()) + " req/s")
    pts = summaries.points(study, x)
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    profile = _parameter(study, x, "profile")
    table = analysis.single_machine_table(pts)
    art = ref.set_index("scenario")
    parts = []
    go_pts = pts[pts["server"] == "go-nethttp"]
    order = sorted(go_pts["profile"].unique(), key=lambda p: (p != profile, p))
    for prof in order:
        go = table[(table["server"] == "go-nethttp") & (table["profile"] == prof)].set_index("scenario")
        pool = _pool(go_pts.loc[go_pts["profile"] == prof, "knobs"].iloc[0])
        label = "Go on one server core" + (f", {pool}" if prof == profile else f", beyond the article: {pool}")
        parts.append(label + ": " + ", ".join(
            f"{s} {r.rps:,.0f}{summaries.limit(r)} ({claims.share_of(r.rps, art.loc[s, 'rps'])}"
            f"{f'; {r.error_pct:.1f} % failed' if r.error_pct > 0 else ''})"
            for s, r in go.iterrows() if s in art.index))
    if profile is not None:
        table = table[table["profile"] == profile]
    best = table.loc[table.groupby("scenario")["rps"].idxmax()]
    parts.append("best per endpoint: " + ", ".join(f"{r.scenario} {r.server} {r.rps:,.0f}{summaries.limit(r)}"
                                                  for r in best.itertuples()))
    c = summaries.ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {c['reads_per_s']:,.0f} point reads/s, "
                     f"{c['commits_per_s']:,.0f} one-row commits/s")
    return article, summaries.sentences(parts)
