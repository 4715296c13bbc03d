"""The lab's power, measured: what `compare` says of two runs of the same code (an A/A check),
and of a run whose servers were held back by a known share of their CPUs (an injected slowdown).

    python -m sqlitelab.compare --power 03 [--scale quick] [--cap 0.8]

A notebook is run three times at a scale with the same commit: A, A again, and C with every
server held to `cap` of its CPUs (a cgroup's CPU quota: sqlitelab.core.processes.cap_command;
LAB_SERVER_CPU_CAP). The three run at once, taking turns server by server (sqlitelab.core.turns):
each server and profile of each sweep is measured in A, then in A again, then in C, before the
next one, so that a slow minute of the machine falls on the three alike rather than on one run
(checks stored before the turns ran one run after the other: their rows' `interleaved` is empty).
Its runs go to a data folder of their own (data/power/<stamp>/: results.db, runs, figures), so
that the newest run of the notebook in
data/results.db, what reports and capacity read, stays an unheld one. Then `compare` judges A
against A again, and A again against C (the two neighbours in time), point by point:

- **A/A, within noise**: the share of the points whose throughput (and p99) `compare` calls
  "within noise" — what it should call every point of the same code (goal: 95 %);
- **held back, flagged**: of the points the hold slows, the share whose throughput `compare`
  calls "slower" (p99: "slower" too) — what it should call every one of them (goal: 90 %). A
  point is slowed when its server, in the unheld run, used more CPU than the cap leaves it by
  enough to lose at least half the injected share (expected ratio cap × its CPUs ÷ its CPU use
  ≤ 1 − (1 − cap) / 2: 0.9 at a cap of 0.8); a point waiting on its disk or on the generator
  does not slow down, and is counted apart, as one more pair of the same code: it should stay within
  noise (`others`, `others_within`).

The held pair is judged against the A/A pair's band (the A/A points' own scatter): a hold slows
a run's busy points and not its idle ones, which widens the held pair's own scatter and would
hide the very move it is to show (compare.aa_band_of: every comparison on this machine, notebook
and scale takes that band where its points have none of their own). Given `-p rounds N` (03's
sweeps in N interleaved rounds, N >= compare.ROUNDS), a point of both runs is judged by its
ratio's 95 % interval over the rounds and that band together (compare.interval_verdict), and the
rows count those points (`in_rounds`) and
keep the parameters the runs were given (`parameters`).

And for the run as a whole (compare's `overall`: the median of the points' ratios and its
interval): the A/A pair's is the machine's drift between two runs (stored, it is the floor of
every run-wide verdict `compare` gives on this machine: compare.drift_of), and the held run is
judged against it, as "slower" or not.

One row per metric and check goes to results.db's `power` table (`rows`), with the runs it
compared: the lab's smallest detectable change on this machine, at that scale, stated.
"""
from __future__ import annotations

import json

import pandas as pd

from sqlitelab.core import layout, machine, results
from sqlitelab.report import compare

CAP = 0.8  # the injected slowdown: every server held to 80 % of its CPUs
# what each check wants `compare` to say of a point, per metric
WANTED = {"aa": {"rps": ("within noise",), "p99_ms": ("within noise",)},
          "held": {"rps": ("slower",), "p99_ms": ("slower",)}}
GOALS = {"aa": 0.95, "held": 0.90}
METRIC_WORDS = {"rps": "throughput", "p99_ms": "p99 latency"}


def rows(notebook: str, scale: str, cap: float, run_a: str, run_a2: str, run_held: str,
         db=None, interleaved: bool = False, parameters: dict | None = None) -> list[dict]:
    """The `power` rows of three stored runs (A, A again, A held back by `cap`) in `db`: per check
    and metric, the points compared, how many got the wanted verdict, their share and the goal;
    `interleaved`: whether the runs took turns server by server (else one ran after the other);
    `parameters`: the notebook parameters the three were given (`-p`; {}: none)."""
    # the A/A pair measures the machine's drift between two runs and a point's band (its points'
    # own scatter; no stored band or drift assumed); the held pair is judged against both, as any
    # comparison on this machine then is (compare.drift_of, compare.aa_band_of)
    aa = compare.compare(compare.side(run_a, db), compare.side(run_a2, db), drift={}, band={})
    moved = {m: (compare.drift_share(o.ratio), "this check's A/A") for m, o in aa.overall.items()
             if o.ratio == o.ratio and o.ratio > 0}
    bands = {m: (b[0], f"this check's A/A ({b[1]})") for m in compare.METRICS
             if (b := compare.own_band(aa.table, m)) is not None}
    a2 = compare.side(run_a2, db)
    held = compare.compare(a2, compare.side(run_held, db), drift=moved, band=bands)
    slowed = slowed_points(held.table, cap, _server_cpus(a2.runs))
    now = results.now_iso()
    out = []
    for check, c in (("aa", aa), ("held", held)):
        table = c.table if check == "aa" or not len(c.table) else c.table[slowed]
        others = c.table.iloc[0:0] if check == "aa" or not len(c.table) else c.table[~slowed]
        for metric, wanted in WANTED[check].items():
            verdicts = table[f"{metric}_verdict"] if len(table) else pd.Series(dtype=object)
            hit = int(verdicts.isin(wanted).sum())
            sources = c.table[f"{metric}_spread_from_a"].value_counts() if len(c.table) else pd.Series(dtype=int)
            whole = c.overall[metric]
            band = bands.get(metric)
            out.append({
                "machine": machine.machine_label(), "notebook": notebook, "scale": scale, "check": check,
                "metric": metric, "cap": cap if check == "held" else None, "points": len(verdicts),
                "wanted": " or ".join(wanted), "hits": hit,
                "share": hit / len(verdicts) if len(verdicts) else None, "goal": GOALS[check],
                "verdicts": verdicts.value_counts().to_json(),
                "band": band[0] if band else None,
                "band_from": sources.to_json(),
                "others": len(others) if check == "held" else None,
                "others_within": int((others[f"{metric}_verdict"] == "within noise").sum()) if check == "held" else None,
                "run_ratio": whole.ratio, "run_low": whole.low, "run_high": whole.high,
                "run_verdict": whole.verdict if check == "held" else "the machine's drift",
                "run_right": whole.verdict in wanted if check == "held" else None,
                "interleaved": int(interleaved),
                "parameters": json.dumps(parameters or {}, sort_keys=True),
                # the points compare judged by their ratios' intervals over interleaved rounds
                "in_rounds": int(table[f"{metric}_in_rounds"].sum()) if len(table) else 0,
                "run_a": run_a if check == "aa" else run_a2, "run_b": run_a2 if check == "aa" else run_held,
                "measured": now})
    return out


def slowed_points(table: pd.DataFrame, cap: float, cpus: int) -> pd.Series:
    """Which points of a held comparison (a: unheld, b: held to `cap`) the hold slows: where a's
    server used more CPU than `cap` of its `cpus` leaves it, enough to lose at least half the
    injected share (cap × cpus × 100 ÷ its CPU % ≤ 1 − (1 − cap) / 2). A point whose CPU was not
    measured is not counted as slowed."""
    if not len(table):
        return pd.Series(dtype=bool)
    used = pd.to_numeric(table.get("server_cpu_pct_a", pd.Series(index=table.index, dtype=float)), errors="coerce")
    expected = (cap * cpus * 100 / used).where(used > 0)
    return (expected <= 1 - (1 - cap) / 2).fillna(False)


def _server_cpus(runs: pd.DataFrame) -> int:
    """The CPUs a run's servers could use: their pinned set (runs' `server_cpus`), else every CPU."""
    return layout.pinned_count(runs.get("server_cpus", pd.Series(dtype=object))) or len(layout.available_cpus())


def table(db=None) -> pd.DataFrame:
    """The stored power rows (newest first), empty where none was measured."""
    if not results.has_table("power", db):
        return pd.DataFrame()
    return results.read_sql("SELECT * FROM power ORDER BY measured DESC", (), db)


def said(r: dict, machine_label: str | None = None) -> str:
    """One stored row in a line: the check, its share against its goal; a row of another machine
    than `machine_label` (the one the lines are about) names its own."""
    pct = lambda v: f"{100 * v:.0f} %"  # noqa: E731
    known = lambda v: v is not None and v == v  # noqa: E731
    band = f" (a point's band ±{pct(r['band'])}: the A/A points' scatter)" if known(r.get("band")) else ""
    how = ("taking turns server by server" if known(r.get("interleaved")) and r["interleaved"]
           else "one run after the other")
    given = json.loads(r["parameters"]) if isinstance(r.get("parameters"), str) and r["parameters"] else {}
    how += "".join(f", {name} {value}" for name, value in sorted(given.items()))
    what = (f"A/A (the same code twice, {how}): within noise{band}" if r["check"] == "aa"
            else f"held to {pct(r['cap'])} of its CPUs ({how}): flagged slower{band}")
    of = "points" if r["check"] == "aa" or not known(r.get("others")) else "points the hold slows"
    share = f"no {of} compared" if not r["points"] else f"{r['hits']} of {r['points']} {of} ({pct(r['share'])})"
    if r["points"] and known(r.get("in_rounds")) and r["in_rounds"]:
        share += f" ({int(r['in_rounds'])} of them judged by their ratio's interval over interleaved rounds)"
    rest = ""
    if r["check"] == "held" and known(r.get("others")) and r["others"]:
        rest = (f"; of the other {int(r['others'])} (their servers not busy enough to be held), "
                f"{int(r['others_within'])} within noise")
    ratio = (f" {r['run_ratio']:.2f}× (95 % interval {r['run_low']:.2f}–{r['run_high']:.2f}×)"
             if known(r.get("run_low")) else "")
    whole = (f"the run as a whole moved{ratio}: the machine's drift between two runs, the floor of a "
             f"run-wide verdict here" if r["check"] == "aa" else
             f"the run as a whole{ratio}: {r['run_verdict']}" + (
                 ", beyond the A/A drift" if r["run_verdict"] in ("faster", "slower") else
                 " (within the A/A drift or its points' scatter)" if r["run_verdict"] == "within noise" else ""))
    where = (f" on another machine ({r['machine']})"
             if machine_label is not None and r.get("machine") not in (None, machine_label) else "")
    return (f"notebook {r['notebook'][:2]} at {r['scale']}{where} · {METRIC_WORDS.get(r['metric'], r['metric'])} · "
            f"{what}: {share}, goal {pct(r['goal'])}{rest}; {whole}")
