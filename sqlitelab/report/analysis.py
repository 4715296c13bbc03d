"""Tables computed from measured points (never typed in) — numbers only; the sentences written
from them are in sqlitelab.report.findings — and the articles' published numbers as reference data
with their source."""
from __future__ import annotations

import io
import json
import textwrap
from importlib import resources

import pandas as pd

from sqlitelab.core import results
from sqlitelab.infra.servers import stack_title
from sqlitelab.core.vocabulary import COUNTED_AS, METHOD_TITLES, TUNED_VARIANT, VARIANT_TITLES
from sqlitelab.core.vocabulary import STALL_MS, SYNCHRONOUS, link_label  # STALL_MS: a request still running this long after the window has stalled


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
    "rps": "mean", "mean_ms": "mean", "p50_ms": "mean", "p90_ms": "mean", "p95_ms": "mean",
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
    flags (generator_cols) and `audit_ok` (every repeat audited ok) where the points have it."""
    keys = list(keys)
    g = df.groupby(keys, sort=True)
    out = {}
    for name in columns:
        src, rule = name, how.get(name, OVER_REPEATS.get(name))
        if isinstance(rule, tuple):
            src, rule = rule[0], (rule[1] if rule[1] is not None else OVER_REPEATS.get(rule[0]))
        if rule is None:
            raise ValueError(f"no rule for combining {name!r} over repeats (OVER_REPEATS or how=)")
        out[name] = g[src].agg(rule)
    out["repeats"] = g.size()
    out.update(generator_cols(df, keys))
    if "audit_ok" in df:
        out["audit_ok"] = g["audit_ok"].all()
    return pd.DataFrame(out).reset_index()


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
    cols = ["rps", "rps_spread", "mean_ms", "p50_ms", "p99_ms", "max_ms", "errors", "busy_errors"]
    return over_repeats(df, ["server", "profile", "users"],
                        cols + (["max_overrun_ms"] if "max_overrun_ms" in df else []),
                        rps_spread=("rps", lambda v: v.max() - v.min()))


def hey_table(df: pd.DataFrame) -> pd.DataFrame:
    """The same runs counted as `hey -z` counts them (seed 000's tool): per server, profile and
    users, Requests/sec = every response of the run over the run's whole duration (until the
    last request in flight ended), Average and Slowest over every response — means over the
    repeats, slowest the max, as the article reports them — beside the window's rps."""
    return over_repeats(
        df, ["server", "profile", "users"],
        ["hey_rps", "hey_mean_ms", "hey_max_ms", "hey_seconds", "responses", "errors_in_runs",
         "window_rps"],
        responses=("hey_results", None), window_rps=("rps", None),
        errors_in_runs=("run_counts", lambda v: sum(run_status(x, lambda st: st >= 500 or st == 0)
                                                    for x in v)))


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
    overrun = df["max_overrun_ms"].fillna(0) if "max_overrun_ms" in df else 0.0
    d = df.assign(
        _run_busy=[run_busy(v) for v in df["run_counts"]] if "run_counts" in df else 0,
        _run_all=[run_status(v, lambda st: True) for v in df["run_counts"]] if "run_counts" in df else 0,
        _overrun=overrun, _stalled=(df["requests"] <= 0) | (overrun >= STALL_MS),
        **({} if "mean_ms" in df else {"mean_ms": float("nan")}))
    out = over_repeats(d, keys, ["requests", "busy_errors", "errors", "run_busy_errors",
                                 "run_responses", "rps", "mean_ms", "p99_ms", "max_ms",
                                 "stalled_repeats", "max_overrun_ms"],
                       run_busy_errors=("_run_busy", "sum"), run_responses=("_run_all", "sum"),
                       stalled_repeats=("_stalled", "sum"), max_overrun_ms=("_overrun", "max"))
    out.insert(list(out.columns).index("errors"), "other_errors", out["errors"] - out["busy_errors"])
    out = out.drop(columns="errors")
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
    label = [f"{setup}, {int(u)} user{'' if int(u) == 1 else 's'}" for setup, u in zip(runs["setup"], runs["users"])]
    parts = [("article", runs["article_error_share"]), ("here, measured interval only", runs["busy_share"]),
             ("here, every request of the run", runs["run_busy_share"])]
    return pd.concat([pd.DataFrame({"set-up": label, "measured": name, "error share": v})
                      for name, v in parts], ignore_index=True)


def mix_table(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 002's layout: per stack, workers (users), rps, p50, p95, p99, errors."""
    return over_repeats(df, ["server", "users"], ["rps", "p50_ms", "p95_ms", "p99_ms", "errors"])


def single_machine_table(df: pd.DataFrame, profile: str | None = None) -> pd.DataFrame:
    """Seed 004's layout: per stack, profile and endpoint, the best level's rps, RSS, Mbit/s
    and the share of its requests that failed; `profile`: that profile's points only."""
    if profile is not None:
        df = df[df["profile"] == profile]
    cached = (["db_mib", "cached_before", "cached_after"] if "db_cached_before" in df else [])
    lv = over_repeats(df, ["server", "profile", "scenario", "users"],
                      ["rps", "server_rss_mb", "mbit_s", "p99_ms", "requests", "errors",
                       "server_cpu_pct", *cached],
                      mbit_s=("bytes_per_s", lambda v: v.mean() * 8 / 1e6),
                      # the share of the database file in the OS page cache
                      cached_before=("db_cached_before", None), cached_after=("db_cached_after", None))
    lv["error_pct"] = 100 * lv["errors"] / lv["requests"]   # both summed over the repeats
    return lv.loc[lv.groupby(["server", "profile", "scenario"])["rps"].idxmax()].reset_index(drop=True)


def beyond_table(df: pd.DataFrame, profile: str, beyond: str | None) -> pd.DataFrame:
    """Per stack that ran both, and endpoint: the best level's rate, p99 and failed share under
    the article's `profile` beside the same under `beyond` (a variant beyond the article), and
    the ratio of the two rates; empty without a `beyond`."""
    if beyond is None:
        return pd.DataFrame()
    t = single_machine_table(df[df["profile"].isin([profile, beyond])])
    both = t.groupby(["server", "scenario"])["profile"].transform("nunique") == 2
    t = t[both]
    if t.empty:
        return pd.DataFrame()
    wide = t.pivot_table(index=["server", "scenario"], columns="profile",
                         values=["users", "rps", "p99_ms", "error_pct"], sort=False)
    out = pd.DataFrame(index=wide.index)
    for name, prof in (("article", profile), ("beyond", beyond)):
        for col in ("users", "rps", "p99_ms", "error_pct"):
            out[f"{col} ({name})"] = wide[(col, prof)]
    out["rps ratio (beyond / article)"] = out["rps (beyond)"] / out["rps (article)"]
    return out.reset_index()


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
            .assign(variant=lambda x: x["variant"].map(
                        lambda v: textwrap.fill(VARIANT_TITLES.get(v, v.replace("_", " ")), 12))))


def buffer_curves(done: pd.DataFrame, ref: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The measured buffer points drawn as curves (the author's method as published and the lab's
    tuned writer) with `series` (the method and its synchronous, in plain words) and `rows` (one
    panel per rows per transaction); the article's numbers (`ref`) with the same `rows`."""
    def rows(d):
        return d["rows_per_txn"].astype(int).astype(str) + " rows per transaction"
    curves = done[done["variant"].isin(["as_published", TUNED_VARIANT])]
    curves = curves.assign(series=curves["method"].map(lambda m: METHOD_TITLES.get(m, m))
                           + ", synchronous=" + curves["synchronous"].astype(str).str.upper(), rows=rows(curves))
    return curves, (ref.assign(rows=rows(ref)) if ref is not None else None)


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


# --------------------------------------------------------------------------- the generator

def crosscheck_table(run_id: str, path=None) -> pd.DataFrame:
    """The cross-checks of a run (sweep's `crosscheck`: wrk, or an article's own tool, hey or
    oha) beside every generator that measured the same server, profile and level in the same
    sweep: rps, p99 and the share of failed requests (means over repeats), their ratio to the
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
                         "rps_vs_ref": rate / c["rps"] if c["rps"] else None,
                         "p99_vs_ref": g["p99_ms"].mean() / c["p99_ms"] if c["p99_ms"] else None,
                         "gen_cpu_pct": g["gen_cpu_pct"].mean(), "server_cpu_pct": g["server_cpu_pct"].mean(),
                         "note": ", ".join(flags + ([] if head else ["replaced"])) or "headline"})
        if at.empty:
            rows[-1]["note"] += "; the sweep has no point at this level"
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- network delay

def network_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per stack, path (direct or a link of n µs each way) and users: throughput and latency
    over repeats, and Little's law two ways. In a closed loop without think time, users = rps ×
    response time, so `little_rps` = users / mean latency checks the measurement against itself.
    `bound_rps` is the asymptotic bound the link should allow: users / (S + added round trip),
    capped by the stack's best direct rate, where S is the direct mean latency at the fewest
    users (the service time with no queue) and the added round trip is 2 × (delay + the link's
    measured lateness). `of_bound` = rps / bound_rps."""
    d = df.assign(link=df["link_delay_us"].map(link_label) if "link_delay_us" in df else "direct",
                  delay_us=df["link_delay_us"].fillna(0) if "link_delay_us" in df else 0.0,
                  late_us=df["link_late_mean_us"].fillna(0) if "link_late_mean_us" in df else 0.0)
    t = over_repeats(d, ["server", "link", "users"],
                     ["rps", "mean_ms", "p50_ms", "p99_ms", "errors", "gen_cpu_pct",
                      "server_cpu_pct", "delay_us", "late_us"],
                     delay_us=("delay_us", "first"), late_us=("late_us", "mean"))
    direct = t[t["link"] == "direct"]
    service = direct.loc[direct.groupby("server")["users"].idxmin()].set_index("server")["mean_ms"]
    best = direct.groupby("server")["rps"].max()
    t["little_rps"] = t["users"] / (t["mean_ms"] / 1000)
    t["added_rtt_ms"] = 2 * (t["delay_us"] + t["late_us"]) / 1000
    t["service_ms"] = t["server"].map(service)
    t["bound_rps"] = (t["users"] / ((t["service_ms"] + t["added_rtt_ms"]) / 1000)).clip(upper=t["server"].map(best))
    t["of_bound"] = t["rps"] / t["bound_rps"]
    t["_o"] = t["delay_us"].where(t["link"] != "direct", -1)  # direct first, then by delay
    return t.sort_values(["server", "_o", "users"]).drop(columns="_o").reset_index(drop=True)


def timeline(run_id: str, path=None) -> pd.DataFrame:
    """The `seconds` rows of a notebook run's operation sweeps, with the second relative to the
    operation's start (`since_op_s`) and the WAL in MiB."""
    sec = results.load_table("seconds", run_id, path)
    if sec.empty:
        return sec
    sec = sec[sec["operation"].notna()].copy()
    sec["since_op_s"] = sec["second"] - sec["operation_started_s"]
    sec["wal_mib"] = sec["wal_bytes"] / 2**20
    return sec.sort_values(["server", "operation", "second"]).reset_index(drop=True)


def cost_table(points: pd.DataFrame, seconds: pd.DataFrame) -> pd.DataFrame:
    """Per stack and operation: how long it took, and the users' p99 in the seconds before it
    against the worst second while it ran (and the second after), errors, late sends and the
    backlog while it ran, the WAL's peak, and the audit."""
    rows = []
    if points.empty or "operation" not in points or seconds.empty:
        return pd.DataFrame(rows)
    for p in points[points["operation"].notna()].itertuples():
        s = seconds[(seconds["run_id"] == p.run_id) & (seconds["server"] == p.server)
                    & (seconds["operation"] == p.operation)]
        start, length = p.operation_started_s, p.operation_seconds or 0.0
        before = s[s["second"] + 1 <= start]
        during = s[(s["second"] + 1 > start) & (s["second"] <= start + length + 1)]
        worst = during["p99_ms"].max() if len(during) else None
        base = before["p99_ms"].median() if len(before) else None
        rows.append({
            "server": p.server, "operation": p.operation, "rate": p.rate,
            "op_started_s": start, "op_seconds": length,
            "p99_before_ms": base, "worst_p99_during_ms": worst,
            "p99_cost_x": (worst / base) if worst is not None and base else None,
            "errors_during": int(during["errors"].sum()) if len(during) else 0,
            "late_during": int(during["late"].sum()) if len(during) else 0,
            "window_p99_ms": p.p99_ms, "backlog": p.backlog, "errors": p.errors,
            "wal_peak_mib": (s["wal_bytes"].max() / 2**20) if s["wal_bytes"].notna().any() else None,
            "audit_ok": p.audit_ok,
        })
    return pd.DataFrame(rows)


def article_tables(df, method: str = "article", variant: str = "as_published",
                   synchronous: str | None = None, reference_name: str = "seed003_buffer"):
    """The article's three tables (25, 100, then 10 rows per transaction; records, seconds,
    records/s, MiB) with ours beside them: one DataFrame, a row per (rows_per_txn, records),
    published and measured columns, and measured/published records/s. `df` is sweep_buffer's;
    repeats are averaged (and their spread kept)."""
    ref, _ = reference(reference_name)
    size_col = "db_mib" if "db_mib" in ref else "db_mb"
    ref = ref.rename(columns={"seconds": "published_seconds", "records_per_s": "published_records_per_s",
                              size_col: "published_mib"})
    sel = df[(df["method"] == method) & (df["variant"] == variant)]
    if "skipped" in sel:
        sel = sel[sel["skipped"].isna()]
    if "error" in sel:
        sel = sel[sel["error"].isna()]
    if synchronous is not None:
        sel = sel[sel["synchronous"] == synchronous]
    g = sel.groupby(["rows_per_txn", "total"])
    ours = pd.DataFrame({"seconds": g["seconds"].mean(), "records_per_s": g["records_per_s"].mean(),
                         "records_per_s_spread": g["records_per_s"].max() - g["records_per_s"].min(),
                         "db_mib": g["db_mib"].mean(), "repeats": g.size()}).reset_index()
    ours = ours.rename(columns={"total": "records"})
    out = ref.merge(ours, on=["rows_per_txn", "records"], how="outer")
    out["measured_over_published"] = out["records_per_s"] / out["published_records_per_s"]
    order = {25: 0, 100: 1, 10: 2}
    out["_o"] = out["rows_per_txn"].map(lambda r: order.get(r, 3 + r))
    out = out.sort_values(["_o", "rows_per_txn", "records"]).drop(columns="_o").reset_index(drop=True)
    return out[["rows_per_txn", "records", "published_seconds", "published_records_per_s", "published_mib",
                "seconds", "records_per_s", "records_per_s_spread", "db_mib", "repeats",
                "measured_over_published"]]


def app_levels(df: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10, per app and level (over repeats): throughput and latency, the window's lock
    errors (by the app's rule) and their share of its requests (`lock_share`), its other server
    errors, the writes acknowledged and the rows the count query gained, the audit, and the CPU of
    the app and of the generator. Closed-loop levels only (the open-loop ones: app_rates)."""
    df = df[~open_loop(df)]
    t = over_repeats(df, ["server", "users"],
                     ["rps", "mean_ms", "p50_ms", "p99_ms", "max_ms", "requests", "errors",
                      "busy_errors", "server_errors", "acked_writes", "rows_written",
                      "server_cpu_pct", "gen_cpu_pct", "db_cached_before", "db_cached_after"],
                     server_errors="sum", acked_writes="sum", rows_written="sum")
    t["lock_share"] = t["busy_errors"] / t["requests"].where(t["requests"] > 0)
    return t


def app_rates(df: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10's open-loop levels, per app and offered rate (over repeats): what was served,
    p99 from the due times (a request that waited for a free user is charged the wait), the
    window's lock errors and their share, the requests left unsent at the close (`backlog`)."""
    pts = rate_points(df)
    if pts.empty:
        return pd.DataFrame(columns=["server", "rate", "rps", "p99_ms", "busy_errors", "lock_share"])
    t = over_repeats(pts, ["server", "users", "rate"],
                     ["rps", "p50_ms", "p99_ms", "requests", "errors", "busy_errors", "backlog"],
                     backlog="sum")
    t["lock_share"] = t["busy_errors"] / t["requests"].where(t["requests"] > 0)
    return t


def wal_series(seconds: pd.DataFrame) -> pd.DataFrame:
    """Notebook 10: every level's window second by second, laid end to end in the order they ran
    (`elapsed_s` from the first window's start, by the clock), with the WAL in MiB and the level
    in words (`level`); empty when no second saw a WAL with anything in it."""
    if seconds.empty or not (seconds["wal_bytes"].fillna(0) > 0).any():  # no WAL, or one never written
        return pd.DataFrame(columns=["elapsed_s", "wal_mib", "users", "level"])
    s = seconds.sort_values("t").copy()
    s["elapsed_s"] = s["t"] - s["t"].min()
    s["wal_mib"] = s["wal_bytes"] / 2**20
    s["level"] = s["users"].map(lambda u: f"{int(u)} user{'s' if u != 1 else ''}")
    return s.reset_index(drop=True)


# --------------------------------------------------------------------------- the machine's limits

LIMIT_KINDS = ("writes", "reads", "http")


def http_ceiling(run_id: str, path=None) -> tuple[float, str] | None:
    """The loopback HTTP ceiling a run's flags were judged against, and the stack it was measured
    on: wrk's rate on GET /hello at 64 users in the run's generator calibrations
    (runs.calibrations → calibrations.hello_wrk_rps, on their `target`, the fastest stack on
    /hello, pinned as the run; the best of them when the run used several generators), stored
    once per machine and referenced by the run; None for a run that skipped calibration."""
    runs = results.load_table("runs", run_id, path)
    ids = set()
    for v in runs.get("calibrations", pd.Series(dtype=object)).dropna():
        try:
            ids |= set((json.loads(v) or {}).values())
        except (TypeError, ValueError):
            continue
    if not ids:
        return None
    marks = ",".join("?" * len(ids))
    cal = results.read_sql(f"SELECT hello_wrk_rps, target FROM calibrations WHERE calib_id IN ({marks})",
                           sorted(ids), path)
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


def best_rps(df: pd.DataFrame, keys: list[str] | tuple = ("profile", "users")) -> pd.DataFrame:
    """Per stack, its best mean rate over `keys` (the means over repeats of each combination)
    and whether that point's generator was the limit: the `peak_rps` findings.ceiling reads."""
    t = over_repeats(df, ["server", *keys], ["rps"])
    best = t.loc[t.groupby("server")["rps"].idxmax()]
    return pd.DataFrame({"server": best["server"].values, "peak_rps": best["rps"].values,
                         "peak_generator_bound": [limited(r) for r in best.to_dict("records")]})


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
