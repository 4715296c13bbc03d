"""Intervals on the lab's numbers: a mean over repeats, a ratio of two means, and the precision
a number is printed with.

    mean_interval([4704, 1994, 4499])          # Interval(estimate=3732.3, low=..., high=..., n=3, ...)
    ratio_interval(axum_runs, fastapi_runs)    # Axum ÷ FastAPI, Fieller's interval
    median_interval(ratios)                    # a comparison's points as a whole, distribution-free
    share_interval(14, 966)                    # a share of failed requests, Wilson's score interval
    shown(mean_interval([4704, 1994, 4499]))   # "3,700 (95 % interval 0–7,500, 3 runs)"

The unit of a repeat is a run of a level (a window of its own): the machine's speed moves
between runs minutes apart (docs/method.md, "Intervals"), so repeats of the level, not the
seconds inside one window, are where the variance lives (Kalibera & Jones, "Rigorous
benchmarking in reasonable time", 2013). A mean's interval is Student's t over the repeats (a
handful of runs of a roughly normal quantity: the bootstrap's percentile interval covers far
less than its nominal share at n = 3). A ratio's is Fieller's, for two independent means,
with Welch's degrees of freedom for the two parts of its pivot: near its nominal coverage on
normal repeats (tests/test_intervals.py), and honest where the denominator's own interval comes
near zero (then the ratio is unbounded, and says so). Fewer than two repeats give
no interval: `low` and `high` are NaN and `method` says why.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Iterable

LEVEL = 0.95  # the lab's intervals: 95 % two-sided


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float        # NaN: no interval (fewer than two repeats); -inf/inf: unbounded (a ratio)
    high: float
    n: int            # repeats (a ratio: the smaller side's)
    method: str       # how it was made, in words
    level: float = LEVEL

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        """Half the interval's width (NaN unbounded or missing)."""
        return (self.high - self.low) / 2 if self.bounded else float("nan")

    def relative(self) -> float:
        """The half-width as a share of the estimate (NaN where either is missing or the estimate 0)."""
        return abs(self.half_width / self.estimate) if self.estimate else float("nan")

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _values(values: Iterable[float], what: str) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{what} must be finite numbers, not {v!r}")
        out.append(float(v))
    if not out:
        raise ValueError(f"{what}: no values")
    return out


def _check_level(level: float) -> None:
    if not (isinstance(level, float) and 0.5 <= level < 1):
        raise ValueError(f"level must be a number from 0.5 to below 1 (a two-sided interval's coverage), not {level!r}")


def _mean_var(xs: list[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


# --------------------------------------------------------------------------- Student's t

def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution's CDF with `df` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value below which a share `p` of Student's t with `df` degrees of freedom lies
    (t_quantile(0.975, 2) = 4.303), by bisection on t_cdf."""
    if not 0 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, not p={p!r}, df={df!r}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


# --------------------------------------------------------------------------- intervals

def mean_method(n: int) -> str:
    """How mean_interval made the interval of a mean over `n` repeats, in words."""
    return "one run: no interval" if n < 2 else f"Student's t over {n} runs"


def mean_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """The mean of a level's repeats with Student's t interval over them (n - 1 degrees of
    freedom); one repeat: the value with no interval."""
    _check_level(level)
    xs = _values(values, "repeats")
    n = len(xs)
    if n < 2:
        return Interval(xs[0], float("nan"), float("nan"), n, mean_method(n))
    m, var = _mean_var(xs)
    h = t_quantile((1 + level) / 2, n - 1) * math.sqrt(var / n)
    return Interval(m, m - h, m + h, n, mean_method(n))


def ratio_interval(numerator: Iterable[float], denominator: Iterable[float], level: float = LEVEL) -> Interval:
    """The ratio of two means (each over its own independent repeats) with Fieller's interval,
    Welch's degrees of freedom; unbounded (-inf, inf) where the denominator's mean is not clearly
    away from zero; fewer than two repeats on either side: the ratio with no interval."""
    _check_level(level)
    a, b = _values(numerator, "the numerator's repeats"), _values(denominator, "the denominator's repeats")
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    if mb == 0:
        raise ValueError("ratio_interval: the denominator's mean is 0")
    r = ma / mb
    n = min(len(a), len(b))
    if n < 2:
        return Interval(r, float("nan"), float("nan"), n, "one run on a side: no interval")
    va, vb = _mean_var(a)[1] / len(a), _mean_var(b)[1] / len(b)  # variances of the two means
    if va + vb == 0 or (va == 0 and r == 0):
        return Interval(r, r, r, n, f"Fieller over {len(a)} and {len(b)} runs (no spread)")
    wa, wb = va, r * r * vb  # the two parts of the variance of (mean_a - ratio * mean_b)
    df = (wa + wb) ** 2 / ((wa ** 2 / (len(a) - 1) if wa else 0) + (wb ** 2 / (len(b) - 1) if wb else 0))
    t = t_quantile((1 + level) / 2, df)
    g = t * t * vb / (mb * mb)
    method = f"Fieller over {len(a)} and {len(b)} runs (Welch's {df:.1f} degrees of freedom)"
    if g >= 1:  # the denominator's interval reaches zero: the ratio can be anything
        return Interval(r, float("-inf"), float("inf"), n, method + ": unbounded")
    root = (t / mb) * math.sqrt(va + r * r * vb - g * va)  # the covariance of independent means: 0
    lo, hi = (r - root) / (1 - g), (r + root) / (1 - g)
    return Interval(r, min(lo, hi), max(lo, hi), n, method)


def share_interval(hits: int, trials: int, level: float = LEVEL) -> Interval:
    """A share of counted events (`hits` failed requests of `trials`) with Wilson's score interval:
    near its nominal coverage at small shares and small counts, where the normal approximation's
    interval reaches below zero (Brown, Cai & DasGupta, "Interval estimation for a binomial
    proportion", 2001); 0 of n has an interval from 0 up. No trials: refused."""
    _check_level(level)
    for name, v in (("hits", hits), ("trials", trials)):  # counts: whole numbers, of any numeric type
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or v != v or v < 0 or v != int(v):
            raise ValueError(f"share_interval: {name} must be a whole number >= 0, not {v!r}")
    k, n = int(hits), int(trials)
    if n == 0 or k > n:
        raise ValueError(f"share_interval: {k} of {n} is no share (trials must be > 0 and >= hits)")
    z = t_quantile((1 + level) / 2, 1e9)  # the normal quantile
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n, f"Wilson's score interval over {n} requests")


def shown_share(interval: Interval) -> str:
    """A share (share_interval) in percent with its interval over its requests: "1.45 % (95 %
    interval 0.87–2.43 %, 966 requests)"."""
    return shown(scaled(interval, 100), "%", of="requests")


def median_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """The median of many values (a comparison's points' ratios) with its distribution-free
    interval: the order statistics whose ranks the binomial (n, ½) puts at least `level` between
    (no assumption on the values' shape: the scatter of points is heavy-tailed); fewer values than
    such an interval needs (six at 95 %): the median with no interval."""
    _check_level(level)
    xs = sorted(_values(values, "values"))
    n = len(xs)
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    tail, k = 0.0, 0  # the largest k with P(Binomial(n, 1/2) < k) <= (1 - level) / 2
    while True:
        more = tail + math.comb(n, k) / 2 ** n
        if more > (1 - level) / 2:
            break
        tail, k = more, k + 1
    if k == 0:
        return Interval(median, float("nan"), float("nan"), n, f"{n} value{'' if n == 1 else 's'}: too few for an interval")
    return Interval(median, xs[k - 1], xs[n - k], n, f"order statistics {k} and {n - k + 1} of {n}")


# --------------------------------------------------------------------------- precision

def decimals(interval: Interval, figures: int = 2) -> int:
    """The decimal place a number is printed to: that of its half-width's `figures` significant
    figures (3,732 ± 1,543 -> -2, i.e. hundreds: 3,700); a number without an interval keeps three
    significant figures of its own."""
    if not isinstance(figures, int) or figures < 1:
        raise ValueError(f"figures must be an integer >= 1, not {figures!r}")
    basis = interval.half_width if interval.bounded and interval.half_width > 0 else None
    if basis is None:
        if interval.estimate == 0 or not math.isfinite(interval.estimate):
            return 0
        return 3 - 1 - math.floor(math.log10(abs(interval.estimate)))
    return figures - 1 - math.floor(math.log10(basis))


def _fmt(value: float, places: int) -> str:
    if not math.isfinite(value):
        return "∞" if value > 0 else "−∞"
    v = round(value, places) + 0.0  # no negative zero
    return f"{v:,.{max(places, 0)}f}".replace("-", "−")


def scaled(interval: Interval, factor: float) -> Interval:
    """The interval of a quantity proportional to this one (daily users from a peak's rate):
    estimate and bounds times `factor` (> 0)."""
    if not (isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 0):
        raise ValueError(f"factor must be a number > 0, not {factor!r}")
    return Interval(interval.estimate * factor, interval.low * factor, interval.high * factor,
                    interval.n, interval.method, interval.level)


def rounded(interval: Interval, unit: str = "") -> str:
    """The estimate alone, at the precision its interval supports: "54" for 53.7 ± 50."""
    return _fmt(interval.estimate, decimals(interval)) + unit


def shown(interval: Interval, unit: str = "", of: str = "runs") -> str:
    """The estimate at the precision its interval supports, with the interval in words:
    "3,700 (95 % interval 340–7,100, 3 runs)"; "1,900 (one run: no interval)"; an unbounded ratio
    says so. `of`: what the interval's n counts (a median over pairs: "pairs")."""
    places = decimals(interval)
    est = _fmt(interval.estimate, places) + unit
    if interval.bounded:
        return (f"{est} ({interval.level:.0%} interval {_fmt(interval.low, places)}–{_fmt(interval.high, places)}{unit}, "
                f"{interval.n:,} {of})").replace("%", " %")
    if math.isnan(interval.low):
        return f"{est} ({interval.method})"
    return f"{est} ({interval.level:.0%} interval unbounded: the denominator's runs reach zero)".replace("%", " %")
