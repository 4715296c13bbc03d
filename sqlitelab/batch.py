"""Run notebooks with papermill: `python -m sqlitelab.batch --scale quick [--only 01] [-p key value]`.

Each notebook is executed into data/runs/<run_id>/<notebook>.ipynb (never over the source),
with the fixed `sqlitelab` kernel, its `scale` and `run_id` parameters set, and any -p
overrides (values parsed as Python literals: `-p levels "[1, 2]"`). A summary of the points
each run stored, and where the executed notebooks and figures are, is printed at the end, with
every stored row whose audit failed (AUDITED) listed under it, and every notebook that took longer
than its time budget at that scale (its module's BUDGET_SECONDS, sqlitelab.studies.scales.budget)
named with where its time went (sqlitelab.report.timing.breakdown), under the collection's total
against its budget (scales.COLLECTION_BUDGET_SECONDS). A budget holds for the reference machine
(2 cores): over it is reported, not a failure.

Every notebook runs, whatever happened to the one before. Exit status: 0 every notebook ran
and every audit passed; 1 a notebook stopped on an error or stored a failed audit; 2 bad
arguments (an unknown parameter), before anything runs. The notebooks are those of
config.NOTEBOOKS_DIR (LAB_NOTEBOOKS_DIR).
"""
from __future__ import annotations

import argparse
import ast
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd

from sqlitelab.core import config, machine, results, schema, turns
from sqlitelab.lab import kernel_ipc_prefix, kernel_transport
from sqlitelab.notebooks import studies
from sqlitelab.report import timing
from sqlitelab.studies import scales


# Notebooks that read the newest runs of the others (their module's READS_THE_OTHERS; notebook 06:
# capacity from every load notebook): a batch runs them after the rest, whatever their number.
READS_THE_OTHERS = tuple(s.ID for s in studies().values() if s.READS_THE_OTHERS)

# Tables whose rows carry an audit, and the columns that name a failed row in the summary
# (schema.TABLES' `audited`: those the stored table has).
AUDITED = schema.audited()


def notebooks(only: list[str] | None = None) -> list[Path]:
    found = sorted(config.NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"),
                   key=lambda p: (p.stem in READS_THE_OTHERS, p.stem))
    if only:
        found = [p for p in found if any(p.stem.startswith(o) for o in only)]
    return found


def execute(path: Path | str, out: Path | str, parameters: dict, log_output: bool = False) -> None:
    """papermill with the lab's kernel, the notebook's folder as the working directory, and the
    kernel on IPC sockets of its own (no TCP port, no "running over TCP without encryption"
    warning; several batches or tests at once do not share them: lab.kernel_ipc_prefix).
    A parameter the notebook does not declare is refused (check_overrides)."""
    import papermill as pm  # lazy: papermill takes ~3 s to import; --help and what only lists notebooks need none of it
    check_overrides([Path(path)], parameters)
    from traitlets.config import Config  # lazy: with papermill
    kernel = Config()
    kernel.KernelManager.transport = kernel_transport()
    if (prefix := kernel_ipc_prefix()) is not None:
        Path(prefix).parent.mkdir(parents=True, exist_ok=True)
        kernel.KernelManager.ip = prefix
    pm.execute_notebook(str(path), str(out), parameters=parameters, kernel_name=config.KERNEL_NAME,
                        cwd=str(Path(path).parent), log_output=log_output, progress_bar=False,
                        config=kernel)


def parameters(path: Path) -> dict[str, dict]:
    """The parameters a notebook declares (papermill's inference: name, default, help)."""
    import papermill as pm  # lazy: papermill takes ~3 s to import; --help and what only lists notebooks need none of it
    return pm.inspect_notebook(str(path))


def check_overrides(paths: list[Path], overrides: dict) -> dict[Path, dict]:
    """The overrides each notebook takes: a name is passed to the notebooks that declare it,
    and a name none of them declares is refused (papermill alone would only warn)."""
    declared = {p: parameters(p) for p in paths}
    unknown = [n for n in overrides if not any(n in d for d in declared.values())]
    if unknown:
        which = ", ".join(p.stem[:2] for p in paths)
        raise ValueError(f"unknown parameter {', '.join(map(repr, unknown))} for notebook{'s' if len(paths) > 1 else ''} "
                         f"{which} (see: papermill --help-notebook notebooks/<name>.ipynb)")
    return {p: {n: v for n, v in overrides.items() if n in d} for p, d in declared.items()}


def literal_params(pairs: list) -> dict:
    """-p NAME VALUE pairs as parameters: each value a Python literal, a bare word a string."""
    out = {}
    for name, value in pairs:
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = value
    return out


def run_notebook(path: Path, scale: str, overrides: dict | None = None,
                 runs_dir: Path | None = None, log_output: bool = True) -> dict:
    import papermill as pm  # lazy: papermill takes ~3 s to import; --help and what only lists notebooks need none of it
    run_id = results.new_run_id(path.stem)
    out_dir = Path(runs_dir or config.RUNS_DIR) / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / path.name
    params = {"scale": scale, "run_id": run_id, **(overrides or {})}
    t = time.perf_counter()
    error = None
    try:
        execute(path, out, params, log_output)
    except pm.PapermillExecutionError as e:
        error = f"{e.ename}: {e.evalue}"
    except Exception as e:  # the kernel died, the notebook is unreadable...: the batch goes on
        error = f"{type(e).__name__}: {e}"
    # a run taking turns with others (the power check's: sqlitelab.core.turns) waited for them:
    # that time is theirs, not its own
    waited = turns.waited_by_named()
    return {"notebook": path.stem, "run_id": run_id, "executed": str(out),
            "seconds": round(time.perf_counter() - t - waited, 1), "waited": round(waited, 1), "error": error}


def _count(run_id: str, table: str) -> int:
    """Measurements a notebook run stored in a table other than `points` (0 when there is none)."""
    n = results.read_sql(f"SELECT count(*) AS n FROM [{table}] WHERE notebook_run = ?", [run_id])
    return int(n["n"].iloc[0]) if len(n) else 0


def failed_audits(run_id: str) -> dict:
    """{table: the rows of notebook run `run_id` whose audit failed} over the AUDITED tables
    (every stored row, those a confirming generator replaced too), in the columns naming them."""
    out = {}
    for table, wanted in AUDITED.items():
        have = results.read_sql(f"SELECT name FROM pragma_table_info('{table}')")
        columns = set(have["name"]) if len(have) else set()
        if "audit_ok" not in columns:
            continue
        names = [c for c in wanted if c in columns] or ["audit_ok"]
        bad = results.read_sql(f"SELECT {', '.join(f'[{c}]' for c in names)} FROM [{table}] "
                               "WHERE notebook_run = ? AND audit_ok = 0", [run_id])
        if len(bad):
            out[table] = bad
    return out


def over_budget(done: list[dict], scale: str) -> list[str]:
    """One line per notebook run that took longer than its budget at `scale`, with where its
    time went."""
    lines = []
    for d in done:
        allowed = scales.budget(studies().get(d["notebook"]), scale)
        if allowed is not None and d["seconds"] > allowed:
            where = timing.breakdown(d["run_id"])
            lines.append(f"OVER BUDGET: {d['notebook']} took {d['seconds']:.0f} s against its "
                         f"{allowed:.0f} s ({scale})" + (f"; {where}" if where else ""))
    return lines


def total_line(done: list[dict], scale: str, seconds: float) -> str:
    """The batch's wall time against the collection's budget at `scale` (all notebooks run), or
    against the sum of the budgets of those it ran (none: notebooks no module of
    sqlitelab.notebooks declares)."""
    ran = {d["notebook"] for d in done}
    every = scales.budgets(studies().values(), scale)
    if not ran & set(every):
        return f"{seconds:.0f} s in all"
    allowed = (scales.COLLECTION_BUDGET_SECONDS[scale] if set(every) <= ran
               else sum(b for n, b in every.items() if n in ran))
    verdict = "within" if seconds <= allowed else "OVER"
    return f"{seconds:.0f} s in all, {verdict} the budget of {allowed:.0f} s"


def summary(done: list[dict], failed: dict | None = None, scale: str | None = None) -> str:
    """The table of the notebooks run (with each one's budget at `scale`), and under it every
    row whose audit failed and every run over its budget. `failed`: {run_id: failed_audits(run_id)}
    (looked up when not given)."""
    failed = {d["run_id"]: failed_audits(d["run_id"]) for d in done} if failed is None else failed
    rows = []
    every = results.load_points()
    for d in done:
        pts = every[every["notebook_run"] == d["run_id"]] if len(every) else every
        bad = sum(len(t) for t in failed.get(d["run_id"], {}).values())
        allowed = scales.budget(studies().get(d["notebook"]), scale) if scale else None
        row = {"notebook": d["notebook"], "seconds": d["seconds"],
               "budget s": "" if allowed is None else f"{allowed:.0f}",
               "points": len(pts) or _count(d["run_id"], "buffer_points"),
               # the error's first line, cut to a table's width (whole in the log above)
               "status": textwrap.shorten("error: " + d["error"].splitlines()[0], 60) if d["error"] else "ok"}
        if len(pts):
            row["best rps"] = round(pts["rps"].max(), 1)
            best = pts.loc[pts["rps"].idxmax()]
            row["at"] = f"{best['server']}/{best['profile']} {best['users']}u"
            row["gen-bound"] = int(pts["generator_bound"].sum())
            row["gen-influenced"] = (int(pts["generator_influenced"].fillna(0).astype(bool).sum())
                                     if "generator_influenced" in pts else 0)
        row["audit"] = f"FAILED ({bad})" if bad else ("ok" if row["points"] else "")
        rows.append(row)
    text = pd.DataFrame(rows).to_string(index=False)
    for d in done:
        for table, bad in failed.get(d["run_id"], {}).items():
            text += (f"\n\nAUDIT FAILED: {d['notebook']} ({d['run_id']}), {len(bad)} row(s) of "
                     f"`{table}` with audit_ok false:\n" + bad.to_string(index=False))
    over = over_budget(done, scale) if scale else []
    return text + ("\n\n" + "\n".join(over) if over else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.batch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=["quick", "seed"], default="quick")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 03")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="override a parameter (a Python literal; bare words are strings)")
    args = ap.parse_args(argv)
    overrides = literal_params(args.param)
    found = notebooks(args.only)
    if not found:
        print(f"No notebooks to run in {config.NOTEBOOKS_DIR}"
              + (f" matching {args.only}" if args.only else "") + ".")
        return 0
    try:
        taken = check_overrides(found, overrides)
    except ValueError as e:
        print(f"batch: {e}", file=sys.stderr)
        return 2
    t = time.perf_counter()
    done = []
    for path in found:
        skipped = sorted(set(overrides) - set(taken[path]))
        print(f"== {path.stem} ({args.scale})"
              + (f" (it has no parameter {', '.join(skipped)})" if skipped else ""), flush=True)
        done.append(run_notebook(path, args.scale, taken[path]))
        waits = f" (and {done[-1]['waited']} s waiting for its turns)" if done[-1]["waited"] else ""
        print(f"   {done[-1]['seconds']} s{waits} -> {done[-1]['executed']}"
              + (f"\n   FAILED: {done[-1]['error']}" if done[-1]["error"] else ""), flush=True)
    failed = {d["run_id"]: failed_audits(d["run_id"]) for d in done}
    own = time.perf_counter() - t - sum(d["waited"] for d in done)  # without waits for turns
    print(f"\nSummary ({args.scale} scale, {total_line(done, args.scale, own)}, "
          f"{machine.machine_label()}):")
    print(summary(done, failed, args.scale))
    print(f"\nExecuted notebooks: {config.RUNS_DIR}/<run_id>/\nFigures: {config.FIGURES_DIR}/<notebook>/"
          f"\nResults: {config.RESULTS_DB}")
    return 1 if any(d["error"] for d in done) or any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
