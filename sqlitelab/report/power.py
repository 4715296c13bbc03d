"""The lab's power, measured: what `compare` says of two runs of the same code (an A/A check),
and of a run whose servers were held back by a known share of their CPUs (an injected slowdown).

    python -m sqlitelab.compare --power 03 [--scale quick] [--cap 0.8]

A notebook is run three times at a scale, one after another, with the same commit: A, then A
again, then C with every server held to `cap` of its CPUs (a cgroup's CPU quota:
sqlitelab.core.processes.cap_command; LAB_SERVER_CPU_CAP). Its runs go to a data folder of their
own (data/power/<stamp>/: results.db, runs, figures), so that the newest run of the notebook in
data/results.db, what reports and capacity read, stays an unheld one. Then `compare` judges A
against A again, and A again against C (the two neighbours in time), point by point:

- **A/A, within noise**: the share of the points whose throughput (and p99) `compare` calls
  "within noise" — what it should call every point of the same code (goal: 95 %);
- **held back, flagged**: the share of C's points whose throughput it calls "slower" (p99:
  "slower" too) — what it should call every point whose server lost a fifth of its CPU (goal:
  90 %). A point whose server was not busy enough to meet the quota does not slow down: such
  points count against the power, as they would in any comparison.

And for the run as a whole (compare's `overall`: the median of the points' ratios and its
interval): the A/A pair's is the machine's drift between two runs (stored, it is the floor of
every run-wide verdict `compare` gives on this machine: compare.drift_of), and the held run is
judged against it, as "slower" or not.

One row per metric and check goes to results.db's `power` table (`rows`), with the runs it
compared: the lab's smallest detectable change on this machine, at that scale, stated.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core import machine, results
from sqlitelab.report import compare

CAP = 0.8  # the injected slowdown: every server held to 80 % of its CPUs
# what each check wants `compare` to say of a point, per metric
WANTED = {"aa": {"rps": ("within noise",), "p99_ms": ("within noise",)},
          "held": {"rps": ("slower",), "p99_ms": ("slower",)}}
GOALS = {"aa": 0.95, "held": 0.90}


def rows(notebook: str, scale: str, cap: float, run_a: str, run_a2: str, run_held: str,
         db=None) -> list[dict]:
    """The `power` rows of three stored runs (A, A again, A held back by `cap`) in `db`: per check
    and metric, the points compared, how many got the wanted verdict, their share and the goal."""
    # the A/A pair measures the machine's drift between two runs (no drift assumed); the held run
    # is judged against that drift, as any comparison on this machine then is (compare.drift_of)
    aa = compare.compare(compare.side(run_a, db), compare.side(run_a2, db), drift={})
    moved = {m: (compare.drift_share(o.ratio), "this check's A/A") for m, o in aa.overall.items()
             if o.ratio == o.ratio and o.ratio > 0}
    held = compare.compare(compare.side(run_a2, db), compare.side(run_held, db), drift=moved)
    now = results.now_iso()
    out = []
    for check, c in (("aa", aa), ("held", held)):
        for metric, wanted in WANTED[check].items():
            verdicts = c.table[f"{metric}_verdict"] if len(c.table) else pd.Series(dtype=object)
            hit = int(verdicts.isin(wanted).sum())
            sources = c.table[f"{metric}_spread_from_a"].value_counts() if len(c.table) else pd.Series(dtype=int)
            whole = c.overall[metric]
            out.append({
                "machine": machine.machine_label(), "notebook": notebook, "scale": scale, "check": check,
                "metric": metric, "cap": cap if check == "held" else None, "points": len(verdicts),
                "wanted": " or ".join(wanted), "hits": hit,
                "share": hit / len(verdicts) if len(verdicts) else None, "goal": GOALS[check],
                "verdicts": verdicts.value_counts().to_json(),
                "band_from": sources.to_json(),
                "run_ratio": whole.ratio, "run_low": whole.low, "run_high": whole.high,
                "run_verdict": whole.verdict if check == "held" else "the machine's drift",
                "run_right": whole.verdict in wanted if check == "held" else None,
                "run_a": run_a if check == "aa" else run_a2, "run_b": run_a2 if check == "aa" else run_held,
                "measured": now})
    return out


def table(db=None) -> pd.DataFrame:
    """The stored power rows (newest first), empty where none was measured."""
    if not results.has_table("power", db):
        return pd.DataFrame()
    return results.read_sql("SELECT * FROM power ORDER BY measured DESC", (), db)


def said(r: dict) -> str:
    """One stored row in a line: the check, its share against its goal."""
    pct = lambda v: f"{100 * v:.0f} %"  # noqa: E731
    what = ("A/A (the same code twice): within noise" if r["check"] == "aa"
            else f"held to {pct(r['cap'])} of its CPUs: flagged slower")
    share = "no point compared" if not r["points"] else f"{r['hits']} of {r['points']} points ({pct(r['share'])})"
    ratio = (f" {r['run_ratio']:.2f}× (95 % interval {r['run_low']:.2f}–{r['run_high']:.2f}×)"
             if r.get("run_low") is not None and r["run_low"] == r["run_low"] else "")
    whole = (f"the run as a whole moved{ratio}: the machine's drift between two runs, the floor of a "
             f"run-wide verdict here" if r["check"] == "aa" else
             f"the run as a whole{ratio}: {r['run_verdict']}" + (
                 ", beyond the A/A drift" if r["run_verdict"] in ("faster", "slower") else
                 " (within the A/A drift or its points' scatter)" if r["run_verdict"] == "within noise" else ""))
    return f"{r['notebook']} {r['scale']} · {r['metric']} · {what}: {share}, goal {pct(r['goal'])}; {whole}"
