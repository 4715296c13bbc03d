"""A delayed network link between the generator and the server, in user space.

This kernel has no `netem`, so a delay is a TCP proxy: sqlitelab/infra/delayproxy (Rust, std only)
holds every chunk it reads for `delay_us` microseconds before writing it on, in each direction,
so a request and its response each cross it once: a round trip gains 2 × delay_us. It sleeps
with nanosleep (microsecond precision). Toxiproxy, the usual tool, was not used: its latency
toxic takes whole milliseconds (toxics/latency.go: `Latency int64 // ms`), and Go's timers
round any sleep under a millisecond up to ~1.1 ms on Linux (measured here: time.Sleep(100 µs)
took 1.10 ms at the median), so 0.1 and 0.5 ms cannot be asked of it.

The delay actually applied is measured, not assumed: the proxy counts how late each chunk left
past its due time (`late_mean_us`, `late_max_us`), and `round_trip` measures what a round trip
through the link costs against the direct path.

    with link.DelayLink(server.url, delay_us=100, cpus="1", log_dir=out) as ln:
        load.run_level(server, ..., link=ln)       # the generator sends to ln.url
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

from sqlitelab.core import processes
from sqlitelab.infra import servers

PROXY_DIR = Path(__file__).resolve().parent / "delayproxy"
PROXY_BIN = PROXY_DIR / "target" / "release" / "delayproxy"
MAX_DELAY_US = 100_000  # a tenth of a second each way: far past any data-centre link


def build(timeout: float = 300) -> Path:
    """Build the proxy unless its binary is newer than its sources (cargo, no crates)."""
    src = [PROXY_DIR / "Cargo.toml", *sorted((PROXY_DIR / "src").glob("*.rs"))]
    if PROXY_BIN.exists() and PROXY_BIN.stat().st_mtime >= max(f.stat().st_mtime for f in src):
        return PROXY_BIN
    path = os.pathsep.join([os.environ.get("PATH", ""), str(Path.home() / ".cargo" / "bin")])
    proc = subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=PROXY_DIR,
                          env={**os.environ, "PATH": path}, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise servers.ServerStartError(f"delayproxy: build failed (exit {proc.returncode}):\n{tail}")
    PROXY_BIN.touch()
    return PROXY_BIN


def check_delay(delay_us) -> int:
    if isinstance(delay_us, bool) or not isinstance(delay_us, int) or not 0 <= delay_us <= MAX_DELAY_US:
        raise ValueError(f"a link delay is whole microseconds each way, 0..{MAX_DELAY_US:,}, "
                         f"not {delay_us!r}")
    return delay_us


class DelayLink:
    """One delayproxy in front of `upstream` (a server's URL), listening on loopback, pinned
    to `cpus` (the generator's side of the machine: the link is not the server's work)."""

    def __init__(self, upstream: str, delay_us: int, cpus: str | None, log_dir: Path):
        self.delay_us = check_delay(delay_us)
        u = urlsplit(upstream)
        if u.hostname is None or u.port is None:
            raise ValueError(f"upstream must be http://host:port, not {upstream!r}")
        self.upstream = f"{u.hostname}:{u.port}"
        self.cpus, self.log_dir = cpus, Path(log_dir)
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.pinned = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __enter__(self) -> "DelayLink":
        build()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ready = self.log_dir / "delayproxy.addr"
        ready.unlink(missing_ok=True)
        cmd, self.pinned = processes.pin_command(
            [str(PROXY_BIN), "--listen", "127.0.0.1:0", "--upstream", self.upstream,
             "--delay-us", str(self.delay_us), "--ready", str(ready)], self.cpus)
        log = self.log_dir / "delayproxy.log"
        with open(log, "ab") as f:
            # it quits, its counters written, when its stdin closes (stop)
            self.proc = processes.spawn(cmd, "the link's delay proxy", stdout=f,
                                        stderr=subprocess.STDOUT, stdin=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while not ready.exists():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise servers.ServerStartError(
                        f"delayproxy did not start (exit {self.proc.poll()}):\n{processes.log_tail(log)}")
                time.sleep(0.01)
            self.url = "http://" + ready.read_text().strip()
            self._stats_path = Path(f"{ready}.stats")
        except BaseException:
            self.stop()
            raise
        return self

    def stats(self) -> dict:
        """The proxy's counters (written twice a second, and as it quits: after stop() they
        are final): connections, chunks, and how late past their due time the chunks left (µs)."""
        try:
            return json.loads(self._stats_path.read_text())
        except (OSError, ValueError, AttributeError):
            return {}

    def stop(self) -> None:
        """Close its stdin (it writes its counters and quits), then its process group by PID."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        processes.stop(self.proc, grace=2)

    def __exit__(self, *exc) -> None:
        self.stop()


def round_trip(url: str, n: int = 300) -> dict:
    """Median and p99 of `n` small HTTP round trips (GET /hello on a kept-alive connection)
    to `url`, in µs: compare a link's with the direct path's to see the delay it adds."""
    u = urlsplit(url)
    req = f"GET /hello HTTP/1.1\r\nHost: {u.hostname}\r\n\r\n".encode()
    times = []
    with socket.create_connection((u.hostname, u.port), timeout=5) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t = time.perf_counter()
            s.sendall(req)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            head, _, body = buf.partition(b"\r\n\r\n")
            length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                           if l.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += s.recv(65536)
            times.append((time.perf_counter() - t) * 1e6)
    times.sort()
    return {"median_us": statistics.median(times), "p99_us": times[int(0.99 * (len(times) - 1))],
            "n": n}


def paths(delays_us: list[int], proxy_alone: bool = True) -> list[int | None]:
    """The paths a comparison measures: direct (None), the proxy alone (0) when asked, then
    each delay (µs each way)."""
    out: list[int | None] = [None, 0] if proxy_alone else [None]
    return out + [d for d in map(check_delay, delays_us) if d not in out]


def experiment(delay_us: int | None) -> str:
    """A path's experiment name in results.db: `direct`, `link-<n>us`."""
    return "direct" if delay_us is None else f"link-{delay_us}us"
