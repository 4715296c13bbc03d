"""Every path the lab uses, from one place."""
from __future__ import annotations

import os
from pathlib import Path

PROJ_ROOT = Path(os.environ.get("LAB_ROOT", Path(__file__).resolve().parents[2]))
SERVERS_DIR = PROJ_ROOT / "servers"
SCHEMA_SQL = SERVERS_DIR / "schema.sql"
PROFILES_TOML = SERVERS_DIR / "profiles.toml"
SHARED_TOML = SERVERS_DIR / "shared.toml"  # what every stack shares: pragmas, knobs, metric names
TEMPLATES_DIR = SERVERS_DIR / "templates"
DATA_DIR = Path(os.environ.get("LAB_DATA_DIR", PROJ_ROOT / "data"))
RESULTS_DB = DATA_DIR / "results.db"
# where generator calibrations are kept and looked up (sqlitelab.load.calibrate): results.db,
# unless a test session shares one calibration between its throw-away data directories
CALIBRATION_DB = Path(os.environ.get("LAB_CALIBRATION_DB", RESULTS_DB))
# What the lab keeps for the machine rather than for one clone of it, so that a fresh clone on a
# machine that ran the set-up before pays for none of it again: the generators' calibrations
# (a copy of each, sqlitelab.load.calibrate), oha's build (the Makefile) and cargo's build
# directory (servers/rust-axum/run). `LAB_MACHINE_CACHE`, else $XDG_CACHE_HOME/sqlitelab, else
# ~/.cache/sqlitelab; a test session points it at a throw-away folder (tests/conftest.py).
MACHINE_CACHE = Path(os.environ.get("LAB_MACHINE_CACHE")
                     or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sqlitelab")
# each run's exports and level files; a re-making (sqlitelab.replay) points it at its own folder
RUNS_DIR = Path(os.environ.get("LAB_RUNS_DIR", DATA_DIR / "runs"))
REPORTS_DIR = DATA_DIR / "reports"  # make report: <scale>/<notebook>.md|.html
# the committed reference run (sqlitelab.report.reference_run): in the repository, wherever runs go
REFERENCE_RUN_DIR = PROJ_ROOT / "data" / "reference-run"
TMP_DIR = DATA_DIR / "tmp"          # scratch databases of running sweeps
# a refusal's whole traceback (a notebook's cell shows its one line: sqlitelab.notebook.refusal)
REFUSALS_LOG = DATA_DIR / "logs" / "refusals.log"
FIGURES_DIR = Path(os.environ.get("LAB_FIGURES_DIR", PROJ_ROOT / "figures"))
NOTEBOOKS_DIR = Path(os.environ.get("LAB_NOTEBOOKS_DIR", PROJ_ROOT / "notebooks"))  # what batch runs (a test: its own)
KERNEL_NAME = "sqlitelab"           # the Jupyter kernel `make setup` registers
KERNEL_TRANSPORT = "ipc"            # kernels (papermill's, JupyterLab's) talk over IPC sockets, not TCP
LOCK_FILE = PROJ_ROOT / "requirements.lock"  # every Python dependency, exact (`make lock`)
LOADGEN_DIR = Path(__file__).resolve().parents[1] / "load" / "loadgen"   # the Go load generator (source)
LOADGEN_BIN = LOADGEN_DIR / "bin" / "loadgen"
# The share of its CPUs every server of a run is held to unless its sweep says otherwise (a
# cgroup's CPU quota: the power check's injected slowdown, `python -m sqlitelab.compare --power`);
# unset: not held. LAB_SERVER_CPU_CAP=0.8 holds each server to 80 % of its CPUs.
def _share(name: str) -> float | None:
    value = os.environ.get(name)
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a share of the server's CPUs, 0 < share <= 1, not {value!r}") from None


SERVER_CPU_CAP = _share("LAB_SERVER_CPU_CAP")  # its range is checked by every sweep (scales.ACCEPTS)
