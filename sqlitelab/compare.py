"""`python -m sqlitelab.compare A B`: two runs of a notebook, point by point, each metric's ratio
and whether it moved beyond the noise (sqlitelab.report.compare).

A and B: a notebook run's id, newest:<scale>:<NN> (the newest run of notebook NN at that scale on
this machine) or reference:<NN> (notebook NN of the committed reference run); B is read from
`--db-b` when given (another checkout's or machine's results.db), else from `--db`. Exit status: 0 the
comparison was made (an empty one says why), 2 a run that is not there or runs of different
notebooks, in one line.

`python -m sqlitelab.compare --noise [--runs N] [--duration S] [--stack STACK --profile P]`: measure
this machine's run-to-run spread per scenario family over windows of S seconds and store it
(sqlitelab.experiments.noise; about a minute on 2 cores), the band a comparison uses where a point
has no repeats: the one measured over the windows nearest the point's, on the point's own stack
where `--stack` measured that one (a stack can spread more than the machine), else on the
machine's (the default stack's).

`python -m sqlitelab.compare --power NN [--scale quick] [--cap 0.8] [-p NAME VALUE]`: the lab's
power on this machine (sqlitelab.report.power): notebook NN run three times with `python -m
sqlitelab.batch` into data/power/<stamp>/ — twice as it is, and once with every server held to
`cap` of its CPUs, the three at once taking turns server by server (sqlitelab.core.turns; each
run's output in run-<name>.log there), each given the same `-p` parameters — and the share of
points compare judges as it should (A/A within noise, held back slower), stored in
data/results.db's `power` table and printed. `--power` alone prints the stored rows; `--power NN
--from data/power/<stamp>` judges a power folder's three runs again, measuring nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from sqlitelab.core import config, processes, results, turns
from sqlitelab.experiments import noise
from sqlitelab.report import compare, power

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("a", nargs="?", help="the first run (the baseline): id, newest:<scale>:<NN> or reference:<NN>")
    ap.add_argument("b", nargs="?", help="the second run: the same forms")
    ap.add_argument("--noise", action="store_true", help="measure and store this machine's run-to-run spread")
    ap.add_argument("--runs", type=int, default=noise.RUNS, help="sweeps per family for --noise")
    ap.add_argument("--duration", type=float, default=noise.DURATION,
                    help="seconds of each --noise sweep's window (a comparison uses the spread measured "
                         "over the windows nearest its points')")
    ap.add_argument("--stack", default=noise.STACK,
                    help="--noise: the stack measured (its points then take its own spread; default: the machine's)")
    ap.add_argument("--profile", default=noise.PROFILE, help="--noise: the stack's profile")
    ap.add_argument("--users", type=int, default=noise.USERS, help="--noise: the users of its one level")
    ap.add_argument("--db", type=Path, default=None, help="the results database (default data/results.db)")
    ap.add_argument("--db-b", type=Path, default=None,
                    help="B's results database, when B is in another one (another checkout or machine; default --db)")
    ap.add_argument("--csv", type=Path, default=None, help="also write the aligned points to this CSV")
    ap.add_argument("--power", nargs="?", const="", default=None, metavar="NN",
                    help="measure the lab's power on notebook NN (three runs; see above); alone: the stored rows")
    ap.add_argument("--scale", default="quick", help="--power: the scale the notebook runs at")
    ap.add_argument("--cap", type=float, default=power.CAP,
                    help="--power: the share of its CPUs each server of the third run is held to")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="--power: a parameter of the notebook, the same for its three runs (as batch's -p)")
    ap.add_argument("--from", dest="from_", type=Path, default=None, metavar="FOLDER",
                    help="--power: judge the three runs of this power folder again, measuring nothing")
    args = ap.parse_args(argv)
    if args.power is not None:
        return _power(args)
    if args.noise:
        try:
            rows = noise.measure(runs=args.runs, duration=args.duration, stack=args.stack,
                                 profile=args.profile, users=args.users, results_db=args.db)
        except ValueError as e:
            print(f"compare: {e}", file=sys.stderr)
            return 2
        print(rows[["family", "scenario", "metric", "duration_s", "runs", "mean", "spread", "values"]].round(3)
              .to_string(index=False))
        return 0
    if args.a is None or args.b is None:
        ap.error("give two runs (A B), or --noise")
    try:
        c = compare.compare(compare.side(args.a, args.db), compare.side(args.b, args.db_b or args.db))
    except compare.CompareError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    print(compare.summary(c))
    if len(c.table):
        with pd.option_context("display.width", 200, "display.max_columns", None, "display.max_rows", 500):
            print(c.table[compare.SHOWN].round(3).to_string(index=False))
    for name, only in (("only in a", c.only_a), ("only in b", c.only_b)):
        if len(only):
            print(f"\n{name}:\n{only.to_string(index=False)}")
    if args.csv:
        c.table.to_csv(args.csv, index=False)
    return 0


# the power check's three runs, in the order they take their turns (and start)
RUN_NAMES = ("A", "A-again", "held")
START_GAP_S = 1.0  # between the runs' starts: their ids and runs rows keep the rotation's order
PARAMETERS = "parameters.json"  # in a power folder: the -p parameters its three runs were given, as typed


def _power(args) -> int:
    """--power: three runs of a notebook into a folder of their own, compared and stored."""
    if not args.power:
        stored = power.table(args.db)
        print("\n".join(power.said(r) for r in stored.to_dict("records")) or "no power check stored yet")
        return 0
    if not 0 < args.cap < 1:
        print(f"compare: --cap is a share of the server's CPUs, 0 < cap < 1, not {args.cap}", file=sys.stderr)
        return 2
    if args.from_ is not None:
        return _judged(args, args.from_)
    folder = config.DATA_DIR / "power" / results.now_iso().replace(":", "").replace("-", "")[:15]
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LAB_DATA_DIR": str(folder), "LAB_RUNS_DIR": str(folder / "runs"),
           "LAB_FIGURES_DIR": str(folder / "figures"), "LAB_CALIBRATION_DB": str(config.CALIBRATION_DB)}
    env.pop("LAB_SERVER_CPU_CAP", None)
    caps = (None, None, args.cap)
    # the three runs at once, taking turns server by server (sqlitelab.core.turns): A, A again,
    # held, A, A again, held...; each its own batch, its output in a log of the folder
    taking = turns.start(folder / "turns", len(caps))
    print(f"compare --power: notebook {args.power} at {args.scale}, three runs taking turns server by "
          f"server (the third with its servers held to {100 * args.cap:g} %); their output: {folder}/run-*.log",
          flush=True)
    logs = [folder / f"run-{name}.log" for name in RUN_NAMES]
    given = [a for name, value in args.param for a in ("-p", name, value)]
    # the parameters the three runs were given, kept with them (their power rows store them)
    (folder / PARAMETERS).write_text(json.dumps(dict(args.param), sort_keys=True))
    procs, codes = [], []
    try:
        for name, held, mine, log in zip(RUN_NAMES, caps, taking, logs):
            run_env = {**env, **mine, **({"LAB_SERVER_CPU_CAP": str(held)} if held else {})}
            with open(log, "w") as out:  # the child keeps its own copy of the file
                procs.append(processes.spawn([sys.executable, "-m", "sqlitelab.batch", "--scale", args.scale,
                                              "--only", args.power, *given], f"power check's run {name}",
                                             env=run_env, stdout=out, stderr=subprocess.STDOUT))
            # the runs start in the rotation's order (the runs rows' `started`: _judged's order)
            time.sleep(START_GAP_S)
        for i, proc in enumerate(procs):
            codes.append(proc.wait())
            turns.finished(folder / "turns", i)
    finally:
        for proc in procs:
            if proc.poll() is None:
                processes.stop(proc)
            processes.forget(proc.pid)
    for name, code, log in zip(RUN_NAMES, codes, logs):
        text = log.read_text()
        print(f"\n== run {name}: exit {code}\n"
              + (text[text.index("Summary ("):] if "Summary (" in text else processes.log_tail(log)))
    if 2 in codes:
        return 2
    return _judged(args, folder)


def _judged(args, folder: Path) -> int:
    """A power folder's three runs (A, A again, held back: in the order they started) judged and
    the rows stored and printed."""
    db = folder / "results.db"
    if not db.is_file():
        print(f"compare: no power folder's results.db at {db}", file=sys.stderr)
        return 2
    runs = results.read_sql("SELECT notebook_run, min(started) AS started, max(notebook) AS notebook FROM runs "
                            "GROUP BY notebook_run ORDER BY started", (), db)
    if len(runs) != 3:
        print(f"compare: the power check needs three runs of {args.power}; {db} has {len(runs)}", file=sys.stderr)
        return 1
    ids = runs["notebook_run"].tolist()
    cap = results.read_sql("SELECT max(server_cpu_cap) AS cap FROM points WHERE notebook_run = ?", [ids[2]], db)
    cap = float(cap["cap"].iloc[0]) if len(cap) and cap["cap"].notna().all() else args.cap  # as it was held
    given = folder / PARAMETERS
    rows = power.rows(str(runs["notebook"].iloc[0]), args.scale, cap, *ids, db=db,
                      interleaved=(folder / "turns").is_dir(),
                      parameters=json.loads(given.read_text()) if given.is_file() else {})
    results.store_rows("power", rows, args.db)
    print("\n".join(power.said(r) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
