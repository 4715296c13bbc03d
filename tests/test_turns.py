"""Runs that take turns (sqlitelab.core.turns): real processes, each writing its segments between
passing points into one log, so that the log shows who worked when."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sqlitelab.core import turns


def participant(log: Path, name: str, segments: int, before: float = 0.0, die_after: int | None = None) -> str:
    """A participant's script: waits `before` s, then `segments` times a passing point and a
    segment that writes 'name start' and 'name end' a little apart (os._exit after segment
    `die_after`: a death that runs no atexit)."""
    return textwrap.dedent(f"""
        import os, time
        from sqlitelab.core import turns
        time.sleep({before})
        with open({str(log)!r}, "a") as f:
            f.write("{name} arrives\\n"); f.flush()
            for k in range({segments}):
                turns.passing()
                f.write(f"{name} start\\n"); f.flush()
                time.sleep(0.05)
                f.write(f"{name} end\\n"); f.flush()
                if {die_after!r} is not None and k + 1 == {die_after!r}:
                    os._exit(9)
    """)


def run_all(tmp_path: Path, scripts: list[str], finish_by_starter: bool = True) -> list[str]:
    env = turns.start(tmp_path / "turns", len(scripts))
    procs = [subprocess.Popen([sys.executable, "-c", s], env={**os.environ, **e}) for s, e in zip(scripts, env)]
    for i, p in enumerate(procs):
        assert p.wait(timeout=60) in (0, 9)
        if finish_by_starter:
            turns.finished(tmp_path / "turns", i)
    return (tmp_path / "log").read_text().split()


def segments(log: list[str]) -> list[tuple[str, str]]:
    words = [(log[i], log[i + 1]) for i in range(0, len(log), 2)]
    return [w for w in words if w[1] != "arrives"]


def test_participants_work_one_at_a_time_in_rotation_after_all_arrived(tmp_path):
    log = tmp_path / "log"
    # 2 arrives last, 0.5 s after the others: nobody starts before it has arrived
    got = run_all(tmp_path, [participant(log, "p0", 3), participant(log, "p1", 3), participant(log, "p2", 3, before=0.5)])
    pairs = [(got[i], got[i + 1]) for i in range(0, len(got), 2)]
    assert pairs.index(("p2", "arrives")) < pairs.index(("p0", "start"))
    work = segments(got)
    # every segment whole (start then its own end: no two at once), in the rotation 0, 1, 2, 0, ...
    assert [w for w in work] == [(f"p{i % 3}", e) for i in range(9) for e in ("start", "end")]


def test_a_participant_that_dies_without_a_word_is_skipped(tmp_path):
    log = tmp_path / "log"
    got = run_all(tmp_path, [participant(log, "p0", 3), participant(log, "p1", 3, die_after=1),
                             participant(log, "p2", 3)], finish_by_starter=False)
    work = [w for w, e in segments(got) if e == "start"]
    assert work == ["p0", "p1", "p2", "p0", "p2", "p0", "p2"]


def test_a_participant_that_never_arrives_holds_nobody_once_its_starter_says_it_ended(tmp_path):
    log = tmp_path / "log"
    folder = tmp_path / "turns"
    env = turns.start(folder, 2)
    p0 = subprocess.Popen([sys.executable, "-c", participant(log, "p0", 2)], env={**os.environ, **env[0]})
    time.sleep(0.5)
    assert "p0 start" not in log.read_text()  # waiting for participant 1 to arrive
    turns.finished(folder, 1)  # which ended before it ever did (a kernel that did not start)
    assert p0.wait(timeout=30) == 0
    assert log.read_text().split().count("start") == 2
    assert turns.waited(folder, 0) >= 0.4


def test_without_a_turns_folder_a_passing_point_does_nothing(monkeypatch):
    monkeypatch.delenv("LAB_TURNS", raising=False)
    t = time.monotonic()
    turns.passing()
    assert not turns.active() and turns.waited_here() == 0.0 and time.monotonic() - t < 1


def test_a_process_that_inherited_a_live_participants_turn_takes_none(tmp_path):
    folder = tmp_path / "turns"
    env = {**os.environ, **turns.start(folder, 2)[0]}
    holder = subprocess.Popen([sys.executable, "-c", "from sqlitelab.core import turns; import time\n"
                               "turns.passing(); time.sleep(30)"], env=env)
    try:
        # turn 0 goes nowhere until participant 1 arrives: give 0 time to register
        deadline = time.monotonic() + 20
        while '"arrived"' not in (folder / "p0.json").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = subprocess.run([sys.executable, "-c", "from sqlitelab.core import turns; turns.passing()"],
                               env=env, capture_output=True, text=True, timeout=30)
        assert child.returncode != 0 and "takes no turn" in child.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_folder_that_is_not_a_turns_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_TURNS", str(tmp_path))
    monkeypatch.setenv("LAB_TURN", "0")
    monkeypatch.setattr(turns, "_ME", None)
    with pytest.raises(turns.TurnError, match="not a turns folder"):
        turns.passing()
    with pytest.raises(ValueError):
        turns.start(tmp_path / "t", 0)


SWEEP = """
import sys
from sqlitelab.experiments import sweep
sweep.sweep(notebook="test-turns", servers=["go-nethttp", "rust-axum"], profiles=["single-writer"],
            scenario="hello", levels=[1], duration=0.3, warmup=0.1, progress=False,
            results_db=sys.argv[1] + "/r.db", runs_dir=sys.argv[1] + "/runs", calibration=False)
"""


@pytest.mark.harness
def test_two_real_sweeps_taking_turns_run_their_servers_one_at_a_time_alternately(tmp_path):
    """Two processes, each a sweep of two stacks, taking turns: watched from outside every 20 ms,
    never both with a server up, and the servers in the rotation A's first, B's first, A's second,
    B's second; each sweep's stored wall time leaves out its waits."""
    import psutil
    from sqlitelab.core import results
    env = turns.start(tmp_path / "turns", 2)
    procs, t0 = [], time.monotonic()
    for i, e in enumerate(env):
        (tmp_path / f"p{i}").mkdir()
        procs.append(subprocess.Popen([sys.executable, "-c", SWEEP, str(tmp_path / f"p{i}")],
                                      env={**os.environ, **e, "LAB_DATA_DIR": str(tmp_path / f"p{i}")}))

    def serving(p: subprocess.Popen) -> str | None:
        """The stack whose server runs under `p`, None when none does: a process whose program or
        arguments lie in the stack's folder (its run script, its binary; the generator's line
        names a URL). Not a child still between fork and exec: it shows the sweep's own command
        line, whose code names both stacks."""
        try:
            me = psutil.Process(p.pid)
            for c in me.children(recursive=True):
                if c.cmdline() == me.cmdline():
                    continue
                line = " ".join([c.exe(), *c.cmdline()])
                for stack in ("go-nethttp", "rust-axum"):
                    if f"servers/{stack}/" in line:
                        return stack
        except psutil.Error:
            pass
        return None

    seen: list[tuple[int, str]] = []
    deadline = time.monotonic() + 240
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        up = [(i, s) for i, p in enumerate(procs) if (s := serving(p))]
        assert len(up) <= 1, f"two servers up at once: {up}"
        if up and (not seen or seen[-1] != up[0]):
            seen.append(up[0])
        time.sleep(0.02)
    assert [p.wait(timeout=30) for p in procs] == [0, 0]
    elapsed = time.monotonic() - t0
    assert seen == [(0, "go-nethttp"), (1, "go-nethttp"), (0, "rust-axum"), (1, "rust-axum")]
    for i in (0, 1):
        run = results.read_sql("SELECT wall_seconds FROM runs", (), tmp_path / f"p{i}" / "r.db")
        wall, waited = float(run["wall_seconds"].iloc[0]), turns.waited(tmp_path / "turns", i)
        assert wall > 0 and waited > 0 and wall + waited <= elapsed
