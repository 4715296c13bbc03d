"""Notebook 09, over a network (no article: the readers' question of a network between load and
server): what a delayed link does to the articles' loopback numbers. Everything that is this
notebook's, declared once.

Seed scale runs once per level, 10-s windows, so that `make seed` keeps within its 90 minutes.

Its code: each path against Little's law, and the findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core.vocabulary import link_label, link_title
from sqlitelab.infra.servers import stack_title
from sqlitelab.report import analysis, findings
from sqlitelab.studies.method import (
    Article, Detail, MACHINE_WHY, PIN_WHY, link_lateness, link_paths)


# What each constant means: sqlitelab.studies.declarations.
ID = "09-network-delay"
# The notebook in a reader's words (a figure of several notebooks' runs names it: 06's capacity).
TITLE = "network delay"
# The question it answers, in the README's table of notebooks (sqlitelab.readme writes it)
QUESTION = "Over a network: what a delayed link does to the loopback numbers"
# Its figure in that table: the one whose message reads at thumbnail size (a key of READING)
README_FIGURE = "latency"

SCALES: dict[str, dict] = {
    "quick": {"levels": [1, 8, 64], "duration": 2.0, "warmup": 0.5, "repeats": 1,
              "delays_us": [100, 500]},
    "seed": {"levels": [1, 8, 64], "duration": 10.0, "warmup": 1.0, "repeats": 1,
             "delays_us": [100, 500]},
}

# Its wall time per scale on the reference machine (2 cores, set-up warm), in seconds: batch
# names a run over it with where its time went (sqlitelab.studies.scales.budget).
BUDGET_SECONDS: dict[str, float] = {"quick": 45, "seed": 155}  # seed: 144 s (make seed of 2026-11-28 at 0f6a81e, fresh clone)

SERVER_SPLIT: int | None = None

IN_COLLECTION = False
HEADLINE_EXPERIMENTS: set[str] | None = None

# Its experiments in plain words, by id or pattern (sqlitelab.studies.declarations.experiment_title).
EXPERIMENT_TITLES: dict = {"direct": "direct", r"link-(\d+)us": lambda delay: link_title(link_label(int(delay)))}

READS_THE_OTHERS = False

SMOKE: dict = {"server": "go-nethttp",
               "levels": [1, 4],
               "delays_us": [500],
               "duration": 0.5,
               "warmup": 0.2,
               "repeats": 1}
STORES: str | None = "points"

READING: dict[str, str] = {
    "throughput":
        "In each panel, look for where the line through the proxy leaves the direct one: few users "
        "lose throughput to every microsecond of delay (Little's law, dotted), many users hide it "
        "until the server is busy.",
    "latency":
        "Each link adds its round trip to every request: compare the gap between lines with "
        "twice the link's delay.",
}

# Its method against its article's (sqlitelab.report.methods.table reads it).
ARTICLE = Article(ID, "000, 002, 004", "the articles' loopback runs, over a network", (
    Detail("path from load to server", "loopback on one machine (000, 004: the same laptop; "
           "002: the same machine, other cores)", link_paths, expect=["direct"],
           why="this notebook's question: the same load over links that delay each direction"),
    Detail("how the delay is made", "no delay", lambda r: "a user-space TCP proxy holding each "
           "chunk n µs each way (sqlitelab.infra.link); the kernel has no netem", expect=None,
           why="Toxiproxy's latency toxic takes whole milliseconds, and Go's timers round "
               "sub-millisecond sleeps up to ~1 ms, so 0.1 and 0.5 ms need the lab's own proxy"),
    Detail("delay applied", "none", link_lateness, expect=None,
           why="the proxy's threads wake late: tens of µs on a quiet core, a millisecond and "
               "more on average (single chunks far later: the worst is shown) when it shares a "
               "saturated core with the generator; measured by the proxy per level, the mean "
               "added to the Little's-law bound"),
    Detail("connections", "kept alive by every tool (hey, oha, the author's client)",
           "col:keepalive", expect=[True], why="a new connection per request"),
    Detail("load tool", "hey (000); the author's own Rust tool on reqwest + tokio (002); "
           "not stated (004)",
           "col:generator", expect=None,
           why="one generator for every path (loadgen by default, calibrated against wrk), so "
               "that its own cost is the same in every row and leaves CPU to the link"),
    Detail("server CPUs", "the whole machine", "cpus:server_pinning", expect=None, why=PIN_WHY),
    Detail("machine", "the authors' laptops and servers", "col:machine", why=MACHINE_WHY),
))


# --------------------------------------------------------------------------- its code

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
    t = analysis.over_repeats(d, ["server", "link", "users"],
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


def beside_direct(table: pd.DataFrame) -> pd.DataFrame:
    """The throughput figure's rows (network_table's): one panel per delayed path (`link`), in it
    that path's levels and the direct path's beside them (`path`: "direct" or "through the
    proxy"), so that each panel holds two measured lines and the delayed one's bound."""
    direct = table[table["link"] == "direct"]
    parts = [pd.concat([direct.assign(path="direct"), g.assign(path="through the proxy")]).assign(link=link)
             for link, g in table[table["link"] != "direct"].groupby("link", sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else table.assign(path="direct")


def network(table: pd.DataFrame) -> str:
    """What the delayed links did to each level: throughput against the direct path, latency,
    and how close each came to Little's-law bound (network_table)."""
    lines = []
    for (server, users), g in table.groupby(["server", "users"], sort=True):
        base = g[g["link"] == "direct"]
        if base.empty:
            continue
        b = base.iloc[0]
        parts = []
        for r in g[g["link"] != "direct"].itertuples():
            if not findings.finished(r.rps):
                parts.append(f"{link_title(r.link)}: {findings.STALLED}")
                continue
            note = f", {analysis.limit_note(r._asdict())}" if analysis.limited(r._asdict()) else ""
            of_direct = f" ({r.rps / b.rps:.0%} of direct)" if findings.finished(b.rps) else ""
            bound = f", {r.of_bound:.0%} of the bound" if r.of_bound == r.of_bound else ", no bound (no direct service time)"
            parts.append(f"{link_title(r.link)}: {r.rps:,.0f} req/s{of_direct}, mean {findings.ms(r.mean_ms, 2)}{bound}{note}")
        direct = (f"direct {b.rps:,.0f} req/s, mean {findings.ms(b.mean_ms, 2)}" if findings.finished(b.rps)
                  else f"direct: {findings.STALLED}")
        lines.append(f"- **{stack_title(server)}, {users} users** — {direct}; " + "; ".join(parts) + ".")
    rps = pd.to_numeric(table["rps"], errors="coerce")
    check = (pd.to_numeric(table["little_rps"], errors="coerce") / rps.where(rps > 0)).dropna()
    if len(check):
        lines.append(f"- Little's law as a check of the measurement: users ÷ mean latency is "
                     f"within {(check - 1).abs().max():.1%} of the measured rate at every level.")
    return "\n".join(lines)
