"""Notebook 04, SQLite as a write buffer (seed 003): how many records per second, how big, how
much memory? Everything that is this notebook's, declared once.

Seed scale keeps the article's totals, rows per transaction and one run per total (its method);
above 1 M records (`large`) the lab's writer runs only at the article's settings above 10 M (25
and 100 rows per transaction, 25 alone at 100 M, synchronous FULL; the article ran 10 rows only up
to 10 M, 100 rows ran out of memory at 100 M, and NORMAL never), without the consumer (the article
has none): its 10-M points at NORMAL and at 10 rows took 180 of the reference run's 845 s of
points (034f47a), and 100 rows at 100 M 174 s of the seed run of 2026-11-26 (0382126).

Its code: records/s per method and variant, the article's groups and curves beside ours, their
findings, and its row of the README.
"""
from __future__ import annotations

from types import ModuleType

import pandas as pd

from sqlitelab.core.vocabulary import METHOD_TITLES, TUNED_VARIANT, VARIANT_TITLES
from sqlitelab.experiments.buffer import ARTICLE_PEAK_BYTES_PER_RECORD
from sqlitelab.report import analysis, claims, summaries
from sqlitelab.studies.method import (
    Article, AS_PUBLISHED, Detail, MACHINE_WHY, NOT_STATED, consumed_up_to, large_points,
    measured_totals, recorded)


# What each constant means: sqlitelab.studies.declarations.
ID = "04-sqlite-as-buffer"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "SQLite as a buffer, seed 003"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "SQLite as a write buffer: records per second, size, memory (seed 003)"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "peak-memory"

SCALES: dict[str, dict] = {
    "quick": {"totals": [1_000, 10_000, 100_000], "rows_per_txn": [10, 25, 100],
              "synchronous": ["normal", "full"], "methods": ["article", "tuned"],
              "variants": ["one_connection", "no_ckpt_on_close"], "variant_totals": [100_000],
              "repeats": 1, "max_seconds": 60.0, "slow_sync_ms": 40.0, "slow_sync_total": 100_000},
    "seed": {"totals": [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000],
             "rows_per_txn": [10, 25, 100], "synchronous": ["normal", "full"],
             "methods": ["article", "tuned"],
             "variants": ["one_connection", "sync_normal", "no_ckpt_on_close", "page_size_8192",
                          "py311_gc", "no_logging"], "variant_totals": [1_000_000],
             "repeats": 1, "max_seconds": 300.0, "slow_sync_ms": 40.0, "slow_sync_total": 1_000_000,
             "large": {"above": 1_000_000, "rows_per_txn": [25, 100],
                       "rows_per_txn_at": {100_000_000: [25]}, "synchronous": ["full"],
                       "consume": False}},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
# quick: 32.2-33.3 s (2026-11-28); seed: 742 s and 782 s (make seed of 2026-11-28 at 0f6a81e and of
# 2026-11-29 at 922307f, fresh clones): its records are fixed work, so its time moves with the machine
BUDGET_SECONDS: dict[str, float] = {"quick": 36, "seed": 810}

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {"slow-sync": "a slow disk (every sync delayed)"}

READS_THE_OTHERS = False

# the smoke run: every table and figure of the notebook, the variants and the slow-disk run at
# its largest total (quick's 100,000 would be most of its time: 40 ms a sync)
SMOKE: dict = {"totals": [1000, 5000],
               "rows_per_txn": [2, 5],
               "synchronous": ["normal"],
               "records_per_row": 100,
               "variant_totals": [5000],
               "slow_sync_total": 5000}
STORES: str | None = "buffer_points"

READING: dict[str, str] = {
    "records-per-second":
        "Look for flat lines (the rate holds as the file grows) and for the gap that rows per "
        "transaction make, against the article's points.",
    "variants":
        "The author's method with one change at a time, against the method as published (the "
        "line at 1×): the dots furthest right are the change that matters most at this size, "
        "and a change that helps only 10 rows per transaction is what made them slow.",
    "db-size":
        "Look for flat lines: a file that costs the same bytes per record at every size, and the "
        "gap between the lab's bytes per record and the article's.",
    "peak-memory":
        "Look for flat lines: a writer that streams keeps its memory whatever the number of records.",
    "consumer":
        "Compare the consumer's rate with the writer's: a buffer keeps up only while its consumer is "
        "at least as fast.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "003", "“The surprising effectiveness of SQLite for non-persistent "
        "use cases” (2025); the author's load test, METResearchGroup/bluesky-research@de1246d9", (
    Detail("machine", "“my MacBook” (model not stated), where 100 M at 25 rows ran “locally”; "
           "100 M at 100 rows ran out of memory on a 40 GB Slurm node", "col:machine",
           why=MACHINE_WHY),
    Detail("the author's code", "the load test it links, lib/db/tests/queue_load_testing.py on "
           "main, no commit named: on main from github.com/METResearchGroup/bluesky-research at "
           "de1246d9 (2025-02-07), a week after the article's date (2025-01-31 05:00 +0800)",
           recorded("variant", "that commit, detail by detail (buffer_point's `article`)"),
           expect=NOT_STATED, only=AS_PUBLISHED,
           why="the lab follows de1246d9, the first commit on main with the linked script (its "
               "batch_add_items_to_queue docstring links the article); its write path is the one "
               "committed on the author's branch on 2025-01-31 at 20:08 -0600 (985da6f3), the "
               "script at 20:42 (87d88df2), unchanged since but for docstrings"),
    Detail("the code at the article's date", "at 2025-01-31 05:00 +0800 (2025-01-30 15:00 "
           "-0600) batch_add_items_to_queue wrote every row in one executemany on one connection "
           "(main at c131a1d5, 2025-01-20; the author's branch at f0eedae2, 2025-01-28): one "
           "transaction, no rows-per-transaction setting; a new connection per group of "
           "batch_write_size rows came 29 h later (985da6f3, 2025-01-31 20:08 -0600)",
           recorded("variant", "a new connection per group of rows (the code at de1246d9)"),
           expect=None, only=AS_PUBLISHED,
           why="the lab follows the later code: the article's tables vary the rows per "
               "transaction (25, 100, 10), which only it can, so (an inference) they come from it "
               "and the post was finished after its date; the lab runs no one-transaction variant"),
    Detail("Python", "3.10 (the repository's): a dropped sqlite3 connection closes at once",
           "col:python", expect=None, only=AS_PUBLISHED,
           why="3.11+ keeps a dropped connection open until the cyclic GC runs; `article` closes "
               "it where 3.10 would have, the `py311_gc` variant leaves it to the GC"),
    Detail("records", "{uri, text}: random strings of 10, 15 and 50 characters, ~127 B of JSON "
           "each, all generated in memory before the timing",
           lambda r: (f"the same records from the lab's generator (buffer_point.lab_records), all in "
                      f"memory first: {max(r.col('records_bytes_per_record')):,.0f} B of RSS per record"),
           expect=None, only=AS_PUBLISHED,
           why="the same records, shape, lengths and alphabet, and the same memory, generated "
               "(untimed) nine times faster than by the author's random.choices; the run also "
               "reports the memory they take"),
    Detail("records per row", "1,000 (one json.dumps per chunk of 1,000)", "col:records_per_row",
           expect=1000, only=AS_PUBLISHED, why="another chunk size"),
    Detail("rows per transaction", "25, then 100 and 10", "col:rows_per_txn", expect=[10, 25, 100],
           compare="superset", only=AS_PUBLISHED, why="the run lacks one of the article's"),
    Detail("records written", "1 K, 10 K, 100 K, 1 M, 10 M, 50 M, 100 M", measured_totals,
           expect=[1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000],
           compare="superset", only=AS_PUBLISHED,
           why="totals this scale leaves out, or that would not fit in this machine's memory "
               "or disk (the skipped rows say which)"),
    Detail("connection", "a new sqlite3.connect() per group of rows (one transaction each), "
           "dropped when the next one is opened", "col:variant", expect="as_published",
           only=AS_PUBLISHED, why="another variant"),
    Detail("synchronous", "not set: SQLite's default FULL on every per-group connection",
           "col:synchronous", expect="full", only=AS_PUBLISHED, why="another synchronous"),
    Detail("page size", "`page_size=8192`, issued after `journal_mode=WAL`, so it never applies",
           "col:page_size", expect=4096, only=AS_PUBLISHED, why="the page size differs"),
    Detail("what is timed", "from the call of batch_add_items_to_queue to its return: chunking, "
           "json.dumps, every INSERT, commit and connection", recorded(
               "seconds", "the same call, the same boundaries"), expect=None, only=AS_PUBLISHED,
           why="the lab's probes of the -wal/-shm files between groups are subtracted"),
    Detail("size", "“MB” of db + -wal + -shm (MiB: 1,000 records → 0.13)", recorded(
        "db_mib", "MiB of db + -wal + -shm after the call"), expect=None, only=AS_PUBLISHED,
           why="the same files, in MiB"),
    Detail("repeats", "one run per total", "param:repeats", expect=1, why="repeated"),
    Detail("beyond 10 M records", "25 rows per transaction at 50 M and 100 M, 100 rows at 50 M "
           "(at 100 M out of memory); 10 rows only up to 10 M; SQLite's default synchronous FULL",
           large_points, expect=["100 rows · full", "25 rows · full"],
           why="the author's method does not fit in memory there; the lab's writer ran other rows "
               "or synchronous settings too"),
    Detail("consumer", "none: the load test only writes", consumed_up_to, expect=None,
           why="the lab's addition: a consumer reads the rows back, marks them done and deletes "
               "them (records/s); at seed scale up to "
               f"{SCALES['seed']['large']['above']:,} records, so that the seed run fits its 90 minutes"),
))


# --------------------------------------------------------------------------- its code

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


def variant_ratios(bf: pd.DataFrame) -> pd.DataFrame:
    """The variants figure's rows: at the total the variants ran at, each change to the author's
    method against the method as published — per variant (in plain words) and rows per
    transaction, the median records/s of both and `against_published`, the one over the other."""
    d = _measured(bf)
    d = d[d["method"] == "article"]
    if d.empty:
        return d.assign(against_published=pd.Series(dtype=float))
    d = d[d["total"] == _variant_total(d)]
    t = d.groupby(["variant", "rows_per_txn"])["records_per_s"].median().reset_index()
    published = t[t["variant"] == "as_published"].set_index("rows_per_txn")["records_per_s"]
    t = t[t["variant"] != "as_published"].assign(published_records_per_s=lambda x: x["rows_per_txn"].map(published))
    return t.assign(against_published=t["records_per_s"] / t["published_records_per_s"],
                    variant=t["variant"].map(lambda v: VARIANT_TITLES.get(v, v.replace("_", " "))))


def buffer_curves(done: pd.DataFrame, ref: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The measured buffer points drawn as curves (the author's method as published and the lab's
    tuned writer) with `series` (the method and its synchronous, in plain words), `rows` (one
    panel per rows per transaction) and `bytes_per_record` (the database, WAL and shm files over
    the records in them); the article's numbers (`ref`) with the same `rows` and bytes."""
    def rows(d):
        return d["rows_per_txn"].astype(int).astype(str) + " rows per transaction"
    curves = done[done["variant"].isin(["as_published", TUNED_VARIANT])]
    curves = curves.assign(series=curves["method"].map(lambda m: METHOD_TITLES.get(m, m))
                           + ", synchronous=" + curves["synchronous"].astype(str).str.upper(), rows=rows(curves),
                           bytes_per_record=curves["db_mib"] * 2 ** 20 / curves["total"])
    if ref is not None:
        ref = ref.assign(rows=rows(ref), bytes_per_record=ref["db_mib"] * 2 ** 20 / ref["records"])
    return curves, ref


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


def article_tables(df, method: str = "article", variant: str = "as_published",
                   synchronous: str | None = None, reference_name: str = "seed003_buffer"):
    """The article's three tables (25, 100, then 10 rows per transaction; records, seconds,
    records/s, MiB) with ours beside them: one DataFrame, a row per (rows_per_txn, records),
    published and measured columns, and measured/published records/s. `df` is sweep_buffer's;
    repeats are averaged (and their spread kept)."""
    ref, _ = analysis.reference(reference_name)
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
                         f"{mem * 100e6 / 2**30:,.0f} GiB for 100 M at that rate (the run's safety check "
                         f"projects a point it may skip with the larger of this and its floor, "
                         f"{ARTICLE_PEAK_BYTES_PER_RECORD:,} B).")
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
        lines.append("Every measured point's rows hold exactly its records." if audit
                     else "❌ **AUDIT FAILED**: some point's rows do not hold its records.")
    return "\n".join(lines)


def summary(study: ModuleType, x: summaries.Tables) -> tuple[str, str]:
    """Seed 003: records/s by rows per transaction, and the article's 10-row collapse."""
    ref, meta = analysis.reference("seed003_buffer")
    art = ref.dropna(subset=["records_per_s"])
    a = art.loc[art["records_per_s"].idxmax()]
    pairs = art.pivot_table(index="records", columns="rows_per_txn", values="records_per_s")
    art_ratio = (pairs[10] / pairs[25]).dropna()
    article = (f"a machine the article does not name for this row: peak {a.records_per_s:,.0f} records/s ({int(a.rows_per_txn)} rows per "
               f"transaction, {int(a.records):,} records); 10 rows at {art_ratio.min():.2f}–{art_ratio.max():.2f}× "
               f"the 25-row rate")
    bf = x.get("buffer_points", pd.DataFrame())
    bf = bf[bf["notebook"] == study.ID] if len(bf) else bf
    if bf.empty:
        return article, summaries.NOT_IN_RUN
    done = bf[bf["skipped"].isna()] if "skipped" in bf else bf
    pub = done[(done["method"] == "article") & (done["variant"] == "as_published")]
    parts = []
    if len(pub):
        g = pub.groupby(["rows_per_txn", "total"])["records_per_s"].median()
        (rpt, total), best = g.idxmax(), g.max()
        parts.append(f"The author's method peaks at {summaries.once(best)} records/s ({rpt} rows, {total:,} records; "
                     f"one run: no interval), "
                     f"{best / a.records_per_s:.2f}× the article's peak")
        w = pub.pivot_table(index="total", columns="rows_per_txn", values="records_per_s", aggfunc="median")
        if {10, 25} <= set(w.columns):
            r = (w[10] / w[25]).dropna()
            collapsed = [t for t, v in r.items() if claims.halves(v)]
            parts.append(f"10 rows at {r.min():.2f}–{r.max():.2f}× the 25-row rate from {int(r.index.min()):,} to "
                         f"{int(r.index.max()):,} records: "
                         + (f"the article's collapse reproduces at {', '.join(f'{int(t):,}' for t in collapsed)}"
                            if collapsed else "the article's 10-row collapse does not reproduce"))
    tuned = done[done["method"] == "tuned"]
    if len(tuned):
        best = tuned.loc[tuned["records_per_s"].idxmax()]
        big = tuned[tuned["total"] == tuned["total"].max()]
        parts.append(f"the lab's writer: up to {summaries.once(best['records_per_s'])} records/s "
                     f"({int(best['rows_per_txn'])} rows, {int(best['total']):,} records); its largest run, "
                     f"{int(big['total'].iloc[0]):,} records, with {big['peak_rss_mib'].max():,.0f} MiB at its peak")
    return article, summaries.sentences(parts)
