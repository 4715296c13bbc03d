"""The published SQLite data-loss bugs by version (sqlitelab.core.sqlite_bugs): inside a range,
outside it, and a release its fix was backported to."""
from __future__ import annotations

import pytest

from sqlitelab.core import sqlite_bugs


@pytest.mark.parametrize("version, inside", [
    ("3.40.1", True),    # Debian 12's, which the Python and Ruby stacks link
    ("3.7.0", True), ("3.51.2", True), ("3.44.5", True), ("3.50.6", True), ("3.46", True),
    ("3.6.23", False), ("3.51.3", False), ("3.53.0", False),
    ("3.44.6", False), ("3.50.7", False),  # the fix's backports
])
def test_a_version_is_flagged_only_inside_a_bugs_range_without_its_fix(version, inside):
    assert (sqlite_bugs.WAL_RESET in sqlite_bugs.affected(version)) is inside
    assert bool(sqlite_bugs.flags(version)) is inside


def test_the_flag_says_the_range_the_fix_and_the_condition():
    (said,) = sqlite_bugs.flags("3.40.1")
    assert said.startswith("inside the WAL-reset bug's range (3.7.0–3.51.2, fixed in 3.51.3")
    assert "WAL mode" in said and "two or more connections" in said


@pytest.mark.parametrize("bad", ["", "3", "three.forty", "3.40.1-debian", None, 3.40])
def test_a_version_that_is_not_one_is_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="an SQLite version is like 3.40.1"):
        sqlite_bugs.affected(bad)


def test_the_salient_compile_options_in_their_declared_order():
    got = sqlite_bugs.salient(["ENABLE_FTS5", "THREADSAFE=1", "DEFAULT_WAL_SYNCHRONOUS=1", 7])
    assert got == ["THREADSAFE=1", "DEFAULT_WAL_SYNCHRONOUS=1"]
