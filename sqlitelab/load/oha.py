"""oha (hatoo/oha, seed 001's load tool), built from its crate by `make setup`, run as the
cross-check of notebook 02: the article's own tool beside the lab's generators.

    point = run_point(srv, "metrics-writes", 3, out_dir, duration=5, warmup=0, cpus="1",
                      keepalive=False)

What oha does, and so what a point means (oha 1.16.0: src/lib.rs, client.rs, printer.rs,
result_data.rs), run as the article ran it (`-c N -z 5s -m POST --latency-correction
--disable-keepalive --redirect 0`), with `--no-tui --output-format json`:
- `-c users` connections, each a closed loop with one request outstanding; with
  `--disable-keepalive` a new TCP connection per request. `--redirect 0` returns a 3xx as it is
  (a scenario that follows redirects gets oha's default, 10).
- `-z <seconds>`: at the deadline the requests in flight are aborted ("aborted due to
  deadline", in its error distribution): their outcome is unknown (the audit allows for them).
- requestsPerSec is every result over Total, the aborted ones included; successRate leaves the
  aborted out of its denominator. Latency (average, slowest, percentiles 10 … 99.99) is over the
  requests that got a response, of any status. `--latency-correction` only acts with a rate
  (`-q`), which the article did not set: it changes nothing here.

oha has no warm-up: it runs `warmup + duration` seconds (the article's 5 s, none before).
"""
from __future__ import annotations

import json
from pathlib import Path

from sqlitelab.core import config, vocabulary
from sqlitelab.infra import servers
from sqlitelab.load import commands, driver as load, reference

VERSION = "1.16.0"  # the Makefile builds it: cargo install oha --version VERSION --locked
BINARY = config.PROJ_ROOT / ".setup" / "bin" / "oha"
INSTALL = "make oha"  # what builds it (make test and make seed do too; make run needs none)
COUNTED_AS = vocabulary.COUNTED_AS["oha"]  # the lab's column comparable with oha's rate (the exact window's)
TIMEOUT_S = commands.STOP_TIMEOUT  # oha's -t: each request's timeout, as the lab generators'
DEADLINE = "aborted due to deadline"  # oha's error for a request in flight at -z's end


def available() -> bool:
    return BINARY.exists()


def expressible(scenario: str, scenario_params: dict | None = None, keepalive: bool = True) -> str | None:
    """None when oha can send `scenario` as the lab's generators do, else why not."""
    return reference.fixed_request(scenario, scenario_params)[1]


def command(url: str, r: dict, users: int, seconds: float, keepalive: bool) -> list[str]:
    """oha's command line for request `r` (reference.fixed_request's) at `users` for `seconds`."""
    cmd = [str(BINARY), "-c", str(users), "-z", f"{seconds:g}s", "-t", f"{TIMEOUT_S}s",
           "-m", r["method"], "--latency-correction", "--no-tui", "--output-format", "json",
           "--redirect", "10" if (r["redirects"] and r["follow"]) else "0"]
    if r["body"] is not None:
        cmd += ["-d", r["body_text"]]
    if r["json"]:
        cmd += ["-T", "application/json"]
    if not keepalive:
        cmd.append("--disable-keepalive")
    return cmd + [url + r["path_text"]]


def run_point(server: servers.Server, scenario: str, users: int, out_dir: Path, *,
              duration: float = 5.0, warmup: float = 0.0, cpus: str | None = None,
              scenario_params: dict | None = None, keepalive: bool = True) -> dict:
    """One oha run of `users` connections for `warmup + duration` seconds, in the lab's point
    vocabulary where the meaning is the same (the crosschecks table's columns)."""
    run, seconds = reference.run_fixed("oha", BINARY, INSTALL, command, server, scenario, users, out_dir,
                                       duration=duration, warmup=warmup, cpus=cpus,
                                       scenario_params=scenario_params, keepalive=keepalive,
                                       timeout_s=TIMEOUT_S)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        raise load.LoadError(f"oha printed no JSON report; its output is in {out_dir / 'oha.log'}") from None
    return summary(report, users, run, cpus, seconds)


def summary(report: dict, users: int, run: reference.ClientRun, cpus: str | None, seconds: float) -> dict:
    """oha's JSON report as the crosschecks table's row."""
    s = report["summary"]
    status = {int(k): v for k, v in report.get("statusCodeDistribution", {}).items()}
    errors = report.get("errorDistribution", {})
    ok = sum(n for code, n in status.items() if 200 <= code < 400)
    status_errors = sum(status.values()) - ok
    aborted = errors.get(DEADLINE, 0)
    timeouts = sum(n for msg, n in errors.items() if msg != DEADLINE and "timeout" in msg.lower())
    socket = sum(errors.values()) - aborted - timeouts
    pct = report.get("latencyPercentiles", {})
    answered = bool(status)

    def ms(key: str):
        v = pct.get(key)
        return v * 1000 if answered and v is not None else None

    return {
        "generator": "oha", "users": users, "window_s": s["total"],
        "requests": sum(status.values()) + sum(errors.values()), "rps": s["requestsPerSec"],
        "mean_ms": s["average"] * 1000 if answered else None,
        "p50_ms": ms("p50"), "p90_ms": ms("p90"), "p95_ms": ms("p95"), "p99_ms": ms("p99"),
        "p999_ms": ms("p99.9"), "max_ms": s["slowest"] * 1000 if answered else None,
        "status_errors": status_errors, "socket_errors": socket, "timeouts": timeouts,
        "errors": status_errors + socket + timeouts, "ok_responses": ok,
        "bytes_per_s": s.get("sizePerSec"),
        "acked_responses": ok,
        # aborted at the deadline, or failed on the socket or by timeout after being sent
        "unknown_outcomes": aborted + socket + timeouts,
        **reference.run_columns(run, cpus, seconds),
    }
