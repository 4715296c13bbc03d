"""Shared fixtures. `LAB_STACKS=rust-axum,go-nethttp pytest ...` narrows the stacks tested."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil
import pytest

from sqlitelab.core import config
from sqlitelab.infra import databases, servers
from sqlitelab.load import calibrate, driver as load, wrk

# One calibration of the load generators for the whole session, in a file of its own that the
# tests' throw-away data directories and the notebooks' kernels share: the one `make setup`
# measured on this machine (copied from data/results.db), else measured by the first sweep that
# needs it. Point LAB_CALIBRATION_DB at a results.db that holds one to use it as it is.
_CALIBRATION_DIR = None
if not os.environ.get("LAB_CALIBRATION_DB"):
    _CALIBRATION_DIR = Path(tempfile.mkdtemp(prefix="lab-test-calibration-"))
    os.environ["LAB_CALIBRATION_DB"] = str(_CALIBRATION_DIR / "calibration.db")
    config.CALIBRATION_DB = Path(os.environ["LAB_CALIBRATION_DB"])
    calibrate.copy_calibrations(config.RESULTS_DB, config.CALIBRATION_DB)
# A test never touches what the lab keeps for the machine (config.MACHINE_CACHE: calibrations
# that other clones take, cargo's build directory): the session, its pytest-xdist workers (they
# inherit it), kernels and servers share a throw-away one instead.
_MACHINE_DIR = None
if not Path(os.environ.get("LAB_MACHINE_CACHE", "")).name.startswith("lab-test-machine-"):
    _MACHINE_DIR = Path(tempfile.mkdtemp(prefix="lab-test-machine-"))
    os.environ["LAB_MACHINE_CACHE"] = str(_MACHINE_DIR)
    config.MACHINE_CACHE = _MACHINE_DIR


def pytest_sessionfinish(session, exitstatus):
    for made in (_CALIBRATION_DIR, _MACHINE_DIR):
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    in_controller = not hasattr(session.config, "workerinput")  # pytest-xdist: not a worker
    if in_ci() and in_controller and disallowed_skips() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def command_line(p: psutil.Process) -> str:
    """`p`'s command line, or "" once it has exited or is a zombie: a child found by
    `children()` can die before its command line is read, and that is not a failure."""
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def selected(variable: str, known) -> list[str]:
    """The names `variable` lists (comma-separated), every one of `known` when it is unset or
    empty; a list that names nothing (`,`) or an unknown name is a usage error, not a green
    run that tested nothing."""
    wanted = os.environ.get(variable)
    if not wanted:
        return list(known)
    names = [n for n in wanted.split(",") if n]
    if not names:
        raise pytest.UsageError(f"{variable}={wanted!r} names nothing "
                                f"(unset it for all of {', '.join(known)})")
    unknown = set(names) - set(known)
    if unknown:
        kind = variable.removeprefix("LAB_").lower()
        raise pytest.UsageError(f"{variable} names unknown {kind} {sorted(unknown)}")
    return names


def selected_stacks() -> list[str]:
    return selected("LAB_STACKS", servers.STACKS)


STACKS = selected_stacks()


def selected_databases() -> list[str]:
    """`LAB_DATABASES=postgres pytest ...` narrows the databases the contract suite runs on."""
    return selected("LAB_DATABASES", servers.DATABASES)


DATABASES = selected_databases()


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    """One real Postgres for a test module (sqlitelab.infra.postgres), stopped by PID at its end (so
    that no other module's "nothing outlived the sweep" check finds it)."""
    from sqlitelab.infra import postgres
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
# Per-test timeouts (pytest-timeout) over pyproject.toml's default, by tier: a notebook's smoke
# run (the session's first calibration of the generators included, when it comes first) and
# the JupyterLab browser test take minutes.
TIMEOUTS = {"notebook": 1800}


def tier(item) -> str:
    found = [t for t in TIERS if item.get_closest_marker(t)]
    return found[0] if found else "fast"


def pytest_collection_modifyitems(items):
    for item in items:
        seconds = TIMEOUTS.get(tier(item))
        if seconds and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(seconds))
    # The notebooks' tests first (the longest, 3-48 s each), then the harness tests that share
    # the CPUs (5-20 s), in their order: the Makefile hands its workers one test at a time
    # (--maxschedchunk 1), so the short ones fill in at the end and no worker waits through the
    # last notebook run alone.
    items.sort(key=lambda item: (item.get_closest_marker("notebook") is None,
                                 item.get_closest_marker("shares_cpus") is None))


def generator_in(args) -> str | None:
    """The load generator a command line starts (Locust, loadgen or wrk; pinned by `taskset`
    or not), or None: `wrk --version` starts none."""
    if isinstance(args, str):
        argv = shlex.split(args)
    elif isinstance(args, (bytes, os.PathLike)):
        argv = [os.fsdecode(args)]
    else:
        argv = [os.fsdecode(a) for a in args]
    if argv and Path(argv[0]).name == "taskset":
        argv = argv[3:]  # processes.pin_command: taskset -c CPUS command...
    if not argv:
        return None
    program = Path(argv[0]).name
    if program == "locust" or argv[1:3] == ["-m", "locust"]:
        return "locust"
    if argv[0] == str(config.LOADGEN_BIN):
        return "loadgen"
    if program == wrk.BINARY and "--version" not in argv:
        return "wrk"
    return None


def refusing_popen(t: str) -> type[subprocess.Popen]:
    """subprocess.Popen, except that a load generator's command line is an AssertionError."""
    class Popen(subprocess.Popen):
        def __init__(self, args, *a, **kw):
            generator = generator_in(args)
            if generator:
                raise AssertionError(f"a {t}-tier test started a load generator ({generator}): "
                                     "mark it harness")
            super().__init__(args, *a, **kw)
    return Popen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A fast test that starts a server, or a fast or contract test that drives load (a level,
    or a Locust, loadgen or wrk process), fails: its marker says less than it does. Set up
    around the test's whole protocol rather than in a fixture, so that the module- and
    session-scoped fixtures it sets up (before any function-scoped one) are held to it too."""
    t = tier(item)
    with pytest.MonkeyPatch.context() as mp:
        if t == "fast":
            def refuse(self, *a, **kw):
                raise AssertionError(f"a fast-tier test started {self.stack}: mark it contract or harness")
            mp.setattr(servers.Server, "start", refuse)
        if t in ("fast", "contract"):
            def refuse_load(*a, **kw):
                raise AssertionError(f"a {t}-tier test drove load: mark it harness")
            mp.setattr(load, "run_level", refuse_load)
            mp.setattr(subprocess, "Popen", refusing_popen(t))
        return (yield)


# ---------------------------------------------------------------------------- skips in CI
# With CI set (.ci/run sets it), a skip whose reason is not listed here fails the session: on a
# fresh root Debian machine after `make setup` everything the suite needs is there (Chromium,
# wrk, strace, Litestream, iproute2, sshd, root for the network namespaces), and a narrowed
# LAB_STACKS or LAB_DATABASES is a developer's choice, not CI's. So none is allowed.
ALLOWED_SKIPS: frozenset[str] = frozenset()
_SKIPPED: list[tuple[str, str]] = []  # (node id, reason) of every skip this session


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _record_skip(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPPED.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_runtest_logreport(report):
    _record_skip(report)


def pytest_collectreport(report):  # a whole module skipped at import
    _record_skip(report)


def disallowed_skips() -> list[tuple[str, str]]:
    return [(nodeid, reason) for nodeid, reason in _SKIPPED if reason not in ALLOWED_SKIPS]


def pytest_terminal_summary(terminalreporter):
    bad = disallowed_skips() if in_ci() else []
    if bad:
        terminalreporter.section("skips CI does not allow (tests/conftest.py ALLOWED_SKIPS)", red=True)
        for nodeid, reason in bad:
            terminalreporter.line(f"{nodeid}: {reason}")
