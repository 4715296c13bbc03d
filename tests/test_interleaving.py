"""What makes a sweep's numbers fair on a machine whose speed moves: rounds run in an order
shuffled per round from a stored seed (sweep's `rounds`, Spec.order), the core's speed probed
beside each window (sqlitelab.core.probe), and a server held back by a known share of its CPUs
(processes.cap_command, the power check's slowdown). No server, no load."""
from __future__ import annotations

import math
import sys
import time

import pytest

from sqlitelab.core import layout, probe, processes
from sqlitelab.experiments import sweep

STACKS = ["go-nethttp", "python-fastapi", "rust-axum"]


def test_one_round_keeps_the_order_given_and_has_no_seed():
    s = sweep.spec(notebook="t", servers=STACKS, levels=[1, 4, 16])
    assert s.order_seed is None
    assert s.order() == [[(stack, "rails71", (1, 4, 16)) for stack in STACKS]]


def test_rounds_shuffle_stacks_and_levels_anew_each_round_from_a_seed_that_gives_them_again():
    s = sweep.spec(notebook="t", servers=STACKS, levels=[1, 2, 4, 8, 16], rounds=6, order_seed=7)
    order = s.order()
    assert len(order) == 6
    for r in order:  # every stack once a round, every level once per stack
        assert sorted(stack for stack, _, _ in r) == sorted(STACKS)
        assert all(sorted(levels) == [1, 2, 4, 8, 16] for _, _, levels in r)
    assert len({tuple(stack for stack, _, _ in r) for r in order}) > 1, "the stacks' order never changed"
    assert len({levels for r in order for _, _, levels in r}) > 1, "the levels' order never changed"
    assert sweep.spec(notebook="t", servers=STACKS, levels=[1, 2, 4, 8, 16], rounds=6, order_seed=7).order() == order
    drawn = sweep.spec(notebook="t", servers=STACKS, rounds=2)
    assert isinstance(drawn.order_seed, int), "a run of rounds stores the seed it drew"
    assert drawn.record()["order_seed"] == drawn.order_seed and drawn.record()["rounds"] == 2


def test_a_stack_of_its_own_levels_runs_those_in_every_round_and_the_rest_the_sweeps():
    s = sweep.spec(notebook="t", servers=STACKS, levels=[8], rounds=3, order_seed=1,
                   server_levels={"rust-axum": [32, 64]})
    for r in s.order():
        assert {stack: sorted(levels) for stack, _, levels in r} == {
            "go-nethttp": [8], "python-fastapi": [8], "rust-axum": [32, 64]}
    assert s.record()["server_levels"] == {"rust-axum": [32, 64]}
    with pytest.raises(ValueError, match=r"^server_levels\['rust-axum'\] must be a non-empty list of integers >= 1"):
        sweep.spec(notebook="t", servers=STACKS, server_levels={"rust-axum": [0]})
    with pytest.raises(ValueError, match=r"^unknown servers \['cobol'\]"):
        sweep.spec(notebook="t", servers=STACKS, server_levels={"cobol": [1]})


def _runs(*rates, users=8, server="rust-axum"):
    return [{"scenario": "mix", "server": server, "profile": "p", "users": users, "rate": None,
             "rps": r, "headline": True} for r in rates]


def test_rounds_stop_early_only_once_every_levels_interval_is_within_the_target():
    assert sweep.settled(_runs(1000, 1010, 990), 0.05)              # ±2.5 %: within ±5 %
    assert not sweep.settled(_runs(1000, 1400, 700), 0.05)          # far wider
    assert not sweep.settled(_runs(1000), 0.05), "one run has no interval"
    assert not sweep.settled(_runs(1000, 1010) + _runs(500, 900, users=32), 0.05), "every level, not most"
    assert not sweep.settled(_runs(0, 0), 0.05), "a stalled level (mean 0) never settles"
    assert not sweep.settled(_runs(1000, float("nan")), 0.05)
    assert not sweep.settled([], 0.05)
    replaced = _runs(100, 900) + [{**q, "headline": True} for q in _runs(1000, 1002)]
    replaced[0]["headline"] = replaced[1]["headline"] = False       # measured again: the new ones count
    assert sweep.settled(replaced, 0.05)
    s = sweep.spec(notebook="t", servers=STACKS, rounds=5, until_half_width=0.05)
    assert s.record()["until_half_width"] == 0.05
    with pytest.raises(ValueError, match="^until_half_width stops rounds early: give rounds >= 3"):
        sweep.spec(notebook="t", servers=STACKS, rounds=2, until_half_width=0.05)
    with pytest.raises(ValueError, match=r"^until_half_width must be a share of the mean, 0 < share < 1"):
        sweep.spec(notebook="t", servers=STACKS, rounds=5, until_half_width=5)


@pytest.mark.parametrize("name,value,says", [
    ("rounds", 0, "rounds must be an integer >= 1 (rounds of the whole sweep), not 0"),
    ("order_seed", -1, "order_seed must be an integer >= 0 (the rounds' shuffle), not -1"),
    ("server_cpu_cap", 1.5, "server_cpu_cap must be a share of the server's CPUs, 0 < share <= 1"),
    ("server_cpu_cap", 0, "server_cpu_cap must be a share of the server's CPUs, 0 < share <= 1"),
])
def test_bad_rounds_seeds_and_caps_are_refused_in_one_line(name, value, says):
    with pytest.raises(ValueError) as e:
        sweep.spec(notebook="t", **{name: value})
    assert str(e.value).startswith(says) and "\n" not in str(e.value)


def test_the_probe_times_the_same_work_on_the_cpu_asked_and_leaves_the_threads_cpus_alone():
    before = layout.available_cpus()
    cpu = str(before[-1])
    took = [probe.ms(cpu) for _ in range(5)]
    assert all(0 < t < 1000 for t in took)
    assert layout.available_cpus() == before
    assert math.isnan(probe.ms(None))
    assert math.isnan(probe.ms("4096")), "a CPU this process cannot use (another machine's) is not probed"


def test_a_windows_slowdown_is_its_slower_probe_over_the_sweeps_fastest():
    assert probe.slowdown(10.0, 12.0, 8.0) == pytest.approx(1.5)
    assert probe.slowdown(math.nan, 9.0, 9.0) == pytest.approx(1.0)
    assert math.isnan(probe.slowdown(math.nan, math.nan, 8.0))
    points = [{"server_pinning": "0", "probe_server_before_ms": b, "probe_server_after_ms": a}
              for b, a in ((5.0, 5.2), (5.1, 8.0), (math.nan, math.nan))]
    sweep.slowed(points)
    assert [p["core_slowed"] for p in points] == [False, True, None]
    assert points[1]["core_slowdown"] == pytest.approx(8.0 / 5.0)


def _busy_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    import os
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not (processes.CGROUP_V1 / "cpu.cfs_quota_us").exists()
                    and not (processes.CGROUP_V2 / "cgroup.controllers").exists(),
                    reason="no cgroup CPU controller here")
def test_a_capped_command_is_held_to_its_share_and_its_cgroup_goes_with_it():
    """A busy loop held to 30 % of one CPU uses about that much of it (the kernel throttles it),
    and once it is stopped its cgroup is gone."""
    cmd, group = processes.cap_command([sys.executable, "-c", "while True: pass"], 0.3, 1)
    cmd, _ = processes.pin_command(cmd, str(layout.available_cpus()[-1]))
    proc = processes.spawn(cmd, "test busy loop")
    try:
        time.sleep(0.3)
        start_cpu, start = _busy_seconds(proc.pid), time.monotonic()
        time.sleep(1.5)
        share = (_busy_seconds(proc.pid) - start_cpu) / (time.monotonic() - start)
        assert share < 0.45, f"held to 30 % of a CPU, it used {share:.0%}"
        stat = (group / "cpu.stat").read_text() if (group / "cpu.stat").exists() else ""
        assert "nr_throttled" not in stat or int(stat.split("nr_throttled")[1].split()[0]) > 0
    finally:
        processes.stop(proc)
        processes.uncap(group)
    assert not group.exists()
    assert processes.describe(cmd) == f"{sys.executable.split('/')[-2]}/{sys.executable.split('/')[-1]}"
    with pytest.raises(ValueError, match="a CPU cap is a share of the server's CPUs"):
        processes.cap_command(["true"], 0, 1)
