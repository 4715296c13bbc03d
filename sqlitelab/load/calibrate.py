"""Calibrating the load generators on this machine, with wrk as the reference client.

    python -m sqlitelab.calibrate               # both generators, unless already calibrated
    python -m sqlitelab.calibrate --force       # measure again
    python -m sqlitelab.calibrate compare --servers ruby-puma python-fastapi --users 32

A generator's own cost per request is part of every closed-loop measurement: while it waits
for its CPU, its users send nothing, and the latency it records includes the wait. To know
where that begins, each generator is measured against the fastest bundled server (chosen by
wrk's /hello rate among the compiled stacks) on the same pinning as a sweep:

- **Ceiling**: GET /hello at HELLO_USERS users, the generator's rate beside wrk's.
- **Added latency as a function of its CPU**: GET /delay/DELAY_MS (the server waits, using
  neither the database nor a CPU, so every user should complete 1000/DELAY_MS requests per
  second at a latency of DELAY_MS) at a ladder of user counts (×1.5 a step), the generator
  and wrk in turn on the same server, until the generator saturates or the server does. At
  each level: the generator's CPU use, its rate over wrk's, the latency it adds at p50 and p99.
  A level *drifts* when the rate is more than TOLERANCE below wrk's or the p99 more than
  P99_TOLERANCE above it. (P99_TOLERANCE is wider: on this endpoint wrk's own p99 moves by
  10–15 % from run to run — the server's timer wakes ~1–2 ms late — and a generator well
  below saturation shows the same spread.)
- **Onset**: the generator's CPU use (share of its cores) from which every level drifts —
  the lowest CPU of a drifting level with no clean level above it. Points a sweep measures
  with the generator past its onset are `generator_influenced` (verdicts.influence); with no
  drift seen, there is no onset and only `generator_bound` (GENERATOR_BOUND_CPU) applies.

A calibration is stored in results.db (`calibrations`, `calibration_points`) and reused while
the machine, the generator's version and pinning, and this method are the same. A copy of each
is kept for the machine (config.MACHINE_CACHE/calibrations.db, with its folder of points), so
that another clone on the same machine takes it instead of measuring it again (`ensure`).
"""
from __future__ import annotations

import sqlite3
import hashlib
import json
import random
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import pandas as pd

from sqlitelab.core import config, layout, machine, results, schema
from sqlitelab.infra import databases, servers
from sqlitelab.load import commands, driver as load, verdicts, wrk

DELAY_MS = 10
TOLERANCE = 0.10       # throughput below wrk's by more than this: drift
P99_TOLERANCE = 0.25   # p99 above wrk's by more than this: drift
DELAY_LEVELS = (4, 6, 9, 14, 21, 32, 48, 72, 108, 162, 243, 364, 546, 820, 1230)
HELLO_USERS = 64
# The compiled bundled stacks (`compiled = true` in their stack.toml), by name: the fastest is one of them
CANDIDATES = servers.compiled_stacks()
DURATION, WARMUP = 2.0, 0.5
METHOD = (f"delay {DELAY_MS} ms, tolerance {TOLERANCE:.0%} (p99 {P99_TOLERANCE:.0%}), hello "
          f"{HELLO_USERS} users, levels x1.5, {DURATION:g} s + {WARMUP:g} s warm-up per point")


def generator_version(generator: str) -> str:
    """What a calibration holds for: Locust's version, loadgen's source, wrk's version."""
    if generator == "locust":
        return f"locust {metadata.version('locust')} + " + _digest([commands.LOCUSTFILE, commands.RECORDER])
    if generator == "loadgen":
        return "loadgen " + _digest(sorted(config.LOADGEN_DIR.glob("*.go")))
    if generator == "wrk":
        return wrk.version()
    raise ValueError(f"no version for generator {generator!r}")


def _digest(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:12]


def _db(path=None) -> Path:
    return Path(path or config.CALIBRATION_DB)


def _newest(where: str, args: tuple, path=None) -> dict | None:
    """The newest stored calibration on this machine and method matching `where`, or None
    (also when nothing was ever stored)."""
    p = _db(path)
    if not p.exists():
        return None
    con = sqlite3.connect(p)
    con.row_factory = sqlite3.Row
    try:
        row = con.execute(f"SELECT * FROM calibrations WHERE machine = ? AND method = ? AND {where} "
                          "ORDER BY started DESC LIMIT 1",
                          (machine.machine_label(), METHOD, *args)).fetchone()
    except sqlite3.OperationalError:  # no table yet
        return None
    finally:
        con.close()
    return _typed(dict(row)) if row else None


def _typed(row: dict) -> dict:
    """A stored row with every column schema.TYPES declares as a number a number again: a column
    first stored empty became TEXT in a results.db made before its type was declared, and
    SQLite then keeps a later number as text ("0.71")."""
    return {k: (schema.TYPES[k](float(v)) if k in schema.TYPES and isinstance(v, str) else v)
            for k, v in row.items()}


def current(generator: str, generator_cpus: str | None, path=None) -> dict | None:
    """The newest stored calibration of `generator` on this machine, pinning and version
    with this method, or None."""
    return _newest("generator = ? AND version = ? AND generator_pinning IS ?",
                   (generator, generator_version(generator), generator_cpus), path)


def _machine_db() -> Path:
    """The machine's copy of every calibration measured on it (see the module's docstring)."""
    return config.MACHINE_CACHE / "calibrations.db"


def _runs_dir(db: Path) -> Path:
    return Path(db).parent / "runs"  # a calibration's folder of points, beside its database


def share(calib_id: str, src, dst) -> bool:
    """Calibration `calib_id` of `src` (a results.db, or the machine's copy) with its points and
    its folder, added to `dst` unless it is there already; whether it was added."""
    if not copy_calibrations(src, dst, ids=[calib_id]):
        return False
    folder = _runs_dir(src) / calib_id
    if folder.is_dir():
        shutil.copytree(folder, _runs_dir(dst) / calib_id, dirs_exist_ok=True)
    return True


def ensure(generator: str, server_cpus: str | None, generator_cpus: str | None,
           path=None, progress: bool = True) -> dict:
    """The current calibration: the one `path` holds, else the machine's copy of one (measured
    in another clone), else measured now (a minute or two). Whichever it is, the machine's copy
    has it afterwards."""
    found = current(generator, generator_cpus, path)
    if found is None and (adopted := current(generator, generator_cpus, _machine_db())):
        share(adopted["calib_id"], _machine_db(), _db(path))
        if progress:
            print(f"{generator}: the calibration measured on this machine at {adopted['started']} "
                  f"({_machine_db()})", flush=True)
        found = current(generator, generator_cpus, path)
    if found:
        share(found["calib_id"], _db(path), _machine_db())
        return found
    if progress:
        print(f"Calibrating {generator} against wrk on this machine (once; "
              f"`python -m sqlitelab.calibrate` shows it)…", flush=True)
    return calibrate(generator, server_cpus=server_cpus, generator_cpus=generator_cpus, path=path)


def drift(gen: dict, ref: dict) -> dict:
    """How far a generator's point lies from wrk's at the same level."""
    rps_ratio = gen["rps"] / ref["rps"] if ref["rps"] else None
    p99_ratio = gen["p99_ms"] / ref["p99_ms"] if gen.get("p99_ms") and ref.get("p99_ms") else None
    drifts = ((rps_ratio is not None and rps_ratio < 1 - TOLERANCE)
              or (p99_ratio is not None and p99_ratio > 1 + P99_TOLERANCE))
    return {"rps_ratio": rps_ratio, "p99_ratio": p99_ratio,
            "p50_added_ms": (gen["p50_ms"] - ref["p50_ms"]) if gen.get("p50_ms") is not None else None,
            "p99_added_ms": (gen["p99_ms"] - ref["p99_ms"]) if gen.get("p99_ms") is not None else None,
            "drift": bool(drifts)}


def onset(points: pd.DataFrame) -> float | None:
    """The generator CPU share from which every delayed level drifts (None: none drifts at
    the top). Sorted by CPU: the lowest drifting level with no clean level above it."""
    d = points[points["endpoint"] == "delay"].sort_values("gen_util")
    d = d.assign(drift=d["drift"].astype(bool))  # stored as 0/1
    if not len(d) or not d["drift"].iloc[-1]:
        return None
    clean = d[~d["drift"]]
    above = d[d["gen_util"] > clean["gen_util"].max()] if len(clean) else d
    return float(above["gen_util"].min())


def _util(point: dict) -> float:
    return point["gen_cpu_pct"] / 100 / max(point["gen_cpus"], 1)


def _known_target(server_cpus, generator_cpus, path=None) -> str | None:
    """The target of a current calibration on this machine and pinning, whichever generator's:
    every generator is calibrated against the same server."""
    row = _newest("server_pinning IS ? AND generator_pinning IS ?", (server_cpus, generator_cpus), path)
    return row["target"] if row else None


def fastest_server(server_cpus, generator_cpus, work: Path) -> tuple[str, dict]:
    """The compiled stack wrk gets the most /hello responses per second from."""
    rates = {}
    for stack in CANDIDATES:
        db = databases.prepare_database(work / f"fastest-{stack}.db")
        with servers.start_server(stack, db, cpus=server_cpus, log_path=work / f"{stack}.log") as srv:
            rates[stack] = wrk.run_point(srv, "hello", HELLO_USERS, work / f"fastest-{stack}",
                                         duration=2, warmup=1, cpus=generator_cpus)["rps"]
    return max(rates, key=rates.get), rates


def calibrate(generator: str, *, server_cpus="auto", generator_cpus="auto",
              levels=DELAY_LEVELS, duration: float = DURATION, warmup: float = WARMUP,
              path=None, target: str | None = None) -> dict:
    """Measure `generator` against wrk (see the module's docstring) and store it."""
    commands.check_generator(generator)
    if not wrk.available():
        raise load.LoadError("wrk is not installed (make setup installs Debian's package)")
    # Locust as a sweep runs it by default: one process per generator CPU (sqlitelab.core.layout),
    # so that the onset found here is the one a sweep's points are judged by
    lay = layout.resolve(server_cpus, generator_cpus, "auto")
    server_cpus, generator_cpus = lay.server_cpus, lay.generator_cpus
    processes = lay.processes if generator == "locust" else 1
    if generator == "loadgen":
        commands.build_loadgen()
    calib_id = results.new_run_id(f"calibration-{generator}")
    work = Path(tempfile.mkdtemp(prefix="lab-calibration-"))
    out = _db(path).parent / "runs" / calib_id  # beside the calibration it belongs to
    started = results.now_iso()
    rates = {}
    try:
        if target is None:  # the other generator's target, when it was calibrated here
            target = _known_target(server_cpus, generator_cpus, path)
        if target is None:
            target, rates = fastest_server(server_cpus, generator_cpus, work)
        db = databases.prepare_database(work / "target.db")
        rows = []
        with servers.start_server(target, db, cpus=server_cpus, log_path=out / "server.log") as srv:
            load.prime(srv)

            def pair(endpoint, users):
                scenario_params = {"delay_ms": DELAY_MS} if endpoint == "delay" else {}
                g = load.run_level(srv, endpoint, users, out / f"{endpoint}-u{users:04d}-{generator}",
                                   duration=duration, warmup=warmup, cpus=generator_cpus,
                                   scenario_params=scenario_params, generator=generator,
                                   processes=processes)
                r = wrk.run_point(srv, endpoint, users, out / f"{endpoint}-u{users:04d}-wrk",
                                  duration=duration, warmup=warmup, cpus=generator_cpus,
                                  scenario_params=scenario_params)
                row = {"calib_id": calib_id, "generator": generator, "endpoint": endpoint,
                       "users": users, "rps": g["rps"], "p50_ms": g["p50_ms"], "p99_ms": g["p99_ms"],
                       "errors": g["errors"], "gen_cpu_pct": g["gen_cpu_pct"], "gen_util": _util(g),
                       "server_cpu_pct": g["server_cpu_pct"], "generator_bound": g["generator_bound"],
                       "wrk_rps": r["rps"], "wrk_p50_ms": r["p50_ms"], "wrk_p99_ms": r["p99_ms"],
                       "wrk_errors": r["errors"], "wrk_cpu_pct": r["gen_cpu_pct"],
                       "wrk_server_cpu_pct": r["server_cpu_pct"],
                       **drift(g, r)}
                rows.append(row)
                return row

            hello = pair("hello", HELLO_USERS)
            last_wrk = None
            for users in levels:
                row = pair("delay", users)
                saturated = row["gen_util"] >= 0.95 and row["drift"]
                server_bound = last_wrk is not None and row["wrk_rps"] < 1.1 * last_wrk
                last_wrk = row["wrk_rps"]
                if saturated or server_bound:
                    break
    finally:
        shutil.rmtree(work, ignore_errors=True)
    points = pd.DataFrame(rows)
    at = onset(points)
    delayed = points[points["endpoint"] == "delay"]
    clean = delayed[~delayed["drift"]]
    summary = {
        "calib_id": calib_id, "generator": generator, "version": generator_version(generator),
        "reference": generator_version("wrk"), "machine": machine.machine_label(),
        "method": METHOD, "started": started, "finished": results.now_iso(),
        "git_commit": results.git_commit(), "target": target,
        "target_choice": json.dumps(rates) if rates else None,
        "server_pinning": server_cpus, "generator_pinning": generator_cpus,
        "delay_ms": DELAY_MS, "tolerance": TOLERANCE, "p99_tolerance": P99_TOLERANCE,
        "onset_util": at,
        "max_clean_util": float(clean["gen_util"].max()) if len(clean) else None,
        "max_clean_rps": float(clean["rps"].max()) if len(clean) else None,
        "hello_rps": hello["rps"], "hello_wrk_rps": hello["wrk_rps"],
        "hello_ratio": hello["rps_ratio"], "hello_gen_util": hello["gen_util"],
        "delay_levels": len(delayed), **results.lock(),
    }
    with results.writing(_db(path)) as db:
        db["calibrations"].insert(summary, pk="calib_id", replace=True, alter=True)
        db["calibration_points"].insert_all(points.to_dict("records"), alter=True)
    out.mkdir(parents=True, exist_ok=True)
    points.to_csv(out / "calibration_points.csv", index=False)
    if (tuple(levels), duration, warmup) == (DELAY_LEVELS, DURATION, WARMUP):  # METHOD's: the machine's too
        share(calib_id, _db(path), _machine_db())
    return summary


def load_calibrations(path=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every stored calibration and its points (newest first)."""
    p = _db(path)
    if not p.exists():
        return pd.DataFrame(), pd.DataFrame()
    con = sqlite3.connect(p)
    try:
        cal = pd.read_sql_query("SELECT * FROM calibrations ORDER BY started DESC", con)
        cal = pd.DataFrame([_typed(r) for r in cal.to_dict("records")], columns=cal.columns)
        pts = pd.read_sql_query("SELECT * FROM calibration_points", con)
    except (sqlite3.OperationalError, pd.errors.DatabaseError):
        return pd.DataFrame(), pd.DataFrame()
    finally:
        con.close()
    return cal, pts


def copy_calibrations(src, dst, ids=None) -> int:
    """The calibrations stored in `src` (a results.db; all, or those whose calib_id `ids` lists)
    with their points, added to `dst` (made when missing) unless `dst` has them already; as many
    as were added. The calibration the set-up measured or took on this machine (`make setup`:
    `python -m sqlitelab.calibrate ensure`) is how a test session that keeps its measurements
    in a file of its own (tests/conftest.py) reuses it instead of measuring it again."""
    cal, pts = load_calibrations(src)
    if len(cal) and ids is not None:
        cal = cal[cal["calib_id"].isin(list(ids))]
    if not len(cal):
        return 0

    def records(df: pd.DataFrame) -> list[dict]:  # NaN as NULL, numbers as Python's
        return df.astype(object).where(df.notna(), None).to_dict("records")

    with results.writing(dst) as db:  # the check and the copy under dst's one writer's lock
        if db["calibrations"].exists():
            have = {r[0] for r in db.execute("SELECT calib_id FROM calibrations")}
            cal = cal[~cal["calib_id"].isin(have)]
        if not len(cal):
            return 0
        pts = pts[pts["calib_id"].isin(set(cal["calib_id"]))] if len(pts) else pts
        db["calibrations"].insert_all(records(cal), pk="calib_id", alter=True)
        if len(pts):
            db["calibration_points"].insert_all(records(pts), alter=True)
    return len(cal)


# --------------------------------------------------------------------------- comparison

def compare(servers_: list[str], *, scenario: str = "mix", users: int = 32,
            scenario_params: dict | None = None, profile: str = "rails71",
            server_knobs: dict[str, dict] | None = None, repeats: int = 2,
            duration: float = 5.0, warmup: float = 1.0, seed_items: int = 1000,
            payload_bytes: int = 2048, server_cpus="auto", generator_cpus="auto",
            path=None, seed: int | None = None) -> pd.DataFrame:
    """The same level from wrk, loadgen and Locust, each run on a fresh copy of the database
    and a freshly started server, in shuffled order, `repeats` runs each: rps, latency, the
    generator's and the server's CPU, and the lab's flags for the lab's generators."""
    lay = layout.resolve(server_cpus, generator_cpus, 1)
    server_cpus, generator_cpus = lay.server_cpus, lay.generator_cpus
    scenario_params = {"write_share": 1.0, **(scenario_params or {})}
    reads_items = "LAB_ITEMS" in load.SCENARIOS[scenario].env  # the items the template holds
    if reads_items:
        scenario_params.setdefault("items", seed_items)
        scenario_params.setdefault("payload_bytes", payload_bytes)
    why = wrk.expressible(scenario, scenario_params)
    if why:
        raise ValueError(f"cannot compare with wrk: {why}")
    commands.build_loadgen()
    cals = {g: ensure(g, server_cpus, generator_cpus, path) for g in commands.GENERATORS}
    run_id = results.new_run_id("generator-comparison")
    out = config.RUNS_DIR / run_id
    runs = [(s, g, r) for s in servers_ for g in ("wrk", *commands.GENERATORS) for r in range(1, repeats + 1)]
    random.Random(seed).shuffle(runs)
    template, _ = databases.seeded_template(items=seed_items if reads_items else 0,
                                          payload_bytes=payload_bytes)
    rows = []
    work = Path(tempfile.mkdtemp(prefix="lab-compare-"))
    try:
        for i, (stack, gen, rep) in enumerate(runs):
            db = work / f"{i}.db"
            shutil.copyfile(template, db)
            knobs = (server_knobs or {}).get(stack, {})
            d = out / f"{i:02d}-{stack}-{gen}-r{rep}"
            with servers.start_server(stack, db, profile=profile, cpus=server_cpus,
                                      log_path=d / "server.log", **knobs) as srv:
                load.prime(srv)
                health = srv.health
                if gen == "wrk":
                    p = wrk.run_point(srv, scenario, users, d, duration=duration, warmup=warmup,
                                      cpus=generator_cpus, scenario_params=scenario_params)
                    flags = {"generator_bound": None, "generator_influenced": None, "influence": None}
                else:
                    p = load.run_level(srv, scenario, users, d, duration=duration, warmup=warmup,
                                       cpus=generator_cpus, scenario_params=scenario_params, generator=gen)
                    p["server_pinning"] = srv.pinned
                    p["knobs"] = json.dumps(health["knobs"], sort_keys=True)
                    why_ = verdicts.influence(p, cals[gen]["onset_util"])
                    flags = {"generator_bound": p["generator_bound"],
                             "generator_influenced": why_ is not None, "influence": why_}
            server_util = p["server_cpu_pct"] / 100 / len(layout.parse_cpus(server_cpus) or layout.available_cpus())
            rows.append({"run_id": run_id, "order": i + 1, "server": stack, "generator": gen,
                         "repeat": rep, "scenario": scenario, "users": users, "rps": p["rps"],
                         "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"], "errors": p["errors"],
                         "gen_cpu_pct": p["gen_cpu_pct"], "server_cpu_pct": p["server_cpu_pct"],
                         "server_util": server_util,
                         "processes": health["knobs"].get("processes"),
                         "threads": health["knobs"].get("threads"), **flags})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    df = pd.DataFrame(rows)
    results.store_table(run_id, "generator-comparison", "generator_comparison", df,
                        parameters={"servers": servers_, "scenario": scenario, "users": users,
                                    "scenario_params": scenario_params, "profile": profile,
                                    "server_knobs": server_knobs or {}, "repeats": repeats,
                                    "duration": duration, "warmup": warmup})
    return df


def comparison_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per server, one column group per generator: the runs' rps (in run order),
    CPU of generator and server, and how many runs were flagged."""
    rows = []
    for server, g in df.groupby("server", sort=False):
        row = {"server": server}
        for gen in ("wrk", *commands.GENERATORS):
            x = g[g["generator"] == gen].sort_values("order")
            row[f"{gen} rps"] = " · ".join(f"{v:,.0f}" for v in x["rps"])
            row[f"{gen} CPU %"] = " · ".join(f"{v:.0f}" for v in x["gen_cpu_pct"])
            row[f"server CPU % ({gen})"] = " · ".join(f"{v:.0f}" for v in x["server_cpu_pct"])
            if gen != "wrk":
                row[f"{gen} flagged"] = (f"bound {int(x['generator_bound'].sum())}, influenced "
                                         f"{int(x['generator_influenced'].sum())} of {len(x)}")
        rows.append(row)
    return pd.DataFrame(rows)

