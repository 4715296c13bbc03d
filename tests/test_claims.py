"""Each verdict word in both directions: said when its condition holds, not said when it fails."""
import pandas as pd
import pytest

from sqlitelab.core import intervals
from sqlitelab.report import analysis, claims
from sqlitelab.notebooks import sqlite_as_buffer


def test_the_articles_ratio_only_within_the_band():
    assert claims.same_ratio(6.0, 6.5) and "the article's ratio" in claims.ratio_words(6.0, 6.5)
    assert not claims.same_ratio(3.0, 6.5)
    words = claims.ratio_words(3.0, 6.5)
    assert "the article's ratio" not in words and words == "3.0× (the article: 6.5×)"
    # the band's edge is the condition, both sides of it
    assert claims.same_ratio(6.5 * (1 + claims.SAME_RATIO) * 0.999, 6.5)
    assert not claims.same_ratio(6.5 * (1 + claims.SAME_RATIO) * 1.001, 6.5)


def test_collapse_is_a_level_after_the_peak_below_half_of_it():
    article = {1: 750, 2: 1080, 4: 1889, 8: 2572, 10: 2730, 16: 633}  # seed 000's table
    assert claims.collapse_level(article) == 16
    assert "collapses from 16 users" in claims.collapse_words(article)
    steady = {1: 750, 2: 1080, 4: 1889, 8: 2572, 10: 2730, 16: 2000}
    assert claims.collapse_level(steady) is None
    words = claims.collapse_words(steady)
    assert "collapses" not in words and "never falls below 50% of that peak up to 16 users" in words
    # a level below half the peak but before it is a rise, not a collapse
    assert claims.collapse_level({1: 100, 2: 1000, 4: 900}) is None
    assert claims.collapse_words({}) == "no levels measured"


def test_the_articles_shape_only_when_both_its_parts_hold():
    article = {1: 750, 2: 1080, 4: 1889, 8: 2572, 10: 2730, 16: 633}
    assert claims.rises(article) and not claims.rises({1: 2000, 2: 1000})
    same = claims.shape_words({1: 10, 4: 30, 8: 40, 16: 5}, article)
    assert same == "the article's shape (a rise to a peak and a collapse after it; the peak at 8 users (the article's 10))"
    first = claims.shape_words({1: 2000, 2: 1000, 8: 500, 16: 300}, article)  # 01's seed run here
    assert first.startswith("not the article's shape: no rise") and "a collapse after the peak, as in" in first
    flat = claims.shape_words({1: 10, 4: 30, 8: 40, 16: 39}, article)
    assert flat == "not the article's shape: no collapse, where the article's collapsed"


def test_the_articles_shape_needs_its_peak_and_its_errors_within_one_level():
    """A rise and a collapse are not enough: the peak at 2 users where the article's was at 10
    (three of its levels away), or busy errors from 2 users where the article's began at 16, is
    another shape, said with both numbers; one level away either way is the article's."""
    article = {1: 750, 2: 1080, 4: 1889, 8: 2572, 10: 2730, 16: 633}
    early = claims.shape_words({1: 300, 2: 400, 4: 150, 8: 100, 16: 50}, article)
    assert early == "not the article's shape: the peak at 2 users, the article's at 10 users; a collapse after the peak, as in the article"
    for peak in (8, 16):
        curve = {1: 10, 4: 30, 8: 40, 16: 45, 32: 5} if peak == 16 else {1: 10, 4: 30, 8: 40, 16: 5}
        assert claims.shape_words(curve, article).startswith("the article's shape")
    near = {1: 10, 4: 30, 8: 40, 16: 5}
    assert claims.shape_words(near, article, errors_here=16, errors_article=16).endswith(
        "errors from 16 users (the article's 16))")
    assert claims.shape_words(near, article, errors_here=10, errors_article=16).startswith("the article's shape")
    assert claims.shape_words(near, article, errors_here=8, errors_article=16).startswith("not the article's shape")
    soon = claims.shape_words(near, article, errors_here=2, errors_article=16)
    assert soon == ("not the article's shape: errors from 2 users, the article's from 16 users; "
                    "a collapse after the peak, as in the article")
    assert claims.shape_words(near, article, errors_here=None, errors_article=16) == \
        "not the article's shape: no errors, where the article's began at 16 users; a collapse after the peak, as in the article"
    assert claims.shape_words(near, article, errors_here=4, errors_article=None) == \
        "not the article's shape: errors from 4 users, where the article's had none; a collapse after the peak, as in the article"
    assert claims.near_level(8, 10, article) and claims.near_level(16, 10, article)
    assert not claims.near_level(4, 10, article) and not claims.near_level(2, 16, article)
    assert claims.near_level(12, 10, article) and claims.near_level(64, 16, article)  # off the grid: nearest
    with pytest.raises(ValueError):
        claims.near_level(0, 10, article)


def test_halves_and_bad_numbers():
    assert claims.halves(0.05) and not claims.halves(0.76)
    for bad in (0.0, -1.0, float("nan"), float("inf"), None):
        with pytest.raises(ValueError):
            claims.same_ratio(bad, 1.0)


def _variants(ratio_10_to_25: float) -> pd.DataFrame:
    rows = []
    for variant in ("as_published", "one_connection"):
        for rpt, rate in ((10, 1_000_000.0 * (ratio_10_to_25 if variant == "one_connection" else 0.8)),
                          (25, 1_000_000.0)):
            rows.append({"method": "article", "variant": variant, "rows_per_txn": rpt, "total": 1_000_000,
                         "records_per_s": rate, "close_checkpoints": 0, "peak_bytes_per_record": 565.0,
                         "audit_ok": True, "skipped": None, "error": None})
    return pd.DataFrame(rows)


def test_buffer_says_no_change_brings_back_the_collapse_only_when_none_does():
    ref, _ = analysis.reference("seed003_buffer")
    none = sqlite_as_buffer.buffer(_variants(0.9), ref)
    assert "No single change brings the 10-row rate below 50% of the 25-row rate" in none
    one = sqlite_as_buffer.buffer(_variants(0.05), ref)
    assert "No single change" not in one
    assert "Changes that bring the 10-row rate below 50% of the 25-row rate: one_connection." in one


def _iv(low, estimate, high, n=3):
    return intervals.Interval(estimate, low, high, n, "test")


def test_a_ratio_with_its_interval_is_the_articles_only_when_the_whole_interval_says_so():
    inside = claims.ratio_interval_words(_iv(5.6, 6.0, 6.4), 6.0)
    assert ": the article's ratio (6.0×, ±25 %: the whole interval within)" in inside
    assert inside.startswith("6.00× (95 % interval 5.60–6.40×, 3 runs)")  # its precision: the interval's
    assert ": not the article's ratio" in claims.ratio_interval_words(_iv(2.0, 2.5, 3.0), 6.0)
    assert ": not the article's ratio" in claims.ratio_interval_words(_iv(8.0, 9.0, 10.0), 6.0)
    wide = claims.ratio_interval_words(_iv(3.0, 5.9, 8.8), 6.0)  # the estimate alone would pass
    assert claims.same_ratio(5.9, 6.0) and "too wide to tell whether it is the article's ratio" in wide
    assert "too wide to tell" in claims.ratio_interval_words(_iv(1.0, 5.9, float("inf")), 6.0)
    edge = 6.0 * (1 - claims.SAME_RATIO)
    assert "the whole interval within" in claims.ratio_interval_words(_iv(edge, 6.0, 6.2), 6.0)
    assert "too wide" in claims.ratio_interval_words(_iv(edge * 0.999, 6.0, 6.2), 6.0)
    one = claims.ratio_interval_words(_iv(float("nan"), 5.9, float("nan"), n=1), 6.0)
    assert one == claims.ratio_words(5.9, 6.0)


def test_the_articles_share_needs_overlapping_intervals_and_a_near_magnitude():
    """Seed 001's shares: 15 of 168 failed there. Here 14 of 966 (0.16×, the intervals apart),
    43 of 948 against 14 of 150 (0.49×: the intervals touch but beyond 2×), 10 of 100 (the
    article's share), 0 of 937 against 0 of 143 (the zero), 0 where it failed, some where it
    did not."""
    from sqlitelab.core.intervals import share_interval as s
    article = s(15, 168)
    assert claims.share_words(s(14, 966), article).startswith("not the article's share: 0.16× the article's")
    assert "the intervals apart" in claims.share_words(s(14, 966), article)
    beyond = claims.share_words(s(43, 948), s(14, 150))
    assert beyond.startswith("not the article's share: 0.49× the article's") and beyond.endswith("beyond 2×)")
    assert claims.share_words(s(10, 100), article).startswith("the article's share (its 8.9 %")
    assert claims.share_words(s(0, 937), s(0, 143)) == "none failed: the article's zero"
    assert claims.share_words(s(0, 100), article).startswith("none failed, where the article's 8.9 %")
    assert claims.share_words(s(3, 100), s(0, 143)).startswith("not the article's zero")
    # near in magnitude (1.5×) but many more requests: the intervals apart
    assert "the intervals apart" in claims.share_words(s(1500, 10000), s(15, 168))
    assert claims.apart(s(14, 966), article) and not claims.apart(s(15, 168), s(14, 150))
