"""Where a run's wall time went: the measurement itself against the lab's own overheads.

    timing.phases(run_id)           # a notebook run's sweeps (points, runs.server_timing)
    timing.phases(run_id, by="generator")
    timing.buffer_phases(run_id)    # notebook 04's buffer points, per total
    timing.breakdown(run_id)        # the largest phases in one line (batch's over-budget note)
    timing.window_share(run_id)     # the windows' share: of the wall time, and of the lab's part of it

Sweeps record it as they go: per point the `time_*` columns (load.level_timing: the
generator's start-up, warm-up, window, the server's answers to what was in flight at the close
(`time_drain_s`), the generator's shutdown, merge; sweep: counts, page-cache probes, the
cores' speed probes, pause, the whole point), per server and profile (and scenario) `runs.server_timing` (copy,
start, prime, levels, the exit of a session's generator, cross-check, confirmation, stop,
integrity check), per sweep
`calibration_seconds`, `seed_seconds` and `wall_seconds`. Buffer points record
`generate_seconds`, `seconds` (the timed part), `audit_seconds`, `consume_seconds`, the point
process's start and end (`process_*`), the files' removal and the whole point
(`point_wall_seconds`). Runs from before these columns have none: their phases show as NaN.
"""
from __future__ import annotations

import argparse
import json

import pandas as pd

from sqlitelab.core import config, results

# (phase, where it is read, what it is): the measurement itself first
POINT_PHASES = [
    ("window", "time_window_s", "the measurement window (or the N requests)"),
    ("warm-up", "time_warmup_s", "requests before the window"),
    ("generator start-up", "time_startup_s",
     "launch (a session's later level: its command) until the window's warm-up began"),
    ("requests in flight answered", "time_drain_s",
     "window closed until the server answered the last request in flight (the server's time)"),
    ("generator shutdown", "time_shutdown_s",
     "then until the generator exited (a session: its level's file was written)"),
    ("merge", "time_merge_s", "reading the generator's files"),
    ("row counts", "time_counts_s", "the audit's counts"),
    ("page-cache probes", "time_cache_s", "fincore before and after"),
    ("core speed probes", "time_probe_s", "the server's and generator's cores, before and after"),
    ("pause", "time_pause_s", "after each point"),
]
SERVER_PHASES = [
    ("database copy", "copy_s"), ("server start", "start_s"), ("primer", "prime_s"),
    ("generator session exit", "generator_exit_s"),  # load.Session's process, after its levels
    ("cross-check (reference client)", "crosscheck_s"), ("server stop", "stop_s"),
    ("integrity check", "integrity_s"),
]
RUN_PHASES = [("calibration lookup", "calibration_seconds"), ("seeded template", "seed_seconds")]


def _of(run_id: str) -> list:  # a notebook run (every experiment), or one sweep
    return [run_id, run_id]


def phases(run_id: str, path=None, by: str | None = None) -> pd.DataFrame:
    """A notebook run's (or one sweep's) wall time by phase: seconds, share of the sweeps'
    wall time, how many times it was paid (`points`: points for a point's phases, server starts
    for a server's, sweeps for a sweep's) and seconds each. `by` (e.g. "generator", "server",
    "experiment") splits the per-point phases by that column. The last rows: the sweeps' time
    outside every phase named, and their wall time."""
    runs = results.read_sql("SELECT * FROM runs WHERE notebook_run = ? OR run_id = ?", _of(run_id), path)
    pts = results.read_sql("SELECT * FROM points WHERE notebook_run = ? OR run_id = ?", _of(run_id), path)
    if runs.empty:
        raise ValueError(f"no run {run_id!r} in {path or config.RESULTS_DB}")
    if pts.empty and ("server_timing" not in runs or runs["server_timing"].isna().all()):
        raise ValueError(f"run {run_id!r} has no sweep points (a buffer run? see buffer_phases)")
    rows = []
    groups = [(None, pts)] if by is None or pts.empty else list(pts.groupby(by, sort=True))
    for key, g in groups:
        named = 0.0
        for phase, col, what in POINT_PHASES:
            v = g[col].sum() if col in g else float("nan")
            named += 0 if pd.isna(v) else v
            rows.append({"phase": phase, by or "all": key, "seconds": v, "points": len(g),
                         "what": what})
        if "time_point_s" in g:
            rows.append({"phase": "point bookkeeping", by or "all": key,
                         "seconds": g["time_point_s"].sum() - named, "points": len(g),
                         "what": "launching, flags, audit arithmetic"})
    servers = []
    for v in runs.get("server_timing", pd.Series(dtype=object)).dropna():
        servers += json.loads(v)
    st = pd.DataFrame(servers)
    for phase, col in SERVER_PHASES:  # `points` here: the servers (and scenarios) it took time in
        v = st[col] if col in st else pd.Series(dtype=float)
        rows.append({"phase": phase, "seconds": v.sum() if len(v) else float("nan"),
                     "points": int((v > 0).sum()), "what": "per server and profile (and scenario)"})
    for phase, col in RUN_PHASES:
        rows.append({"phase": phase, "seconds": runs[col].sum() if col in runs else float("nan"),
                     "points": len(runs), "what": "per sweep"})
    out = pd.DataFrame(rows)
    wall = runs["wall_seconds"].sum() if "wall_seconds" in runs else float("nan")
    rest = wall - out["seconds"].sum(skipna=True) if pd.notna(wall) else float("nan")
    out = pd.concat([out, pd.DataFrame([
        {"phase": "unaccounted", "seconds": rest, "points": len(runs),
         "what": "the sweeps' wall time outside every phase above"},
        {"phase": "sweeps' wall time", "seconds": wall, "points": len(runs), "what": "sum over sweeps"},
    ])], ignore_index=True)
    out["share"] = out["seconds"] / wall if pd.notna(wall) and wall else float("nan")
    out["per_point_s"] = out["seconds"] / out["points"].where(out["points"] > 0)
    cols = ["phase"] + ([by] if by else []) + ["seconds", "share", "points", "per_point_s", "what"]
    return out[[c for c in cols if c in out]]


BUFFER_PHASES = [
    ("timed", "seconds", "the measurement: serialise, write, close"),
    ("generate records", "generate_seconds", "untimed"),
    ("audit", "audit_seconds", "rows, records, metadata read back"),
    ("consume", "consume_seconds", "the consumer (tuned, with consume)"),
    ("process start", "process_start_seconds", "a fresh interpreter per point"),
    ("remove files", "remove_seconds", "after the point"),
]


def buffer_phases(run_id: str, path=None, by: str = "total") -> pd.DataFrame:
    """Notebook 04's wall time by phase, per `by` (total records by default): seconds per
    phase summed over the points, and `other` (what the point's wall time holds beyond them:
    set-up, probes, the process's exit)."""
    bp = results.read_sql("SELECT * FROM buffer_points WHERE notebook_run = ? OR run_id = ?", _of(run_id), path)
    if bp.empty:
        raise ValueError(f"no buffer points of {run_id!r}")
    if "skipped" in bp:
        bp = bp[bp["skipped"].isna()]
    rows = []
    for key, g in bp.groupby(by, sort=True):
        row = {by: key, "points": len(g)}
        named = 0.0
        for phase, col, _ in BUFFER_PHASES:
            v = g[col].sum() if col in g else float("nan")
            row[phase] = v
            named += 0 if pd.isna(v) else v
        wall = g["point_wall_seconds"].sum() if "point_wall_seconds" in g else float("nan")
        row["other"] = wall - named if pd.notna(wall) else float("nan")
        row["point wall"] = wall
        rows.append(row)
    out = pd.DataFrame(rows)
    total = {by: "all", **out.drop(columns=[by]).sum(numeric_only=True).to_dict()}
    return pd.concat([out.astype({by: object}), pd.DataFrame([total])], ignore_index=True)


def breakdown(run_id: str, path=None, most: int = 6) -> str:
    """Where a notebook run's time went, in one line: its `most` largest phases with their
    seconds and share of the sweeps' wall time (or of its buffer points'), for batch's summary
    of a run over its budget; "" for a run that stored neither (notebook 06)."""
    try:
        t = phases(run_id, path)
        wall = t.loc[t["phase"] == "sweeps' wall time", "seconds"].iloc[0]
        parts = t[(t["phase"] != "sweeps' wall time") & (t["seconds"] > 0)]
        parts, whole = dict(zip(parts["phase"], parts["seconds"])), "the sweeps'"
    except ValueError:
        try:
            row = buffer_phases(run_id, path).iloc[-1]
        except ValueError:
            return ""
        wall = row["point wall"]
        parts = {p: row[p] for p, _, _ in BUFFER_PHASES + [("other", None, None)] if row.get(p, 0) > 0}
        whole = "the buffer points'"
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:most]
    return ", ".join(f"{p} {s:.0f} s ({s / wall:.0%})" for p, s in top) + f" of {whole} {wall:.0f} s"


def window_share(run_id: str, path=None) -> dict[str, float]:
    """The measurement windows' share of the sweeps' wall time (`of wall time`), and of the part
    of it that was not the server answering what was in flight when a window closed (`of lab
    time`): that wait is the server's (in notebook 01, ruby-puma's stalls, which the
    article's hey also counts), so the second share is the one the lab's own overheads decide."""
    return shares(phases(run_id, path))


def shares(table: pd.DataFrame) -> dict[str, float]:
    """window_share from a table phases() already made."""
    t = table.set_index("phase")["seconds"]
    wall, window, drain = t["sweeps' wall time"], t["window"], t["requests in flight answered"]
    drain = 0.0 if pd.isna(drain) else drain
    return {"of wall time": window / wall, "of lab time": window / (wall - drain)}


def newest_runs(path=None) -> list[tuple[str, str]]:
    """(notebook, notebook run) of the newest run of each notebook."""
    runs = results.read_sql("SELECT notebook, notebook_run, started FROM runs ORDER BY started", [], path)
    if runs.empty:
        return []
    newest = runs.groupby("notebook")["notebook_run"].last()
    return sorted(newest.items())


def main(argv: list[str] | None = None) -> int:
    """`python -m sqlitelab.report.timing [RUN_ID ...]`: where the time of these runs went (default: the
    newest run of each notebook in data/results.db)."""
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.report.timing", description=main.__doc__)
    ap.add_argument("run_ids", nargs="*")
    ap.add_argument("--by", default=None, help="split the points' phases by a column (generator, server…)")
    args = ap.parse_args(argv)
    todo = [(None, r) for r in args.run_ids] or newest_runs()
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        for notebook, run_id in todo:
            print(f"== {run_id}" + (f" ({notebook})" if notebook else ""))
            try:
                table = phases(run_id, by=args.by)
                print(table.round(2).to_string(index=False))
                share = shares(table if args.by is None else phases(run_id))
                print(f"windows: {share['of wall time']:.0%} of the sweeps' wall time; "
                      f"{share['of lab time']:.0%} of the lab's part of it (the wall time less "
                      "the server's answers to requests in flight)")
            except ValueError:
                pass
            try:
                print(buffer_phases(run_id).round(1).to_string(index=False))
            except ValueError:
                pass
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
