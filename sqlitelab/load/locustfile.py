"""The lab's Locust user, with its own in-window recorder.

One user class, LabScenario, sends what LAB_SPEC (a spec compiled from scenarios.toml by
sqlitelab.load.scenarios, the same file loadgen reads) says: a request drawn by its shares, its
path and body joined from literal pieces and uniform integers.

Run by sqlitelab.load.driver as a subprocess (never inside a notebook kernel). Every Locust process
that runs users records, for each request that starts at or after LAB_T0 and finishes by
LAB_T1 (epoch seconds), its latency into an HdrHistogram in microseconds, plus counts per
status code and failure kind; and, for the audit, every response of the whole run by
(request name, status), and the requests still in flight when the process stopped (`run_inflight`
by request name: sent, never answered — a write among them may have been committed). Beside the window it keeps `hey`'s accounting of the whole run
(`run_*`: every finished request, in the window or not). At quit it writes
`LAB_OUT_DIR/proc-<pid>.json`.

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
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from collections import Counter
from pathlib import Path

import gevent
from geventhttpclient.client import HTTPClientPool
from hdrh.histogram import HdrHistogram
from locust import FastHttpUser, constant, constant_throughput, events, task
from locust.exception import StopUser
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

from sqlitelab.core.failures import failure_kind

T0 = float(os.environ.get("LAB_T0", "0"))
T1 = float(os.environ.get("LAB_T1", "1e12"))
UNKNOWN = 1e12  # T0 and T1 before the users have spawned (LAB_WINDOW_AFTER_SPAWN)
AFTER_SPAWN = None
if os.environ.get("LAB_WINDOW_AFTER_SPAWN"):
    AFTER_SPAWN = tuple(float(x) for x in os.environ["LAB_WINDOW_AFTER_SPAWN"].split(","))
    if len(AFTER_SPAWN) != 2 or min(AFTER_SPAWN) < 0:
        raise ValueError(f"LAB_WINDOW_AFTER_SPAWN={os.environ['LAB_WINDOW_AFTER_SPAWN']!r} must be "
                         "'<warm-up>,<length>' in seconds")
    T0 = T1 = UNKNOWN
TARGET = int(os.environ.get("LAB_TARGET", "0"))
# A worker on another machine (ssh host): its CPU is not sampled from here, so it reports its
# own over the window (os.times at the window's open and close) and its CPU count.
REMOTE_HOST = os.environ.get("LAB_REMOTE_HOST") or None
OUT_DIR = Path(os.environ.get("LAB_OUT_DIR", "."))
if not os.environ.get("LAB_SPEC"):
    raise ValueError("LAB_SPEC must name a compiled scenario (python -m sqlitelab.load.scenarios NAME > spec.json)")
SPEC = json.loads(Path(os.environ["LAB_SPEC"]).read_text())
RATE = float(os.environ.get("LAB_RATE_PER_USER", "0"))    # paced users: requests/s per user; 0 = closed loop
LATE_TOLERANCE_S = 0.005  # an open-loop request sent later than this after its due time is late
ARRIVALS_KINDS = ("constant", "poisson")


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
TIMEOUT = float(os.environ.get("LAB_REQUEST_TIMEOUT", "30"))
_keepalive = os.environ.get("LAB_KEEPALIVE", "").strip() or "1"  # 0: a new connection per request
if _keepalive not in ("0", "1"):
    raise ValueError(f"LAB_KEEPALIVE={_keepalive!r} must be 1 or 0")
KEEPALIVE = _keepalive == "1"

# 1 µs .. 100 s at 3 significant digits
hist = HdrHistogram(1, 100_000_000, 3)
window_status: Counter = Counter()
window_failures: Counter = Counter()
run_counts: Counter = Counter()  # "name status" -> n over the whole run (the audit's acks)
state = {"count": 0, "bytes": 0, "sum_us": 0, "first_start": None, "last_end": None,
         "t1": None, "stopping": False, "spawned_at": None, "max_id": SPEC["max_id"],
         "locust_window": None, "overran": 0, "max_overrun_s": 0.0, "cpu_t0": None, "cpu_t1": None}


class Schedule:
    """The due times of one process's open-loop requests: slot 0 when the first user asks,
    then every 1/rate s (constant) or after exponential gaps of mean 1/rate (poisson)."""

    def __init__(self, rate: float, kind: str, seed: int | None):
        self.rate, self.kind = rate, kind
        self.rng = random.Random(seed)
        self.origin: float | None = None
        self.k = 0                       # the next slot's index
        self.next_t: float | None = None  # ... and its due time
        self.offered = 0                 # slots due in [T0, T1)
        self.closed = False

    def _advance(self) -> float:
        t = self.next_t
        if T0 <= t < T1:
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


SCHEDULE = Schedule(ARRIVAL_RATE, ARRIVALS, ARRIVAL_SEED) if ARRIVAL_RATE > 0 else None
due_of: dict = {}  # greenlet -> the due time of the request it is sending (open loop)
# greenlet -> "<method> <name>" of the request it has sent and not yet seen answered: what is
# left here at the quit was in flight when Locust killed its users (the audit's in-flight writes)
inflight: dict = {}
# the window per second (by the second a request finished in, from T0)
per_second: dict[int, dict] = {}
open_state = {"late": 0, "max_lag_s": 0.0, "backlog": 0}

# The whole run as `hey` counts it (rakyll/hey requester/report.go): `results` is every
# finished request whatever its outcome (hey's numRes, transport errors included); `ok` those
# with an HTTP status (not a transport error), over which the latency sum and maximum are
# taken (hey's Average and Slowest); first_start..last_end spans them all (hey's Total).
run = {"results": 0, "ok": 0, "sum_us": 0, "max_us": 0, "first_start": None, "last_end": None}


@events.request.add_listener
def record(request_type, name, response_time, response_length, response=None, exception=None,
           start_time=None, **kw):
    status = getattr(response, "status_code", 0) or 0
    run_counts[f"{request_type} {name} {status}"] += 1
    inflight.pop(gevent.getcurrent(), None)
    due = due_of.pop(gevent.getcurrent(), None)
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
    window_end = state["t1"] if state["t1"] is not None else T1
    if T0 <= start_time < window_end < end:  # started inside, still running at the close
        state["overran"] += 1
        state["max_overrun_s"] = max(state["max_overrun_s"], end - window_end)
    if start_time < T0 or end > T1 or state["t1"] is not None:
        return
    lag = 0.0
    if due is not None:  # open loop: from the due time, the wait for a free user included
        us = max(1, int(round((end - due) * 1e6)))
        lag = max(0.0, start_time - due)
        open_state["max_lag_s"] = max(open_state["max_lag_s"], lag)
    late = lag > LATE_TOLERANCE_S
    open_state["late"] += late
    hist.record_value(min(us, 100_000_000))
    sec = per_second.get(int(end - T0))
    if sec is None:
        sec = per_second[int(end - T0)] = {"n": 0, "failures": Counter(), "late": 0,
                                           "hist": HdrHistogram(1, 100_000_000, 3)}
    sec["n"] += 1
    sec["late"] += late
    sec["hist"].record_value(min(us, 100_000_000))
    state["count"] += 1
    state["sum_us"] += us
    state["bytes"] += response_length or 0
    state["first_start"] = start_time if state["first_start"] is None else min(state["first_start"], start_time)
    state["last_end"] = end if state["last_end"] is None else max(state["last_end"], end)
    window_status[str(status)] += 1
    kind = failure_kind(status, exception)
    if kind:
        window_failures[kind] += 1
        sec["failures"][kind] += 1
    if TARGET and state["count"] >= TARGET:
        state["t1"] = end
        state["stopping"] = True


RUNNER: dict = {}  # this process's Locust runner (events.init)


@events.init.add_listener
def window_from_master(environment, **kw):
    """Distributed (a master and its workers, or --processes): the master alone opens the
    window once every worker's users have spawned, and sends it to them (`lab_window`)."""
    RUNNER["runner"] = environment.runner
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message("lab_window", _window_from_master)


def _window_from_master(environment, msg, **kw):
    global T0, T1
    T0, T1 = msg.data["t0"], msg.data["t1"]


@events.spawning_complete.add_listener
def spawned(user_count, **kw):
    global T0, T1
    now = time.time()
    state["spawned_at"] = now  # a worker: when its master said every user had spawned
    runner = RUNNER.get("runner")
    if AFTER_SPAWN and T0 == UNKNOWN and not isinstance(runner, WorkerRunner):
        T0 = now + AFTER_SPAWN[0]
        T1 = T0 + AFTER_SPAWN[1]
        if isinstance(runner, MasterRunner):
            runner.send_message("lab_window", {"t0": T0, "t1": T1})
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        tmp = OUT_DIR / f".window-{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"t0": T0, "t1": T1, "spawned_at": now}))
        os.replace(tmp, OUT_DIR / f"window-{os.getpid()}.json")


@events.init.add_listener
def locust_window(environment, **kw):
    """Locust's own view of the window (single-process runner): its stats reset at T0 and
    its exact average read at the window's end, to cross-check the HdrHistogram."""
    if not isinstance(environment.runner, LocalRunner):
        return

    def reset_then_snapshot():
        while T0 == UNKNOWN and not state["stopping"]:  # LAB_WINDOW_AFTER_SPAWN: not yet known
            gevent.sleep(0.005)
        gevent.sleep(max(0.0, T0 - time.time()))
        environment.runner.stats.reset_all()
        while not state["stopping"] and time.time() < T1:
            gevent.sleep(min(0.02, max(0.0, T1 - time.time())))
        total = environment.runner.stats.total
        state["locust_window"] = {"requests": total.num_requests,
                                  "avg_ms": total.avg_response_time}
    gevent.spawn(reset_then_snapshot)


@events.init.add_listener
def end_at_window_close(environment, **kw):
    """The window closes at T1, or at TARGET requests: users finish their current request,
    then this process quits (Locust's --run-time, whole seconds only, is just a bound)."""
    if isinstance(environment.runner, MasterRunner):
        return

    def stopper():
        while not state["stopping"] and time.time() < T1:
            if state["cpu_t0"] is None and time.time() >= T0:
                state["cpu_t0"] = _cpu_seconds()
            gevent.sleep(0.02)
        state["cpu_t1"] = _cpu_seconds()
        if SCHEDULE is not None:
            open_state["backlog"] = SCHEDULE.close(T1)
        state["stopping"] = True
        environment.runner.quit()
    gevent.spawn(stopper)


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


@events.quitting.add_listener
def dump(environment, **kw):
    if isinstance(environment.runner, MasterRunner):
        return
    t1 = state["t1"] if state["t1"] is not None else min(T1, time.time())
    out = {
        "pid": os.getpid(), "t0": T0, "t1": t1, "target": TARGET,
        "count": state["count"], "sum_us": state["sum_us"], "bytes": state["bytes"],
        "overran": state["overran"], "max_overrun_s": state["max_overrun_s"],
        "first_start": state["first_start"], "last_end": state["last_end"],
        "spawned_at": state["spawned_at"],
        "status": dict(window_status), "failures": dict(window_failures),
        "run_counts": dict(run_counts), "locust_window": state["locust_window"],
        "run_inflight": dict(Counter(inflight.values())),
        "hist": hist.encode().decode() if state["count"] else None,
        "run_first_start": run["first_start"], "run_last_end": run["last_end"],
        "run_results": run["results"], "run_ok": run["ok"], "run_sum_us": run["sum_us"],
        "run_max_us": run["max_us"],
        "remote_host": REMOTE_HOST, "cpu_t0": state["cpu_t0"], "cpu_t1": state["cpu_t1"],
        "cpus": len(os.sched_getaffinity(0)),
        "open_loop": SCHEDULE is not None, "arrival_rate": ARRIVAL_RATE or None,
        "arrivals": ARRIVALS if SCHEDULE is not None else None,
        "offered": SCHEDULE.offered if SCHEDULE is not None else 0,
        "late": open_state["late"], "max_lag_s": open_state["max_lag_s"],
        "backlog": open_state["backlog"],
        "seconds": [{"s": s, "n": b["n"], "failures": dict(b["failures"]), "late": b["late"],
                     "hist": b["hist"].encode().decode()} for s, b in sorted(per_second.items())],
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"proc-{os.getpid()}.json").write_text(json.dumps(out))


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

    def on_start(self):
        if state["stopping"]:
            raise StopUser()

    def check(self):
        if state["stopping"]:
            raise StopUser()


def _join(pieces: list[dict]) -> str:
    """A path or body from its pieces: literal text and uniform integers (scenarios.py)."""
    out = []
    for p in pieces:
        if "lit" in p:
            out.append(p["lit"])
        elif "int" in p:
            out.append(str(random.randint(*p["int"])))
        else:
            lo = p["int_to_max_id"]
            out.append(str(random.randint(lo, max(lo, state["max_id"]))))
    return "".join(out)


JSON_HEADERS = {"Content-Type": "application/json"}


def _fixed(pieces: list[dict] | None) -> str | None:
    """The text of pieces that are all literal (joined once, not per request), else None."""
    if pieces is None or any("lit" not in p for p in pieces):
        return None
    return "".join(p["lit"] for p in pieces)


class LabScenario(LabUser):
    """Each task sends one request of the spec: the first whose cumulative share exceeds a
    uniform draw, else the last."""
    spec_requests = [{**r, "fixed_path": _fixed(r["path"]), "fixed_body": _fixed(r["body"])}
                     for r in SPEC["requests"]]
    spec_shared = [r for r in spec_requests if r["share"] is not None]

    @task
    def send(self):
        self.check()
        if SCHEDULE is not None:  # open loop: the next due time, whatever the others wait for
            due = SCHEDULE.take()
            if due is None:
                raise StopUser()
            if (wait := due - time.time()) > 0:
                gevent.sleep(wait)
            self.check()
            due_of[gevent.getcurrent()] = due
        req = self.spec_requests[-1]
        if self.spec_shared:
            draw, cum = random.random(), 0.0
            for r in self.spec_shared:
                cum += r["share"]
                if draw < cum:
                    req = r
                    break
        path = req["fixed_path"] or _join(req["path"])
        body = (req["fixed_body"] or _join(req["body"])) if req["body"] is not None else None
        inflight[gevent.getcurrent()] = f"{req['method']} {req['name']}"
        r = self.client.request(req["method"], path, name=req["name"], data=body,
                                headers=JSON_HEADERS if req["json"] else None,
                                allow_redirects=req["follow"])
        if req["track_max_id"] and r.status_code == 201:
            try:
                state["max_id"] = max(state["max_id"], int(r.json()["id"]))
            except (ValueError, KeyError, TypeError):
                pass
