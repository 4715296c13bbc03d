"""Every process the lab starts dies with the process that started it.

The lab's processes (servers, Postgres clusters, Locust and loadgen, the link's delay proxy,
operations, Litestream, wrk) run in sessions of their own, so each is a process group that one
signal stops. Their owner is the interpreter that started them: a notebook's kernel, batch,
pytest. When the owner exits or is interrupted, its `with` blocks and atexit handlers stop them;
when it is SIGKILLed (Jupyter's "Restart kernel" falling back to a kill, the OOM killer, a crash)
nothing in it runs, so the lab keeps two more lines of defence:

1. **A watchdog that holds a pipe.** The first `spawn` of an owner starts one watchdog process
   (`python -m sqlitelab.core.processes watch RECORD`), in a session of its own and deaf to SIGINT
   and SIGHUP, reading the other end of a pipe that only the owner holds. The kernel closes the
   owner's end however the owner ends, so the watchdog reads end-of-file at once and stops
   everything its record names: each group with its stop signal, SIGKILL after a grace, and any
   descendant that left its group (a daemon that called setsid), which it notes every second
   while the owner lives. Then it removes the folders the record names.
   Why not PR_SET_PDEATHSIG alone: it fires when the *thread* that forked the child exits (a
   sweep run from a worker thread would lose its server mid-run), it reaches only the direct
   child (not Puma's workers or Postgres' backends), and it is cleared when the child changes
   its user (Postgres runs as `postgres` through setpriv).
2. **Records on disk.** The record (`data/tmp/owners/<pid>-<start>.json`) names the owner and its
   watchdog by PID *and start time* (a PID alone may be reused), each group it started, and the
   scratch folders it uses. If the watchdog was killed too, the next sweep (`reap_orphans`) finds
   the record of a dead owner with a dead watchdog, stops what it lists and removes its folders,
   saying what it found. A record whose owner still runs (a sweep in another kernel) is never
   touched.

    proc = processes.spawn(["servers/go-nethttp/run"], "go-nethttp server", env=env)
    ...
    processes.forget(proc.pid)      # after stopping it yourself

This module is the lab's core: it imports nothing of the lab but its paths.
"""
from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sqlitelab.core import config, layout

GRACE_S = 3.0        # after the stop signal, before SIGKILL (the watchdog and reap_orphans)
WATCH_EVERY_S = 1.0  # how often the watchdog notes descendants that left their group


def started_at(pid: int) -> int | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the
    PID, what names one process for good. None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    return int(fields[19])


def is_running(pid: int, start: int | None) -> bool:
    """The process `pid` that started at `start` still runs (not a zombie, not a reused PID)."""
    if start is None or started_at(pid) != start:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# --------------------------------------------------------------------------- starting

# Ports the lab's listeners take are drawn at random from below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default), where the outgoing connections of every
# client and generator take theirs, and tried by binding them. A port the kernel hands out for
# bind(0) is an ephemeral one, free only until the next connect() or the next process's bind(0)
# takes it in the second before the server binds it: two lab processes at once (two test workers,
# a batch beside a test) then start on one port. A random draw from ~20 K ports two processes
# share rarely meets another's port in that second, and never a client's.
LISTEN_PORTS = (10_000, 32_768)


def listen_ports() -> tuple[int, int]:
    """The range free_port draws from: LISTEN_PORTS, ending where this machine's ephemeral range
    begins (if it begins lower)."""
    lo, hi = LISTEN_PORTS
    try:
        hi = min(hi, int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    return lo, hi


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing on `host` listens on, outside the ephemeral range (LISTEN_PORTS); the
    kernel's own choice (an ephemeral port) when that range is too small or full."""
    lo, hi = listen_ports()
    draw = random.SystemRandom()
    for _ in range(64 if hi - lo >= 1000 else 0):
        port = draw.randrange(lo, hi)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def pin_command(cmd: list[str], cpus: str | None) -> tuple[list[str], str | None]:
    """Prefix `taskset -c` when a CPU set is asked and taskset exists; return what was applied."""
    if cpus is None:
        return cmd, None
    layout.parse_cpus(cpus)
    taskset = shutil.which("taskset")
    if taskset is None:
        return cmd, None
    return [taskset, "-c", str(cpus), *cmd], str(cpus)


# Where a CPU quota is set (cap_command): cgroup v1's cpu controller, or cgroup v2's unified tree
CGROUP_V1, CGROUP_V2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
CAP_PERIOD_US = 100_000  # the quota's period (the kernel's default)


def cap_command(cmd: list[str], share: float, cpus: int) -> tuple[list[str], Path]:
    """Run `cmd` held to `share` (0 < share <= 1) of its `cpus` CPUs: a cgroup of its own with a
    CPU quota of share × cpus × the period (cgroup v1's cpu.cfs_quota_us, or v2's cpu.max), the
    command prefixed to enter it before it execs (so everything it forks is held too). Returns the
    command and the cgroup's folder (removed with `uncap` once the process is gone; by the
    watchdog if we die first). Refused in one line where no cgroup's CPU quota can be set."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ValueError(f"a CPU cap is a share of the server's CPUs, 0 < share <= 1, not {share!r}")
    quota = max(1000, int(share * cpus * CAP_PERIOD_US))
    v2 = CGROUP_V2 / "cgroup.controllers"
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        root, files = CGROUP_V1, {"cpu.cfs_period_us": str(CAP_PERIOD_US), "cpu.cfs_quota_us": str(quota)}
    elif v2.exists() and "cpu" in v2.read_text().split():
        root, files = CGROUP_V2, {"cpu.max": f"{quota} {CAP_PERIOD_US}"}
    else:
        raise ValueError("a CPU cap needs a cgroup CPU controller (/sys/fs/cgroup/cpu or cgroup v2's "
                         "cpu), and this machine has none")
    group = root / f"sqlitelab-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
        for name, value in files.items():
            (group / name).write_text(value)
    except OSError as e:
        uncap(group)
        raise ValueError(f"a CPU cap needs a cgroup of its own, and {group} could not be made: {e}") from None
    own_path(group)
    enter = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'
    return ["/bin/sh", "-c", enter, "sh", *cmd], group


def uncap(group: Path | None) -> None:
    """Remove a cgroup cap_command made (its processes gone: a cgroup goes by rmdir alone)."""
    if group is None:
        return
    for _ in range(50):  # a killed process leaves its cgroup a moment after its parent reaped it
        try:
            group.rmdir()
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.02)
    release_path(group)


def describe(cmd: list[str]) -> str:
    """A command in a few words for a record: its module (`python -m locust`: "locust") or its
    program's last two path parts ("go-nethttp/run"), without a taskset or a CPU cap's prefix."""
    if cmd and Path(cmd[0]).name == "taskset" and len(cmd) > 3:
        cmd = cmd[3:]
    if cmd[:2] == ["/bin/sh", "-c"] and len(cmd) > 4 and cmd[3] == "sh":  # cap_command's prefix
        cmd = cmd[4:]
    if len(cmd) > 2 and cmd[1] == "-m":
        return cmd[2]
    return "/".join(Path(cmd[0]).parts[-2:]) if cmd else "?"


# --------------------------------------------------------------------------- the owner's side

class Owner:
    """This interpreter's record and watchdog (one per process; a fork gets its own)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.start = started_at(self.pid)
        self.dir = config.TMP_DIR / "owners"
        self.path = self.dir / f"{self.pid}-{self.start}.json"
        self.groups: dict[int, dict] = {}
        self.paths: list[str] = []
        self.watchdog: subprocess.Popen | None = None
        self.lock = threading.RLock()

    def record(self) -> dict:
        wd = self.watchdog
        return {"owner": {"pid": self.pid, "start": self.start, "argv": sys.argv[:4]},
                "watchdog": ({"pid": wd.pid, "start": started_at(wd.pid)} if wd else None),
                "groups": {str(k): v for k, v in self.groups.items()}, "paths": self.paths}

    def save(self) -> None:
        """Write the record (atomically: the watchdog or another sweep may read it any time);
        an owner with nothing left to stop and no folder has none."""
        with self.lock:
            if not self.groups and not self.paths:
                self.path.unlink(missing_ok=True)
                return
            self.ensure_watchdog()
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".tmp{threading.get_ident()}")
            tmp.write_text(json.dumps(self.record(), indent=1))
            os.replace(tmp, self.path)

    def ensure_watchdog(self) -> None:
        if self.watchdog is not None and self.watchdog.poll() is None:
            return
        # stdin: a pipe whose write end only this process holds (close-on-exec, never given to
        # another child); stdout/stderr: the owner's, so what it stopped is said where the
        # owner spoke
        self.watchdog = subprocess.Popen(
            [sys.executable, "-m", "sqlitelab.core.processes", "watch", str(self.path)],
            stdin=subprocess.PIPE, start_new_session=True, cwd=str(config.PROJ_ROOT),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")])})


_OWNER: Owner | None = None
_OWNER_LOCK = threading.Lock()


def owner() -> Owner:
    global _OWNER
    with _OWNER_LOCK:
        if _OWNER is None or _OWNER.pid != os.getpid():
            _OWNER = Owner()
        return _OWNER


def descendants() -> list[int]:
    """This process's descendants but its watchdog (which lives as long as we do): what a
    finished sweep must not have left."""
    kids, out, todo = _children(), [], [os.getpid()]
    o = _OWNER
    watchdog = o.watchdog.pid if o is not None and o.pid == os.getpid() and o.watchdog else None
    while todo:
        for child in kids.get(todo.pop(), ()):
            if child != watchdog:
                out.append(child)
                todo.append(child)
    return out


def register(pid: int, what: str, stop_signal: int = signal.SIGTERM,
             remote_kill: list[str] | None = None) -> None:
    """`pid` leads a group this process started (start_new_session=True): stop it if we die.
    `remote_kill`: a command that stops its real work elsewhere (an ssh host's group)."""
    o = owner()
    with o.lock:
        o.groups[pid] = {"start": started_at(pid), "what": what, "signal": int(stop_signal),
                         "remote_kill": remote_kill}
        o.save()


def forget(pid: int) -> None:
    """The group `pid` was stopped by its owner: nothing left for the watchdog to do."""
    o = owner()
    with o.lock:
        if o.groups.pop(pid, None) is not None:
            o.save()


def own_path(path: Path | str) -> None:
    """A scratch folder (or file) of ours: removed if we die before `release_path`."""
    o = owner()
    with o.lock:
        if str(path) not in o.paths:
            o.paths.append(str(path))
            o.save()


def release_path(path: Path | str) -> None:
    o = owner()
    with o.lock:
        if str(path) in o.paths:
            o.paths.remove(str(path))
            o.save()


def spawn(cmd: list[str], what: str, stop_signal: int = signal.SIGTERM, **popen) -> subprocess.Popen:
    """subprocess.Popen in a session of its own, registered to die with this process."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    register(proc.pid, what, stop_signal)
    return proc


# --------------------------------------------------------------------------- stopping

def stop(proc: subprocess.Popen, grace: float = 10.0) -> int | None:
    """SIGTERM a process started in a session of its own (`spawn`) and its group, SIGKILL
    after `grace` seconds; anything left in the group (forked workers) is killed too. Then it
    is forgotten: nothing left for the watchdog."""
    try:
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(5)
        _signal_group(proc.pid, signal.SIGKILL)
        return proc.returncode
    finally:
        forget(proc.pid)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def log_tail(path: Path | str, lines: int = 25) -> str:
    """The last lines of a process's log (what a start-up error shows)."""
    try:
        text = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty log)"


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def escaped(groups: dict[int, dict]) -> dict[int, int]:
    """Descendants of the groups' leaders that are no longer in one of the groups (a daemon
    that made its own session): pid -> start time."""
    kids, out = _children(), {}
    todo = [p for p in groups if is_running(p, groups[p].get("start"))]
    while todo:
        for child in kids.get(todo.pop(), ()):
            if _pgid(child) not in groups:
                out[child] = started_at(child)
            todo.append(child)
    return out


def stop_groups(groups: dict[int, dict], strays: dict[int, int] | None = None,
                grace: float = GRACE_S) -> list[str]:
    """Stop each group (its signal, SIGKILL after `grace`) and each stray; what was running."""
    found, waiting = [], []
    for pgid, g in groups.items():
        if g.get("remote_kill"):
            try:
                subprocess.run(g["remote_kill"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired):
                pass
        leader_start = started_at(pgid)
        if leader_start is not None and leader_start != g.get("start"):
            continue  # the PID is another process's now: its group is not ours
        if not group_alive(pgid):
            continue
        found.append(f"{g.get('what', 'process')} (group {pgid})")
        try:
            os.killpg(pgid, g.get("signal", signal.SIGTERM))
        except (ProcessLookupError, PermissionError):
            continue
        waiting.append(pgid)
    for pid, start in (strays or {}).items():
        if is_running(pid, start):
            found.append(f"a process that left its group (pid {pid})")
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + grace
    while waiting and time.monotonic() < deadline:
        waiting = [p for p in waiting if group_alive(p)]
        time.sleep(0.05)
    for pgid in waiting:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return found


def _reap(record: dict, strays: dict[int, int] | None = None) -> list[str]:
    """Stop what a record lists and remove its folders; what was found."""
    groups = {int(k): v for k, v in record.get("groups", {}).items()}
    found = stop_groups(groups, strays)
    for p in record.get("paths", []):
        path = Path(p)
        if path.exists():
            found.append(f"folder {path}")
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    return found


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def reap_orphans(directory: Path | None = None) -> list[str]:
    """Stop and remove what dead owners left (their watchdogs dead too), one line each: the
    records in `directory` (data/tmp/owners) whose owner is not running. Never a live owner's."""
    directory = Path(directory or config.TMP_DIR / "owners")
    said = []
    for path in sorted(directory.glob("*.json")):
        record = _read(path)
        if record is None:
            continue
        o, wd = record.get("owner") or {}, record.get("watchdog") or {}
        if o.get("pid") == os.getpid() or is_running(o.get("pid", 0), o.get("start")):
            continue
        if wd and is_running(wd.get("pid", 0), wd.get("start")):
            continue  # its watchdog is stopping it right now
        found = _reap(record)
        path.unlink(missing_ok=True)
        if found:
            said.append(f"left by {' '.join(o.get('argv') or ['?'])} (pid {o.get('pid')}, dead): "
                        + ", ".join(found))
    return said


# --------------------------------------------------------------------------- the watchdog

def watch(record_path: Path) -> int:
    """Wait for end-of-file on stdin (the owner is gone, however it ended), then stop what its
    record lists and remove the record. Meanwhile note descendants that leave their groups."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    strays: dict[int, int] = {}
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], WATCH_EVERY_S)
        if ready and not os.read(fd, 4096):
            break
        record = _read(record_path)
        if record and record.get("groups"):
            strays.update(escaped({int(k): v for k, v in record["groups"].items()}))
            strays = {p: s for p, s in strays.items() if is_running(p, s)}
    record = _read(record_path)
    if record is not None:
        found = _reap(record, strays)
        record_path.unlink(missing_ok=True)
        if found:
            print(f"sqlitelab: its owner (pid {record['owner']['pid']}) ended; stopped "
                  + ", ".join(found), file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m sqlitelab.core.processes watch RECORD` (the watchdog) · `reap` (what dead owners
    left, as a sweep does at its start)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["watch"] and len(args) == 2:
        return watch(Path(args[1]))
    if args == ["reap"]:
        for line in reap_orphans():
            print(line)
        return 0
    print("usage: python -m sqlitelab.core.processes watch RECORD | reap", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
