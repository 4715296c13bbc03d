"""The CPU layout of a run (sqlitelab.core.layout), on simulated machines of 1, 2, 4, 16 and 96 CPUs:
the server half, the generator half, one Locust process per generator CPU; an article's split
where it fits and a note where it does not; explicit CPU sets kept and checked."""
from __future__ import annotations

import re

import pytest

from sqlitelab.core import layout


@pytest.mark.parametrize("n, server, generator, processes", [
    (1, None, None, 1),           # one CPU: nothing pinned, the two share it
    (2, "0", "1", 1),             # this machine's layout, as before
    (4, "0-1", "2-3", 2),
    (16, "0-7", "8-15", 8),
    (96, "0-47", "48-95", 48),
])
def test_the_default_splits_the_machine(n, server, generator, processes):
    lay = layout.plan(range(n))
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == (server, generator, processes)
    assert not set(lay.server) & set(lay.generator)
    assert len(lay.server) + len(lay.generator) == (n if n > 1 else 0)
    assert (lay.note != "") == (n == 1)


@pytest.mark.parametrize("n, server, generator, processes, fits", [
    (2, "0", "1", 1, False),      # seed 002's 4 server cores on 2 CPUs: 1 server CPU, said so
    (4, "0-2", "3", 1, False),    # the generator keeps one CPU
    (5, "0-3", "4", 1, True),
    (16, "0-3", "4-15", 12, True),
    (96, "0-3", "4-95", 92, True),
])
def test_an_articles_split_is_used_where_it_fits(n, server, generator, processes, fits):
    lay = layout.plan(range(n), server=4)
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == (server, generator, processes)
    assert (lay.note == "") == fits
    if not fits:
        assert "4 server CPUs" in lay.note and f"on {n} CPUs" in lay.note


def test_the_machines_cpus_need_not_start_at_zero_or_be_contiguous():
    lay = layout.plan([2, 3, 6, 7, 8, 9])  # e.g. a container's cpuset
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == ("2-3,6", "7-9", 3)


def test_resolve_keeps_what_a_run_sets_and_fills_in_auto():
    machine = range(16)
    assert layout.resolve(cpus=machine) == layout.plan(machine)
    lay = layout.resolve("0", "auto", "auto", cpus=machine)
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == ("0", "8-15", 8)
    lay = layout.resolve("0-3", "4-5", "auto", cpus=machine)
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == ("0-3", "4-5", 2)
    lay = layout.resolve(None, None, "auto", cpus=machine)  # unpinned both: one Locust process
    assert (lay.server_cpus, lay.generator_cpus, lay.processes) == (None, None, 1)
    assert layout.resolve("auto", "auto", 3, cpus=machine).processes == 3


@pytest.mark.parametrize("kwargs, message", [
    ({"server_cpus": "16"}, "names CPUs [16]"),
    ({"generator_cpus": "3-1"}, "bad CPU range"),
    ({"generator_cpus": ","}, "empty CPU set"),
    ({"processes": 0}, "processes must be 'auto' or an integer >= 1"),
    ({"processes": "many"}, "processes must be 'auto' or an integer >= 1"),
    ({"server": 0}, "server must be a number of CPUs >= 1"),
])
def test_bad_layouts_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        layout.resolve(cpus=range(16), **kwargs)


def test_describe_says_the_layout_in_one_line():
    assert layout.plan(range(16)).describe() == "server CPUs 0-7, generator CPUs 8-15, 8 Locust processes"
    assert layout.plan(range(2)).describe() == "server CPU 0, generator CPU 1, 1 Locust process"
    assert layout.plan([0]).describe().startswith("server unpinned, generator unpinned, 1 Locust process (one CPU")


def test_cpuset_is_tasksets_form():
    assert layout.cpuset([8, 0, 1, 2, 3]) == "0-3,8"
    assert layout.cpuset([]) is None
    assert layout.cpu_list("0-3,8") == [0, 1, 2, 3, 8]


def test_a_sweep_takes_the_machines_layout_or_its_articles_split(monkeypatch):
    """sweep's Spec on a simulated 16-CPU machine (nothing starts): 01 splits the machine in
    halves, 03 gives the server its article's 4 CPUs (its module's SERVER_SPLIT, which its sweeps
    pass); loadgen is always one process."""
    from sqlitelab.notebooks import read_write_mix
    from sqlitelab.experiments import sweep
    monkeypatch.setattr(layout, "available_cpus", lambda: list(range(16)))
    s01 = sweep.spec(notebook="01-linear-writes")
    assert (s01.server_cpus, s01.generator_cpus, s01.processes, s01.layout_note) == ("0-7", "8-15", 8, "")
    s03 = sweep.spec(notebook="03-read-write-mix", server_split=read_write_mix.SERVER_SPLIT)
    assert (s03.server_cpus, s03.generator_cpus, s03.processes) == ("0-3", "4-15", 12)
    s03 = sweep.spec(notebook="03-read-write-mix", server_split=read_write_mix.SERVER_SPLIT, generator="loadgen")
    assert s03.processes == 1
    monkeypatch.setattr(layout, "available_cpus", lambda: [0, 1])
    s03 = sweep.spec(notebook="03-read-write-mix", server_split=read_write_mix.SERVER_SPLIT)
    assert (s03.server_cpus, s03.generator_cpus, s03.processes) == ("0", "1", 1)
    assert "4 server CPUs" in s03.layout_note and s03.record()["layout_note"] == s03.layout_note


@pytest.mark.parametrize("stack, knobs, cpus, processes", [
    ("python-fastapi", {}, "0-3", "4"),                        # pool: one process per CPU
    ("ruby-puma", {}, "0", "1"),
    ("python-fastapi", {"processes": 2}, "0-3", "2"),          # a knob wins
    ("python-fastapi", {"write_path": "writer"}, "0-3", None),  # one writer: one process
    ("rust-axum", {}, "0-3", None),                            # follows its affinity itself
    ("python-fastapi", {}, None, None),                        # unpinned: the stack's default
])
def test_a_multiprocess_server_follows_its_cpu_set(stack, knobs, cpus, processes, monkeypatch):
    from sqlitelab.infra import servers
    monkeypatch.setattr(layout, "available_cpus", lambda: list(range(16)))
    env = servers.knob_env(None, **knobs)
    got = {**env, **servers.follow_cpus(stack, env, cpus)}.get("LAB_PROCESSES")
    assert got == (processes if processes is not None else env.get("LAB_PROCESSES"))
