"""Shared fixtures. `LAB_STACKS=rust-axum,go-nethttp pytest ...` narrows the stacks tested."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# One calibration of the load generators for the whole session (measured by the first sweep
# that needs it), shared by the tests' throw-away data directories and the notebooks' kernels.
# Point LAB_CALIBRATION_DB at a results.db that holds one to reuse it.
_CALIBRATION_DIR = None
if not os.environ.get("LAB_CALIBRATION_DB"):
    _CALIBRATION_DIR = Path(tempfile.mkdtemp(prefix="lab-test-calibration-"))
    os.environ["LAB_CALIBRATION_DB"] = str(_CALIBRATION_DIR / "calibration.db")

from sqlitelab import databases, servers  # noqa: E402  (after LAB_CALIBRATION_DB is set)


def pytest_sessionfinish(session, exitstatus):
    if _CALIBRATION_DIR is not None:
        shutil.rmtree(_CALIBRATION_DIR, ignore_errors=True)


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


def selected_databases() -> list[str]:
    """`LAB_DATABASES=postgres pytest ...` narrows the databases the contract suite runs on."""
    wanted = [d for d in os.environ.get("LAB_DATABASES", "").split(",") if d] or list(servers.DATABASES)
    unknown = set(wanted) - set(servers.DATABASES)
    if unknown:
        raise pytest.UsageError(f"LAB_DATABASES names unknown databases {sorted(unknown)}")
    return wanted


DATABASES = selected_databases()


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    """One real Postgres for a test module (sqlitelab.postgres), stopped by PID at its end (so
    that no other module's "nothing outlived the sweep" check finds it)."""
    from sqlitelab import postgres
    with postgres.Postgres(tmp_path_factory.mktemp("postgres")) as cluster:
        yield cluster


@pytest.fixture(autouse=True, scope="module")
def no_orphans():
    """Every test module leaves no server of ours running, whatever happened in it."""
    yield
    left = servers.our_processes()
    for pid in left:
        servers._LIVE[pid].stop()
    assert not left, f"servers still running after the test: {left}"


@pytest.fixture
def fresh_db(request, tmp_path):
    """`fresh_db(database, users=.., items=..)`: a fresh SQLite file in tmp_path, or the
    session's Postgres with its database made afresh (what a server's `db` is)."""
    def make(database: str, name: str = "t.db", **seed):
        if database == "postgres":
            return request.getfixturevalue("pg").prepare(**seed)
        return databases.prepare_database(tmp_path / name, **seed)
    return make


# ---------------------------------------------------------------------------- honest tiers
# fast (no marker: `make test-fast`): starts no server and no load generator;
# contract: starts servers, drives no load; harness: drives load; notebook: runs notebooks.
TIERS = ("contract", "harness", "notebook")


def tier(item) -> str:
    found = [t for t in TIERS if item.get_closest_marker(t)]
    return found[0] if found else "fast"


@pytest.fixture(autouse=True)
def stays_in_its_tier(request, monkeypatch):
    """A fast test that starts a server, or a contract test that drives load, fails: its
    marker says less than it does."""
    t = tier(request.node)
    if t == "fast":
        def refuse(self, *a, **kw):
            raise AssertionError(f"a fast-tier test started {self.stack}: mark it contract or harness")
        monkeypatch.setattr(servers.Server, "start", refuse)
    if t in ("fast", "contract"):
        from sqlitelab import load

        def refuse_load(*a, **kw):
            raise AssertionError(f"a {t}-tier test drove load: mark it harness")
        monkeypatch.setattr(load, "run_level", refuse_load)
    yield
