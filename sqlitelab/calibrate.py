"""`make calibrate`: the load generators measured against wrk on this machine, printed and drawn.

    python -m sqlitelab.calibrate               # both generators, unless already calibrated
    python -m sqlitelab.calibrate ensure        # the same, silent when calibrated (make setup); a
                                                # calibration another clone measured here is taken
    python -m sqlitelab.calibrate --force       # measure again
    python -m sqlitelab.calibrate compare --servers ruby-puma python-fastapi --users 32

The method (ceiling, added latency against the generator's CPU, onset) and where a calibration
is kept: sqlitelab.load.calibrate.
"""
from __future__ import annotations

import argparse
import sys

import pandas as pd

from sqlitelab.core import layout
from sqlitelab.load import commands
from sqlitelab.load.calibrate import (METHOD, HELLO_USERS, compare, comparison_table, calibrate, ensure,
                                      load_calibrations)
from sqlitelab.report import plots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.calibrate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="calibrate", choices=["calibrate", "ensure", "show", "compare"])
    ap.add_argument("--generator", nargs="*", default=list(commands.GENERATORS), choices=commands.GENERATORS)
    ap.add_argument("--force", action="store_true", help="measure again even if calibrated")
    ap.add_argument("--servers", nargs="*", default=["ruby-puma", "python-fastapi"])
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--profile", default="rails71", help="compare: the servers' profile")
    ap.add_argument("--ruby-threads", type=int, default=3,
                    help="compare: ruby-puma as 1 process × this many threads")
    args = ap.parse_args(argv)
    lay = layout.plan()
    server_cpus, generator_cpus = lay.server_cpus, lay.generator_cpus
    if args.command == "compare":
        knobs = {"ruby-puma": {"processes": 1, "threads": args.ruby_threads}}
        df = compare(args.servers, users=args.users, repeats=args.repeats, duration=args.duration,
                     server_knobs=knobs, profile=args.profile)
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(df.drop(columns=["run_id"]).round(3).to_string(index=False))
            print()
            print(comparison_table(df).T.to_string(header=False))
        return 0
    if args.command in ("calibrate", "ensure"):
        for g in args.generator:
            if args.force:
                print(f"calibrating {g} against wrk ({METHOD})…", flush=True)
                calibrate(g, server_cpus=server_cpus, generator_cpus=generator_cpus)
            else:  # this clone's, else the machine's (another clone measured it), else measured now
                ensure(g, server_cpus, generator_cpus)
    if args.command == "ensure":  # a set-up step: a line per generator it measures or takes, else nothing
        return 0
    cal, pts = load_calibrations()
    if not len(cal):
        print("no calibration stored yet: python -m sqlitelab.calibrate")
        return 1
    newest = cal.drop_duplicates(["generator", "machine", "generator_pinning"])
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        for c in newest.itertuples():
            p = pts[pts["calib_id"] == c.calib_id]
            at = f"{c.onset_util:.0%} of its CPU" if pd.notna(c.onset_util) else "none seen"
            print(f"\n{c.generator} ({c.version}) on {c.machine}, vs {c.reference}, target {c.target}, "
                  f"{c.started}\n  ceiling on /hello at {HELLO_USERS} users: {c.hello_rps:,.0f}/s "
                  f"(wrk {c.hello_wrk_rps:,.0f}/s, {c.hello_ratio:.2f}×, generator CPU "
                  f"{c.hello_gen_util:.0%}); drift onset: {at}")
            print(p[["endpoint", "users", "rps", "wrk_rps", "rps_ratio", "p50_ms", "wrk_p50_ms",
                     "p99_ms", "wrk_p99_ms", "p99_ratio", "gen_util", "server_cpu_pct",
                     "drift"]].round(3).to_string(index=False))
    fig = plots.calibration_chart(pts[pts["calib_id"].isin(newest["calib_id"])], newest)
    path = plots.save_figure(fig, "calibration", notebook="calibration")
    print(f"\nFigure: {path}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
