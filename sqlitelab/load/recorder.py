"""The lab's in-window recorder, in every Locust process the lab starts: the lab's own user
(locustfile.py, LabScenario) or the users of someone's own locustfile (userfile.py).

Run by sqlitelab.load.driver as a subprocess (never inside a notebook kernel). Every Locust process
that runs users records, for each request that starts at or after LAB_T0 and finishes by
LAB_T1 (epoch seconds), its latency into an HdrHistogram in microseconds, plus counts per
status code and failure kind; and, for the audit, every response of the whole run by
(request name, status), and the requests still in flight when the process stopped (`run_inflight`
by request name: sent, never answered — a write among them may have been committed). Beside the window it keeps `hey`'s accounting of the whole run
(`run_*`: every finished request, in the window or not). At quit it writes
`LAB_OUT_DIR/proc-<pid>.json`. All of it is one level's (`Level`): a process measures one, or
with LAB_SESSION several in turn.

LAB_KEEPALIVE=0 (`oha --disable-keepalive`): every request, and every hop of a followed
redirect, goes on a new TCP connection, carries `Connection: close`, and its connection is
closed once the response is complete (see ConnectionPerRequest).

With LAB_TARGET (requests per process) the process ends its window once it has recorded
that many, stops its users after their current request and quits: a level of N requests.

LAB_WINDOW_AFTER_SPAWN="<warm-up>,<length>" (instead of LAB_T0/LAB_T1): the window opens
<warm-up> seconds after the last user has spawned and lasts <length> seconds (a bound, with
LAB_TARGET); the process that decides it (one alone, or the master of workers, which sends it to
them: `lab_window`) writes its LAB_T0/LAB_T1 to LAB_OUT_DIR/window-<pid>.json as soon as it knows
them, for the harness's samples at the window's edges. Locust's start-up (~0.5 s of imports
here, seconds for workers joining a master, more on a busy machine) then costs no more than it
takes.

LAB_ARRIVAL_RATE (requests/s of this process; LAB_ARRIVALS constant|poisson, LAB_ARRIVAL_SEED):
open loop. Requests are due at a schedule's times whether or not earlier ones have been answered;
a user takes the next due time, sleeps until it, sends; when every user is busy a due request
waits for the next free one. Latency is counted from the due (intended) time, so a server that
falls behind is charged for the queue it caused (no coordinated omission); the window still
counts requests by when they were actually sent (so counts match the server's own counter).
`late` requests were sent more than LATE_TOLERANCE_S after they were due, `offered` were due in
the window, `backlog` were due before its close and never sent. The same contract as loadgen's.

Every process also keeps the window per second (`seconds`: completions, failures by kind, late
requests and an HdrHistogram of each second, by the second the request finished in).

LAB_SESSION=<folder> (with LAB_WINDOW_AFTER_SPAWN; one process, closed loop, no LAB_TARGET): a
session, one process stepping through levels (sqlitelab.load.driver.Session), which saves a
Locust start-up and exit per level (loadgen keeps the same protocol, its windows fixed by t0/t1). Its first level is the environment's (`-u` users, spawned
at once, LAB_OUT_DIR). At each level's end the process stops its users as a quit does (each
finishes the request it is in, --stop-timeout at most; what is still unanswered is the level's
`run_inflight`), closes their connections, writes the level's locust_stats.csv (Locust's own
stats, reset at the window's open) and then its proc-<pid>.json, the driver's cue. It then
waits, no user running, for `<folder>/command-<n>.json` (n = 1, 2, …; the driver writes each
whole, by a rename):

    {"users": U, "out_dir": D, "warmup": W, "duration": L}   the next level: U users spawned at
        once, its window opening W s after they have and lasting L s, its files in D, every
        count of it new (a new `Level`: histograms, counters, window, CPU, Locust's stats)
    {"quit": true}                                           the process exits

A session told nothing for SESSION_IDLE_S ends itself (whoever drove it is gone), and one whose
level fails (a bad command) quits, so its driver finds it gone rather than waiting for it.
"""
from __future__ import annotations

import csv
import json
import logging
import math
import os
import random
import time
from collections import Counter
from pathlib import Path

import gevent
from geventhttpclient.client import HTTPClientPool
from hdrh.histogram import HdrHistogram
from locust import FastHttpUser, constant, constant_throughput, events
from locust.exception import StopUser
from locust.runners import LocalRunner, MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

from sqlitelab.core.failures import LockRule, failure_kind

UNKNOWN = 1e12  # a window's edges before its users have spawned (LAB_WINDOW_AFTER_SPAWN)
TARGET = int(os.environ.get("LAB_TARGET", "0"))
# A worker on another machine (ssh host): its CPU is not sampled from here, so it reports its
# own over the window (os.times at the window's open and close) and its CPU count.
REMOTE_HOST = os.environ.get("LAB_REMOTE_HOST") or None
# the lab's scenario (LabScenario's, locustfile.py), when there is one: its largest id so far
SPEC = json.loads(Path(os.environ["LAB_SPEC"]).read_text()) if os.environ.get("LAB_SPEC") else None
RATE = float(os.environ.get("LAB_RATE_PER_USER", "0"))    # paced users: requests/s per user; 0 = closed loop
LATE_TOLERANCE_S = 0.005  # an open-loop request sent later than this after its due time is late
ARRIVALS_KINDS = ("constant", "poisson")
# LAB_SESSION: the folder this process reads its commands from once its first level is done
SESSION = Path(os.environ["LAB_SESSION"]) if os.environ.get("LAB_SESSION") else None
# a session told nothing for this long ends itself: whoever drove it is gone
SESSION_IDLE_S = 600.0
COMMAND_POLL_S = 0.005


def _arrival_rate() -> float:
    raw = os.environ.get("LAB_ARRIVAL_RATE", "").strip() or "0"
    try:
        rate = float(raw)
    except ValueError:
        raise ValueError(f"LAB_ARRIVAL_RATE={raw!r} must be a number of requests/s (0: closed loop)") from None
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"LAB_ARRIVAL_RATE={raw!r} must be a finite number >= 0 (0: closed loop)")
    if rate > 0 and (RATE > 0 or TARGET > 0):
        raise ValueError("open loop (LAB_ARRIVAL_RATE) takes neither LAB_RATE_PER_USER nor LAB_TARGET")
    return rate


ARRIVAL_RATE = _arrival_rate()
ARRIVALS = os.environ.get("LAB_ARRIVALS", "").strip() or "constant"
if ARRIVALS not in ARRIVALS_KINDS:
    raise ValueError(f"LAB_ARRIVALS={ARRIVALS!r} must be one of {', '.join(ARRIVALS_KINDS)}")
_seed = os.environ.get("LAB_ARRIVAL_SEED", "").strip()
try:
    ARRIVAL_SEED = int(_seed) if _seed else None
except ValueError:
    raise ValueError(f"LAB_ARRIVAL_SEED={_seed!r} must be an integer") from None
# which responses are lock errors ('busy'): the lab's servers' 503, or an app's rule
# (LAB_LOCK_STATUS, LAB_LOCK_PATTERN: sqlitelab.core.failures.LockRule)
LOCK_RULE = LockRule.from_env(os.environ)
TIMEOUT = float(os.environ.get("LAB_REQUEST_TIMEOUT", "30"))
_keepalive = os.environ.get("LAB_KEEPALIVE", "").strip() or "1"  # 0: a new connection per request
if _keepalive not in ("0", "1"):
    raise ValueError(f"LAB_KEEPALIVE={_keepalive!r} must be 1 or 0")
KEEPALIVE = _keepalive == "1"
if SESSION is not None and (TARGET or ARRIVAL_RATE):
    raise ValueError("LAB_SESSION steps closed-loop levels of a duration: no LAB_TARGET, no LAB_ARRIVAL_RATE")


class Schedule:
    """The due times of one level's open-loop requests: slot 0 when the first user asks,
    then every 1/rate s (constant) or after exponential gaps of mean 1/rate (poisson)."""

    def __init__(self, rate: float, kind: str, seed: int | None, level: "Level"):
        self.rate, self.kind, self.level = rate, kind, level
        self.rng = random.Random(seed)
        self.origin: float | None = None
        self.k = 0                       # the next slot's index
        self.next_t: float | None = None  # ... and its due time
        self.offered = 0                 # slots due in the level's window [t0, t1)
        self.closed = False

    def _advance(self) -> float:
        t = self.next_t
        if self.level.t0 <= t < self.level.t1:
            self.offered += 1
        self.k += 1
        self.next_t = (self.origin + self.k / self.rate if self.kind == "constant"
                       else t + self.rng.expovariate(self.rate))
        return t

    def take(self) -> float | None:
        """The next slot's due time (None once the window has closed)."""
        if self.closed:
            return None
        if self.origin is None:
            self.origin = self.next_t = time.time()
        return self._advance()

    def close(self, t1: float) -> int:
        """At the window's close: the slots due more than LATE_TOLERANCE_S before it that no
        user took (the backlog; one due closer to the close was not late yet), each slot due
        before it counted as offered. A taken slot is sent as soon as it is due (gevent runs
        the user that slept for it)."""
        self.closed = True
        backlog = 0
        while self.origin is not None and self.next_t < t1:
            backlog += self._advance() < t1 - LATE_TOLERANCE_S
        return backlog


def _window_rule(warmup: float, length: float) -> tuple[float, float]:
    """LAB_WINDOW_AFTER_SPAWN's (warm-up, length), or a session command's, checked."""
    if min(warmup, length) < 0:
        raise ValueError(f"a window after the spawn needs a warm-up and a length >= 0, not {warmup!r}, {length!r}")
    return warmup, length


class Level:
    """Everything one level measures, from its users' start to its `proc-<pid>.json`: the
    window (its edges, HdrHistogram, counts by status and failure kind, seconds), hey's
    accounting of the whole level (`run`), the audit's counts (`run_counts`, `inflight`), the
    open-loop schedule, Locust's own view of the window and the CPU at its edges. A process
    measures one level (its environment's), or with LAB_SESSION one after another, a new Level
    each: a session stops every user of a level before it starts the next one's, so whatever
    a user records goes to the level that is current (`LEVEL`)."""

    def __init__(self, out_dir: Path, t0: float = 0.0, t1: float = 1e12,
                 after_spawn: tuple[float, float] | None = None):
        self.out_dir = out_dir
        self.after_spawn = after_spawn
        self.t0, self.t1 = (UNKNOWN, UNKNOWN) if after_spawn else (t0, t1)
        self.hist = HdrHistogram(1, 100_000_000, 3)  # 1 µs .. 100 s at 3 significant digits
        self.window_status: Counter = Counter()
        self.window_failures: Counter = Counter()
        self.run_counts: Counter = Counter()  # "name status" -> n over the whole level (the audit's acks)
        self.state = {"count": 0, "bytes": 0, "sum_us": 0, "first_start": None, "last_end": None,
                      "t1": None, "stopping": False, "spawned_at": None, "max_id": SPEC["max_id"] if SPEC else 0,
                      "locust_window": None, "overran": 0, "max_overrun_s": 0.0, "cpu_t0": None,
                      "cpu_t1": None, "off_host": 0}
        self.schedule = Schedule(ARRIVAL_RATE, ARRIVALS, ARRIVAL_SEED, self) if ARRIVAL_RATE > 0 else None
        self.due_of: dict = {}  # greenlet -> the due time of the request it is sending (open loop)
        # greenlet -> "<method> <name>" of the request it has sent and not yet seen answered: what is
        # left here at the level's end was in flight when Locust killed its users (the audit's in-flight writes)
        self.inflight: dict = {}
        self.per_second: dict[int, dict] = {}  # the window per second (by the second a request finished in, from t0)
        self.open_state = {"late": 0, "max_lag_s": 0.0, "backlog": 0}
        # The whole level as `hey` counts it (rakyll/hey requester/report.go): `results` is every
        # finished request whatever its outcome (hey's numRes, transport errors included); `ok` those
        # with an HTTP status (not a transport error), over which the latency sum and maximum are
        # taken (hey's Average and Slowest); first_start..last_end spans them all (hey's Total).
        self.run = {"results": 0, "ok": 0, "sum_us": 0, "max_us": 0, "first_start": None, "last_end": None}
        self.users: list = []  # a session closes their connections when the level ends
        self.dumped = False

    @classmethod
    def from_env(cls) -> "Level":
        """The process's first level: LAB_OUT_DIR, and LAB_T0/LAB_T1 or LAB_WINDOW_AFTER_SPAWN."""
        out_dir = Path(os.environ.get("LAB_OUT_DIR", "."))
        rule = os.environ.get("LAB_WINDOW_AFTER_SPAWN")
        if not rule:
            return cls(out_dir, float(os.environ.get("LAB_T0", "0")), float(os.environ.get("LAB_T1", "1e12")))
        parts = rule.split(",")
        if len(parts) != 2:
            raise ValueError(f"LAB_WINDOW_AFTER_SPAWN={rule!r} must be '<warm-up>,<length>' in seconds")
        return cls(out_dir, after_spawn=_window_rule(*map(float, parts)))

    def record(self, request_type, name, response_time, response_length, status, exception, start_time,
               body=None):
        """One finished request: in the run's counts always, in the window's if it started at or
        after t0 and ended by t1 (and before a count-based level ended)."""
        state, run = self.state, self.run
        self.run_counts[f"{request_type} {name} {status}"] += 1
        self.inflight.pop(gevent.getcurrent(), None)
        due = self.due_of.pop(gevent.getcurrent(), None)
        us = max(1, int(round(response_time * 1000)))
        run["results"] += 1
        if status:
            run["ok"] += 1
            run["sum_us"] += us
            run["max_us"] = max(run["max_us"], us)
        if start_time is None:
            return
        end = start_time + response_time / 1000.0
        run["first_start"] = start_time if run["first_start"] is None else min(run["first_start"], start_time)
        run["last_end"] = end if run["last_end"] is None else max(run["last_end"], end)
        window_end = state["t1"] if state["t1"] is not None else self.t1
        if self.t0 <= start_time < window_end < end:  # started inside, still running at the close
            state["overran"] += 1
            state["max_overrun_s"] = max(state["max_overrun_s"], end - window_end)
        if start_time < self.t0 or end > self.t1 or state["t1"] is not None:
            return
        lag = 0.0
        if due is not None:  # open loop: from the due time, the wait for a free user included
            us = max(1, int(round((end - due) * 1e6)))
            lag = max(0.0, start_time - due)
            self.open_state["max_lag_s"] = max(self.open_state["max_lag_s"], lag)
        late = lag > LATE_TOLERANCE_S
        self.open_state["late"] += late
        self.hist.record_value(min(us, 100_000_000))
        sec = self.per_second.get(int(end - self.t0))
        if sec is None:
            sec = self.per_second[int(end - self.t0)] = {"n": 0, "failures": Counter(), "late": 0,
                                                         "hist": HdrHistogram(1, 100_000_000, 3)}
        sec["n"] += 1
        sec["late"] += late
        sec["hist"].record_value(min(us, 100_000_000))
        state["count"] += 1
        state["sum_us"] += us
        state["bytes"] += response_length or 0
        state["first_start"] = start_time if state["first_start"] is None else min(state["first_start"], start_time)
        state["last_end"] = end if state["last_end"] is None else max(state["last_end"], end)
        self.window_status[str(status)] += 1
        kind = failure_kind(status, exception, body, LOCK_RULE)
        if kind:
            self.window_failures[kind] += 1
            sec["failures"][kind] += 1
        if TARGET and state["count"] >= TARGET:
            state["t1"] = end
            state["stopping"] = True

    def spawned(self, now: float, runner) -> None:
        """Its users have all spawned (every worker's, for a master; a worker: its master said
        so). A window after the spawn (LAB_WINDOW_AFTER_SPAWN, or a session's command) opens
        `warm-up` s from now — decided by one process alone or by the master, which sends it
        to its workers (`lab_window`) — and its edges go to window-<pid>.json for the harness's
        samples at them."""
        self.state["spawned_at"] = now
        if not self.after_spawn or self.t0 != UNKNOWN or isinstance(runner, WorkerRunner):
            return
        self.t0 = now + self.after_spawn[0]
        self.t1 = self.t0 + self.after_spawn[1]
        if isinstance(runner, MasterRunner):
            runner.send_message("lab_window", {"t0": self.t0, "t1": self.t1})
        self._write(f"window-{os.getpid()}.json", {"t0": self.t0, "t1": self.t1, "spawned_at": now})

    def dump(self) -> None:
        """Write the level's measurements (once: at its end, or at the quit of a process
        stopped before that)."""
        state, run, schedule = self.state, self.run, self.schedule
        self.dumped = True
        t1 = state["t1"] if state["t1"] is not None else min(self.t1, time.time())
        self._write(f"proc-{os.getpid()}.json", {
            "pid": os.getpid(), "t0": self.t0, "t1": t1, "target": TARGET,
            "count": state["count"], "sum_us": state["sum_us"], "bytes": state["bytes"],
            "overran": state["overran"], "max_overrun_s": state["max_overrun_s"],
            "off_host": state["off_host"],  # requests refused before sending (userfile.py)
            "first_start": state["first_start"], "last_end": state["last_end"],
            "spawned_at": state["spawned_at"],
            "status": dict(self.window_status), "failures": dict(self.window_failures),
            "run_counts": dict(self.run_counts), "locust_window": state["locust_window"],
            "run_inflight": dict(Counter(self.inflight.values())),
            "hist": self.hist.encode().decode() if state["count"] else None,
            "run_first_start": run["first_start"], "run_last_end": run["last_end"],
            "run_results": run["results"], "run_ok": run["ok"], "run_sum_us": run["sum_us"],
            "run_max_us": run["max_us"],
            "remote_host": REMOTE_HOST, "cpu_t0": state["cpu_t0"], "cpu_t1": state["cpu_t1"],
            "cpus": len(os.sched_getaffinity(0)),
            "open_loop": schedule is not None, "arrival_rate": ARRIVAL_RATE or None,
            "arrivals": ARRIVALS if schedule is not None else None,
            "offered": schedule.offered if schedule is not None else 0,
            "late": self.open_state["late"], "max_lag_s": self.open_state["max_lag_s"],
            "backlog": self.open_state["backlog"],
            "seconds": [{"s": s, "n": b["n"], "failures": dict(b["failures"]), "late": b["late"],
                         "hist": b["hist"].encode().decode()} for s, b in sorted(self.per_second.items())],
        })

    def _write(self, name: str, data: dict) -> None:
        """A file of the level's folder, whole or not at all (a session's driver reads it while
        this process runs on)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.out_dir / f".{name}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.out_dir / name)

    def close_connections(self) -> None:
        """A session's level ends as the process's exit ends one: its users' connections closed,
        none left open into the next level."""
        for user in self.users:
            user.client.client.clientpool.close()


LEVEL = Level.from_env()
RUNNER: dict = {}  # this process's Locust runner (events.init)


@events.request.add_listener
def record(request_type, name, response_time, response_length, response=None, exception=None,
           start_time=None, **kw):
    status = getattr(response, "status_code", 0) or 0
    LEVEL.record(request_type, name, response_time, response_length, status, exception, start_time,
                 _body(response) if LOCK_RULE.needs_body(status) else None)


def _body(response) -> str | None:
    """A response's text, read only where the lock rule needs it (an app's 5xx)."""
    try:
        return response.text
    except (ValueError, AttributeError, OSError):  # undecodable, or unread: no lock read from it
        return None


@events.init.add_listener
def window_from_master(environment, **kw):
    """Distributed (a master and its workers, or --processes): the master alone opens the
    window once every worker's users have spawned, and sends it to them (`lab_window`)."""
    RUNNER["runner"] = environment.runner
    if SESSION is not None and not isinstance(environment.runner, LocalRunner):
        raise ValueError("LAB_SESSION steps one process (no master, no workers) through its levels")
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message("lab_window", _window_from_master)


def _window_from_master(environment, msg, **kw):
    LEVEL.t0, LEVEL.t1 = msg.data["t0"], msg.data["t1"]


@events.spawning_complete.add_listener
def spawned(user_count, **kw):
    LEVEL.spawned(time.time(), RUNNER.get("runner"))


@events.init.add_listener
def watch_first_level(environment, **kw):
    """The first level's watchers (`watch`), as the process starts."""
    watch(environment, LEVEL, 1)


def watch(environment, level: Level, command: int) -> None:
    """A level's own greenlets: Locust's view of its window (one process alone) and its end
    (not a master's: its workers end theirs). `command`: the session's command to wait for
    after it."""
    runner = environment.runner
    if isinstance(runner, LocalRunner):
        gevent.spawn(locust_window, runner, level)
    if not isinstance(runner, MasterRunner):
        ending = gevent.spawn(end_at_window_close, environment, level, command)
        ending.link_exception(lambda g: gevent.spawn(runner.quit))  # never an idle process that measures nothing


def locust_window(runner, level: Level) -> None:
    """Locust's own view of the window (single-process runner): its stats reset at t0 and
    its exact average read at the window's end, to cross-check the HdrHistogram."""
    while level.t0 == UNKNOWN and not level.state["stopping"]:  # after the spawn: not yet known
        gevent.sleep(0.005)
    gevent.sleep(max(0.0, level.t0 - time.time()))
    runner.stats.reset_all()
    while not level.state["stopping"] and time.time() < level.t1:
        gevent.sleep(min(0.02, max(0.0, level.t1 - time.time())))
    total = runner.stats.total
    level.state["locust_window"] = {"requests": total.num_requests, "avg_ms": total.avg_response_time}


def end_at_window_close(environment, level: Level, command: int) -> None:
    """The window closes at t1, or at TARGET requests: users finish their current request,
    then this process quits (Locust's --run-time, whole seconds only, is just a bound) — or,
    in a session, writes the level's file and waits for its next command."""
    state = level.state
    while not state["stopping"] and time.time() < level.t1:
        if state["cpu_t0"] is None and time.time() >= level.t0:
            state["cpu_t0"] = _cpu_seconds()
        gevent.sleep(0.02)
    state["cpu_t1"] = _cpu_seconds()
    if level.schedule is not None:
        level.open_state["backlog"] = level.schedule.close(level.t1)
    state["stopping"] = True
    if SESSION is None:
        environment.runner.quit()
        return
    environment.runner.stop()  # as quit() stops them: each user's request, STOP_TIMEOUT at most
    level.close_connections()
    _stats_csv(environment, level.out_dir)
    level.dump()
    next_level(environment, command)


def next_level(environment, n: int) -> None:
    """A session between levels, no user running: command n (`<LAB_SESSION>/command-<n>.json`)
    starts the next level, or quits; none within SESSION_IDLE_S quits too."""
    global LEVEL
    path = SESSION / f"command-{n}.json"
    deadline = time.monotonic() + SESSION_IDLE_S
    while not path.exists():
        if time.monotonic() > deadline:
            logging.warning("lab: no command %s for %.0f s: the session ends", path, SESSION_IDLE_S)
            environment.runner.quit()
            return
        gevent.sleep(COMMAND_POLL_S)
    command = json.loads(path.read_text())
    if command.get("quit"):
        environment.runner.quit()
        return
    LEVEL = Level(Path(command["out_dir"]), after_spawn=_window_rule(command["warmup"], command["duration"]))
    watch(environment, LEVEL, n + 1)
    environment.runner.start(command["users"], command["users"])


def _stats_csv(environment, out_dir: Path) -> None:
    """Locust's own stats of a session's level (its locust_stats.csv, as --csv writes one
    for a process of its own: from the window's open to the level's end)."""
    with open(out_dir / "locust_stats.csv", "w", newline="") as f:
        StatsCSV(environment, PERCENTILES_TO_REPORT).requests_csv(csv.writer(f))


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


@events.quitting.add_listener
def dump(environment, **kw):
    if not isinstance(environment.runner, MasterRunner) and not LEVEL.dumped:
        LEVEL.dump()


class ConnectionPerRequest(HTTPClientPool):
    """The HTTP clients of one user for LAB_KEEPALIVE=0: the socket of every response is
    closed once the response is complete (released, never returned to the connection pool),
    so every request, and every hop of a redirect, dials a new connection. geventhttpclient
    alone would keep a connection the server leaves open: it closes one only when the
    response says `Connection: close` (HTTPSocketPoolResponse.release)."""

    def get_client(self, url):
        client = super().get_client(url)
        pool = client._connection_pool
        pool.return_socket = pool.release_socket
        return client


class LabUser(FastHttpUser):
    abstract = True
    wait_time = constant_throughput(RATE) if RATE > 0 else constant(0)
    network_timeout = TIMEOUT
    connection_timeout = TIMEOUT
    # sent on every request, kept on every hop of a redirect (oha --disable-keepalive)
    default_headers = None if KEEPALIVE else {"Connection": "close"}

    def __init__(self, environment):
        super().__init__(environment)
        if not KEEPALIVE:  # the user's own pool of clients (FastHttpUser makes one per user)
            agent = self.client.client
            agent.clientpool = ConnectionPerRequest(**agent.clientpool.client_args)
        self.level = LEVEL  # the level it was spawned for, whose end stops it
        self.level.users.append(self)

    def on_start(self):
        self.check()

    def check(self):
        if self.level.state["stopping"]:
            raise StopUser()
