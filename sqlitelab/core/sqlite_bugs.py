"""Published SQLite bugs that corrupt a database or lose committed writes, by the library versions
they affect, and the compile options that bear on durability and concurrency: what a stack's
software row says beside the SQLite it links (sqlitelab.studies.method.software).

    affected("3.40.1")      # [WAL_RESET]: inside its range, no backport
    affected("3.50.7")      # []: a release the fix was backported to
    flags("3.40.1")         # the words: the bug, its range and what triggers it
    salient(["THREADSAFE=1", "ENABLE_FTS5", "DEFAULT_WAL_SYNCHRONOUS=1"])  # the two that bear on it
"""
from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int, int]


@dataclass(frozen=True)
class Bug:
    name: str
    first: Version                    # the first release it affects
    last: Version                     # the last release of the line it affects
    fixed: Version                    # the release that fixed it
    backports: tuple[Version, ...]    # releases inside [first, last] carrying the fix (their x.y line on)
    condition: str                    # what triggers it, in plain words
    source: str


# sqlite.org/wal.html#walresetbug: found and fixed in 2026 (3.51.3; backported to 3.44.6 and 3.50.7).
WAL_RESET = Bug(
    "the WAL-reset bug", (3, 7, 0), (3, 51, 2), (3, 51, 3), ((3, 44, 6), (3, 50, 7)),
    "WAL mode and two or more connections to one database (threads or processes): a checkpoint "
    "that starts while another connection's commit resets the WAL can miss the reset, and a later "
    "checkpoint then skips part of a transaction (a corrupt database or lost commits; rare, a "
    "matter of timing)",
    "https://sqlite.org/wal.html#walresetbug")

BUGS: tuple[Bug, ...] = (WAL_RESET,)

# compile options that change durability or concurrency (PRAGMA compile_options' names, without
# their value): the ones a software row names; the full list is stored on each point (sqlite_options)
SALIENT = ("THREADSAFE", "DEFAULT_SYNCHRONOUS", "DEFAULT_WAL_SYNCHRONOUS", "DEFAULT_WAL_AUTOCHECKPOINT",
           "DEFAULT_JOURNAL_SIZE_LIMIT", "DEFAULT_MMAP_SIZE", "MAX_MMAP_SIZE", "OMIT_SHARED_CACHE",
           "ENABLE_SETLK_TIMEOUT", "DEFAULT_LOCKING_MODE", "DIRECT_OVERFLOW_READ")


def version(text: str) -> Version:
    """'3.40.1' -> (3, 40, 1); a version of two parts gets .0; anything else: ValueError."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"an SQLite version is like 3.40.1, not {text!r}")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def affected(text: str) -> list[Bug]:
    """The published bugs whose range holds SQLite `text` and whose fix it does not carry."""
    v = version(text)
    return [b for b in BUGS if b.first <= v <= b.last
            and not any(v[:2] == f[:2] and v >= f for f in b.backports)]


def _dotted(v: Version) -> str:
    return ".".join(map(str, v))


def flags(text: str) -> list[str]:
    """Each bug SQLite `text` is inside, in words: its name, range, fix and what triggers it."""
    return [f"inside {b.name}'s range ({_dotted(b.first)}–{_dotted(b.last)}, fixed in {_dotted(b.fixed)}"
            + (f", and in {' and '.join(map(_dotted, b.backports))}" if b.backports else "")
            + f"; {b.source}): {b.condition}" for b in affected(text)]


def salient(options: list[str]) -> list[str]:
    """The compile options of SALIENT's names among `options` (PRAGMA compile_options), in SALIENT's order."""
    named = {o.split("=", 1)[0]: o for o in options if isinstance(o, str)}
    return [named[n] for n in SALIENT if n in named]
