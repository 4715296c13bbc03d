"""Verdict words: each one a condition on numbers, written here once, and tested both ways
(tests/test_claims.py). A sentence that says "the article's ratio", "collapses", "brings back the
collapse" or "reproduces" asks this module whether the numbers allow it, and says what they show
when they do not.

    claims.same_ratio(6.1, 6.5)          # True: within SAME_RATIO of the article's
    claims.collapse_level(curve)         # the first level after the peak below COLLAPSE of it
    claims.ratio_interval_words(iv, 6.0) # the article's ratio only when its whole interval says so
"""
from __future__ import annotations

import math
from typing import Mapping

from sqlitelab.core import intervals
from sqlitelab.core.vocabulary import users

# A ratio measured here is "the article's ratio" when it is within this share of the article's.
SAME_RATIO = 0.25
# Throughput "collapses" when a level after the peak serves less than this share of the peak.
COLLAPSE = 0.5
# A share of failed requests measured here is "the article's share" when its interval and the
# article's overlap and it is within this factor of the article's, either way.
SHARE_FACTOR = 2.0


def _finite(**values: float) -> None:
    for name, v in values.items():
        if v is None or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")


def same_ratio(measured: float, article: float, band: float = SAME_RATIO) -> bool:
    """Whether `measured` is within ±`band` (a share) of `article`."""
    _finite(measured=measured, article=article)
    return abs(measured / article - 1) <= band


def ratio_words(measured: float, article: float, band: float = SAME_RATIO) -> str:
    """"6.1×, the article's ratio (6.5×)" when `same_ratio`, else "3.0× (the article: 6.5×)"."""
    if same_ratio(measured, article, band):
        return f"{measured:.1f}×, the article's ratio ({article:.1f}×, within ±{band:.0%})"
    return f"{measured:.1f}× (the article: {article:.1f}×)"


def ratio_interval_words(interval: intervals.Interval, article: float, band: float = SAME_RATIO) -> str:
    """A ratio with its interval (intervals.ratio_interval) against the article's: "the article's
    ratio" only when the whole interval lies within ±`band` of it, "not the article's ratio" when
    the whole interval lies beyond; otherwise the interval reaches both sides and the words say the
    runs cannot tell. A ratio of one run (no interval) keeps ratio_words' verdict."""
    _finite(measured=interval.estimate, article=article)
    if math.isnan(interval.low):
        return ratio_words(interval.estimate, article, band)
    said, near = intervals.shown(interval, "×"), f"{article:.1f}×, ±{band:.0%}".replace("%", " %")
    if article * (1 - band) <= interval.low and interval.high <= article * (1 + band):
        return f"{said}: the article's ratio ({near}: the whole interval within)"
    if interval.high < article * (1 - band) or interval.low > article * (1 + band):
        return f"{said}: not the article's ratio ({near}: the whole interval beyond)"
    return f"{said}: too wide to tell whether it is the article's ratio ({near})"


def collapse_level(curve: Mapping[float, float], share: float = COLLAPSE) -> float | None:
    """The first level (users) after the peak whose throughput is below `share` of the peak, or
    None: no collapse. `curve`: level → throughput, any order."""
    if not curve:
        return None
    levels = sorted(curve)
    best = max(levels, key=lambda u: curve[u])
    peak = curve[best]
    for u in levels:
        if u > best and curve[u] < share * peak:
            return u
    return None


def collapse_words(curve: Mapping[float, float], share: float = COLLAPSE, peak: str | None = None) -> str:
    """"peaks at 2,205/s with 1 user and collapses from 8 users (below half the peak)" or
    "peaks at … and never falls below half its peak up to 16 users". `peak`: the words for the
    peak's rate where they say more than the number (its interval over its runs)."""
    if not curve:
        return "no levels measured"
    best = max(curve, key=lambda u: curve[u])
    head = f"peaks at {peak or f'{curve[best]:,.0f}/s'} with {users(best)}"
    at = collapse_level(curve, share)
    if at is None:
        return f"{head} and never falls below {share:.0%} of that peak up to {max(curve):g} users"
    return (f"{head} and collapses from {at:g} users ({curve[at]:,.0f}/s, below {share:.0%} of "
            f"its peak)")


def rises(curve: Mapping[float, float]) -> bool:
    """Whether throughput peaks after the first level (more users bought more throughput first)."""
    return bool(curve) and max(curve, key=lambda u: curve[u]) > min(curve)


def near_level(here: float, article: float, levels) -> bool:
    """Whether level `here` is within one level of `article` on the article's grid `levels`: the
    article's level nearest `here` (in ratio) is `article`'s or its neighbour."""
    grid = sorted({float(v) for v in levels} | {float(article)})
    _finite(here=here, article=article)
    nearest = min(range(len(grid)), key=lambda i: abs(math.log(grid[i] / here)))
    return abs(nearest - grid.index(float(article))) <= 1


def shape_words(here: Mapping[float, float], article: Mapping[float, float], share: float = COLLAPSE,
                errors_here: float | None = None, errors_article: float | None = None) -> str:
    """The article's curve shape (a rise to a peak, then a collapse) against the one here, part by
    part, and where: "the article's shape: …" only when both parts hold, the peak is within one
    of the article's levels of its peak (near_level) and, where given, so is the first level with
    errors (`errors_here`, `errors_article`: None, none at any level); else what differs, with
    both numbers."""
    rise_h, rise_a = rises(here), rises(article)
    fall_h, fall_a = collapse_level(here, share) is not None, collapse_level(article, share) is not None
    peak_h, peak_a = (max(c, key=lambda u: c[u]) for c in (here, article))
    said = []
    if rise_a != rise_h:
        said.append("no rise: highest at the first level, where the article's rose to a peak" if rise_a
                    else "a rise the article's did not have")
    if not near_level(peak_h, peak_a, article):
        said.append(f"the peak at {users(peak_h)}, the article's at {users(peak_a)}")
    if fall_a != fall_h:
        said.append("no collapse, where the article's collapsed" if fall_a else "a collapse the article's did not have")
    if errors_here is not None or errors_article is not None:
        if errors_article is None:
            said.append(f"errors from {users(errors_here)}, where the article's had none")
        elif errors_here is None:
            said.append(f"no errors, where the article's began at {users(errors_article)}")
        elif not near_level(errors_here, errors_article, article):
            said.append(f"errors from {users(errors_here)}, the article's from {users(errors_article)}")
    if not said:
        what = " and ".join(w for w, on in (("a rise to a peak", rise_a), ("a collapse after it", fall_a)) if on)
        where = f"the peak at {users(peak_h)} (the article's {peak_a:g})"
        if errors_here is not None:
            where += f", errors from {users(errors_here)} (the article's {errors_article:g})"
        return f"the article's shape ({what or 'neither a rise nor a collapse'}; {where})"
    if fall_a and fall_h:
        said.append("a collapse after the peak, as in the article")
    return "not the article's shape: " + "; ".join(said)


def share_words(here: intervals.Interval, article: intervals.Interval, factor: float = SHARE_FACTOR,
                cite: bool = True) -> str:
    """A share of failed requests (intervals.share_interval) against the article's, each with its
    interval: "the article's zero" (none failed, in both), "the article's share" (the intervals
    overlap and the shares are within `factor` of each other), otherwise what differs, with the
    article's number (`cite`: in parentheses, with the condition; False: the verdict alone)."""
    its = intervals.shown_share(article)
    if article.estimate == 0:
        return "none failed: the article's zero" if here.estimate == 0 else \
            "not the article's zero" + (f" (its {its})" if cite else "")
    if here.estimate == 0:
        return "none failed, where the article's " + (f"{its} did" if cite else "did")
    overlap = here.low <= article.high and article.low <= here.high
    near = 1 / factor <= here.estimate / article.estimate <= factor
    if overlap and near:
        return "the article's share" + (f" (its {its}: the intervals overlap, within {factor:g}×)" if cite else "")
    how = (f"{here.estimate / article.estimate:.2g}× the article's" if not near else "near the article's")
    why = "the intervals apart" if not overlap else f"beyond {factor:g}×"
    return f"not the article's share: {how}" + (f" (its {its}; {why})" if cite else "")


def apart(a: intervals.Interval, b: intervals.Interval) -> bool:
    """Whether two shares (or rates) differ beyond their intervals: the intervals do not overlap."""
    return a.high < b.low or b.high < a.low


def halves(ratio: float, share: float = COLLAPSE) -> bool:
    """Whether a rate that is `ratio` of another has collapsed against it (below `share`)."""
    _finite(ratio=ratio)
    return ratio < share


def share_of(measured: float, article: float) -> str:
    """"81 % of the article's" — a plain share, no verdict."""
    _finite(measured=measured, article=article)
    return f"{measured / article:.0%} of the article's"
