"""Driving load: one generator subprocess per level (Locust by default; `generator="loadgen"`
for the lab's Go generator when one Locust core would be the limit), or one generator process
stepping through a scenario's levels (`Session`), an exact measurement window, merged
HdrHistograms, server and generator CPU, and the audit of every acknowledged write. Both
generators write the same per-process measurement file.

    df = sweep(notebook=NOTEBOOK, servers=["python-fastapi"], profiles=["rails71"],
               scenario="rails-writes", levels=[1, 2, 4], duration=10, repeats=3)

    with Session(server, "hello", run_dir / "locust-session", cpus="1") as gen:
        for users in (1, 2, 4):
            point = gen.level(users, run_dir / f"u{users}", duration=2, warmup=0.5)

A session (one local generator process, closed loop, windows of a duration: sweep's
`Spec.steps_levels`) saves each level Locust's start-up (~1 s of imports) and exit (~0.3 s),
as long as a short window (loadgen's: ~0.25 s). Each level is still measured as a process of
its own measures it: its own folder with its own proc-<pid>.json (Locust's also its
window-<pid>.json and locust_stats.csv), share of the process's log (<generator>.log) and
spec, its window (Locust's opening `warmup` s after its users have spawned; loadgen's fixed
from the level's start as run_level fixes it), its own CPU samples, merge and timing. At its
end the load stops as at a process's exit (each user finishes the request it is in,
--stop-timeout at most; what is left is its `run_inflight`), the users' connections are
closed, the files written, and the process waits with nothing in flight, so the sweep's audit
counts and page-cache probes between levels read a quiet server. The protocol (recorder.py's
docstring, loadgen's usage): the first `level()` starts the process with its level in the
environment and LAB_SESSION=<out_dir>; each later one writes `<out_dir>/command-<n>.json`
(Locust: {"users", "out_dir", "warmup", "duration"}; loadgen: {"users", "out_dir", "t0",
"t1", "max_seconds"}) and the end of the session {"quit": true}, each written aside and
renamed into place. A level's end is its `proc-<pid>.json`, awaited while the process lives
and for at most the bound run_level gives a process (its start-up allowance, warm-up and
window, and 90 s); a process that exits first, or the bound, raises a LoadError with its
log's tail and ends the session. Leaving the `with` block however it ends (an exception,
KeyboardInterrupt) stops the process by its PID (hosts.stop), as run_level stops its
processes; a normal end tells it to quit first.

Connections (`keepalive`, env LAB_KEEPALIVE): by default each user keeps one connection alive
(hey, oha, wrk); `keepalive=False` opens a new TCP connection for every request and every hop
of a followed redirect, sends `Connection: close` and closes it after the response, as
`oha --disable-keepalive` does (seed 001). Every point records `keepalive`.

Two accountings of the same level. The lab's own counts only requests that start and finish
inside the window T0..T1 (`requests`, `rps`, `mean_ms`, the percentiles, `max_ms`, …; every
outcome, failures included). `hey` (seed 000; rakyll/hey requester/report.go) reports the
whole run instead, and every point carries that too, from the same requests:

- `hey_results`: every request that finished during the run (warm-up, window, and those users
  finish after the close), whatever its outcome: a response of any status or a transport error
  (connection error, timeout); hey's numRes. Equals the sum of the point's `run_counts`, whose
  status 0 are the transport errors. Requests a generator abandoned at its stop timeout are
  not in it (their outcome is unknown).
- `hey_seconds`: from the earliest start to the latest end of those requests, over every
  generator process (hey's Total, which runs until every worker has finished its request, so
  a stall at the close lengthens it; hey starts it as it launches its workers, a moment
  before their first request).
- `hey_rps` = hey_results / hey_seconds (hey's Requests/sec).
- `hey_mean_ms`, `hey_max_ms`: mean and maximum latency of the requests with an HTTP status,
  i.e. without a transport error — a 500 counts (hey's Average and Slowest).
All are None when no request finished (hey_mean_ms and hey_max_ms also when none had a status).
The per-process file carries them as `run_first_start`, `run_last_end` (epoch s),
`run_results`, `run_ok` (requests with an HTTP status), `run_sum_us` and `run_max_us` (over
`run_ok`); merge_level adds them up.

Open loop (`rate`, requests/s over all generator processes; `arrivals` constant|poisson):
requests are due at a schedule's times whether or not the server has answered the earlier
ones; `users` is then the most in flight (each its own connection). Latencies, percentiles and
the per-second series count from each request's due time, so a server that falls behind is
charged for its queue (no coordinated omission: a closed-loop user would have waited instead
of sending). Every open-loop point also says `offered_rps` (due in the window / its length),
`late` (sent more than the generator's 5-ms tolerance after due), `max_lag_ms` and `backlog`
(due before the close, never sent): `vocabulary.keeps_up` reads them.

Every point carries its window second by second (`seconds`, stored in results.db's `seconds`
table by the sweep): completions, errors by kind, late requests, p50/p99/max of that second's
own HdrHistogram, the server's CPU and RSS and the SQLite WAL's size over that second.
"""
from __future__ import annotations

import csv
import urllib.parse
import urllib.request
import json
import math
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hdrh.histogram import HdrHistogram

from sqlitelab.core import layout, schema
from sqlitelab.core.failures import LockRule
from sqlitelab.infra import hosts, servers
from sqlitelab.load import commands, scenarios, verdicts
from sqlitelab.load.sampler import RemoteTree, Sampler
from sqlitelab.core.processes import free_port, log_tail  # (names: `processes` is an argument here)
from sqlitelab.infra import link as links

# The scenarios (what each user sends, which response acknowledges a write) are declared once
# in scenarios.toml; run_level compiles the level's spec for the generator (scenarios.compile).
Scenario = scenarios.Scenario
SCENARIOS = scenarios.SCENARIOS

PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}


class LoadError(RuntimeError):
    pass


# --------------------------------------------------------------------------- one level

def run_level(server: servers.Server, scenario: str, users: int, out_dir: Path, *,
              duration: float = 10.0, warmup: float = 2.0, requests: int | None = None,
              max_duration: float = 300.0, processes: int = 1, cpus: str | None = None,
              scenario_params: dict | None = None, startup: float | None = None,
              generator: str = "locust", keepalive: bool = True,
              workers: "list[str | hosts.Host] | None" = None,
              link_delay_us: int | None = None, rate: float | None = None,
              arrivals: str = "constant", arrival_seed: int | None = None,
              during=None, locustfile: Path | None = None,
              writes: "scenarios.Writes | None" = None,
              lock_rule: LockRule | None = None) -> dict:
    """Drive `users` closed-loop users of `scenario` at `server` and measure one window.

    The window opens `warmup` seconds after all users should have spawned and closes after
    `duration` seconds, or (when `requests` is given) once that many requests have been
    recorded, bounded by `max_duration`. A generator whose window was fixed in advance and had
    closed before it started sent nothing: its files go to `started-late/` and the level is
    measured again, once (a LoadError when it is late again, or when `during` would run twice).
    Returns the merged measurement. `keepalive=False`:
    a new connection per request (`oha --disable-keepalive`, see the module's docstring).
    `workers`: generator hosts (sqlitelab.infra.hosts): Locust runs distributed, its master here and
    worker processes on each host (`commands.worker_processes` per host); none: this machine alone.
    `link_delay_us`: the generator reaches the server through a link (sqlitelab.infra.link's proxy,
    on the generator's CPUs) that holds each direction that many µs (0: the proxy alone);
    None: directly. The point records what the link applied.
    `rate`: open loop at that many requests/s over every generator process (`arrivals`
    constant or poisson, `arrival_seed` for a reproducible Poisson schedule of one process; see
    the module's docstring); None: closed loop. `during(t0, t1)`: called in a thread of its own
    once the window is known, with a dict whose "stop" is set when the level ends early (an
    operation at a marked second, sqlitelab.infra.operations); what it returns is the point's
    `during`, and it must end by itself (it is joined after the level).
    `locustfile` (with `scenario` None): someone's own locustfile instead of a lab scenario, its
    users measured as the lab's are (sqlitelab.load.userfile; Locust, on this machine); `writes`:
    which of its requests acknowledge a write (the audit's rule); `lock_rule`: which responses
    are lock errors (sqlitelab.core.failures.LockRule; default: the lab's servers' 503).
    """
    lv = _Level(scenario, users, duration, warmup, requests, max_duration, processes, cpus,
                scenario_params, generator, keepalive, link_delay_us, rate, arrivals, arrival_seed,
                locustfile, lock_rule)
    workers, per_host, total = _check_run_level(server, lv, workers)
    out_dir.mkdir(parents=True, exist_ok=True)
    length = max_duration if requests else duration
    after_spawn, startup = _window_opening(generator, startup, users)
    if generator == "loadgen":
        commands.build_loadgen()  # seconds the first time, a stat() after
    back = {h: h.reach_back() for h in workers}  # where each worker host finds the master
    for attempt in (1, 2):
        # a server on an ssh host: its CPU and RSS sampled there, started before the clock (~1 s)
        remote = RemoteTree(server, out_dir / "server-cpu.log") if server.runner.kind == "ssh" else None
        launch = time.time()
        t0 = launch + startup + warmup   # after_spawn: the latest it can open
        t1 = t0 + length
        env = _level_env(out_dir, lv, total, after_spawn, length, t0, t1)
        spec = _users_spec(env, scenario, locustfile, out_dir, remote)
        run = _LevelRun(remote)
        try:  # from the moment a link or generator process exists: an interrupt below still stops it
            target = _reach_server(run, server, link_delay_us, cpus, out_dir, env)
            cmd, pinned, worker_cmds = _generator_commands(lv, target, t1 - launch, total, out_dir, spec,
                                                           workers, back, per_host)
            proc = _start_generators(run, generator, cmd, env, workers, worker_cmds, out_dir)
            _start_sampling(run, server, out_dir, after_spawn, t0, t1, during)
            exited = _await_generators(run, proc, workers, out_dir, t1 - launch + 90)
        finally:  # also on a timeout or KeyboardInterrupt: stop every generator process by its PID
            _stop_level(run)
        late = None if after_spawn else started_after_window(out_dir, t1)
        if late is None:
            break
        # nothing was sent: measured again, once, allowing twice the start-up this one took
        if attempt == 2 or during is not None:
            raise LoadError(f"{generator} started {late - launch:.1f} s after its launch, after its "
                            f"window had closed{' again' if attempt == 2 else ''}: nothing was "
                            "measured (a machine too busy to start it in time)")
        set_aside(out_dir, "started-late")
        startup = 2 * (late - launch)
    if after_spawn:
        t0, t1 = spawned_window(out_dir, out_dir / "locust.log", proc.returncode)
    if "error" in run.during_out:
        raise run.during_out["error"]
    window = merge_level(out_dir, run.sampler, server, scenario, users, total, pinned,
                         requests, (t0, t1), proc.returncode, generator, keepalive, writes)
    return level_point(window, level_timing(out_dir, launch, t0, warmup, exited, time.time()),
                       during=run.during_out.get("result"), workers=workers,
                       link_delay_us=link_delay_us, link_stats=run.ln.stats() if run.ln else {})


@dataclass(frozen=True)
class _Level:
    """A level as run_level was asked for it (its arguments: run_level's docstring)."""
    scenario: str | None
    users: int
    duration: float
    warmup: float
    requests: int | None
    max_duration: float
    processes: int
    cpus: str | None
    scenario_params: dict | None
    generator: str
    keepalive: bool
    link_delay_us: int | None
    rate: float | None
    arrivals: str
    arrival_seed: int | None
    locustfile: Path | None
    lock_rule: LockRule | None


@dataclass
class _LevelRun:
    """What a level has started so far, for `_stop_level` to stop however the level ends."""
    remote: RemoteTree | None  # the ssh host's sampling of its server
    # the generator (or Locust's master) first, then workers
    started: list[hosts.Started] = field(default_factory=list)
    sampler: Sampler | None = None
    during_thread: threading.Thread | None = None
    during_out: dict = field(default_factory=dict)
    ln: links.DelayLink | None = None


def _check_run_level(server: servers.Server, lv: _Level,
                     workers) -> tuple[list[hosts.Host], dict, int]:
    """run_level's arguments, refused before anything starts. Returns the generator hosts, the
    processes on each and the generator processes in all."""
    if lv.locustfile is not None:
        check_locustfile(lv.locustfile, lv.scenario, lv.generator, workers, lv.rate)
        hosts.check_target(server.host, server.runner)
    else:
        check_generator_args(server, lv.scenario, lv.keepalive, lv.scenario_params)
    check_level(lv.users, lv.processes, lv.duration, lv.warmup)
    commands.check_generator(lv.generator, lv.processes)
    check_rate(lv.rate, lv.arrivals, lv.requests)
    workers = [hosts.Host.parse(h) for h in (workers or [])]
    if workers and lv.generator != "locust":
        raise ValueError("generator hosts run Locust workers: use generator='locust'")
    for h in workers:
        h.check()
    if lv.link_delay_us is not None:
        links.check_delay(lv.link_delay_us)
    if lv.link_delay_us is not None and workers:
        raise ValueError("a delayed link is for a generator on this machine, not for workers")
    per_host = commands.worker_processes(lv.processes, workers) if workers else {}
    total = sum(per_host.values()) if workers else lv.processes
    return workers, per_host, total


def _window_opening(generator: str, startup: float | None, users: int) -> tuple[bool, float]:
    """Whether the window opens after the users have spawned (Locust without a `startup`), and
    the start-up allowed before it opens at the latest."""
    # Locust opens the window `warmup` s after its last user has spawned — one process, or a
    # master once every worker's users have (LAB_WINDOW_AFTER_SPAWN): its start-up, ~0.5 s of
    # imports here and seconds for workers to join, costs what it takes. With an explicit
    # `startup` (and for loadgen, which spawns at once) the window is fixed in advance; a late
    # spawn is then caught by `ramp_in_window`.
    after_spawn = generator == "locust" and startup is None
    if startup is None:
        startup = commands.SPAWN_BOUND if after_spawn else spawn_allowance(users)
    return after_spawn, startup


def _level_env(out_dir: Path, lv: _Level, total: int, after_spawn: bool, length: float,
               t0: float, t1: float) -> dict[str, str]:
    """A level's generator environment: generator_env with the count per process (of `total`),
    each process's share of an open loop's rate, the window (Locust's after its users spawned,
    or fixed at t0..t1) and the lock rule."""
    env = generator_env(out_dir, lv.scenario_params, lv.keepalive,
                        str(math.ceil(lv.requests / total)) if lv.requests else "0")
    if lv.rate is not None:  # each process offers its share
        env.update({"LAB_ARRIVAL_RATE": repr(lv.rate / total), "LAB_ARRIVALS": lv.arrivals})
        if lv.arrival_seed is not None:
            env["LAB_ARRIVAL_SEED"] = str(lv.arrival_seed)
    if after_spawn:
        env["LAB_WINDOW_AFTER_SPAWN"] = f"{lv.warmup!r},{length!r}"
    else:
        env.update({"LAB_T0": repr(t0), "LAB_T1": repr(t1)})
    if lv.lock_rule is not None:
        env.update(lv.lock_rule.env())
    return env


def _users_spec(env: dict[str, str], scenario: str, locustfile: Path | None, out_dir: Path,
                remote: RemoteTree | None) -> Path | None:
    """What the users send, into `env`: someone's locustfile, or the scenario's spec written
    into `out_dir` (returned; None for a locustfile). A spec that fails stops `remote`."""
    if locustfile is not None:
        env["LAB_USER_LOCUSTFILE"] = str(Path(locustfile).resolve())
        return None
    # what every user sends, compiled once for both generators (a bad LAB_* value fails here)
    try:
        spec = scenarios.write_spec(scenario, env, out_dir / "scenario.json")
    except BaseException:
        if remote is not None:
            remote.stop()
        raise
    env["LAB_SPEC"] = str(spec)
    return spec


def _reach_server(run: _LevelRun, server: servers.Server, link_delay_us: int | None,
                  cpus: str | None, out_dir: Path, env: dict[str, str]) -> str:
    """The URL the generator sends to: the server's, or a delayed link's in front of it (opened
    here, kept in `run`); `env` told its host."""
    if link_delay_us is not None:
        run.ln = links.DelayLink(server.url, link_delay_us, cpus, out_dir).__enter__()
    target = run.ln.url if run.ln else server.url
    env["LAB_APP_HOST"] = urllib.parse.urlsplit(target).netloc  # where a user's file may send
    return target


def _generator_commands(lv: _Level, target: str, run_s: float, total: int, out_dir: Path,
                        spec: Path | None, workers: list[hosts.Host], back: dict,
                        per_host: dict) -> tuple[list[str], str | None, list[list[str]]]:
    """The level's generator command (Locust's master with `workers`), its CPUs pinned, and
    each worker host's command (the level's spec pushed to them). `run_s`: from the launch to
    the window's close."""
    worker_cmds = []
    if workers:
        port = free_port()
        bind = next(iter(set(back.values()))) if len(set(back.values())) == 1 else "*"
        cmd, pinned = commands.locust_master_command(lv.users, target, run_s + 5, total, bind,
                                                     port, out_dir, lv.cpus)
        # a worker on its own machine: not pinned here, its CPU reported by itself
        worker_cmds = [commands.locust_worker_command(back[h], port, per_host[h],
                                                      lv.cpus if h.same_machine else None)[0]
                       for h in workers]
        for h in workers:
            hosts.push(h, spec)  # an ssh host reads the level's spec at the same path
    elif lv.generator == "locust":
        cmd, pinned = commands.locust_command(lv.scenario, lv.users, target, run_s + 5,
                                              lv.processes, out_dir, lv.cpus)
    else:
        cmd, pinned = commands.loadgen_command(spec, lv.users, target,
                                               run_s + 5 + commands.STOP_TIMEOUT, lv.cpus)
    return cmd, pinned, worker_cmds


def _start_generators(run: _LevelRun, generator: str, cmd: list[str], env: dict[str, str],
                      workers: list[hosts.Host], worker_cmds: list[list[str]],
                      out_dir: Path) -> subprocess.Popen:
    """Start the generator here, then each host's workers, each kept in `run` as it starts.
    Returns the generator's process."""
    local = hosts.Host("local")
    run.started.append(hosts.start(local, cmd, env, out_dir / f"{generator}.log"))
    proc = run.started[0].popen
    for i, (h, wcmd) in enumerate(zip(workers, worker_cmds)):
        wenv = env if h.same_machine else {**env, "LAB_REMOTE_HOST": str(h)}
        run.started.append(hosts.start(h, wcmd, wenv, out_dir / f"{generator}-worker{i + 1}.log"))
    return proc


def _start_sampling(run: _LevelRun, server: servers.Server, out_dir: Path, after_spawn: bool,
                    t0: float, t1: float, during) -> None:
    """Start sampling the server and the generator over the window (Locust's once its file
    says it, or t0..t1), and `during` in a thread of its own; both kept in `run`."""
    # sampled here: every process on this machine, and the link (the generator's side)
    pids = [p.popen.pid for p in run.started if p.host.same_machine] + ([run.ln.pid] if run.ln else [])
    if after_spawn:
        run.sampler = Sampler(server, pids, None, None, window=lambda: spawn_window(out_dir),
                              remote=run.remote)
    else:
        run.sampler = Sampler(server, pids, t0, t1, remote=run.remote)
    run.sampler.start()
    if during is not None:
        run.during_thread = threading.Thread(target=_during, args=(during, run.sampler, run.during_out),
                                             daemon=True)
        run.during_thread.start()


def _await_generators(run: _LevelRun, proc: subprocess.Popen, workers: list[hosts.Host],
                      out_dir: Path, bound: float) -> float:
    """Wait for the generator (at most `bound` s) and its workers to exit, and fetch the ssh
    hosts' files. Returns when they had exited."""
    proc.wait(timeout=bound)
    for w in run.started[1:]:  # workers quit at the window's close, before the master
        w.popen.wait(timeout=commands.STOP_TIMEOUT + 10)
    exited = time.time()
    for h in workers:  # an ssh host's measurement files, into the level's folder
        hosts.fetch(h, out_dir, "proc-*.json")
    return exited


def _stop_level(run: _LevelRun) -> None:
    """Stop whatever the level started, however far it got: its generator processes by their
    PIDs, `during`, the link, and the sampling."""
    for p in run.started:
        hosts.stop(p)
    if run.during_thread is not None:  # it stops what it started (operations.Operation)
        run.during_out.setdefault("stop", True)
        run.during_thread.join(600)
    if run.ln is not None:
        run.ln.stop()
    if run.sampler is not None and run.sampler.ident is not None:
        run.sampler.stop()
    elif run.remote is not None:
        run.remote.stop()


def check_generator_args(server: servers.Server, scenario: str, keepalive: bool,
                         scenario_params: dict | None) -> None:
    """What a generator is told for every level, refused in one line before anything starts."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if not isinstance(keepalive, bool):
        raise ValueError(f"keepalive must be True or False, not {keepalive!r}")
    if any(k.lower() == "keepalive" for k in scenario_params or {}):
        raise ValueError("pass keepalive=True/False, not scenario_params['keepalive']")
    hosts.check_target(server.host, server.runner)


def check_locustfile(locustfile: Path, scenario, generator: str, workers, rate) -> None:
    """A user's own locustfile runs in Locust on this machine, closed loop, instead of a scenario."""
    if scenario is not None:
        raise ValueError("give a scenario or a locustfile, not both")
    if not Path(locustfile).is_file():
        raise ValueError(f"locustfile {os.fspath(locustfile)!r} is not a file")
    if generator != "locust" or workers or rate is not None:
        raise ValueError("a locustfile runs in Locust on this machine, closed loop "
                         "(generator='locust', no workers, no rate)")


def check_level(users: int, processes: int, duration: float, warmup: float) -> None:
    if users < 1 or processes < 1 or duration <= 0 or warmup < 0:
        raise ValueError("users and processes must be >= 1, duration > 0, warmup >= 0")


# What a level sets in its generator's environment: never inherited from the caller's.
LEVEL_VARS = ("LAB_OUT_DIR", "LAB_TARGET", "LAB_ARRIVAL_RATE", "LAB_ARRIVALS", "LAB_ARRIVAL_SEED",
              "LAB_T0", "LAB_T1", "LAB_WINDOW_AFTER_SPAWN", "LAB_SESSION", "LAB_SPEC",
              "LAB_USER_LOCUSTFILE", "LAB_APP_HOST", "LAB_LOCK_STATUS", "LAB_LOCK_PATTERN")


def generator_env(out_dir: Path, scenario_params: dict | None, keepalive: bool,
                  target: str = "0") -> dict[str, str]:
    """A generator's environment for a level in `out_dir`: this process's, without any variable
    a level sets, with the scenario's parameters, keep-alive and the count per process
    (`target`, LAB_TARGET: "0" for a window of a duration)."""
    return {**{k: v for k, v in os.environ.items() if k not in LEVEL_VARS},
            "LAB_OUT_DIR": str(out_dir), "LAB_TARGET": target, **scenarios.lab_env(scenario_params),
            "LAB_KEEPALIVE": "1" if keepalive else "0"}


def spawn_allowance(users: int, running: bool = False) -> float:
    """How long after its launch a generator that spawns every user at once (loadgen) may take
    to have them all running, the window fixed from it: its process's start (0.2 s), or a
    running session's pick-up of its command (0.05 s), and 0.2 ms a user. One later than that
    is caught by `ramp_in_window`."""
    return (0.05 if running else 0.2) + users / 5000


def started_after_window(out_dir: Path, t1: float) -> float | None:
    """When the generator's users spawned, if every process spawned only after its window
    (fixed in advance, closing at `t1`) had closed and sent nothing; None otherwise."""
    procs = [json.loads(f.read_text()) for f in out_dir.glob("proc-*.json")]
    spawned = [p.get("spawned_at") for p in procs]
    if not procs or any(s is None or s < t1 for s in spawned):
        return None
    if any(p.get("run_results") or p.get("run_inflight") for p in procs):
        return None
    return max(spawned)


def set_aside(out_dir: Path, name: str) -> None:
    """Move a level's files so far into out_dir/name (kept, and no longer the level's)."""
    aside = out_dir / name
    aside.mkdir(exist_ok=True)
    for f in list(out_dir.iterdir()):
        if f != aside:
            f.rename(aside / f.name)


def spawned_window(out_dir: Path, log: Path, exit_code: int | None) -> tuple[float, float]:
    """The window Locust opened after its users spawned, or a LoadError with its log."""
    window = spawn_window(out_dir)
    if window is None:
        raise LoadError(f"locust never spawned its users (exit {exit_code}); its log:\n" + log_tail(log))
    return window


def level_point(window: dict, timing: dict, *, during=None, workers=(),
                link_delay_us: int | None = None, link_stats: dict | None = None) -> dict:
    """A level's point: the generator's merged window, what ran around it (an operation, the
    generator hosts, a link and what it applied) and where its wall time went."""
    stats = link_stats or {}
    return schema.assemble(
        window,
        {"during": during, "generator_hosts": ",".join(map(str, workers)) or None},
        {"link_delay_us": link_delay_us, "link_connections": stats.get("connections"),
         "link_chunks": stats.get("chunks"), "link_late_mean_us": stats.get("late_mean_us"),
         "link_late_max_us": stats.get("late_max_us")},
        timing)


# --------------------------------------------------------------------------- a session of levels

LEVEL_POLL_S = 0.01  # how often a session looks for its level's file (and at its process)
QUIT_BOUND_S = 15.0  # a session's process told to quit: longer, and it is stopped


class Session:
    """One generator process (Locust, or loadgen) that steps through levels of `scenario` at
    `server` (see the module's docstring), each measured as run_level measures a level of one
    such process: `level()` returns the same point. Its process starts with the first level and
    is stopped when the `with` block ends, however it ends; its log, commands and spec are in
    `out_dir`."""

    def __init__(self, server: servers.Server, scenario: str, out_dir: Path, *,
                 cpus: str | None = None, scenario_params: dict | None = None,
                 keepalive: bool = True, generator: str = "locust"):
        check_generator_args(server, scenario, keepalive, scenario_params)
        commands.check_generator(generator)
        if server.runner.kind == "ssh":  # its CPU is sampled there, a level at a time (run_level)
            raise ValueError("a session samples its server on this machine: not a server on an ssh host")
        if generator == "loadgen":
            commands.build_loadgen()  # seconds the first time, a stat() after
        self.server, self.scenario, self.out_dir = server, scenario, out_dir
        self.cpus, self.scenario_params, self.keepalive = cpus, scenario_params, keepalive
        self.generator = generator
        out_dir.mkdir(parents=True, exist_ok=True)
        # what every user sends, compiled once (a bad LAB_* value fails here, before any process)
        self.spec = scenarios.write_spec(scenario, generator_env(out_dir, scenario_params, keepalive),
                                         out_dir / "scenario.json")
        self.log = out_dir / f"{generator}.log"
        self.started: hosts.Started | None = None
        self.pinned: str | None = None
        self.commands = 0    # command-<n>.json files written
        self.ended = False   # its process is gone: no more levels
        self.exit_s = 0.0    # how long its process took to end (the exit no level waited for)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(quit=kind is None)

    def level(self, users: int, out_dir: Path, *, duration: float = 10.0,
              warmup: float = 2.0) -> dict:
        """`users` closed-loop users, a window of `duration` s opening `warmup` s after they have
        spawned (Locust; loadgen's: after the start-up it is allowed, as run_level's), measured
        into `out_dir` (its own proc- and, for Locust, window- and locust_stats files, its share
        of the process's log, its CPU samples); run_level's point. Any failure ends the
        session (its process stopped) and raises."""
        check_level(users, 1, duration, warmup)
        if self.ended:
            raise LoadError(f"this session's {self.generator} has ended (its log: {self.log}); start another")
        if any(out_dir.glob("proc-*.json")) or any(out_dir.glob("window-*.json")):
            # the same process writes the same names: an old file would end the level at once
            raise ValueError(f"{out_dir} holds a level's measurements already: give each level a folder of its own")
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.spec, out_dir / "scenario.json")
        log_from = self.log.stat().st_size if self.log.exists() else 0
        launch = time.time()
        fixed = self._begin(users, out_dir, warmup, duration, launch)
        pids = [self.started.popen.pid]
        sampler = (Sampler(self.server, pids, *fixed) if fixed else
                   Sampler(self.server, pids, None, None, window=lambda: spawn_window(out_dir)))
        sampler.start()
        try:
            # the bound run_level gives a process of its own: start-up, warm-up, window, stop
            self._await_level(out_dir, (fixed[1] - launch if fixed else
                                        commands.SPAWN_BOUND + warmup + duration) + 90)
            exited = time.time()
        except BaseException:
            self.close(quit=False)
            raise
        finally:
            sampler.stop()
        _copy_from(self.log, log_from, out_dir / f"{self.generator}.log")
        t0, t1 = fixed or spawned_window(out_dir, self.log, None)
        window = merge_level(out_dir, sampler, self.server, self.scenario, users, 1, self.pinned,
                             None, (t0, t1), None, self.generator, self.keepalive)
        return level_point(window, level_timing(out_dir, launch, t0, warmup, exited, time.time()))

    def _begin(self, users: int, out_dir: Path, warmup: float, duration: float,
               launch: float) -> tuple[float, float] | None:
        """Start a level: the first starts the process (its level in the environment), a later
        one is a command to it. Returns loadgen's window, fixed from `launch` as run_level fixes
        it (Locust's opens after its users have spawned: None)."""
        level: dict = {"users": users, "out_dir": str(out_dir)}
        env = {"LAB_SESSION": str(self.out_dir), "LAB_SPEC": str(self.spec)}
        fixed = None
        if self.generator == "locust":
            level.update({"warmup": warmup, "duration": duration})
            env["LAB_WINDOW_AFTER_SPAWN"] = f"{warmup!r},{duration!r}"
        else:
            t0 = launch + spawn_allowance(users, self.started is not None) + warmup
            fixed = (t0, t0 + duration)
            level.update({"t0": t0, "t1": t0 + duration,
                          "max_seconds": t0 + duration - launch + 5 + commands.STOP_TIMEOUT})
            env.update({"LAB_T0": repr(t0), "LAB_T1": repr(t0 + duration)})
        if self.started is not None:
            self._send(level)
            return fixed
        cmd, self.pinned = (
            commands.locust_session_command(users, self.server.url, self.cpus) if fixed is None
            else commands.loadgen_command(self.spec, users, self.server.url, level["max_seconds"], self.cpus))
        self.started = hosts.start(hosts.Host("local"), cmd,
                                   {**generator_env(out_dir, self.scenario_params, self.keepalive), **env},
                                   self.log)
        return fixed

    def _send(self, command: dict) -> None:
        """The next command, whole: written aside, then renamed into place."""
        self.commands += 1
        path = self.out_dir / f"command-{self.commands}.json"
        tmp = self.out_dir / f".command-{self.commands}.tmp"
        tmp.write_text(json.dumps(command))
        os.replace(tmp, path)

    def _await_level(self, out_dir: Path, bound: float) -> None:
        """Until the process has written the level's file: a LoadError with its log's tail if it
        exits first or `bound` s pass."""
        popen = self.started.popen
        done = out_dir / f"proc-{popen.pid}.json"
        deadline = time.monotonic() + bound
        while not done.exists():
            if popen.poll() is not None and not done.exists():
                raise LoadError(f"{self.generator} exited mid-session (exit {popen.returncode}) before "
                                f"its level in {out_dir} ended; its log:\n{log_tail(self.log)}")
            if time.monotonic() > deadline:
                raise LoadError(f"{self.generator} ended no level in {out_dir} within {bound:.0f} s; "
                                f"its log:\n{log_tail(self.log)}")
            time.sleep(LEVEL_POLL_S)

    def close(self, quit: bool = True) -> None:
        """End the session: its process told to quit (`quit`: after levels that went well) and
        given QUIT_BOUND_S, then stopped by its PID whatever it did (hosts.stop)."""
        self.ended = True
        if self.started is None:
            return
        t = time.perf_counter()
        try:
            if quit:
                self._send({"quit": True})
                try:
                    self.started.popen.wait(QUIT_BOUND_S)
                except subprocess.TimeoutExpired:
                    pass  # stopped below
        finally:
            hosts.stop(self.started)
            self.started = None
            self.exit_s = time.perf_counter() - t


def _copy_from(log: Path, offset: int, dst: Path) -> None:
    """What a session's process logged from `offset` on: one level's share of its log."""
    with open(log, "rb") as f:
        f.seek(offset)
        dst.write_bytes(f.read())


ARRIVALS = ("constant", "poisson")


def check_rate(rate, arrivals: str, requests) -> None:
    if rate is None:
        return
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"rate must be a positive number of requests/s (None: closed loop), not {rate!r}")
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {', '.join(ARRIVALS)}, not {arrivals!r}")
    if requests:
        raise ValueError("an open-loop level lasts a duration: pass rate or requests, not both")


def _during(during, sampler: "Sampler", out: dict) -> None:
    """Wait for the window to be known, then run `during(t0, t1)`, keeping its result or error."""
    try:
        while sampler.t0 is None or sampler.t1 is None:
            if out.get("stop") or not sampler.is_alive():
                return
            time.sleep(0.005)
        out["result"] = during(sampler.t0, sampler.t1, out)
    except BaseException as e:  # noqa: BLE001 - re-raised by run_level in the caller's thread
        out["error"] = e


def spawn_window(out_dir: Path) -> tuple[float, float] | None:
    """(t0, t1) of a window opened after the users spawned (the generator's window file)."""
    for f in out_dir.glob("window-*.json"):
        w = json.loads(f.read_text())
        return w["t0"], w["t1"]
    return None


def level_timing(out_dir: Path, launch: float, t0: float, warmup: float, exited: float,
                 done: float) -> dict:
    """Where a level's wall time went (`time_*` columns, seconds; sqlitelab.report.timing sums them):
    the generator's start-up until its last user ran (`time_spawn_s`) within the allowance the
    window waited for (`time_startup_s`), the warm-up, the window, the server's answers to the
    requests in flight at the close (`time_drain_s`: until the run's last answer), the
    generator's exit after that (`time_shutdown_s`), and reading its files (`time_merge_s`).
    In a Session, `launch` is when the level was asked for and `exited` when its file was
    there: the first level's start-up holds the process's start (imports, once per session), a
    later one's only the command's pick-up and its users' spawn; each level's shutdown is its
    users' stop and its files' writing, the process running on. The process's exit after the
    last level belongs to no level: the session's `exit_s`."""
    procs = [json.loads(f.read_text()) for f in out_dir.glob("proc-*.json")]
    spawned = [p["spawned_at"] for p in procs if p.get("spawned_at")]
    closed = max((p["t1"] for p in procs), default=t0)
    # the server answering what was in flight at the close: from the close to the run's last answer
    answered = [p["run_last_end"] for p in procs if p.get("run_last_end") is not None]
    drain = min(max(max(answered) - closed, 0.0), max(exited - closed, 0.0)) if answered else None
    return {"time_spawn_s": (max(spawned) - launch) if spawned else None,
            "time_startup_s": t0 - warmup - launch, "time_warmup_s": warmup,
            "time_window_s": closed - t0, "time_drain_s": drain,
            "time_shutdown_s": exited - closed - (drain or 0.0),
            "time_merge_s": done - exited, "time_level_s": done - launch}


def writer_window(m0: dict | None, m1: dict | None) -> dict:
    """The writer's own counts over a window (/health's `writer` at its two edges, the
    writer|batch paths): the transactions it ran, the writes in them, and how many transactions
    held each number of writes (`writer_sizes`, JSON) — group commit's batch sizes. Empty where
    the server has no writer (the pool) or an edge was read late (sampler.mark)."""
    w0, w1 = (m0 or {}).get("writer"), (m1 or {}).get("writer")
    if not (isinstance(w0, dict) and isinstance(w1, dict)):
        return {"writer_transactions": None, "writer_jobs": None, "writer_sizes": None}
    sizes = {int(k): int(v) - int(w0.get("sizes", {}).get(k, 0)) for k, v in w1.get("sizes", {}).items()}
    return {"writer_transactions": int(w1["transactions"]) - int(w0["transactions"]),
            "writer_jobs": int(w1["jobs"]) - int(w0["jobs"]),
            "writer_sizes": json.dumps({str(k): v for k, v in sorted(sizes.items()) if v})}


def merge_level(out_dir, sampler, server, scenario, users, processes, pinned, requests,
                window, returncode, generator: str = "locust", keepalive: bool = True,
                writes: "scenarios.Writes | None" = None) -> dict:
    """One level's point from its generator's files and the samples. `scenario`: the lab's
    scenario (its writes acknowledged as it says), or None with `writes` an app's rule (or None:
    nothing counted as a write)."""
    procs, log_text = _read_measurements(out_dir, generator, returncode)
    hist, status, failures, run_counts = _merge_counts(procs)
    count = sum(p["count"] for p in procs)
    t0 = window[0]
    t1s = [p["t1"] for p in procs]
    win = max(max(t1s) - t0, 1e-9)
    # Throughput adds up over processes, each over its own window.
    rps = sum(p["count"] / max(p["t1"] - t0, 1e-9) for p in procs)
    cpu = sampler.between(t0, max(t1s))
    gen_cpu_pct, gen_util, gen_cpus = _generator_cpu(cpu, pinned, procs, win)
    server_util = cpu["server_cpu_s"] / (cpu["span"] * server.cpu_count)
    locust_warned = "CPU usage above 90%" in log_text or "CPU usage was too high" in log_text
    spawned = [p["spawned_at"] for p in procs if p["spawned_at"]]
    server_handled, mark_late_ms, writer = _server_marks(sampler, requests)
    acked, inflight, resent = _write_audit(writes, scenario, run_counts, procs)
    point = {
        "users": users, "processes": processes, "window_s": win, "requests": count,
        "rps": rps, **_latencies(hist, procs, count),
        **_outcomes(status, failures),
        # started inside the window but unfinished at its close: at most ~users normally;
        # a long max_overrun means requests stalled (a window with no completions is no success)
        "overran_window": sum(p.get("overran", 0) for p in procs),
        "off_host": sum(p.get("off_host", 0) for p in procs),  # a user's locustfile (userfile.py)
        "max_overrun_ms": 1000 * max((p.get("max_overrun_s", 0.0) for p in procs), default=0.0),
        "bytes_per_s": sum(p["bytes"] for p in procs) / win,
        "server_cpu_pct": 100 * cpu["server_cpu_s"] / cpu["span"],
        "cpu_span_s": cpu["span"],  # what the CPU shares are averaged over (>= the window)
        "server_rss_mb": cpu["server_rss_max"] / 2**20,
        "gen_cpu_pct": gen_cpu_pct,
        "gen_cpus": gen_cpus,
        # the generator saturated, and the generator the limit (verdicts)
        "generator_saturated": verdicts.generator_saturated(gen_util, locust_warned),
        "server_util": server_util,
        "generator_bound": verdicts.generator_bound(gen_util, locust_warned, server_util),
        "locust_cpu_warning": locust_warned,
        "server_requests": server_handled,
        "server_mark_late_ms": mark_late_ms,
        **writer,
        "ramp_in_window": bool(spawned and max(spawned) > t0),
        "acked_writes": acked,
        "inflight_writes": inflight,
        "resent_writes": resent,
        "run_counts": json.dumps(dict(sorted(run_counts.items()))),
        "locust_avg_ms": _locust_average(out_dir),
        **_locust_window(procs),
        "generator_pinning": pinned,
        "histogram": hist.encode().decode() if count else None,
        "locust_exit": returncode,
        "generator": generator,
        "keepalive": bool(keepalive),
        **_hey_run(procs),
        **_open_loop(procs, t0, win),
        "seconds": series(procs, sampler, t0, t0 + win),
    }
    return point


def _read_measurements(out_dir: Path, generator: str, returncode) -> tuple[list[dict], str]:
    """The generator's per-process files and its log's text; a LoadError with the log's tail
    when it wrote no file."""
    files = sorted(out_dir.glob("proc-*.json"))
    log_text = "\n".join(f.read_text(errors="replace") for f in sorted(out_dir.glob(f"{generator}*.log")))
    if not files:
        raise LoadError(f"{generator} wrote no measurements (exit {returncode}); its log:\n"
                        + "\n".join(log_text.splitlines()[-25:]))
    return [json.loads(f.read_text()) for f in files], log_text


def _merge_counts(procs: list[dict]) -> tuple[HdrHistogram, dict, dict, dict]:
    """Every process's window latencies in one HdrHistogram, and its counts by status, by
    failure kind and over the whole run (`run_counts`) added up."""
    hist = HdrHistogram(1, 100_000_000, 3)
    status, failures, run_counts = {}, {}, {}
    for p in procs:
        add_latencies(hist, p)
        for src, dst in ((p["status"], status), (p["failures"], failures), (p["run_counts"], run_counts)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + v
    return hist, status, failures, run_counts


def _generator_cpu(cpu: dict, pinned: str | None, procs: list[dict],
                   win: float) -> tuple[float, float, int]:
    """The generator's CPU% over the window, its utilisation (its busiest host's share of its
    CPUs) and its CPUs, from the samples here and what workers elsewhere reported."""
    gen_cpus = len(layout.parse_cpus(pinned)) if pinned else len(layout.available_cpus())
    gen_util = cpu["gen_cpu_s"] / (cpu["span"] * gen_cpus)
    # workers on other machines report their own CPU over the window: the generator's share is
    # its busiest host's, its CPU% and CPUs the sums over every host
    remote = remote_cpu(procs)
    gen_cpu_pct = 100 * (cpu["gen_cpu_s"] / cpu["span"] + sum(r["cpu_s"] / win for r in remote.values()))
    gen_util = max([gen_util, *(r["cpu_s"] / win / r["cpus"] for r in remote.values())])
    gen_cpus += sum(r["cpus"] for r in remote.values())
    return gen_cpu_pct, gen_util, gen_cpus


def _server_marks(sampler: "Sampler", requests) -> tuple[int | None, float | None, dict]:
    """What the server said of itself at the window's edges (the sampler's marks): the requests
    it handled (a window of a duration only), how late the later edge was read in ms (also when
    that made the count None: a late mark is then told from a missing one), its writer's counts."""
    m0, m1 = sampler.marks.get("t0"), sampler.marks.get("t1")
    server_handled = (m1["handled"] - m0["handled"]) if (m0 and m1 and m0["handled"] is not None
                                                        and m1["handled"] is not None and not requests) else None
    mark_late = [m.get("late_s") for m in (m0, m1) if m and m.get("late_s") is not None]
    return server_handled, 1000 * max(mark_late) if mark_late else None, writer_window(m0, m1)


def _write_audit(writes: "scenarios.Writes | None", scenario, run_counts: dict,
                 procs: list[dict]) -> tuple[int, int, int]:
    """The writes the audit counts: acknowledged, in flight at the stop, and sent again (the
    scenario's rule unless `writes` is given; none without a rule)."""
    if writes is None and scenario is not None:
        writes = SCENARIOS[scenario].writes
    acked = inflight = resent = 0
    if writes is not None:
        acked = writes.counts(run_counts)[0]
        # sent and never answered when the generator stopped (at its count, its window's close
        # or a kill): the server may have committed them, so the audit allows for each
        inflight = sum(writes.in_flight(p.get("run_inflight") or {}) for p in procs)
        # sent again on a new connection after the kept-alive one dropped without an answer
        # (loadgen, as geventhttpclient does): the first sending may have been committed too
        resent = sum(writes.in_flight(p.get("run_resent") or {}) for p in procs)
    return acked, inflight, resent


def _latencies(hist: HdrHistogram, procs: list[dict], count: int) -> dict:
    """The window's latencies: the exact mean, the merged histogram's percentiles, maximum,
    mean and minimum (None without a request)."""
    return {
        "mean_ms": (sum(p["sum_us"] for p in procs) / count / 1000) if count else None,
        **{f"{k}_ms": (hist.get_value_at_percentile(v) / 1000 if count else None)
           for k, v in PERCENTILES.items()},
        "max_ms": hist.get_max_value() / 1000 if count else None,
        "hist_mean_ms": hist.get_mean_value() / 1000 if count else None,
        "min_ms": hist.get_min_value() / 1000 if count else None,
    }


def _outcomes(status: dict, failures: dict) -> dict:
    """The window's requests by status, and its failures by kind and in all."""
    return {
        "status_counts": json.dumps(dict(sorted(status.items()))),
        "busy_errors": failures.get("busy", 0),
        "server_errors": failures.get("server_error", 0),
        "client_errors": failures.get("client_error", 0),
        "connection_errors": failures.get("connection", 0),
        "timeouts": failures.get("timeout", 0),
        "errors": sum(failures.values()),
    }


def add_latencies(hist: HdrHistogram, measured: dict) -> None:
    """Add a generator's latencies (a process's window, or one of its seconds) to `hist`:
    Locust's encoded HdrHistogram (`hist`), or loadgen's exact µs values and counts
    (`hist_values`)."""
    if measured.get("hist"):
        hist.add(HdrHistogram.decode(measured["hist"]))
    for value, n in measured.get("hist_values") or ():
        hist.record_value(min(max(int(value), 1), 100_000_000), int(n))


def _open_loop(procs: list[dict], t0: float, win: float) -> dict:
    """An open-loop point's schedule against what was sent (see the module's docstring)."""
    if not any(p.get("open_loop") for p in procs):
        return {"open_loop": False, "arrivals": None, "offered_rps": None, "offered": None,
                "late": None, "max_lag_ms": None, "backlog": None}
    return {"open_loop": True, "arrivals": procs[0].get("arrivals"),
            "offered": sum(p["offered"] for p in procs),
            "offered_rps": sum(p["offered"] / max(p["t1"] - t0, 1e-9) for p in procs),
            "late": sum(p["late"] for p in procs),
            "max_lag_ms": 1000 * max(p["max_lag_s"] for p in procs),
            "backlog": sum(p["backlog"] for p in procs)}


def series(procs: list[dict], sampler: "Sampler", t0: float, t1: float) -> list[dict]:
    """The window second by second: every second from t0 (the last one may be partial), with
    the requests that finished in it (merged over processes), their errors by kind and
    percentiles, and the server's CPU share, peak RSS and WAL size over it (the sampler's
    samples bracketing the second)."""
    n_seconds = max(1, math.ceil(t1 - t0 - 1e-9))
    merged: dict[int, dict] = {}
    for p in procs:
        for b in p.get("seconds") or ():
            m = merged.setdefault(int(b["s"]), {"n": 0, "late": 0, "failures": {},
                                                "hist": HdrHistogram(1, 100_000_000, 3)})
            m["n"] += b["n"]
            m["late"] += b.get("late", 0)
            for k, v in b["failures"].items():
                m["failures"][k] = m["failures"].get(k, 0) + v
            add_latencies(m["hist"], b)
    out = []
    samples = sampler.samples if sampler is not None else []
    for sec in range(max(n_seconds, max(merged, default=-1) + 1)):
        a, b = t0 + sec, min(t0 + sec + 1, t1)
        m = merged.get(sec, {"n": 0, "late": 0, "failures": {}, "hist": None})
        h = m["hist"]
        row = {"second": sec, "t": a, "span_s": b - a, "completed": m["n"],
               "errors": sum(m["failures"].values()), "late": m["late"],
               "failures": json.dumps(dict(sorted(m["failures"].items()))),
               "p50_ms": h.get_value_at_percentile(50) / 1000 if m["n"] else None,
               "p99_ms": h.get_value_at_percentile(99) / 1000 if m["n"] else None,
               "max_ms": h.get_max_value() / 1000 if m["n"] else None}
        before = [x for x in samples if x[0] <= a + 1e-6]
        after = [x for x in samples if x[0] >= b - 1e-6]
        inside = [x for x in samples if a <= x[0] <= b]
        if before and after and after[0][0] > before[-1][0]:
            x, y = before[-1], after[0]
            row["server_cpu_pct"] = 100 * (y[1] - x[1]) / (y[0] - x[0])
        else:
            row["server_cpu_pct"] = None
        near = inside or ([before[-1]] if before else [])
        row["server_rss_mb"] = max(x[2] for x in near) / 2**20 if near else None
        wal = [x[4] for x in near if x[4] is not None]
        row["wal_bytes"] = max(wal) if wal else None
        out.append(row)
    return out


def remote_cpu(procs: list[dict]) -> dict[str, dict]:
    """Per ssh host: the CPU seconds its Locust processes reported over the window, and its
    CPUs (the largest affinity any of them had)."""
    out: dict[str, dict] = {}
    for p in procs:
        host = p.get("remote_host")
        if not host:
            continue
        r = out.setdefault(host, {"cpu_s": 0.0, "cpus": 1})
        if p.get("cpu_t0") is not None and p.get("cpu_t1") is not None:
            r["cpu_s"] += p["cpu_t1"] - p["cpu_t0"]
        r["cpus"] = max(r["cpus"], int(p.get("cpus") or 1))
    return out


def _hey_run(procs: list[dict]) -> dict:
    """hey's accounting of the whole run (see the module's docstring), over every process."""
    none = {"hey_seconds": None, "hey_rps": None, "hey_mean_ms": None, "hey_max_ms": None,
            "hey_results": None}
    if any("run_results" not in p for p in procs):  # a file from before these fields
        return none
    results = sum(p["run_results"] for p in procs)
    firsts = [p["run_first_start"] for p in procs if p["run_first_start"] is not None]
    lasts = [p["run_last_end"] for p in procs if p["run_last_end"] is not None]
    if not results or not firsts or not lasts:
        return none
    ok = sum(p["run_ok"] for p in procs)
    seconds = max(max(lasts) - min(firsts), 1e-9)
    return {"hey_seconds": seconds, "hey_rps": results / seconds,
            "hey_mean_ms": sum(p["run_sum_us"] for p in procs) / ok / 1000 if ok else None,
            "hey_max_ms": max(p["run_max_us"] for p in procs) / 1000 if ok else None,
            "hey_results": results}


def _locust_window(procs: list[dict]) -> dict:
    """Locust's own exact average over the window (reset at t0), where it was taken."""
    views = [p.get("locust_window") for p in procs]
    if not views or any(v is None for v in views):
        return {"locust_window_avg_ms": None, "locust_window_requests": None}
    n = sum(v["requests"] for v in views)
    avg = sum(v["avg_ms"] * v["requests"] for v in views) / n if n else None
    return {"locust_window_avg_ms": avg, "locust_window_requests": n}


def _locust_average(out_dir: Path) -> float | None:
    """Locust's own exact average over the whole run (Aggregated row of its CSV)."""
    path = out_dir / "locust_stats.csv"
    if not path.exists():
        return None
    with open(path) as f:
        for r in csv.DictReader(f):
            if r.get("Name") == "Aggregated":
                try:
                    return float(r["Average Response Time"])
                except (KeyError, ValueError):
                    return None
    return None


# --------------------------------------------------------------------------- primer

def prime(server: servers.Server, n: int = 50) -> None:
    """A few unmeasured requests (no writes) so the first level doesn't pay cold starts."""
    for _ in range(n):
        with urllib.request.urlopen(server.url + "/hello", timeout=5) as r:
            r.read()
