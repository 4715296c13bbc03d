"""Tables and findings computed from measured points (never typed in), and the articles'
published numbers as reference data with their source."""
from __future__ import annotations

import io
import json
import textwrap
from importlib import resources

import pandas as pd

from .load import STALL_MS  # a request still running this long after the window has stalled


def reference(name: str) -> tuple[pd.DataFrame, dict]:
    """A published table from sqlitelab/reference/<name>.csv and its `# key: value` header."""
    text = resources.files("sqlitelab").joinpath("reference", f"{name}.csv").read_text()
    meta = {}
    for line in text.splitlines():
        if line.startswith("#") and ":" in line:
            k, v = line[1:].split(":", 1)
            meta[k.strip()] = v.strip()
    return pd.read_csv(io.StringIO(text), comment="#"), meta


def pragma_column(df: pd.DataFrame, name: str) -> pd.Series:
    """Each point's pragma as its server read it back (from the `knobs` of /health);
    synchronous by name (full, normal…)."""
    from .methods import SYNCHRONOUS
    vals = [str((json.loads(k).get("pragmas") or {}).get(name, "")).lower() for k in df["knobs"]]
    return pd.Series([SYNCHRONOUS.get(v, v) if name == "synchronous" else v for v in vals],
                     index=df.index, name=name)


def flagged(df: pd.DataFrame, col: str) -> pd.Series:
    """A boolean column that may be missing, or hold None/NaN (points from before the flag)."""
    return df[col].fillna(False).astype(bool) if col in df else pd.Series(False, index=df.index)


def generator_cols(df: pd.DataFrame, keys: list[str]) -> dict:
    """Per group of points: whether the generator was the limit (`generator_bound`) or
    plausibly set the pace (`generator_influenced`) in any repeat, and which generator(s)
    measured it (`generator`: loadgen where sweep's `confirm` replaced Locust)."""
    g = df.assign(_bound=flagged(df, "generator_bound"), _infl=flagged(df, "generator_influenced"),
                  _gen=df["generator"].fillna("locust") if "generator" in df else "locust"
                  ).groupby(keys, sort=True)
    return {"generator_bound": g["_bound"].any(), "generator_influenced": g["_infl"].any(),
            "generator": g["_gen"].agg(lambda v: "+".join(sorted(set(v))))}


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


def seed_table(df: pd.DataFrame) -> pd.DataFrame:
    """The seeds' layout: per server, profile and users — RPS and average (mean over repeats),
    slowest (max over repeats), plus percentiles, errors and the generator flag."""
    g = df.groupby(["server", "profile", "users"], sort=True)
    out = pd.DataFrame({
        "rps": g["rps"].mean(),
        "rps_spread": g["rps"].max() - g["rps"].min(),
        "mean_ms": g["mean_ms"].mean(),
        "p50_ms": g["p50_ms"].mean(),
        "p99_ms": g["p99_ms"].mean(),
        "max_ms": g["max_ms"].max(),
        "errors": g["errors"].sum(),
        "busy_errors": g["busy_errors"].sum(),
        "repeats": g.size(),
        **generator_cols(df, ["server", "profile", "users"]),
        "audit_ok": g["audit_ok"].all(),
    })
    if "max_overrun_ms" in df:
        out["max_overrun_ms"] = g["max_overrun_ms"].max()
    return out.reset_index()


def hey_table(df: pd.DataFrame) -> pd.DataFrame:
    """The same runs counted as `hey -z` counts them (seed 000's tool): per server, profile and
    users, Requests/sec = every response of the run over the run's whole duration (until the
    last request in flight ended), Average and Slowest over every response — means over the
    repeats, slowest the max, as the article reports them — beside the window's rps."""
    g = df.groupby(["server", "profile", "users"], sort=True)
    return pd.DataFrame({
        "hey_rps": g["hey_rps"].mean(), "hey_mean_ms": g["hey_mean_ms"].mean(),
        "hey_max_ms": g["hey_max_ms"].max(), "hey_seconds": g["hey_seconds"].max(),
        "responses": g["hey_results"].sum(), "errors_in_runs": g["run_counts"].agg(
            lambda v: sum(run_status(x, lambda st: st >= 500 or st == 0) for x in v)),
        "window_rps": g["rps"].mean(), "repeats": g.size(),
        **generator_cols(df, ["server", "profile", "users"]),
    }).reset_index()


def against_article(ours: pd.DataFrame, ref: pd.DataFrame, on: str, columns: dict[str, str]) -> pd.DataFrame:
    """The article's rows beside ours, joined on `on`: `columns` maps each of the article's
    columns to ours (`{"rps": "hey_rps"}`), shown as `<col> (article)` and `<col> (here)`."""
    left = ref[[on, *columns]].rename(columns={c: f"{c} (article)" for c in columns})
    right = ours[[on, *columns.values()]].rename(columns={v: f"{k} (here)" for k, v in columns.items()})
    out = left.merge(right, on=on, how="left")
    return out[[on] + [f"{c} ({w})" for c in columns for w in ("article", "here")]]


def stalled(table: pd.DataFrame) -> pd.Series:
    """Levels where requests stalled past the window, or none completed in it at all."""
    over = table["max_overrun_ms"] if "max_overrun_ms" in table else 0
    return (table["rps"] <= 0) | (over >= STALL_MS)


def peak(table: pd.DataFrame) -> pd.DataFrame:
    """Per server/profile: the level of highest mean throughput, and where errors begin."""
    rows = []
    for (server, profile), g in table.groupby(["server", "profile"], sort=True):
        best = g.loc[g["rps"].idxmax()]
        erring = g[(g["errors"] > 0) | stalled(g)]
        last = g.loc[g["users"].idxmax()]
        rows.append({"server": server, "profile": profile, "peak_rps": best["rps"],
                     "peak_users": int(best["users"]),
                     "peak_generator_bound": bool(limited(best)),
                     "peak_limit": limit_note(best),
                     "errors_from_users": int(erring["users"].min()) if len(erring) else None,
                     "rps_at_max_users": last["rps"], "max_users": int(last["users"]),
                     "drop_from_peak": 1 - last["rps"] / best["rps"] if best["rps"] else None})
    return pd.DataFrame(rows)


def linear_writes_findings(table: pd.DataFrame) -> str:
    """Markdown sentences about where throughput peaks and where errors begin."""
    lines = []
    for r in peak(table).itertuples():
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
    from . import capacity
    per_day = capacity.requests_per_day(peak_rps, peak_hours)
    dau = capacity.daily_active_users(peak_rps, writes_per_user, peak_hours)
    return (f"At **{peak_rps:,.0f} writes/s**, with a day's writes packed into {peak_hours:g} peak "
            f"hours, this server absorbs **{per_day / 1e6:,.1f} million writes per day** — "
            f"**{dau:,.0f} daily active users** at {writes_per_user:g} writes each "
            f"(the article: ~2,500/s → 35 M/day → 1 M DAU).")


def napkin_table(table: pd.DataFrame, writes_per_user: float = 35, peak_hours: float = 4,
                 first: str = "ruby-puma") -> pd.DataFrame:
    """Seed 000's napkin math on each stack's peak (`first`, the article's stack, on top):
    writes/day with the day packed into `peak_hours`, and daily active users at
    `writes_per_user` writes each."""
    from . import capacity
    best = peak(table)
    best = best.assign(_order=best["server"] != first).sort_values(["_order", "peak_rps"],
                                                                   ascending=[True, False])
    return pd.DataFrame({
        "server": best["server"], "profile": best["profile"], "peak_rps": best["peak_rps"],
        "at_users": best["peak_users"], "lower_bound": best["peak_generator_bound"],
        "writes_per_day_M": [capacity.requests_per_day(r, peak_hours) / 1e6 for r in best["peak_rps"]],
        "dau": [capacity.daily_active_users(r, writes_per_user, peak_hours) for r in best["peak_rps"]],
    }).reset_index(drop=True)


def run_status(run_counts, keep) -> int:
    """Responses over a level's whole run (warm-up, window and overrun) whose status passes
    `keep` (0 for a transport error), from `run_counts`."""
    if not isinstance(run_counts, str) or not run_counts:
        return 0
    return sum(n for key, n in json.loads(run_counts).items() if keep(int(key.rsplit(" ", 1)[-1])))


def run_busy(run_counts) -> int:
    """Busy 503s over a level's whole run (warm-up, window and overrun), from `run_counts`."""
    return run_status(run_counts, lambda st: st == 503)


def busy_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per server, profile, transaction mode and users: requests, busy 503s and their share
    in the windows, busy 503s over the whole runs, and stalls (a repeat where no request
    completed in the window, or one finished ≥ STALL_MS after it)."""
    keys = [k for k in ("server", "profile", "txn_mode", "users") if k in df]
    d = df.assign(
        _run_busy=[run_busy(v) for v in df["run_counts"]] if "run_counts" in df else 0,
        _run_all=[run_status(v, lambda st: True) for v in df["run_counts"]] if "run_counts" in df else 0,
        _overrun=df["max_overrun_ms"].fillna(0) if "max_overrun_ms" in df else 0.0)
    d["_stalled"] = (d["requests"] <= 0) | (d["_overrun"] >= STALL_MS)
    g = d.groupby(keys, sort=True)
    out = pd.DataFrame({"requests": g["requests"].sum(), "busy_errors": g["busy_errors"].sum(),
                        "other_errors": g["errors"].sum() - g["busy_errors"].sum(),
                        "run_busy_errors": g["_run_busy"].sum(), "run_responses": g["_run_all"].sum(),
                        "rps": g["rps"].mean(),
                        "mean_ms": g["mean_ms"].mean() if "mean_ms" in d else float("nan"),
                        "p99_ms": g["p99_ms"].mean(),
                        "max_ms": g["max_ms"].max(), "repeats": g["requests"].size(),
                        "stalled_repeats": g["_stalled"].sum(), "max_overrun_ms": g["_overrun"].max(),
                        "audit_ok": g["audit_ok"].all()}).reset_index()
    out["busy_share"] = out["busy_errors"] / out["requests"].where(out["requests"] > 0)
    out["run_busy_share"] = out["run_busy_errors"] / out["run_responses"].where(out["run_responses"] > 0)
    return out


def article_runs(summary: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's runs beside the same set-ups here: per profile and users, the share of
    responses that were errors (the article's 500s, the lab's busy 503s) and req/s."""
    r = ref.assign(article_error_share=ref["status_500"] / (ref["status_200"] + ref["status_500"]))
    r = r[["setup", "profile", "users", "rps", "article_error_share"]].rename(
        columns={"rps": "article_rps"})
    here = summary[["profile", "users", "requests", "busy_errors", "busy_share", "run_responses",
                    "run_busy_errors", "run_busy_share", "rps", "mean_ms"]]
    return r.merge(here, on=["profile", "users"], how="left")


def article_run_bars(runs: pd.DataFrame) -> pd.DataFrame:
    """article_runs() in long form for a grouped bar chart: per set-up and users, the
    article's error share, ours in the window and ours over the whole run."""
    label = (runs["setup"].str.replace(" + ", " +\n", regex=False).str.replace(" (Rails 7.1)", "\n(Rails 7.1)", regex=False)
             + "\n" + runs["users"].astype(int).astype(str) + " user(s)")
    parts = [("article", runs["article_error_share"]), ("here: window", runs["busy_share"]),
             ("here: whole run", runs["run_busy_share"])]
    return pd.concat([pd.DataFrame({"set-up": label, "measured": name, "error share": v})
                      for name, v in parts], ignore_index=True)


def _stall_note(g: pd.DataFrame) -> str:
    st = g[g["stalled_repeats"] > 0]
    if not len(st):
        return ""
    return (f"; **stalls** from {int(st['users'].min())} user(s): {int(st['stalled_repeats'].sum())} of "
            f"{int(g.loc[g['users'] >= st['users'].min(), 'repeats'].sum())} repeats had a request "
            f"finish up to {st['max_overrun_ms'].max() / 1000:.1f} s after the window or none finish in it")


def busy_findings(summary: pd.DataFrame) -> str:
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


def txn_mode_findings(summary: pd.DataFrame) -> str:
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


def mix_table(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's layout: per stack, workers (users), rps, p50, p95, p99, errors."""
    g = df.groupby(["server", "users"], sort=True)
    return pd.DataFrame({"rps": g["rps"].mean(), "p50_ms": g["p50_ms"].mean(),
                         "p95_ms": g["p95_ms"].mean(), "p99_ms": g["p99_ms"].mean(),
                         "errors": g["errors"].sum(), **generator_cols(df, ["server", "users"]),
                         "audit_ok": g["audit_ok"].all()}).reset_index()


def active_users_table(table: pd.DataFrame, seconds_between_requests: float = 10) -> pd.DataFrame:
    from . import capacity
    best = table.loc[table.groupby("server")["rps"].idxmax()].copy()
    best["active_users"] = [capacity.active_users(r, seconds_between_requests) for r in best["rps"]]
    return best[["server", "users", "rps", "p99_ms", "active_users"]
                + [c for c in ("generator", "generator_bound", "generator_influenced") if c in best]]


def stack_ratios(table: pd.DataFrame, base: str = "python-fastapi") -> str:
    """Each stack's peak as a multiple of `base`'s. A peak whose generator was the limit or set
    the pace is a lower bound: its ratio is written "≥" (the base's: "≤"; both: "?")."""
    best = table.loc[table.groupby("server")["rps"].idxmax()].set_index("server")
    if base not in best.index or len(best) < 2:
        return ""
    b = best.loc[base]
    parts = []
    for s, r in best.iterrows():
        if s == base:
            continue
        sign = {(True, False): "≥ ", (False, True): "≤ ", (True, True): "? "}.get(
            (limited(r), limited(b)), "")
        parts.append(f"{s} {sign}{r['rps'] / b['rps']:.1f}×")
    text = "".join(parts)
    notes = [n for mark, n in (("≥", "≥: that stack's peak was generator-bound or -influenced, the server can do more"),
                               ("≤", f"≤: {base}'s peak was generator-bound or -influenced"),
                               ("?", "?: both were")) if mark in text]
    return ", ".join(parts) + f" the peak of {base} ({b['rps']:,.0f} rps)" + \
        (f" ({'; '.join(notes)})." if notes else ".")


def write_path_findings(paths: pd.DataFrame) -> str:
    """Group commit (`batch`) against the single writer and the connection pool, per stack."""
    pv = paths.pivot_table(index="server", columns="write_path", values="rps")
    lines = []
    for s, r in pv.iterrows():
        if {"batch", "writer", "pool"} <= set(r.index) and r["writer"] > 0 and r["pool"] > 0:
            lines.append(f"- **{s}**: group commit {r['batch'] / r['writer']:.1f}× the single writer, "
                         f"{r['batch'] / r['pool']:.1f}× the pool ({r['batch']:,.0f} vs "
                         f"{r['writer']:,.0f} vs {r['pool']:,.0f} req/s)")
    return "\n".join(lines)


def ceiling_findings(table: pd.DataFrame, raw: dict, what: str = "commits_per_s") -> str:
    """Each stack's peak as a share of raw SQLite on the server's core (no HTTP)."""
    limit = raw[what]
    shares = ", ".join(f"{r.server} {r.peak_rps / limit:.0%}" for r in peak(table).itertuples())
    return (f"The ceiling: raw SQLite on the server's core commits **{raw['commits_per_s']:,.0f} "
            f"one-row transactions/s** (WAL, synchronous=NORMAL, no HTTP). Peaks as a share of "
            f"it: {shares}.")


def single_machine_findings(table: pd.DataFrame, raw: dict, yahoo_rps: float,
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


def health_warnings(df: pd.DataFrame) -> str:
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


def single_machine_table(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's layout: per stack and endpoint, the best level's rps, RSS and Mbit/s."""
    g = df.groupby(["server", "scenario", "users"], sort=True)
    lv = pd.DataFrame({"rps": g["rps"].mean(), "server_rss_mb": g["server_rss_mb"].max(),
                       "mbit_s": g["bytes_per_s"].mean() * 8 / 1e6, "p99_ms": g["p99_ms"].mean(),
                       "errors": g["errors"].sum(), "server_cpu_pct": g["server_cpu_pct"].mean(),
                       **generator_cols(df, ["server", "scenario", "users"]),
                       "audit_ok": g["audit_ok"].all()}).reset_index()
    if "db_cached_before" in df:  # the share of the database file in the OS page cache
        lv = lv.merge(pd.DataFrame({"db_mib": g["db_mib"].max(),
                                    "cached_before": g["db_cached_before"].min(),
                                    "cached_after": g["db_cached_after"].min()}).reset_index(),
                      on=["server", "scenario", "users"])
    return lv.loc[lv.groupby(["server", "scenario"])["rps"].idxmax()].reset_index(drop=True)


def with_article(table: pd.DataFrame, ref: pd.DataFrame, name: str) -> pd.DataFrame:
    """single_machine_table() plus the article's numbers as one more `server` named `name`."""
    art = pd.DataFrame({"server": name, "scenario": ref["scenario"], "rps": ref["rps"],
                        "mbit_s": ref["mbit_s"], "server_rss_mb": ref["rss_mb"],
                        "generator_bound": False, "generator_influenced": False})
    return pd.concat([art, table], ignore_index=True)


# --------------------------------------------------------------------------- seed 003 (buffer)

def _measured(bf: pd.DataFrame) -> pd.DataFrame:
    ok = bf["skipped"].isna() if "skipped" in bf else pd.Series(True, index=bf.index)
    if "error" in bf:
        ok &= bf["error"].isna()
    return bf[ok]


def buffer_variants(bf: pd.DataFrame) -> pd.DataFrame:
    """The author's method, one change at a time: per variant, total and rows per transaction,
    the median records/s over repeats and the checkpoints closing connections ran; and each
    variant's 10-row rate as a share of its 25-row rate (the article: ~1/20)."""
    d = _measured(bf)
    d = d[d["method"] == "article"]
    if d.empty:
        return pd.DataFrame()
    g = d.groupby(["total", "variant", "rows_per_txn"])
    t = pd.DataFrame({"records_per_s": g["records_per_s"].median(),
                      "close_checkpoints": g["close_checkpoints"].median(),
                      "repeats": g.size()}).reset_index()
    wide = t.pivot_table(index=["total", "variant"], columns="rows_per_txn", values="records_per_s")
    wide.columns = [f"records/s at {c} rows" for c in wide.columns]
    if {"records/s at 10 rows", "records/s at 25 rows"} <= set(wide.columns):
        wide["10 rows / 25 rows"] = wide["records/s at 10 rows"] / wide["records/s at 25 rows"]
    ck = t.pivot_table(index=["total", "variant"], columns="rows_per_txn", values="close_checkpoints")
    ck.columns = [f"close checkpoints at {c} rows" for c in ck.columns]
    return wide.join(ck).reset_index()


def _variant_total(d: pd.DataFrame):
    """The total the variants ran at: the one with the most variants."""
    return d.groupby("total")["variant"].nunique().idxmax()


def buffer_variant_bars(bf: pd.DataFrame) -> pd.DataFrame:
    """Long form of buffer_variants at its largest total, for a grouped bar chart."""
    d = _measured(bf)
    d = d[d["method"] == "article"]
    if d.empty:
        return d
    d = d[d["total"] == _variant_total(d)]
    return (d.groupby(["variant", "rows_per_txn"])["records_per_s"].median().reset_index()
            .assign(rows_per_txn=lambda x: x["rows_per_txn"].astype(str) + " rows/txn",
                    variant=lambda x: x["variant"].map(lambda v: textwrap.fill(v.replace("_", " "), 10))))


def article_groups(ref: pd.DataFrame, records_per_row: int = 1000) -> pd.DataFrame:
    """Seed 003's published tables read per group (one connection opened, its rows written and
    committed, the connection closed): for each total, the groups at 10 and 25 rows per
    transaction, whether both run the very same work (every row fits in one 10-row group), the
    article's seconds (records / records_per_s: the printed seconds are rounded) and its
    milliseconds per group."""
    t = ref.dropna(subset=["records_per_s"]).copy()
    t["seconds"] = t["records"] / t["records_per_s"]
    t["rows"] = -(-t["records"] // records_per_row)
    t["groups"] = -(-t["rows"] // t["rows_per_txn"])
    t["ms_per_group"] = 1000 * t["seconds"] / t["groups"]
    w = t[t["rows_per_txn"].isin([10, 25])].pivot_table(
        index=["records", "rows"], columns="rows_per_txn", values=["groups", "seconds", "ms_per_group"])
    if ("seconds", 10) not in w or ("seconds", 25) not in w:
        return pd.DataFrame()
    out = pd.DataFrame({"groups at 10 rows": w[("groups", 10)], "groups at 25 rows": w[("groups", 25)],
                        "seconds at 10 rows": w[("seconds", 10)], "seconds at 25 rows": w[("seconds", 25)],
                        "ms per group at 10 rows": w[("ms_per_group", 10)],
                        "ms per group at 25 rows": w[("ms_per_group", 25)]}).dropna().reset_index()
    out["same work"] = out["rows"] <= 10   # one group holding every row, at either batch size
    out["10 rows took ×"] = out["seconds at 10 rows"] / out["seconds at 25 rows"]
    return out


def _article_groups_finding(ref: pd.DataFrame) -> str | None:
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
            f"{g['ms per group at 25 rows'].max():,.1f} ms: every connection of the 10-row runs was slow — "
            f"the machine or its storage while they ran, not the rows per transaction.")


def buffer_findings(bf: pd.DataFrame, ref: pd.DataFrame, slow: pd.DataFrame | None = None) -> str:
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
        lines.append(f"- One change at a time, the 10-row rate as a share of the 25-row rate at "
                     f"{int(vt):,} records (the article: ~0.05): " + "; ".join(
                         f"{r['variant']} {r['10 rows / 25 rows']:.2f}" for _, r in at.iterrows()) +
                     ". No single change brings back the article's collapse.")
    said = _article_groups_finding(ref)
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


# --------------------------------------------------------------------------- the generator

def crosscheck_table(run_id: str, path=None) -> pd.DataFrame:
    """The wrk cross-checks of a run (sweep's `crosscheck`) beside every generator that measured
    the same server, profile and level in the same sweep: rps and p99 (means over repeats),
    their ratio to wrk's, the generators' CPU, and the lab's flags. A scenario wrk cannot
    send is listed with the reason."""
    from . import results
    checks = results.load_table("crosschecks", run_id, path)
    if checks.empty:
        return pd.DataFrame()
    pts = results.load_points(path, run_id=run_id, headline_only=False)
    rows = []
    for c in checks.to_dict("records"):
        base = {"experiment": c["run_id"].partition("/")[2] or None, "server": c["server"],
                "profile": c["profile"], "scenario": c["scenario"], "users": c["users"]}
        if c.get("skipped"):
            rows.append({**base, "generator": "wrk", "note": f"skipped: {c['skipped']}"})
            continue
        rows.append({**base, "generator": "wrk", "rps": c["rps"], "p99_ms": c["p99_ms"],
                     "rps_vs_wrk": 1.0, "p99_vs_wrk": 1.0, "gen_cpu_pct": c["gen_cpu_pct"],
                     "server_cpu_pct": c["server_cpu_pct"],
                     "note": f"audit {'ok' if c['audit_ok'] else 'FAILED'} ({c['audit_rule']})"})
        at = pts[(pts["run_id"] == c["run_id"]) & (pts["server"] == c["server"])
                 & (pts["profile"] == c["profile"]) & (pts["users"] == c["users"])]
        for gen, g in at.groupby("generator", sort=True):
            flags = [n for n, col in (("bound", "generator_bound"), ("influenced", "generator_influenced"))
                     if flagged(g, col).any()]
            head = g["headline"].fillna(True).astype(bool).all() if "headline" in g else True
            rows.append({**base, "generator": gen, "rps": g["rps"].mean(), "p99_ms": g["p99_ms"].mean(),
                         "rps_vs_wrk": g["rps"].mean() / c["rps"] if c["rps"] else None,
                         "p99_vs_wrk": g["p99_ms"].mean() / c["p99_ms"] if c["p99_ms"] else None,
                         "gen_cpu_pct": g["gen_cpu_pct"].mean(), "server_cpu_pct": g["server_cpu_pct"].mean(),
                         "note": ", ".join(flags + ([] if head else ["replaced"])) or "headline"})
        if at.empty:
            rows[-1]["note"] += "; the sweep has no point at this level"
    return pd.DataFrame(rows)


def generator_findings(df: pd.DataFrame) -> str:
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
