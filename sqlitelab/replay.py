"""Re-make notebooks from runs they stored, measuring nothing, and compare two re-makings:

    python -m sqlitelab.replay OUT [--scale quick] [--only 01 03] [-p NAME VALUE] [--against EARLIER_OUT]

Each notebook that measures (it declares a `replay` parameter) is executed with papermill and
`replay="newest"`: its newest stored run at that scale in data/results.db is re-made — its tables,
findings and figures drawn from the stored points (sqlitelab.core.results.replay), nothing measured
and nothing stored. A notebook that measures nothing and reads the others' stored runs (06, 11)
is executed as it is, reading the same results.db. Into OUT go the executed notebook
(`<notebook>.ipynb`), every text its cells showed (`<notebook>.txt`: printed lines, tables as
text, Markdown; images left out), its figures (`figures/<notebook>/`, through LAB_FIGURES_DIR)
and what it exports (`runs/<run_id>/`, through LAB_RUNS_DIR): nothing lands in data/. The run is
re-made with the parameters it ran with: a notebook given others (`-p`, as batch takes them, or a
default changed since) stops with a line naming each one that differs.

    python -m sqlitelab.replay --missing [--scale quick]

`--missing` re-makes, each into its own run's folder (data/runs/<run_id>/, where reports look),
the stored runs whose executed notebook is not there — run by papermill to a path of its own, or
in JupyterLab — from the parameters they were given (`notebook_parameters`, stored by notebook 10;
sqlitelab.report.publish.missing); `make report` runs it first.

`--against EARLIER_OUT` then compares OUT with a re-making made before a change: every notebook's
text line by line, every figure's SVG byte for byte. It is how a change that must not change
behaviour (a move of code) proves it did not, and how a figure or a sentence is fixed later
without measuring again. Exit status: 0 every notebook re-made (and, with --against, nothing
differed), 1 a notebook failed or something differed, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import difflib
import html
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from sqlitelab import batch
from sqlitelab.core import config
from sqlitelab.report import publish


def remakeable(only: list[str] | None = None) -> list[Path]:
    """The notebooks that can be re-made: those that declare a `replay` parameter, and those
    that measure nothing and read the other notebooks' stored runs (batch.READS_THE_OTHERS),
    executed as they are."""
    return [p for p in batch.notebooks(only)
            if "replay" in batch.parameters(p) or p.stem in batch.READS_THE_OTHERS]


# What differs between two showings of the same numbers: an object's address in its repr, and
# where the figures were written (a re-making writes them into its own folder).
_UNSTABLE = ((re.compile(r" at 0x[0-9a-f]+"), " at 0x…"),
             (re.compile(r"PosixPath\('[^']*/(figures/[^']+)'\)"), r"PosixPath('…/\1')"))


def _table_text(page: str) -> str:
    """A styled table's HTML as its cells' text, a row a line (its style block and ids dropped)."""
    page = re.sub(r"<style.*?</style>", "", page, flags=re.S).replace("\n", " ")
    page = re.sub(r"</t[dh]>", " | ", page)
    page = re.sub(r"</tr>", "\n", page)
    rows = (" ".join(html.unescape(re.sub(r"<[^>]+>", "", line)).split()) for line in page.splitlines())
    return "\n".join(r for r in rows if r) + "\n"


def shown_text(executed: Path) -> str:
    """Everything an executed notebook's cells showed as text, cell by cell: printed lines, and
    each display's Markdown or plain text (a table's text form); images are compared as figures,
    progress bars (on standard error, or a widget) and blank lines are left out, and so is what
    _UNSTABLE names."""
    nb = json.loads(Path(executed).read_text())
    parts = []
    for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        shown = []  # a cell's outputs as one text: a print split into two streams reads the same
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                if out.get("name") != "stdout":
                    continue
                text = out["text"]
            elif out["output_type"] in ("display_data", "execute_result"):
                data = out.get("data", {})
                if "application/vnd.jupyter.widget-view+json" in data:  # a progress bar
                    continue
                text = data.get("text/markdown") or data.get("text/plain") or ""
                if "".join(text).startswith("<pandas.io.formats.style.Styler") and "text/html" in data:
                    text = _table_text("".join(data["text/html"]))  # a styled table: its cells
            elif out["output_type"] == "error":
                text = f"{out['ename']}: {out['evalue']}"
            else:
                continue
            text = "".join(text) if isinstance(text, list) else text
            if not text.strip():
                continue
            for pattern, same in _UNSTABLE:
                text = pattern.sub(same, text)
            shown.append(text if text.endswith("\n") else text + "\n")
        if shown:
            parts.append(f"--- cell {i}\n" + "".join(shown))
    return "".join(parts)


def remake(path: Path, out: Path, scale: str, run: str = "newest", overrides: dict | None = None,
           scratch: Path | None = None) -> str | None:
    """Re-make one notebook into `out` (`overrides`: parameters it takes, as batch's -p); its error
    in one line, None when it ran. `scratch`: where its figures and exports go instead of `out`,
    which then gets the executed notebook alone."""
    executed = out / path.name
    error = None
    # the kernel inherits them: its figures and its exports (method.csv...) go into `out`
    into = {"LAB_FIGURES_DIR": str((scratch or out) / "figures"), "LAB_RUNS_DIR": str((scratch or out) / "runs")}
    was = {k: os.environ.get(k) for k in into}
    os.environ.update(into)
    try:
        replay = {} if path.stem in batch.READS_THE_OTHERS else {"replay": run}
        batch.execute(path, executed, {**(overrides or {}), "scale": scale, **replay})
    except Exception as e:  # papermill's execution error, a dead kernel: the next notebook goes on
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
    finally:
        for k, v in was.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if executed.exists() and scratch is None:
        (out / f"{path.stem}.txt").write_text(shown_text(executed))
    return error


def remake_missing(scale: str, runs_dir: Path | None = None, db: Path | None = None) -> list[tuple[str, str | None]]:
    """Every stored run at `scale` with no executed notebook in its run's folder (publish.missing:
    run by papermill to a path of its own, or in JupyterLab) re-made there from what it stored,
    with the parameters it was given, measuring nothing: then reports find it like any run. Only
    the executed notebook is added to the folder (the re-making's figures and exports go to a
    scratch folder, dropped). Returns (run id, its error or None) each."""
    runs_dir = Path(runs_dir or config.RUNS_DIR)
    paths = {p.stem: p for p in remakeable()}
    done = []
    for m in publish.missing(scale, runs_dir, db):
        path = paths.get(m["notebook"])
        if path is None:
            done.append((m["run_id"], f"{m['notebook']} is not a notebook of the collection that can be re-made"))
            continue
        given = {k: v for k, v in m["parameters"].items() if k != "scale"}
        out = runs_dir / m["run_id"]
        with tempfile.TemporaryDirectory(prefix="remake-") as scratch:
            error = remake(path, out, scale, m["run_id"], {**given, "run_id": m["run_id"]}, scratch=Path(scratch))
        if error:  # a failed re-making leaves the folder as it found it
            (out / path.name).unlink(missing_ok=True)
        done.append((m["run_id"], error))
    return done


def differences(new: Path, old: Path) -> list[str]:
    """What differs between two re-makings: each notebook's text (a unified diff's first lines)
    and each figure's SVG (byte for byte); a file only one of them has."""
    def only_one(name, a, b) -> str | None:
        return None if a.exists() and b.exists() else \
            f"{name}: only in {'the new' if b.exists() else 'the earlier'} re-making"
    found = []
    for name in sorted({p.name for p in new.glob("*.txt")} | {p.name for p in old.glob("*.txt")}):
        a, b = old / name, new / name
        if only_one(name, a, b):
            found.append(only_one(name, a, b))
            continue
        diff = list(difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                         str(a), str(b), lineterm="", n=0))
        if diff:
            found.append(f"{name}: text differs\n" + "\n".join(diff[:40]))
    svgs = {p.relative_to(new / "figures") for p in (new / "figures").rglob("*.svg")} | \
           {p.relative_to(old / "figures") for p in (old / "figures").rglob("*.svg")}
    for rel in sorted(svgs):
        a, b = old / "figures" / rel, new / "figures" / rel
        if only_one(f"figures/{rel}", a, b):
            found.append(only_one(f"figures/{rel}", a, b))
        elif a.read_bytes() != b.read_bytes():
            found.append(f"figures/{rel}: SVG differs")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.replay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, nargs="?", help="folder for the re-made notebooks, their texts and figures")
    ap.add_argument("--missing", action="store_true",
                    help="re-make, each into its run's folder, the stored runs at --scale whose executed notebook "
                         "is not there (run by papermill to a path of its own, or in JupyterLab)")
    ap.add_argument("--scale", choices=["quick", "seed"], default="quick")
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 03")
    ap.add_argument("--run", default="newest", help="the stored run to re-make: newest (default) or a run id "
                                                    "(with one notebook in --only)")
    ap.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                    help="a parameter the run ran with (a Python literal; bare words are strings)")
    ap.add_argument("--against", type=Path, help="an earlier re-making to compare with")
    args = ap.parse_args(argv)
    if args.missing:
        if args.out is not None or args.only or args.param or args.against is not None or args.run != "newest":
            print("replay: --missing re-makes every such run into its own folder: it takes --scale alone",
                  file=sys.stderr)
            return 2
        done = remake_missing(args.scale)
        for run_id, error in done:
            print(f"== {run_id}: " + (f"FAILED: {error}" if error else "re-made into its run's folder"), flush=True)
        return 1 if any(e for _, e in done) else 0
    if args.out is None:
        print("replay: give the folder to re-make into (or --missing)", file=sys.stderr)
        return 2
    overrides = batch.literal_params(args.param)
    found = remakeable(args.only)
    if args.run != "newest" and len(found) != 1:
        print("replay: a run id re-makes one notebook: name it with --only", file=sys.stderr)
        return 2
    if args.against is not None and not args.against.is_dir():
        print(f"replay: {args.against} is not an earlier re-making's folder", file=sys.stderr)
        return 2
    if not found:
        print("replay: no notebook to re-make" + (f" matching {args.only}" if args.only else ""), file=sys.stderr)
        return 2
    try:
        taken = batch.check_overrides(found, overrides)
    except ValueError as e:
        print(f"replay: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for path in found:
        error = remake(path, args.out, args.scale, args.run, taken[path])
        print(f"== {path.stem}: " + (f"FAILED: {error}" if error else f"re-made into {args.out}"), flush=True)
        failed += error is not None
    if args.against is None:
        return 1 if failed else 0
    found_diffs = differences(args.out, args.against)
    print("\n".join(found_diffs) if found_diffs else
          f"No difference from {args.against}: every text and every figure's SVG is the same.")
    return 1 if failed or found_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
