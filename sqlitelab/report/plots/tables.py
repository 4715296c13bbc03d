"""The small tables the charts draw from and the notebooks show: each level over its repeats
(summarise), the status codes per point (status_table), and a table as a reader sees it
(plain_table: its columns in plain words, formatted, no row numbers)."""
from __future__ import annotations

import json

import pandas as pd

from sqlitelab.report.analysis import over_repeats

def summarise(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Each level over its repeats, for drawing: every column the mean (errors and memory too:
    a chart shows one typical repeat), the rps range, and the generator flags."""
    cols = [c for c in ("rps", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms",
                        "errors", "busy_errors", "server_cpu_pct", "gen_cpu_pct", "server_rss_mb",
                        "bytes_per_s") if c in df]
    return over_repeats(df, by, cols + ["rps_min", "rps_max"], **{c: "mean" for c in cols},
                        rps_min=("rps", "min"), rps_max=("rps", "max"))


def status_table(df: pd.DataFrame, by=("server", "profile", "users")) -> pd.DataFrame:
    """Status-code distribution per point, summed over repeats."""
    rows = []
    for _, r in df.iterrows():
        counts = json.loads(r["status_counts"]) if isinstance(r["status_counts"], str) else {}
        rows.append({**{k: r[k] for k in by}, **{f"[{k}]": v for k, v in counts.items()}})
    t = pd.DataFrame(rows).fillna(0)
    return t.groupby(list(by)).sum().astype(int).reset_index()


def plain_table(table: pd.DataFrame, columns: dict[str, tuple[str, str]]):
    """`table` as a reader sees it: the `columns` it has ({column: (its title, its format)}), in
    that order, titled and formatted, no row numbers; an empty cell blank."""
    cols = {k: v for k, v in columns.items() if k in table}
    titles = {k: v[0] for k, v in cols.items()}
    formats = {titles[k]: (lambda f: lambda v: "" if v is None or v != v else f.format(v))(v[1])
               for k, v in cols.items()}
    return table[list(cols)].rename(columns=titles).style.hide(axis="index").format(formats)
