"""Notebook 02, busy errors (seed 001): which settings make "database is locked" vanish?
Everything that is this notebook's, declared once.

Seed scale keeps the article's users (1, 3), 5-s runs and its one run per set-up, with no
warm-up (oha counted from its first request). The article's runs are on Rails (ruby-rails); the
stack comparison has ruby-puma beside it, the same requests without Rails.

Its code: busy errors per set-up and level, the article's runs beside ours, deferred against
immediate transactions, their findings, and its row of the README.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np
import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import STALL_MS, users
from sqlitelab.infra.servers import stack_title
from sqlitelab.report import analysis, claims, findings, summaries
from sqlitelab.studies.method import (
    Article, Detail, GEN_WHY, generator_flags, NOT_STATED, crosscheck_client, mean_at, puma_knobs, puma_shape,
    recorded, software, stack_knob)


# What each constant means: sqlitelab.studies.declarations.
ID = "02-busy-errors"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "busy errors, seed 001"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = '"database is locked": which settings make busy errors vanish? (seed 001)'
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "busy-share"

SCALES: dict[str, dict] = {
    # oha, the article's tool, runs at the article's levels (crosscheck_users) at seed; not at
    # quick, whose loadgen is calibrated against wrk at set-up (the cross-check's 12 points
    # would put the notebook over its budget). Quick's levels: the article's 3 and 16, where
    # every profile that hands SQLITE_BUSY to its client shows it (one user meets no other
    # writer's lock: its share is 0 by construction; the article's own runs keep it), in 1-s
    # windows (02's quick runs of 2026-11-28 with 1 among them took 137-149 s), without warm-up,
    # as the seed's and the article's oha (0.3 s until 2026-12-02: 17 s of the 150 s of sweeps of
    # a quick run with all seven stacks).
    # The clients compared (`client_levels`: the article's stack with a new connection per request,
    # beside its keep-alive points of `profiles`, both cross-checked by oha) at seed only, as the
    # cross-check.
    "quick": {"levels": [3, 16], "article_levels": [1, 3], "duration": 1.0, "warmup": 0.0,
              "repeats": 1, "crosscheck_users": None, "client_levels": []},
    "seed": {"levels": [1, 3, 16], "article_levels": [1, 3], "duration": 5.0, "warmup": 0.0,
             "repeats": 1, "crosscheck_users": [1, 3], "client_levels": [3]},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
# quick: 141.7 s with every bundled stack (make run of 2026-12-02 at d3a296c, fresh clone), 134.4 s
# alone an hour before; seed: 568 s (make seed of 2026-11-28 at 0f6a81e, fresh clone), before the
# clients' three points
BUDGET_SECONDS: dict[str, float] = {"quick": 145, "seed": 640}

SERVER_SPLIT: int | None = None

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = {"profiles"}

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {"article": "the article's set-ups", "profiles": "each profile",
                           "immediate": "immediate transactions",
                           "new-connection": "a new connection per request"}

READS_THE_OTHERS = False

SMOKE: dict = {"servers": ["ruby-rails", "rust-axum"],
               "txn_mode_servers": ["ruby-rails"],
               "levels": [3],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "article-runs":
        "Each of the article's three set-ups beside the share of 'database is locked' it reported: "
        "look for whether the order of the three is the article's.",
    "busy-share":
        "Look for the lines that leave zero as users grow: those profiles hand SQLITE_BUSY to the "
        "client, where a line that stays at zero waits for the lock instead.",
    "latency-distribution":
        "Where each profile's requests sit: a busy handler that waits turns errors into a right-hand "
        "tail of slow requests, so look for the curve that reaches 100 % late.",
    "deferred-vs-immediate":
        "Compare each deferred bar with its immediate one: BEGIN IMMEDIATE takes the write lock "
        "where the busy handler can wait for it, so its bar should be shorter.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "001", "samarbeid, “SQLite in production” (2024)", (
    Detail("machine", "not stated (a local Rails 7.1 app, oha in Docker)", "col:machine",
           expect=NOT_STATED),
    Detail("server", "`rails s` (its log is `rails s | grep Exception`) and a pool of 5 "
           "(RAILS_MAX_THREADS, its database.yml); not stated; inferred: development mode (what "
           "`rails s` runs by default), supported by its ~43 KiB error pages (643.95 KiB over 15 "
           "500s, 601.02 KiB over 14, 0 B when all were 200s: Rails' development exception page), "
           "so Puma single mode with 5 threads (Rails 7.1's generated puma.rb)",
           puma_shape("ruby-rails"), expect="1 × 5", why="set by the notebook"),
    Detail("software", "Rails 7.1 (its `retries:` is “new rails 7.1 flag”); the rest not stated",
           software("ruby-rails", ("ruby", "rails", "puma", "sqlite3-ruby")), expect=None,
           why="Debian 12's packages (no RubyGems here): Rails 6.1 on Ruby 3.1; the profiles' "
               "knobs install 7.1's pragmas and `retries:` (servers/ruby-rails/README.md)"),
    Detail("work per request", "29 ms on average at 1 user (34.6 req/s); not stated; inferred: "
           "Rails in development mode, supported by its ~43 KiB error pages",
           mean_at("mean_ms", 1), expect=None,
           why="ruby-rails is a Rails 6.1 app in production mode (no reloading checks, no debug "
               "pages), so each request does less outside its transactions than the article's "
               "development-mode app, and its transactions collide more often"),
    Detail("transaction shape", "ten statements per request, five of them inserts or updates; "
           "the transactions not stated; inferred: ActiveRecord's default (each `save` in its own "
           "transaction), so each of the 5 records in its own write-first transaction and the 5 "
           "look-ups outside any transaction, supported only by its “ten database queries of which "
           "five insert or update data”",
           "knob:metrics_txn",
           expect="record", why="one transaction per request (SELECT then INSERT, five times)"),
    Detail("development log", "not stated; inferred: Rails' development log, on in the "
           "development mode its ~43 KiB error pages support, writes every SQL statement to "
           "log/development.log as it runs: a file write, which releases Ruby's GVL inside every "
           "transaction, so another thread can run into the lock mid-transaction",
           "knob:sql_log", expect="on",
           why="the server logs no SQL (with `on`, ruby-rails writes each statement's line from "
               "`sql.active_record`, as Rails' development log does, but in production mode)"),
    Detail("request", "POST /metrics?load_test=true, empty body (data generated), --redirect 0",
           "col:scenario", expect="metrics-writes", why="another scenario"),
    Detail("load tool", "oha -c N -z 5s -m POST --latency-correction --disable-keepalive --redirect 0 "
           "(--latency-correction changes nothing without -q)", "col:generator", expect=None,
           why=GEN_WHY),
    Detail("generator flags", "— (one tool, no check of it)", generator_flags, expect=None,
           why="the lab flags a level its generator may have limited, and measures it again where the "
               "notebook confirms (docs/method.md, 'The load generator is never the story')"),
    Detail("the article's tool, here", "oha -c N -z 5s -m POST --latency-correction "
           "--disable-keepalive --redirect 0", crosscheck_client, expect=None,
           why="oha 1.16.0, built from its crate, with the article's flags, runs the cross-check "
               "levels, where a run has them (seed: the article's 1 and 3 users; quick: none), for "
               "`warmup + duration` s with no warm-up of its own; its error shares "
               "beside the lab's generators' in the cross-check table"),
    Detail("keep-alive", "off: a new TCP connection per request (--disable-keepalive)",
           "col:keepalive", expect=False, why="the run kept connections alive"),
    Detail("users", "1 (baseline), then 3", "param:article_levels", expect=[1, 3],
           compare="superset", why="the run's levels do not include the article's"),
    Detail("duration", "5 s per run", "param:duration", expect=5, why="shorter runs at this scale"),
    Detail("warm-up", "none: oha counts from its first request", "param:warmup", expect=0,
           why="the lab warms up before its exact window; the whole-run counts include it"),
    Detail("repeats", "one run per set-up", "param:repeats", expect=1,
           why="the lab repeats each level and sums the status codes over the repeats"),
    Detail("set-ups", "`retries: 1000` → 15 of 168 were 500s; + enhanced adapter → 14 of 150; "
           "adapter with `timeout: 5000` → 0 of 143",
           "col:profile", expect=["rails71-retries+rails-dev", "adapter-retries+rails-dev",
                                  "rails8+rails-dev"], compare="superset",
           why="the run lacks one of the three set-ups"),
    Detail("the adapter and `retries:`", "activerecord-enhancedsqlite3-adapter (≥ 0.4) replaces Rails' "
           "configure_connection, where `retries:` was applied: with `retries:` and no `timeout:` "
           "there is no busy handler at all, and transactions are IMMEDIATE",
           stack_knob("ruby-rails", "busy"), expect=["retries:1000", "none", "sleep_poll:5000"],
           compare="superset", why="the run lacks one of the three busy policies"),
    Detail("the adapter's busy wait", "with `timeout: 5000`: sleeps 60 µs per try (releasing the GVL), "
           "gives up once tries × 60 µs > 5 s", stack_knob("ruby-rails", "busy"), expect=None,
           why="rails8 sleeps 1 ms per try until 5 s have passed (Rails 8's busy_handler_timeout): "
               "the same GVL-releasing wait, polled more coarsely"),
    Detail("journal mode", "WAL (Rails 7.1 default)", "pragma:journal_mode", expect="wal",
           why="the profile sets another"),
    Detail("synchronous", "NORMAL (Rails 7.1 default)", "pragma:synchronous", expect="normal",
           why="the profile sets another"),
    Detail("statistic", "oha's status-code distribution: 500s among all responses of the run",
           recorded("run_counts", "busy 503s among the window's responses, and over the whole run"),
           expect=None, why="the lab's servers answer 503 for SQLITE_BUSY (Rails answered 500)"),
))


# --------------------------------------------------------------------------- its code

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


def busy_totals(summary: pd.DataFrame) -> pd.DataFrame:
    """Per server, profile and transaction mode, the busy 503s of every level together (the
    deferred-vs-immediate figure's bars, and txn_mode's counts): busy_summary's rows summed."""
    keys = [k for k in ("server", "profile", "txn_mode") if k in summary]
    return summary.groupby(keys, as_index=False, sort=False)["busy_errors"].sum()


def _both_modes(summary: pd.DataFrame) -> pd.Series:
    """Whether each row's server and profile ran with both transaction modes."""
    if "txn_mode" not in summary or summary.empty:
        return pd.Series(False, index=summary.index)
    modes = summary.groupby(["server", "profile"])["txn_mode"].transform(lambda m: m.nunique())
    return modes >= 2


def deferred_vs_immediate(summary: pd.DataFrame) -> pd.DataFrame:
    """The deferred-vs-immediate figure's bars: busy_totals of the servers and profiles that ran
    with both transaction modes (txn_mode_servers), so that no missing bar reads as a zero."""
    return busy_totals(summary[_both_modes(summary)])


def deferred_only(summary: pd.DataFrame) -> str:
    """The stacks whose deferred profiles ran without an immediate run beside them (not in
    txn_mode_servers), in words for that figure's caption ("" when none)."""
    if "txn_mode" not in summary or summary.empty:
        return ""
    both = _both_modes(summary)
    ran = summary[summary["txn_mode"] == "deferred"]
    alone = [s for s in dict.fromkeys(ran["server"]) if s not in set(summary.loc[both, "server"])]
    return ("not run with immediate transactions (their deferred runs: the busy-share figure): "
            + ", ".join(stack_title(s) for s in alone)) if alone else ""


def article_runs(summary: pd.DataFrame, ref: pd.DataFrame, checks: pd.DataFrame | None = None,
                 tool: str = "oha") -> pd.DataFrame:
    """Seed 001's runs beside the same set-ups here: per profile and users, the share of
    responses that were errors (the article's 500s, the lab's busy 503s) and req/s; with
    `checks` (the run's crosschecks rows), the article's own client `tool` at the same set-up and
    level beside them: the responses whose outcome it learnt and how many failed."""
    r = ref.assign(article_error_share=ref["status_500"] / (ref["status_200"] + ref["status_500"]),
                   article_responses=ref["status_200"] + ref["status_500"], article_errors=ref["status_500"])
    r = r[["setup", "profile", "users", "rps", "article_error_share", "article_responses", "article_errors"]].rename(
        columns={"rps": "article_rps"})
    here = summary[["profile", "users", "requests", "busy_errors", "busy_share", "run_responses",
                    "run_busy_errors", "run_busy_share", "rps", "mean_ms"]]
    out = r.merge(here, on=["profile", "users"], how="left")
    if checks is not None and len(checks):
        c = checks[(checks["generator"] == tool) & checks["skipped"].isna()] if "skipped" in checks else checks
        c = c.assign(**{f"{tool}_responses": c["ok_responses"].fillna(0) + c["errors"].fillna(0),
                        f"{tool}_errors": c["errors"].fillna(0)})
        out = out.merge(c[["profile", "users", f"{tool}_responses", f"{tool}_errors"]], on=["profile", "users"],
                        how="left")
        out[f"{tool}_share"] = out[f"{tool}_errors"] / out[f"{tool}_responses"].where(out[f"{tool}_responses"] > 0)
    return out


# What a share's interval holds where each set-up ran once, minutes from the next (not interleaved):
# the chance in the count of one run, not how far another run would move the share; in the words
# and on the article-runs figure's error bars.
HOLDS = "the count's chance, not how far another run would move it"
ONE_RUN_EACH = f" (one run each, minutes apart, not interleaved: an interval holds {HOLDS})"
BAR_INTERVALS = f"Error bars: 95 % interval of each share, Wilson's over its requests; one run each, so they hold {HOLDS}."


def article_words(runs: pd.DataFrame, tool: str = "oha", keepalive: bool = False) -> str:
    """The article's set-ups at its highest level, its own client `tool` first (as the article
    ran it), the lab's generator beside it, each share with its interval (Wilson's: a count of
    failed requests) and against the article's (claims.share_words); and whether the article's
    runs, or these, tell one set-up from the next (claims.apart). Where `tool` ran none of them
    (quick scale: no cross-check), the lab's generator leads, and the words say so."""
    top = runs[runs["users"] == runs["users"].max()]
    share, pct = intervals.share_interval, intervals.shown_share
    conn = "a new connection per request" if not keepalive else "connections kept alive"
    level = int(top["users"].iloc[0]) if len(top) else 0
    counts = top.get(f"{tool}_responses", pd.Series(dtype=float))
    ran = bool(counts.notna().any())  # the tool ran at this level (a stall of it is still a run)
    lines, art, lead = [], [], []
    for r in top.itertuples():
        a = share(r.article_errors, r.article_responses)
        art.append(a)
        said, n = [], getattr(r, f"{tool}_responses", None)
        mine = share(r.busy_errors, r.requests) if r.requests == r.requests and r.requests > 0 else None
        if ran:
            t = share(getattr(r, f"{tool}_errors"), n) if n is not None and n == n and n > 0 else None
            lead.append(t)
            said.append(f"{tool} {pct(t)}: {claims.share_words(t, a)}" if t else
                        f"{tool} did not run it" if n is None or n != n else f"{tool}: {findings.STALLED}")
            if mine:
                said.append(f"the lab's generator beside it {pct(mine)}")
        else:
            lead.append(mine)
            if mine:
                said.append(f"the lab's generator {pct(mine)}: {claims.share_words(mine, a)}")
        if r.requests == 0:
            said.append(f"the lab's generator: {findings.STALLED}")
        lines.append(f"- **{r.setup}**: " + ("; ".join(said) or "not measured") + ".")
    who = tool if ran else "the lab's generator"
    for i in range(len(top) - 1):
        first, second = top["setup"].iloc[i], top["setup"].iloc[i + 1]
        theirs = "tell them apart" if claims.apart(art[i], art[i + 1]) else "cannot tell them apart (their intervals overlap)"
        ours = ("has no share of both" if lead[i] is None or lead[i + 1] is None else
                "tells them apart" if claims.apart(lead[i], lead[i + 1]) else "cannot tell them apart either")
        lines.append(f"- {first} → {second}: the article's runs {theirs}; here, {who} {ours}.")
    head = (f"The article's set-ups at {level} users, {tool} (the article's tool, {conn}) first; a share's "
            f"interval is Wilson's over its requests{ONE_RUN_EACH}:" if ran else
            f"The article's set-ups at {level} users, from the lab's generator ({conn}): {tool}, the article's "
            f"tool, ran none of them at this scale (its cross-check runs at seed); a share's interval is "
            f"Wilson's over its requests{ONE_RUN_EACH}:")
    return "\n".join([head, *lines])


def clients(checks: pd.DataFrame, server: str, levels: list, tool: str = "oha",
            keepalive: str = "profiles", new_connection: str = "new-connection") -> str:
    """The same server, set-up and level from two clients — the article's `tool` and the lab's
    generator — with connections kept alive (experiment `keepalive`) and a new connection per
    request (`new_connection`): each client's share of failed requests with its interval
    (Wilson's), and whether the client, or keep-alive, moves it beyond the intervals (claims.apart).
    `checks`: analysis.crosscheck_table of the run; `levels`: the run's `client_levels` (the
    highest is compared). Words where the run measured none of it."""
    if not levels:
        return ("The clients were not compared at this scale (`client_levels` is empty: the seed scale "
                f"measures {stack_title(server)} from both clients, with and without keep-alive).")
    level = max(levels)
    if checks is None or not len(checks) or "responses" not in checks:
        return (f"The clients were not compared: the run has no cross-check by {tool} (the seed scale "
                f"runs one at the article's levels).")
    at = checks[(checks["server"] == server) & (checks["users"] == level)
                & checks["experiment"].isin([keepalive, new_connection]) & checks["responses"].gt(0)]
    if at.empty:
        return f"The clients were not compared: no cross-check of {stack_title(server)} at {level} users."
    pct = intervals.shown_share
    conns = {keepalive: "connections kept alive", new_connection: "a new connection per request"}
    names = {tool: tool, "lab": "the lab's generator"}
    lines = [f"**The client, and keep-alive**: {stack_title(server)} at {level} users, each set-up measured by "
             f"{tool} (the article's tool) and by the lab's generator, with connections kept alive and with a "
             f"new connection per request; a share's interval is Wilson's over its requests{ONE_RUN_EACH}:"]
    for profile, g in at.groupby("profile", sort=False):
        got = {}
        for r in g.itertuples():
            got[(r.experiment, tool if r.generator == tool else "lab")] = \
                intervals.share_interval(r.failed, r.responses)
        said = []
        for e in (new_connection, keepalive):
            if (e, tool) in got and (e, "lab") in got:
                apart = claims.apart(got[(e, tool)], got[(e, "lab")])
                said.append(f"{conns[e]}: {tool} {pct(got[(e, tool)])}, the lab's generator {pct(got[(e, 'lab')])}"
                            f" — {'apart' if apart else 'within each other' + chr(39) + 's interval'}")
        moved = [f"keep-alive moves {names[w]}'s share beyond its interval" for w in (tool, "lab")
                 if (keepalive, w) in got and (new_connection, w) in got
                 and claims.apart(got[(keepalive, w)], got[(new_connection, w)])]
        said_moved = "; ".join(moved)
        tail = (" " + said_moved[:1].upper() + said_moved[1:] + "." if moved else
                " Keep-alive moves neither client's share beyond its interval." if len(said) == 2 else "")
        lines.append(f"- **{profile}**: " + ("; ".join(said) or "not both clients") + "." + tail)
    return "\n".join(lines)


def article_run_bars(runs: pd.DataFrame) -> pd.DataFrame:
    """article_runs() in long form for a grouped bar chart: per set-up and users, the
    article's error share, the article's own client's here (where the run cross-checked with it),
    the lab's generator's in the window and over the whole run; each with its 95 % interval
    (`low`, `high`: Wilson's over its requests, intervals.share_interval; none where no request
    was counted)."""
    label = [f"{setup}, {users(u)}" for setup, u in zip(runs["setup"], runs["users"])]
    tools = [c[:-len("_share")] for c in runs.columns if c.endswith("_share")
             and c not in ("article_error_share", "busy_share", "run_busy_share")]
    parts = [("article", "article_errors", "article_responses"),
             *((f"here, {t} (the article's tool)", f"{t}_errors", f"{t}_responses") for t in tools),
             ("here, the lab's generator, measured interval only", "busy_errors", "requests"),
             ("here, the lab's generator, every request of the run", "run_busy_errors", "run_responses")]

    def bounds(hits: pd.Series, n: pd.Series) -> tuple[list, list]:
        ivs = [intervals.share_interval(k, m) if k == k and m == m and m > 0 else None for k, m in zip(hits, n)]
        return [i.low if i else np.nan for i in ivs], [i.high if i else np.nan for i in ivs]

    out = []
    for name, hits, n in parts:
        low, high = bounds(runs[hits], runs[n])
        share = runs[hits] / runs[n].where(runs[n] > 0)
        out.append(pd.DataFrame({"set-up": label, "measured": name, "error share": share, "low": low, "high": high}))
    return pd.concat(out, ignore_index=True)


def _stall_note(g: pd.DataFrame) -> str:
    st = g[g["stalled_repeats"] > 0]
    if not len(st):
        return ""
    return (f"; **stalls** from {users(st['users'].min())}: {int(st['stalled_repeats'].sum())} of "
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
            lines.append(f"- **{stack_title(server)} · {profile}**: 'database is locked' from {users(first.users)}; "
                         f"worst at {users(worst.users)}, {worst.busy_share:.1%} of requests{stalls}.")
        else:
            lines.append(f"- **{stack_title(server)} · {profile}**: no busy errors in any window "
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
            text = (f"- **{stack_title(server)} · {profile}**: {int(d.busy):,} busy errors with deferred transactions "
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
    checks = x.get("crosschecks", pd.DataFrame())
    checks = checks[(checks["notebook"] == study.ID) & (checks["experiment"] == "article")] if len(checks) else None
    tool = summaries.parameter(study, x, "crosscheck_tool", "oha")
    runs = article_runs(busy_summary(pts), ref, checks, tool)
    runs = runs[runs["users"] == at["users"].iloc[0]]
    share, pct = intervals.share_interval, intervals.shown_share
    parts = []
    if f"{tool}_responses" in runs and runs[f"{tool}_responses"].gt(0).all():
        said = [f"{r.setup} {pct(share(getattr(r, f'{tool}_errors'), getattr(r, f'{tool}_responses')))}"
                for r in runs.itertuples()]
        verdicts = [claims.share_words(share(getattr(r, f"{tool}_errors"), getattr(r, f"{tool}_responses")),
                                       share(r.article_errors, r.article_responses), cite=False)
                    for r in runs.itertuples()]
        parts.append(f"the article's tool, {tool}, as it ran it (a new connection per request): " + " → ".join(said)
                     + " — " + "; ".join(verdicts) + ONE_RUN_EACH)
    parts.append(("The lab's generator beside it" if parts else "The lab's generator (no cross-check stored)")
                 + ": " + " → ".join(f"{r.setup} {pct(share(r.busy_errors, r.requests))}" for r in runs.itertuples()
                                     if r.requests == r.requests and r.requests > 0))
    art = [share(r.article_errors, r.article_responses) for r in runs.itertuples()]
    if len(art) > 1 and not claims.apart(art[0], art[1]):
        parts.append("The article's first two set-ups cannot be told apart by its own runs (their intervals "
                     "overlap): no order between them to reproduce")
    return article, summaries.sentences(parts)
