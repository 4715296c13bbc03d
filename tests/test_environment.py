"""environment.yml (conda) declares exactly the Python dependencies of pyproject.toml."""
from __future__ import annotations

import re
import tomllib

import yaml

from sqlitelab.core import config, results

CONDA_NAMES = {"uvicorn-standard": "uvicorn"}  # conda-forge's name for uvicorn[standard]


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def pyproject_deps() -> dict[str, str]:
    data = tomllib.loads((config.PROJ_ROOT / "pyproject.toml").read_text())
    out = {}
    for dep in data["project"]["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9.]+)", dep.strip())
        assert m, f"pyproject dependency {dep!r} should be name>=version"
        out[m.group(1).lower()] = m.group(3)
    return out


def conda_deps() -> dict[str, str]:
    env = yaml.safe_load((config.PROJ_ROOT / "environment.yml").read_text())
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):  # pip's own: a package conda-forge does not carry, name==major.minor
            for line in dep.get("pip", []):
                if not line.startswith("-"):
                    name, _, version = line.partition("==")
                    out[name.lower()] = version
            continue
        if dep.split("=")[0] in ("python", "pip"):
            continue
        name, _, version = dep.partition("=")
        out[CONDA_NAMES.get(name, name).lower()] = version
    return out


def test_same_packages():
    assert set(conda_deps()) == set(pyproject_deps())


def test_conda_pins_satisfy_pyproject_minimums():
    py = pyproject_deps()
    for name, pin in conda_deps().items():
        assert _version(pin) >= _version(py[name]), (name, pin, py[name])
        assert len(pin.split(".")) == 2, f"{name}: pin major.minor, not {pin}"


def test_lock_pins_every_dependency_within_pyproject():
    """requirements.lock (make lock) pins every pyproject dependency, at a version pyproject allows."""
    pins = results.lock_pins()
    for name, minimum in pyproject_deps().items():
        key = re.sub(r"[-_.]+", "-", name)
        assert key in pins, f"{name} is not in requirements.lock: run make lock"
        assert _version(pins[key]) >= _version(minimum), (name, pins[key], minimum)


def test_installed_environment_is_the_lock():
    got = results.lock()
    assert got["lock_hash"] and got["lock_ok"], f"installed packages differ from the lock: {got['lock_drift']}"


def test_runs_record_the_lock(tmp_path):
    import hashlib
    import sqlite3
    db = tmp_path / "results.db"
    results.store_run({"run_id": "r1", "notebook": "scratch", "notebook_run": "r1"}, [{"run_id": "r1", "x": 1}], db)
    row = sqlite3.connect(db).execute("SELECT lock_hash, lock_ok FROM runs").fetchone()
    assert row == (hashlib.sha256(config.LOCK_FILE.read_bytes()).hexdigest()[:16], 1)
