"""How big a notebook run is. A *scale* (quick | seed) is not a *profile* (server knobs).

`quick` finishes the whole collection in minutes; `seed` uses the articles' own levels and
durations. A notebook's `parameters` cell names the scale; any parameter left `None` takes
the scale's value here, anything else overrides it.
"""
from __future__ import annotations

SCALES: dict[str, dict[str, dict]] = {
    "01-linear-writes": {
        "quick": {"levels": [1, 2, 4, 8, 10, 16], "duration": 3.0, "warmup": 1.0, "repeats": 1},
        "seed": {"levels": [1, 2, 4, 8, 10, 16, 32, 64], "duration": 10.0, "warmup": 2.0, "repeats": 3},
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
