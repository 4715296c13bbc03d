"""One module per notebook: each notebooks/NN-*.ipynb has exactly one module of
sqlitelab.notebooks declaring its ID, each such module its notebook, and nothing else in the
package names a notebook; every module holds what every notebook must declare
(sqlitelab.studies.declarations)."""
from __future__ import annotations

import pytest

from sqlitelab import notebooks
from sqlitelab.core import config
from sqlitelab.studies import declarations, scales

NOTEBOOK_IDS = sorted(p.stem for p in config.NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"))
PACKAGE = config.PROJ_ROOT / "sqlitelab"


# What every notebook's module declares, module-level data (None where it has none).
DECLARED = ("ID", "TITLE", "SCALES", "SERVER_SPLIT", "ARTICLE", "READING", "IN_COLLECTION",
            "HEADLINE_EXPERIMENTS", "READS_THE_OTHERS", "SMOKE", "STORES", "BUDGET_SECONDS",
            "EXPERIMENT_TITLES", "QUESTION", "README_FIGURE")


def test_every_notebook_has_one_module_and_every_module_its_notebook():
    """sqlitelab.notebooks holds one module per notebook; a module there that declares no ID
    would be code no notebook finds."""
    assert NOTEBOOK_IDS, config.NOTEBOOKS_DIR
    assert notebooks.ids() == NOTEBOOK_IDS
    modules = [notebooks.study(i).__name__ for i in notebooks.ids()]
    assert len(set(modules)) == len(modules)
    code = {p.stem for p in (PACKAGE / "notebooks").glob("*.py")} - {"__init__"}
    assert code == {m.rsplit(".", 1)[1] for m in modules}, "sqlitelab/notebooks/ modules that declare no ID"


@pytest.mark.parametrize("notebook", NOTEBOOK_IDS)
def test_every_module_declares_what_a_notebook_is(notebook):
    s = notebooks.study(notebook)
    missing = [name for name in DECLARED if not hasattr(s, name)]
    assert not missing, f"{s.__name__} declares no {', '.join(missing)}"
    assert s.ID == notebook
    assert {"quick", "seed"} <= set(s.SCALES), s.__name__
    assert all(isinstance(v, dict) for v in s.SCALES.values())
    assert s.SERVER_SPLIT is None or (isinstance(s.SERVER_SPLIT, int) and s.SERVER_SPLIT >= 1)
    assert s.ARTICLE is None or s.ARTICLE.notebook == notebook
    assert isinstance(s.READING, dict) and all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in s.READING.items())
    assert s.README_FIGURE in s.READING, f"{s.ID}'s README_FIGURE is none of its figures"
    assert isinstance(s.QUESTION, str) and s.QUESTION.strip()
    assert isinstance(s.IN_COLLECTION, bool) and isinstance(s.READS_THE_OTHERS, bool)
    assert isinstance(s.EXPERIMENT_TITLES, dict) and all(isinstance(v, str) or callable(v)
                                                         for v in s.EXPERIMENT_TITLES.values())
    assert s.HEADLINE_EXPERIMENTS is None or (s.IN_COLLECTION and isinstance(s.HEADLINE_EXPERIMENTS, set))
    assert set(s.BUDGET_SECONDS) == set(s.SCALES) and all(b > 0 for b in s.BUDGET_SECONDS.values())
    assert s.BUDGET_SECONDS["quick"] <= scales.QUICK_MOST, f"{notebook}: no quick notebook over {scales.QUICK_MOST:.0f} s"


@pytest.mark.parametrize("scale", ["quick", "seed"])
def test_the_notebooks_budgets_fit_the_collections(scale):
    """`make run` within 15 minutes of notebooks, `make seed` within 90: the notebooks' own budgets
    add up within the collection's, what they leave is spare, and every notebook has one."""
    every = notebooks.studies().values()
    got = scales.budgets(every, scale)
    assert list(got) == notebooks.ids()
    assert sum(got.values()) <= scales.COLLECTION_BUDGET_SECONDS[scale], got
    assert scales.spare(every, scale) == scales.COLLECTION_BUDGET_SECONDS[scale] - sum(got.values()) >= 0
    delay = notebooks.study("09-network-delay")
    assert scales.settings(delay, scale)["budget_seconds"] == got["09-network-delay"]
    assert scales.budget(None, scale) is None  # a notebook of one's own has none


def test_an_unknown_notebook_is_refused():
    with pytest.raises(ValueError, match=r"no module declares notebook '99-nothing'.*known: 01-"):
        notebooks.study("99-nothing")
    with pytest.raises(ValueError, match="scale must be one of"):
        scales.settings(notebooks.study("01-linear-writes"), "huge")


def test_a_notebook_is_named_in_its_own_module_only():
    """A notebook's ID is written in its own module (and its .ipynb) only: everything else reads
    it from the module, handed to it."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(config.PROJ_ROOT)
        text = path.read_text()
        for notebook in NOTEBOOK_IDS:
            if rel.parts[:2] == ("sqlitelab", "notebooks") and notebooks.study(notebook).__file__ == str(path):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if notebook in line:
                    found.append(f"{rel}:{n} {notebook}")
    assert not found, "notebook IDs outside their module (read the module instead):\n" + "\n".join(found)


def _article_rows(notebook: str) -> dict[str, str]:
    return {d.aspect: d.article for d in notebooks.study(notebook).ARTICLE.details}


def test_no_method_table_calls_seed_002s_load_tool_a_python_client():
    """Seed 002's load generator is the author's own Rust tool (reqwest + tokio), not asyncio."""
    wrong = [f"{i}: {d.aspect}" for i in NOTEBOOK_IDS if notebooks.study(i).ARTICLE is not None
             for d in notebooks.study(i).ARTICLE.details if "asyncio" in d.article]
    assert not wrong, wrong
    from sqlitelab.notebooks import network_delay, operations_under_load, sqlite_vs_postgres
    for study in (operations_under_load, sqlite_vs_postgres, network_delay):
        assert "the author's own Rust tool on reqwest + tokio" in _article_rows(study.ID)["load tool"]


def test_02s_development_mode_sql_log_and_transactions_are_labelled_inferences():
    rows = _article_rows("02-busy-errors")
    for aspect in ("server", "work per request", "transaction shape", "development log"):
        assert "not stated; inferred:" in rows[aspect], aspect
    assert "43 KiB error pages" in rows["server"]


def test_03s_synchronous_is_labelled_an_inference():
    assert _article_rows("03-read-write-mix")["synchronous"].startswith("not stated; inferred:")


def test_04_names_the_authors_commit_and_the_code_at_the_articles_date():
    rows = _article_rows("04-sqlite-as-buffer")
    assert "“my MacBook”" in rows["machine"] and "Apple" not in rows["machine"]
    code = rows["the author's code"]
    assert "METResearchGroup/bluesky-research at de1246d9 (2025-02-07)" in code
    assert "article's date (2025-01-31" in code
    assert "one executemany on one connection" in rows["the code at the article's date"]


@pytest.mark.parametrize("notebook, experiment, words", [
    ("03-read-write-mix", "synchronous-normal", "synchronous=NORMAL"),
    ("03-read-write-mix", "share-10", "10% writes"),
    ("03-read-write-mix", "path-batch", "one writer, batched commits"),
    ("05-single-machine", "go-seed004-fixed-pool/user-read",
     "Shared cache, one connection per core, User lookup (GET /users/:id)"),
    ("07-sqlite-vs-postgres", "001-metrics/postgres-link-100us", "seed 001's workload, Postgres behind a 100 µs link"),
    ("08-operations-under-load", "op/vacuum-into/rust-axum", "VACUUM INTO on Rust · Axum"),
    ("09-network-delay", "link-500us", "proxy, 500 µs each way"),
    ("01-linear-writes", "ceiling", "the machine's own limits"),
    ("10-your-app", None, ""),
])
def test_every_experiment_has_words_from_its_module(notebook, experiment, words):
    """An experiment id is the lab's; a figure or a comparison names it in words (its module's
    EXPERIMENT_TITLES, the scenario, profile and stack titles), and refuses one nothing names."""
    assert declarations.experiment_title(notebooks.study(notebook), experiment) == words
    with pytest.raises(ValueError, match="no words for the experiment 'share-x'"):
        declarations.experiment_title(notebooks.study("03-read-write-mix"), "share-x")
