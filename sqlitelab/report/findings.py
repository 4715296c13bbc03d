"""Findings: the sentences a notebook prints under its tables and figures, each written from
the numbers sqlitelab.report.analysis (and capacity) computed from measured points — never typed in.
Nothing here measures or combines points; a number a sentence needs comes from analysis.

    display(Markdown(findings.linear_writes(analysis.seed_table(df))))
"""
from __future__ import annotations

import math

import pandas as pd

from sqlitelab.report.analysis import (_measured, _variant_total, article_groups, buffer_variants, flagged,
                       limit_note, limited, machine_limits, peak)
from sqlitelab.infra import servers
from sqlitelab.load.verdicts import writer_batches
from sqlitelab.load.scenarios import SCENARIOS, scenario_title
from sqlitelab.report import claims
from sqlitelab.report.capacity import daily_active_users, headline, requests_per_day
from sqlitelab.report.compare import NONE_FINISHED
from sqlitelab.studies.registry import experiment_title
from sqlitelab.core.vocabulary import STALL_MS  # a request still running this long after the window has stalled

# A level in which no request finished: a stall longer than its window (a server that died fails
# its sweep instead, so every stored level had a live server). A measured fact, said in words.
STALLED = "no request finished in its window (a stall: the server was alive after it)"


def _finished(rps) -> bool:
    """Whether any request finished in the window: a rate above 0 (not 0, None or NaN)."""
    return rps is not None and rps == rps and rps > 0


def linear_writes(table: pd.DataFrame) -> str:
    """Markdown sentences about where throughput peaks and where errors begin."""
    lines = []
    for r in peak(table).itertuples():
        if not _finished(r.peak_rps):
            lines.append(f"- **{r.server}** ({r.profile}): at every level, up to {r.max_users} users, {STALLED}.")
            continue
        s = (f"- **{r.server}** ({r.profile}): throughput peaks at **{r.peak_rps:,.0f} writes/s** "
             f"with {r.peak_users} concurrent users")
        if r.peak_generator_bound:
            s += f" ({r.peak_limit}: a lower bound, the server may go higher)"
        if pd.notna(r.errors_from_users):
            s += (f"; errors or stalls (requests unfinished {STALL_MS / 1000:g} s after the window) "
                  f"begin at {int(r.errors_from_users)} users")
        else:
            s += "; no errors at any level"
        if r.max_users != r.peak_users:
            s += (f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s "
                  f"({r.drop_from_peak:.0%} below the peak)." if r.drop_from_peak and r.drop_from_peak > 0
                  else f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s.")
        else:
            s += "."
        lines.append(s)
    return "\n".join(lines)


def napkin(peak_rps: float, writes_per_user: float = 35, peak_hours: float = 4) -> str:
    """Seed 000's napkin math applied to a measured peak."""
    if not _finished(peak_rps):
        return f"No napkin math: {STALLED.replace('its window', 'any window')}, so there is no peak."
    per_day = requests_per_day(peak_rps, peak_hours)
    dau = daily_active_users(peak_rps, writes_per_user, peak_hours)
    return (f"At **{peak_rps:,.0f} writes/s**, with a day's writes packed into {peak_hours:g} peak "
            f"hours, this server absorbs **{per_day / 1e6:,.1f} million writes per day** — "
            f"**{dau:,.0f} daily active users** at {writes_per_user:g} writes each "
            f"(the article: ~2,500/s → 35 M/day → 1 M DAU).")


def _stall_note(g: pd.DataFrame) -> str:
    st = g[g["stalled_repeats"] > 0]
    if not len(st):
        return ""
    return (f"; **stalls** from {int(st['users'].min())} user(s): {int(st['stalled_repeats'].sum())} of "
            f"{int(g.loc[g['users'] >= st['users'].min(), 'repeats'].sum())} repeats had a request "
            f"finish up to {st['max_overrun_ms'].max() / 1000:.1f} s after the window or none finish in it")


def busy(summary: pd.DataFrame) -> str:
    lines = []
    for (server, profile), g in summary.groupby(["server", "profile"], sort=True):
        erring = g[g["busy_errors"] > 0]
        stalls = _stall_note(g)
        if len(erring):
            first = erring.iloc[0]
            worst = erring.loc[erring["busy_share"].idxmax()]
            lines.append(f"- **{server} · {profile}**: 'database is locked' from {int(first.users)} "
                         f"user(s); worst at {int(worst.users)} users, {worst.busy_share:.1%} of "
                         f"requests{stalls}.")
        else:
            lines.append(f"- **{server} · {profile}**: no busy errors in any window "
                         f"({int(g['requests'].sum()):,} requests){stalls}.")
    return "\n".join(lines)


def txn_mode(summary: pd.DataFrame) -> str:
    """Deferred vs immediate under the same busy policy: the cause of the errors — and, with
    a busy wait that blocks its worker, why immediate alone is not the cure."""
    lines = []
    if "txn_mode" not in summary:
        return ""
    for (server, profile), g in summary.groupby(["server", "profile"], sort=True):
        by = g.groupby("txn_mode").agg(busy=("busy_errors", "sum"), run_busy=("run_busy_errors", "sum"),
                                       rps=("rps", "mean"), stalled=("stalled_repeats", "sum"),
                                       repeats=("repeats", "sum"))
        if {"deferred", "immediate"} <= set(by.index):
            d, i = by.loc["deferred"], by.loc["immediate"]
            text = (f"- **{server} · {profile}**: {int(d.busy):,} busy errors with deferred transactions "
                    f"({d.rps:,.0f} req/s on average over the levels), {int(i.busy):,} with immediate "
                    f"({i.rps:,.0f} req/s)")
            if i.stalled:
                text += (f" — but immediate **stalled** in {int(i.stalled)} of {int(i.repeats)} repeats, "
                         f"and {int(i.run_busy - i.busy):,} busy errors came outside the windows (after "
                         f"the stall): the busy wait blocks its worker")
            lines.append(text + ".")
    return "\n".join(lines)


def stack_ratios(table: pd.DataFrame, base: str = "python-fastapi") -> str:
    """Each stack's peak as a multiple of `base`'s. A peak whose generator was the limit or set
    the pace is a lower bound: its ratio is written "≥" (the base's: "≤"; both: "?")."""
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    if base not in best.index or len(best) < 2:
        return ""
    b = best.loc[base]
    if not _finished(b["rps"]):
        return f"No ratio to {base}'s peak: at every level of {base}, {STALLED}."
    parts, none = [], [s for s, r in best.iterrows() if not _finished(r["rps"])]
    for s, r in best.iterrows():
        if s == base or s in none:
            continue
        sign = {(True, False): "≥ ", (False, True): "≤ ", (True, True): "? "}.get(
            (limited(r), limited(b)), "")
        parts.append(f"{s} {sign}{r['rps'] / b['rps']:.1f}×")
    text = "".join(parts)
    notes = [n for mark, n in (("≥", "≥: that stack's peak was generator-bound or -influenced, the server can do more"),
                               ("≤", f"≤: {base}'s peak was generator-bound or -influenced"),
                               ("?", "?: both were")) if mark in text]
    stalls = f" At every level of {', '.join(none)}, {STALLED}." if none else ""
    if not parts:
        return stalls.strip()
    return ", ".join(parts) + f" the peak of {base} ({b['rps']:,.0f} rps)" + \
        (f" ({'; '.join(notes)})." if notes else ".") + stalls


def write_path(paths: pd.DataFrame) -> str:
    """Group commit (`batch`) against the single writer and the connection pool, per stack, and
    how much it grouped: the writes per transaction the writer counted in the batch path's
    windows (mean and largest; verdicts.writer_batches)."""
    pv = paths.pivot_table(index="server", columns="write_path", values="rps")
    lines = []
    for s, r in pv.iterrows():
        if {"batch", "writer", "pool"} <= set(r.index) and r["writer"] > 0 and r["pool"] > 0:
            line = (f"- **{servers.stack_title(s)}**: group commit {r['batch'] / r['writer']:.1f}× the single "
                    f"writer, {r['batch'] / r['pool']:.1f}× the pool ({r['batch']:,.0f} vs "
                    f"{r['writer']:,.0f} vs {r['pool']:,.0f} req/s)")
            counted = writer_batches(paths[(paths["server"] == s) & (paths["write_path"] == "batch")])
            if counted["mean_batch"] is not None:
                line += (f"; its transactions held {counted['mean_batch']:.1f} writes on average, "
                         f"{counted['largest_batch']} at most, {counted['commits_per_s']:,.0f} commits/s")
            lines.append(line)
    return "\n".join(lines)


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
        if not _finished(r["peak_rps"]):
            lines.append(f"- {servers.stack_title(r['server'])}: at every level, {STALLED}.")
            continue
        ge = "≥ " if r.get("peak_generator_bound") else ""
        shares = ", ".join(f"{ge}{r['peak_rps'] / v:.0%} of {label.split(':')[0]}"
                           for label, v in limits.items())
        lines.append(f"- {servers.stack_title(r['server'])} {ge}{r['peak_rps']:,.0f}/s: {shares}.")
    return "\n".join(lines)


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
        shares = "; ".join(f"{ge}{b.rps / v:.0%} of {label} ({v:,.0f}/s)" for label, v in limits.items())
        lines.append(f"- **{scenario_title(scenario)}**: best {servers.stack_title(b.server)} "
                     f"{ge}{b.rps:,.0f}/s — {shares}.")
    if not lines:
        return "The machine's limits: none measured for this run (no ceiling stored, no calibration)."
    return ("**Against the machine's own limits** (each measured here without the rest of the stack):\n"
            + "\n".join(lines))


def single_machine(table: pd.DataFrame, raw: dict, yahoo_rps: float,
                            twitter_rps: float = 6000) -> str:
    """Seed 004's comparison: the best stack per endpoint against Twitter's and Yahoo's load."""
    lines = []
    for scenario, g in table.groupby("scenario", sort=False):
        b = g.loc[g["rps"].idxmax()]
        note = f" ({limit_note(b)}: the server can do more)" if limited(b) else ""
        lines.append(f"- **{scenario}**: best {b.server} at {b.rps:,.0f} req/s{note} — "
                     f"{b.rps / twitter_rps:.1f}× Twitter's {twitter_rps / 1000:g} K tweets/s, "
                     f"{b.rps / yahoo_rps:.1f}× Yahoo's {yahoo_rps:,.0f} req/s; "
                     f"{b.mbit_s:,.0f} Mbit/s, {b.server_rss_mb:,.0f} MB RSS.")
    lines.append(f"- The ceiling: raw SQLite on the server's core does {raw['reads_per_s']:,.0f} "
                 f"point reads/s and {raw['commits_per_s']:,.0f} one-row commits/s (no HTTP).")
    return "\n".join(lines)


def beyond(table: pd.DataFrame, profile: str | None, beyond_profile: str | None) -> str:
    """Seed 004's pool, beyond the article: per stack and endpoint (analysis.beyond_table), the
    article's pool beside the variant's — rates, failed shares and the ratio, no verdict."""
    if not beyond_profile or table is None or table.empty:
        return "No variant beyond the article was run (`beyond_profile` is None, or no stack takes it)."
    a, b = servers.profile_title(profile), servers.profile_title(beyond_profile)
    lines = [f"**Beyond the article**: each endpoint at its best level with *{a}* (the article's "
             f"pool) and with *{b}*:"]
    for r in table.to_dict("records"):
        def side(name, unit=""):
            if not _finished(r[f"rps ({name})"]):
                return STALLED
            return (f"{r[f'rps ({name})']:,.0f}{unit} ({r[f'error_pct ({name})']:.1f} % failed, p99 "
                    f"{r[f'p99_ms ({name})']:,.1f} ms)")
        ratio = (f"{r['rps ratio (beyond / article)']:.2f}× the article's pool's rate"
                 if _finished(r["rps (article)"]) and _finished(r["rps (beyond)"]) else "no ratio")
        lines.append(f"- **{r['scenario']}** on {r['server']}: {side('article', ' req/s')} "
                     f"against {side('beyond')}: {ratio}.")
    return "\n".join(lines)


def health(df: pd.DataFrame) -> str:
    """What every notebook must say under its findings: a failed audit, generator-bound points."""
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
    if len(df) and "replaced_generator" in df and df["replaced_generator"].notna().any():
        r = df[df["replaced_generator"].notna()]
        out.append(f"ℹ️ {len(r)} point(s) come from **{r['generator'].iloc[0]}**, measured again where "
                   f"{r['replaced_generator'].iloc[0]} was generator-bound or -influenced.")
    if len(df) and df["audit_ok"].all():
        out.append(f"✅ Audit ok at all {len(df)} points: rows written == acknowledged writes, "
                   "integrity_check ok.")
    return "\n\n".join(out)


def _article_groups(ref: pd.DataFrame) -> str | None:
    g = article_groups(ref)
    same = g[g["same work"]] if len(g) else g
    if same.empty:
        return None
    ratios = " and ".join(f"{x:,.0f}×" for x in same["10 rows took ×"])
    totals = " and ".join(f"{int(r):,}" for r in same["records"])
    return (f"- **The article's own tables rule out the batch size**: at {totals} records, 10 and 25 rows "
            f"per transaction run the very same work (every row in one group, one connection), yet its "
            f"10-row runs took {ratios} as long. Per group (a connection opened, written, closed), its "
            f"10-row runs took {g['ms per group at 10 rows'].min():,.0f}–{g['ms per group at 10 rows'].max():,.0f} ms "
            f"at every total, its 25-row runs {g['ms per group at 25 rows'].min():,.1f}–"
            f"{g['ms per group at 25 rows'].max():,.1f} ms: every connection of the 10-row runs was slow. "
            f"An inference, not a finding: something other than the rows per transaction was slow during "
            f"the 10-row runs — the machine or its storage then, or another host, file system or code "
            f"revision; the article does not say which.")


def buffer(bf: pd.DataFrame, ref: pd.DataFrame, slow: pd.DataFrame | None = None) -> str:
    """Sentences on seed 003's run: the author's method against the article, its 10-row
    result, the lab's writer, and what would not fit."""
    d = _measured(bf)
    lines = []
    pub = d[(d["method"] == "article") & (d["variant"] == "as_published")]
    if len(pub):
        g = pub.groupby(["rows_per_txn", "total"])["records_per_s"].median()
        (rpt, total), best = g.idxmax(), g.max()
        art = ref.dropna(subset=["records_per_s"])
        a = art.loc[art["records_per_s"].idxmax()]
        lines.append(f"- **The author's method** peaks at **{best:,.0f} records/s** here ({rpt} rows per "
                     f"transaction, {total:,} records); the article's peak was {a.records_per_s:,.0f} "
                     f"({int(a.rows_per_txn)} rows, {int(a.records):,} records): {best / a.records_per_s:.2f}×.")
        for total, gt in pub.groupby("total"):
            r = gt.groupby("rows_per_txn")["records_per_s"].median()
            if 10 in r and 25 in r:
                pa = art[(art["records"] == total)].set_index("rows_per_txn")["records_per_s"]
                said = (f"; the article: {pa[10] / pa[25]:.2f}" if 10 in pa and 25 in pa else "")
                lines.append(f"  - at {total:,} records, 10 rows per transaction run at "
                             f"{r[10] / r[25]:.2f}× the 25-row rate{said}.")
        big = pub[pub["total"] == pub["total"].max()]
        mem = big["peak_bytes_per_record"].max() if "peak_bytes_per_record" in big else None
        if mem and mem == mem:
            lines.append(f"- Holding every record first costs **{mem:,.0f} bytes of memory per record** "
                         f"at its peak ({int(big['total'].iloc[0]):,} records): "
                         f"{mem * 50e6 / 2**30:,.0f} GiB for 50 M records, "
                         f"{mem * 100e6 / 2**30:,.0f} GiB for 100 M.")
    tuned = d[d["method"] == "tuned"]
    if len(tuned):
        g = tuned.groupby(["synchronous", "rows_per_txn", "total"])["records_per_s"].median()
        (sync, rpt, total), best = g.idxmax(), g.max()
        big = tuned["total"].max()
        lines.append(f"- **The lab's writer** (one connection, records made as it goes) peaks at "
                     f"**{best:,.0f} records/s** (synchronous={sync}, {rpt} rows, {total:,} records) "
                     f"and reaches {big:,} records with a peak RSS of "
                     f"{tuned.loc[tuned['total'] == big, 'peak_rss_mib'].max():,.0f} MiB.")
    var = buffer_variants(bf)
    if len(var) and "10 rows / 25 rows" in var:
        vt = _variant_total(var)
        at = var[var["total"] == vt].sort_values("10 rows / 25 rows")
        back = [r["variant"] for _, r in at.iterrows() if claims.halves(r["10 rows / 25 rows"])]
        verdict = (f"Changes that bring the 10-row rate below {claims.COLLAPSE:.0%} of the 25-row rate: "
                   f"{', '.join(back)}" if back else
                   f"No single change brings the 10-row rate below {claims.COLLAPSE:.0%} of the 25-row "
                   f"rate: none brings back the article's collapse")
        lines.append(f"- One change at a time, the 10-row rate as a share of the 25-row rate at "
                     f"{int(vt):,} records (the article: ~0.05): " + "; ".join(
                         f"{r['variant']} {r['10 rows / 25 rows']:.2f}" for _, r in at.iterrows()) +
                     f". {verdict}.")
    said = _article_groups(ref)
    if said:
        lines.append(said)
    if slow is not None and len(slow):
        ms = slow["sync_delay_ms"].iloc[0]
        total = int(slow["total"].iloc[0])
        art = ref[ref["records"] == total].set_index("rows_per_txn")["seconds"]
        parts = []
        for _, r in slow.sort_values(["variant", "rows_per_txn"]).iterrows():
            versus = f" (article {art[r.rows_per_txn]:g} s)" if r.variant == "as_published" and \
                r.rows_per_txn in art and art[r.rows_per_txn] == art[r.rows_per_txn] else ""
            parts.append(f"{r.variant} at {r.rows_per_txn} rows {r.seconds:.2f} s{versus}")
        lines.append(f"- **On storage whose syncs take {ms:g} ms** (every fsync/fdatasync delayed), "
                     f"{total:,} records: " + "; ".join(parts) + ".")
    skipped = bf[bf["skipped"].notna()] if "skipped" in bf else bf.iloc[0:0]
    for (method, total), g in skipped.groupby(["method", "total"], sort=True):
        rows = ", ".join(str(int(x)) for x in sorted(g["rows_per_txn"].unique()))
        lines.append(f"- Not run: {method} at {int(total):,} records ({rows} rows per transaction) — "
                     f"{g['skipped'].iloc[0]}.")
    audit = d["audit_ok"].all() if "audit_ok" in d and len(d) else None
    if audit is not None:
        lines.append("✅ Every measured point's rows hold exactly its records." if audit
                     else "❌ **AUDIT FAILED**: some point's rows do not hold its records.")
    return "\n".join(lines)


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


def capacity(cap: pd.DataFrame, requests_per_user: float = 35,
             seconds_between_requests: float = 10) -> str:
    """One line per headline row: SLO capacity vs the peak and what it means in users."""
    h = headline(cap)
    if h.empty:
        return "No points: nothing to estimate yet (run notebooks 01–05 at this scale first)."
    lines = []
    for r in h.sort_values("slo_rps", ascending=False).itertuples():
        if not _finished(r.peak_rps):
            lines.append(f"- **{r.server} · {r.scenario}** ({r.profile}, {r.notebook}): at every level, "
                         f"{STALLED}: no capacity measured.")
            continue
        cut = 1 - r.slo_rps / r.peak_rps
        bound = f" ({r.slo_limit}: at least this)" if r.slo_lower_bound else ""
        lines.append(f"- **{r.server} · {r.scenario}** ({r.profile}, {r.notebook}): "
                     f"{r.slo_rps:,.0f} req/s within the SLO{bound} vs a peak of {r.peak_rps:,.0f} "
                     f"({cut:.0%} lower) → {r.slo_dau:,.0f} DAU at {requests_per_user:g} requests "
                     f"each, {r.slo_active_users:,.0f} active users at one request per "
                     f"{seconds_between_requests:g} s.")
    return "\n".join(lines)


def network(table: pd.DataFrame) -> str:
    """What the delayed links did to each level: throughput against the direct path, latency,
    and how close each came to Little's-law bound (analysis.network_table)."""
    lines = []
    for (server, users), g in table.groupby(["server", "users"], sort=True):
        base = g[g["link"] == "direct"]
        if base.empty:
            continue
        b = base.iloc[0]
        parts = []
        for r in g[g["link"] != "direct"].itertuples():
            if not _finished(r.rps):
                parts.append(f"{r.link}: {STALLED}")
                continue
            note = f", {limit_note(r._asdict())}" if limited(r._asdict()) else ""
            of_direct = f" ({r.rps / b.rps:.0%} of direct)" if _finished(b.rps) else ""
            bound = f", {r.of_bound:.0%} of the bound" if r.of_bound == r.of_bound else ", no bound (no direct service time)"
            parts.append(f"{r.link}: {r.rps:,.0f} req/s{of_direct}, mean {r.mean_ms:.2f} ms{bound}{note}")
        direct = f"direct {b.rps:,.0f} req/s, mean {b.mean_ms:.2f} ms" if _finished(b.rps) else f"direct: {STALLED}"
        lines.append(f"- **{server}, {users} users** — {direct}; " + "; ".join(parts) + ".")
    check = (table["little_rps"] / table["rps"]).dropna()
    if len(check):
        lines.append(f"- Little's law as a check of the measurement: users ÷ mean latency is "
                     f"within {(check - 1).abs().max():.1%} of the measured rate at every level.")
    return "\n".join(lines)


def versus(ratios: pd.DataFrame, table: pd.DataFrame) -> str:
    """Notebook 07: SQLite against Postgres per workload and stack (capacity.versus_ratios), where
    Postgres won, and what a link to a database on its own host cost (capacity.versus_table)."""
    if ratios.empty:
        return "- No workload ran on both databases."
    lines = []
    one = table.empty or table["levels"].max() == 1  # "best" of one level says more than it ran
    at = (f"at the one level measured ({', '.join(map(str, sorted(set(table['best_users']))))} users)"
          if one and not table.empty else "at each one's best level")
    stalled = ratios["stalled"].astype(bool) if "stalled" in ratios else pd.Series(False, index=ratios.index)
    for (workload, scenario), g in ratios.groupby(["workload", "scenario"], sort=True):
        parts = [f"{r.server} {r.sqlite_rps:,.0f} vs {r.postgres_rps:,.0f} req/s "
                 + (f"(×{r.rps_ratio:.2f}; p99 {r.sqlite_p99_ms:.1f} vs {r.postgres_p99_ms:.1f} ms"
                    if not stalled[i] else f"(no ratio: on {r.stalled}, {STALLED}")
                 + (f"; {r.limits}" if r.limits else "") + ")" for i, r in zip(g.index, g.itertuples())]
        lines.append(f"- **{workload} · {scenario}** — SQLite vs Postgres {at}: "
                     + "; ".join(parts) + ".")
    wins = ratios[(ratios["rps_ratio"] < 1) | ((ratios["sqlite_rps"] <= 0) & (ratios["postgres_rps"] > 0))]
    if len(wins):
        lines.append("- **Where Postgres served more**: " + "; ".join(
            f"{r.server} on {r.scenario} ("
            + (f"{1 / r.rps_ratio:.2f}× SQLite's rate" if _finished(r.sqlite_rps) else "SQLite finished no request")
            + ")" for r in wins.itertuples()) + ".")
    else:
        lines.append("- **Postgres served more nowhere**: SQLite's " + ("rate" if one else "best rate")
                     + " was higher for every workload and stack measured.")
    slo = ratios[ratios["postgres_slo_rps"] > ratios["sqlite_slo_rps"]]
    if len(slo):
        lines.append("- **Where Postgres had more capacity at the SLO** (p99 within it and no errors): " + "; ".join(
            f"{r.server} on {r.scenario} ({r.postgres_slo_rps:,.0f} vs {r.sqlite_slo_rps:,.0f} req/s"
            + (": SQLite's levels all had errors or a p99 over the SLO" if r.sqlite_slo_rps == 0 else "") + ")"
            for r in slo.itertuples()) + ".")
    faster = ratios[ratios["p99_ratio"] > 1]
    if len(faster):
        lines.append("- **Where Postgres answered with the lower p99** " + ("at that level" if one else "at the best levels") + ": " + "; ".join(
            f"{r.server} on {r.scenario} ({r.postgres_p99_ms:.1f} vs {r.sqlite_p99_ms:.1f} ms)"
            for r in faster.itertuples()) + ".")
    measured = ratios["rps_ratio"].dropna()
    unmeasured = (f" (no ratio for {int(stalled.sum())} pair(s): on one side no request finished in any window)"
                  if stalled.any() else "")
    lines.append(f"- Median SQLite/Postgres throughput ratio over every workload and stack: "
                 f"{measured.median():.2f} (range {measured.min():.2f}–{measured.max():.2f}){unmeasured}."
                 if len(measured) else f"- No SQLite/Postgres throughput ratio{unmeasured}.")
    linked = table[table["store"].str.contains("link", na=False)]
    for r in linked.itertuples():
        base = table[(table["workload"] == r.workload) & (table["scenario"] == r.scenario)
                     & (table["server"] == r.server) & (table["store"] == "postgres")]
        if len(base):
            b = base.iloc[0]
            lines.append(f"- {r.server}, {r.scenario} with Postgres on its own host ({r.store}): "
                         f"{r.best_rps:,.0f} req/s, {r.best_rps / b.best_rps:.0%} of Postgres over its "
                         f"socket; p99 {r.best_p99_ms:.1f} ms (was {b.best_p99_ms:.1f}).")
    bad = int((~ratios["audit_ok"]).sum())
    lines.append("- Audits: every acknowledged write was in its database, on both databases."
                 if bad == 0 else f"- **AUDIT FAILED** in {bad} workload/stack pair(s).")
    return "\n".join(lines)


def operations(three: pd.DataFrame, cost: pd.DataFrame) -> str:
    """Notebook 08: open-loop capacity against the closed-loop one and the naive peak
    (capacity.three_ways), then what each operation cost the users (analysis.cost_table), the
    one that hurt most named."""
    lines = []
    for r in three.itertuples():
        bound = " (kept up with every rate offered: a lower bound)" if r.open_lower_bound else ""
        knee = f", the first rate it fell behind {r.knee_rate:,.0f}/s" if pd.notna(r.knee_rate) else ""
        lines.append(f"- **{r.server}**: open-loop capacity {r.open_rps:,.0f} req/s{bound}{knee}; "
                     f"closed-loop capacity {r.slo_rps:,.0f} req/s ({r.slo_users} users); naive peak "
                     f"{r.peak_rps:,.0f} req/s at p99 {r.peak_p99_ms:,.1f} ms.")
    if three.empty:
        lines.append("- No stack has both open- and closed-loop points.")
    if cost.empty:
        lines.append("- No operation ran under load.")
        return "\n".join(lines)
    for r in cost.itertuples():
        cost_x = f" (×{r.p99_cost_x:.1f})" if pd.notna(r.p99_cost_x) else ""
        # no whole second before it (an operation started within the window's first second) or
        # none while it ran: said so, not a number
        before = (f"p99 {r.p99_before_ms:.1f} ms in the seconds before" if pd.notna(r.p99_before_ms)
                  else "no whole second before it to compare")
        during = (f"{r.worst_p99_during_ms:.1f} ms" if pd.notna(r.worst_p99_during_ms) else "not measured")
        lines.append(f"- {r.server} · **{r.operation}**: {r.op_seconds:.2f} s at {r.rate:,.0f} req/s offered; "
                     f"{before}, worst second while it ran "
                     f"{during}{cost_x}; {r.errors_during} errors and {r.late_during} "
                     f"late sends then; backlog at the close {r.backlog}; audit "
                     f"{'ok' if r.audit_ok else 'FAILED'}.")
    ranked = cost.dropna(subset=["p99_cost_x"]).sort_values("p99_cost_x", ascending=False)
    if len(ranked):
        w = ranked.iloc[0]
        lines.append(f"- **Hurt most**: {w.operation} on {w.server}, its worst second's p99 "
                     f"{w.worst_p99_during_ms:.1f} ms against {w.p99_before_ms:.1f} ms before "
                     f"(×{w.p99_cost_x:.1f}).")
    if not cost["audit_ok"].all():
        lines.append("- **AUDIT FAILED** for some operation: acknowledged writes are missing.")
    return "\n".join(lines)


def your_app(levels: pd.DataFrame, cap: pd.DataFrame, plain: pd.DataFrame, slo_p99_ms: float,
             requests_per_user: float, peak_hours: float, agreement,
             open_cap: pd.DataFrame | None = None) -> str:
    """Notebook 10: the app's peak and its capacity at the objective, what that is in daily active
    users by the articles' napkin math, where lock errors appeared, and how plain Locust's count of
    the same locustfile compares (`agreement`: experiments.your_app.agreement)."""
    lines = []
    for c in cap.itertuples():
        if not _finished(c.peak_rps):
            lines.append(f"- **{c.server}**: at every level, {STALLED}: no peak was measured.")
            continue
        note = f" ({c.peak_limit}: a lower bound)" if c.peak_lower_bound else ""
        lines.append(f"- **{c.server}**: the naive peak is **{c.peak_rps:,.0f} requests/s** at "
                     f"{c.peak_users} users (p99 {c.peak_p99_ms:,.1f} ms){note}.")
        if c.slo_rps > 0:
            dau = daily_active_users(c.slo_rps, requests_per_user, peak_hours)
            lines.append(f"- At a p99 of at most {slo_p99_ms:g} ms with no errors it serves "
                         f"**{c.slo_rps:,.0f} requests/s** ({c.slo_users} users): by the articles' "
                         f"napkin math ({requests_per_user:g} requests per user per day, the day's "
                         f"load in {peak_hours:g} peak hours) about **{dau:,.0f} daily active users**"
                         + (" (a lower bound: the generator set the pace)" if c.slo_lower_bound else "")
                         + ".")
        else:
            lines.append(f"- No level met a p99 of at most {slo_p99_ms:g} ms with no errors: no "
                         f"capacity at that objective was measured.")
    for o in (open_cap if open_cap is not None else pd.DataFrame()).itertuples():
        if o.open_rps > 0:
            lines.append(f"- Offered load (open loop, {o.users} users): it kept up with "
                         f"**{o.open_rps:,.0f} requests/s** (p99 {o.open_p99_ms:,.1f} ms from the due "
                         f"times)" + (f"; at {o.knee_rate:,.0f} requests/s it no longer did."
                                      if o.knee_rate is not None else
                                      ", the highest rate offered: a lower bound."))
        else:
            lines.append(f"- Offered load (open loop): it did not keep up with the lowest rate offered "
                         f"({o.knee_rate:,.0f} requests/s).")
    locked = levels[levels["busy_errors"] > 0]
    if len(locked):
        first = locked.sort_values("users").iloc[0]
        worst = locked.loc[locked["lock_share"].idxmax()]
        lines.append(f"- Lock errors reached users from {int(first['users'])} users on "
                     f"({int(first['busy_errors']):,} in that window); the most, "
                     f"{worst['lock_share']:.1%} of requests, at {int(worst['users'])} users.")
    elif len(levels):
        lines.append(f"- No response matched the lock rule at any of the {len(levels)} levels.")
    other = levels[levels["server_errors"] > 0]
    if len(other):
        lines.append(f"- Other server errors (5xx the lock rule did not match): "
                     f"{int(other['server_errors'].sum()):,} over {len(other)} level(s).")
    for r in plain.itertuples():
        lab = levels[levels["users"] == r.users]
        if lab.empty:
            continue
        lab_rps = float(lab["rps"].iloc[0])
        lines.append(f"- The same locustfile run by plain `locust --headless` at {r.users} users: "
                     f"{r.requests:,} requests, {r.rps:,.0f} requests/s by Locust's own count, "
                     f"against the lab's {lab_rps:,.0f} in its window: {agreement(lab_rps, r.rps)}.")
    return "\n".join(lines)


def comparison(c) -> str:
    """Notebook 11: what the comparison of two runs says (report.compare.Comparison): what they
    ran on, per metric how many points moved beyond the noise and the largest moves, and the
    points without a band."""
    lines = []
    diff = c.provenance[~c.provenance["same"]]
    if len(diff):
        lines.append("- The runs differ in " + ", ".join(diff["what"]) + ": a move may come from any of "
                     "them (an inference, not a measurement of which).")
    if c.table.empty:
        lines.append(f"- No point in common: run a has {len(c.only_a)}, run b {len(c.only_b)}; nothing "
                     "to compare (listed above).")
        return "\n".join(lines)
    for metric, words in (("rps", "throughput"), ("p99_ms", "p99 latency")):
        v = c.table[f"{metric}_verdict"]
        moved = c.table[v.isin(["faster", "slower"])]
        stalls = "; ".join(f"{int((v == word).sum())} where {STALLED.replace('its window', 'the window of run ' + s)}"
                           for s, word in NONE_FINISHED.items() if (v == word).any())
        lines.append(f"- {words.capitalize()}: {int((v == 'faster').sum())} of {len(v)} points faster, "
                     f"{int((v == 'slower').sum())} slower, {int((v == 'within noise').sum())} within "
                     f"noise, {int((v == 'no noise band').sum())} without a noise band"
                     + (f"; {stalls}" if stalls else "") + ".")
        if len(moved):
            far = moved.loc[(moved[f"{metric}_ratio"].apply(lambda r: abs(math.log(r)))).idxmax()]
            users = f"{far['users']} user{'' if str(far['users']) == '1' else 's'}"
            lines.append(f"  The largest move: {servers.stack_title(far['server'])}, {users}"
                         + (f" ({experiment_title(far['notebook'], far['experiment'])})" if far["experiment"] else "")
                         + f": {far[f'{metric}_ratio']:.2f}× (band ±{far[f'{metric}_band']:.0%}).")
    if (c.table["rps_verdict"] == "no noise band").any():
        lines.append("- Points without repeats have a band only from the machine's own measurement: "
                     "`python -m sqlitelab.compare --noise` stores one.")
    return "\n".join(lines)
