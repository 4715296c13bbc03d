"""Tables that two or more notebooks compute from measured points (never typed in) — numbers only;
the sentences written from them are in sqlitelab.report.findings — and the articles' published
numbers as reference data with their source. A notebook's own tables are in its module
(sqlitelab.notebooks)."""
from __future__ import annotations

import io
import math
import json
from importlib import resources

import pandas as pd

from sqlitelab.core import intervals, results
from sqlitelab.infra.servers import stack_title
from sqlitelab.core.vocabulary import COUNTED_AS
from sqlitelab.core.vocabulary import SYNCHRONOUS


def reference(name: str) -> tuple[pd.DataFrame, dict]:
    """A published table from sqlitelab/report/reference/<name>.csv and its `# key: value` header."""
    text = resources.files("sqlitelab.report").joinpath("reference", f"{name}.csv").read_text()
    meta = {}
    for line in text.splitlines():
        if line.startswith("#") and ":" in line:
            k, v = line[1:].split(":", 1)
            meta[k.strip()] = v.strip()
    return pd.read_csv(io.StringIO(text), comment="#"), meta


def pragma_column(df: pd.DataFrame, name: str) -> pd.Series:
    """Each point's pragma as its server read it back (from the `knobs` of /health);
    synchronous by name (full, normal…)."""
    vals = [str((json.loads(k).get("pragmas") or {}).get(name, "")).lower() for k in df["knobs"]]
    return pd.Series([SYNCHRONOUS.get(v, v) if name == "synchronous" else v for v in vals],
                     index=df.index, name=name)


def flagged(df: pd.DataFrame, col: str) -> pd.Series:
    """A boolean column that may be missing, or hold None/NaN (points from before the flag)."""
    return df[col].fillna(False).astype(bool) if col in df else pd.Series(False, index=df.index)


def open_loop(points: pd.DataFrame) -> pd.Series:
    """Which points are open-loop (points stored before issue 16 have no such column)."""
    if "open_loop" not in points:
        return pd.Series(False, index=points.index)
    return points["open_loop"].fillna(False).astype(bool)


def rate_points(points: pd.DataFrame) -> pd.DataFrame:
    """The open-loop points of capacity sweeps: not the levels an operation ran in (08), which
    say what the operation cost, not what the server keeps up with."""
    quiet = points["operation"].isna() if "operation" in points else True
    return points[open_loop(points) & quiet]


def generator_cols(df: pd.DataFrame, keys: list[str]) -> dict:
    """Per group of points: whether the generator was the limit (`generator_bound`) or
    plausibly set the pace (`generator_influenced`) in any repeat, and which generator(s)
    measured it (`generator`: loadgen where sweep's `confirm` replaced Locust)."""
    g = pd.DataFrame({**{k: df[k] for k in keys},  # only what it groups (a wide frame is not copied)
                      "_bound": flagged(df, "generator_bound"), "_infl": flagged(df, "generator_influenced"),
                      "_gen": df["generator"].fillna("locust") if "generator" in df else "locust"},
                     index=df.index).groupby(keys, sort=True)
    return {"generator_bound": g["_bound"].any(), "generator_influenced": g["_infl"].any(),
            "generator": g["_gen"].agg(lambda v: "+".join(sorted(set(v))))}


# How the repeats of one level combine, column by column (over_repeats): means for rates, CPU
# and latency percentiles, the worst for maxima, memory and file size, totals for counts. A
# table that combines a column otherwise says so where it calls over_repeats.
OVER_REPEATS = {
    "rps": "mean", "all_rps": "mean", "mean_ms": "mean", "p50_ms": "mean", "p90_ms": "mean", "p95_ms": "mean",
    "p99_ms": "mean", "p999_ms": "mean", "max_ms": "max", "max_overrun_ms": "max",
    "requests": "sum", "errors": "sum", "busy_errors": "sum",
    "server_cpu_pct": "mean", "gen_cpu_pct": "mean", "bytes_per_s": "mean", "server_rss_mb": "max",
    "hey_rps": "mean", "hey_mean_ms": "mean", "hey_max_ms": "max", "hey_seconds": "max",
    "hey_results": "sum", "db_mib": "max", "db_cached_before": "min", "db_cached_after": "min",
}


def over_repeats(df: pd.DataFrame, keys, columns, **how) -> pd.DataFrame:
    """One row per level (a group of `keys`): each of `columns` combined over the level's
    repeats by its OVER_REPEATS rule, or by `how` — a rule (`p99_ms="max"`), a function, or
    `(source column, rule)` for a column made from another — then `repeats`, the generator
    flags (generator_cols) and `audit_ok` (every repeat audited ok) where the points have it.
    A mean rate of levels some of which ran twice or more is followed by its 95 % interval over
    them, `rps_low` and `rps_high` (rate_interval; empty for a level of one run)."""
    keys = list(keys)
    g = df.groupby(keys, sort=True)
    out = {}
    repeated = bool(len(df)) and int(g.size().max()) >= 2
    for name in columns:
        src, rule = name, how.get(name, OVER_REPEATS.get(name))
        if isinstance(rule, tuple):
            src, rule = rule[0], (rule[1] if rule[1] is not None else OVER_REPEATS.get(rule[0]))
        if rule is None:
            raise ValueError(f"no rule for combining {name!r} over repeats (OVER_REPEATS or how=)")
        out[name] = g[src].agg(rule)
        if name == "rps" and src == "rps" and rule == "mean" and repeated:
            ivs = g["rps"].agg(lambda v: rate_interval(v.tolist()))
            out["rps_low"], out["rps_high"] = ivs.map(lambda iv: iv.low), ivs.map(lambda iv: iv.high)
    out["repeats"] = g.size()
    out.update(generator_cols(df, keys))
    if "audit_ok" in df:
        out["audit_ok"] = g["audit_ok"].all()
    return pd.DataFrame(out).reset_index()


def rate_interval(values: list) -> intervals.Interval:
    """A level's rate over its runs with its 95 % interval (intervals.mean_interval, Student's t)
    over those that are numbers; fewer than two such runs have none (NaN ends), and no run at all
    no estimate either."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return intervals.Interval(math.nan, math.nan, math.nan, 0, "no run: no interval")
    return intervals.mean_interval(finite)


def rate_with_runs(rate: float, runs=None) -> intervals.Interval:
    """A level's `rate` with the 95 % interval of its `runs` (rate_interval); with no run given,
    or none a number, the rate alone with no interval."""
    iv = rate_interval(list(runs if runs is not None else ()))
    return iv if iv.n else intervals.Interval(rate, math.nan, math.nan, 1, "one run: no interval")


def _true(v) -> bool:
    return v is not None and v == v and bool(v)  # v == v: not NaN


def limit_note(x) -> str:
    """How a row's number must be read ("generator-bound", "generator-influenced"), or ""
    when the server set the pace."""
    if _true(x.get("generator_bound")):
        return "generator-bound"
    return "generator-influenced" if _true(x.get("generator_influenced")) else ""


def limited(x) -> bool:
    """A point, level or row whose generator was the limit or set the pace: its throughput is a
    lower bound for the server's (and its latency an upper bound)."""
    return limit_note(x) != ""


def run_status(run_counts, keep) -> int:
    """Responses over a level's whole run (warm-up, window and overrun) whose status passes
    `keep` (0 for a transport error), from `run_counts`."""
    if not isinstance(run_counts, str) or not run_counts:
        return 0
    return sum(n for key, n in json.loads(run_counts).items() if keep(int(key.rsplit(" ", 1)[-1])))


def single_machine_table(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """Seed 004's layout: per stack, profile and endpoint, the best level's rps, RSS, Mbit/s
    and the share of its requests that failed; `profile`: that profile's points only. `rps` here
    is the successful responses per second (a failed answer is no throughput: the level is
    chosen, ranked and compared on it), `all_rps` every answer's, `error_pct` beside them."""
    if profile is not None:
        df = df[df["profile"] == profile]
    failed = (df["errors"].fillna(0) / df["requests"]).where(df["requests"] > 0, 0.0)
    df = df.assign(all_rps=df["rps"], rps=df["rps"] * (1 - failed))
    cached = (["db_mib", "cached_before", "cached_after"] if "db_cached_before" in df else [])
    lv = over_repeats(df, ["server", "profile", "scenario", "users"],
                      ["rps", "all_rps", "server_rss_mb", "mbit_s", "p99_ms", "requests", "errors",
                       "server_cpu_pct", *cached],
                      mbit_s=("bytes_per_s", lambda v: v.mean() * 8 / 1e6),
                      # the share of the database file in the OS page cache
                      cached_before=("db_cached_before", None), cached_after=("db_cached_after", None))
    lv["error_pct"] = 100 * lv["errors"] / lv["requests"]   # both summed over the repeats
    return lv.loc[lv.groupby(["server", "profile", "scenario"])["rps"].idxmax()].reset_index(drop=True)


# --------------------------------------------------------------------------- seed 003 (buffer)


# --------------------------------------------------------------------------- the generator

def crosscheck_table(run_id: str, path=None) -> pd.DataFrame:
    """The cross-checks of a run (sweep's `crosscheck`: wrk, or an article's own tool, hey or
    oha) beside every generator that measured the same server, profile and level in the same
    sweep: rps, p99 and the share of failed requests (means over repeats; `responses` and
    `failed`, the counts it is made of: the client's whole run, a generator's windows), their ratio to the
    client's (`rps_vs_ref`, `p99_vs_ref`), the generators' CPU, and the lab's flags. A lab
    generator's `hey_rps` (its requests counted as hey counts them) is shown beside a hey
    cross-check, whose own rate is counted that way. A scenario the client cannot send is listed
    with the reason."""
    checks = results.load_table("crosschecks", run_id, path)
    if checks.empty:
        return pd.DataFrame()
    pts = results.load_points(path, run_id=run_id, headline_only=False)
    rows = []
    for c in checks.to_dict("records"):
        tool = c.get("generator") or "wrk"
        base = {"experiment": c.get("experiment"), "server": c["server"],
                "profile": c["profile"], "scenario": c["scenario"], "users": c["users"]}
        if c.get("skipped"):
            rows.append({**base, "generator": tool, "note": f"skipped: {c['skipped']}"})
            continue
        known = (c["ok_responses"] or 0) + (c["errors"] or 0)  # requests whose outcome it learnt
        rows.append({**base, "generator": tool, "rps": c["rps"], "p99_ms": c["p99_ms"],
                     "error_pct": 100 * c["errors"] / known if known else None,
                     "responses": known, "failed": c["errors"] or 0,
                     "rps_vs_ref": 1.0, "p99_vs_ref": 1.0, "gen_cpu_pct": c["gen_cpu_pct"],
                     "server_cpu_pct": c["server_cpu_pct"],
                     "note": f"audit {'ok' if c['audit_ok'] else 'FAILED'} ({c['audit_rule']})"})
        at = pts[(pts["run_id"] == c["run_id"]) & (pts["server"] == c["server"])
                 & (pts["profile"] == c["profile"]) & (pts["users"] == c["users"])]
        counted_as = COUNTED_AS[tool]
        if counted_as not in at or at[counted_as].isna().all():  # points from before that column
            counted_as = "rps"
        for gen, g in at.groupby("generator", sort=True):
            flags = [n for n, col in (("bound", "generator_bound"), ("influenced", "generator_influenced"))
                     if flagged(g, col).any()]
            head = g["headline"].fillna(True).astype(bool).all() if "headline" in g else True
            rate = g[counted_as].mean()
            rows.append({**base, "generator": gen, "rps": g["rps"].mean(), "p99_ms": g["p99_ms"].mean(),
                         **({counted_as: rate} if counted_as != "rps" else {}),
                         "error_pct": 100 * g["errors"].sum() / g["requests"].sum()
                         if g["requests"].sum() else None,
                         "responses": g["requests"].sum(), "failed": g["errors"].sum(),
                         "rps_vs_ref": rate / c["rps"] if c["rps"] else None,
                         "p99_vs_ref": g["p99_ms"].mean() / c["p99_ms"] if c["p99_ms"] else None,
                         "gen_cpu_pct": g["gen_cpu_pct"].mean(), "server_cpu_pct": g["server_cpu_pct"].mean(),
                         "note": ", ".join(flags + ([] if head else ["replaced"])) or "headline"})
        if at.empty:
            rows[-1]["note"] += "; the sweep has no point at this level"
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- network delay


# --------------------------------------------------------------------------- the machine's limits

LIMIT_KINDS = ("writes", "reads", "http")


def calibration_ids(runs: pd.DataFrame) -> list[str]:
    """The generator calibrations `runs` rows name (their `calibrations` JSON, generator →
    calib_id), sorted; a value that is no such JSON names none."""
    ids: set = set()
    for v in runs.get("calibrations", pd.Series(dtype=object)).dropna():
        try:
            ids |= set((json.loads(v) or {}).values())
        except (TypeError, ValueError, AttributeError):
            continue
    return sorted(ids)


def http_ceiling(run_id: str, path=None) -> tuple[float, str] | None:
    """The loopback HTTP ceiling a run's flags were judged against, and the stack it was measured
    on: wrk's rate on GET /hello at 64 users in the run's generator calibrations
    (runs.calibrations → calibrations.hello_wrk_rps, on their `target`, the fastest stack on
    /hello, pinned as the run; the best of them when the run used several generators), stored
    once per machine and referenced by the run; None for a run that skipped calibration."""
    ids = calibration_ids(results.load_table("runs", run_id, path))
    if not ids:
        return None
    marks = ",".join("?" * len(ids))
    cal = results.read_sql(f"SELECT hello_wrk_rps, target FROM calibrations WHERE calib_id IN ({marks})",
                           ids, path)
    cal = cal.dropna(subset=["hello_wrk_rps"]) if "hello_wrk_rps" in cal else cal.iloc[0:0]
    if cal.empty:
        return None
    best = cal.loc[cal["hello_wrk_rps"].idxmax()]
    return float(best["hello_wrk_rps"]), str(best["target"])


def machine_limits(raw: dict | None, kind: str, synchronous: str = "normal",
                   http: tuple[float, str] | None = None) -> dict[str, float]:
    """The machine's own limits a chart of `kind` is drawn against, label → per second, each
    measured without the rest of the stack: for `writes`, SQLite alone committing one row per
    transaction at `synchronous` (NORMAL or FULL: the points' own; baseline.ceiling, on the
    server's core); for `reads`, SQLite alone reading a row by primary key; for every kind, HTTP
    alone (`http`: wrk's rate on /hello and its stack, http_ceiling), when known. A limit the run
    did not measure (FULL in a ceiling stored before it was) is left out, never guessed."""
    if kind not in LIMIT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LIMIT_KINDS)}, not {kind!r}")
    sync = str(synchronous or "normal").lower()
    if sync not in ("normal", "full"):
        raise ValueError(f"synchronous must be normal or full, not {synchronous!r}")
    out: dict[str, float] = {}
    column = {"writes": "commits_per_s" if sync == "normal" else "full_commits_per_s",
              "reads": "reads_per_s"}.get(kind)
    words = {"writes": f"SQLite alone: one-row commits ({sync.upper()})",
             "reads": "SQLite alone: point reads"}.get(kind)
    value = (raw or {}).get(column) if column else None
    if value is not None and value == value and value > 0:
        out[words] = float(value)
    if http:
        out[f"HTTP alone: wrk on /hello ({stack_title(http[1])})"] = float(http[0])
    return out


def run_limits(run_id: str, raw: dict | None, points: pd.DataFrame, kind: str, path=None) -> dict[str, float]:
    """machine_limits for a chart of `points` of the notebook run `run_id`: the commits at the
    synchronous its servers read back (one value, or the limits of each would be one line for
    several curves: refused), HTTP alone from the run's calibration."""
    sync = None
    if kind == "writes":
        values = sorted(set(pragma_column(points, "synchronous")) - {""})
        if len(values) > 1:
            raise ValueError(f"these points ran at several synchronous settings ({', '.join(values)}): "
                             "draw each in a panel of its own with its own limits")
        sync = values[0] if values else "normal"
    return machine_limits(raw, kind, sync or "normal", http_ceiling(run_id, path))


def synchronous_of(points: pd.DataFrame, by: str = "scenario") -> dict:
    """The synchronous setting the servers read back, per value of `by` (one per value: where a
    value ran at several, its writes limit is not one number and it is left out)."""
    sync = pragma_column(points, "synchronous")
    out = {}
    for value, s in sync.groupby(points[by]):
        vals = sorted(set(s) - {""})
        if len(vals) <= 1:
            out[value] = vals[0] if vals else "normal"
    return out
