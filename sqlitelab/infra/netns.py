"""A network of Linux network namespaces on this machine, for runs across "hosts" without a
second machine: one bridge in this machine's own namespace, one veth pair per namespace,
addresses from 198.18.0.0/15 (RFC 2544's benchmarking range), and no route anywhere else
(each namespace knows its own /24 and nothing more: no default route).

    with netns.Network(["srv", "gen1", "gen2"]) as net:
        net.host("srv")        # Host('netns', 'lab-<tag>-srv'), at 198.18.<n>.2
        ...

Everything it makes (namespaces `lab-<tag>-*`, bridge `lb<tag>`, veths `lv<tag><i>`) it removes
on exit, on an exception, and at interpreter exit. Needs root (CAP_NET_ADMIN).
"""
from __future__ import annotations

import signal
import time
import atexit
import ipaddress
import itertools
import os
import subprocess

from sqlitelab.infra import hosts

PREFIX = "lab-"  # every namespace the lab makes starts with this
_LIVE: dict[str, "Network"] = {}
_COUNT = itertools.count()  # networks made by this process: each its own tag


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise hosts.HostError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


class Network:
    """Namespaces joined by a bridge on 198.18.<subnet>.0/24; this machine is .1 on it."""

    def __init__(self, names: list[str], subnet: int | None = None, tag: str | None = None):
        if not hosts.as_root():
            raise hosts.HostError("network namespaces need root (CAP_NET_ADMIN)")
        if not names or len(set(names)) != len(names) or len(names) > 200:
            raise ValueError(f"names must be 1..200 distinct names, not {names!r}")
        self.tag = tag or f"{os.getpid() % 10000:04d}{next(_COUNT) % 10}"
        self.subnet = subnet if subnet is not None else free_subnet()
        self.net = ipaddress.ip_network(f"198.18.{self.subnet}.0/24")
        assert self.net.subnet_of(hosts.BENCH_NET)
        self.names = list(names)
        self.bridge = f"lb{self.tag}"
        self.made: list[str] = []      # namespaces made, for removal
        self.links: list[str] = []     # links made in this namespace

    def namespace(self, name: str) -> str:
        return f"{PREFIX}{self.tag}-{name}"

    def address(self, name: str) -> str:
        return str(self.net.network_address + 2 + self.names.index(name))

    @property
    def gateway(self) -> str:
        """This machine's own address on the bridge (where Locust workers find the master)."""
        return str(self.net.network_address + 1)

    def host(self, name: str) -> hosts.Host:
        return hosts.Host("netns", self.namespace(name))

    def __enter__(self) -> "Network":
        _LIVE[self.tag] = self
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self.links.append(self.bridge)
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, name in enumerate(self.names):
                ns, outer, inner = self.namespace(name), f"lv{self.tag}{i}", f"li{self.tag}{i}"
                _ip("netns", "add", ns)
                self.made.append(ns)
                _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
                self.links.append(outer)
                _ip("link", "set", inner, "netns", ns)
                _ip("link", "set", outer, "master", self.bridge)
                _ip("link", "set", outer, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", inner)
                _ip("-n", ns, "link", "set", inner, "up")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        """Every process left in the namespaces is killed (by PID), then the namespaces and
        links are deleted."""
        for ns in self.made:
            kill_namespace_processes(ns)
            _ip("netns", "del", ns, check=False)
        for link in self.links:
            _ip("link", "del", link, check=False)
        self.made, self.links = [], []
        _LIVE.pop(self.tag, None)


def free_subnet() -> int:
    """A 198.18.<n>.0/24 this machine has no address on yet (from this process's own n on)."""
    used = {ipaddress.ip_address(a).packed[2] for a, _ in hosts.interface_addresses(None)
            if ipaddress.ip_address(a) in hosts.BENCH_NET and a.startswith("198.18.")}
    for i in range(256):
        n = (os.getpid() + i) % 256
        if n not in used:
            return n
    raise hosts.HostError("no free /24 left in 198.18.0.0/16")


def namespace_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split()]


def kill_namespace_processes(ns: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = namespace_pids(ns)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while pids and namespace_pids(ns) and time.monotonic() < deadline:
            time.sleep(0.05)


def ours() -> list[str]:
    """Namespaces with the lab's prefix that exist now."""
    return [n for n in hosts.namespaces() if n.startswith(PREFIX)]


def _remove_all_live() -> None:
    for net in list(_LIVE.values()):
        net.remove()


atexit.register(_remove_all_live)
