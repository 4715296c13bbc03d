"""Driving load: one generator subprocess per level (Locust by default; `generator="loadgen"`
for the lab's Go generator when one Locust core would be the limit), an exact measurement
window, merged HdrHistograms, server and generator CPU, and the audit of every acknowledged
write. Both generators write the same per-process measurement file.

    df = sweep(notebook="01-linear-writes", servers=["python-fastapi"], profiles=["rails71"],
               scenario="rails-writes", levels=[1, 2, 4], duration=10, repeats=3)

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
import urllib.request
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from hdrh.histogram import HdrHistogram

from sqlitelab.core import config, layout
from sqlitelab.core.vocabulary import STALL_MS
from sqlitelab.infra import hosts, servers
from sqlitelab.load import scenarios
from sqlitelab.core.processes import free_port, log_tail, pin_command  # (names: `processes` is an argument here)
from sqlitelab.infra import link as links

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
GENERATORS = ("locust", "loadgen")
# After the window's close, users get this long to finish the request they are in before
# the generator gives up on it (Locust's --stop-timeout; loadgen's -max-seconds past the
# bound). A request abandoned then may still commit later, so it must outlast a server's
# stall (a 5-s busy timeout behind a queue of requests).
STOP_TIMEOUT = 30
# a window-edge mark of the server's own count taken later than this after its edge is no count
MARK_LATE_S = 0.25


# The scenarios (what each user sends, which response acknowledges a write) are declared once
# in scenarios.toml; run_level compiles the level's spec for the generator (scenarios.compile).
Scenario = scenarios.Scenario
SCENARIOS = scenarios.SCENARIOS

PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "p999": 99.9}
GENERATOR_BOUND_CPU = 0.90
# `generator_influenced` (see influence()): the generator busier than this share of its CPUs,
# and busier than a server short of SERVER_SATURATED_CPU of its own, with nothing else to
# explain the server's idle time, set the pace.
GENERATOR_BUSY_CPU = 0.50
SERVER_SATURATED_CPU = 0.85
# The longest one Locust process may take from launch to its last user spawned before the level
# fails (the window then opens `warmup` seconds after the spawn; ~0.5 s here).
SPAWN_BOUND = 30.0


class LoadError(RuntimeError):
    pass


# --------------------------------------------------------------------------- sampling

def _tree(pid: int) -> list[psutil.Process]:
    try:
        p = psutil.Process(pid)
        return [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_cpu_seconds(pid: "int | list[int]") -> float:
    total = 0.0
    for p in (q for one in ([pid] if isinstance(pid, int) else pid) for q in _tree(one)):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def tree_rss(pid: "int | list[int]") -> int:
    total = 0
    for p in (q for one in ([pid] if isinstance(pid, int) else pid) for q in _tree(one)):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


class RemoteTree:
    """The CPU seconds and RSS of a server's process tree on an ssh host: this module's
    `sample-tree` runs there and prints one line every `every` s into `log_path` here (through
    the ssh client); `latest()` is the last whole line, read when the local sampler samples
    (at most `every` s plus the link's delay old)."""

    def __init__(self, server: servers.Server, log_path: Path, every: float = 0.05):
        self.log_path = Path(log_path)
        self.started = hosts.start(server.runner, [sys.executable, "-m", "sqlitelab.load.driver", "sample-tree",
                                                   str(server.pid), str(every)],
                                   {}, self.log_path, cwd=str(config.PROJ_ROOT))
        self.last = (0.0, 0)
        deadline = time.monotonic() + 20
        while self.latest() == (0.0, 0) and time.monotonic() < deadline:  # its first line
            time.sleep(0.02)

    def latest(self) -> tuple[float, int]:
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors="replace").split("\n")[:-1]
        for line in reversed(lines):
            parts = line.split()
            if len(parts) == 3 and parts[0] == "tree":
                self.last = (float(parts[1]), int(parts[2]))
                break
        return self.last

    def stop(self) -> None:
        hosts.stop(self.started, grace=5)


def sample_tree(pid: int, every: float) -> None:
    """`python -m sqlitelab.load.driver sample-tree PID EVERY`: `tree <cpu s> <rss bytes>` of PID's
    process tree every EVERY s, until the tree is gone or stdout closes."""
    while psutil.pid_exists(pid):
        try:
            print(f"tree {tree_cpu_seconds(pid):.4f} {tree_rss(pid)}", flush=True)
        except BrokenPipeError:
            return
        time.sleep(every)


class Sampler(threading.Thread):
    """Samples (time, server CPU s, server RSS, generator CPU s) every `every` seconds,
    and takes exact samples (with the server's own request counter) at t0 and t1. With
    t0 = t1 = None, `window()` is asked every few milliseconds until it returns (t0, t1): a
    window the generator opens after its users have spawned (run_level)."""

    def __init__(self, server: servers.Server, gen_pid: "int | list[int]", t0: float | None, t1: float | None,
                 every=0.25, window=None, remote: "RemoteTree | None" = None):
        super().__init__(daemon=True)
        self.server, self.gen_pid, self.t0, self.t1, self.every = server, gen_pid, t0, t1, every
        self.window = window
        self.remote = remote
        # (epoch s, server CPU s, server RSS bytes, generator CPU s, WAL bytes or None)
        self.samples: list[tuple[float, float, int, float, int | None]] = []
        self.marks: dict[str, dict] = {}
        self.stop_event = threading.Event()

    def sample(self) -> tuple[float, float, int, float, int | None]:
        gen_cpu = tree_cpu_seconds(self.gen_pid)
        if self.samples:  # a generator (or worker) already gone keeps the CPU it had used
            gen_cpu = max(gen_cpu, self.samples[-1][3])
        if self.remote is not None:  # a server on an ssh host: its own sampler's latest line
            server_cpu, rss = self.remote.latest()
        else:
            # the server's tree, and its Postgres' (SQLite's work is in the server's process)
            server_cpu, rss = tree_cpu_seconds(self.server.pids), tree_rss(self.server.pids)
        s = (time.time(), server_cpu, rss, gen_cpu, self.wal_bytes())
        self.samples.append(s)
        return s

    def wal_bytes(self) -> int | None:
        """The size of the server's SQLite WAL file here (0 when there is none yet); None for a
        database elsewhere (Postgres, or a server on an ssh host)."""
        db = getattr(self.server, "db", None)
        if self.remote is not None or not isinstance(db, Path):
            return None
        try:
            return os.stat(f"{db}-wal").st_size
        except FileNotFoundError:
            return 0

    def mark(self, name: str, due: float | None = None) -> None:
        """The server's own count (and CPU) at a window edge. A mark taken more than MARK_LATE_S
        after it was due (the window became known only after it had passed) counts nothing:
        its `handled` is None, never a count read at the wrong time."""
        t, scpu, rss, gcpu, _ = self.sample()
        try:
            handled = self.server.get_json("/health", timeout=2)["requests_handled"]
        except (OSError, ValueError, KeyError):
            handled = None
        if due is not None and t - due > MARK_LATE_S:
            handled = None
        self.marks[name] = {"t": t, "server_cpu": scpu, "gen_cpu": gcpu, "handled": handled}

    def run(self) -> None:
        known = self.t0 is not None
        pending = [("t0", self.t0), ("t1", self.t1)] if known else []
        next_sample = 0.0
        while True:
            if not known and (got := self.window()) is not None:
                known = True
                self.t0, self.t1 = got
                pending = [("t0", self.t0), ("t1", self.t1)]
            now = time.time()
            # a mark that is due is taken even when stop() came first: a generator that
            # quits at t1 may be reaped before this thread wakes up for the t1 mark
            if pending and now >= pending[0][1]:
                self.mark(*pending.pop(0))
                continue
            if self.stop_event.is_set():
                return
            if now >= next_sample:
                self.sample()
                next_sample = now + self.every
            wait = max(0.0, next_sample - time.time())
            if pending:
                wait = min(wait, max(0.0, pending[0][1] - time.time()))
            if not known:
                wait = min(wait, 0.005)
            self.stop_event.wait(wait)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(5)
        if self.remote is not None:
            self.remote.stop()

    def between(self, t0: float, t1: float) -> dict:
        """CPU seconds and peak RSS over the samples that bracket [t0, t1]: the last taken at or
        before t0 and the first at or after t1 (else the nearest), so the span always holds
        the window. A window shorter than the sampling interval (a count-based level at a fast
        server) is then averaged over a longer span: `span` says how long."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1] or self.samples[-1:]
        before = [s for s in self.samples if s[0] <= t0 + 1e-6]
        after = [s for s in self.samples if s[0] >= t1 - 1e-6]
        a = before[-1] if before else self.samples[0]
        b = after[0] if after else self.samples[-1]
        span = max(b[0] - a[0], 1e-9)
        return {"server_cpu_s": b[1] - a[1], "gen_cpu_s": b[3] - a[3], "span": span,
                "server_rss_max": max((s[2] for s in inside), default=0)}


# --------------------------------------------------------------------------- one level

def locust_command(scenario: str, users: int, url: str, run_time: float, processes: int,
                   out_dir: Path, cpus: str | None) -> tuple[list[str], str | None]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless",
           "-u", str(users), "-r", str(max(users, 1)), "--run-time", f"{math.ceil(run_time)}s",
           "--stop-timeout", str(STOP_TIMEOUT), "--host", url, "--csv", str(out_dir / "locust"),
           "--only-summary", "--loglevel", "WARNING", "--exit-code-on-error", "0"]
    if processes > 1:
        cmd += ["--processes", str(processes)]
    cmd.append("LabScenario")  # locustfile.py's one user class: it sends what LAB_SPEC says
    return pin_command(cmd, cpus)


def locust_master_command(users: int, url: str, run_time: float, workers: int, bind: str,
                          port: int, out_dir: Path, cpus: str | None) -> tuple[list[str], str | None]:
    """Locust's master (distributed mode): no users of its own, `workers` worker processes
    expected on the generator hosts before it starts them all."""
    cmd, pinned = locust_command("", users, url, run_time, 1, out_dir, cpus)
    cmd = cmd[:-1] + ["--master", "--master-bind-host", bind, "--master-bind-port", str(port),
                      "--expect-workers", str(workers),
                      "--expect-workers-max-wait", str(int(SPAWN_BOUND)), "LabScenario"]
    return cmd, pinned


def locust_worker_command(master: str, port: int, processes: int,
                          cpus: str | None) -> tuple[list[str], str | None]:
    """One generator host's Locust worker(s): `processes` of them (Locust's --processes)."""
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
           "--master-host", master, "--master-port", str(port), "--loglevel", "WARNING"]
    if processes > 1:
        cmd += ["--processes", str(processes)]
    return pin_command(cmd, cpus)


def worker_processes(processes: int, workers: list[hosts.Host],
                     cpus_of=lambda h: int(h.run(["nproc"]).strip())) -> dict[hosts.Host, int]:
    """Locust processes per generator host: hosts on this machine share its `processes` (at
    least one each); a machine of its own runs one per CPU it has (`nproc` there)."""
    here = [h for h in workers if h.same_machine]
    return {h: (max(1, processes // len(here)) if h.same_machine else max(1, cpus_of(h)))
            for h in workers}


def loadgen_command(spec: Path, users: int, url: str, run_time: float,
                    cpus: str | None) -> tuple[list[str], str | None]:
    cmd = [str(config.LOADGEN_BIN), "-spec", str(spec), "-users", str(users), "-host", url,
           "-max-seconds", f"{run_time:.3f}"]
    return pin_command(cmd, cpus)


GO_BIN_DIRS = ("/usr/local/go/bin", str(Path.home() / "go" / "bin"))


def build_loadgen(timeout: float = 300) -> Path:
    """Build the Go load generator (stdlib only) unless its binary is newer than its sources."""
    src = [config.LOADGEN_DIR / "go.mod", *sorted(config.LOADGEN_DIR.glob("*.go"))]
    binary = config.LOADGEN_BIN
    if binary.exists() and binary.stat().st_mtime >= max(f.stat().st_mtime for f in src):
        return binary
    path = os.pathsep.join([os.environ.get("PATH", ""), *GO_BIN_DIRS])
    if not shutil.which("go", path=path):
        raise servers.ServerStartError("lab: go not found: install Go >= 1.22 (https://go.dev/dl/) "
                               "to use generator='loadgen'")
    proc = subprocess.run(["go", "build", "-trimpath", "-o", str(binary), "."],
                          cwd=config.LOADGEN_DIR, env={**os.environ, "PATH": path},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise servers.ServerStartError(f"loadgen: build failed (exit {proc.returncode}):\n{tail}")
    return binary


def check_generator(generator: str, processes: int = 1) -> None:
    if generator not in GENERATORS:
        raise ValueError(f"generator must be one of {', '.join(GENERATORS)}, not {generator!r}")
    if generator == "loadgen" and processes != 1:
        raise ValueError("processes applies to Locust only: loadgen uses every CPU of its set")


def run_level(server: servers.Server, scenario: str, users: int, out_dir: Path, *,
              duration: float = 10.0, warmup: float = 2.0, requests: int | None = None,
              max_duration: float = 300.0, processes: int = 1, cpus: str | None = None,
              scenario_params: dict | None = None, startup: float | None = None,
              generator: str = "locust", keepalive: bool = True,
              workers: "list[str | hosts.Host] | None" = None,
              link_delay_us: int | None = None, rate: float | None = None,
              arrivals: str = "constant", arrival_seed: int | None = None,
              during=None) -> dict:
    """Drive `users` closed-loop users of `scenario` at `server` and measure one window.

    The window opens `warmup` seconds after all users should have spawned and closes after
    `duration` seconds, or (when `requests` is given) once that many requests have been
    recorded, bounded by `max_duration`. Returns the merged measurement. `keepalive=False`:
    a new connection per request (`oha --disable-keepalive`, see the module's docstring).
    `workers`: generator hosts (sqlitelab.infra.hosts): Locust runs distributed, its master here and
    worker processes on each host (`worker_processes` per host); none: this machine alone.
    `link_delay_us`: the generator reaches the server through a link (sqlitelab.infra.link's proxy,
    on the generator's CPUs) that holds each direction that many µs (0: the proxy alone);
    None: directly. The point records what the link applied.
    `rate`: open loop at that many requests/s over every generator process (`arrivals`
    constant or poisson, `arrival_seed` for a reproducible Poisson schedule of one process; see
    the module's docstring); None: closed loop. `during(t0, t1)`: called in a thread of its own
    once the window is known, with a dict whose "stop" is set when the level ends early (an
    operation at a marked second, sqlitelab.infra.operations); what it returns is the point's
    `during`, and it must end by itself (it is joined after the level).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if users < 1 or processes < 1 or duration <= 0 or warmup < 0:
        raise ValueError("users and processes must be >= 1, duration > 0, warmup >= 0")
    check_generator(generator, processes)
    check_rate(rate, arrivals, requests)
    if not isinstance(keepalive, bool):
        raise ValueError(f"keepalive must be True or False, not {keepalive!r}")
    scenario_params = scenario_params or {}
    if any(k.lower() == "keepalive" for k in scenario_params):
        raise ValueError("pass keepalive=True/False, not scenario_params['keepalive']")
    hosts.check_target(server.host, server.runner)
    workers = [hosts.Host.parse(h) for h in (workers or [])]
    if workers and generator != "locust":
        raise ValueError("generator hosts run Locust workers: use generator='locust'")
    for h in workers:
        h.check()
    if link_delay_us is not None:
        links.check_delay(link_delay_us)
    if link_delay_us is not None and workers:
        raise ValueError("a delayed link is for a generator on this machine, not for workers")
    per_host = worker_processes(processes, workers) if workers else {}
    total = sum(per_host.values()) if workers else processes
    out_dir.mkdir(parents=True, exist_ok=True)
    length = max_duration if requests else duration
    # One Locust process opens the window `warmup` s after its last user has spawned (its
    # start-up, ~0.5 s of imports here, costs what it takes; LAB_WINDOW_AFTER_SPAWN). With
    # --processes (or an explicit `startup`) the window is fixed in advance: Locust spawns
    # ~0.5 s after launch, more with --processes; loadgen at once. A late spawn is caught by
    # `ramp_in_window`.
    after_spawn = generator == "locust" and total == 1 and not workers and startup is None
    if startup is None:
        startup = (SPAWN_BOUND if after_spawn else
                   1.2 + 0.8 * (total - 1) + (1.0 if workers else 0.0) + users / 1000
                   if generator == "locust" else 0.2 + users / 5000)
    if generator == "loadgen":
        build_loadgen()  # seconds the first time, a stat() after
    back = {h: h.reach_back() for h in workers}  # where each worker host finds the master
    # a server on an ssh host: its CPU and RSS sampled there, started before the clock (~1 s)
    remote = RemoteTree(server, out_dir / "server-cpu.log") if server.runner.kind == "ssh" else None
    launch = time.time()
    t0 = launch + startup + warmup   # after_spawn: the latest it can open
    t1 = t0 + length
    env = {**os.environ, "LAB_OUT_DIR": str(out_dir),
           "LAB_TARGET": str(math.ceil(requests / total)) if requests else "0",
           **scenarios.lab_env(scenario_params),
           "LAB_KEEPALIVE": "1" if keepalive else "0"}
    for k in ("LAB_ARRIVAL_RATE", "LAB_ARRIVALS", "LAB_ARRIVAL_SEED"):
        env.pop(k, None)
    if rate is not None:  # each process offers its share
        env.update({"LAB_ARRIVAL_RATE": repr(rate / total), "LAB_ARRIVALS": arrivals})
        if arrival_seed is not None:
            env["LAB_ARRIVAL_SEED"] = str(arrival_seed)
    if after_spawn:
        env["LAB_WINDOW_AFTER_SPAWN"] = f"{warmup!r},{length!r}"
        for k in ("LAB_T0", "LAB_T1"):
            env.pop(k, None)
    else:
        env.update({"LAB_T0": repr(t0), "LAB_T1": repr(t1)})
        env.pop("LAB_WINDOW_AFTER_SPAWN", None)
    # what every user sends, compiled once for both generators (a bad LAB_* value fails here)
    try:
        spec = scenarios.write_spec(scenario, env, out_dir / "scenario.json")
    except BaseException:
        if remote is not None:
            remote.stop()
        raise
    env["LAB_SPEC"] = str(spec)
    started: list[hosts.Started] = []  # the generator (or Locust's master) first, then workers
    sampler = None
    during_thread, during_out = None, {}
    ln = None
    try:  # from the moment a link or generator process exists: an interrupt below still stops it
        if link_delay_us is not None:
            ln = links.DelayLink(server.url, link_delay_us, cpus, out_dir).__enter__()
        target = ln.url if ln else server.url
        worker_cmds = []
        if workers:
            port = free_port()
            bind = next(iter(set(back.values()))) if len(set(back.values())) == 1 else "*"
            cmd, pinned = locust_master_command(users, target, t1 - launch + 5, total, bind, port,
                                                out_dir, cpus)
            # a worker on its own machine: not pinned here, its CPU reported by itself
            worker_cmds = [locust_worker_command(back[h], port, per_host[h],
                                                 cpus if h.same_machine else None)[0] for h in workers]
            for h in workers:
                hosts.push(h, spec)  # an ssh host reads the level's spec at the same path
        elif generator == "locust":
            cmd, pinned = locust_command(scenario, users, target, t1 - launch + 5, processes,
                                         out_dir, cpus)
        else:
            cmd, pinned = loadgen_command(spec, users, target,
                                          t1 - launch + 5 + STOP_TIMEOUT, cpus)
        local = hosts.Host("local")
        started.append(hosts.start(local, cmd, env, out_dir / f"{generator}.log"))
        proc = started[0].popen
        for i, (h, wcmd) in enumerate(zip(workers, worker_cmds)):
            wenv = env if h.same_machine else {**env, "LAB_REMOTE_HOST": str(h)}
            started.append(hosts.start(h, wcmd, wenv, out_dir / f"{generator}-worker{i + 1}.log"))
        # sampled here: every process on this machine, and the link (the generator's side)
        pids = [p.popen.pid for p in started if p.host.same_machine] + ([ln.pid] if ln else [])
        if after_spawn:
            sampler = Sampler(server, pids, None, None, window=lambda: spawn_window(out_dir),
                              remote=remote)
        else:
            sampler = Sampler(server, pids, t0, t1, remote=remote)
        sampler.start()
        if during is not None:
            during_thread = threading.Thread(target=_during, args=(during, sampler, during_out),
                                             daemon=True)
            during_thread.start()
        proc.wait(timeout=t1 - launch + 90)
        for w in started[1:]:  # workers quit at the window's close, before the master
            w.popen.wait(timeout=STOP_TIMEOUT + 10)
        exited = time.time()
        for h in workers:  # an ssh host's measurement files, into the level's folder
            hosts.fetch(h, out_dir, "proc-*.json")
    finally:  # also on a timeout or KeyboardInterrupt: stop every generator process by its PID
        for p in started:
            hosts.stop(p)
        if during_thread is not None:  # it stops what it started (operations.Operation)
            during_out.setdefault("stop", True)
            during_thread.join(600)
        if ln is not None:
            ln.stop()
        if sampler is not None and sampler.ident is not None:
            sampler.stop()
        elif remote is not None:
            remote.stop()
    if after_spawn:
        window = spawn_window(out_dir)
        if window is None:
            raise LoadError(f"locust never spawned its users (exit {proc.returncode}); its log:\n"
                            + log_tail(out_dir / "locust.log"))
        t0, t1 = window
    if "error" in during_out:
        raise during_out["error"]
    point = merge_level(out_dir, sampler, server, scenario, users, total, pinned,
                        requests, (t0, t1), proc.returncode, generator, keepalive)
    point["during"] = during_out.get("result")
    point["generator_hosts"] = ",".join(map(str, workers)) or None
    stats = ln.stats() if ln else {}
    point.update({"link_delay_us": link_delay_us, "link_connections": stats.get("connections"),
                  "link_chunks": stats.get("chunks"), "link_late_mean_us": stats.get("late_mean_us"),
                  "link_late_max_us": stats.get("late_max_us")})
    point.update(level_timing(out_dir, launch, t0, warmup, exited, time.time()))
    return point


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
    window waited for (`time_startup_s`), the warm-up, the window, the generator's exit after
    the window closed (`time_shutdown_s`), and reading its files (`time_merge_s`)."""
    procs = [json.loads(f.read_text()) for f in out_dir.glob("proc-*.json")]
    spawned = [p["spawned_at"] for p in procs if p.get("spawned_at")]
    closed = max((p["t1"] for p in procs), default=t0)
    return {"time_spawn_s": (max(spawned) - launch) if spawned else None,
            "time_startup_s": t0 - warmup - launch, "time_warmup_s": warmup,
            "time_window_s": closed - t0, "time_shutdown_s": exited - closed,
            "time_merge_s": done - exited, "time_level_s": done - launch}


def merge_level(out_dir, sampler, server, scenario, users, processes, pinned, requests,
                window, returncode, generator: str = "locust", keepalive: bool = True) -> dict:
    files = sorted(out_dir.glob("proc-*.json"))
    log_text = "\n".join(f.read_text(errors="replace") for f in sorted(out_dir.glob(f"{generator}*.log")))
    if not files:
        raise LoadError(f"{generator} wrote no measurements (exit {returncode}); its log:\n"
                        + "\n".join(log_text.splitlines()[-25:]))
    procs = [json.loads(f.read_text()) for f in files]
    hist = HdrHistogram(1, 100_000_000, 3)
    status, failures, run_counts = {}, {}, {}
    for p in procs:
        add_latencies(hist, p)
        for src, dst in ((p["status"], status), (p["failures"], failures), (p["run_counts"], run_counts)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + v
    count = sum(p["count"] for p in procs)
    t0 = window[0]
    t1s = [p["t1"] for p in procs]
    win = max(max(t1s) - t0, 1e-9)
    # Throughput adds up over processes, each over its own window.
    rps = sum(p["count"] / max(p["t1"] - t0, 1e-9) for p in procs)
    cpu = sampler.between(t0, max(t1s))
    gen_cpus = len(layout.parse_cpus(pinned)) if pinned else len(layout.available_cpus())
    gen_util = cpu["gen_cpu_s"] / (cpu["span"] * gen_cpus)
    # workers on other machines report their own CPU over the window: the generator's share is
    # its busiest host's, its CPU% and CPUs the sums over every host
    remote = remote_cpu(procs)
    gen_cpu_pct = 100 * (cpu["gen_cpu_s"] / cpu["span"] + sum(r["cpu_s"] / win for r in remote.values()))
    gen_util = max([gen_util, *(r["cpu_s"] / win / r["cpus"] for r in remote.values())])
    gen_cpus += sum(r["cpus"] for r in remote.values())
    server_util = cpu["server_cpu_s"] / (cpu["span"] * server.cpu_count)
    locust_warned = "CPU usage above 90%" in log_text or "CPU usage was too high" in log_text
    spawned = [p["spawned_at"] for p in procs if p["spawned_at"]]
    m0, m1 = sampler.marks.get("t0"), sampler.marks.get("t1")
    server_handled = (m1["handled"] - m0["handled"]) if (m0 and m1 and m0["handled"] is not None
                                                        and m1["handled"] is not None and not requests) else None
    sc = SCENARIOS[scenario]
    acked = inflight = 0
    if sc.write:
        acked = sum(v for k, v in run_counts.items()
                    if k.rsplit(" ", 1)[0] == sc.write and int(k.rsplit(" ", 1)[1]) in sc.acked)
        # sent and never answered when the generator stopped (at its count, its window's close
        # or a kill): the server may have committed them, so the audit allows for each
        inflight = sum((p.get("run_inflight") or {}).get(sc.write, 0) for p in procs)
    point = {
        "users": users, "processes": processes, "window_s": win, "requests": count,
        "rps": rps, "mean_ms": (sum(p["sum_us"] for p in procs) / count / 1000) if count else None,
        **{f"{k}_ms": (hist.get_value_at_percentile(v) / 1000 if count else None)
           for k, v in PERCENTILES.items()},
        "max_ms": hist.get_max_value() / 1000 if count else None,
        "hist_mean_ms": hist.get_mean_value() / 1000 if count else None,
        "min_ms": hist.get_min_value() / 1000 if count else None,
        "status_counts": json.dumps(dict(sorted(status.items()))),
        "busy_errors": failures.get("busy", 0),
        "server_errors": failures.get("server_error", 0),
        "client_errors": failures.get("client_error", 0),
        "connection_errors": failures.get("connection", 0),
        "timeouts": failures.get("timeout", 0),
        "errors": sum(failures.values()),
        # started inside the window but unfinished at its close: at most ~users normally;
        # a long max_overrun means requests stalled (a window with no completions is no success)
        "overran_window": sum(p.get("overran", 0) for p in procs),
        "max_overrun_ms": 1000 * max((p.get("max_overrun_s", 0.0) for p in procs), default=0.0),
        "bytes_per_s": sum(p["bytes"] for p in procs) / win,
        "server_cpu_pct": 100 * cpu["server_cpu_s"] / cpu["span"],
        "cpu_span_s": cpu["span"],  # what the CPU shares are averaged over (>= the window)
        "server_rss_mb": cpu["server_rss_max"] / 2**20,
        "gen_cpu_pct": gen_cpu_pct,
        "gen_cpus": gen_cpus,
        # the generator saturated while the server was not: the generator was the limit (a
        # server busy on its own cores, SERVER_SATURATED_CPU, sets the pace whatever the other)
        "generator_saturated": bool(gen_util >= GENERATOR_BOUND_CPU or locust_warned),
        "server_util": server_util,
        "generator_bound": bool((gen_util >= GENERATOR_BOUND_CPU or locust_warned)
                                and server_util < SERVER_SATURATED_CPU),
        "locust_cpu_warning": locust_warned,
        "server_requests": server_handled,
        "ramp_in_window": bool(spawned and max(spawned) > t0),
        "acked_writes": acked,
        "inflight_writes": inflight,
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


# --------------------------------------------------------------------------- influence

def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _util(pct, cpus) -> float | None:
    return None if _missing(pct) else pct / 100 / max(cpus or 1, 1)


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


# --------------------------------------------------------------------------- primer

def prime(server: servers.Server, n: int = 50) -> None:
    """A few unmeasured requests (no writes) so the first level doesn't pay cold starts."""
    for _ in range(n):
        with urllib.request.urlopen(server.url + "/hello", timeout=5) as r:
            r.read()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sample-tree":
        sample_tree(int(sys.argv[2]), float(sys.argv[3]))
    else:
        raise SystemExit("usage: python -m sqlitelab.load.driver sample-tree PID EVERY")
