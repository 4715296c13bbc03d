"""Sampling a process tree with psutil: its CPU seconds and RSS (`tree_cpu_seconds`, `tree_rss`),
the `Sampler` thread that follows a level's server and generator (time, CPU, RSS, the WAL's
size, and exact marks with the server's own request count at the window's edges), and a
server's tree on an ssh host (`RemoteTree`), sampled there by this module's command line:

    python -m sqlitelab.load.sampler sample-tree PID EVERY
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import psutil

from sqlitelab.core import config
from sqlitelab.infra import hosts, servers

# a window-edge mark of the server's own count taken later than this after its edge is no count
MARK_LATE_S = 0.25


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
        self.started = hosts.start(server.runner, [sys.executable, "-m", "sqlitelab.load.sampler", "sample-tree",
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
    """`python -m sqlitelab.load.sampler sample-tree PID EVERY`: `tree <cpu s> <rss bytes>` of PID's
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
        its `handled` is None, never a count read at the wrong time. `late_s`: how long after
        it was due the count had been read (an upper bound on how far the edge moved)."""
        # the count first, at the edge; the CPU trees after it (reading them takes milliseconds)
        try:
            health = self.server.get_json("/health", timeout=2)
            handled, writer = health["requests_handled"], health.get("writer")
        except (OSError, ValueError, KeyError, TypeError):
            handled = writer = None
        read = time.time()
        late = max(0.0, read - due) if due is not None else None
        if late is not None and late > MARK_LATE_S:
            handled = writer = None
        t, scpu, rss, gcpu, _ = self.sample()
        # `writer`: the writer's own counts (/health, writer|batch paths), None on the pool
        self.marks[name] = {"t": t, "server_cpu": scpu, "gen_cpu": gcpu, "handled": handled,
                            "writer": writer, "late_s": late}

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


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sample-tree":
        sample_tree(int(sys.argv[2]), float(sys.argv[3]))
    else:
        raise SystemExit("usage: python -m sqlitelab.load.sampler sample-tree PID EVERY")
