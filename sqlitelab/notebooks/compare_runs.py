"""Notebook 11, two runs compared: the comparison in words.
"""
from __future__ import annotations

import math

from sqlitelab.infra import servers
from sqlitelab.report import findings
from sqlitelab.report.compare import NONE_FINISHED
from sqlitelab.studies.registry import experiment_title


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
        stalls = "; ".join(f"{int((v == word).sum())} where {findings.STALLED.replace('its window', 'the window of run ' + s)}"
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
