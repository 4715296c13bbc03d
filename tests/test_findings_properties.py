"""Findings that survive any measurement: generated point tables — any levels, any of them stalled
(no request finished), one repeat or several, latencies not measured, one database only — through
every findings function, each of which returns words for it: never an exception, never "nan",
"inf" or "None" in a sentence. The hand-picked shapes of test_stalls.py, generalised by Hypothesis
(its examples drawn from a fixed seed, so the fast tier is repeatable)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from test_stalls import cases

LEVELS = (1, 2, 3, 4, 8, 16, 32)


@st.composite
def shapes(draw) -> dict:
    levels = draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=4, unique=True).map(sorted))
    return {"levels": tuple(levels),
            "stalled_users": set(draw(st.lists(st.sampled_from(levels), max_size=len(levels), unique=True))),
            "repeats": draw(st.integers(min_value=1, max_value=3)),
            "no_percentiles": draw(st.booleans()),
            "one_database": draw(st.booleans())}


def _words(text: str) -> str:
    return text.replace("infl", "").replace("info", "")


@seed(20261129)
@settings(max_examples=40, deadline=None, derandomize=False, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(shape=shapes())
def test_every_findings_function_says_any_measurement_in_words(shape):
    for name, say in cases(shape).items():
        text = say()
        assert isinstance(text, str) and text.strip(), f"{name} said nothing for {shape}"
        for bad in ("nan", "inf", "None"):
            assert bad not in _words(text), f"{name}: {bad!r} in {text!r} for {shape}"
