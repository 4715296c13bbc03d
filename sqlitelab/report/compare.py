"""Two runs of a notebook, point by point, with a noise band: which points moved, which did not.

    a, b = compare.side("<a notebook run's id>"), compare.side("newest:quick:03")
    c = compare.compare(a, b)      # c.table: one row per point both have; c.only_a, c.only_b; c.provenance

A side is a notebook run: its id, "newest:<scale>:<NN>" (the newest run of notebook NN at that
scale in data/results.db) or "reference:<NN>" (notebook NN of the committed reference run,
data/reference-run/). Points are aligned on what identifies them (KEYS): the notebook, experiment,
stack, profile, scenario, database, users and offered rate; the headline points only (a point a
confirming generator replaced is not one).

**Per metric** (throughput and p99) the ratio b / a and a verdict: `faster`, `slower` or `within
noise`. The noise band of a ratio is each side's relative spread combined in quadrature,
sqrt(na² + nb²) (two independent measurements); a side's spread at a point is its repeats'
(max − min) / mean where the point was repeated, else the run-to-run spread stored for its machine
and its scenario's family (`noise` rows of results.db, measured by `python -m sqlitelab.compare
--noise`: sqlitelab.experiments.noise) — its own stack's where that stack was measured (a stack can
spread more than the machine does), else the machine's (NOISE_STACK's) — over the windows nearest
the point's own (the table's `<metric>_spread_from_a/_b` says which). Where neither is known, the
band is the scatter of the same code run twice on b's machine at the notebook and scale (a power
check's A/A pair: aa_band_of), else the comparison's own points' (own_band): a point within OWN_Z
robust standard deviations of that scatter of 1 is within noise — so a machine that never
measured its noise still gets a verdict, and what moved every point alike stays a change. With fewer than OWN_POINTS
points the verdict is `no noise band` and says nothing about the direction. The run as a whole
is judged too (`overall`): the median of its points' ratios with its distribution-free interval.
`core_speed` is how fast b's server core ran against a's beside each point (the probes each run
stores: sqlitelab.core.probe), shown, not used to adjust. Where both sides repeated a
point, its ratio also carries its 95 % interval (`<metric>_low`, `_high`: Fieller's, over the
repeats: sqlitelab.core.intervals). A point where a side finished no request in its window (its
rate 0: a stall) has no ratio: its verdict is `none finished in a` (or b). A point both sides
measured in ROUNDS interleaved rounds or more (sweep's `rounds`) is judged by that interval and
the band of the same code run twice together, in quadrature (interval_verdict; the table's
`<metric>_in_rounds` marks it), not by its repeats' range.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sqlitelab.core import intervals, machine, results
from sqlitelab.core.vocabulary import NOISE_STACK
from sqlitelab.infra import servers
from sqlitelab.load import scenarios
from sqlitelab.report import reference_tables

KEYS = ("notebook", "experiment", "server", "profile", "scenario", "database", "users", "rate")
# a point's server-core probes (sqlitelab.core.probe), before and after its window
PROBES = ("probe_server_before_ms", "probe_server_after_ms")
# A point both sides measured in this many interleaved rounds or more (sweep's `rounds`: each round
# its server started afresh, in a shuffled order) is judged by its ratio's 95 % interval over them
# (Fieller's) instead of a band: the rounds hold the variance that lives between server starts and
# minutes of the machine, which repeats within one start do not (Kalibera & Jones, 2013).
ROUNDS = 3
# the comparison's own points as the band (own_band): at least this many points with a ratio, and
# a band of OWN_Z robust standard deviations of their log ratios
OWN_POINTS, OWN_Z = 8, 1.96
# metric: +1 when higher is better (throughput), -1 when lower is (latency)
METRICS = {"rps": +1, "p99_ms": -1}
# the comparison table's columns a reader is shown (the command's and notebook 11's)
SHOWN = ["experiment", "server", "profile", "scenario", "database", "users", "rate",
         "window_s_a", "window_s_b", "rps_a", "rps_b", "rps_ratio", "rps_low", "rps_high", "rps_band",
         "rps_verdict", "p99_ms_a", "p99_ms_b", "p99_ms_ratio", "p99_ms_low", "p99_ms_high", "p99_ms_band",
         "p99_ms_verdict", "core_speed"]
# what the provenance table compares, from each side's runs rows
PROVENANCE = ("machine", "git_commit", "lock_hash", "scale", "server_cpus", "generator_cpus",
              "calibrations")
# notebook parameters that name the run rather than set it (the scale has its provenance row)
SAME_RUN = ("run_id", "run_a", "run_b")


# the verdict of a point where one side finished no request in its window (its rate 0: a stall)
NONE_FINISHED = {"a": "none finished in a", "b": "none finished in b"}
# A point where a request outlasted its window in a run (sweep's `outlasted`: a stall or a queue
# longer than the window) has a rate of what got through, not a throughput: no ratio, and these
# words instead of a verdict; the run as a whole and the comparison's own band leave it out.
OUTLASTED = {"a": "a request outlasted the window in a", "b": "a request outlasted the window in b"}


class CompareError(ValueError):
    """Two sides that cannot be compared, or a side that is not there: one line that says why."""


@dataclass
class Side:
    """One notebook run: its headline points, its runs rows (provenance), and the machine's
    stored run-to-run spread per metric (None: not measured)."""
    label: str
    points: pd.DataFrame
    runs: pd.DataFrame
    machine_noise: dict = field(default_factory=dict)
    ceilings: pd.DataFrame = field(default_factory=pd.DataFrame)  # the machine's limits the run measured
    db: "Path | str | None" = None  # the results.db it was read from (None: data/results.db)

    @property
    def notebook(self) -> str:
        return str(self.points["notebook"].iloc[0])

    def describe(self) -> str:
        """The run in plain words, for a caption: its scale, day, commit and machine (and whether it
        is the committed reference run)."""
        runs = self.runs
        scale = _one(runs, "scale")
        day = str(runs["started"].dropna().min())[:10] if "started" in runs and runs["started"].notna().any() else "?"
        commit = _one(runs, "git_commit")[:7]
        what = "the reference run" if self.label.startswith("reference:") else f"a {scale} run"
        return f"{what} of {day} at {commit} ({_one(runs, 'machine')})"


def side(ref: str, path=None, reference_dir=None) -> Side:
    """A side from its reference (see the module's docstring); CompareError when there is none."""
    if not isinstance(ref, str) or not ref.strip():
        raise CompareError(f"a run is its id, newest:<scale>:<NN> or reference:<NN>, not {ref!r}")
    kind, _, rest = ref.partition(":")
    if kind == "reference":
        try:
            ref_run = reference_tables.load(reference_dir)
        except FileNotFoundError as e:
            raise CompareError(str(e)) from None
        pts = ref_run["points"]
        pts = pts[pts["notebook"].astype(str).str.startswith(rest)] if rest else pts.iloc[0:0]
        if pts.empty:
            known = sorted(set(ref_run["points"]["notebook"]))
            raise CompareError(f"the reference run has no points of notebook {rest!r}; it has: "
                               f"{', '.join(known)}")
        runs = ref_run["runs"][ref_run["runs"]["notebook_run"].isin(set(pts["notebook_run"]))]
        ceil = ref_run.get("ceilings", pd.DataFrame())
        ceil = ceil[ceil["notebook_run"].isin(set(pts["notebook_run"]))] if len(ceil) else ceil
        return Side(ref, pts.reset_index(drop=True), runs, _machine_noise(pts, path), ceil, path)
    if kind == "newest":  # on this machine
        scale, _, nb = rest.partition(":")
        pts = results.load_points(path)
        here = machine.machine_label()
        if len(pts):
            pts = pts[(pts["scale"] == scale) & pts["notebook"].astype(str).str.startswith(nb)
                      & (pts["machine"] == here)]
        if pts.empty or not nb:
            raise CompareError(f"no {scale!r} run of notebook {nb!r} on this machine ({here}) in "
                               f"{path or 'data/results.db'}")
        newest = pts.sort_values("started")["notebook_run"].iloc[-1]
        return side(newest, path)
    pts = results.load_points(path, run_id=ref)
    if pts.empty:
        raise CompareError(f"no run {ref!r} with points in {path or 'data/results.db'} (a notebook "
                           f"run's id, newest:<scale>:<NN> or reference:<NN>)")
    runs = results.read_sql("SELECT * FROM runs WHERE notebook_run = ? OR run_id = ?", [ref, ref], path)
    return Side(ref, pts.reset_index(drop=True), runs, _machine_noise(pts, path),
                results.load_table("ceilings", ref, path), path)


def _machine_noise(pts: pd.DataFrame, path=None) -> dict:
    """The run-to-run spreads stored for the side's machine (experiments.noise),
    {family: {metric: {stack: [(window_s, spread), ...]}}}: the newest measurement of each family,
    metric, stack it was measured on (None: not recorded) and window length; {} when none was
    measured there."""
    machine = pts["machine"].dropna().iloc[0] if "machine" in pts and pts["machine"].notna().any() else None
    if not results.has_table("noise", path):  # nothing measured on any machine yet
        return {}
    rows = results.read_sql("SELECT * FROM noise WHERE machine = ? ORDER BY measured", [machine], path)
    newest: dict = {}
    for r in rows.to_dict("records"):  # the newest row of each family, metric and window wins
        window = r.get("duration_s")
        window = float(window) if window is not None and window == window else math.nan
        stack = r.get("server") if isinstance(r.get("server"), str) else None
        newest.pop((r["family"], r["metric"], stack, window), None)
        newest[(r["family"], r["metric"], stack, window)] = float(r["spread"])
    out: dict = {}  # each list oldest measurement first
    for (family, metric, stack, window), spread in newest.items():
        out.setdefault(family, {}).setdefault(metric, {}).setdefault(stack, []).append((window, spread))
    return out


def measured_on(by_stack: dict, server: str | None):
    """Whose measurement a point's band takes, of those stored for its family and metric: its own
    stack's, else the machine's (NOISE_STACK, the stack `--noise` measures unless told), else the
    last stack by name (as the canned query's max())."""
    if server in by_stack:
        return server
    if NOISE_STACK in by_stack:
        return NOISE_STACK
    named = sorted(k for k in by_stack if k is not None)
    return named[-1] if named else None


def _nearest(measured: list, window_s) -> tuple[float, float]:
    """The (window, spread) measured over the window nearest `window_s` in ratio (the newer of a
    tie; the newest measurement when the point's window is not known)."""
    if window_s is None or window_s != window_s or window_s <= 0:
        return measured[-1]
    ratio = [max(w / window_s, window_s / w) if w == w and w > 0 else math.inf for w, _ in measured]
    return measured[min(range(len(measured)), key=lambda i: (ratio[i], -i))]


def machine_spread(noise: dict, scenario: str, metric: str, window_s: float | None = None,
                   server: str | None = None) -> float:
    """A point's spread from its machine's measurement: its scenario's family's, or (a scenario
    the registry does not know, an app's locustfile) the widest family's; of that family, the
    one measured on the point's own stack `server` where there is one (measured_on), over windows
    nearest the point's `window_s` (a short window spreads more than a long one); nan when none."""
    return machine_spread_from(noise, scenario, metric, window_s, server)[0]


def machine_spread_from(noise: dict, scenario: str, metric: str, window_s: float | None = None,
                        server: str | None = None) -> tuple[float, float, str | None]:
    """machine_spread, the window (s) of the measurement it came from and the stack it was
    measured on (nan, nan, None: none)."""
    def pick(by_stack: dict) -> tuple[float, float, str | None]:
        on = measured_on(by_stack, server)
        window, spread = _nearest(by_stack[on], window_s)
        return spread, window, on
    family = scenarios.SCENARIOS[scenario].family if scenario in scenarios.SCENARIOS else None
    if family in noise and metric in noise[family]:
        return pick(noise[family][metric])
    found = [pick(m[metric]) for m in noise.values() if metric in m]
    if not found:
        return math.nan, math.nan, None
    return max(found, key=lambda f: f[0])


def _keyed(pts: pd.DataFrame) -> pd.DataFrame:
    """The points with KEYS as text (users a whole number, a rate as %g, a missing key empty), so
    that a point read from results.db and the same point read from a CSV export align."""
    out = pts.copy()
    for k in KEYS:
        col = out[k] if k in out else pd.Series(None, index=out.index, dtype=object)
        if k == "users":
            out[k] = [str(int(v)) if v == v and v is not None else "" for v in col]
        elif k == "rate":
            out[k] = [f"{float(v):g}" if v == v and v is not None else "" for v in col]
        else:
            out[k] = [str(v) if v == v and v is not None else "" for v in col]
    return out


def _levels(s: Side) -> pd.DataFrame:
    """One row per point (over its repeats): each metric's mean, its repeats and its relative
    spread, and the server core's mean probe (sqlitelab.core.probe; NaN where not probed)."""
    pts = _keyed(s.points)
    pts["_probe"] = pts[[c for c in PROBES if c in pts]].astype(float).mean(axis=1) if any(
        c in pts for c in PROBES) else math.nan
    agg = {}
    for m in METRICS:
        agg[m] = (m, "mean")
        agg[f"{m}_spread"] = (m, lambda v: (v.max() - v.min()) / v.mean() if len(v) > 1 and v.mean() else math.nan)
        agg[f"{m}_runs"] = (m, lambda v: [float(x) for x in v if x is not None and x == x])
    agg["repeats"] = ("rps", "size")
    # the interleaved rounds its repeats came from (sweep's `rounds`: each a server started afresh)
    agg["rounds"] = ("round", lambda v: int(v.dropna().nunique()) or 1) if "round" in pts else ("rps", lambda v: 1)
    agg["outlasted"] = (("outlasted", lambda v: bool(v.fillna(False).astype(bool).any())) if "outlasted" in pts
                        else ("rps", lambda v: False))
    agg["probe_ms"] = ("_probe", "mean")
    agg["server_cpu_pct"] = ("server_cpu_pct", "mean") if "server_cpu_pct" in pts else ("rps", lambda v: math.nan)
    agg["window_s"] = ("window_s", "mean") if "window_s" in pts else ("rps", lambda v: math.nan)
    out = pts.groupby(list(KEYS), sort=True).agg(**agg).reset_index()
    for m in METRICS:
        own = out[f"{m}_spread"].notna()
        stored = [machine_spread_from(s.machine_noise, sc, m, w, srv)
                  for sc, w, srv in zip(out["scenario"], out["window_s"], out["server"])]
        out[f"{m}_spread"] = out[f"{m}_spread"].fillna(pd.Series([v for v, _, _ in stored], index=out.index))
        out[f"{m}_spread_from"] = [
            f"its {n} repeats" if mine else _spread_from(w, on, srv) if v == v else "none"
            for mine, n, srv, (v, w, on) in zip(own, out["repeats"], out["server"], stored)]
    return out


def in_rounds(rounds_a, rounds_b) -> bool:
    """Whether a point is judged by its ratio's interval (ROUNDS or more interleaved rounds on
    each side) rather than by a band."""
    return min(int(rounds_a), int(rounds_b)) >= ROUNDS


def interval_verdict(ratio: float, low: float, high: float, band: float | None, better: int) -> str:
    """faster / slower / within noise for a ratio b / a measured in rounds: its 95 % interval over
    the rounds (low, high) and the band of the same code run twice on the machine (`band`, a
    share; None: not known), combined in quadrature on the log scale — a move where the ratio's
    distance from 1 exceeds both together, sqrt(d² + log(1 + band)²), d being the distance from the
    ratio to its interval's end toward 1 (without a band: where the interval leaves out 1). The
    rounds hold the variance between server starts within a run; the band, what moves a point
    between two runs (`better`: +1 when higher is better; an unbounded interval is within noise)."""
    if not (ratio == ratio and ratio > 0 and low == low and high == high):
        return "not measured"
    if low <= 0 or math.isinf(high):
        return "within noise"
    if abs(math.log(ratio)) <= rounds_band(ratio, low, high, band):
        return "within noise"
    return "faster" if (ratio > 1) == (better > 0) else "slower"


def rounds_band(ratio: float, low: float, high: float, band: float | None) -> float:
    """How far from 1 (on the log scale) a ratio measured in rounds must lie to count as a move:
    its interval's half toward 1 and the machine's band in quadrature (interval_verdict)."""
    d = math.log(ratio) - math.log(low) if ratio >= 1 else math.log(high) - math.log(ratio)
    b = math.log(1 + band) if band is not None and band == band and band > 0 else 0.0
    return math.hypot(d, b)


def _spread_from(window: float, on: str | None, server: str) -> str:
    """Where a band measured on the machine came from, in words: the point's own stack's windows,
    or the machine's (and the stack they were measured on)."""
    windows = f"{window:g}-s windows" if window == window else "runs"
    if on is not None and on == server:
        return f"its stack's {windows}"
    return f"the machine's {windows}" + (f" (on {servers.stack_title(on)})" if on else "")


def verdict(ratio: float, band: float, better: int) -> str:
    """faster / slower / within noise for a ratio b / a and its band (`better`: +1 when higher is
    better); `no noise band` when the band is unknown."""
    if ratio != ratio:
        return "not measured"
    if band != band:
        return "no noise band"
    if abs(ratio - 1) <= band:
        return "within noise"
    return "faster" if (ratio > 1) == (better > 0) else "slower"


@dataclass
class Comparison:
    a: Side
    b: Side
    table: pd.DataFrame        # the points both sides have
    only_a: pd.DataFrame       # keys of the points only a has
    only_b: pd.DataFrame
    provenance: pd.DataFrame   # what differs between the sides' runs, first
    overall: dict = field(default_factory=dict)  # metric -> Overall: the run as a whole


def compare(a: Side, b: Side, drift: dict | None = None, band: dict | None = None) -> Comparison:
    """Align two sides of the same notebook and give each common point's ratios and verdicts, and
    the run as a whole its own; `drift`: {metric: (the machine's run-to-run drift, its words)} for
    that verdict (None: the A/A checks stored for b's machine in the results.db b was read from,
    drift_of); `band`: {metric: (a point's band, its words)} for the points neither side's spread
    covers (None: the A/A checks stored for b's machine, notebook and scale, aa_band_of; a metric
    without one: the comparison's own points, own_band)."""
    if a.notebook != b.notebook:
        raise CompareError(f"{a.label} is notebook {a.notebook} and {b.label} is {b.notebook}: "
                           f"compare runs of one notebook")
    la, lb = _levels(a), _levels(b)
    both = la.merge(lb, on=list(KEYS), suffixes=("_a", "_b"))
    # how fast b's server core ran against a's beside the same point (>1: b's faster), from probes
    both["core_speed"] = both["probe_ms_a"] / both["probe_ms_b"]
    for m, better in METRICS.items():
        # a side at 0 (no request finished in its window: a stall) has no ratio, nor one where a
        # request outlasted the window (OUTLASTED); the verdict names it
        ran = (both[f"{m}_a"] != 0) & (both[f"{m}_b"] != 0) & ~both["outlasted_a"] & ~both["outlasted_b"]
        both[f"{m}_ratio"] = (both[f"{m}_b"] / both[f"{m}_a"]).where(ran)
        both[f"{m}_band"] = (both[f"{m}_spread_a"] ** 2 + both[f"{m}_spread_b"] ** 2) ** 0.5
        ratio_iv = [_ratio_interval(x, y) if ok else None
                    for x, y, ok in zip(both[f"{m}_runs_a"], both[f"{m}_runs_b"], ran)]
        both[f"{m}_low"] = [iv.low if iv else math.nan for iv in ratio_iv]
        both[f"{m}_high"] = [iv.high if iv else math.nan for iv in ratio_iv]
        # where neither side's spread is known: the A/A check's (the same code twice on this machine,
        # notebook and scale), else the comparison's own points
        own = ((band or {}).get(m) if band is not None
               else aa_band_of(_one(b.points, "machine"), a.notebook, _one(b.runs, "scale"), m, b.db))
        own = own or own_band(both, m)
        if own is not None:
            none = both[f"{m}_band"].isna() & both[f"{m}_ratio"].notna()
            both.loc[none, f"{m}_band"] = own[0]
            for side in ("a", "b"):
                both.loc[none, f"{m}_spread_from_{side}"] = own[1]
        # a point measured in rounds on both sides: its ratio's interval and the machine's band
        # judge it (interval_verdict), not its repeats' range
        rounds = [in_rounds(x, y) and lo == lo and r == r and r > 0 and lo > 0 and hi < math.inf
                  for x, y, r, lo, hi in zip(both["rounds_a"], both["rounds_b"], both[f"{m}_ratio"],
                                             both[f"{m}_low"], both[f"{m}_high"])]
        both[f"{m}_in_rounds"] = rounds
        machine_band = own[0] if own is not None else None
        both.loc[rounds, f"{m}_band"] = [
            math.exp(rounds_band(r, lo, hi, machine_band)) - 1
            for r, lo, hi in zip(both.loc[rounds, f"{m}_ratio"], both.loc[rounds, f"{m}_low"], both.loc[rounds, f"{m}_high"])]
        for side in ("a", "b"):
            both.loc[rounds, f"{m}_spread_from_{side}"] = [
                f"its {int(n)} interleaved rounds (the ratio's 95 % interval)"
                + (f" and {own[1]}" if own is not None else "") for n in both.loc[rounds, f"rounds_{side}"]]
        both[f"{m}_verdict"] = [NONE_FINISHED["a"] if x == 0 else NONE_FINISHED["b"] if y == 0 else
                                OUTLASTED["a"] if la_ else OUTLASTED["b"] if lb_ else
                                interval_verdict(r, lo, hi, machine_band, better) if by_rounds else verdict(r, n, better)
                                for x, y, la_, lb_, r, n, lo, hi, by_rounds in zip(
                                    both[f"{m}_a"], both[f"{m}_b"], both["outlasted_a"], both["outlasted_b"],
                                    both[f"{m}_ratio"], both[f"{m}_band"], both[f"{m}_low"], both[f"{m}_high"], rounds)]
    order = list(KEYS[:-2]) + ["_users", "_rate"]
    both = (both.assign(_users=pd.to_numeric(both["users"], errors="coerce"),
                        _rate=pd.to_numeric(both["rate"], errors="coerce"))
            .sort_values(order).drop(columns=["_users", "_rate"]).reset_index(drop=True))
    keys = lambda d: d[list(KEYS)].apply(tuple, axis=1)  # noqa: E731
    only_a = la[~keys(la).isin(set(keys(lb)))][list(KEYS)]
    only_b = lb[~keys(lb).isin(set(keys(la)))][list(KEYS)]
    return Comparison(a, b, both, only_a.reset_index(drop=True), only_b.reset_index(drop=True),
                      provenance(a, b),
                      {m: overall(both, m, better, (drift or {}).get(m) if drift is not None
                                  else drift_of(_one(b.points, "machine"), m, b.db))
                       for m, better in METRICS.items()})


def _ratio_interval(a: list, b: list) -> "intervals.Interval | None":
    """b ÷ a's 95 % interval over each side's repeats (Fieller: sqlitelab.core.intervals), None
    unless both sides have two repeats or more and a's mean is not 0."""
    if len(a) < 2 or len(b) < 2 or not sum(a):
        return None
    return intervals.ratio_interval(b, a)


def own_band(both: pd.DataFrame, metric: str) -> tuple[float, str] | None:
    """The band a comparison draws from its own points where neither run's spread is known, and
    where it came from in words: the logarithm of every point's ratio, its robust spread (1.4826 ×
    the median absolute deviation from the median) over the points, and a point whose ratio is
    within OWN_Z of those spreads of 1 is within noise. What moved every point alike (a server
    held back, a slower build, a slower machine) stays a change: only the points' scatter is
    noise; the run as a whole is judged apart (overall). None with fewer than OWN_POINTS ratios.
    (The cores' probes are not used to adjust a ratio: a probe is one instant beside a window,
    and a held-back server still busy with its backlog slows the probe on its core too.)"""
    logs = [math.log(v) for v in both[f"{metric}_ratio"] if v == v and v > 0]
    if len(logs) < OWN_POINTS:
        return None
    mid = intervals.median_interval(logs).estimate
    mad = intervals.median_interval([abs(v - mid) for v in logs]).estimate
    return math.exp(OWN_Z * 1.4826 * mad) - 1, f"the comparison's own {len(logs)} points (their scatter)"


@dataclass(frozen=True)
class Overall:
    """The run as a whole against the other, per metric: the median of its points' ratios with
    the median's distribution-free 95 % interval (intervals.median_interval), and the verdict:
    faster or slower where the interval leaves out 1 and the machine's drift around it, else
    within noise (`too few points` below the interval's six). The interval holds the points'
    scatter; what every point of a run shares — the machine's speed during that run — is not in
    it: the `drift` is, the largest move of a whole run the same code made twice on this machine
    (the power check's A/A, stored: drift_of), a ratio within 1 ± drift of 1 being no move.
    Without a stored A/A the drift is unknown (0) and the words say so."""
    ratio: float
    low: float
    high: float
    points: int
    verdict: str
    drift: float = 0.0
    drift_from: str = "no A/A run of this machine stored (python -m sqlitelab.compare --power NN measures it)"

    def words(self, metric: str) -> str:
        if self.low != self.low:
            return f"the run as a whole: {self.verdict} ({self.points} points)"
        return (f"the run as a whole: {self.ratio:.2f}× (median of {self.points} points, 95 % interval "
                f"{self.low:.2f}–{self.high:.2f}×; the machine's drift ±{100 * self.drift:.0f} %: "
                f"{self.drift_from}): {self.verdict}")


def overall(table: pd.DataFrame, metric: str, better: int, drift: tuple[float, str] | None = None) -> Overall:
    """The run as a whole (Overall) for `metric`; `drift`: (the machine's run-to-run drift, where
    it came from), None: unknown."""
    ratios = [v for v in table[f"{metric}_ratio"] if v == v and v > 0] if len(table) else []
    extra = {"drift": drift[0], "drift_from": drift[1]} if drift else {}
    if not ratios:
        return Overall(math.nan, math.nan, math.nan, 0, "no point with a ratio", **extra)
    iv = intervals.median_interval(ratios)
    if not iv.bounded:
        return Overall(iv.estimate, math.nan, math.nan, iv.n, "too few points", **extra)
    d = drift[0] if drift else 0.0
    up, down = iv.low > 1 + d, iv.high < 1 / (1 + d)
    word = "within noise" if not (up or down) else "faster" if up == (better > 0) else "slower"
    return Overall(iv.estimate, iv.low, iv.high, iv.n, word, **extra)


def drift_share(ratio: float) -> float:
    """How far a run-wide ratio moved from 1, either way, as a share (1.05 and 1/1.05: 0.05)."""
    return max(ratio, 1 / ratio) - 1


def drift_of(machine_label: str | None, metric: str, path=None) -> tuple[float, str] | None:
    """The largest move of a whole run the same code made twice on `machine_label`, for `metric`:
    the power checks' A/A rows stored in results.db (sqlitelab.report.power), as a share
    (|ratio − 1|, the larger of ratio and its inverse), and where it came from; None where none
    is stored."""
    if not machine_label or not results.has_table("power", path):
        return None
    rows = results.read_sql("SELECT notebook, scale, run_ratio FROM power WHERE machine = ? AND metric = ? "
                            "AND \"check\" = 'aa' AND run_ratio > 0", [machine_label, metric], path)
    if rows.empty:
        return None
    worst = rows.assign(move=[drift_share(r) for r in rows["run_ratio"]]).sort_values("move").iloc[-1]
    return (float(worst["move"]), f"the largest of {len(rows)} A/A check(s) stored here "
                                  f"({worst['notebook'][:2]} at {worst['scale']})")


def aa_band_of(machine_label: str | None, notebook: str, scale: str, metric: str,
               path=None) -> tuple[float, str] | None:
    """The band of a point from the same code run twice on `machine_label`, at `notebook` and
    `scale`: the widest `band` of the power checks' A/A rows stored in results.db (their points'
    own scatter, own_band), and where it came from; None where none is stored. A comparison of
    two changes takes it before its own points' scatter: what a change moves unevenly (a server
    held back slows its busy points only) widens that scatter, not the machine's noise."""
    if not machine_label or not results.has_table("power", path):
        return None
    rows = results.read_sql("SELECT * FROM power WHERE machine = ? AND notebook = ? AND scale = ? "
                            "AND metric = ? AND \"check\" = 'aa'", [machine_label, notebook, scale, metric], path)
    rows = rows[pd.to_numeric(rows["band"], errors="coerce") > 0] if "band" in rows else rows.iloc[0:0]
    if rows.empty:  # none stored, or only rows from before checks stored their band
        return None
    return (float(rows["band"].max()), f"the same code twice here ({len(rows)} A/A check(s) of "
                                       f"{notebook[:2]} at {scale}: their points' scatter)")


def provenance(a: Side, b: Side) -> pd.DataFrame:
    """What each side ran on and from (PROVENANCE, and the points' generators), differences first."""
    rows = []
    for what in PROVENANCE:
        va, vb = _one(a.runs, what), _one(b.runs, what)
        rows.append({"what": what, "a": va, "b": vb, "same": va == vb})
    for what in ("generator", "server_cpu_cap"):  # a held-back server: the power check's slowdown
        va, vb = _one(a.points, what), _one(b.points, what)
        rows.append({"what": what, "a": va, "b": vb, "same": va == vb})
    pa, pb = _parameters(a.runs), _parameters(b.runs)
    for name in sorted(set(pa) | set(pb)):  # the notebook's parameters: only those set differently
        va, vb = pa.get(name, "not set"), pb.get(name, "not set")
        # a parameter a run's notebook did not have yet took its default, as None does
        if name not in SAME_RUN + PROVENANCE and {va, vb} != {"not set", "None"} and va != vb:
            rows.append({"what": f"parameter {name}", "a": va, "b": vb, "same": False})
    for col, words in CEILING_WORDS.items():  # the machine's own speed, measured by each run
        ca, cb = _ceiling(a, col), _ceiling(b, col)
        if ca is None and cb is None:
            continue
        same = ca is not None and cb is not None and abs(cb / ca - 1) <= CEILING_SAME
        text = (lambda v: "not measured" if v is None else f"{v:,.0f}/s")
        rows.append({"what": words + ("" if ca is None or cb is None else f" (b ÷ a {cb / ca:.2f}×)"),
                     "a": text(ca), "b": text(cb), "same": same})
    out = pd.DataFrame(rows)
    return out.sort_values("same", kind="stable").reset_index(drop=True)


# The machine's limits a run stores (baseline.ceiling), as the provenance names them; two within
# CEILING_SAME of each other count as the same machine speed
CEILING_WORDS = {"commits_per_s": "SQLite alone, one-row commits (NORMAL)",
                 "reads_per_s": "SQLite alone, point reads"}
CEILING_SAME = 0.15



def _parameters(runs: pd.DataFrame) -> dict:
    """The notebook parameters a side's runs stored, each as text (a run's experiments store the
    same ones; where they differ, each value once, joined by ' | ')."""
    values: dict[str, set] = {}
    for v in runs.get("parameters", pd.Series(dtype=object)).dropna():
        try:
            params = json.loads(v) if isinstance(v, str) else dict(v)
        except (ValueError, TypeError):
            continue
        for k, x in params.items():  # as the notebook's parameters cell reads: None, normal, [8, 32]
            values.setdefault(k, set()).add(
                "None" if x is None else x if isinstance(x, str) else json.dumps(x, sort_keys=True))
    return {k: " | ".join(sorted(v)) for k, v in values.items()}


def _ceiling(s: Side, col: str) -> float | None:
    c = s.ceilings
    if c is None or c.empty or col not in c or c[col].isna().all():
        return None
    return float(c[col].dropna().mean())


def _one(rows: pd.DataFrame, col: str) -> str:
    """A column's values as text, one kind of each (a CPU read back from a CSV as 0.0 is 0)."""
    if col not in rows or rows[col].isna().all():
        return "not recorded"
    vals = sorted({str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
                   for v in rows[col].dropna()})
    return vals[0] if len(vals) == 1 else " | ".join(vals)


def summary(c: Comparison) -> str:
    """The comparison in a few lines: what differs in provenance, then per metric how many points
    were faster, slower, within noise or without a band, then the points only one side has."""
    lines = [f"{c.a.label} (a) against {c.b.label} (b), notebook {c.a.notebook}:"]
    diff = c.provenance[~c.provenance["same"]]
    for r in diff.itertuples():
        lines.append(f"  {r.what} differs: {r.a} | {r.b}")
    if c.table.empty:
        lines.append("  no point in common: nothing to compare (the points each side has are listed below)")
    for m in METRICS:
        if c.table.empty:
            break
        counts = c.table[f"{m}_verdict"].value_counts()
        lines.append(f"  {m}: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" of {len(c.table)} points; "
                     + c.overall[m].words(m))
    if len(c.only_a) or len(c.only_b):
        lines.append(f"  only in a: {len(c.only_a)} points; only in b: {len(c.only_b)} points")
    return "\n".join(lines)
