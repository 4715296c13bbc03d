"""wrk (Debian's package, a C client on epoll) as the reference client the lab's own
generators are checked against: calibration (sqlitelab.load.calibrate) and the cross-check a sweep
can add (`sweep(crosscheck=users)`).

    point = run_point(srv, "mix", 32, duration=5, warmup=1, cpus="1",
                      scenario_params={"write_share": 1.0, "payload_bytes": 2048})

What wrk does, and so what a point means (wrk 4.1, wg/wrk src/wrk.c):
- `-c users` connections, each a closed loop with one request outstanding, all kept alive;
  `-t` threads (one per generator CPU, at most one per connection), each its own event loop.
- It counts every response that completed during `-d` seconds (whole seconds only) and
  reports latency from writing a request to its last byte, over those responses; the run's
  duration runs from the threads' start to their stop. A request still in flight at the stop
  is dropped unanswered: its outcome is unknown (the audit allows for it).
- Statuses above 399 are counted as `status` errors, and are in `requests`; socket errors
  (connect, read, write) and timeouts are not.
- It never follows a redirect, and cannot open a connection per request: scenarios needing
  either are refused (`expressible`).

The warm-up is a separate, unmeasured wrk run of `warmup` seconds just before. Requests per
second are wrk's (responses / its duration); the generator's CPU comes from the kernel's
account of the reaped wrk process (RUSAGE_CHILDREN), over its wall-clock time.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

from sqlitelab.infra import hosts, servers
from sqlitelab.core import layout, processes, vocabulary
from sqlitelab.load import commands, driver as load, reference, scenarios

BINARY = "wrk"
INSTALL = "make setup"  # what installs it (Debian's package)
COUNTED_AS = vocabulary.COUNTED_AS["wrk"]  # the lab's column comparable with wrk's rate (the exact window's)
TIMEOUT_S = commands.STOP_TIMEOUT       # wrk's --timeout, as the lab generators' request timeout

_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "bytes": %d, "connect": %d, "read": %d, ' ..
    '"write": %d, "status": %d, "timeout": %d, "mean_us": %.3f, "max_us": %d, "min_us": %d, ' ..
    '"p50_us": %d, "p90_us": %d, "p95_us": %d, "p99_us": %d, "p999_us": %d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency.mean, latency.max, latency.min, latency:percentile(50),
    latency:percentile(90), latency:percentile(95), latency:percentile(99),
    latency:percentile(99.9)))
end
"""


def available() -> bool:
    return shutil.which(BINARY) is not None


def version() -> str:
    """`wrk debian/4.1.0-3+b2`: the first line of `wrk --version`, without its build notes."""
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=10)
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0].split(" [")[0] if text else BINARY


def _lua_str(s: str) -> str:
    return json.dumps(s)  # a JSON string of ASCII is a valid Lua string literal


def expressible(scenario: str, scenario_params: dict | None = None, keepalive: bool = True) -> str | None:
    """None when wrk can send `scenario` as the lab's generators do, else why not."""
    if scenario not in scenarios.SCENARIOS:
        return f"unknown scenario {scenario!r}"
    if not keepalive:
        return "wrk keeps every connection alive (no connection per request)"
    spec = scenarios.compile(scenario, scenarios.lab_env(scenario_params))
    if any(r["redirects"] and r["follow"] for r in spec["requests"]):
        return "wrk does not follow the redirect"
    return None


def _lua_pieces(pieces: list[dict], max_id: int) -> str:
    """A Lua expression joining a spec's pieces (wrk cannot learn new ids: int_to_max_id draws
    from the ids that exist when the level starts)."""
    parts = []
    for p in pieces:
        if "lit" in p:
            parts.append(_lua_str(p["lit"]))
        elif "int" in p:
            parts.append(f"math.random({p['int'][0]}, {p['int'][1]})")
        else:
            lo = p["int_to_max_id"]
            parts.append(f"math.random({lo}, {max(lo, max_id)})")
    return " .. ".join(parts) or '""'


def script(scenario: str, scenario_params: dict | None = None) -> str:
    """The Lua script that makes wrk send the requests of `scenario`, compiled from the registry
    as for the lab's generators (scenarios.compile: same methods, paths, bodies and random
    choices), and print its summary as JSON."""
    why = expressible(scenario, scenario_params)
    if why:
        raise ValueError(f"wrk cannot run {scenario!r}: {why}")
    spec = scenarios.compile(scenario, scenarios.lab_env(scenario_params))
    reachable = scenarios.reachable(spec)
    one = reachable[0] if len(reachable) == 1 else None
    if one is not None and all("lit" in p for p in one["path"] + (one["body"] or [])):
        body = (f'wrk.method = {_lua_str(one["method"])}\n'  # a fixed request: wrk's fast path
                f'wrk.path = {_lua_pieces(one["path"], spec["max_id"])}\n')
        if one["body"] is not None:
            body += f'wrk.body = {_lua_pieces(one["body"], spec["max_id"])}\n'
        if one["json"]:
            body += 'wrk.headers["Content-Type"] = "application/json"\n'
        return "math.randomseed(os.time())\n" + body + _DONE

    def call(r: dict) -> str:
        args = [_lua_str(r["method"]), _lua_pieces(r["path"], spec["max_id"])]
        if r["body"] is not None:
            args += ["json_headers" if r["json"] else "nil", _lua_pieces(r["body"], spec["max_id"])]
        return f"return wrk.format({', '.join(args)})"

    lines = ['local json_headers = {["Content-Type"] = "application/json"}', "request = function()"]
    shared = [r for r in reachable[:-1] if r["share"] is not None]
    if len(shared) == 1:
        lines += [f"  if math.random() < {shared[0]['share']!r} then", f"    {call(shared[0])}", "  end"]
    elif shared:
        lines.append("  local draw = math.random()")
        cum = 0.0
        for r in shared:
            cum += r["share"]
            lines += [f"  if draw < {cum!r} then", f"    {call(r)}", "  end"]
    lines += [f"  {call(reachable[-1])}", "end"]
    return "math.randomseed(os.time())\n" + "\n".join(lines) + "\n" + _DONE


def _run(server: servers.Server, users: int, seconds: int, threads: int, lua: Path,
         cpus: str | None, log: Path) -> tuple[dict, float, float, float]:
    """One wrk run: its summary, its CPU seconds, the server's CPU seconds, and wall time."""
    r = reference.run("wrk", [BINARY, "-t", str(threads), "-c", str(users), "-d", f"{seconds}s",
                              "--timeout", f"{TIMEOUT_S}s", "-s", str(lua), server.url],
                      server, cpus, log, timeout=seconds + TIMEOUT_S + 30)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise load.LoadError("wrk printed no summary; its output:\n" + processes.log_tail(log))
    return json.loads(line[len("WRKJSON "):]), r.gen_cpu_s, r.server_cpu_s, r.wall_s


def run_point(server: servers.Server, scenario: str, users: int, out_dir: Path, *,
              duration: float = 5.0, warmup: float = 1.0, cpus: str | None = None,
              scenario_params: dict | None = None, keepalive: bool = True) -> dict:
    """One measured wrk run of `users` connections (after an unmeasured warm-up run), in the
    lab's point vocabulary where the meaning is the same (rps, mean_ms, p50_ms…)."""
    if not available():
        raise load.LoadError("wrk is not installed (make setup installs Debian's package)")
    if not keepalive:
        raise ValueError(f"wrk cannot run {scenario!r}: {expressible(scenario, scenario_params, keepalive)}")
    if users < 1 or duration <= 0 or warmup < 0:
        raise ValueError("users must be >= 1, duration > 0, warmup >= 0")
    hosts.check_target(server.host, server.runner)
    out_dir.mkdir(parents=True, exist_ok=True)
    lua = out_dir / "wrk.lua"
    lua.write_text(script(scenario, scenario_params))
    log = out_dir / "wrk.log"
    ncpu = len(layout.parse_cpus(cpus)) if cpus else len(layout.available_cpus())
    threads = max(1, min(users, ncpu))
    warm = None
    if warmup > 0:
        warm, *_ = _run(server, users, max(1, math.ceil(warmup)), threads, lua, cpus, log)
    seconds = max(1, math.ceil(duration))
    s, gen_cpu, server_cpu, wall = _run(server, users, seconds, threads, lua, cpus, log)
    span = s["duration_us"] / 1e6
    ok = s["requests"] - s["status"]   # 2xx and 3xx responses
    runs = [r for r in (warm, s) if r]
    return {
        "generator": "wrk", "users": users, "threads": threads, "window_s": span,
        "requests": s["requests"], "rps": s["requests"] / span if span else None,
        "mean_ms": s["mean_us"] / 1000 if s["requests"] else None,
        **{f"{k}_ms": (s[f"{k}_us"] / 1000 if s["requests"] else None)
           for k in ("p50", "p90", "p95", "p99", "p999")},
        "max_ms": s["max_us"] / 1000 if s["requests"] else None,
        "status_errors": s["status"], "socket_errors": s["connect"] + s["read"] + s["write"],
        "timeouts": s["timeout"], "errors": s["status"] + s["connect"] + s["read"] + s["write"] + s["timeout"],
        "ok_responses": ok, "bytes_per_s": s["bytes"] / span if span else None,
        # every 2xx/3xx of the warm-up and measured runs: the writes wrk saw acknowledged
        "acked_responses": sum(r["requests"] - r["status"] for r in runs),
        # requests whose outcome wrk never learnt: in flight at each run's stop, or failed on
        # the socket or by timeout after being sent
        "unknown_outcomes": users * len(runs) + sum(r["read"] + r["write"] + r["timeout"] for r in runs),
        "gen_cpu_pct": 100 * gen_cpu / wall, "gen_cpus": ncpu,
        "server_cpu_pct": 100 * server_cpu / wall,
        "generator_pinning": cpus, "duration_s": seconds, "warmup_s": math.ceil(warmup) if warmup else 0,
    }
