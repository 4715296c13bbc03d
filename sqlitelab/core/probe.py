"""The core's speed beside a window: a short fixed piece of CPU work, timed on a given CPU.

    probe.ms("0")              # ms the fixed work took on CPU 0 just now
    probe.around(...)          # (sweep) before and after a window, on the server's and the generator's CPU

A virtual machine's cores change speed under a measurement, with no steal shown: a window
measured in a slow second reads as a slower server. The probe times the same interpreted loop
(WORK iterations of an add, a few milliseconds, its median piece of CHUNKS) on the first CPU
of a set, with the calling thread alone pinned there for its duration (Linux
pins a thread, not the process: the lab's other threads and the processes it starts keep their
own CPUs), just before and just after each window, while the server and the generator are idle.
A point stores both (`probe_*_ms`); its `core_slowdown` is the slower of the two on the server's
CPU over the fastest probe of its sweep on that CPU, and a point above SLOWED is flagged
(`core_slowed`): the machine, not the server, may have set its pace. A comparison of two runs
shows the two cores' speeds beside each point (`core_speed`, sqlitelab.report.compare).

It measures the core, not the server: a server held back by its own cgroup's CPU quota (the
lab's injected slowdown, servers.start_server's `cpu_cap`) leaves the probe's thread alone.
"""
from __future__ import annotations

import math
import os
import time

from sqlitelab.core import layout

# the fixed work: iterations of an interpreted add (a few milliseconds), timed in CHUNKS pieces:
# the probe is the median piece's time times CHUNKS, so that one preemption of a millisecond
# does not read as a slow core
WORK, CHUNKS = 150_000, 9
# a point whose server core probed more than this much slower than the sweep's fastest probe on
# it is flagged core_slowed (beyond the probe's own jitter of a few per cent)
SLOWED = 1.25


def _work(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def ms(cpus: str | None, work: int = WORK) -> float:
    """Milliseconds `work` iterations took on the first CPU of `cpus` (this thread pinned there
    for the probe, then put back); NaN where nothing is pinned (cpus None) or the CPU is not ours."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        return math.nan
    try:
        cpu = layout.parse_cpus(cpus)[0]
    except ValueError:  # a CPU of another machine (a server over ssh)
        return math.nan
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        pieces = []
        for _ in range(CHUNKS):
            t = time.perf_counter()
            _work(work // CHUNKS)
            pieces.append(time.perf_counter() - t)
        return sorted(pieces)[CHUNKS // 2] * CHUNKS * 1000
    finally:
        os.sched_setaffinity(0, before)


def around(server_cpus: str | None, generator_cpus: str | None) -> dict:
    """One probe on each side's CPU: {'server': ms, 'generator': ms}."""
    return {"server": ms(server_cpus), "generator": ms(generator_cpus)}


def slowdown(before: float, after: float, fastest: float) -> float:
    """The slower of a window's two probes over the fastest probe of its sweep (1.0: as fast as
    the sweep's best minute); NaN when it was not probed."""
    worst = max((v for v in (before, after) if v == v), default=math.nan)
    if worst != worst or not fastest or fastest != fastest:
        return math.nan
    return worst / fastest
