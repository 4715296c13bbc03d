"""`make report`: the newest run of each notebook at a scale as a report without code.

    python -m sqlitelab.report --scale quick [--only 01 05] [--out data/reports/quick]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sqlitelab.core import config
from sqlitelab.report import publish


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.report", description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=["quick", "seed"], default="quick")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 05")
    ap.add_argument("--out", type=Path, help="where the reports go (default: data/reports/<scale>)")
    ap.add_argument("--runs-dir", type=Path, default=None, help="executed notebooks (default: data/runs)")
    ap.add_argument("--db", type=Path, default=None, help="the results store (default: data/results.db)")
    args = ap.parse_args(argv)
    elsewhere = publish.missing(args.scale, args.runs_dir, args.db)
    if elsewhere:
        print(f"{len(elsewhere)} stored {args.scale} run(s) have no executed notebook in their run's folder "
              f"(run by papermill to a path of its own, or in JupyterLab), e.g. {elsewhere[0]['run_id']}: "
              f"`python -m sqlitelab.replay --missing --scale {args.scale}` re-makes them there "
              f"(`make report` does).", file=sys.stderr)
    found = publish.newest(args.scale, args.only, args.runs_dir, args.db)
    if not found:
        print(f"No finished {args.scale} run of any notebook"
              + (f" matching {args.only}" if args.only else "")
              + f" in {args.runs_dir or config.RUNS_DIR}: run `make run` (or `make seed`) first.",
              file=sys.stderr)
        return 2
    out = args.out or config.REPORTS_DIR / args.scale
    done = []
    for run in found:
        paths = publish.write(run, out)
        done.append((run, paths))
        print(f"{run.notebook:<28} {run.run_id}  ->  {paths['markdown']}  ·  {paths['html'].name}")
    print(f"Index: {publish.index(done, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
