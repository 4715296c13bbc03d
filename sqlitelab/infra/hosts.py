"""Where the lab's processes run: hosts, each reached by a runner.

    local            this machine's own network (the server on 127.0.0.1; the default)
    netns:<name>     a Linux network namespace on this machine (sqlitelab.infra.netns makes them)
    ssh:<[user@]host> another machine, over ssh, with the lab cloned at the same path

A sweep places its server on one host (`server_host`) and its Locust workers on others
(`generator_hosts`); Locust then runs distributed — its master beside the notebook, a worker
on each generator host — with Locust's own `--master` / `--worker` / `--expect-workers`.
Every process started on a host is started in a session of its own and stopped by its PID (a
remote one by the PID its shell reported), also when the cell is interrupted.

Load goes only to a host the user named: loopback for `local`, the namespace's own address
(which must lie in 198.18.0.0/15, the benchmarking range) for `netns:`, the named machine for
`ssh:` (`check_target`).
"""
from __future__ import annotations

import io
import tarfile
import socket
import ipaddress
import json
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sqlitelab.core import processes

# RFC 2544's range for benchmarking: the only addresses a namespaced run may load
BENCH_NET = ipaddress.ip_network("198.18.0.0/15")
KINDS = ("local", "netns", "ssh")
# ssh without a prompt or a stored host key: a host the user named, reached non-interactively
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
               "-o", "ConnectTimeout=10")


class HostError(RuntimeError):
    """A host that cannot be used: unknown kind, missing namespace, ssh refused."""


@dataclass(frozen=True)
class Host:
    kind: str                  # local | netns | ssh
    name: str | None = None    # the namespace, or the ssh destination ([user@]host)
    ssh_options: tuple[str, ...] = ()  # extra ssh arguments (a key, a port)

    @classmethod
    def parse(cls, spec: "str | Host | None", ssh_options: tuple[str, ...] = ()) -> "Host":
        """`local`, `netns:<name>` or `ssh:<[user@]host>` (a Host passes through)."""
        if isinstance(spec, Host):
            return spec
        if spec is None or spec == "local":
            return cls("local")
        if not isinstance(spec, str) or ":" not in spec:
            raise ValueError(f"a host is 'local', 'netns:<name>' or 'ssh:<[user@]host>', not {spec!r}")
        kind, _, name = spec.partition(":")
        if kind not in KINDS or kind == "local" or not name or any(c.isspace() for c in name):
            raise ValueError(f"a host is 'local', 'netns:<name>' or 'ssh:<[user@]host>', not {spec!r}")
        return cls(kind, name, tuple(ssh_options))

    def __str__(self) -> str:
        return self.kind if self.kind == "local" else f"{self.kind}:{self.name}"

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    @property
    def same_machine(self) -> bool:
        """Its processes share this machine's CPUs, files and PIDs (local, netns)."""
        return self.kind != "ssh"

    # ------------------------------------------------------------------ commands

    def ssh(self, script: str) -> list[str]:
        """The ssh command line that runs a shell `script` on this (ssh) host."""
        return ["ssh", *SSH_OPTIONS, *self.ssh_options, self.name, script]

    def command(self, cmd: list[str], env: dict[str, str] | None = None,
                cwd: str | None = None) -> list[str]:
        """`cmd` as run on this host. Local and netns processes inherit `env` from Popen;
        an ssh command carries it (only the LAB_* variables) on its command line, runs in its
        own session (setsid) and prints `LABPID <pid>` first, for stop()."""
        if self.kind == "local":
            return list(cmd)
        if self.kind == "netns":
            return ["ip", "netns", "exec", self.name, *cmd]
        assigns = [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())
                   if k.startswith("LAB_")]
        # `&` on the simple command alone: the shell's child execs env, then setsid, then cmd
        # (one PID, the group's), so $! is the process stop() signals
        launch = " ".join(["env", *assigns, "setsid", shlex.join(cmd)])
        script = f"{launch} </dev/null & echo LABPID $!; wait $!"
        if cwd:
            script = f"cd {shlex.quote(cwd)} && {{ {script}; }}"
        return self.ssh(script)

    def run(self, cmd: list[str], timeout: float = 60, check: bool = True) -> str:
        """Run a short command on the host and return its standard output."""
        full = self.ssh(shlex.join(cmd)) if self.kind == "ssh" else self.command(cmd)
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise HostError(f"{self}: {shlex.join(cmd)} exited {proc.returncode}: "
                            f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc.stdout

    def check(self) -> None:
        """Refuse a host that is not there: a missing namespace, an ssh host that refuses."""
        if self.kind == "netns":
            if not shutil.which("ip"):
                raise HostError("netns hosts need iproute2's `ip`")
            if self.name not in namespaces():
                raise HostError(f"{self}: no network namespace {self.name!r} "
                                f"(known: {', '.join(namespaces()) or 'none'})")
            self.address()
        elif self.kind == "ssh":
            self.run(["true"], timeout=20)

    # ------------------------------------------------------------------ addresses

    def address(self) -> str:
        """The address the other hosts reach this one at: 127.0.0.1 for local; a namespace's
        one address in 198.18.0.0/15; for ssh, the name it was given."""
        if self.kind == "local":
            return "127.0.0.1"
        if self.kind == "ssh":
            return self.name.rpartition("@")[2]
        addrs = [a for a in interface_addresses(self.name) if ipaddress.ip_address(a[0]) in BENCH_NET]
        if not addrs:
            raise HostError(f"{self}: no address in {BENCH_NET} (a namespaced run loads only "
                            "the benchmarking range)")
        return addrs[0][0]

    def reach_back(self) -> str:
        """This machine's address as seen from the host (where its Locust workers find the
        master): loopback for local; for a namespace, the address of this machine's own
        namespace on the namespace's subnet; for ssh, the client address sshd reports."""
        if self.kind == "local":
            return "127.0.0.1"
        if self.kind == "ssh":
            got = self.run(["sh", "-c", "echo $SSH_CONNECTION"]).split()
            if not got:
                raise HostError(f"{self}: sshd reported no SSH_CONNECTION")
            return got[0]
        for addr, prefix in interface_addresses(self.name):
            net = ipaddress.ip_interface(f"{addr}/{prefix}").network
            for mine, _ in interface_addresses(None):
                if ipaddress.ip_address(mine) in net and mine != addr:
                    return mine
        raise HostError(f"{self}: this machine has no address on the namespace's subnet")


@dataclass
class Started:
    """A process started on a host: its local Popen (the process itself for local and netns
    hosts, the ssh client for ssh) and, for ssh, the PID its remote shell reported."""
    host: Host
    popen: subprocess.Popen
    log_path: str
    remote_pid: int | None = None

    @property
    def pid(self) -> int:
        """The process's PID on its own host."""
        return self.remote_pid if self.remote_pid is not None else self.popen.pid


def start(host: Host, cmd: list[str], env: dict[str, str], log_path, cwd: str | None = None,
          timeout: float = 20) -> Started:
    """Start `cmd` on `host` in a session of its own, its output to `log_path`; for ssh, wait
    (at most `timeout` s) for the remote PID (`LABPID <pid>`, the first line it prints)."""
    what = processes.describe(cmd)
    with open(log_path, "ab") as log:
        popen = processes.spawn(host.command(cmd, env, cwd), what + (f" on {host}" if not host.is_local else ""),
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd if host.same_machine else None)
    got = Started(host, popen, str(log_path))
    if host.kind != "ssh":
        return got
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, "rb") as f:
            for line in f.read().decode(errors="replace").splitlines():
                if line.startswith("LABPID "):
                    got.remote_pid = int(line.split()[1])
                    processes.register(popen.pid, f"{what} on {host}", remote_kill=host.ssh(
                        f"kill -KILL -- -{got.remote_pid}"))
                    return got
        if popen.poll() is not None:
            break
        time.sleep(0.05)
    stop(got)
    raise HostError(f"{host}: the command did not start (ssh exit {popen.poll()}):\n"
                    f"{processes.log_tail(log_path)}")


def stop(proc: Started, grace: float = 10.0) -> int | None:
    """Stop a started process by its PID: SIGTERM to its group on its host, SIGKILL after
    `grace` s; for ssh, the remote group first (by the PID it reported), then the ssh client."""
    if proc.remote_pid is not None:
        pgid = f"-{proc.remote_pid}"
        try:
            proc.host.run(["kill", "-TERM", "--", pgid], timeout=20, check=False)
            deadline = time.monotonic() + grace
            while _alive(proc) and time.monotonic() < deadline:
                time.sleep(0.1)
            proc.host.run(["kill", "-KILL", "--", pgid], timeout=20, check=False)
        except (subprocess.TimeoutExpired, OSError):
            pass
    return processes.stop(proc.popen, grace)


def _alive(proc: Started) -> bool:
    """The remote group still has a process (`kill -0` succeeds)."""
    return "alive" in proc.host.run(
        ["sh", "-c", f"kill -0 -- -{proc.remote_pid} 2>/dev/null && echo alive"], timeout=20, check=False)


def push(host: Host, path) -> None:
    """Copy a local file to the same path on an ssh host (its folder made); other hosts share
    this machine's files. Read before it is written: safe when the two are one file."""
    if host.same_machine:
        return
    path = Path(path)
    d, f = shlex.quote(str(path.parent)), shlex.quote(str(path))
    script = f"mkdir -p {d} && cat > {f}.tmp-$$ && mv {f}.tmp-$$ {f}"
    # streamed (a database may be GBs): at least 60 s, and time for 20 MB/s
    timeout = 60 + path.stat().st_size / 20e6
    with open(path, "rb") as data:
        proc = subprocess.run(host.ssh(script), stdin=data, capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise HostError(f"{host}: could not copy {path} there: {proc.stderr.decode(errors='replace').strip()[-300:]}")


def fetch(host: Host, directory, pattern: str) -> list:
    """Copy the files of `directory` matching `pattern` on an ssh host into the same local
    folder: a file already here with the same bytes (one filesystem) is left alone; one of
    the same name and other bytes (another machine's PID) is kept as `<host>-<name>`."""
    if host.same_machine:
        return []
    directory = Path(directory)
    script = (f"cd {shlex.quote(str(directory))} && find . -maxdepth 1 -name {shlex.quote(pattern)} "
              "-print0 | tar cf - --null -T -")
    proc = subprocess.run(host.ssh(script), capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise HostError(f"{host}: could not fetch {directory}/{pattern}: "
                        f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
    got = []
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            data = tar.extractfile(member).read()
            name = Path(member.name).name
            here = directory / name
            if here.exists() and here.read_bytes() == data:
                continue
            if here.exists():
                here = directory / f"{host.address().replace(':', '_')}-{name}"
            here.write_bytes(data)
            got.append(here)
    return got


def resolve(name: str) -> str:
    """The IPv4 address a host name (or address) stands for here: what a server on an ssh host
    binds to, the address this machine reaches it at."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e:
        raise HostError(f"cannot resolve {name!r}: {e}") from None


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True).stdout
    return [n["name"] for n in json.loads(out or "[]")]


def interface_addresses(netns: str | None) -> list[tuple[str, int]]:
    """(address, prefix length) of every IPv4 address outside loopback, in `netns` (None:
    this process's namespace)."""
    cmd = ["ip", "-j", "-4", "addr", "show"] if netns is None else ["ip", "-n", netns, "-j", "-4", "addr", "show"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    return [(a["local"], a["prefixlen"]) for link in json.loads(out or "[]")
            for a in link.get("addr_info", []) if not a["local"].startswith("127.")]


def check_target(url_host: str, host: Host) -> None:
    """Load goes to a host the user named: this machine (loopback, or one of its own addresses
    when its workers are elsewhere), the namespace's own address in 198.18.0.0/15, or the ssh
    host named; never any other address."""
    if host.kind == "local":  # loopback, or this machine's own address facing its workers
        ok = (url_host in ("localhost", "::1") or url_host.startswith("127.")
              or url_host in {a for a, _ in interface_addresses(None)})
    elif host.kind == "netns":
        try:
            ok = ipaddress.ip_address(url_host) in BENCH_NET and url_host == host.address()
        except ValueError:
            ok = False
    else:
        ok = url_host == host.address()
    if not ok:
        raise ValueError(f"load goes to the host the run named ({host}), not {url_host}")


def as_root() -> bool:
    return os.geteuid() == 0
