"""Tables and findings computed from measured points (never typed in), and the articles'
published numbers as reference data with their source."""
from __future__ import annotations

import io
from importlib import resources

import pandas as pd


def reference(name: str) -> tuple[pd.DataFrame, dict]:
    """A published table from sqlitelab/reference/<name>.csv and its `# key: value` header."""
    text = resources.files("sqlitelab").joinpath("reference", f"{name}.csv").read_text()
    meta = {}
    for line in text.splitlines():
        if line.startswith("#") and ":" in line:
            k, v = line[1:].split(":", 1)
            meta[k.strip()] = v.strip()
    return pd.read_csv(io.StringIO(text), comment="#"), meta


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
        "generator_bound": g["generator_bound"].any(),
        "audit_ok": g["audit_ok"].all(),
    })
    return out.reset_index()


def peak(table: pd.DataFrame) -> pd.DataFrame:
    """Per server/profile: the level of highest mean throughput, and where errors begin."""
    rows = []
    for (server, profile), g in table.groupby(["server", "profile"], sort=True):
        best = g.loc[g["rps"].idxmax()]
        erring = g[g["errors"] > 0]
        last = g.loc[g["users"].idxmax()]
        rows.append({"server": server, "profile": profile, "peak_rps": best["rps"],
                     "peak_users": int(best["users"]),
                     "peak_generator_bound": bool(best["generator_bound"]),
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
            s += " (generator-bound: the server may go higher)"
        if r.errors_from_users is not None:
            s += f"; errors begin at {r.errors_from_users} users"
        else:
            s += "; no errors at any level"
        if r.max_users != r.peak_users:
            s += (f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s "
                  f"({r.drop_from_peak:+.0%} below the peak)." if r.drop_from_peak and r.drop_from_peak > 0
                  else f"; at {r.max_users} users it serves {r.rps_at_max_users:,.0f}/s.")
        else:
            s += "."
        lines.append(s)
    return "\n".join(lines)
