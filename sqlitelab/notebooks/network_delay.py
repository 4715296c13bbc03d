"""Notebook 09, a database across a link: each path against Little's law, and the findings.
"""
from __future__ import annotations

import pandas as pd

from sqlitelab.core.vocabulary import link_label
from sqlitelab.report import analysis, findings


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
                parts.append(f"{r.link}: {findings.STALLED}")
                continue
            note = f", {analysis.limit_note(r._asdict())}" if analysis.limited(r._asdict()) else ""
            of_direct = f" ({r.rps / b.rps:.0%} of direct)" if findings.finished(b.rps) else ""
            bound = f", {r.of_bound:.0%} of the bound" if r.of_bound == r.of_bound else ", no bound (no direct service time)"
            parts.append(f"{r.link}: {r.rps:,.0f} req/s{of_direct}, mean {r.mean_ms:.2f} ms{bound}{note}")
        direct = f"direct {b.rps:,.0f} req/s, mean {b.mean_ms:.2f} ms" if findings.finished(b.rps) else f"direct: {findings.STALLED}"
        lines.append(f"- **{server}, {users} users** — {direct}; " + "; ".join(parts) + ".")
    check = (table["little_rps"] / table["rps"]).dropna()
    if len(check):
        lines.append(f"- Little's law as a check of the measurement: users ÷ mean latency is "
                     f"within {(check - 1).abs().max():.1%} of the measured rate at every level.")
    return "\n".join(lines)
