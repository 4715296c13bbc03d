"""LAB_EXTRA_STACKS: a stack folder outside servers/ (your own app) joins servers.STACKS, and
the lab finds its `run` there (servers.extra_stacks, servers.stack_dir); its stack.toml, optional
there, is read like a bundled stack's (tests/test_stacks.py). The fixture stack is
tests/stacks/lossy-python, a server wrong on purpose (tests/test_durability.py)."""
from __future__ import annotations

import json
import time
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from sqlitelab.core import config
from sqlitelab.infra import databases, servers

STACKS_DIR = Path(__file__).resolve().parent / "stacks"
LOSSY = STACKS_DIR / "lossy-python"


def make_stack(folder: Path, executable: bool = True) -> Path:
    folder.mkdir(parents=True)
    run = folder / "run"
    run.write_text("#!/bin/sh\nexit 0\n")
    run.chmod(0o755 if executable else 0o644)
    return folder


@pytest.fixture
def extra(monkeypatch):
    """Register stack folders for one test (undone after it), as LAB_EXTRA_STACKS does at import."""
    def add(*folders: Path) -> dict:
        found = servers.extra_stacks(os.pathsep.join(map(str, folders)))
        for name, entry in found.items():
            monkeypatch.setitem(servers.STACKS, name, entry)
        return found
    return add


def test_extra_stacks_registers_each_folder_by_name(tmp_path, extra):
    a, b = make_stack(tmp_path / "my-app"), make_stack(tmp_path / "other" / "your-app")
    found = extra(a, b)
    assert list(found) == ["my-app", "your-app"]
    assert [(f["multiprocess"], f["compiled"], f["dir"], f["bundled"]) for f in found.values()] == \
        [(False, False, a, False), (False, False, b, False)]  # no stack.toml: the defaults
    assert servers.stack_dir("my-app") == a and servers.stack_dir("your-app") == b
    assert servers.stack_dir("rust-axum") == config.SERVERS_DIR / "rust-axum"
    assert servers.extra_stacks("") == {}
    servers.build_server("my-app")  # its `run` with LAB_BUILD_ONLY=1, found in its own folder


def test_extra_stacks_rejects_a_folder_without_an_executable_run(tmp_path):
    make_stack(tmp_path / "not-executable", executable=False)
    (tmp_path / "empty").mkdir()
    for name in ("not-executable", "empty", "missing"):
        with pytest.raises(ValueError, match=r"LAB_EXTRA_STACKS: .*" + name + r".* has no executable `run`"):
            servers.extra_stacks(str(tmp_path / name))


def test_extra_stacks_refuses_a_bundled_name_or_a_duplicate(tmp_path):
    make_stack(tmp_path / "rust-axum")
    with pytest.raises(ValueError, match="'rust-axum' is already known"):
        servers.extra_stacks(str(tmp_path / "rust-axum"))
    make_stack(tmp_path / "x" / "app")
    make_stack(tmp_path / "y" / "app")
    with pytest.raises(ValueError, match="'app' is already known"):
        servers.extra_stacks(os.pathsep.join([str(tmp_path / "x" / "app"), str(tmp_path / "y" / "app")]))


def _import_stacks(value: str) -> subprocess.CompletedProcess:
    code = ("import json; from sqlitelab.infra import servers; "
            "print(json.dumps({k: str(v.get('dir', '')) for k, v in servers.STACKS.items()}))")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "LAB_EXTRA_STACKS": value},
                          capture_output=True, text=True, timeout=60, cwd=config.PROJ_ROOT)


def test_lab_extra_stacks_is_read_when_servers_is_imported(tmp_path):
    proc = _import_stacks(str(LOSSY))
    assert proc.returncode == 0, proc.stderr
    stacks = json.loads(proc.stdout)
    assert list(stacks)[:4] == ["python-fastapi", "rust-axum", "go-nethttp", "ruby-puma"]
    assert stacks["lossy-python"] == str(LOSSY)
    proc = _import_stacks(str(tmp_path / "nowhere"))
    assert proc.returncode != 0 and "has no executable `run`" in proc.stderr


def test_the_lossy_stack_is_a_stack_folder():
    run = LOSSY / "run"
    assert run.is_file() and os.access(run, os.X_OK) and (LOSSY / "README.md").is_file()
    proc = subprocess.run([str(run)], env={**os.environ, "LAB_BUILD_ONLY": "1"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.contract
def test_the_lossy_stack_starts_through_start_server(tmp_path, extra):
    extra(LOSSY)
    db = databases.prepare_database(tmp_path / "lossy.db")
    srv = servers.start_server("lossy-python", db, profile="rails71", extra_env={"LAB_LOSSY_DROP": "0"})
    try:
        health = srv.health
        assert health["server"] == "lossy-python" and health["pid"] == srv.pid
        assert health["database"] == "sqlite" and health["sqlite_version"]
        assert health["knobs"]["write_path"] == "pool" and health["knobs"]["pragmas"]["journal_mode"] == "wal"
        assert {"versions", "emulated", "requests_handled", "database_version"} <= set(health)
        req = urllib.request.Request(srv.url + "/items", data=b'{"payload": "x"}', method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 201 and json.loads(r.read()) == {"id": 1}
        with urllib.request.urlopen(srv.url + "/hello", timeout=5) as r:
            assert r.read() == b"Hello, World!"
        # counted once its response is written: the count may trail the client by a moment
        deadline, handled = time.monotonic() + 2.0, 0
        while handled < 2 and time.monotonic() < deadline:
            handled = srv.get_json("/health")["requests_handled"]
        assert handled == 2
    finally:
        code = srv.stop()
    assert code == 0  # SIGTERM: it commits what is queued and exits 0
    assert databases.count_rows(db, "items") == 1
