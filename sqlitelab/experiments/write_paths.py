"""Group commit measured (issue 34): every stack's three write paths — each request on its own
pooled connection (`pool`), one writer thread committing one request at a time (`writer`), and
the writer committing everything queued in one transaction (`batch`, group commit) — at
synchronous FULL and NORMAL, at the levels asked (64 and 128 users by default), every request a
POST /items of 2 KiB (03's paths sweep, timed windows so that the server's own writer counts
hold each window: the points' `writer_transactions`, `writer_jobs` and `writer_sizes`).

    python -m sqlitelab.experiments.write_paths [--levels 64 128] [--duration 3] [--servers ...]

Each path and setting is a sweep of its own (a fresh copy of the file, the server started
anew); ruby-puma runs one process (one writer thread serves one process) with `threads` Puma
threads (`--puma-threads`; its default when not given). Stored in results.db as notebook
`write-paths`; `table` puts it side by side.
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

from sqlitelab.core import results
from sqlitelab.experiments.sweep import run, spec
from sqlitelab.infra import servers as stacks
from sqlitelab.load.verdicts import writer_batches

PROFILE = "single-writer"  # WAL, BEGIN IMMEDIATE, busy_timeout:5000; the path and synchronous set per sweep
PATHS = ("pool", "writer", "batch")
SYNCS = ("full", "normal")
LEVELS = (64, 128)
DURATION, WARMUP, PAYLOAD = 3.0, 0.5, 2048


def specs(*, servers=None, paths=PATHS, syncs=SYNCS, levels=LEVELS, duration: float = DURATION,
          warmup: float = WARMUP, puma_threads: int | None = None, results_db=None, runs_dir=None,
          progress: bool = True) -> list:
    """The sweeps, checked (one per synchronous setting and path), not run."""
    servers = list(servers or stacks.STACKS)
    for p in paths:
        if p not in PATHS:
            raise ValueError(f"path must be one of {', '.join(PATHS)}, not {p!r}")
    for s in syncs:
        if s not in SYNCS:
            raise ValueError(f"synchronous must be one of {', '.join(SYNCS)}, not {s!r}")
    if puma_threads is not None and (not isinstance(puma_threads, int) or puma_threads < 1):
        raise ValueError(f"puma_threads must be an integer >= 1, not {puma_threads!r}")
    notebook_run = results.new_run_id("write-paths")
    server_knobs = {"ruby-puma": {"processes": 1, **({"threads": puma_threads} if puma_threads else {})}}
    params = {"servers": servers, "paths": list(paths), "syncs": list(syncs), "levels": list(levels),
              "duration": duration, "warmup": warmup, "puma_threads": puma_threads, "payload_bytes": PAYLOAD}
    return [spec(notebook="write-paths", experiment=f"{sync}-{path}", servers=servers, profiles=[PROFILE],
                 scenario="mix", scenario_params={"write_share": 1.0}, levels=list(levels),
                 duration=duration, warmup=warmup, seed_items=1000, payload_bytes=PAYLOAD,
                 knobs={"write_path": path, "pragmas": stacks.pragmas_with(PROFILE, synchronous=sync)},
                 server_knobs=server_knobs, generator="loadgen", run_id=notebook_run,
                 results_db=results_db, runs_dir=runs_dir, progress=progress, parameters=params)
            for sync in syncs for path in paths]


def measure(**kw) -> pd.DataFrame:
    """Run the sweeps of `specs(**kw)`; their headline points."""
    return run(*specs(**kw))


def table(points: pd.DataFrame) -> pd.DataFrame:
    """Per stack, synchronous and users: each path's rate and p99, batch ÷ writer and batch ÷
    pool, and the writer's own counts in the window — its commits per second and the mean and
    largest batch (writes per transaction)."""
    pts = points.copy()
    pts["write_path"] = pts["experiment"].str.split("-", n=1).str[1]
    pts["synchronous"] = pts["experiment"].str.split("-", n=1).str[0]
    for c in ("writer_transactions", "writer_jobs", "writer_sizes"):
        if c not in pts:
            pts[c] = None
    rows = []
    for (server, sync, users), g in pts.groupby(["server", "synchronous", "users"], sort=True):
        row = {"server": server, "synchronous": sync, "users": int(users)}
        for path, p in g.groupby("write_path"):
            row[f"{path} rps"] = p["rps"].mean()
            row[f"{path} p99 ms"] = p["p99_ms"].mean()
            if path != "pool":
                counted = writer_batches(p)
                row[f"{path} commits/s"] = counted["commits_per_s"]
                row[f"{path} mean batch"] = counted["mean_batch"]
                row[f"{path} largest batch"] = counted["largest_batch"]
        if row.get("batch rps") and row.get("writer rps"):
            row["batch ÷ writer"] = row["batch rps"] / row["writer rps"]
        if row.get("batch rps") and row.get("pool rps"):
            row["batch ÷ pool"] = row["batch rps"] / row["pool rps"]
        row["audit ok"] = bool(g["audit_ok"].all())
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.experiments.write_paths",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", nargs="+", default=None, help="stacks (default: every one)")
    ap.add_argument("--paths", nargs="+", default=list(PATHS))
    ap.add_argument("--syncs", nargs="+", default=list(SYNCS))
    ap.add_argument("--levels", nargs="+", type=int, default=list(LEVELS))
    ap.add_argument("--duration", type=float, default=DURATION)
    ap.add_argument("--warmup", type=float, default=WARMUP)
    ap.add_argument("--puma-threads", type=int, default=None)
    ap.add_argument("--csv", default=None, help="also write the table to this CSV")
    args = ap.parse_args(argv)
    try:
        pts = measure(servers=args.servers, paths=args.paths, syncs=args.syncs, levels=args.levels,
                      duration=args.duration, warmup=args.warmup, puma_threads=args.puma_threads)
    except (ValueError, TypeError) as e:
        print(f"write_paths: {e}", file=sys.stderr)
        return 2
    t = table(pts)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(t.round(2).to_string(index=False))
    print(f"\nrun {pts['notebook_run'].iloc[0]}; audit ok: {bool(pts['audit_ok'].all())}")
    if args.csv:
        t.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
