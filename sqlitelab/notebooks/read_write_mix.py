"""Notebook 03, reads and writes together (seed 002): FastAPI vs Axum (and Go, Ruby) with a
single writer. Everything that is this notebook's, declared once.

Seed scale keeps the article's workers, 50,000 requests per level and one run each, with no
warm-up (its tool counted every request after its 1,000 rows); the 16 `fine_levels` the article
did not run (scales.FINE_LEVELS) only on request. Quick shows the curves' shape in windows of
seconds (SCALES says why).

Its code: the mix table per stack and level, the article's two peaks measured again in
interleaved rounds and their ratio with its interval, active users at a think time, the stacks'
ratios and the write paths in words, and its row of the README.
"""
from __future__ import annotations

from types import ModuleType

import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.infra import servers
from sqlitelab.infra.servers import knob_value_title, stack_title
from sqlitelab.load.verdicts import writer_batches
from sqlitelab.report import analysis, capacity, claims, findings, summaries
from sqlitelab.studies.method import (
    Article, Detail, GEN_WHY, generator_flags, MACHINE_WHY, NOT_STATED, PIN_WHY, software, window)


# What each constant means: sqlitelab.studies.declarations.
ID = "03-read-write-mix"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "read/write mix, seed 002"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "Reads and writes together, a single writer, group commit (seed 002)"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "write-paths"

SCALES: dict[str, dict] = {
    # Quick: the article's lowest, middle and highest stretch of levels (8, 32, 128: each stack's
    # rise, knee and plateau), each a 1-s window rather than the article's count of requests:
    # a window of seconds lets one loadgen process step through a stack's levels (sweep's
    # steps_levels; a count needs a process per level) and makes every stack's window the same
    # length (5,000 requests, the count until 2026-11-26, lasted 0.19 s on Rust and 1.1 s on
    # Python at the article's levels, and the windows were 21-26 % of the sweeps' time: issue 32).
    # Load from loadgen, as the article's own client was compiled and async: Locust set the pace
    # at every quick level of Go, Rust and Ruby (the quick run of 2026-11-26 at 3e90405), each then
    # measured again with loadgen. A 0.3-s warm-up, as the other quick notebooks': 0.5 s put it at
    # 150 s and over (2026-11-26). The sweeps beyond the article (shares, paths) take the same
    # window; the article's 10 % share is the main sweep's 32-user point (share_line). wrk's
    # cross-check counts whole seconds after a warm-up of at least one: 1 s of it is the least.
    # At seed too the synchronous=NORMAL sweep runs two levels (at all five it took 344 s of the
    # 1,170 s of the seed run of 2026-11-28 at d027339), and loadgen drives every level: in that run
    # Locust set the pace at 60 of 74 points, each then measured again with loadgen.
    # `rounds` (1 at both scales) runs every other sweep in interleaved rounds too, each round every
    # stack started afresh in an order shuffled from `order_seed`: what the power check asks for
    # (`python -m sqlitelab.compare --power 03 -p rounds 4 -p order_seed 1`), its points then judged
    # by their ratios' intervals and the A/A band (report.compare.interval_verdict).
    # The peaks sweep: the article's two stacks at their peak levels again, interleaved, in rounds
    # until the rate's 95 % interval is within ±5 % or the rounds run out (the README's ratio).
    # So that quick holds every bundled stack (with all six, 03 quick took 205 s of its 150 on
    # 2026-12-02 at 9ee6dc4, 66 points), its windows are 1 s (1.5 s until then), its share sweep
    # is all writes alone (beside the main sweep's 10 % at 32 users) and its synchronous=NORMAL
    # sweep the top level alone.
    "quick": {"levels": [8, 32, 128], "requests": None, "duration": 1.0, "warmup": 0.3, "repeats": 1,
              "rounds": 1, "order_seed": None,
              "peak_rounds": 3, "peak_half_width": 0.05,
              "fine_levels": [], "write_shares": [1.0], "share_users": 32,
              "synchronous_levels": [128],
              "paths_users": 64, "beyond_requests": None, "crosscheck_users": 32,
              "crosscheck_seconds": 1.0, "ceiling_seconds": 1.0, "generator": "loadgen"},
    "seed": {"levels": [8, 32, 64, 128, 256], "requests": 50_000, "duration": None, "warmup": 0.0,
             "repeats": 1, "rounds": 1, "order_seed": None, "peak_rounds": 6, "peak_half_width": 0.05,
             "fine_levels": [],
             "write_shares": [0.0, 0.1, 0.5, 1.0], "share_users": 64, "paths_users": 128,
             "synchronous_levels": [32, 128],
             "beyond_requests": 20_000, "crosscheck_users": 64, "crosscheck_seconds": 10.0,
             "ceiling_seconds": 2.0, "generator": "loadgen"},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget). Quick: 135.6 s
# with every bundled stack (make run of 2026-12-02 at d3a296c, fresh clone). Seed: 468 s
# (make seed of 2026-11-28 at 0f6a81e, fresh clone), loadgen at every level, the peaks sweep
# stopped after 2 of its 6 rounds; each further round costs about 20 s (FastAPI's 50,000
# requests at ~3,300/s, Axum's), so 4 more: ~550 s.
BUDGET_SECONDS: dict[str, float] = {"quick": 145, "seed": 560}

SERVER_SPLIT: int | None = 4

IN_COLLECTION = True
HEADLINE_EXPERIMENTS: set[str] | None = {"article"}

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {"article": "the article's levels", "fine": "the fine levels",
                           "peaks": "the article's peaks again, in rounds",
                           r"synchronous-(\w+)": lambda value: f"synchronous={value.upper()}",
                           r"share-(\d+)": "{}% writes",
                           r"path-(\w+)": lambda path: knob_value_title("write_path", path)}

READS_THE_OTHERS = False

# the smoke run: every sweep, table and figure of the notebook, each at its smallest (two write
# shares still draw the share line; quick's 1,000 requests at 32 and 64 users would be most of it)
SMOKE: dict = {"servers": ["python-fastapi", "rust-axum"],
               "levels": [8],
               "synchronous_levels": [8],
               "requests": 300,
               "repeats": 1,
               "warmup_rows": 50,
               "write_shares": [0.0, 1.0],
               "share_users": 4,
               "paths_users": 4,
               "beyond_requests": 200,
               "crosscheck_users": 4,
               "crosscheck_seconds": 0.5,
               "peak_rounds": 3}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "Look for the level where each stack flattens, and whether the order of the stacks is the "
        "article's (its 4-core lines).",
    "latency":
        "Look for the level where p99 pulls away from p50: from there requests queue behind the one "
        "writer or the CPU.",
    "synchronous":
        "Each stack's two lines: the gap is what syncing the WAL at every commit (FULL) costs "
        "against syncing it at checkpoints only (NORMAL).",
    "throughput-fine":
        "The same mix at 16 levels: look for the knee between the article's five levels, and for "
        "any fall past it.",
    "write-share":
        "How fast each line falls as the share of writes rises: the slope is the price of putting "
        "every write through one writer.",
    "write-paths":
        "Compare the three write paths within each stack: group commit (batch) shares one COMMIT "
        "among the writes that queued, so it should lead when every request writes.",
}

# The article's two stacks, base first: its ratio is the second's peak over the first's.
ARTICLE_STACKS = ("python-fastapi", "rust-axum")


def _statistic(run) -> str:
    """What the run's rates and percentiles are taken over: a count's N requests, or a window's."""
    run.col("p99_ms")  # recorded at all
    return ("rps and p50/p95/p99 over the level's N requests" if run.parameters.get("requests") is not None
            else "rps and p50/p95/p99 over the requests that start and finish in the window")


# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "002", "“SQLite is Enough” (2025)", (
    Detail("machine", "ThinkPad P15v in power-saving mode", "col:machine", why=MACHINE_WHY),
    Detail("server CPUs", "4 (pinned)", "cpus:server_pinning",
           expect=SERVER_SPLIT, why=PIN_WHY + "; this machine has too "
           "few CPUs to give the server 4 and the generator the rest (sqlitelab.core.layout)"),
    Detail("generator CPUs", "16 (the rest)", "cpus:generator_pinning", expect=16, why=PIN_WHY),
    Detail("stacks", "FastAPI + stdlib sqlite3; Axum + rusqlite", "col:server", expect=None,
           why="the lab's own minimal apps on the same frameworks and drivers (servers/python-fastapi, "
               "servers/rust-axum: the contract of servers/openapi.yaml), not the article's code; and "
               "two more stacks beside them (Go, Ruby)"),
    Detail("software (FastAPI)", "not stated", software("python-fastapi", ("python", "fastapi", "uvicorn")),
           expect=NOT_STATED),
    Detail("software (Axum)", "not stated", software("rust-axum", ("rust", "axum", "rusqlite")),
           expect=NOT_STATED),
    Detail("write path", "every write through one dedicated writer thread; reads in parallel",
           "knob:write_path", expect="writer", why="another write path"),
    Detail("journal mode", "WAL", "pragma:journal_mode", expect="wal", why="another journal mode"),
    Detail("synchronous", "not stated; inferred: the drivers' default, FULL (Python's sqlite3 and "
           "rusqlite leave SQLite's default)", "pragma:synchronous", expect="full",
           why="set by the notebook's `synchronous`"),
    Detail("load generator", "own Rust tool (reqwest + tokio), N concurrent async workers",
           "col:generator", expect=None, why=GEN_WHY),
    Detail("generator flags", "— (one tool, no check of it)", generator_flags, expect=None,
           why="the lab flags a level its generator may have limited, and measures it again where the "
               "notebook confirms (docs/method.md, 'The load generator is never the story')"),
    Detail("mix", "90 % GET by primary key / 10 % POST", "param:write_share", expect=0.1,
           why="another write share"),
    Detail("payload", "2 KB", "param:payload_bytes", expect=2048, why="another payload size"),
    Detail("warm-up rows", "1,000 entries written before the run", "param:warmup_rows",
           expect=1000, why="another number of warm-up rows"),
    Detail("workers", "8, 32, 64, 128, 256", "param:levels", expect=[8, 32, 64, 128, 256],
           compare="superset", why="the run's levels do not include all of the article's"),
    Detail("requests per level", "50,000", window, expect=50_000,
           why="fewer requests per level at this scale, or a window of seconds (quick)"),
    Detail("warm-up", "none: after its 1,000 rows the tool sends the level's requests, all counted",
           "param:warmup", expect=0, why="the lab starts counting after a short warm-up"),
    Detail("repeats", "one run per level", "param:repeats", expect=1, why="repeated"),
    Detail("rounds", "one: stack after stack", "param:rounds", expect=1,
           why="in interleaved rounds, every stack started afresh in an order shuffled each round"),
    Detail("statistic", "rps and p50/p95/p99 over each level's requests", _statistic,
           expect=None, why="the lab counts the first N requests (or, without a count, those) that "
                            "start in its window after the warm-up, if any, and finish, from an "
                            "HdrHistogram in µs"),
))


# --------------------------------------------------------------------------- its code

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
        return f"No ratio to {stack_title(base)}'s peak: at every level of {stack_title(base)}, {findings.STALLED}."
    parts, none = [], [s for s, r in best.iterrows() if not findings.finished(r["rps"])]
    for s, r in best.iterrows():
        if s == base or s in none:
            continue
        sign = {(True, False): "≥ ", (False, True): "≤ ", (True, True): "? "}.get(
            (analysis.limited(r), analysis.limited(b)), "")
        parts.append(f"{stack_title(s)} {sign}{r['rps'] / b['rps']:.1f}×")
    text = "".join(parts)
    notes = [n for mark, n in (("≥", "≥: that stack's peak was generator-bound or -influenced, the server can do more"),
                               ("≤", f"≤: {stack_title(base)}'s peak was generator-bound or -influenced"),
                               ("?", "?: both were")) if mark in text]
    stalls = f" At every level of {', '.join(map(stack_title, none))}, {findings.STALLED}." if none else ""
    if not parts:
        return stalls.strip()
    return ", ".join(parts) + f" the peak of {stack_title(base)} ({b['rps']:,.0f} rps)" + \
        (f" ({'; '.join(notes)})." if notes else ".") + stalls


def write_path(paths: pd.DataFrame) -> str:
    """Group commit (`batch`) against the single writer and the connection pool, per stack, and
    how much it grouped: the writes per transaction the writer counted in the batch path's
    windows (mean and largest; verdicts.writer_batches)."""
    pv = paths.pivot_table(index="server", columns="write_path", values="rps")
    lines = []
    for s, r in pv.iterrows():
        if {"batch", "writer", "pool"} <= set(r.index) and r["writer"] > 0 and r["pool"] > 0:
            runs = {p: paths.loc[(paths["server"] == s) & (paths["write_path"] == p), "rps"].tolist()
                    for p in ("batch", "writer", "pool")}
            ivs = [intervals.ratio_interval(runs["batch"], runs[p]) for p in ("writer", "pool")]
            once = min(map(len, runs.values())) < 2
            said = [intervals.rounded(iv, "×") if once else intervals.shown(iv, "×") for iv in ivs]
            line = (f"- **{servers.stack_title(s)}**: group commit {said[0]} the single writer, {said[1]} the pool "
                    f"({' vs '.join(intervals.rounded(intervals.mean_interval(runs[p])) for p in runs)} req/s"
                    + ("; one run each: no interval)" if once else ")"))
            counted = writer_batches(paths[(paths["server"] == s) & (paths["write_path"] == "batch")])
            if counted["mean_batch"] is not None:
                line += (f"; its transactions held {counted['mean_batch']:.1f} writes on average, "
                         f"{counted['largest_batch']} at most, {counted['commits_per_s']:,.0f} commits/s")
            lines.append(line)
    return "\n".join(lines)


def article_ratio() -> float:
    """The article's ratio: its second stack's peak over its first's (its published table)."""
    ref, _ = analysis.reference("seed002_read_write_mix")
    peaks = ref.groupby("stack")["rps"].max()
    return float(peaks[ARTICLE_STACKS[1]] / peaks[ARTICLE_STACKS[0]])


def peak_levels(df: pd.DataFrame) -> dict[str, list[int]]:
    """Each of the article's stacks' best level in the article's sweep (its mean rate over
    repeats): the level the peaks sweep measures again. {} unless both stacks ran and answered."""
    table = mix_table(df) if len(df) else pd.DataFrame(columns=["server", "users", "rps"])
    out = {}
    for stack in ARTICLE_STACKS:
        t = table[table["server"] == stack]
        if len(t) and findings.finished(t["rps"].max()):
            out[stack] = [int(t.loc[t["rps"].idxmax(), "users"])]
    return out if len(out) == len(ARTICLE_STACKS) else {}


def peaks_again(points: pd.DataFrame, most_rounds: int, target: float) -> dict:
    """The peaks sweep's points: each article stack's rate at its level with its 95 % interval
    over the rounds (Student's t), the ratio of the second stack's over the first's (Fieller's),
    the rounds run and what stopped them (the target half-width, or the rounds running out)."""
    if len(points) == 0:
        return {}
    rates = {s: points.loc[points["server"] == s, "rps"].tolist() for s in ARTICLE_STACKS}
    if not all(len(v) for v in rates.values()):
        return {}
    rounds = int(points["round"].max()) if "round" in points else 1
    each = {s: intervals.mean_interval(v) for s, v in rates.items()}
    stalled = [s for s, v in rates.items() if not any(findings.finished(r) for r in v)]
    return {"rates": each, "users": {s: int(points.loc[points["server"] == s, "users"].iloc[0]) for s in rates},
            "ratio": None if stalled else intervals.ratio_interval(rates[ARTICLE_STACKS[1]], rates[ARTICLE_STACKS[0]]),
            "stalled": stalled, "rounds": rounds, "most_rounds": most_rounds, "target": target,
            "stopped_by": "half-width" if rounds < most_rounds else "rounds"}


def rounds_words(again: dict) -> str:
    """How many rounds ran and why they stopped, in words."""
    target = f"±{again['target']:.0%}".replace("%", " %")
    if again["stopped_by"] == "half-width":
        return f"{again['rounds']} interleaved rounds (stopped there: every interval within {target})"
    return (f"{again['rounds']} interleaved rounds (all it may run; an interval was still wider than "
            f"{target})")


def peaks_text(again: dict, article_ratio: float | None = None) -> str:
    """The peaks sweep in a paragraph: each stack's rate with its interval, the ratio with its
    and, given the article's ratio, the verdict its interval allows (claims.ratio_interval_words)."""
    if not again:
        return "The peaks were not measured again (the article's two stacks did not both answer)."
    base, other = ARTICLE_STACKS
    rates = "; ".join(f"{servers.stack_title(s)} " + (f"at {again['users'][s]} users: {findings.STALLED}, in every "
                                                      "round" if s in again["stalled"] else
                                                      f"{intervals.shown(iv, ' rps')} at {again['users'][s]} users")
                      for s, iv in again["rates"].items())
    if again["ratio"] is None:
        return f"The article's peaks measured again in {rounds_words(again)}: {rates}. No ratio."
    ratio = (claims.ratio_interval_words(again["ratio"], article_ratio) if article_ratio
             else intervals.shown(again["ratio"], "×"))
    return (f"The article's peaks measured again in {rounds_words(again)}: {rates}. "
            f"{servers.stack_title(other)} ÷ {servers.stack_title(base)}: {ratio}.")


def share_line(shares: pd.DataFrame, df: pd.DataFrame, write_share: float, users: int) -> pd.DataFrame:
    """The share sweep's points, with the article's sweep's own point at the same users and its
    write share (the article's 10 %) where the share sweep did not run that share: one more point
    of the line, measured under the same profile and scenario."""
    if len(shares) and (shares["write_share"] == write_share).any():
        return shares
    own = df[df["users"] == users].assign(write_share=write_share)
    return pd.concat([shares, own], ignore_index=True).sort_values(["server", "write_share"], kind="stable",
                                                                   ignore_index=True)


def active_users_table(table: pd.DataFrame, seconds_between_requests: float = 10) -> pd.DataFrame:
    best = table.loc[table.groupby("server")["rps"].idxmax()].copy()
    best["active_users"] = [capacity.active_users(r, seconds_between_requests) for r in best["rps"]]
    return best[["server", "users", "rps", "p99_ms", "active_users"]
                + [c for c in ("generator", "generator_bound", "generator_influenced") if c in best]]


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 002: FastAPI against Axum under a 90/10 mix, the ratio of their peaks."""
    ref, meta = analysis.reference("seed002_read_write_mix")
    peaks = ref.loc[ref.groupby("stack")["rps"].idxmax()].set_index("stack")
    art_ratio = article_ratio()
    article = (f"{meta['hardware'].split(';')[0]}, 4 server cores: FastAPI peaks at "
               f"{peaks.loc['python-fastapi', 'rps']:,.0f} rps ({int(peaks.loc['python-fastapi', 'users'])} users), "
               f"Axum at {peaks.loc['rust-axum', 'rps']:,.0f} ({int(peaks.loc['rust-axum', 'users'])}): "
               f"Axum {art_ratio:.1f}×")
    pts = summaries.points(study, x)
    if pts.empty:
        return article, summaries.NOT_IN_RUN
    table = mix_table(pts)
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    parts = [f"{servers.stack_title(s)} {summaries.once(r.rps, ' rps')} ({int(r.users)} users, p99 {summaries.once(r.p99_ms, ' ms')}){summaries.limit(r)}"
             for s, r in best.iterrows()]
    cores = summaries.server_cores(study, x)
    here = f"{cores[0].upper()}{cores[1:]}, {summaries.run_shape(pts)}: " + ", ".join(parts)
    again = peaks_again(summaries.experiment_points(study, x, "peaks"),
                        summaries.parameter(study, x, "peak_rounds", 1),
                        summaries.parameter(study, x, "peak_half_width", 0.0))
    if again and again["ratio"] is not None:
        here += f"; the peaks again, {rounds_words(again)}: Axum {claims.ratio_interval_words(again['ratio'], art_ratio)}"
    elif again:
        here += f"; the peaks again, {rounds_words(again)}: " + ", ".join(
            f"{s} {findings.STALLED}, in every round" for s in again["stalled"])
    elif {"rust-axum", "python-fastapi"} <= set(best.index):
        ratio = best.loc["rust-axum", "rps"] / best.loc["python-fastapi", "rps"]
        here += f"; Axum {claims.ratio_words(ratio, art_ratio)} (one run each: no interval)"
    return article, here + "."
