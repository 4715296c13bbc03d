"""This machine's run-to-run spread, measured and stored (issue 34): the noise band two runs are
compared against (sqlitelab.report.compare).

    noise.measure()            # python -m sqlitelab.compare --noise

For each scenario family (scenarios.toml's `family`: no database, reads, writes, the read/write
mix) one level of one stack is measured `runs` times, each run a sweep of its own — a fresh copy
of the seeded file, the server started anew, the generator started anew — back to back. The
spread of a metric is its (max − min) / mean over those runs: what the same measurement gives
twice on this machine within minutes. It does not hold the slower drift of a machine over hours
(the cores of a VM changing speed): a comparison of runs made hours apart can move more than this
band and still be the machine; the method section of a comparison says so.

A spread depends on the window it was measured over (a short window spreads more than a long
one), so `duration` is a setting (`python -m sqlitelab.compare --noise --duration S`): measure it
at the windows the runs to be compared use. Stored in results.db's `noise` table, one row per
machine, family, metric and measurement, with how it was made and its window (`duration_s`); a
comparison reads, for each point, the newest row of its machine and family measured over the
windows nearest the point's own.
"""
from __future__ import annotations

import json

import pandas as pd

from sqlitelab.core import machine, results, vocabulary
from sqlitelab.experiments.sweep import run, spec

# One scenario per family, the level and stack each is measured at, and the sweeps' settings: a
# small measurement (about a minute on 2 cores) that every family's points can lean on.
FAMILY_SCENARIOS = {"no-database": "hello", "reads": "user-read", "writes": "rails-writes",
                    "mix": "mix"}
# STACK is declared in sqlitelab.core.vocabulary (NOISE_STACK), where a comparison reads it.
STACK, PROFILE, USERS, RUNS, DURATION, WARMUP = vocabulary.NOISE_STACK, "rails71", 16, 5, 2.0, 0.5
METRICS = ("rps", "p99_ms")


def spread(values) -> float:
    """(max − min) / mean of a metric over runs (0 for one run, nan for no mean)."""
    v = pd.Series(list(values), dtype=float)
    return float((v.max() - v.min()) / v.mean()) if len(v) and v.mean() else float("nan")


def measure(*, runs: int = RUNS, users: int = USERS, duration: float = DURATION,
            warmup: float = WARMUP, stack: str = STACK, profile: str = PROFILE,
            generator: str = "loadgen", families=None, results_db=None, runs_dir=None,
            progress: bool = True) -> pd.DataFrame:
    """Measure and store the spread of each family (`families`: a subset of FAMILY_SCENARIOS);
    returns the stored rows."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 2:
        raise ValueError(f"runs must be an integer >= 2 (a spread needs two), not {runs!r}")
    families = list(families or FAMILY_SCENARIOS)
    unknown = sorted(set(families) - set(FAMILY_SCENARIOS))
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {', '.join(FAMILY_SCENARIOS)}")
    notebook_run = results.new_run_id("noise")
    specs = [spec(notebook="noise", experiment=f"{family}-{i}", servers=[stack], profiles=[profile],
                  scenario=FAMILY_SCENARIOS[family], levels=[users], duration=duration, warmup=warmup,
                  seed_users=1000, seed_items=1000, generator=generator, run_id=notebook_run,
                  results_db=results_db, runs_dir=runs_dir, progress=progress,
                  parameters={"runs": runs, "users": users, "duration": duration, "warmup": warmup})
             for family in families for i in range(1, runs + 1)]
    rows = spread_rows(run(*specs), warmup)
    results.store_rows("noise", rows, results_db)
    return pd.DataFrame(rows)


def spread_rows(pts: pd.DataFrame, warmup: float) -> list[dict]:
    """The `noise` rows of a measurement's points (experiment `<family>-<i>`): per family and
    metric, the spread over its runs and how it was made."""
    rows = []
    now = results.now_iso()
    for family, mine in pts.groupby(pts["experiment"].str.rsplit("-", n=1).str[0], sort=False):
        first = mine.iloc[0]
        for metric in METRICS:
            rows.append({
                "machine": first["machine"] or machine.machine_label(), "family": family,
                "scenario": first["scenario"], "metric": metric, "spread": spread(mine[metric]),
                "runs": len(mine), "mean": float(mine[metric].mean()), "server": first["server"],
                "profile": first["profile"], "users": int(first["users"]),
                "duration_s": float(first["window_s"]), "generator": first["generator"],
                "notebook_run": first["notebook_run"], "measured": now,
                "values": json.dumps([round(float(v), 3) for v in mine[metric]]),
                "how": f"{len(mine)} sweeps back to back, each a fresh copy of the file and a fresh "
                       f"start of {first['server']} ({first['profile']}) and of {first['generator']}, "
                       f"one level of {int(first['users'])} users, windows of about "
                       f"{float(first['window_s']):.1f} s after {warmup:g} s; (max − min) / mean"})
    return rows
