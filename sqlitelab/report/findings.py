"""Findings that two or more notebooks print under their tables and figures, each written from
the numbers sqlitelab.report.analysis computed from measured points — never typed in: a ceiling
against the machine's own limits, the health of a run, what its generators did. A notebook's own
sentences are in its module (sqlitelab.notebooks). Nothing here measures or combines points.

    display(Markdown(findings.health(df)))
"""
from __future__ import annotations


import pandas as pd

from sqlitelab.core import probe
from sqlitelab.core.vocabulary import NOT_AUDITED
from sqlitelab.infra import servers
from sqlitelab.load.scenarios import SCENARIOS, scenario_title
from sqlitelab.report.analysis import flagged, limited, machine_limits

# A level in which no request finished: a stall longer than its window (a server that died fails
# its sweep instead, so every stored level had a live server). A measured fact, said in words.
STALLED = "no request finished in its window (a stall: the server was alive after it)"


def ms(value, places: int = 1) -> str:
    """A latency in words: "3.5 ms", or "not measured" where the point has none (NaN: its
    percentiles were not recorded)."""
    return f"{value:,.{places}f} ms" if value is not None and value == value else "not measured"


def finished(rps) -> bool:
    """Whether any request finished in the window: a rate above 0 (not 0, None or NaN)."""
    return rps is not None and rps == rps and rps > 0


def ceiling(peaks: pd.DataFrame, limits: dict[str, float], what: str = "peak") -> str:
    """Each stack's `what` (peaks' `peak_rps`, a row per `server`) as a share of each of the
    machine's limits (analysis.machine_limits: SQLite alone, HTTP alone, measured here without
    the rest of the stack). A generator-limited peak is a lower bound: its share reads "≥"."""
    if not limits:
        return "The machine's limits: none measured for this run (no ceiling stored, no calibration)."
    named = "; ".join(f"{label} **{v:,.0f}/s**" for label, v in limits.items())
    lines = [f"The machine's own limits, each measured here without the rest of the stack: {named}. "
             f"Each stack's {what} as a share of them:"]
    for r in peaks.to_dict("records"):
        if r.get("peak_rps") is None or r["peak_rps"] != r["peak_rps"]:
            continue
        if not finished(r["peak_rps"]):
            lines.append(f"- {servers.stack_title(r['server'])}: at every level, {STALLED}.")
            continue
        ge = "≥ " if r.get("peak_generator_bound") else ""
        shares = ", ".join(_share_of_limit(r["peak_rps"], v, label.split(":")[0], ge)
                           for label, v in limits.items())
        lines.append(f"- {servers.stack_title(r['server'])} {ge}{r['peak_rps']:,.0f}/s: {shares}.")
    return "\n".join(lines)


def _share_of_limit(rate: float, limit: float, label: str, ge: str = "") -> str:
    """`rate` as a share of one of the machine's limits, named `label`; a rate above the limit
    says that it is no bound on that rate, without guessing why: the limit was measured once, at
    another moment of a machine whose speed moves (HTTP alone at the generator's calibration,
    SQLite alone before the sweep), or it counts something else (one-row commits, where group
    commit writes many rows in one)."""
    share = rate / limit
    words = f"{ge}{share:.0%} of {label}" if share >= 0.01 else f"{ge}{share:.1%} of {label}"  # never "0%" of a rate
    if rate > limit:
        words += " (above it: no bound on this rate)"
    return words


# A scenario's family (scenarios.toml) → the machine's limit its requests meet first
FAMILY_LIMIT = {"no-database": "http", "reads": "reads", "writes": "writes", "mix": "http"}


def endpoint_ceilings(best: pd.DataFrame, raw: dict | None, http: tuple[float, str] | None,
                      synchronous: dict) -> str:
    """Per endpoint (`best`: a row per scenario and stack with its best `rps`), the best stack's
    rate as a share of the machine's limit its family meets (FAMILY_LIMIT: HTTP alone for no
    database and mixes, SQLite alone's point reads, or its one-row commits at the scenario's
    `synchronous`, analysis.synchronous_of) and of HTTP alone; "≥" where the generator was the
    limit. A writes endpoint without one synchronous setting is compared with HTTP alone only."""
    lines = []
    for scenario, g in best.groupby("scenario", sort=False):
        b = g.loc[g["rps"].idxmax()]
        kind = FAMILY_LIMIT[SCENARIOS[scenario].family] if scenario in SCENARIOS else "http"
        if kind == "writes" and scenario not in synchronous:
            kind = "http"
        limits = machine_limits(raw, kind, synchronous.get(scenario, "normal"), http)
        if not limits:
            continue
        ge = "≥ " if limited(b) else ""
        shares = "; ".join(_share_of_limit(b.rps, v, f"{label} ({v:,.0f}/s)", ge) for label, v in limits.items())
        lines.append(f"- **{scenario_title(scenario)}**: best {servers.stack_title(b.server)} "
                     f"{ge}{b.rps:,.0f}/s — {shares}.")
    if not lines:
        return "The machine's limits: none measured for this run (no ceiling stored, no calibration)."
    return ("**Against the machine's own limits** (each measured here without the rest of the stack):\n"
            + "\n".join(lines))


def health(df: pd.DataFrame) -> str:
    """What every notebook must say under its findings: a failed audit, generator-bound points,
    points where a request outlasted the window, points whose core probed slow (sqlitelab.core.probe)."""
    out = []
    if len(df) and not df["audit_ok"].all():
        out.append("❌ **AUDIT FAILED**: rows written differ from acknowledged writes, or "
                   "integrity_check failed.")
    if len(df) and df["generator_bound"].any():
        out.append(f"⚠️ {int(df['generator_bound'].sum())} point(s) were **generator-bound**: "
                   "there the load generator, not the server, was the limit.")
    inf = df[flagged(df, "generator_influenced")] if len(df) else df
    if len(inf):
        out.append(f"⚠️ {len(inf)} point(s) were **generator-influenced**: the generator, not the "
                   f"server, plausibly set the pace ({inf['influence'].iloc[0]}, …): their throughput "
                   "is a lower bound, their latency an upper bound.")
    long = df[flagged(df, "outlasted")] if len(df) else df
    if len(long):
        out.append(f"⚠️ At {len(long)} of {len(df)} point(s) a request **outlasted the window** (took the "
                   f"whole window or longer: a stall or a queue longer than the window, e.g. "
                   f"{servers.stack_title(long['server'].iloc[0])} at {int(long['users'].iloc[0])} users): "
                   "their rate is what got through it, not a throughput; measured again it can be 0 or "
                   "thousands.")
    slowed = df[flagged(df, "core_slowed")] if len(df) else df
    if len(slowed):
        out.append(f"ℹ️ {len(slowed)} of {len(df)} point(s) met a **slow core**: its speed probe, just "
                   f"before or after the window, ran up to {slowed['core_slowdown'].max():.1f}× the "
                   f"run's fastest (over {probe.SLOWED:g}×): there the machine, not the server, may "
                   "have set the pace.")
    if len(df) and "replaced_generator" in df and df["replaced_generator"].notna().any():
        r = df[df["replaced_generator"].notna()]
        out.append(f"ℹ️ {len(r)} point(s) come from **{r['generator'].iloc[0]}**, measured again where "
                   f"{r['replaced_generator'].iloc[0]} was generator-bound or -influenced.")
    if len(df) and df["audit_ok"].all():
        checked = audited(df)
        out.append(f"Audit ok at all {len(df)} points: rows written == acknowledged writes, "
                   "integrity_check ok." if checked.all() else
                   f"Nothing was audited at any of the {len(df)} points: no writes were counted and no "
                   "database was checked." if not checked.any() else
                   f"Audit ok at the {int(checked.sum())} of {len(df)} points audited: rows written == "
                   "acknowledged writes, integrity_check ok; the other points audited nothing.")
    return "\n\n".join(out)


def audited(df: pd.DataFrame) -> pd.Series:
    """Which points an audit checked something at: writes counted (an audit rule other than
    NOT_AUDITED) or the database's integrity checked; points that record neither column (tables
    made before them) as audited, as their audit_ok says."""
    if "audit_rule" not in df and "integrity" not in df:
        return pd.Series(True, index=df.index)
    rule = df["audit_rule"] if "audit_rule" in df else pd.Series(NOT_AUDITED, index=df.index)
    integrity = df["integrity"] if "integrity" in df else pd.Series(None, index=df.index, dtype=object)
    return (rule.fillna(NOT_AUDITED) != NOT_AUDITED) | integrity.notna()


def generators(df: pd.DataFrame) -> str:
    """What the generators did in these points: each one's calibration onset, how many points
    it was the limit of or set the pace of, and which levels another generator re-measured."""
    if df.empty or "generator" not in df:
        return ""
    lines = []
    for gen, g in df.groupby("generator", sort=True):
        onset = g["gen_onset_util"].dropna() if "gen_onset_util" in g else pd.Series(dtype=float)
        cal = (f"its calibration drifts from wrk from {onset.iloc[0]:.0%} of its CPU" if len(onset)
               else "no drift from wrk in its calibration" if "gen_onset_util" in g else "not calibrated")
        bound = int(g["generator_bound"].sum())
        infl = int(flagged(g, "generator_influenced").sum())
        text = (f"- **{gen}**: {len(g)} headline point(s), its CPU up to {g['gen_cpu_pct'].max():.0f} % "
                f"of its core(s); {cal}; generator-bound at {bound}, generator-influenced at {infl}")
        if "replaced_generator" in g and g["replaced_generator"].notna().any():
            r = g[g["replaced_generator"].notna()]
            levels = ", ".join(f"{s} {u}" for s, u in sorted({(s, int(u)) for s, u in zip(r["server"], r["users"])}))
            text += (f"; {len(r)} of them re-measure levels where {r['replaced_generator'].iloc[0]} was "
                     f"bound or influenced ({levels})")
        lines.append(text + ".")
    return "\n".join(lines)


