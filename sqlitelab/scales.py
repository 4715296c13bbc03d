"""How big a notebook run is. A *scale* (quick | seed) is not a *profile* (server knobs).

`quick` finishes the whole collection in minutes; `seed` uses the articles' own levels and
durations. A notebook's `parameters` cell names the scale; any parameter left `None` takes
the scale's value here, anything else overrides it. `crosscheck_users`: the level at which a
sweep adds one wrk point per server and profile (sweep's `crosscheck`).
"""
from __future__ import annotations

SCALES: dict[str, dict[str, dict]] = {
    "01-linear-writes": {
        "quick": {"levels": [1, 2, 4, 8, 10, 16], "duration": 2.0, "warmup": 0.5, "repeats": 1,
                  "crosscheck_users": 8},
        "seed": {"levels": [1, 2, 4, 8, 10, 16, 32, 64], "duration": 10.0, "warmup": 2.0, "repeats": 3,
                 "crosscheck_users": 16},
    },
    "02-busy-errors": {
        "quick": {"levels": [1, 3, 16], "article_levels": [1, 3], "duration": 1.5, "warmup": 0.3,
                  "repeats": 1, "crosscheck_users": 3},
        "seed": {"levels": [1, 3, 16], "article_levels": [1, 3], "duration": 5.0, "warmup": 1.0,
                 "repeats": 3, "crosscheck_users": 3},
    },
    "03-read-write-mix": {
        "quick": {"levels": [8, 32, 128], "requests": 10_000, "warmup": 0.5, "repeats": 1,
                  "fine_levels": [], "write_shares": [0.0, 0.1, 0.5, 1.0], "share_users": 32,
                  "paths_users": 64, "beyond_requests": 2000, "crosscheck_users": 32,
                  "crosscheck_seconds": 2.0},
        "seed": {"levels": [8, 32, 64, 128, 256], "requests": 50_000, "warmup": 2.0, "repeats": 1,
                 "fine_levels": [8, 10, 13, 16, 20, 25, 32, 40, 51, 64, 81, 102, 128, 161, 203, 256],
                 "write_shares": [0.0, 0.1, 0.5, 1.0], "share_users": 64, "paths_users": 128,
                 "beyond_requests": 20_000, "crosscheck_users": 64, "crosscheck_seconds": 10.0},
    },
    "04-sqlite-as-buffer": {
        "quick": {"totals": [1_000, 10_000, 100_000], "rows_per_txn": [10, 25, 100],
                  "synchronous": ["normal", "full"], "methods": ["article", "tuned"],
                  "variants": ["one_connection", "no_ckpt_on_close"], "variant_totals": [100_000],
                  "repeats": 1, "max_seconds": 60.0, "slow_sync_ms": 40.0, "slow_sync_total": 100_000},
        "seed": {"totals": [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000],
                 "rows_per_txn": [10, 25, 100], "synchronous": ["normal", "full"],
                 "methods": ["article", "tuned"],
                 "variants": ["one_connection", "sync_normal", "no_ckpt_on_close", "page_size_8192",
                              "py311_gc", "no_logging"], "variant_totals": [1_000_000],
                 "repeats": 1, "max_seconds": 300.0, "slow_sync_ms": 40.0, "slow_sync_total": 1_000_000},
    },
    "05-single-machine": {
        "quick": {"users_rows": 100_000, "user_bytes": 700, "levels": [32], "duration": 2.0,
                  "warmup": 0.5, "repeats": 1, "crosscheck_users": 32},
        "seed": {"users_rows": 5_000_000, "user_bytes": 700, "levels": [16, 64, 256],
                 "duration": 10.0, "warmup": 2.0, "repeats": 3, "crosscheck_users": 64},
    },
    "06-capacity": {
        "quick": {"slo_p99_ms": 100.0},
        "seed": {"slo_p99_ms": 100.0},
    },
}


def settings(notebook: str, scale: str, **overrides) -> dict:
    """The scale's settings for `notebook`, with every non-None override applied."""
    if notebook not in SCALES:
        raise ValueError(f"no scales defined for notebook {notebook!r}")
    known = SCALES[notebook]
    if scale not in known:
        raise ValueError(f"scale must be one of {sorted(known)}, not {scale!r}")
    out = dict(known[scale])
    for k, v in overrides.items():
        if v is not None:
            out[k] = v
    out["scale"] = scale
    return out
