"""The README's tables of the reference run are generated from its committed export: the
block equals what `python -m sqlitelab.readme` writes, and a number typed over fails."""
import pandas as pd
import pytest

from sqlitelab import notebooks, readme
from sqlitelab.core import intervals
from sqlitelab.report import reference_tables, summaries
from sqlitelab.studies import scales
from sqlitelab import notebooks


def test_the_readme_block_is_the_exports():
    assert readme.check() == [], "README.md's reference-run block differs from data/reference-run/: " \
                                 "run `python -m sqlitelab.readme`"


def test_a_number_typed_over_in_the_block_fails_the_check(tmp_path):
    text = readme.README.read_text()
    block = text[text.index(readme.BEGIN):text.index(readme.END)]
    digit = next(i for i, ch in enumerate(block) if ch.isdigit() and i > len(readme.BEGIN))
    edited = block[:digit] + str((int(block[digit]) + 1) % 10) + block[digit + 1:]
    copy = tmp_path / "README.md"
    copy.write_text(text.replace(block, edited))
    assert readme.check(copy) != []
    assert readme.main(["--check", "--readme", str(copy)]) == 1
    assert readme.main(["--readme", str(copy)]) == 0 and readme.check(copy) == []  # the command mends it


def test_a_readme_without_its_block_is_refused(tmp_path):
    with pytest.raises(ValueError, match="exactly one generated block"):
        readme.splice("no block here", "x")
    with pytest.raises(ValueError, match="exactly one generated block"):
        readme.splice(f"{readme.BEGIN}\n{readme.END}\n{readme.BEGIN}\n{readme.END}", "x")
    bare = tmp_path / "README.md"
    bare.write_text("# no block\n")
    assert readme.check(bare) != [] and readme.main(["--readme", str(bare)]) == 2


def test_every_article_has_its_row_from_the_reference_run():
    x = reference_tables.load()
    rows = 0
    for s in notebooks.studies().values():
        if hasattr(s, "summary"):
            assert s.ARTICLE is not None, f"{s.ID} writes a README row but declares no article"
            article, here = s.summary(s, x)
            assert article and here != summaries.NOT_IN_RUN, f"{s.ID} has no points in the reference run"
            rows += 1
    assert rows == readme.articles_table(x).count("\n") - 1  # every row, under the header's two lines


def test_the_table_of_notebooks_is_their_modules(tmp_path, monkeypatch):
    """Each notebook's row: its module's QUESTION and README_FIGURE (the figure when it is
    committed); a question typed over in the README fails the check, and the command mends it."""
    table = readme.notebooks_block()
    for s in notebooks.studies().values():
        row = next(line for line in table.splitlines() if line.startswith(f"| [`{s.ID}`]"))
        assert s.QUESTION.replace("|", "\\|") in row
        png = readme.config.PROJ_ROOT / "figures" / s.ID / f"{s.README_FIGURE}.png"
        assert (f"figures/{s.ID}/{s.README_FIGURE}.png" in row) == png.exists(), row
        assert png.exists() or row.endswith("| no figure committed yet |")
    text = readme.README.read_text()
    study = notebooks.study("01-linear-writes")
    copy = tmp_path / "README.md"
    copy.write_text(text.replace(study.QUESTION, "How fast is SQLite?"))
    (tmp_path / "figures").symlink_to(readme.config.PROJ_ROOT / "figures")
    assert any("How fast is SQLite?" in d for d in readme.check(copy))
    assert readme.main(["--readme", str(copy)]) == 0 and readme.check(copy) == []
    monkeypatch.setattr(study, "README_FIGURE", "latency")  # another figure chosen in its module
    assert any("figures/01-linear-writes/latency.png" in d for d in readme.check(copy))


def test_02s_row_leads_with_the_articles_tool_and_says_what_its_own_runs_cannot_tell():
    """On the committed reference run: oha's shares first, each with Wilson's interval and its
    verdict against the article's, Locust's beside; the article's first two set-ups are not an
    order (their intervals overlap). Without the cross-checks, the lab's generator alone."""
    from sqlitelab.notebooks import busy_errors
    x = reference_tables.load()
    _, here = busy_errors.summary(busy_errors, x)
    assert here.startswith("The article's tool, oha, as it ran it (a new connection per request): retries: 1000")
    assert here.count("95 % interval") == 6 and "none failed: the article's zero" in here
    assert "The lab's generator beside it:" in here and "cannot be told apart by its own runs" in here
    _, bare = busy_errors.summary(busy_errors, {**x, "crosschecks": x["crosschecks"].iloc[0:0]})
    assert bare.startswith("The lab's generator (no cross-check stored):") and "oha" not in bare
    ref, _ = busy_errors.analysis.reference("seed001_busy_errors")
    pts = x["points"][(x["points"]["notebook"] == busy_errors.ID) & (x["points"]["experiment"] == "article")]
    words = busy_errors.article_words(busy_errors.article_runs(busy_errors.busy_summary(pts), ref, x["crosschecks"]))
    assert words.startswith("The article's set-ups at 3 users, oha (the article's tool, a new connection per request)")
    assert "the article's runs cannot tell them apart" in words and "Wilson's" in words
    runs = busy_errors.article_runs(busy_errors.busy_summary(pts), ref, None)
    alone = busy_errors.article_words(runs)
    assert "oha, the article's tool, ran none of them at this scale" in alone
    first = runs[runs["users"] == runs["users"].max()].iloc[0]
    share = intervals.shown_share(intervals.share_interval(first["busy_errors"], first["requests"]))
    assert f"**{first['setup']}**: the lab's generator {share}" in alone and "here, the lab's generator tells them apart" in alone


def test_each_notebooks_time_is_judged_against_its_budget_both_ways():
    """The block's line of times: each notebook's seconds beside the budget its module declares,
    and the verdict computed from them: within, or which notebook ran over."""
    every = notebooks.studies()
    first = next(n for n, s in every.items() if scales.budget(s, "seed"))
    allowed = scales.budget(every[first], "seed")
    row = {"notebook": first, "run_id": "r", "scale": "seed", "started": "2026-12-02T13:00:00",
           "finished": "2026-12-02T13:10:00", "seconds": allowed - 1, "git_commit": "abcdef0123", "machine": "m"}
    rows = [{**row, "notebook": n, "seconds": scales.budget(s, "seed") - 1} for n, s in every.items()
            if scales.budget(s, "seed")]
    within = readme.times({reference_tables.TIMINGS: pd.DataFrame(rows)})[-1]
    assert f"{first[:2]} {allowed - 1:,.1f} s of {allowed:,.0f}" in within and "`abcdef0`" in within
    assert within.endswith("every notebook within its budget."), within
    over = readme.times({reference_tables.TIMINGS: pd.DataFrame([{**row, "seconds": allowed + 1}])})[-1]
    assert f"over its budget: {first[:2]}; no finished run: " in over
    assert readme.times({}) == [] and readme.times({reference_tables.TIMINGS: pd.DataFrame()}) == []
