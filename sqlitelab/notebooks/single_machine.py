"""Notebook 05, one machine, one file (seed 004): how far do reads, big pages and writes go?
Everything that is this notebook's, declared once.

The article states no warm-up, repeats or duration: one 10-s run per level, no warm-up. Both
scales drive load with loadgen (`generator`): the article states no load tool, and Locust was
the limit at 45 of the 48 seed levels (2026-11-22) and at every quick level of the compiled stacks
(the quick run of 2026-11-26 at 3e90405), each then measured again with loadgen, which is
what was reported.

Its code: the article's numbers beside each stack's best level per endpoint, the pool beyond the
article, their findings, and its row of the README.
"""
from __future__ import annotations

import json
import math
from types import ModuleType

import pandas as pd

from sqlitelab.infra import servers
from sqlitelab.load.scenarios import scenario_title
from sqlitelab.report import analysis, capacity, claims, findings, summaries
from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, NOT_STATED, ONE_FILE, PIN_WHY, RunView, recorded, software, stack_knob)


# What each constant means: sqlitelab.studies.declarations.
ID = "05-single-machine"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "one machine, seed 004"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "One machine, one file: reads, big pages, writes (seed 004)"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "rps"

SCALES: dict[str, dict] = {
    # Quick: one level between the seed's first two (each endpoint's rate, not a curve), 1-s
    # windows (1.5 s until 2026-12-02: with all six stacks 05 quick took 82 s of its 70), and no
    # wrk cross-check (quick's loadgen is the one calibrated against wrk at set-up; the
    # per-endpoint cross-check is the seed's).
    "quick": {"users_rows": 100_000, "user_bytes": 700, "levels": [32], "duration": 1.0,
              "warmup": 0.3, "repeats": 1, "crosscheck_users": None, "crosscheck_seconds": None,
              "generator": "loadgen", "ceiling_seconds": 2.0},
    # Seed: wrk checks each stack and endpoint for 3 s at 64 users (a rate, not a curve: its 20
    # points of 10 s were 215 of the 968 s of a seed run of 2026-11-26, of 5 s 115 of 878).
    "seed": {"users_rows": 5_000_000, "user_bytes": 700, "levels": [16, 64, 256],
             "duration": 10.0, "warmup": 0.0, "repeats": 1, "crosscheck_users": 64,
             "crosscheck_seconds": 3.0, "generator": "loadgen", "ceiling_seconds": 2.0},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
# Quick: 67.9 s with every bundled stack (make run of 2026-12-02 at d3a296c, fresh clone).
BUDGET_SECONDS: dict[str, float] = {"quick": 70, "seed": 900}  # seed: 863 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words (declarations.experiment_title): none of its own: each is a scenario, or a profile and a scenario, named by theirs.
EXPERIMENT_TITLES: dict = {}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["go-nethttp", "python-fastapi"],
               "users_rows": 2000,
               "levels": [4],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "rps":
        "Look for the endpoints whose bars clear Twitter's and Yahoo's lines on this machine, and "
        "how far each stack is from the article's Go on 8 cores.",
    "mbit":
        "Look for the page endpoint: there bytes, not requests, become the limit.",
    "rss":
        "Look for the stacks whose memory grows with the endpoint's page size: memory, not CPU, "
        "would size their machine.",
}

def article_pool(run: RunView) -> list:
    """go-nethttp's pool (LAB_POOL, from /health) under the run's own `profile`."""
    return run.where(server="go-nethttp", profile=run.param("profile")).knob("pool")


def beyond_pool(run: RunView) -> list:
    """go-nethttp's pool under the run's `beyond_profile`: its second set of rows."""
    return run.where(server="go-nethttp", profile=run.param("beyond_profile")).knob("pool")


# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "004", "“SQLite is the best database in the world” (Go on a laptop)", (
    Detail("machine", "MacBook Air M1 (8 cores), 8 GB", "col:machine", why=MACHINE_WHY),
    Detail("server CPUs", "all 8 cores, shared with the load tool", "cpus:server_pinning", expect=8,
           why=PIN_WHY),
    Detail("software", "Go's database/sql; versions not stated; inferred: mattn/go-sqlite3 (the driver "
           "name `sqlite3` and its DSN key `_journal_mode`)",
           software("go-nethttp", ("go", "mattn/go-sqlite3")), expect=NOT_STATED),
    Detail("Go threads", "GOMAXPROCS = 8 (every core)", stack_knob("go-nethttp", "threads"),
           expect=8, why="GOMAXPROCS follows the server's CPUs here"),
    Detail("DSN: shared cache", "?cache=shared", "knob:cache", expect="shared",
           why="the profile does not set it"),
    Detail("connection pool (Go)", "database/sql's defaults: `sql.Open` and no SetMaxOpenConns — no "
           "limit on open connections, 2 kept idle, each opened when a request needs one",
           article_pool, expect="default",
           why="the profile fixes go-nethttp's pool (LAB_POOL)"),
    Detail("connection pool (Go), beyond the article", "— (the article ran one pool)", beyond_pool,
           expect=None, why="a variant the article did not run, its own rows and table: the "
                            "`beyond_profile` on go-nethttp, a fixed pool of LAB_READERS connections "
                            "(one per server core) opened at start-up"),
    Detail("DSN: journal mode", "&_journal_mode=WAL", "pragma:journal_mode", expect="wal",
           why="another journal mode"),
    Detail("synchronous", "NORMAL (what mattn/go-sqlite3 sets when the DSN does not)",
           "pragma:synchronous", expect="normal", why="another synchronous"),
    Detail("users table", "“millions of users … a file of multiple GBs”",
           lambda r: f"{r.param('users_rows'):,} users, {max(r.col('db_mib')) / 1024:.2f} GiB",
           expect=None, why="the size the scale seeds; the share of it in the page cache is "
                            "reported per level"),
    Detail("read", "SELECT * FROM userinfo WHERE uid = ? (a random uid), a small template",
           "col:scenario", expect=None, only={"scenario": "user-read"},
           why="the lab selects the four columns its templates show; the row's page is read either way"),
    Detail("update", "UPDATE userinfo SET departname = ? WHERE uid = ?, then SELECT *: two autocommit "
           "statements", "col:scenario", expect=None, only={"scenario": "user-update"},
           why="one transaction: the UPDATE (which also counts updates, for the audit) and the re-SELECT"),
    Detail("load tool, users, duration", "not stated", "col:generator", expect=NOT_STATED,
           why="the scale's generator: loadgen at seed scale, where Locust set the pace on these "
               "endpoints (scales.py); Locust, confirmed by loadgen where it did, at quick scale"),
    Detail("warm-up", "not stated", "param:warmup", expect=NOT_STATED),
    Detail("repeats", "not stated", "param:repeats", expect=NOT_STATED),
    Detail("database file", "one users.sqlite for every test, a server program per endpoint",
           recorded("db_mib", ONE_FILE), expect=ONE_FILE,
           why="the run used another arrangement"),
))


# --------------------------------------------------------------------------- its code

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
                         values=["users", "rps", "p99_ms", "error_pct"], sort=False, dropna=False)
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


# The loads seed 004 measures its server against: Twitter's 6,000 tweets a second, and Yahoo's
# 3.6 billion visits a month as an even rate over 30 days (capacity.rps_from_monthly), in whole
# requests as the article counts them (1,388.9 → 1,388)
TWEETS_PER_SECOND = 6000
YAHOO_VISITS_PER_MONTH = 3.6e9


def reference_loads() -> dict[str, float]:
    """Seed 004's reference loads in requests/s, by name: the rps figure's lines, and Yahoo's
    the findings' yardstick."""
    return {"Twitter's tweets": float(TWEETS_PER_SECOND),
            "Yahoo's visits": float(math.floor(capacity.rps_from_monthly(YAHOO_VISITS_PER_MONTH)))}


def single_machine(table: pd.DataFrame, raw: dict, yahoo_rps: float,
                            twitter_rps: float = TWEETS_PER_SECOND) -> str:
    """Seed 004's comparison: the best stack per endpoint against Twitter's and Yahoo's load."""
    lines = []
    for scenario, g in table.groupby("scenario", sort=False):
        b = g.loc[g["rps"].idxmax()]
        note = f" ({analysis.limit_note(b)}: the server can do more)" if analysis.limited(b) else ""
        lines.append(f"- **{scenario_title(scenario)}**: best {servers.stack_title(b.server)} at {b.rps:,.0f} successful req/s{note} — "
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
                    f"{findings.ms(r[f'p99_ms ({name})'])})")
        ratio = (f"{r['rps ratio (beyond / article)']:.2f}× the article's pool's rate"
                 if findings.finished(r["rps (article)"]) and findings.finished(r["rps (beyond)"]) else "no ratio")
        lines.append(f"- **{scenario_title(r['scenario'])}** on {servers.stack_title(r['server'])}: {side('article', ' req/s')} "
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
    """Seed 004: each endpoint's best successful rate per stack (analysis.single_machine_table),
    the article's Go beside the lab's Go (with each pool the run measured, the article's first),
    the failed share where requests failed."""
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
        label = f"Go on {summaries.server_cores(study, x)}" + (f", {pool}" if prof == profile else f", beyond the article: {pool}")
        if prof == order[0]:
            label += (f" ({summaries.run_shape(go_pts)}" + ("" if summaries.repeats(go_pts) > 1 else ": no interval")
                      + "; successful responses/s, a failed answer counts for none)")
        parts.append(label + ": " + ", ".join(
            f"{s} {summaries.once(r.rps)}{summaries.limit(r)} ({claims.share_of(r.rps, art.loc[s, 'rps'])}"
            f"{f'; {r.error_pct:.1f} % failed' if r.error_pct > 0 else ''})"
            for s, r in go.iterrows() if s in art.index))
    if profile is not None:
        table = table[table["profile"] == profile]
    best = table.loc[table.groupby("scenario")["rps"].idxmax()]
    parts.append("best per endpoint: " + ", ".join(f"{r.scenario} {servers.stack_title(r.server)} {summaries.once(r.rps)}{summaries.limit(r)}"
                                                  for r in best.itertuples()))
    c = summaries.ceiling(study, x)
    if c:
        parts.append(f"raw SQLite on the server's core: {summaries.once(c['reads_per_s'])} point reads/s, "
                     f"{summaries.once(c['commits_per_s'])} one-row commits/s")
    return article, summaries.sentences(parts)
