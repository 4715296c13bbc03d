"""Notebook 12, what a power cut takes (no article: the question the articles leave out): how many
acknowledged writes each journal mode and `synchronous` setting loses when the power goes under
load, whether the file survives, and what each mode buys in throughput. Everything that is this
notebook's, declared once.

The cut is the lab's lazy filesystem (sqlitelab.infra.lazyfs: nothing reaches the disk until it is
fsync'ed); the cuts are sqlitelab.experiments.power_cut; the throughput of each mode is the lab's
sweep on the real disk. Both scales take what the collection's budgets leave
(sqlitelab.studies.scales.spare): one stack (the `servers` parameter's default, go-nethttp), one
write path, one level of writers as fast as they are answered, two shares written back; a cut
costs about a second on go-nethttp and a throughput point about two, so quick holds 5 modes and
seed 6, its cuts drawn sooner (0.3-0.6 s: still a checkpoint's cycle at the mount's rates) to fit. Every stack, write path, level, offered rate, wal_autocheckpoint and Litestream is a
parameter away (`servers = None`, `write_paths`, `levels`, `write_rates`, `checkpoints`,
`litestream`), at the cost of a run outside `make seed`'s 90 minutes.

Its code: the loss per mode, its words, the trade-off's rows and the table a reader sees.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import users as users_words
from sqlitelab.experiments import power_cut
from sqlitelab.infra.servers import knob_value_title, stack_title
from sqlitelab.report import findings, plots
from sqlitelab.studies.method import Article, Detail, MACHINE_WHY, NOT_STATED, PIN_WHY


# What each constant means: sqlitelab.studies.declarations.
ID = "12-power-cut"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "power cuts"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "What a power cut takes: acknowledged writes lost per journal mode and synchronous setting"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "trade-off"

SCALES: dict[str, dict] = {
    "quick": {"write_paths": ["pool"],
              "modes": ["wal-off", "wal-normal", "wal-full", "delete-full", "delete-extra"],
              "writebacks": [0.0, 0.5], "write_rates": [None], "checkpoints": [None], "litestream": False,
              "levels": [8], "rounds": 1, "cut_window": [0.3, 0.8],
              "duration": 1.0, "warmup": 0.3, "repeats": 1},
    "seed": {"write_paths": ["pool"],
             "modes": ["wal-off", "wal-normal", "wal-full", "wal-extra", "delete-full", "delete-extra"],
             "writebacks": [0.0, 0.5], "write_rates": [None], "checkpoints": [None], "litestream": False,
             "levels": [8], "rounds": 1, "cut_window": [0.3, 0.6],
             "duration": 1.0, "warmup": 0.3, "repeats": 1},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget). What the other
# notebooks' budgets leave (scales.spare).
BUDGET_SECONDS: dict[str, float] = {"quick": 28, "seed": 30}

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {
    "cuts": "power cuts under load",
    r"speed-(wal|delete)-(off|normal|full|extra)-(pool|writer|batch)":
        lambda journal, sync, path: f"{journal_title(journal)}, synchronous={sync.upper()}, "
                                    f"{knob_value_title('write_path', path)}: throughput on the real disk",
}

READS_THE_OTHERS = False

SMOKE: dict = {"modes": ["wal-normal", "wal-full"], "writebacks": [0.0], "cut_window": [0.2, 0.4],
               "duration": 0.5, "warmup": 0.2}
STORES: str | None = "points"  # the throughput's; the cuts are in `cuts`

READING: dict[str, str] = {
    "trade-off":
        "Read each row across: on the left what a power cut took of the writes the server had "
        "acknowledged, on the right the writes per second the same setting gives on a real disk.",
}

JOURNAL_TITLES = {"wal": "WAL", "delete": "rollback journal"}


def journal_title(journal: str) -> str:
    return JOURNAL_TITLES.get(journal, journal)


def mode_title(mode: str) -> str:
    """"wal-normal" -> "WAL, synchronous=NORMAL"."""
    journal, sync = power_cut.parse_mode(mode)
    return f"{journal_title(journal)}, synchronous={sync.upper()}"


def _cut_where(r) -> str:
    window = r.parameters.get("cut_window") or []
    return (f"at a moment drawn between {window[0]:g} and {window[1]:g} s after the load began"
            if len(window) == 2 else "at a random moment under load")


# Its method: the durability SQLite's documentation states, and how this run put it to the test.
ARTICLE = Article(ID, "—", "SQLite's documentation: what each setting keeps through a power loss", (
    Detail("what is cut", "a power loss or an operating-system crash (sqlite.org: \"durable across "
           "an application crash, not a power loss\" for WAL at NORMAL)",
           lambda r: "the lab's lazy filesystem: writes held in memory until fsync, directory "
                     "operations until the directory's fsync; at the cut nothing more is written "
                     "back, the server is killed and the mount removed", expect=None,
           why="no machine's power is cut here: the filesystem is the worst case POSIX allows, so "
               "the loss is a bound, not what one disk loses"),
    Detail("when", "—", _cut_where, expect=NOT_STATED,
           why="a moment drawn from the run's seed, under load, so that a cut meets checkpoints "
               "and commits where they fall"),
    Detail("what the clients were told", "—",
           lambda r: "each 201 with its id, on keep-alive connections of the lab's client threads",
           expect=NOT_STATED, why="the ledger is the only account of what was acknowledged"),
    Detail("throughput", "—", lambda r: "the lab's sweep on the real disk, writes only "
           "(POST /items), loadgen", expect=NOT_STATED,
           why="the lazy filesystem answers from one Python thread: no measure of speed"),
    Detail("server CPUs", "—", "cpus:server_pinning", expect=NOT_STATED, why=PIN_WHY),
    Detail("machine", "—", "col:machine", expect=NOT_STATED, why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

def speed_specs(spec, cfg: dict, servers: list[str], notebook: str, run_id: str, parameters: dict, server_cpus,
                generator_cpus) -> list:
    """The throughput sweeps: one per write path and mode (every stack in it), writes only, on the
    real disk."""
    return [spec(notebook=notebook, experiment=f"speed-{m}-{w}", servers=list(servers), profiles=[power_cut.PROFILE],
                 scenario="mix", scenario_params={"write_share": 1.0}, levels=cfg["levels"],
                 duration=cfg["duration"], warmup=cfg["warmup"], repeats=cfg["repeats"],
                 knobs={"pragmas": power_cut.pragmas(m), "write_path": w}, generator="loadgen",
                 payload_bytes=power_cut.PAYLOAD_BYTES, server_cpus=server_cpus,
                 generator_cpus=generator_cpus, run_id=run_id, parameters=parameters)
            for w in cfg["write_paths"] for m in cfg["modes"]]


def speeds(points: pd.DataFrame) -> pd.DataFrame:
    """The sweeps' points with their mode and write path (from their experiment's id)."""
    if points.empty:
        return points.assign(mode=[], write_path=[])
    parts = points["experiment"].str.extract(r"^speed-(?P<mode>\w+-\w+)-(?P<write_path>pool|writer|batch)$")
    return points.drop(columns="write_path", errors="ignore").join(parts)


SETTINGS = ["server", "write_path", "users", "writeback", "rate", "checkpoint", "replica"]  # beside the mode


def _settings(cuts: pd.DataFrame) -> pd.DataFrame:
    """The cuts with every setting column (rows stored before one existed: its default)."""
    defaults = {"rate": None, "checkpoint": None, "replica": False}
    return cuts.assign(**{k: v for k, v in defaults.items() if k not in cuts})


def loss_table(cuts: pd.DataFrame) -> pd.DataFrame:
    """Per mode and setting (SETTINGS: stack, write path, writers, share written back at the cut,
    offered rate, wal_autocheckpoint, Litestream): the cuts, what was acknowledged, what was lost
    (in all, the most in one cut, the cuts that lost any, the most seconds of acknowledged writes
    one cut lost), the cuts after which the file passed integrity_check, after which the server
    started on it again and took a write, and — with Litestream — the most its restored replica
    lost in one cut; `untested`: cuts before which no write was acknowledged (nothing to lose);
    `beyond_last`: cuts that lost more than their last commit (last_commit_only)."""
    c = _settings(cuts)
    c = c.assign(**{k: float("nan") for k in ("replica_lost", "replica_lost_seconds") if k not in c})
    keys = [*SETTINGS[:2], "mode", *SETTINGS[2:]]
    g = c.assign(losing=c["lost"] > 0, intact=c["integrity"] == "ok", untested=c["acked"] == 0,
                 beyond_last=(c["lost"] > 0) & ~last_commit_only(c),
                 restarted=c["restarted"].astype(bool)).groupby(keys, sort=False, dropna=False)
    t = g.agg(cuts=("lost", "size"), untested=("untested", "sum"), acked=("acked", "sum"), lost=("lost", "sum"),
              most_lost=("lost", "max"), losing=("losing", "sum"), beyond_last=("beyond_last", "sum"),
              most_lost_s=("lost_seconds", "max"), intact=("intact", "sum"),
              restarted=("restarted", "sum"), acked_per_s=("acked_per_s", "mean"),
              replica_most_lost=("replica_lost", "max"),
              replica_most_lost_s=("replica_lost_seconds", "max")).reset_index()
    t["mode_title"] = t["mode"].map(mode_title)
    order = {m: i for i, m in enumerate(power_cut_modes())}
    return t.sort_values(SETTINGS, kind="stable", na_position="first").sort_values(
        "mode", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def last_commit_only(cuts: pd.DataFrame) -> pd.Series:
    """Per cut, whether what it lost can be one commit: one write on a path that commits each
    write alone (pool, writer); on the batch path no more than its writers (each has one request
    in flight, so one group commit holds at most one write of each). The order of the answers
    cannot tell which commit came last: threads (Ruby's GVL) answer out of commit order."""
    most = cuts["users"].where(cuts["write_path"] == "batch", 1)
    return (cuts["lost"] > 0) & (cuts["lost"] <= most)


# The loss table's columns a reader is shown, in plain words, with their format (plots.plain_table);
# a setting's column only when the run varied it or set it.
SHOWN: dict[str, tuple[str, str]] = {
    "server": ("stack", "{}"), "write_path": ("write path", "{}"), "mode_title": ("journal, synchronous", "{}"),
    "users": ("writers", "{}"), "rate": ("offered writes/s", "{:,.0f}"),
    "checkpoint": ("wal_autocheckpoint", "{:,.0f}"), "replica": ("Litestream", "{}"),
    "writeback": ("written back at the cut", "{:.0%}"), "cuts": ("cuts", "{:,.0f}"),
    "acked": ("acknowledged", "{:,.0f}"), "lost": ("lost", "{:,.0f}"), "most_lost": ("most in one cut", "{:,.0f}"),
    "most_lost_s": ("most seconds of writes", "{:.3g}"), "intact": ("integrity ok", "{:,.0f}"),
    "restarted": ("restarted", "{:,.0f}"), "replica_most_lost": ("replica lost, most", "{:,.0f}"),
}


def _readable(loss: pd.DataFrame) -> pd.DataFrame:
    return loss.assign(server=loss["server"].map(stack_title),
                       write_path=loss["write_path"].map(lambda w: knob_value_title("write_path", w)),
                       users=loss["users"].map(users_words), replica=loss["replica"].map({True: "yes", False: "no"}))


def _one_value(loss: pd.DataFrame) -> list[str]:
    """The setting columns with one value in every row (said once, above the table), and those
    the run never set (an offered rate, a checkpoint, Litestream)."""
    same = [c for c in ("server", "write_path", "users") if loss[c].nunique(dropna=False) == 1]
    unset = [c for c, empty in (("rate", loss["rate"].isna().all()), ("checkpoint", loss["checkpoint"].isna().all()),
                                ("replica", not loss["replica"].astype(bool).any()),
                                ("replica_most_lost", not loss["replica"].astype(bool).any())) if empty]
    return same + unset


def shown(loss: pd.DataFrame):
    """The loss table as a reader sees it (SHOWN): stacks and write paths in words; a setting the
    same in every row said above it (shown_above), not in a column."""
    drop = _one_value(loss)
    return plots.plain_table(_readable(loss), {k: v for k, v in SHOWN.items() if k not in drop})


def shown_above(loss: pd.DataFrame) -> str:
    """What every row of `shown` shares, in words ("Go · net/http, a connection pool, 8 users")."""
    t = _readable(loss)
    return ", ".join(str(t[c].iloc[0]) for c in ("server", "write_path", "users")
                     if c in _one_value(loss) and len(t))


def power_cut_modes() -> list[str]:
    """Every mode in reading order: WAL's, then the rollback journal's, weakest first."""
    return [power_cut.mode(j, s) for j in power_cut.JOURNALS for s in power_cut.SYNCHRONOUS_MODES]


def tradeoff(loss: pd.DataFrame, speed: pd.DataFrame) -> pd.DataFrame:
    """The figure's rows: per stack, write path and mode, the most acknowledged writes one cut took
    from the file (in any setting, Litestream's cuts aside) and the writes per second on the real
    disk (the mean over the sweep's levels and repeats; `runs`: each of them, a window that
    finished nothing as 0); `row_title`: the mode, and its write path where the run had several."""
    keys = ["server", "write_path", "mode"]
    plain = loss[~loss["replica"].astype(bool)]  # the file's own loss, without Litestream's checkpoints
    t = plain.groupby([*keys, "mode_title"], sort=False).agg(
        most_lost=("most_lost", "max"), most_lost_s=("most_lost_s", "max")).reset_index()
    several = t["write_path"].nunique() > 1  # each row names its write path where the run had several
    t["row_title"] = t["mode_title"] + (", " + t["write_path"].map(lambda w: knob_value_title("write_path", w))
                                        if several else "")
    if speed.empty:
        return t.assign(writes_per_s=float("nan"), runs=[[] for _ in range(len(t))])
    rates = speed.assign(rps=pd.to_numeric(speed["rps"], errors="coerce").fillna(0.0)).groupby(keys)["rps"].agg(
        writes_per_s="mean", runs=list).reset_index()
    return t.merge(rates, on=keys, how="left")


def caption(speed: pd.DataFrame) -> str:
    """The figure's line: the machine and the pinning of its throughput points (caption_for),
    without their base profile's name, whose journal and synchronous each row replaces."""
    return plots.caption_for(speed.drop(columns=["profile"], errors="ignore"),
                             extra="cuts on the lab's lazy filesystem; throughput on the real disk, writes only")


def of_cuts(k: int, n: int) -> str:
    """"its one cut", "1 of 3 cuts"."""
    return "its one cut" if n == 1 else f"{k} of {n} cuts"


def writeback_words(share: float) -> str:
    """What a cut wrote back, in words: nothing (the worst case for what is lost), or a share of
    the dirty pages (a torn state, the test of the file's integrity)."""
    if share == 0:
        return "at the cut nothing more reached the disk"
    if share == 1:
        return "at the cut every dirty page reached the disk"
    return f"at the cut a random {share:.0%} of the dirty pages reached the disk"


def settings_words(row) -> str:
    """A group of cuts' settings in words: stack, write path, writers, their rate, what the cut
    wrote back, wal_autocheckpoint, Litestream."""
    rate = "as fast as answered" if pd.isna(row.rate) else f"at {row.rate:,.0f} writes/s offered"
    parts = [stack_title(row.server), knob_value_title("write_path", row.write_path),
             f"{users_words(row.users)} writing {rate}", writeback_words(row.writeback)]
    if not pd.isna(row.checkpoint):
        parts.append(f"wal_autocheckpoint={int(row.checkpoint):,} in WAL")
    if row.replica:
        parts.append("Litestream replicating to another disk")
    return ", ".join(parts)


def _seconds(s: float) -> str:
    return f"{s:.2g} s" if s >= 0.01 else f"{1000 * s:.2g} ms"


def verdict(row) -> str:
    """One mode's cuts in words, each word from its condition: kept every acknowledged write in
    every cut that had one (with the share of cuts that could still lose some, Wilson's interval
    over those cuts), or lost some in k of n (the most, and the seconds of writes it spans); cuts
    before any acknowledged write said apart (nothing tested); the file's integrity and the
    server's restart counted over every cut."""
    total = int(row.cuts)
    untested = int(getattr(row, "untested", 0))
    n = total - untested
    if n == 0:
        return (f"had no write acknowledged before {'its one cut' if total == 1 else f'any of its {total} cuts'}: "
                "nothing to lose, nothing tested")
    aside = (f" ({untested} more cut{'' if untested == 1 else 's'} came before any write was acknowledged: "
             "nothing tested there)" if untested else "")
    if row.losing == 0:
        upper = intervals.share_interval(0, n).high
        words = (f"kept every one of {int(row.acked):,} acknowledged writes in "
                 f"{'its one cut' if n == 1 else f'all {n} cuts'} "
                 f"(cuts that lose some: 0 of {n}, 95 % interval up to {100 * upper:.0f} %)")
    else:
        span = ("each answered as the power went" if row.most_lost_s == 0
                else f"{_seconds(row.most_lost_s)} of writes")
        words = (f"lost acknowledged writes in {of_cuts(int(row.losing), n)}: at most {int(row.most_lost):,} in one "
                 f"cut, {span}, at {row.acked_per_s:,.0f} acknowledged writes/s on the mount")
    intact = ("the file passed integrity_check after every cut" if row.intact == total
              else f"**the file failed integrity_check after {of_cuts(total - int(row.intact), total)}**")
    back = ("the server started again on it and took a write" if row.restarted == total
            else f"**the server did not start again, or refused a write, after "
                 f"{of_cuts(total - int(row.restarted), total)}**")
    replica = ""
    if getattr(row, "replica", False):
        replica = (f"; the Litestream replica, restored, lost at most {int(row.replica_most_lost):,} in one cut"
                   + (f" ({_seconds(row.replica_most_lost_s)} of writes)"
                      if row.replica_most_lost and not pd.isna(row.replica_most_lost_s) else "")
                   if not pd.isna(row.replica_most_lost) else "; the Litestream replica could not be restored")
    return f"{words}{aside}; {intact}; {back}{replica}"


DURABLE = ("wal-full", "wal-extra", "delete-extra")  # SQLite: durable through a power loss
LAST_COMMIT = "delete-full"  # the rollback journal at FULL: durable but for the last commit


def defects(loss: pd.DataFrame) -> list[str]:
    """What SQLite documents as durable but lost writes here: WAL at FULL or EXTRA, the rollback
    journal at EXTRA — and the rollback journal at FULL losing more than the last commit of a cut
    (last_commit_only; its journal's deletion is a directory operation, durable only once the
    directory is synced, which SQLite does at EXTRA alone: the last commit may roll back)."""
    bad = loss[(loss["mode"].isin(DURABLE) & (loss["losing"] > 0))
               | ((loss["mode"] == LAST_COMMIT) & (loss["beyond_last"] > 0))]
    return [f"{stack_title(r.server)}, {knob_value_title('write_path', r.write_path)}, {mode_title(r.mode)}: "
            f"{int(r.lost):,} acknowledged writes lost"
            + (f", more than the last commit in {of_cuts(int(r.beyond_last), int(r.cuts))}"
               if r.mode == LAST_COMMIT else "")
            for r in bad.itertuples()]


def normal_words(loss: pd.DataFrame) -> list[str]:
    """WAL at NORMAL's loss in plain words, as measured: per stack, write path and
    wal_autocheckpoint (Litestream's cuts aside: it takes the checkpoints over), the most seconds
    of acknowledged writes one cut lost at each offered rate — the loss as a function of the
    write rate and of the checkpoint."""
    normal = loss[(loss["mode"] == "wal-normal") & ~loss["replica"].astype(bool)]
    out = []
    for (server, path, checkpoint), g in normal.groupby(["server", "write_path", "checkpoint"], sort=False, dropna=False):
        parts = []
        by_rate = g.groupby("rate", dropna=False).agg(  # the most over the shares written back
            most_lost_s=("most_lost_s", "max"), most_lost=("most_lost", "max"), cuts=("cuts", "sum"),
            acked_per_s=("acked_per_s", "mean")).reset_index()
        for r in by_rate.sort_values("rate", na_position="last").itertuples():
            at = (f"as fast as answered ({r.acked_per_s:,.0f} acknowledged writes/s on the mount)"
                  if pd.isna(r.rate) else f"at {r.rate:,.0f} writes/s")
            n = int(r.cuts)
            parts.append(f"{at} up to {_seconds(r.most_lost_s)} of writes ({int(r.most_lost):,} writes)"
                         if r.most_lost else f"{at} nothing in {'its one cut' if n == 1 else f'any of {n} cuts'}")
        ckpt = ("SQLite's default checkpoint (1,000 pages)" if pd.isna(checkpoint)
                else f"wal_autocheckpoint={int(checkpoint):,}")
        out.append(f"- In plain words ({stack_title(server)}, {knob_value_title('write_path', path)}, {ckpt}): "
                   f"WAL at NORMAL lost, in one cut, " + "; ".join(parts) + ".")
    return out


def power_cut_findings(loss: pd.DataFrame, trade: pd.DataFrame) -> str:
    """Each mode's cuts in words (verdict), what SQLite promises and broke (defects), and the
    throughput each mode buys against the strongest one measured."""
    lines = []
    for _, g in loss.groupby(SETTINGS, sort=False, dropna=False):
        lines.append(f"**{settings_words(g.iloc[0])}:**")
        lines += [f"- **{r.mode_title}** {verdict(r)}." for r in g.itertuples()]
    bad = defects(loss)
    lines.append("❌ **A setting SQLite documents as durable lost writes**: " + "; ".join(bad) + "."
                 if bad else "- Every setting SQLite documents as durable (WAL at FULL or EXTRA, the rollback "
                 "journal at EXTRA, and at FULL but for a cut's last commit) kept what it promises.")
    last = loss[(loss["mode"] == LAST_COMMIT) & (loss["beyond_last"] == 0)]
    if last["losing"].sum():
        lines.append(f"- The rollback journal at FULL lost its last commit in "
                     f"{of_cuts(int(last['losing'].sum()), int(last['cuts'].sum()))} (at most "
                     f"{int(last['most_lost'].max()):,} acknowledged write{'' if last['most_lost'].max() == 1 else 's'}: "
                     "one commit's, no more than one of each writer): its journal was deleted but its directory never synced (SQLite syncs it "
                     "at EXTRA), so the commit rolled back.")
    lines += normal_words(loss)
    lines += speed_words(trade)
    return "\n".join(lines)


def speed_words(trade: pd.DataFrame) -> list[str]:
    """Per stack and write path, each mode's throughput on the real disk against the fastest mode
    that lost nothing in any cut: the ratio with its interval over the two modes' runs (Fieller's;
    one run each: none), a mode whose window finished no request said in words."""
    out = []
    if "runs" not in trade:
        return out
    for (server, path), g in trade.groupby(["server", "write_path"], sort=False):
        ran = g[g["writes_per_s"].map(findings.finished)]
        kept = ran[ran["most_lost"] == 0]
        if kept.empty or len(g) < 2:
            continue
        base = kept.loc[kept["writes_per_s"].idxmax()]
        parts, once = [], len(base["runs"]) < 2 or all(not isinstance(r, list) or len(r) < 2 for r in g["runs"])
        for r in g.itertuples():
            if r.mode == base["mode"]:
                continue
            if not isinstance(r.runs, list) or not r.runs:
                parts.append(f"{r.mode_title}: not measured")
                continue
            if not findings.finished(r.writes_per_s):
                parts.append(f"{r.mode_title}: {findings.STALLED}")
                continue
            ratio = intervals.ratio_interval(r.runs, base["runs"])
            parts.append(f"{r.mode_title} {intervals.rounded(ratio, '×') if once else intervals.shown(ratio, '×')}")
        out.append(f"- Throughput on the real disk ({stack_title(server)}, {knob_value_title('write_path', path)}"
                   f"{', one run each: no interval' if once else ''}), against the fastest setting that lost "
                   f"nothing ({base.mode_title}, {base.writes_per_s:,.0f} writes/s): " + "; ".join(parts) + ".")
    return out

