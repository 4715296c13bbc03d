"""What a point's numbers say about who limited it: the generator saturated
(`generator_saturated`), the generator the limit (`generator_bound`: saturated while the server
was not), or plausibly setting the pace (`influence`: the point's `generator_influenced`);
whether the generator's count and the server's own agree (`counts_agree`); and how much group
commit grouped over stored points (`writer_batches`, arithmetic on the writer's counts that
driver.writer_window stores, here so that a report reads it without importing the driver)."""
from __future__ import annotations

import json
import math

from sqlitelab.core.vocabulary import STALL_MS

GENERATOR_BOUND_CPU = 0.90
# `generator_influenced` (see influence()): the generator busier than this share of its CPUs,
# and busier than a server short of SERVER_SATURATED_CPU of its own, with nothing else to
# explain the server's idle time, set the pace.
GENERATOR_BUSY_CPU = 0.50
SERVER_SATURATED_CPU = 0.85


def generator_saturated(gen_util: float, warned: bool) -> bool:
    """The generator at GENERATOR_BOUND_CPU of its CPUs or more, or Locust warned of its CPU."""
    return bool(gen_util >= GENERATOR_BOUND_CPU or warned)


def generator_bound(gen_util: float, warned: bool, server_util: float) -> bool:
    """The generator saturated while the server was not: the generator was the limit (a
    server busy on its own cores, SERVER_SATURATED_CPU, sets the pace whatever the other)."""
    return bool((gen_util >= GENERATOR_BOUND_CPU or warned)
                and server_util < SERVER_SATURATED_CPU)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def generator_busy(point: dict) -> bool:
    """Whether the point's generator was busy enough to set the pace: at GENERATOR_BUSY_CPU of its
    CPUs or more. A generator below that waited on the server: a gap to another client there is
    the clients' difference (or the server's stall), not the generator's pace."""
    gen = _util(point.get("gen_cpu_pct"), point.get("gen_cpus"))
    return gen is not None and gen >= GENERATOR_BUSY_CPU


def _util(pct, cpus) -> float | None:
    return None if _missing(pct) else pct / 100 / max(cpus or 1, 1)


def outlasted(point: dict) -> bool | None:
    """Whether a request outlasted the point's window: its slowest answered request took the
    whole window or longer, or the server took that long to answer what was in flight at the
    window's close (`time_drain_s`). Such a window met a stall longer than itself (Ruby's
    busy-timeout waits under a GVL: seconds), and its rate counts what the stall let through, not
    a throughput: measured again it can give 0 or thousands. None where it cannot be told (open
    loop, whose latencies run from due times; no window)."""
    window = point.get("window_s")
    if point.get("open_loop") or _missing(window) or not window:
        return None
    longest = [v for v in ((point.get("max_ms") or 0) / 1000, point.get("time_drain_s") or 0)
               if not _missing(v)]
    return max(longest, default=0) >= window


def influence(point: dict, onset: float | None) -> str | None:
    """Why the generator, not the server, plausibly set the pace of this point — or None.

    1. Its CPU (share of its cores) at or past `onset`, the level from which its calibration
       against wrk (sqlitelab.load.calibrate) shows its throughput or p99 drifting by more than the
       tolerance. A generator-bound point (GENERATOR_BOUND_CPU) is not repeated here.
    2. The server short of saturation (< SERVER_SATURATED_CPU of its cores) while the generator
       is busy (>= GENERATOR_BUSY_CPU) and busier than the server, with nothing else in the
       window to explain the server's idle time: no lock wait (busy errors) or other errors, no
       stall (a request of STALL_MS or more, or none completed), the database in the page
       cache. (A request that overran the window's close is not counted: it says nothing of
       the window, and against Puma a request in flight when Locust quits can take 1–2 s to be
       recorded. An fsync per commit is no excuse: ruby-puma's single writer at FULL was 49 %
       busy under Locust and 86 % under wrk at the same level.) A flag in doubt costs a
       confirmation with the other generator, not a number.
    3. (In a sweep with `crosscheck`, sweep.py adds a third: the level wrk measured, where the
       generator's rate fell more than calibrate.TOLERANCE short of wrk's.)
    """
    gen = _util(point.get("gen_cpu_pct"), point.get("gen_cpus"))
    if gen is None or point.get("generator_bound"):
        return None
    if onset is not None and gen >= onset:
        return (f"generator at {gen:.0%} of its CPU, past {onset:.0%} where its calibration "
                f"drifts from wrk")
    srv = point.get("server_util")
    if srv is None or _missing(srv) or gen < GENERATOR_BUSY_CPU or srv >= SERVER_SATURATED_CPU or gen <= srv:
        return None
    cached = point.get("db_cached_before")
    if ((point.get("busy_errors") or 0) or (point.get("errors") or 0)
            or (point.get("max_ms") or 0) >= STALL_MS or not point.get("requests", 1)
            or (not _missing(cached) and cached < 0.9)):
        return None
    return (f"server at {srv:.0%} of its CPU while the generator was at {gen:.0%}, "
            f"with no lock wait, stall or disk read to explain it")


def count_tolerance(point) -> float:
    """How far a window's count (`requests`) may honestly differ from the server's own
    (`server_requests`): the requests crossing the window's edges (at most one per user at each
    of its two edges, closed loop), what the server handled while its closing count was read
    late (`rps` × `server_mark_late_ms`), and never less than 1 %."""
    late_s = 0.0 if _missing(point["server_mark_late_ms"]) else point["server_mark_late_ms"] / 1000
    return max(0.01 * point["server_requests"], 2 * point["users"] + point["rps"] * late_s)


def counts_agree(point) -> bool:
    """The generator's window count within `count_tolerance` of the server's own; False when the
    server gave no count (a count-based level, a mark read too late)."""
    if _missing(point["server_requests"]):
        return False
    return abs(point["requests"] - point["server_requests"]) <= count_tolerance(point)


def writer_batches(points) -> dict:
    """Group commit as the writer counted it over the windows of `points` (a frame with
    driver.writer_window's columns): its transactions per second, the mean writes per transaction
    and the largest transaction; None for each where no point has the writer's counts (the pool, a
    server without /health's `writer`)."""
    if "writer_transactions" not in points:
        return {"commits_per_s": None, "mean_batch": None, "largest_batch": None}
    has = points[points["writer_transactions"].notna()]
    tx, jobs = has["writer_transactions"].sum(), has["writer_jobs"].sum()
    sizes = [int(k) for v in has["writer_sizes"].dropna() for k in json.loads(v)]
    return {"commits_per_s": float(tx / has["window_s"].sum()) if tx else None,
            "mean_batch": float(jobs / tx) if tx else None,
            "largest_batch": max(sizes) if sizes else None}
