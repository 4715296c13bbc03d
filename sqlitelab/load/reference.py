"""One run of a reference client — wrk (the lab's reference, Debian's package), hey (seed 000's
tool) or oha (seed 001's) — pinned to the generator's CPUs, with its CPU seconds from the
kernel's account of the reaped process (RUSAGE_CHILDREN), the server's over the same span, and
the wall time. Each client's module (`wrk`, `hey`, `oha`) builds its command line and reads its
own report; `crosscheck.TOOLS` names them for a sweep's cross-check."""
from __future__ import annotations

import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sqlitelab.core import layout, processes
from sqlitelab.infra import hosts, servers
from sqlitelab.load import driver as load, sampler, scenarios


def fixed_request(scenario: str, scenario_params: dict | None) -> tuple[dict | None, str | None]:
    """The one request a scenario sends, when it is fixed (one reachable request whose path and
    body are literal: scenarios.compile's, with `path_text` and `body_text`), else None and why
    not — hey and oha send one request again and again."""
    if scenario not in scenarios.SCENARIOS:
        return None, f"unknown scenario {scenario!r}"
    spec = scenarios.compile(scenario, scenarios.lab_env(scenario_params))
    reach = scenarios.reachable(spec)
    if len(reach) != 1:
        return None, "it sends one fixed request; the scenario mixes several"
    r = reach[0]
    if not all("lit" in p for p in r["path"] + (r["body"] or [])):
        return None, "it sends one fixed request; the scenario draws ids or payloads"
    return {**r, "path_text": "".join(p["lit"] for p in r["path"]),
            "body_text": None if r["body"] is None else "".join(p["lit"] for p in r["body"])}, None


@dataclass(frozen=True)
class ClientRun:
    stdout: str          # what the client printed (its report)
    gen_cpu_s: float     # the client's CPU seconds (user + system)
    server_cpu_s: float  # the server's process tree's CPU seconds over the same span
    wall_s: float


def run(name: str, cmd: list[str], server: servers.Server, cpus: str | None, log: Path,
        timeout: float) -> ClientRun:
    """Run `cmd` pinned to `cpus`; its stderr (and then its stdout) appended to `log`. A non-zero
    exit is a LoadError with the log's tail; the client is stopped by its PID on a timeout or an
    interrupt."""
    pinned, _ = processes.pin_command(cmd, cpus)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0, w0 = sampler.tree_cpu_seconds(server.pids), time.perf_counter()
    with open(log, "ab") as out:
        proc = processes.spawn(pinned, name, stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL)
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        finally:  # also on a timeout or an interrupt: stop it by its PID
            processes.stop(proc)
    wall = time.perf_counter() - w0
    s1 = sampler.tree_cpu_seconds(server.pids)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = stdout.decode(errors="replace")
    with open(log, "a") as out:
        out.write(text)
    if proc.returncode != 0:
        raise load.LoadError(f"{name} failed (exit {proc.returncode}); its output:\n" + processes.log_tail(log))
    gen_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ClientRun(text, gen_cpu, s1 - s0, wall)


def run_columns(run: ClientRun, cpus: str | None, seconds: float) -> dict:
    """The crosschecks row's columns about the run itself, for a client that runs once with no
    warm-up of its own (hey, oha): its CPUs and CPU share, the server's, and its duration."""
    ncpu = len(layout.parse_cpus(cpus)) if cpus else len(layout.available_cpus())
    return {"threads": ncpu, "gen_cpus": ncpu, "gen_cpu_pct": 100 * run.gen_cpu_s / run.wall_s,
            "server_cpu_pct": 100 * run.server_cpu_s / run.wall_s, "generator_pinning": cpus,
            "duration_s": seconds, "warmup_s": 0}


def run_fixed(name: str, binary: Path, install: str, command, server: servers.Server, scenario: str, users: int,
              out_dir: Path, *, duration: float, warmup: float, cpus: str | None,
              scenario_params: dict | None, keepalive: bool, timeout_s: float) -> tuple[ClientRun, float]:
    """One run of a client that sends one fixed request (hey, oha) for `warmup + duration`
    seconds — the articles' tools have no warm-up of their own — after the checks they share:
    built, sane arguments, a scenario it can send, a target the lab made. `command(url, request,
    users, seconds, keepalive)` is its command line; `install`, the make target that builds it (its
    error when missing names it). Returns the run and its seconds."""
    if not binary.exists():
        raise load.LoadError(f"{name} is not built ({binary}): run {install}")
    if users < 1 or duration <= 0 or warmup < 0:
        raise ValueError("users must be >= 1, duration > 0, warmup >= 0")
    r, why = fixed_request(scenario, scenario_params)
    if why:
        raise ValueError(f"{name} cannot run {scenario!r}: {why}")
    hosts.check_target(server.host, server.runner)
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = duration + warmup
    return run(name, command(server.url, r, users, seconds, keepalive), server, cpus,
               out_dir / f"{name}.log", timeout=seconds + timeout_s + 30), seconds
