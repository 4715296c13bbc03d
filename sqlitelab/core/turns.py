"""Runs that take turns: several processes measuring on one machine, one at a time, in a fixed
rotation, so that a slow minute of the machine falls on all of them alike.

The power check (`python -m sqlitelab.compare --power`) runs its three runs of a notebook this way
instead of one after another: each is a process of its own, and at every passing point (a sweep's
server start: sqlitelab.experiments.sweep) the one holding the turn hands it to the next, so the
same server and profile is measured in run A, then in A again, then in the held run, minutes apart
at most, rather than a whole notebook's time apart (randomised multiple interleaved trials, Abedi
& Brecht, ICPE 2017, with the rotation fixed: the runs are alike but for the one held back).

Between two passing points only the process holding the turn works: what a run does before its
first passing point (its kernel's start, the notebook's first cells) is done before anyone's turn
begins (every participant arrives first: a barrier), and what it does after its last (its tables
and figures) before it hands on, at its exit. A participant that exited, or died, is skipped.

    LAB_TURNS=<folder> LAB_TURN=<i>   # set by the starter, which made the folder (start)

Without LAB_TURNS, `passing()` does nothing. Each wait is bounded (WAIT_LIMIT_S).

This module is the lab's core: it imports nothing of the lab.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

# How often a waiting participant reads whose turn it is (one small file, no lock: 0.1 % of a core
# at this rate, where reading every participant under the lock every 20 ms took 6 % of one per
# waiting kernel, on the measuring cores), and how often it looks at every participant under the
# lock (who arrived, who died) while the turn is not its own.
POLL_S = 0.1
FULL_EVERY_S = 2.0
WAIT_LIMIT_S = 4 * 3600.0  # the longest one wait may last before it is an error (a holder that hangs)


class TurnError(RuntimeError):
    """A wait for the turn that outlasted WAIT_LIMIT_S, or a folder that is not a turns folder."""


def start(folder: Path | str, count: int) -> list[dict]:
    """Make a turns folder for `count` participants (0 .. count − 1; 0 goes first) and return
    the environment each is to run with."""
    if count < 1:
        raise ValueError(f"turns need at least one participant, not {count}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        for i in range(count):
            _write(folder / f"p{i}.json", {"state": "starting", "pid": None, "waited_s": 0.0, "turns": 0})
        _write(folder / "turn.json", {"turn": 0})
    return [{"LAB_TURNS": str(folder), "LAB_TURN": str(i)} for i in range(count)]


def finished(folder: Path | str, index: int) -> None:
    """The starter's word that participant `index` has exited (however it ended): skipped from now
    on, and the turn handed on if it held it."""
    folder = Path(folder)
    with _locked(folder):
        _set(folder, index, state="done")
        _hand_on(folder)


def waited_by_named() -> float:
    """The seconds the participant this process's environment names (LAB_TURNS, LAB_TURN: a child
    it started, say a notebook's kernel) spent waiting for its turn; 0 without LAB_TURNS."""
    folder, index = os.environ.get("LAB_TURNS"), os.environ.get("LAB_TURN")
    return waited(folder, int(index)) if folder and index is not None else 0.0


def waited(folder: Path | str, index: int) -> float:
    """The seconds participant `index` spent waiting for its turn (0 when it never ran)."""
    p = Path(folder) / f"p{index}.json"
    return float(_read(p).get("waited_s") or 0.0) if p.is_file() else 0.0


# --------------------------------------------------------------------------- the participant's side

class _Me:
    def __init__(self, folder: Path, index: int) -> None:
        self.folder, self.index = folder, index
        self.pid = os.getpid()
        self.arrived = False
        self.waited_s = 0.0


_ME: _Me | None = None


def _me() -> _Me | None:
    """This process as a participant (None: no LAB_TURNS, or a child of one that inherited it)."""
    global _ME
    folder, index = os.environ.get("LAB_TURNS"), os.environ.get("LAB_TURN")
    if not folder or index is None:
        return None
    if _ME is not None and _ME.pid != os.getpid():
        return None  # a fork of a participant is none
    if _ME is None or _ME.folder != Path(folder):
        if not (Path(folder) / "turn.json").is_file():
            raise TurnError(f"LAB_TURNS={folder} is not a turns folder (sqlitelab.core.turns.start makes one)")
        _ME = _Me(Path(folder), int(index))
    return _ME


def active() -> bool:
    """Whether this process takes turns with others."""
    return _me() is not None


def waited_here() -> float:
    """The seconds this process has spent waiting for its turn so far (0 when it takes none)."""
    return _ME.waited_s if _ME is not None else 0.0


def passing() -> None:
    """A passing point: the first time, arrive and wait until every participant has and the turn
    is ours; afterwards, hand the turn on and wait until it comes back. Nothing without LAB_TURNS."""
    me = _me()
    if me is None:
        return
    with _locked(me.folder):
        if not me.arrived:
            held = _read(me.folder / f"p{me.index}.json").get("pid")
            if held and held != os.getpid() and _alive(int(held)):
                raise TurnError(f"participant {me.index} of {me.folder} is process {held}, not this one "
                                f"({os.getpid()}): a process that inherited LAB_TURNS takes no turn")
            _set(me.folder, me.index, state="arrived", pid=os.getpid())
            me.arrived = True
            atexit.register(_leave, me)
        else:
            turn = _read(me.folder / "turn.json")["turn"]
            if turn == me.index:
                _write(me.folder / "turn.json", {"turn": _next(me.folder, me.index)})
    _wait(me)


def _wait(me: _Me) -> None:
    t = time.monotonic()
    looked = -FULL_EVERY_S
    try:
        while True:
            now = time.monotonic()
            if _turn(me.folder) != me.index and now - looked < FULL_EVERY_S:
                time.sleep(POLL_S)
                continue
            looked = now
            with _locked(me.folder):
                everyone = _participants(me.folder)
                if all(p["state"] in ("arrived", "done") for p in everyone):
                    _hand_on(me.folder)
                    if _read(me.folder / "turn.json")["turn"] == me.index:
                        mine = everyone[me.index]
                        _set(me.folder, me.index, turns=int(mine.get("turns") or 0) + 1,
                             waited_s=me.waited_s + time.monotonic() - t)
                        return
            if time.monotonic() - t > WAIT_LIMIT_S:
                raise TurnError(f"waited {WAIT_LIMIT_S:.0f} s for the turn in {me.folder}: the participant "
                                f"holding it neither handed it on nor exited")
            time.sleep(POLL_S)
    finally:
        me.waited_s += time.monotonic() - t


def _leave(me: _Me) -> None:
    """At exit: done, and the turn handed on."""
    with contextlib.suppress(OSError):
        with _locked(me.folder):
            _set(me.folder, me.index, state="done", waited_s=me.waited_s)
            _hand_on(me.folder)


# --------------------------------------------------------------------------- the folder

def _turn(folder: Path) -> int | None:
    """Whose turn it is, read without the lock (the file is replaced whole: never half-written)."""
    try:
        return int(_read(folder / "turn.json")["turn"])
    except (OSError, ValueError, KeyError):
        return None


def _participants(folder: Path) -> list[dict]:
    out = []
    for i in range(len(list(folder.glob("p*.json")))):
        p = _read(folder / f"p{i}.json")
        if p["state"] != "done" and p.get("pid") and not _alive(int(p["pid"])):
            p["state"] = "done"  # died without a word: skipped
            _write(folder / f"p{i}.json", p)
        out.append(p)
    return out


def _next(folder: Path, index: int) -> int:
    """The participant after `index` in the rotation that is not done (`index` itself when it is
    the only one left)."""
    everyone = _participants(folder)
    n = len(everyone)
    for step in range(1, n + 1):
        j = (index + step) % n
        if everyone[j]["state"] != "done":
            return j
    return index


def _hand_on(folder: Path) -> None:
    """A turn held by a participant that is done goes to the next one that is not."""
    turn = _read(folder / "turn.json")["turn"]
    if _participants(folder)[turn]["state"] == "done":
        _write(folder / "turn.json", {"turn": _next(folder, turn)})


def _set(folder: Path, index: int, **changes) -> None:
    path = folder / f"p{index}.json"
    _write(path, {**_read(path), **changes})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by its parent) is no participant
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


@contextlib.contextmanager
def _locked(folder: Path):
    with open(folder / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def _write(path: Path, value: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
