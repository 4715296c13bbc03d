"""Reports from runs: a notebook's executed copy (data/runs/<run_id>/<notebook>.ipynb) as a page
without code — its method table, tables, figures with their sentences and findings — in Markdown
and HTML (nbconvert), headed by where every number on it comes from: the run id, commit, machine,
scale and lock of the run that made them.

    python -m sqlitelab.report --scale quick          # make report: the newest run of each notebook
    publish.newest(scale="quick")                     # those runs, found on disk
    publish.write(run, out_dir)                       # one report: <notebook>.md, .html, _files/

What a reader sees is what the notebook displayed: Markdown, tables and figures. Code,
progress bars, printed logs and a cell's bare return value (text only) are left out, and so is a
section of the notebook (a `## ` heading to the next) that displayed nothing (its set-up, its
parameters). The Markdown carries each table as a pipe table (pipe_tables), which GitHub and static
site generators render; pandas' HTML, with its `<style>` block of generated ids, stays in the HTML
page only.
"""
from __future__ import annotations

import copy
import html
import json
import sqlite3
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter, MarkdownExporter
from nbconvert.preprocessors import ExtractOutputPreprocessor

from sqlitelab.core import config, results

# What a report keeps of a code cell's outputs: what the notebook displayed for a reader.
SHOWN = ("text/markdown", "text/html", "image/png", "image/svg+xml")
# The HTML page around a report: readable alone, no scripts, nothing fetched from elsewhere.
PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
        line-height: 1.5; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; display: block; overflow-x: auto; }}
th, td {{ border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: right; }}
th {{ background: #f4f4f4; }}
img {{ max-width: 100%; }}
code {{ background: #f4f4f4; padding: 0 0.2rem; }}
</style></head>
<body>
{body}
</body></html>
"""


@dataclass(frozen=True)
class Run:
    """One executed notebook on disk and what the results store says of its run."""
    notebook: str
    run_id: str
    executed: Path
    scale: str
    started: str
    provenance: dict = field(default_factory=dict)


def _papermill(nb) -> dict:
    return nb.metadata.get("papermill", {}) or {}


def papermill_of(path: Path) -> dict:
    """What papermill recorded of an executed notebook: its parameters, start, end, duration."""
    return _papermill(nbformat.read(path, as_version=4))


def provenance(run_id: str, db: Path) -> dict:
    """The run's commit, machine, lock and times from the results store (the first of its sweeps'
    rows: every sweep of a notebook run shares them); {} when the notebook stored no sweep (06)."""
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        con.row_factory = sqlite3.Row
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'").fetchone():
            return {}
        cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
        want = [c for c in ("git_commit", "machine", "lock_hash", "lock_ok", "server_cpus", "generator_cpus",
                            "versions") if c in cols]
        # each column's value from whichever sweep recorded it (a ceiling's row has no CPU layout)
        row = con.execute(f"SELECT {', '.join(f'max({c}) AS {c}' for c in want)}, min(started) AS started, "
                          f"max(finished) AS finished, "
                          f"count(*) AS sweeps FROM runs WHERE notebook_run = ?", [run_id]).fetchone()
    finally:
        con.close()
    return {k: row[k] for k in row.keys()} if row and row["sweeps"] else {}


def runs(runs_dir: Path | None = None, db: Path | None = None) -> list[Run]:
    """Every notebook run on disk that finished without an error, oldest first."""
    runs_dir = Path(runs_dir or config.RUNS_DIR)
    db = Path(db or config.RESULTS_DB)
    known = {p.stem for p in config.NOTEBOOKS_DIR.glob("*.ipynb")}  # the collection's notebooks
    found = []
    for d in sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.exists() else []:
        for nb_path in d.glob("*.ipynb"):
            if nb_path.stem not in known:
                continue
            nb = nbformat.read(nb_path, as_version=4)
            pm = _papermill(nb)
            params = pm.get("parameters", {})
            if pm.get("exception") or "run_id" not in params or not pm.get("end_time"):
                continue  # failed or unfinished: never reported
            prov = provenance(params["run_id"], db)
            # a notebook re-made from its stored run (replay) started when it was re-made: the
            # run's own start is in its id (else its first sweep's)
            started = ((results.run_started(params["run_id"]) or prov.get("started") or "") if params.get("replay")
                       else pm.get("start_time", ""))
            found.append(Run(nb_path.stem, params["run_id"], nb_path, params.get("scale", ""), started, prov))
    return sorted(found, key=lambda r: r.started)


def newest(scale: str = "quick", only: list[str] | None = None, runs_dir: Path | None = None,
           db: Path | None = None) -> list[Run]:
    """The newest finished run of each notebook at `scale` (`only`: notebook name prefixes)."""
    if scale not in ("quick", "seed"):
        raise ValueError(f"scale must be quick or seed, not {scale!r}")
    best: dict[str, Run] = {}
    for r in runs(runs_dir, db):
        if r.scale == scale and (not only or any(r.notebook.startswith(o) for o in only)):
            best[r.notebook] = r
    return [best[n] for n in sorted(best)]


def missing(scale: str = "quick", runs_dir: Path | None = None, db: Path | None = None) -> list[dict]:
    """The notebook runs results.db holds at `scale` with no executed notebook in their run's
    folder (papermill wrote it to a path of its own, or the notebook ran in JupyterLab) that
    stored their notebook's parameters (`notebook_parameters`, as notebook 10 does), oldest
    first: {notebook, run_id, parameters} each, what a re-making needs to put it where
    reports look (`python -m sqlitelab.replay --missing`)."""
    runs_dir = Path(runs_dir or config.RUNS_DIR)
    db = Path(db or config.RESULTS_DB)
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
        if not {"notebook", "notebook_run", "parameters", "scale"} <= cols:
            return []
        rows = con.execute("SELECT notebook, notebook_run, parameters FROM runs WHERE scale = ? "
                           "GROUP BY notebook_run ORDER BY min(started)", [scale]).fetchall()
    finally:
        con.close()
    out = []
    for notebook, run_id, parameters in rows:
        try:
            given = (json.loads(parameters or "{}") or {}).get("notebook_parameters")
        except (TypeError, ValueError):
            continue
        if isinstance(given, dict) and not (runs_dir / run_id / f"{notebook}.ipynb").exists():
            out.append({"notebook": notebook, "run_id": run_id, "parameters": given})
    return out


# Where a report says its run's rows are: the results store, or a committed export of it.
STORE = "`data/results.db`"


def header(run: Run, store: str = STORE, remade: bool = False) -> str:
    """Where every number of the report comes from, in a few Markdown lines; `store`: where the
    run's rows are kept; `remade`: the page's notebook was re-made from the stored run
    (sqlitelab.replay: its tables, words and figures by the code that re-made it, nothing
    measured again), which it says."""
    p = run.provenance
    lines = [f"*Every number on this page comes from notebook run **`{run.run_id}`** "
             f"({run.scale} scale), started {run.started}"
             + (", its page re-made from the stored run by `python -m sqlitelab.replay` (nothing measured "
                "again: its tables, words and figures drawn by the code that re-made it)" if remade else "")
             + ".*", ""]
    if p:
        lines += [f"- commit `{p.get('git_commit')}`, machine: {p.get('machine')}",
                  (f"- server CPUs {p.get('server_cpus')}, generator CPUs {p.get('generator_cpus')}; "
                   if p.get("server_cpus") is not None else "- no server (the run measured in its own process); ")
                  + f"lock `{p.get('lock_hash')}`" + ("" if p.get("lock_ok") in (1, None) else " (not the lock's packages)"),
                  f"- its measurements: {store}, rows with `notebook_run = '{run.run_id}'`"
                  + (f"; raw files: `data/runs/{run.run_id}/`" if store == STORE else "")]
    else:
        lines += ["- this notebook stored no measurements of its own: its tables name the runs they read"]
    return "\n".join(lines)


def strip(nb, head: str):
    """A copy of executed notebook `nb` as a reader sees it: no code, no logs, no empty sections,
    `head` after the title."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            kept = []
            for o in cell.get("outputs", []):
                if o.get("output_type") in ("display_data", "execute_result"):
                    data = {k: v for k, v in o.get("data", {}).items() if k in SHOWN}
                    if data:
                        o = copy.deepcopy(o)
                        o["data"] = data
                        kept.append(o)
            cell.outputs = kept
    # sections (a `## ` heading to the next) that displayed nothing are the set-up's
    sections, current = [], []
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## ") and current:
            sections.append(current)
            current = []
        current.append(cell)
    sections.append(current)
    cells = []
    for sec in sections:
        titled = sec[0].cell_type == "markdown" and sec[0].source.lstrip().startswith("## ")
        if titled and not any(c.cell_type == "code" and c.outputs for c in sec):
            continue
        cells += [c for c in sec if c.cell_type == "markdown" or c.outputs]
    if cells and cells[0].cell_type == "markdown" and cells[0].source.startswith("# "):
        cells.insert(1, nbformat.v4.new_markdown_cell(head))
    else:
        cells.insert(0, nbformat.v4.new_markdown_cell(head))
    nb.cells = cells
    return nb


class _TableReader(HTMLParser):
    """The tables of a piece of HTML as rows of (text, is_header) cells, a cell of colspan n
    repeated n times and one of rowspan n carried into the rows below; the text outside any table
    and any <style> ("24 rows × 22 columns") kept as paragraphs."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.outside, self._skip = [], [], 0
        self._rows = self._row = self._cell = None
        self._spans: dict[int, list] = {}  # column -> [text, is_header, rows still to fill]

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "table":
            self._rows, self._spans = [], {}
        elif tag == "tr" and self._rows is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"text": [], "header": tag == "th", "colspan": int(a.get("colspan") or 1),
                          "rowspan": int(a.get("rowspan") or 1)}
        elif tag == "br" and self._cell is not None:
            self._cell["text"].append(" ")

    def _fill_spans(self):
        while len(self._row) in self._spans:
            col = len(self._row)
            text, header, left = self._spans[col]
            self._row.append((text, header))
            if left > 1:
                self._spans[col][2] -= 1
            else:
                del self._spans[col]

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
        elif tag in ("td", "th") and self._cell is not None:
            c, self._cell = self._cell, None
            text = " ".join("".join(c["text"]).split())
            for _ in range(c["colspan"]):
                self._fill_spans()
                if c["rowspan"] > 1:
                    self._spans[len(self._row)] = [text, c["header"], c["rowspan"] - 1]
                self._row.append((text, c["header"]))
        elif tag == "tr" and self._row is not None:
            self._fill_spans()
            self._rows.append(self._row)
            self._row = None
        elif tag == "table" and self._rows is not None:
            self.tables.append(self._rows)
            self._rows = None

    def handle_data(self, data):
        if self._skip:
            return
        if self._cell is not None:
            self._cell["text"].append(data)
        elif self._rows is None and data.strip():
            self.outside.append(" ".join(data.split()))


def pipe_cell(text: str) -> str:
    """`text` as one cell of a Markdown pipe table: its pipes and backslashes escaped, on one line."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def pipe_table(rows: list[list[tuple[str, bool]]]) -> str:
    """One table as a Markdown pipe table: its leading rows of header cells (pandas' column
    levels and index names) joined per column into one header line, " · " between the levels."""
    width = max(len(r) for r in rows)
    rows = [r + [("", False)] * (width - len(r)) for r in rows]
    n_head = next((i for i, r in enumerate(rows) if not all(h for _, h in r)), len(rows))
    head_rows, body = (rows[:n_head], rows[n_head:]) if n_head else (rows[:1], rows[1:])
    head = [" · ".join(dict.fromkeys(t for t in (r[c][0] for r in head_rows) if t)) for c in range(width)]
    lines = ["| " + " | ".join(map(pipe_cell, head)) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(pipe_cell(t) for t, _ in r) + " |" for r in body]
    return "\n".join(lines)


def pipe_tables(page: str) -> str | None:
    """An HTML output's tables as Markdown pipe tables, with the words around them (None when it
    holds no table: that output is left as it is)."""
    reader = _TableReader()
    reader.feed(page)
    reader.close()
    if not reader.tables:
        return None
    return "\n\n".join([pipe_table(t) for t in reader.tables if t] + reader.outside)


def as_markdown(nb):
    """A copy of report notebook `nb` whose HTML tables are Markdown pipe tables."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            page = o.get("data", {}).get("text/html")
            md = pipe_tables(page) if page else None
            if md is not None:
                o["data"] = {k: v for k, v in o["data"].items() if k not in ("text/html", "text/markdown")}
                o["data"]["text/markdown"] = md
    return nb


def write(run: Run, out_dir: Path, store: str = STORE) -> dict[str, Path]:
    """Write `run`'s report into `out_dir`: <notebook>.md with its figures in <notebook>_files/,
    and <notebook>.html showing the same figure files. Returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = nbformat.read(run.executed, as_version=4)
    nb = strip(executed, header(run, store, remade=bool(_papermill(executed).get("parameters", {}).get("replay"))))
    options = {"exclude_input": True, "exclude_input_prompt": True, "exclude_output_prompt": True}
    files = f"{run.notebook}_files"
    md, res = MarkdownExporter(**options).from_notebook_node(as_markdown(nb), resources={"output_files_dir": files})
    written = {"markdown": out_dir / f"{run.notebook}.md", "html": out_dir / f"{run.notebook}.html"}
    for name, data in res.get("outputs", {}).items():
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    written["markdown"].write_text(md)
    # the HTML page shows the same figure files (no copies inside it), in a page of its own
    exporter = HTMLExporter(template_name="basic", **options)
    exporter.register_preprocessor(ExtractOutputPreprocessor(enabled=True), enabled=True)
    body, _ = exporter.from_notebook_node(nb, resources={"output_files_dir": files})
    title = next((c.source.lstrip("# ").splitlines()[0] for c in nb.cells
                  if c.cell_type == "markdown" and c.source.startswith("# ")), run.notebook)
    written["html"].write_text(PAGE.format(title=html.escape(title), body=body))
    return written


def index(reports: list[tuple[Run, dict[str, Path]]], out_dir: Path) -> Path:
    """index.md: one line per report, its run and commit."""
    lines = ["# Reports", "", "| notebook | run | commit | report |", "|---|---|---|---|"]
    for run, paths in reports:
        lines.append(f"| {run.notebook} | `{run.run_id}` | `{run.provenance.get('git_commit', '—')}` | "
                     f"[Markdown]({paths['markdown'].name}) · [HTML]({paths['html'].name}) |")
    path = Path(out_dir) / "index.md"
    path.write_text("\n".join(lines) + "\n")
    return path

