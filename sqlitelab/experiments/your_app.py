"""Your own app measured the lab's way (notebook 10): levels of closed-loop load from Locust —
the lab's own user sending a scenario of scenarios.toml, or the users of your own locustfile —
each level's window measured in microseconds, its lock errors counted by your rule, and, when the
app's SQLite file is given, every acknowledged write audited against your count query, the
file's page-cache share, its WAL second by second and its integrity at the end.

    p = your_app.plan(app=apps.App.of(command="... {port} ... {db}", db="app.db",
                                      count_query="SELECT count(*) FROM orders"),
                      levels=[1, 8, 32], duration=5, warmup=1, locustfile="locustfile.py",
                      writes={"method": "POST", "path": "^/orders$", "status": [201]})
    points = your_app.measure(p, notebook=NOTEBOOK, run_id=run_id)

`plan` checks everything before any load (AppError or ValueError, one line). `measure` starts the
app (a command: on a copy of its file, so that yours is never written) or reaches it (a URL:
read-only on its live file), runs the levels and stores one point per level and repeat in the
`points` table, as a sweep does.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from sqlitelab.core import config, layout, machine, results, schema
from sqlitelab.core.failures import LockRule
from sqlitelab.core.processes import log_tail
from sqlitelab.core.vocabulary import NOT_AUDITED
from sqlitelab.experiments.sweep import SECOND_KEYS, Counts, audit
from sqlitelab.infra import apps, databases, hosts, servers
from sqlitelab.load import calibrate, commands, driver as load, scenarios, verdicts


@dataclass(frozen=True)
class Plan:
    """One measurement of an app, every part checked (`plan`)."""
    app: apps.App
    levels: tuple[int, ...]
    rates: tuple[float, ...]   # open loop: requests/s offered by `open_users` users (the lab's scenario)
    open_users: int
    duration: float
    warmup: float
    repeats: int
    scenario: str | None
    scenario_params: dict
    locustfile: Path | None
    user_classes: tuple[str, ...]
    writes: scenarios.Writes | None
    lock_rule: LockRule
    server_cpus: str | None
    generator_cpus: str | None

    @property
    def load(self) -> str:
        """What the users send, in words."""
        if self.locustfile is not None:
            return f"{self.locustfile.name} ({', '.join(self.user_classes)})"
        return scenarios.SCENARIOS[self.scenario].description + scenarios.params_words(self.scenario_params)

    def record(self) -> dict:
        """The plan as its runs row stores it."""
        a = self.app
        return {"app": a.name, "command": list(a.command) if a.command else None, "url": a.url,
                "db": os.fspath(a.db) if a.db else None, "count_query": a.count_query,
                "ready_path": a.ready_path, "env": a.env, "levels": list(self.levels),
                "rates": list(self.rates), "open_users": self.open_users if self.rates else None,
                "duration": self.duration, "warmup": self.warmup, "repeats": self.repeats,
                "scenario": self.scenario, "scenario_params": self.scenario_params,
                "locustfile": os.fspath(self.locustfile) if self.locustfile else None,
                "user_classes": list(self.user_classes),
                "writes": ({"method": self.writes.method, "path": self.writes.name,
                            "status": list(self.writes.acked)} if self.writes else None),
                "lock": {"status": [self.lock_rule.low, self.lock_rule.high],
                         "pattern": self.lock_rule.pattern}}


def writes_rule(writes: dict | None) -> scenarios.Writes | None:
    """{"method": "POST", "path": "^/orders$", "status": [201]}: the requests that acknowledge a
    write (path: a regular expression found in Locust's name for the request, by default its
    path; status: those that acknowledge it)."""
    if writes is None:
        return None
    if not isinstance(writes, dict) or set(writes) != {"method", "path", "status"}:
        raise ValueError(f"writes must be a dict of method, path and status, e.g. {{'method': 'POST', "
                         f"'path': '^/orders$', 'status': [201]}}, not {writes!r}")
    status = writes["status"]
    status = [status] if isinstance(status, int) else status
    if (not isinstance(writes["method"], str) or not writes["method"].isalpha()
            or not isinstance(writes["path"], str) or not isinstance(status, (list, tuple)) or not status
            or not all(isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in status)):
        raise ValueError(f"writes {writes!r}: method a word (POST), path a regular expression, "
                         f"status a list of HTTP statuses (100-599)")
    return scenarios.Writes(writes["method"].upper(), writes["path"], tuple(status), 1, exact=False)


def lock_rule(lock: dict | None) -> LockRule:
    """{"status": [500, 599], "pattern": "database is locked"} (either key may be left out: the
    defaults, any 5xx whose body reads like SQLite's lock errors, core.failures.LOCK_PATTERN)."""
    if lock is None:
        return LockRule()
    if not isinstance(lock, dict) or set(lock) - {"status", "pattern"}:
        raise ValueError(f"lock must be a dict of status ([low, high]) and pattern, not {lock!r}")
    low, high = lock.get("status", [500, 599])
    return LockRule(low, high, lock.get("pattern", LockRule().pattern))


def plan(*, app: apps.App, levels, duration: float, warmup: float, repeats: int = 1,
         rates=None, open_users: int = 64,
         scenario: str | None = None, scenario_params: dict | None = None,
         locustfile: Path | str | None = None, writes: dict | None = None,
         lock: dict | None = None, server_cpus: str | None = "auto",
         generator_cpus: str | None = "auto") -> Plan:
    """Every choice checked before any load, one line each."""
    if (scenario is None) == (locustfile is None):
        raise ValueError("give a scenario (one of scenarios.toml's) or a locustfile, not both "
                         "and not neither")
    if scenario is not None and scenario not in scenarios.SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(scenarios.SCENARIOS)}")
    classes: tuple[str, ...] = ()
    path = None
    if locustfile is not None:
        path = Path(locustfile).expanduser().resolve()
        classes = tuple(commands.user_classes(path))
    levels, rates = tuple(levels or ()), tuple(rates or ())
    if not all(isinstance(u, int) and not isinstance(u, bool) and u >= 1 for u in levels):
        raise ValueError(f"levels must be a list of user counts >= 1, not {list(levels)!r}")
    if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0 for r in rates):
        raise ValueError(f"rates must be a list of requests/s > 0, not {list(rates)!r}")
    if not levels and not rates:
        raise ValueError("give levels (closed loop: users), rates (open loop: requests/s) or both")
    if rates and locustfile is not None:
        raise ValueError("rates (open loop) need the lab's scenario: a locustfile's users keep their "
                         "own wait_time, so the lab cannot offer them a schedule")
    if not isinstance(open_users, int) or isinstance(open_users, bool) or open_users < 1:
        raise ValueError(f"open_users must be an integer >= 1, not {open_users!r}")
    for name, value, low in (("duration", duration, 0.0), ("warmup", warmup, 0.0)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= low \
                or (name == "duration" and value == 0):
            raise ValueError(f"{name} must be a number of seconds {'> 0' if name == 'duration' else '>= 0'}, "
                             f"not {value!r}")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, not {repeats!r}")
    rule = writes_rule(writes)
    if rule is not None and app.count_query is None:
        raise ValueError("writes are audited against the app's count_query: give db= and "
                         "count_query= too (or no writes)")
    if app.count_query is not None and rule is None:
        raise ValueError("a count_query is audited against the writes it counts: say which "
                         "requests acknowledge one (writes={'method': ..., 'path': ..., 'status': [...]})")
    lay = layout.resolve(server_cpus, generator_cpus, 1)
    if app.url is not None and server_cpus not in ("auto", None):
        raise ValueError("an app reached by its URL runs where it was started: server_cpus is "
                         "for an app the lab starts")
    return Plan(app, levels, tuple(float(r) for r in rates), open_users, float(duration),
                float(warmup), repeats, scenario,
                dict(scenario_params or {}), path, classes, rule, lock_rule(lock),
                lay.server_cpus if app.command else None, lay.generator_cpus)


# An app's points' `profile`: its settings are its own, not one of servers/profiles.toml's bundles.
OWN = "its own settings"

APP_KEYS = ("name", "command", "url", "db", "count_query", "env", "ready_path")
# The example run when nothing of your own is given (the notebook's `example = None`)
DEFAULT_EXAMPLE = "datasette"
EXAMPLES_DIR = config.PROJ_ROOT / "examples" / "your-app"


def examples() -> dict[str, dict]:
    """The two examples as a user would write them (App.of's and plan's keyword arguments), and
    the shop each serves (`shop`: databases.prepare_database's, made fresh in the run's folder).

    Apps as a user would give them: a command line with {port} and {db}, a database file, a
    locustfile or a scenario, the requests that acknowledge a write and the query that counts
    them. `datasette`: Datasette (in the lab's lock, written by nobody here) serving a copy of a
    seeded shop read-only (immutable), read by a locustfile written the way Locust's documentation
    writes one (examples/your-app/datasette_locustfile.py). `bundled`: the lab's own go-nethttp
    server started through that same command path — as your app would be, with no LAB_* variable
    set by the lab — sending seed 002's mix, its writes audited by your rule."""
    datasette = Path(sys.executable).with_name("datasette")
    go = config.SERVERS_DIR / "go-nethttp" / "run"
    return {
        "datasette": {
            "name": "Datasette, read-only",
            "command": f"{datasette} serve --immutable {{db}} --host 127.0.0.1 --port {{port}}",
            "shop": {"users": 10_000, "items": 1_000, "user_bytes": 200},  # the locustfile's USERS, ITEMS
            "locustfile": EXAMPLES_DIR / "datasette_locustfile.py",
        },
        "bundled": {
            "name": f"{servers.stack_title('go-nethttp')}, started by its command",
            "command": f"env LAB_PORT={{port}} LAB_DB={{db}} {go}",
            # FULL: every commit waits for the disk, so the server, not Locust, sets the pace
            "env": {"LAB_PRAGMAS": "journal_mode=wal,synchronous=full", "LAB_TXN_MODE": "immediate",
                    "LAB_BUSY": "busy_timeout:5000"},
            "shop": {"items": 1_000},
            "scenario": "mix", "scenario_params": {"write_share": 0.5},
            "writes": {"method": "POST", "path": "/items$", "status": [201]},
            "count_query": "SELECT count(*) FROM items",
        },
    }


LOAD_KEYS = ("locustfile", "scenario", "scenario_params", "writes", "lock")
# The settings a notebook may hand over as JSON text (papermill's -p passes a string): name → the
# type it must be
JSON_KEYS = {"env": dict, "scenario_params": dict, "writes": dict, "lock": dict}


def from_json(name: str, value):
    """A setting given as JSON text (`-p writes '{"method": "POST", ...}'`) as the value it
    spells; any other value as it is. Text that is not JSON of the setting's type: one line."""
    want = JSON_KEYS.get(name)
    if want is None or not isinstance(value, str):
        return value
    try:
        out = json.loads(value)
    except ValueError as e:
        raise ValueError(f"{name} {value!r} is text that is not JSON ({e.msg}): give a "
                         f"{want.__name__}, or its JSON") from None
    if not isinstance(out, want):
        raise ValueError(f"{name} {value!r} must be a {want.__name__} (JSON {{...}}), "
                         f"not {type(out).__name__}")
    return out


def setup(example: str | None, work_dir: Path, **given) -> tuple[apps.App, dict, str | None]:
    """The app and what its users send: yours (`given`: App.of's keywords and plan's load
    keywords; None values are left out, JSON text read as its value: from_json), or, when nothing
    of yours is given, one of the examples (`example`, DEFAULT_EXAMPLE when None; its shop made
    fresh in `work_dir`). An example named beside settings of your own is refused in one line
    naming both: the lab never measures an app you did not mean. Returns the checked App, plan's
    load keywords and the example that runs (None: your app)."""
    unknown = sorted(set(given) - set(APP_KEYS) - set(LOAD_KEYS))
    if unknown:
        raise ValueError(f"unknown app settings {unknown}; known: {', '.join(APP_KEYS + LOAD_KEYS)}")
    own = {k: from_json(k, v) for k, v in given.items() if v is not None}
    found = examples()
    if example is not None and example not in found:
        raise ValueError(f"example must be one of {', '.join(found)} or None (your own app), "
                         f"not {example!r}")
    if example is not None and own:
        raise ValueError(f"example {example!r} and settings of your own ({', '.join(own)}): one or the "
                         f"other — example = None measures your app, or leave yours out to run the example")
    if not own:
        example = example or DEFAULT_EXAMPLE
        own = dict(found[example])
        shop = own.pop("shop")
        own["db"] = databases.prepare_database(Path(work_dir) / "shop.db", **shop)
    elif "command" not in own and "url" not in own:
        raise ValueError(f"your settings ({', '.join(own)}) name no app: give its command (the lab "
                         f"starts it) or its url (it is listening on loopback)")
    app = apps.App.of(**{k: own[k] for k in APP_KEYS if own.get(k) is not None})
    return app, {k: own[k] for k in LOAD_KEYS if own.get(k) is not None}, example


def figures_dir(example: str | None, run_dir: Path) -> Path | None:
    """Where a run's figures go: an example's into the collection's figures/ (None: the default),
    your app's into its run's folder (`run_dir`/figures), one folder per run, so that no app's
    figures overwrite another's or the collection's."""
    return None if example is not None else Path(run_dir) / "figures"


def copy_database(src: Path, dst: Path) -> Path:
    """A copy of the app's file that the run may write (SQLite's backup: consistent with a WAL
    beside it, the journal mode kept); any old copy replaced. A missing `src` leaves no file at
    `dst` and an empty one an empty file: the app creates its database there."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not src.exists() or src.stat().st_size == 0:
        if src.exists():
            dst.touch()
        return dst
    with apps.read_only(src) as con:
        out = sqlite3.connect(dst)
        try:
            con.backup(out)
        finally:
            out.close()
    return dst


# How far the lab's rate and plain Locust's may differ on the same locustfile and app and still be
# called the same: this machine's run-to-run spread (issue 32: about ±15 % between runs an hour
# apart). Each counts its own way (the lab: a window after the spawn; Locust: its whole run).
PLAIN_AGREEMENT = 0.15


def plain_locust(p: Plan, srv, users: int, out_dir: Path) -> dict:
    """The same locustfile run by Locust alone (`locust --headless`, its own statistics), at
    `users`, for the warm-up and window of a level, against the running app: the row Locust's CSV
    gives for all requests. Refused when the lab's levels saw the file send elsewhere."""
    seconds = math.ceil(p.warmup + p.duration)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd, pinned = commands.plain_locust_command(p.locustfile, users, srv.url, seconds, out_dir,
                                                p.generator_cpus)
    t = time.perf_counter()
    started = hosts.start(hosts.Host("local"), cmd, dict(os.environ), out_dir / "plain.log")
    try:
        code = started.popen.wait(timeout=seconds + commands.STOP_TIMEOUT + 60)
    finally:
        hosts.stop(started)
    stats = out_dir / "plain_stats.csv"
    if code != 0 or not stats.exists():
        raise load.LoadError(f"plain Locust failed (exit {code}):\n{log_tail(out_dir / 'plain.log')}")
    row = pd.read_csv(stats).set_index("Name").loc["Aggregated"]
    return {"generator": "locust (plain)", "users": users, "duration_s": float(seconds),
            "window_s": time.perf_counter() - t, "requests": int(row["Request Count"]),
            "rps": float(row["Requests/s"]), "errors": int(row["Failure Count"]),
            "mean_ms": float(row["Average Response Time"]), "p50_ms": float(row["50%"]),
            "p95_ms": float(row["95%"]), "p99_ms": float(row["99%"]),
            "max_ms": float(row["Max Response Time"]), "generator_pinning": pinned}


def agreement(lab_rps: float, plain_rps: float) -> str:
    """'the same within noise' when the two rates differ by at most PLAIN_AGREEMENT of the
    lab's, else which is higher and by how much."""
    ratio = plain_rps / lab_rps if lab_rps else float("inf")
    if abs(ratio - 1) <= PLAIN_AGREEMENT:
        return f"the same within noise (plain Locust {ratio:.2f}× the lab's rate; noise ±{PLAIN_AGREEMENT:.0%})"
    return (f"plain Locust {ratio:.2f}× the lab's rate: {'higher' if ratio > 1 else 'lower'} than "
            f"the noise (±{PLAIN_AGREEMENT:.0%}) explains")


def measure(p: Plan, *, notebook: str, run_id: str, parameters: dict | None = None,
            results_db: Path | None = None, runs_dir: Path | None = None,
            progress: bool = True, calibration: bool = True,
            plain_users: int | None = None) -> pd.DataFrame:
    """Run every level of the plan against the app and store its points (the `points` table,
    with their seconds); returns them. The app the lab started is stopped by its PID at the end,
    on an exception or an interrupt; its copy of the database is kept in the run's folder.
    `calibration=False`: no onset from the generator's calibration (the CPU rules still flag).
    `plain_users`: with a locustfile, the same file then run by Locust alone at that many users
    (plain_locust), stored in `crosschecks` beside the lab's level. While a replay is on
    (results.replay), the points the replayed run stored, measuring nothing."""
    if results.replaying():
        return results.replayed(run_id, parameters)
    run_dir = Path(runs_dir or config.RUNS_DIR) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    label = machine.machine_label()
    described = results.describe(notebook, run_id, None, parameters)
    run = {"run_id": run_id, **described, "started": results.now_iso(), "parameters": parameters or {},
           "git_commit": results.git_commit(), "machine": label, "machine_info": machine.machine(),
           "versions": results.versions(), "server_cpus": p.server_cpus,
           "generator_cpus": p.generator_cpus, "scenario": p.scenario or "locustfile",
           "sweep": p.record()}
    t_run = time.perf_counter()
    onset = None
    t = time.perf_counter()
    if p.scenario is not None and calibration:  # the lab's own user: its calibration against wrk here
        onset = calibrate.ensure("locust", p.server_cpus, p.generator_cpus, progress=progress)["onset_util"]
    run["calibration_seconds"] = results.elapsed(t)
    db = p.app.db
    if db is not None and p.app.command is not None:
        db = copy_database(db, run_dir / "app" / db.name)  # its own name: an app may route by it
    counts = Counts(db, apps.count) if db is not None else None  # the app's query, read-only
    points: list[dict] = []
    todo = [(u, None) for u in p.levels] + [(p.open_users, r) for r in p.rates]
    bar = tqdm(total=len(todo) * p.repeats, desc=p.app.name, disable=not progress, mininterval=0.5)
    with contextlib.ExitStack() as stack:
        if p.app.command is not None:
            srv = stack.enter_context(apps.start_app(p.app, db, cpus=p.server_cpus,
                                                     log_path=run_dir / "app.log", timeout=120))
            apps.check_started(p.app, db)  # the file it may just have made, and its count query
        else:
            srv = apps.reach(p.app)
        try:
            for users, rate in todo:
                for rep in range(1, p.repeats + 1):
                    bar.set_postfix_str(f"{users} users" + (f" at {rate:g}/s" if rate else "")
                                        + f", repeat {rep}")
                    points.append(_level(p, srv, db, counts, users, rep, run_dir, run_id, label,
                                         onset, rate))
                    bar.update(1)
        finally:
            bar.close()
        plain = None
        if plain_users is not None and p.locustfile is not None:
            if any(pt.get("off_host") for pt in points):
                raise ValueError("the locustfile sent requests off the app: the lab does not run it "
                                 "with Locust alone (nothing would keep them on this machine)")
            plain = plain_locust(p, srv, plain_users, run_dir / "plain-locust")
    integrity = databases.integrity_check(db) if db is not None else None
    for pt in points:
        pt["integrity"] = integrity
        pt["audit_ok"] = bool(pt["audit_ok"] and integrity in (None, "ok"))
        pt.update(described)
    run.update({"finished": results.now_iso(), "points": len(points),
                "wall_seconds": results.elapsed(t_run)})
    results.store_run(run, [{k: v for k, v in pt.items() if k != "seconds"} for pt in points], results_db)
    per_second = [{**row, **{k: pt.get(k) for k in SECOND_KEYS}} for pt in points
                  for row in pt.get("seconds") or ()]
    if per_second:
        results.store_rows("seconds", per_second, results_db)
    if plain is not None:
        results.store_rows("crosschecks", [{
            "run_id": run_id, **described, "server": p.app.name, "profile": OWN, "machine": label,
            "scenario": "locustfile", "skipped": None, **plain, "acked_responses": None,
            "unknown_outcomes": None, "rows_written": None, "audit_rule": None, "audit_ok": None,
            "integrity": integrity}], results_db)
    return pd.DataFrame(points)


def _level(p: Plan, srv, db, counts, users: int, rep: int, run_dir: Path, run_id: str,
           label: str, onset, rate: float | None = None) -> dict:
    """One level: counted, cached, loaded, counted again once its in-flight writes settle, audited."""
    query = p.app.count_query
    before = counts.before(query) if counts else 0
    cache_before = databases.page_cache(db) if db is not None else None
    level_dir = run_dir / "levels" / (f"u{users:04d}" + (f"-at{rate:g}" if rate else "") + f"-r{rep}")
    window = load.run_level(srv, p.scenario, users, level_dir, duration=p.duration,
                            warmup=p.warmup, cpus=p.generator_cpus,
                            scenario_params=p.scenario_params, generator="locust",
                            locustfile=p.locustfile, writes=p.writes, lock_rule=p.lock_rule,
                            rate=rate)
    window.pop("during", None)  # nothing runs during an app's level (operations are notebook 08's)
    written = (counts.settled(query, before, window.get("inflight_writes") or 0, 1)
               if counts and query else 0)
    cache_after = databases.page_cache(db) if db is not None else None
    checked = (audit(p.writes, window, written, {}) if p.writes is not None else
               {"rows_written": None, "expected_rows": None, "audit_rule": NOT_AUDITED,
                "unacked_rows": None, "audit_ok": True})
    if window.get("off_host"):
        checked = {**checked, "audit_ok": False,
                   "audit_rule": checked["audit_rule"] + f", {window['off_host']} requests off the app refused"}
    point = schema.assemble(
        window, checked,
        {"run_id": run_id, "server": p.app.name, "profile": OWN, "scenario": p.scenario or "locustfile",
         "repeat": rep, "integrity": None, "machine": label, "database": "sqlite" if db else None,
         "db_mib": cache_before[1] / 2**20 if cache_before else None,
         "db_cached_before": cache_before[0] / cache_before[1] if cache_before and cache_before[1] else None,
         "db_cached_after": cache_after[0] / cache_after[1] if cache_after and cache_after[1] else None,
         "server_pinning": srv.pinned, "rate": rate})
    why = verdicts.influence(point, onset)
    return {**point, "generator_influenced": why is not None, "influence": why,
            "gen_onset_util": onset, "headline": True, "replaced_by": None}
