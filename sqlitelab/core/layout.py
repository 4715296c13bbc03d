"""Where a run's processes go: the server's CPUs, the load generator's, and Locust's processes.

    layout.plan()                          # this machine: the server half, the generator half
    layout.plan(cpus=range(16))            # a simulated 16-CPU machine: 0-7 and 8-15, 8 Locust processes
    layout.plan(server=4)                  # an article's split (seed 002: 4 server cores), where it fits
    layout.resolve("auto", "1", "auto")    # a run's knobs: "auto" takes the plan, a CPU list is kept

The default splits the machine: the server gets the first half of its CPUs (at least one), the
generator the rest (at least one), and Locust one process per generator CPU (`--processes`; one
process, no master, on one CPU). On 2 CPUs that is the server on CPU 0, the generator on CPU 1
and one Locust process; on 1 CPU nothing is pinned and the two share it. An article's split
(`server=`) is used where the machine leaves the generator at least one CPU; where it does not,
the layout says so in `note`. Each server's threads follow its CPU set by themselves (GOMAXPROCS
and tokio's workers read the process's affinity) unless a profile or knob sets them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


def available_cpus() -> list[int]:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    return sorted(os.sched_getaffinity(0))


def cpu_list(spec: str) -> list[int]:
    """'0', '0-1', '0,2', '0-3,8' -> [..] (taskset's form), on any machine."""
    out: list[int] = []
    for part in str(spec).split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            if int(b) < int(a):
                raise ValueError(f"bad CPU range {part!r} in {spec!r}")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    if not out:
        raise ValueError(f"empty CPU set {spec!r}")
    return out


def pinned_count(specs) -> int:
    """How many CPUs a run's servers (or generators) were pinned to, from its runs rows' CPU lists
    (`server_cpus`: '0', '0-1', or 0.0 where a CSV read a one-CPU list back as a number): the
    first list given, on any machine; 0 where none was (not pinned)."""
    pinned = [f"{v:g}" if isinstance(v, float) else str(v) for v in specs
              if v is not None and v == v and str(v).strip()]
    return len(cpu_list(pinned[0])) if pinned else 0


def parse_cpus(spec: str | None, machine=None) -> list[int] | None:
    """A CPU set on a machine (`machine`: its CPUs; default: those this process may use): a CPU
    outside it is refused. None stays None (not pinned)."""
    if spec is None:
        return None
    out = cpu_list(spec)
    available = available_cpus() if machine is None else sorted(set(machine))
    bad = sorted(set(out) - set(available))
    if bad:
        raise ValueError(f"CPU set {spec!r} names CPUs {bad} this process cannot use "
                         f"(available: {available})")
    return out


def cpuset(cpus) -> str | None:
    """[0, 1, 2, 3, 8] -> '0-3,8' (taskset's form); no CPUs -> None (unpinned)."""
    cpus = sorted(set(cpus))
    if not cpus:
        return None
    runs, start = [], cpus[0]
    for prev, cur in zip(cpus, cpus[1:] + [None]):
        if cur != prev + 1:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(runs)


@dataclass(frozen=True)
class Layout:
    """One run's CPU layout. Empty CPU tuples: not pinned."""
    server: tuple[int, ...]
    generator: tuple[int, ...]
    processes: int          # Locust processes (loadgen is one process using every CPU of its set)
    note: str = ""          # where an asked-for split did not fit, and what was done instead

    @property
    def server_cpus(self) -> str | None:
        return cpuset(self.server)

    @property
    def generator_cpus(self) -> str | None:
        return cpuset(self.generator)

    def describe(self) -> str:
        """One line for captions and logs."""
        def part(name, cpus):
            return f"{name} CPU{'s' if len(cpus) > 1 else ''} {cpuset(cpus)}" if cpus else f"{name} unpinned"
        text = (f"{part('server', self.server)}, {part('generator', self.generator)}, "
                f"{self.processes} Locust process{'es' if self.processes > 1 else ''}")
        return f"{text} ({self.note})" if self.note else text


def plan(cpus=None, *, server: int | None = None) -> Layout:
    """The layout for a machine with `cpus` (default: this process's affinity). `server`: the
    number of server CPUs an article states; the default is half the machine."""
    cpus = sorted(set(available_cpus() if cpus is None else cpus))
    if server is not None and (not isinstance(server, int) or server < 1):
        raise ValueError(f"server must be a number of CPUs >= 1, not {server!r}")
    if len(cpus) < 2:
        note = "one CPU: server and generator share it" if cpus else "no CPU"
        return Layout((), (), 1, note)
    want = server if server is not None else len(cpus) // 2
    n = min(want, len(cpus) - 1)
    note = ""
    if server is not None and n < want:
        note = (f"the {want} server CPUs asked for do not fit on {len(cpus)} CPUs with one left "
                f"for the generator: the server gets {n}")
    return Layout(tuple(cpus[:n]), tuple(cpus[n:]), len(cpus) - n, note)


def resolve(server_cpus: str | None = "auto", generator_cpus: str | None = "auto",
            processes: int | str = "auto", *, server: int | None = None, cpus=None) -> Layout:
    """A run's layout from its knobs: "auto" takes `plan(cpus, server=server)`'s value, a CPU
    list is kept as given, None leaves that side unpinned; `processes="auto"` is one Locust
    process per generator CPU (one where the generator is not pinned)."""
    machine = sorted(set(available_cpus() if cpus is None else cpus))
    base = plan(machine, server=server)
    srv = base.server if server_cpus == "auto" else tuple(parse_cpus(server_cpus, machine) or ())
    gen = base.generator if generator_cpus == "auto" else tuple(parse_cpus(generator_cpus, machine) or ())
    if processes == "auto":
        processes = max(1, len(gen))
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ValueError(f"processes must be 'auto' or an integer >= 1, not {processes!r}")
    asked = server_cpus == "auto" and generator_cpus == "auto"
    return Layout(srv, gen, processes, base.note if asked else "")
