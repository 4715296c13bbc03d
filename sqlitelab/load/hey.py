"""hey (rakyll/hey, seed 000's load tool), built from its Go module by `make setup`, run as the
cross-check of notebook 01: the article's own tool beside the lab's generators, counted its way.

    point = run_point(srv, "rails-writes", 16, out_dir, duration=10, warmup=0, cpus="1")

What hey does, and so what a point means (hey v0.1.5: hey.go, requester/requester.go, report.go):
- `-c users` workers, each a closed loop with one request outstanding, all on one Go net/http
  Transport (keep-alive, at most min(users, 500) idle connections; `-disable-keepalive` for a
  connection per request). Go's client follows a redirect (a POST's 302 becomes a GET of the
  Location) unless `-disable-redirects`; either way one request is one result.
- `-z <seconds>`: then every worker finishes the request it is in and stops, so no request is
  left unanswered. Total runs from hey's start to the last of those; Requests/sec is every
  result (any status, and transport errors) over Total.
- Average, Slowest and the latency distribution (10, 25, 50, 75, 90, 95, 99 %: no 99.9) are over
  the results without a transport error, from each request's start to its body read, printed
  to 0.1 ms (four decimals of seconds). Status codes are the final response's.
- Its CPUs: GOMAXPROCS is the CPUs it is pinned to.

hey has no warm-up: it runs `warmup + duration` seconds (the article's `-z 10s` at seed scale,
no warm-up), so that its accounting spans what the lab's hey columns (driver's `hey_*`) count.
A request hey can send: one fixed request (no random ids or payloads: `expressible`).
"""
from __future__ import annotations

import re
from pathlib import Path

from sqlitelab.core import config, vocabulary
from sqlitelab.infra import servers
from sqlitelab.load import commands, driver as load, reference

VERSION = "v0.1.5"  # the Makefile builds it: go install github.com/rakyll/hey@VERSION
BINARY = config.PROJ_ROOT / ".setup" / "bin" / "hey"
INSTALL = "make setup"  # what builds it
# The lab's column that counts a point as hey counts (driver's whole-run accounting): a lab
# generator's rate is compared with hey's in it (sweep's cross-check, analysis.crosscheck_table).
COUNTED_AS = vocabulary.COUNTED_AS["hey"]  # "hey_rps"
TIMEOUT_S = commands.STOP_TIMEOUT  # hey's -t: each request's timeout, as the lab generators'


def available() -> bool:
    return BINARY.exists()


def expressible(scenario: str, scenario_params: dict | None = None, keepalive: bool = True) -> str | None:
    """None when hey can send `scenario` as the lab's generators do, else why not."""
    return reference.fixed_request(scenario, scenario_params)[1]


def command(url: str, r: dict, users: int, seconds: float, keepalive: bool) -> list[str]:
    """hey's command line for request `r` (reference.fixed_request's) at `users` for `seconds`."""
    cmd = [str(BINARY), "-c", str(users), "-z", f"{seconds:g}s", "-t", str(TIMEOUT_S), "-m", r["method"]]
    if r["body"] is not None:
        cmd += ["-d", r["body_text"]]
    if r["json"]:
        cmd += ["-T", "application/json"]
    if r["redirects"] and not r["follow"]:
        cmd.append("-disable-redirects")
    if not keepalive:
        cmd.append("-disable-keepalive")
    return cmd + [url + r["path_text"]]


_SUMMARY = {"Total": "total_s", "Slowest": "slowest_s", "Fastest": "fastest_s",
            "Average": "average_s", "Requests/sec": "rps"}


def parse(text: str) -> dict:
    """hey's default report as numbers: Total, Slowest, Average, Requests/sec (`rps`), Total
    data, the latency distribution (`pct`: percent -> s), the status codes (code -> responses)
    and the errors (message -> count)."""
    out: dict = {"pct": {}, "status": {}, "errors": {}, "bytes": 0}
    section = None
    for line in text.splitlines():
        s = line.strip()
        if s.endswith(":") and not line.startswith(" "):
            section = s[:-1]
            continue
        if section == "Summary":
            m = re.match(r"([A-Za-z/]+):\s+([0-9.]+)", s)
            if m and m.group(1) in _SUMMARY:
                out[_SUMMARY[m.group(1)]] = float(m.group(2))
            m = re.match(r"Total data:\s+(\d+) bytes", s)
            if m:
                out["bytes"] = int(m.group(1))
        elif section == "Latency distribution":
            m = re.match(r"(\d+)%+ in ([0-9.]+) secs", s)
            if m:
                out["pct"][int(m.group(1))] = float(m.group(2))
        elif section == "Status code distribution":
            m = re.match(r"\[(\d+)\]\s+(\d+) responses", s)
            if m:
                out["status"][int(m.group(1))] = int(m.group(2))
        elif section == "Error distribution":
            m = re.match(r"\[(\d+)\]\s+(.*)", s)
            if m:
                out["errors"][m.group(2)] = int(m.group(1))
    if "total_s" not in out or "rps" not in out:
        raise load.LoadError("hey printed no summary (Total, Requests/sec)")
    return out


def run_point(server: servers.Server, scenario: str, users: int, out_dir: Path, *,
              duration: float = 5.0, warmup: float = 0.0, cpus: str | None = None,
              scenario_params: dict | None = None, keepalive: bool = True) -> dict:
    """One hey run of `users` workers for `warmup + duration` seconds, in the lab's point
    vocabulary where the meaning is the same (the crosschecks table's columns)."""
    run, seconds = reference.run_fixed("hey", BINARY, INSTALL, command, server, scenario, users, out_dir,
                                       duration=duration, warmup=warmup, cpus=cpus,
                                       scenario_params=scenario_params, keepalive=keepalive,
                                       timeout_s=TIMEOUT_S)
    h = parse(run.stdout)
    return summary(h, users, run, cpus, seconds)


def summary(h: dict, users: int, run: reference.ClientRun, cpus: str | None, seconds: float) -> dict:
    """A parsed hey report (`parse`) as the crosschecks table's row."""
    ok = sum(n for code, n in h["status"].items() if 200 <= code < 400)
    status_errors = sum(h["status"].values()) - ok
    timeouts = sum(n for msg, n in h["errors"].items() if "timeout" in msg.lower())
    socket = sum(h["errors"].values()) - timeouts
    ms = {p: h["pct"][p] * 1000 if p in h["pct"] else None for p in (50, 90, 95, 99)}
    answered = bool(h["status"])
    results = sum(h["status"].values()) + sum(h["errors"].values())
    return {
        "generator": "hey", "users": users, "window_s": h["total_s"],
        "requests": results, "rps": h["rps"],
        "mean_ms": h["average_s"] * 1000 if answered else None,
        "p50_ms": ms[50], "p90_ms": ms[90], "p95_ms": ms[95], "p99_ms": ms[99], "p999_ms": None,
        "max_ms": h["slowest_s"] * 1000 if answered else None,
        "status_errors": status_errors, "socket_errors": socket, "timeouts": timeouts,
        "errors": status_errors + socket + timeouts, "ok_responses": ok,
        "bytes_per_s": h["bytes"] / h["total_s"] if h["total_s"] else None,
        # hey lets every request in flight finish: only a transport error leaves one unknown
        "acked_responses": ok, "unknown_outcomes": socket + timeouts,
        **reference.run_columns(run, cpus, seconds),
    }
