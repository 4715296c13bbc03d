"""Seed 003: SQLite as a write buffer, in-process Python, no HTTP: the sweeps.

Every point (the article's method as its author wrote it and its knob-at-a-time VARIANTS, the
lab's tuned writer and its consumer, the audit) runs in a fresh process of its own, from
sqlitelab.experiments.buffer_point, which imports only the standard library so that the point's
process stays small. Here: which points a sweep runs (`plan`, fewer above a `large` total),
what each would need in memory and disk against what is free (`project_point`), the sweep
itself (`sweep_buffer`, a tidy DataFrame), and the system calls of one point, on this disk or
on emulated slow storage (`syscall_counts` under strace, `slow_sync_sweep`).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from sqlitelab.core import processes, results
from sqlitelab.core.machine import machine_label
from sqlitelab.experiments.buffer_point import (METHODS, TUNED_VARIANT, VARIANTS, PointTimeout, check_point,
                                                run_point)

# Sizes for projections, measured on this machine (Python 3.11): the article method holds every
# record (~426 B as a dict of two str) plus its share of the payload strings (~130 B) and of the
# chunk lists, ~565 B/record at its peak at 1 M records (py311_gc: ~650 B/record at 1 M, the
# page caches of the connections waiting for the GC); the database takes ~131 B/record
# (1 K records -> 0.13 MiB, as in the article). The sweep raises the memory constant to the
# bytes per record it measured at the method's largest total so far (at 1 K records the process's
# fixed overhead makes it ~760 B).
ARTICLE_PEAK_BYTES_PER_RECORD = 660
DB_BYTES_PER_RECORD = 140
BASE_RSS_BYTES = 64 * 2**20     # the point process before any record
GEN_SECONDS_PER_RECORD = 12e-6  # generous: the author's generator takes ~8 us/record here


def mem_available() -> int:
    """MemAvailable from /proc/meminfo, bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


# ----------------------------------------------------------------------------- projections

def project_point(method: str, total: int, rows_per_txn: int, records_per_row: int = 1000,
                  work_dir: Path | str = ".", bytes_per_record: float | None = None,
                  mem_reserve_gib: float = 3.0, mem_fraction: float = 0.8,
                  disk_margin: float = 1.5, keep_free_gb: float = 2.0) -> dict:
    """Peak memory and disk a point needs, against what is free now; `skipped` gives the reason
    (one line) when it would not fit with the safety margins, else None. The article method
    holds every record: BASE_RSS + total x bytes_per_record (measured). `tuned` holds one
    transaction's records. Disk: DB_BYTES_PER_RECORD x total x disk_margin, plus the WAL."""
    if method == "article":
        bpr = max(bytes_per_record or 0, ARTICLE_PEAK_BYTES_PER_RECORD)
        mem = BASE_RSS_BYTES + total * bpr
    else:
        mem = BASE_RSS_BYTES + min(total, rows_per_txn * records_per_row) * ARTICLE_PEAK_BYTES_PER_RECORD * 1.5
    wal = rows_per_txn * records_per_row * DB_BYTES_PER_RECORD + 1000 * 4096
    disk = total * DB_BYTES_PER_RECORD * disk_margin + wal
    avail = mem_available()
    mem_ok = avail * mem_fraction - mem_reserve_gib * 2**30
    work_dir = Path(work_dir)
    probe_dir = work_dir if work_dir.exists() else next((p for p in work_dir.parents if p.exists()), Path("/"))
    free = shutil.disk_usage(probe_dir).free - keep_free_gb * 2**30
    skipped = None
    if mem > mem_ok:
        floor = method == "article" and bpr > (bytes_per_record or 0)
        how = (f"projected at {bpr:,.0f} B per record" + (
            f", the safety floor: above the {bytes_per_record:,.0f} B measured" if floor and bytes_per_record else
            ", the safety floor" if floor else ", as measured") if method == "article" else "projected")
        skipped = (f"needs ~{mem / 2**30:.1f} GiB of memory ({how}), {avail / 2**30:.1f} GiB "
                   f"available ({mem_fraction:.0%} minus a {mem_reserve_gib:g} GiB reserve: "
                   f"{max(mem_ok, 0) / 2**30:.1f} GiB)")
    elif disk > free:
        skipped = f"needs ~{disk / 2**30:.1f} GiB of disk, {max(free, 0) / 2**30:.1f} GiB free"
    return {"projected_peak_gib": mem / 2**30, "projected_disk_gib": disk / 2**30,
            "mem_available_gib": avail / 2**30, "skipped": skipped,
            "mem_limit": int(min(max(mem * 1.5 + 2**30, 2 * 2**30), max(avail - 2**30, 2**30)))}


# ----------------------------------------------------------------------------- sweeps

LARGE_KEYS = {"above", "rows_per_txn", "rows_per_txn_at", "synchronous", "consume"}


def _check_large(large: dict | None) -> dict | None:
    if large is None:
        return None
    if not isinstance(large, dict) or set(large) - LARGE_KEYS or "above" not in large:
        raise ValueError(f"large must be a dict with 'above' and any of {sorted(LARGE_KEYS - {'above'})}, "
                         f"not {large!r}")
    at = large.get("rows_per_txn_at", {})
    if not isinstance(at, dict) or not all(isinstance(v, (list, tuple)) for v in at.values()):
        raise ValueError(f"large's rows_per_txn_at must map a total to a list of rows per transaction, "
                         f"not {at!r}")
    return large


def large_rows(large: dict, total: int, rpt: int) -> bool:
    """Whether the lab's writer runs `rpt` rows per transaction at a large `total`: the total's
    own list (`rows_per_txn_at`), else `rows_per_txn`, else every one."""
    allowed = large.get("rows_per_txn_at", {}).get(total, large.get("rows_per_txn"))
    return allowed is None or rpt in allowed


def is_large(large: dict | None, total: int) -> bool:
    return large is not None and total > large["above"]


def plan(totals, rows_per_txn, synchronous=("normal", "full"), methods=METHODS,
         variants=(), variant_totals=None, repeats: int = 1, large: dict | None = None) -> list[dict]:
    """The points of a sweep, smallest totals first: `article` (as published) and `tuned`
    (per synchronous) at every total and rows_per_txn, and each variant of `article` at
    `variant_totals` (default: the largest total). Within a total, each repeat runs every
    rows_per_txn and method in turn, so that a noisy minute does not hit one series only.
    `large` = {"above": N, "rows_per_txn": [...], "rows_per_txn_at": {total: [...]}, "synchronous":
    [...], "consume": bool}: above N records, `tuned` runs only those rows per transaction (a total's
    own list in rows_per_txn_at) and synchronous settings (and, with
    consume False, no consumer: sweep_buffer); the `article` points stay (the memory projection
    skips them there, with its reason)."""
    if isinstance(totals, int) or isinstance(rows_per_txn, int):
        raise ValueError("totals and rows_per_txn must be lists")
    if not totals or not rows_per_txn:
        raise ValueError("totals and rows_per_txn must not be empty")
    if isinstance(synchronous, str):
        synchronous = [synchronous]
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {m!r}")
    for v in variants:
        if v not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, not {v!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, not {repeats!r}")
    large = _check_large(large)
    vt = sorted(variant_totals) if variant_totals is not None else [max(totals)]
    pts = []
    for total in sorted(set(totals) | (set(vt) if variants else set())):
        for rep in range(repeats):          # repeats spread over time, not back to back
            for rpt in rows_per_txn:
                if total in totals and "article" in methods:
                    pts.append({"method": "article", "variant": "as_published", "synchronous": None,
                                "rows_per_txn": rpt, "total": total, "repeat": rep})
                if total in vt:
                    for v in variants:
                        if v != "as_published" or "article" not in methods or total not in totals:
                            pts.append({"method": "article", "variant": v, "synchronous": None,
                                        "rows_per_txn": rpt, "total": total, "repeat": rep})
                if total in totals and "tuned" in methods:
                    if is_large(large, total) and not large_rows(large, total, rpt):
                        continue
                    for s in synchronous:
                        if is_large(large, total) and s not in large.get("synchronous", [s]):
                            continue
                        pts.append({"method": "tuned", "variant": TUNED_VARIANT, "synchronous": s,
                                    "rows_per_txn": rpt, "total": total, "repeat": rep})
    for p in pts:
        check_point(p["method"], p["total"], p["rows_per_txn"], p["variant"], p["synchronous"])
    return pts


def _nominal_sync(p: dict) -> str:
    if p["method"] == "tuned":
        return p["synchronous"]
    return "normal" if p["variant"] == "sync_normal" else "full"


def sweep_buffer(work_dir: Path, totals: list[int], rows_per_txn: list[int],
                 synchronous: list[str] = ("normal", "full"), records_per_row: int = 1000,
                 consume: bool = True, max_seconds: float = 600, *, methods=METHODS,
                 variants=(), variant_totals: list[int] | None = None, repeats: int = 1,
                 probe: bool = True, disk_margin: float = 1.5, keep_free_gb: float = 2.0,
                 mem_reserve_gib: float = 3.0, progress: bool = True, large: dict | None = None):
    """Every point of `plan(...)`, smallest totals first, each in its own process. A point is
    skipped, with a one-line reason, when its projected memory or disk would not fit (margins
    in `project_point`) or when the same series' previous rate projects it beyond `max_seconds`.
    Returns a tidy DataFrame: one row per point, a column per parameter (method, variant,
    rows_per_txn, synchronous — the value read back on the writing connection —, total,
    records_per_row, repeat) and the measurements. `large`: fewer tuned points above a total
    (plan), and there no consumer unless large["consume"] (a point that did not consume has
    no `consume_*`). While a replay is on (results.replay), the points the replayed run stored."""
    if results.replaying():
        return results.replayed_table("buffer_points", own=("machine",))
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    pts = plan(totals, rows_per_txn, synchronous, methods, variants, variant_totals, repeats, large)
    machine = machine_label()
    rows, last_rate = [], {}
    bpr_at: dict[int, float] = {}   # the article method's peak bytes per record, per total
    for p in tqdm(pts, desc="buffer", disable=not progress, mininterval=0.5):
        consumes = bool(consume and p["method"] == "tuned"
                        and not (is_large(large, p["total"]) and not large.get("consume", True)))
        base = {**p, "machine": machine, "synchronous": _nominal_sync(p), "synchronous_requested": p["synchronous"],
                "records_per_row": records_per_row, "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        proj = project_point(p["method"], p["total"], p["rows_per_txn"], records_per_row, work_dir,
                             bytes_per_record=bpr_at[max(bpr_at)] if bpr_at else None,
                             mem_reserve_gib=mem_reserve_gib,
                             disk_margin=disk_margin, keep_free_gb=keep_free_gb)
        mem_limit = proj.pop("mem_limit")
        key = (p["method"], p["variant"], p["synchronous"], p["rows_per_txn"])
        rate = last_rate.get(key)
        if proj["skipped"]:
            rows.append({**base, **proj})
            continue
        if rate and p["total"] / rate * 2 > max_seconds:
            rows.append({**base, **proj, "skipped": f"projected {p['total'] / rate * 2:.0f} s (twice the "
                                                    f"previous total's rate) > max_seconds {max_seconds:.0f}"})
            continue
        path = work_dir / f"buffer-{p['method']}-{p['variant']}-{p['synchronous'] or 'default'}-{p['rows_per_txn']}-{p['total']}.db"
        gen = p["total"] * GEN_SECONDS_PER_RECORD
        t_point = time.perf_counter()
        removed = 0.0
        try:
            out = run_point(path, p["total"], p["rows_per_txn"], p["method"], p["variant"], p["synchronous"],
                            records_per_row, consumes, probe, timeout=max_seconds * 3 + gen * 3 + 60,
                            mem_limit=mem_limit)
        except (PointTimeout, RuntimeError) as e:
            rows.append({**base, **proj, "skipped": None, "error": str(e)})
            continue
        finally:
            t = time.perf_counter()
            for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                f.unlink(missing_ok=True)
            for f in work_dir.glob("logs.log*"):
                f.unlink(missing_ok=True)
            removed = time.perf_counter() - t
        out.update({"remove_seconds": removed, "point_wall_seconds": time.perf_counter() - t_point})
        last_rate[key] = out["records_per_s"]
        if p["method"] == "article":  # projected from the largest total: at small ones the fixed overhead inflates it
            bpr_at[p["total"]] = max(bpr_at.get(p["total"], 0), out["peak_bytes_per_record"])
        rows.append({**base, **proj, **out, "skipped": None, "error": None})
    df = pd.DataFrame(rows)
    front = ["method", "variant", "rows_per_txn", "synchronous", "total", "records_per_row", "repeat",
             "seconds", "records_per_s", "db_mib", "peak_rss_mib", "audit_ok", "skipped"]
    return df[[c for c in front if c in df] + [c for c in df if c not in front]]


# ----------------------------------------------------------------------------- system calls

def syscall_counts(work_dir: Path | str, total: int, rows_per_txn: int, method: str = "article",
                   variant: str | None = None, synchronous: str | None = None,
                   records_per_row: int = 1000, timeout: float = 900,
                   calls: str = "fsync,fdatasync,unlink,unlinkat,ftruncate",
                   sync_delay_ms: float = 0) -> dict:
    """One point under `strace -f -c --seccomp-bpf` (the command line below, in its own process
    group, stopped on timeout): the counts of `calls` made by the whole process (generation
    makes none of these), and the point's own measurements (only `calls` stop under strace, so
    its timing is close to an untraced run's). `sync_delay_ms` > 0 makes every fsync/fdatasync
    return that much later (strace's syscall delay injection): storage whose syncs are slow,
    e.g. a network or parallel file system, emulated on this disk."""
    variant, synchronous = check_point(method, total, rows_per_txn, variant, synchronous, records_per_row)
    if not shutil.which("strace"):
        raise RuntimeError("strace is not installed")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    db = work_dir / f"strace-{method}-{variant}-{rows_per_txn}-{total}.db"
    with tempfile.NamedTemporaryFile("r", suffix=".strace", dir=work_dir, delete=False) as tf:
        trace = tf.name
    if sync_delay_ms < 0:
        raise ValueError(f"sync_delay_ms must be >= 0, not {sync_delay_ms!r}")
    cmd = ["strace", "-f", "-c", "--seccomp-bpf", "-o", trace, "-e", f"trace={calls}"]
    if sync_delay_ms:
        synced = ",".join(c for c in ("fsync", "fdatasync") if c in calls.split(","))
        cmd += ["-e", f"inject={synced}:delay_exit={int(sync_delay_ms * 1000)}"]
    cmd += [sys.executable, "-m", "sqlitelab.experiments.buffer_point",
           "--method", method, "--variant", variant, "--total", str(total), "--rows-per-txn",
           str(rows_per_txn), "--records-per-row", str(records_per_row), "--path", str(db), "--no-consume"]
    if synchronous:
        cmd += ["--synchronous", synchronous]
    proc = processes.spawn(cmd, "a buffer point under strace", stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.stop(proc, grace=5)
        raise PointTimeout(f"strace point exceeded {timeout:.0f} s; process group {proc.pid} stopped", proc.pid)
    finally:
        processes.forget(proc.pid)
        for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            f.unlink(missing_ok=True)
        for f in work_dir.glob("logs.log*"):
            f.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"strace point failed ({proc.returncode}): {stderr[-2000:]}")
    counts = {c: 0 for c in calls.split(",")}
    for line in Path(trace).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[-1] in counts and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    os.unlink(trace)
    point = json.loads(stdout.strip().splitlines()[-1])
    return {"method": method, "variant": variant, "rows_per_txn": rows_per_txn, "total": total,
            "sync_delay_ms": sync_delay_ms, **{f"{c}_calls": n for c, n in counts.items()},
            **{k: point.get(k) for k in ("seconds", "records_per_s", "groups", "close_checkpoints",
                                         "auto_checkpoints", "synchronous", "audit_ok", "rows",
                                         "rows_expected", "records_in_payloads")}}


def slow_sync_sweep(work_dir: Path | str, total: int, rows_per_txn: list[int],
                    variants: list[str] = ("as_published", "one_connection"),
                    sync_delay_ms: float = 40.0, progress: bool = True):
    """The author's method (and variants) on emulated slow storage: every fsync/fdatasync
    delayed by `sync_delay_ms` (syscall_counts), with the syncs each point made. A DataFrame;
    while a replay is on (results.replay), the one the replayed run stored."""
    if results.replaying():
        return results.replayed_table("buffer_slow_sync", "slow-sync")
    rows = []
    todo = [(v, r) for v in variants for r in rows_per_txn]
    for variant, rpt in tqdm(todo, desc="slow storage", disable=not progress, mininterval=0.5):
        rows.append(syscall_counts(work_dir, total, rpt, "article", variant,
                                   sync_delay_ms=sync_delay_ms))
    return pd.DataFrame(rows)
