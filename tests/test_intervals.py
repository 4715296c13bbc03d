"""The lab's intervals (sqlitelab.core.intervals): Student's t quantiles against published values,
coverage at about the nominal rate on synthetic repeats whose true value is known, Fieller's
ratio, and the precision a number is printed with."""
from __future__ import annotations

import math
import random

import pytest

from sqlitelab.core import intervals
from sqlitelab.core.intervals import Interval, mean_interval, ratio_interval, shown, t_quantile
from sqlitelab.report import summaries


@pytest.mark.parametrize("p, df, t", [  # published two-sided 95 % and 90 % critical values
    (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 4, 2.776), (0.975, 9, 2.262), (0.975, 30, 2.042),
    (0.975, 1000, 1.962), (0.95, 2, 2.920), (0.95, 10, 1.812),
])
def test_t_quantiles_match_the_tables(p, df, t):
    assert t_quantile(p, df) == pytest.approx(t, abs=6e-4)
    assert t_quantile(1 - p, df) == pytest.approx(-t, abs=6e-4)


def _coverage(draw, truth, n: int, trials: int, seed: int, ratio: bool = False) -> float:
    rng = random.Random(seed)
    hit = 0
    for _ in range(trials):
        if ratio:
            iv = ratio_interval([draw(rng, 0) for _ in range(n)], [draw(rng, 1) for _ in range(n)])
        else:
            iv = mean_interval([draw(rng, 0) for _ in range(n)])
        hit += iv.contains(truth)
    return hit / trials


@pytest.mark.parametrize("n", [3, 5, 10])
def test_a_mean_interval_covers_the_true_mean_at_about_its_nominal_rate(n):
    """Repeats of a rate whose true mean is 3,000/s and spread 20 % (the machine's speed between
    runs), 3,000 trials: the 95 % interval holds 3,000 in 93.5-96.5 % of them (the binomial's
    spread at 3,000 trials is 0.4 %)."""
    covered = _coverage(lambda rng, _: rng.gauss(3000, 600), 3000, n, 3000, seed=n)
    assert 0.935 <= covered <= 0.965, covered


def test_a_mean_interval_of_skewed_repeats_still_covers_near_nominal_at_ten_runs():
    """A machine that is sometimes slow: lognormal repeats (spread ~25 %); at 10 runs t's
    interval still holds the true mean in at least 92 % of 3,000 trials."""
    mu, sigma = math.log(3000), 0.25
    truth = math.exp(mu + sigma ** 2 / 2)
    covered = _coverage(lambda rng, _: rng.lognormvariate(mu, sigma), truth, 10, 3000, seed=11)
    assert 0.92 <= covered <= 0.97, covered


@pytest.mark.parametrize("n", [3, 5])
def test_a_ratio_interval_covers_the_true_ratio_at_about_its_nominal_rate(n):
    """Axum at 30,000/s (10 %) over FastAPI at 10,000/s (10 %): the true ratio is 3; Fieller's
    95 % interval holds it in 93.5-96.5 % of 3,000 trials."""
    means, spread = (30000, 10000), 0.10
    covered = _coverage(lambda rng, side: rng.gauss(means[side], spread * means[side]), 3.0, n, 3000,
                        seed=100 + n, ratio=True)
    assert 0.935 <= covered <= 0.965, covered


def test_the_interval_is_narrower_with_more_runs_and_centred_on_the_mean():
    few, many = mean_interval([4704, 1994, 4499]), mean_interval([4704, 1994, 4499] * 4)
    assert few.estimate == pytest.approx(3732.33, abs=0.01) == many.estimate
    assert few.low < 1994 and few.high > 4704 and few.n == 3 and "Student's t" in few.method
    assert many.half_width < few.half_width / 3
    # seed 000's Puma peak as the README printed it, 3,732/s: the mean of these three runs
    assert shown(few) == "3,700 (95 % interval 0–7,500, 3 runs)"
    assert few.estimate - few.low == pytest.approx(few.high - few.estimate)


def test_one_run_has_no_interval_and_says_so():
    one = mean_interval([1894.0])
    assert one.estimate == 1894.0 and math.isnan(one.low) and math.isnan(one.high) and not one.bounded
    assert shown(one) == "1,890 (one run: no interval)"
    assert math.isnan(ratio_interval([2.0, 3.0], [1.0]).low)
    assert summaries.once(951411.0) == "951,000" and summaries.once(2.9187, " ms") == "2.92 ms"


def test_an_interval_names_what_its_n_counts():
    pairs = intervals.median_interval([0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 0.7])
    assert shown(pairs, "×", of="pairs").endswith(", 8 pairs)") and shown(pairs, "×").endswith(", 8 runs)")


def test_a_ratio_whose_denominator_reaches_zero_is_unbounded():
    iv = ratio_interval([100, 110, 90], [1, -1, 2])  # a denominator whose interval spans 0
    assert iv.low == float("-inf") and iv.high == float("inf") and "unbounded" in iv.method
    assert "unbounded" in shown(iv)
    tight = ratio_interval([300, 310, 290], [100, 101, 99])
    assert tight.low < 3 < tight.high and tight.high - tight.low < 0.6


@pytest.mark.parametrize("interval, says", [
    (Interval(3732.33, 3732.33 - 1543.2, 3732.33 + 1543.2, 3, "t"), "3,700 (95 % interval 2,200–5,300, 3 runs)"),
    (Interval(1535561.0, 1.0e6, 2.07e6, 3, "t"), "1,540,000 (95 % interval 1,000,000–2,070,000, 3 runs)"),
    (Interval(2.987, 2.91, 3.06, 5, "t"), "2.987 (95 % interval 2.910–3.060, 5 runs)"),
    (Interval(0.0056, 0.0041, 0.0071, 3, "t"), "0.0056 (95 % interval 0.0041–0.0071, 3 runs)"),
])
def test_a_number_is_printed_with_the_precision_its_interval_supports(interval, says):
    assert shown(interval) == says


@pytest.mark.parametrize("call, says", [
    (lambda: mean_interval([]), "no values"),
    (lambda: mean_interval([1.0, float("nan")]), "finite numbers"),
    (lambda: mean_interval([1, "2"]), "finite numbers"),
    (lambda: mean_interval([1, True]), "finite numbers"),
    (lambda: mean_interval([1.0, 2.0], level=95), "level must be"),
    (lambda: ratio_interval([1.0, 2.0], [0.0, 0.0]), "denominator's mean is 0"),
    (lambda: t_quantile(1.5, 3), "0 < p < 1"),
    (lambda: intervals.decimals(mean_interval([1.0, 2.0]), figures=0), "figures must be"),
])
def test_bad_input_is_refused_in_one_line(call, says):
    with pytest.raises(ValueError, match=says) as e:
        call()
    assert "\n" not in str(e.value)


def test_a_proportional_quantity_keeps_the_interval_and_its_precision():
    """The napkin maths' daily users from a peak's rate: scaled by the same factor, printed at the
    precision the peak's interval supports, never seven figures."""
    peak = mean_interval([4704, 1994, 4499])
    dau = intervals.scaled(peak, 4 * 3600 / 35 / 1e6)  # millions of daily users, 35 writes each
    assert dau.estimate == pytest.approx(1.5356, abs=1e-4) and dau.n == 3
    assert intervals.rounded(dau, " M") == "1.5 M"
    assert intervals.rounded(mean_interval([2987.0, 3012.0, 3001.0])) == "3,000"
    with pytest.raises(ValueError, match="factor must be"):
        intervals.scaled(peak, 0)


@pytest.mark.parametrize("n", [12, 48])
def test_a_median_interval_covers_the_true_median_at_least_at_its_nominal_rate(n):
    """Heavy-tailed values (Student's t with 2 degrees of freedom around a true median of 0.87, a
    comparison's points' ratios): the order-statistic interval holds the median in at least 95 %
    of 3,000 trials and, being discrete, at most about 98.5 %."""
    rng, hit = random.Random(n), 0
    for _ in range(3000):
        xs = [0.87 + 0.1 * rng.gauss(0, 1) / math.sqrt((rng.gauss(0, 1) ** 2 + rng.gauss(0, 1) ** 2) / 2)
              for _ in range(n)]
        hit += intervals.median_interval(xs).contains(0.87)
    assert 0.945 <= hit / 3000 <= 0.985, hit / 3000


def test_a_median_of_too_few_values_has_no_interval():
    iv = intervals.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert iv.estimate == 3.0 and math.isnan(iv.low) and "too few" in iv.method
    iv = intervals.median_interval(range(1, 7))
    assert (iv.low, iv.high) == (1, 6)


@pytest.mark.parametrize("p,n", [(0.01, 1000), (0.09, 160), (0.3, 50)])
def test_a_share_interval_covers_the_true_share_at_about_its_nominal_rate(p, n):
    """Wilson's interval on binomial counts (a share of failed requests): near 95 % at small
    shares and small counts, where the normal approximation undercovers."""
    rng = random.Random(7)
    trials = 2000
    hits = sum(intervals.share_interval(sum(rng.random() < p for _ in range(n)), n).contains(p) for _ in range(trials))
    assert 0.92 <= hits / trials <= 0.985


def test_a_share_of_zero_has_an_interval_from_zero_and_bad_counts_are_refused():
    iv = intervals.share_interval(0, 937)
    assert iv.estimate == 0 and iv.low == 0 and 0.003 < iv.high < 0.005
    assert shown(intervals.scaled(intervals.share_interval(14, 966), 100), "%", of="requests") == \
        "1.45 % (95 % interval 0.87–2.42 %, 966 requests)"
    for k, n in ((1, 0), (5, 3), (-1, 10), (1.5, 10), (True, 10)):
        with pytest.raises(ValueError, match="share_interval"):
            intervals.share_interval(k, n)
