"""Each notebook's method set against its article's, as a table.

Each notebook declares its article's method rows once (sqlitelab.notebooks.<notebook>.ARTICLE, in
the vocabulary of sqlitelab.studies.method: a `Detail` per methodological choice, what the
article did and where the run's own value is read). Nothing about the run is typed there:
`table()` reads it, and says `same` or `differs: why`. A key the run did not record shows as
NOT RECORDED, and `unrecorded()` lists those rows (a notebook smoke test fails on any).

    method = methods.table(this.ARTICLE, points, parameters)
    methods.show(this.ARTICLE, points, parameters, run_id)   # display + method.csv
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sqlitelab.core import config
from sqlitelab.infra import servers
from sqlitelab.studies.method import NOT_STATED, Article, Detail, NotRecorded, NotRun, RunView

NOT_RECORDED = "NOT RECORDED"


def _scalar(v):
    if isinstance(v, (list, tuple, set)) and len(v) == 1:
        return next(iter(v))
    return v


def _norm(v):
    if isinstance(v, str):
        return v.strip().lower()
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _as_set(v) -> set:
    if isinstance(v, (list, tuple, set)):
        return {_norm(x) for x in v}
    return {_norm(v)}


def matches(value, expect, compare: str = "eq") -> bool:
    if compare == "eq":
        return _as_set(value) == _as_set(expect)
    if compare == "superset":
        return _as_set(expect) <= _as_set(value)
    if compare == "in":
        return _as_set(expect) <= _as_set(value) and len(_as_set(expect)) == 1
    raise ValueError(f"compare must be eq|superset|in, not {compare!r}")


def render(v) -> str:
    v = _scalar(v)
    if isinstance(v, (list, tuple, set)):
        return ", ".join(render(x) for x in v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


# --------------------------------------------------------------------------- the table

def table(article: Article, points: pd.DataFrame | None = None, parameters: dict | None = None,
          details: tuple[Detail, ...] | None = None) -> pd.DataFrame:
    """aspect · the article · this run · verdict (`same`, `differs: why`, `not stated`): the
    rows of `article` (a notebook's ARTICLE), or `details` instead, against the run."""
    run = RunView(points, parameters)
    rows = []
    none = article.seed == "—"  # notebook 10: an app of the reader's, no article behind it
    for d in details if details is not None else article.details:
        try:
            value = (run.where(**d.only) if d.only else run).get(d.run)
            shown = render(value)
        except NotRecorded as e:
            rows.append({"aspect": d.aspect, "article": d.article, "this run": NOT_RECORDED,
                         "verdict": f"not recorded ({e.args[0]})"})
            continue
        except NotRun as e:
            rows.append({"aspect": d.aspect, "article": d.article, "this run": "not in this run",
                         "verdict": f"differs: the run has no points with {e.args[0]}"})
            continue
        if d.expect is NOT_STATED:
            said = "no article" if none else "not stated by the article"
            verdict = f"{said}; {d.why}" if d.why else said
        elif d.expect is not None and matches(value, d.expect, d.compare):
            verdict = "same"
        else:
            verdict = f"differs: {d.why}" if d.why else "differs"
        rows.append({"aspect": d.aspect, "article": d.article, "this run": shown, "verdict": verdict})
    rows += [{"aspect": "stacks left out", "article": "—", "this run": why,
              "verdict": "differs: the stack cannot run the run's profile (its stack.toml's [cannot])"}
             for why in left_out(points, parameters)]
    return pd.DataFrame(rows, columns=["aspect", "article", "this run", "verdict"])


def left_out(points: pd.DataFrame | None, parameters: dict | None) -> list[str]:
    """Why a stack the run named (its `servers` parameter, as stored) has no point: it cannot run
    the profile its points ran (servers.cannot, as the sweep left it out: node-sqlite and seed
    004's shared cache), in words, one per stack; [] where every named stack ran, or where one
    that did not is not explained so (a run that stopped early)."""
    named = (parameters or {}).get("servers")
    if points is None or not len(points) or not isinstance(named, (list, tuple)) \
            or not {"server", "profile"} <= set(points):
        return []
    ran, profiles = set(points["server"]), sorted(set(points["profile"].dropna()))
    out = []
    for stack in named:
        if stack in ran or stack not in servers.STACKS:
            continue
        whys = sorted({w for p in profiles if (w := servers.cannot(stack, servers.profile_knobs(p)))})
        out += whys[:1]
    return out


def unrecorded(method: pd.DataFrame) -> list[str]:
    """Aspects whose run value was not recorded."""
    return method.loc[method["this run"] == NOT_RECORDED, "aspect"].tolist()


def show(article: Article, points: pd.DataFrame | None, parameters: dict | None, run_id: str,
         details: tuple[Detail, ...] | None = None, runs_dir: Path | None = None) -> pd.DataFrame:
    """Display the method table under its article's title and write it to
    data/runs/<run_id>/method.csv; returns it."""
    from IPython.display import Markdown, display  # lazy: only when shown in a notebook
    m = table(article, points, parameters, details)
    out = Path(runs_dir or config.RUNS_DIR) / run_id
    out.mkdir(parents=True, exist_ok=True)
    m.to_csv(out / "method.csv", index=False)
    same = int((m["verdict"] == "same").sum())
    seed = f"seed {article.seed}, " if article.seed != "—" else ""  # notebook 10 has no article
    display(Markdown(f"**Method: {seed}{article.title}, against this run** — {same} of {len(m)} "
                     "details the same; every difference says why."))
    with pd.option_context("display.max_colwidth", None):
        display(m.style.hide(axis="index").set_properties(**{"text-align": "left",
                                                                "white-space": "pre-wrap"}))
    return m
