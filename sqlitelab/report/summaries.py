"""One row per article for the README: what the article found, and what the reference run shows —
every number read from the article's published table (sqlitelab/report/reference/) or from the
exported run (sqlitelab.report.reference_run), every verdict word from sqlitelab.report.claims.

A study names its row with `SUMMARY` (the name of a function here); each function takes the
study and the exported tables and returns (the article, here) as two Markdown cells.
"""
from __future__ import annotations

import json
from types import ModuleType

import pandas as pd

from sqlitelab.report import analysis, capacity, claims

Tables = dict  # reference_run.load(): table name -> DataFrame
NOT_IN_RUN = "not in the reference run"


def points(study: ModuleType, x: Tables) -> pd.DataFrame:
    """The study's headline points in the export (the experiments that reproduce its article)."""
    pts = x["points"]
    if pts.empty:
        return pts
    pts = pts[pts["notebook"] == study.ID].assign(experiment=lambda d: d["experiment"].fillna(""))
    if study.HEADLINE_EXPERIMENTS is not None:
        pts = pts[pts["experiment"].isin(study.HEADLINE_EXPERIMENTS)]
    return pts.reset_index(drop=True)


def ceiling(study: ModuleType, x: Tables) -> dict | None:
    """The raw-SQLite ceiling the study's run measured on the server's core, or None."""
    c = x.get("ceilings", pd.DataFrame())
    c = c[c["notebook"] == study.ID] if len(c) else c
    return c.iloc[0].to_dict() if len(c) else None


def _run_shape(pts: pd.DataFrame) -> str:
    """"3 × 10 s per level", "one 10-s window per level", or the windows' range where a level
    ran until a count of requests (its window then varies)."""
    reps = int(pts["repeat"].max()) if "repeat" in pts and len(pts) else 1
    w = pts["window_s"] if "window_s" in pts and len(pts) else pd.Series([float("nan")])
    if w.max() > 1.05 * w.min():
        window = f"{w.min():.1f}–{w.max():.1f}-s windows"
        return f"{reps} × {window} per level" if reps > 1 else f"{window}, one per level"
    return f"{reps} × {w.median():g} s per level" if reps > 1 else f"one {w.median():g}-s window per level"


def _sentences(parts: list[str]) -> str:
    """Parts joined as sentences, each begun with a capital."""
    return " ".join(p[0].upper() + p[1:] + ("" if p.endswith(".") else ".") for p in parts if p)


def _limit(row) -> str:
    row = row._asdict() if hasattr(row, "_asdict") else row  # itertuples' rows
    return f" ({analysis.limit_note(row)}: at least this)" if analysis.limited(row) else ""


def linear_writes(study: ModuleType, x: Tables) -> tuple[str, str]:
    """Seed 000: Puma's writes/s as users rise, where it collapses, and the napkin math."""
    ref, meta = analysis.reference("seed000_linear_writes")
    art_curve = dict(zip(ref["users"], ref["rps"]))
    art_peak = ref.loc[ref["rps"].idxmax()]
    article = (f"Puma 10 × 3, Rails 7.1 ({meta['hardware'].split(';')[0]}), `hey -z 10s`, 3 runs per level: "
               f"{claims.collapse_words(art_curve)}; average {art_peak.mean_ms:g} ms at the peak; "
               f"napkin math on ~2,500/s: 35 M writes/day, 1 M DAU")
    pts = points(study, x)
    if pts.empty:
        return article, NOT_IN_RUN
    table = analysis.seed_table(pts)
    puma = table[table["server"] == "ruby-puma"]
    parts = []
    for profile, g in puma.groupby("profile", sort=True):
        curve = dict(zip(g["users"], g["rps"]))
        busy = g[g["busy_errors"] > 0]
        best = g.loc[g["rps"].idxmax()]
        knobs = pts.loc[(pts["server"] == "ruby-puma") & (pts["profile"] == profile), "knobs"]
        yjit = {json.loads(k).get("yjit") for k in knobs.dropna()} - {None}
        yjit_words = f", YJIT {'/'.join(sorted(yjit))}" if yjit else ""  # runs before LAB_YJIT: unknown
        text = (f"Puma (`{profile}`{yjit_words}), {_run_shape(pts[pts['server'] == 'ruby-puma'])}: "
                f"{claims.collapse_words(curve)}{_limit(best)} — {claims.shape_words(curve, art_curve)}")
        text += (f"; 'database is locked' from {int(busy['users'].min())} user(s)" if len(busy)
                 else "; no 'database is locked' at any level")
        dau = capacity.daily_active_users(best["rps"])
        text += (f". Napkin math on that peak: {capacity.requests_per_day(best['rps']) / 1e6:,.1f} M writes/day, "
                 f"{dau / 1e6:,.2f} M DAU")
        parts.append(text)
    checks = x.get("crosschecks", pd.DataFrame())
    hey = checks[(checks["notebook"] == study.ID) & (checks["generator"] == "hey")
                 & (checks["server"] == "ruby-puma") & checks["skipped"].isna()] if len(checks) else checks
    if len(hey):
        lab = pts[pts["server"] == "ruby-puma"].groupby("users")["hey_rps"].mean()
        parts.append("hey itself on Puma (the article's tool, here): " + ", ".join(
            f"{r.rps:,.0f}/s at {r.users} user{'s' if r.users != 1 else ''}" + (f" (the lab's generator, counted as hey counts: "
                                                   f"{lab[r.users]:,.0f}/s)" if r.users in lab else "")
            for r in hey.sort_values("users").itertuples()))
    others = analysis.peak(table[table["server"] != "ruby-puma"])
    if len(others):
        parts.append("Peaks in the exact window: " + ", ".join(
            f"{r.server} {r.peak_rps:,.0f}/s ({r.peak_users} users)" for r in others.itertuples()))
    c = ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {c['commits_per_s']:,.0f} one-row commits/s "
                     f"(synchronous={c.get('synchronous', 'normal')})")
    return article, _sentences(parts)


def busy_errors(study: ModuleType, x: Tables) -> tuple[str, str]:
    """Seed 001: the share of 'database is locked' per set-up, the article's three runs."""
    ref, meta = analysis.reference("seed001_busy_errors")
    ref = ref.assign(share=ref["status_500"] / (ref["status_200"] + ref["status_500"]))
    at = ref[ref["users"] == ref["users"].max()]
    article = (f"`rails s` (inferred: development mode, Puma 1 × 5), oha without keep-alive, {int(at['users'].iloc[0])} users: "
               + " → ".join(f"{r.setup} {r.share:.1%}" for r in at.itertuples()))
    pts = x["points"]
    pts = pts[(pts["notebook"] == study.ID) & (pts["experiment"] == "article")] if len(pts) else pts
    if pts.empty:
        return article, NOT_IN_RUN
    runs = analysis.article_runs(analysis.busy_summary(pts), ref)
    runs = runs[runs["users"] == at["users"].iloc[0]]
    shares = [(r.setup, r.busy_share, r.article_error_share) for r in runs.itertuples()]
    here = "The same set-ups: " + " → ".join(f"{s} {b:.2%}" for s, b, _ in shares)
    order_same = (sorted(range(len(shares)), key=lambda i: shares[i][1])
                  == sorted(range(len(shares)), key=lambda i: shares[i][2]))
    zero_same = [(b == 0) == (a == 0) for _, b, a in shares]
    here += (" — the article's order and its zero" if order_same and all(zero_same) else
             " — not the article's order" if not order_same else " — the article's order, not its zeros")
    return article, here + "."


def read_write_mix(study: ModuleType, x: Tables) -> tuple[str, str]:
    """Seed 002: FastAPI against Axum under a 90/10 mix, the ratio of their peaks."""
    ref, meta = analysis.reference("seed002_read_write_mix")
    peaks = ref.loc[ref.groupby("stack")["rps"].idxmax()].set_index("stack")
    art_ratio = peaks.loc["rust-axum", "rps"] / peaks.loc["python-fastapi", "rps"]
    article = (f"{meta['hardware'].split(';')[0]}, 4 server cores: FastAPI peaks at "
               f"{peaks.loc['python-fastapi', 'rps']:,.0f} rps ({int(peaks.loc['python-fastapi', 'users'])} users), "
               f"Axum at {peaks.loc['rust-axum', 'rps']:,.0f} ({int(peaks.loc['rust-axum', 'users'])}): "
               f"Axum {art_ratio:.1f}×")
    pts = points(study, x)
    if pts.empty:
        return article, NOT_IN_RUN
    table = analysis.mix_table(pts)
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    parts = [f"{s} {r.rps:,.0f} rps ({int(r.users)} users, p99 {r.p99_ms:,.0f} ms){_limit(r)}"
             for s, r in best.iterrows()]
    here = f"One server core, {_run_shape(pts)}: " + ", ".join(parts)
    if {"rust-axum", "python-fastapi"} <= set(best.index):
        ratio = best.loc["rust-axum", "rps"] / best.loc["python-fastapi", "rps"]
        here += f"; Axum {claims.ratio_words(ratio, art_ratio)}"
    return article, here + "."


def sqlite_as_buffer(study: ModuleType, x: Tables) -> tuple[str, str]:
    """Seed 003: records/s by rows per transaction, and the article's 10-row collapse."""
    ref, meta = analysis.reference("seed003_buffer")
    art = ref.dropna(subset=["records_per_s"])
    a = art.loc[art["records_per_s"].idxmax()]
    pairs = art.pivot_table(index="records", columns="rows_per_txn", values="records_per_s")
    art_ratio = (pairs[10] / pairs[25]).dropna()
    article = (f"“my MacBook”: peak {a.records_per_s:,.0f} records/s ({int(a.rows_per_txn)} rows per "
               f"transaction, {int(a.records):,} records); 10 rows at {art_ratio.min():.2f}–{art_ratio.max():.2f}× "
               f"the 25-row rate")
    bf = x.get("buffer_points", pd.DataFrame())
    bf = bf[bf["notebook"] == study.ID] if len(bf) else bf
    if bf.empty:
        return article, NOT_IN_RUN
    done = bf[bf["skipped"].isna()] if "skipped" in bf else bf
    pub = done[(done["method"] == "article") & (done["variant"] == "as_published")]
    parts = []
    if len(pub):
        g = pub.groupby(["rows_per_txn", "total"])["records_per_s"].median()
        (rpt, total), best = g.idxmax(), g.max()
        parts.append(f"The author's method peaks at {best:,.0f} records/s ({rpt} rows, {total:,} records), "
                     f"{best / a.records_per_s:.2f}× the article's peak")
        w = pub.pivot_table(index="total", columns="rows_per_txn", values="records_per_s", aggfunc="median")
        if {10, 25} <= set(w.columns):
            r = (w[10] / w[25]).dropna()
            collapsed = [t for t, v in r.items() if claims.halves(v)]
            parts.append(f"10 rows at {r.min():.2f}–{r.max():.2f}× the 25-row rate from {int(r.index.min()):,} to "
                         f"{int(r.index.max()):,} records: "
                         + (f"the article's collapse reproduces at {', '.join(f'{int(t):,}' for t in collapsed)}"
                            if collapsed else "the article's 10-row collapse does not reproduce"))
    tuned = done[done["method"] == "tuned"]
    if len(tuned):
        parts.append(f"the lab's writer: up to {tuned['records_per_s'].max():,.0f} records/s, "
                     f"{int(tuned['total'].max()):,} records with {tuned['peak_rss_mib'].max():,.0f} MiB at its peak")
    return article, _sentences(parts)


def _parameter(study: ModuleType, x: Tables, name: str):
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


def single_machine(study: ModuleType, x: Tables) -> tuple[str, str]:
    """Seed 004: each endpoint's best rate per stack, the article's Go beside the lab's Go (with
    each pool the run measured, the article's first), the failed share where requests failed."""
    ref, meta = analysis.reference("seed004_single_machine")
    article = (f"Go on a {meta['hardware'].split(';')[0]}: " +
               ", ".join(f"{r.scenario} {r.rps / 1000:,.0f} K" for r in ref.itertuples()) + " req/s")
    pts = points(study, x)
    if pts.empty:
        return article, NOT_IN_RUN
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
            f"{s} {r.rps:,.0f}{_limit(r)} ({claims.share_of(r.rps, art.loc[s, 'rps'])}"
            f"{f'; {r.error_pct:.1f} % failed' if r.error_pct > 0 else ''})"
            for s, r in go.iterrows() if s in art.index))
    if profile is not None:
        table = table[table["profile"] == profile]
    best = table.loc[table.groupby("scenario")["rps"].idxmax()]
    parts.append("best per endpoint: " + ", ".join(f"{r.scenario} {r.server} {r.rps:,.0f}{_limit(r)}"
                                                  for r in best.itertuples()))
    c = ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {c['reads_per_s']:,.0f} point reads/s, "
                     f"{c['commits_per_s']:,.0f} one-row commits/s")
    return article, _sentences(parts)
