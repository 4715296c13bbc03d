"""sqlitelab.capacity reproduces the articles' own napkin math."""
from __future__ import annotations

import pandas as pd
import pytest

from sqlitelab import capacity as cap


def test_a_million_requests_a_day_is_about_70_per_second():
    assert cap.rps_needed(1_000_000) == pytest.approx(69.44, abs=0.01)
    assert round(cap.rps_needed(1_000_000)) == 69  # the article rounds 69.4 up to "70"


def test_2500_writes_per_second_is_over_35_million_a_day_and_a_million_dau():
    assert cap.requests_per_day(2500) == 36_000_000 > 35_000_000
    assert cap.daily_active_users(2500, requests_per_user=35) == pytest.approx(1_028_571, abs=1)
    assert cap.daily_active_users(2500, 35) > 1_000_000


def test_1107_requests_per_second_is_about_11000_active_users():
    assert cap.active_users(1107, seconds_between_requests=10) == 11_070
    assert cap.active_users(6680, 10) == pytest.approx(66_800)  # seed 002's Rust: "~66,000"


def test_yahoo_monthly_visits_are_about_1388_per_second():
    assert cap.rps_from_monthly(3.6e9) == pytest.approx(1388.9, abs=0.1)


def test_reference_loads():
    ref = cap.reference_loads().set_index("name")["rps"]
    assert ref["Twitter 2007"] == 600 and ref["Shopify 2013"] == 833
    assert ref["Yahoo (3.6 B visits/month)"] == pytest.approx(1388.9, abs=0.1)


@pytest.mark.parametrize("bad", [0, -1, "70", None, True])
def test_bad_inputs_are_refused(bad):
    with pytest.raises(ValueError, match="positive number"):
        cap.rps_needed(bad)


def test_capacity_at_slo_is_not_the_peak():
    pts = pd.DataFrame([
        # users, rps, p99, errors, generator_bound  (two repeats of each level)
        {"users": u, "rps": r + d, "p99_ms": p, "errors": e, "generator_bound": False,
         "server": "s", "profile": "p", "scenario": "x"}
        for (u, r, p, e) in [(1, 100, 5, 0), (4, 300, 40, 0), (16, 500, 400, 0), (32, 450, 900, 7)]
        for d in (-1, 1)])
    out = cap.capacity_at_slo(pts, slo_p99_ms=100).iloc[0]
    assert out["peak_rps"] == 500 and out["peak_users"] == 16
    assert out["slo_rps"] == 300 and out["slo_users"] == 4
    none = cap.capacity_at_slo(pts, slo_p99_ms=1).iloc[0]
    assert none["slo_rps"] == 0 and none["slo_users"] is None
