"""Shared fixtures. `LAB_STACKS=rust-axum,go-nethttp pytest ...` narrows the stacks tested."""
from __future__ import annotations

import os

import pytest

from sqlitelab import servers


def selected_stacks() -> list[str]:
    wanted = os.environ.get("LAB_STACKS")
    stacks = list(servers.STACKS)
    if wanted:
        stacks = [s for s in wanted.split(",") if s]
        unknown = set(stacks) - set(servers.STACKS)
        if unknown:
            raise pytest.UsageError(f"LAB_STACKS names unknown stacks {sorted(unknown)}")
    return stacks


STACKS = selected_stacks()


@pytest.fixture(autouse=True, scope="module")
def no_orphans():
    """Every test module leaves no server of ours running, whatever happened in it."""
    yield
    left = servers.our_processes()
    for pid in left:
        servers._LIVE[pid].stop()
    assert not left, f"servers still running after the test: {left}"
