"""The heavy operations an operator runs against a live SQLite database (notebook 08, issue 16),
each in a process of its own, as an operator's command on the server's machine would be.

    python -m sqlitelab.infra.operations backup DB SCRATCH_DIR           # one JSON line: what it did
    op = operations.start("create-index", db, scratch, cpus="0")   # the same, from Python
    result = op.wait(600)                                           # stopped by PID on any error

Every operation reports `started` and `finished` (epoch seconds), `seconds`, and its own
details. The database is the live file of a running server (WAL mode, the server writing).
A run keeps results, not copies: what backup, vacuum-into and litestream make (a copy, a
replica and its restore) is checked and recorded in the result's `copies` (each one's bytes,
integrity_check, rows, `verified`, `kept`), then removed, unless `keep_copies=True` asks to
keep it; a copy that failed its check is kept. The operation's own .json and .log stay.
`during` runs one at a marked second of a level of load (load.run_level's `during`).
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from sqlitelab.core import config, processes

# Declared once: every operation, what it does (notebook 08 prints this).
OPERATIONS: dict[str, str] = {
    "backup": "SQLite's online backup API (Python's Connection.backup) into a new file, in one step: "
              "one read transaction over the whole copy (stepping a few pages at a time restarts the "
              "copy after every write another connection commits, so under load it may never end)",
    "vacuum-into": "VACUUM INTO a new file, from a connection of its own (a compacted copy, one read "
                   "transaction)",
    "create-index": "CREATE INDEX on the users table's departname (one write transaction: writers wait "
                    "for it, up to their busy timeout)",
    "checkpoint": "PRAGMA wal_checkpoint(TRUNCATE) with a 5-s busy timeout: the WAL copied into the "
                  "database and truncated to 0 bytes (it waits for readers and the writer)",
    "litestream": "Litestream (built from its Go module) replicating the database to a file replica "
                  "for `seconds`, then the replica restored into a new file and checked",
}
# Each operation in plain words, for figures and tables: sqlitelab.core.vocabulary's
# OPERATION_TITLES, so that a figure or a study names an operation without importing this module.
PARAMS: dict[str, dict[str, type]] = {  # each operation's parameters and their types
    "backup": {"keep_copies": bool},
    "vacuum-into": {"keep_copies": bool},
    "create-index": {"table": str, "column": str, "index": str},
    "checkpoint": {"busy_timeout_ms": int},
    "litestream": {"seconds": float, "keep_copies": bool},
}
LITESTREAM_VERSION = "v0.3.13"  # the Makefile builds it: github.com/benbjohnson/litestream/cmd/litestream
LITESTREAM = config.PROJ_ROOT / ".setup" / "bin" / "litestream"
SNAPSHOT_WAIT_S = 30.0  # how much longer than asked a replication waits for Litestream's first snapshot
NAME_OK = set("abcdefghijklmnopqrstuvwxyz_0123456789")


class OperationError(RuntimeError):
    """An operation failed; the message ends with the tail of its output."""


def check(operation: dict) -> dict:
    """A sweep's `operation` argument, checked: {"name": one of OPERATIONS, "at_s": seconds
    after the window opens (>= 0), **that operation's parameters (PARAMS)}."""
    if not isinstance(operation, dict) or "name" not in operation:
        raise ValueError(f"operation must be a dict with a 'name' (one of {', '.join(OPERATIONS)}), "
                         f"not {operation!r}")
    name = operation["name"]
    if name not in OPERATIONS:
        raise ValueError(f"unknown operation {name!r}; known: {', '.join(OPERATIONS)}")
    at = operation.get("at_s", 0.0)
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 <= at < 3600:
        raise ValueError(f"operation at_s must be seconds after the window opens (0 <= at_s < 3600), "
                         f"not {at!r}")
    check_params(name, {k: v for k, v in operation.items() if k not in ("name", "at_s")})
    return {**operation, "at_s": float(at)}


def check_params(name: str, params: dict) -> dict:
    if name not in OPERATIONS:
        raise ValueError(f"unknown operation {name!r}; known: {', '.join(OPERATIONS)}")
    known = PARAMS[name]
    for k, v in params.items():
        if k not in known:
            raise ValueError(f"operation {name!r} has no parameter {k!r}"
                             + (f"; known: {', '.join(known)}" if known else " (it takes none)"))
        kind = known[k]
        if kind is bool and not isinstance(v, bool):
            raise ValueError(f"{name} {k} must be True or False, not {v!r}")
        if kind is str and not (isinstance(v, str) and v and set(v) <= NAME_OK):
            raise ValueError(f"{name} {k} must be a lower-case SQL name, not {v!r}")
        if kind in (int, float) and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 3600_000):
            raise ValueError(f"{name} {k} must be a positive number, not {v!r}")
    return params


# ------------------------------------------------------------------ the operations themselves

def _connect(db: Path, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    con = sqlite3.connect(db, timeout=busy_timeout_ms / 1000, isolation_level=None)
    con.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    return con


def _wal(db: Path) -> int:
    try:
        return os.stat(f"{db}-wal").st_size
    except FileNotFoundError:
        return 0


def backup(db: Path, scratch: Path) -> dict:
    dest = scratch / "backup.db"
    dest.unlink(missing_ok=True)
    src, out = _connect(db), sqlite3.connect(dest)
    try:
        src.backup(out, pages=-1)
    finally:
        out.close()
        src.close()
    return {"copies": {dest.name: _verify(dest)}}


def vacuum_into(db: Path, scratch: Path) -> dict:
    dest = scratch / "vacuum-into.db"
    dest.unlink(missing_ok=True)
    con = _connect(db)
    try:
        con.execute("VACUUM INTO ?", (str(dest),))
    finally:
        con.close()
    return {"copies": {dest.name: _verify(dest)}}


def create_index(db: Path, scratch: Path, table: str = "users", column: str = "departname",
                 index: str | None = None) -> dict:
    index = index or f"{table}_{column}_lab"
    con = _connect(db)
    try:
        rows = con.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0]
        con.execute(f"CREATE INDEX [{index}] ON [{table}] ([{column}])")
    finally:
        con.close()
    return {"index": index, "table": table, "column": column, "rows": rows}


def checkpoint(db: Path, scratch: Path, busy_timeout_ms: int = 5000) -> dict:
    before = _wal(db)
    con = _connect(db, busy_timeout_ms)
    try:
        busy, log, done = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        con.close()
    return {"busy": busy, "log_frames": log, "checkpointed_frames": done, "wal_before": before,
            "wal_after": _wal(db)}


def litestream(db: Path, scratch: Path, seconds: float = 5.0) -> dict:
    """Replicate for `seconds`, and until Litestream's first snapshot is in the replica
    (Litestream's own process, in this one's process group, so that stopping this operation by
    its PID stops it too), then restore the replica and check it: the replica is verified when
    its restore is. `replicated_s`: how long it replicated."""
    if not LITESTREAM.exists():
        raise OperationError(f"litestream is not built ({LITESTREAM}): run make setup")
    replica = scratch / "litestream-replica"
    restored = scratch / "litestream-restored.db"
    shutil.rmtree(replica, ignore_errors=True)
    restored.unlink(missing_ok=True)
    log = scratch / "litestream.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(LITESTREAM), "replicate", str(db), f"file://{replica}"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    started = time.monotonic()
    try:
        time.sleep(seconds)
        # and until its first snapshot is in the replica (a busy machine can take longer than
        # `seconds` to write it; a restore before it finds no backup), at most SNAPSHOT_WAIT_S more
        deadline = time.monotonic() + SNAPSHOT_WAIT_S
        while not any(replica.glob("generations/*/snapshots/*")) and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.1)
        if proc.poll() is not None:
            raise OperationError(f"litestream exited {proc.returncode} while replicating:\n{_tail(log)}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # its clean shutdown: a last sync of the WAL
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    replicated, replicated_at = time.time(), time.monotonic()
    with open(log, "ab") as out:
        r = subprocess.run([str(LITESTREAM), "restore", "-o", str(restored), f"file://{replica}"],
                           stdout=out, stderr=subprocess.STDOUT, timeout=300)
    if r.returncode != 0:
        raise OperationError(f"litestream restore exited {r.returncode}:\n{_tail(log)}")
    restore_s = time.time() - replicated
    checked = _verify(restored, tables=("requests", "metrics", "items", "users"))
    copy = {"path": str(replica), "bytes": _bytes(replica), "restored_into": restored.name,
            "verified": checked["verified"]}
    return {"replicated_s": round(replicated_at - started, 3), "restore_s": restore_s, "litestream": LITESTREAM_VERSION,
            "copies": {replica.name: copy, restored.name: checked},
            "log": [line for line in _tail(log, 40).splitlines() if line.strip()]}


# ------------------------------------------------------------------ the copies they make

def _files(path: Path) -> list[Path]:
    """A copy's files: every file of a directory (a replica), or a database and its -wal,
    -shm and -journal, and those of the .tmp Litestream restores into (it leaves them)."""
    if path.is_dir():
        return [f for f in path.rglob("*") if f.is_file()]
    sides = ("-wal", "-shm", "-journal", ".tmp", ".tmp-wal", ".tmp-shm")
    return [f for f in (path, *(Path(f"{path}{s}") for s in sides)) if f.exists()]


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in _files(path))


def _verify(path: Path, tables: tuple[str, ...] = ()) -> dict:
    """A copy, checked: its bytes, its integrity_check and (`tables`) its rows; `verified` only
    when it is there, not empty, and ok (one that cannot be read is recorded, not raised)."""
    out = {"path": str(path), "bytes": _bytes(path), "integrity": "missing"}
    if path.is_file():
        try:
            out["integrity"] = _integrity(path)
            if tables:
                out["rows"] = _rows(path, tables)
        except sqlite3.Error as e:
            out["integrity"] = f"unreadable: {e}"
    out["verified"] = out["integrity"] == "ok" and out["bytes"] > 0
    return out


def _settle(copies: dict[str, dict], keep: bool) -> dict[str, dict]:
    """Each verified copy removed unless `keep`; one that failed its check is kept for whoever
    reads its record. Each record says whether its copy was `kept`."""
    for copy in copies.values():
        copy["kept"] = keep or not copy["verified"]
        if not copy["kept"]:
            path = Path(copy["path"])
            if path.is_dir():
                shutil.rmtree(path)
            for f in _files(path):
                f.unlink(missing_ok=True)
    return copies


def _integrity(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def _rows(path: Path, tables: tuple[str, ...]) -> dict[str, int]:
    con = sqlite3.connect(path)
    try:
        return {t: con.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0] for t in tables}
    finally:
        con.close()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").rstrip().splitlines()[-lines:])
    except FileNotFoundError:
        return "(no output)"


RUN = {"backup": backup, "vacuum-into": vacuum_into, "create-index": create_index,
       "checkpoint": checkpoint, "litestream": litestream}


def run_here(name: str, db: Path | str, scratch: Path | str, **params) -> dict:
    """Run an operation in this process (the command line's body): its result, timed; the
    copies it made are then kept or removed (`keep_copies`, _settle)."""
    check_params(name, params)
    keep = params.pop("keep_copies", False)
    db, scratch = Path(db), Path(scratch)
    if not db.exists():
        raise FileNotFoundError(f"no database at {db}")
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.time()
    out = RUN[name](db, scratch, **params)
    finished = time.time()
    _settle(out.get("copies", {}), keep)
    return {"operation": name, "started": started, "finished": finished,
            "seconds": finished - started, **out}


# ------------------------------------------------------------------ in a process of its own

_LIVE: dict[int, "Operation"] = {}


class Operation:
    """One operation running in its own process (`start`): `wait()` for its result, `stop()`
    by its PID (also on leaving a `with` block early, and at interpreter exit)."""

    def __init__(self, name: str, db: Path, scratch: Path, cpus: str | None, params: dict):
        self.name, self.scratch = name, scratch
        scratch.mkdir(parents=True, exist_ok=True)
        args = [f"--{k.replace('_', '-')}={v}" for k, v in params.items()]
        cmd, self.pinned = processes.pin_command([sys.executable, "-m", "sqlitelab.infra.operations", name, str(db),
                                        str(scratch), *args], cpus)
        self.out_path, self.log_path = scratch / f"{name}.json", scratch / f"{name}.log"
        with open(self.out_path, "wb") as out, open(self.log_path, "wb") as log:
            self.proc = processes.spawn(cmd, f"operation {name}", stdout=out, stderr=log,
                                        stdin=subprocess.DEVNULL, cwd=str(config.PROJ_ROOT))
        _LIVE[self.proc.pid] = self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 900.0) -> dict:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise OperationError(f"{self.name} did not finish in {timeout:g} s (stopped):\n"
                                 f"{_tail(self.log_path)}") from None
        _LIVE.pop(self.proc.pid, None)
        lines = self.out_path.read_text(errors="replace").strip().splitlines()
        if code != 0 or not lines:
            raise OperationError(f"{self.name} failed (exit {code}):\n{_tail(self.log_path)}")
        return {**json.loads(lines[-1]), "pinned": self.pinned}

    def stop(self) -> None:
        processes.stop(self.proc, grace=10)
        _LIVE.pop(self.proc.pid, None)

    def __enter__(self) -> "Operation":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(name: str, db: Path | str, scratch: Path | str, cpus: str | None = None, **params) -> Operation:
    """Start an operation on `db` in its own process, pinned to `cpus` (the server's: it runs
    on the server's machine), its files in `scratch`."""
    check_params(name, params)
    db = Path(db)
    if not db.exists():
        raise FileNotFoundError(f"no database at {db}")
    return Operation(name, db, Path(scratch), cpus, params)


def _stop_all_live() -> None:
    for op in list(_LIVE.values()):
        op.stop()


atexit.register(_stop_all_live)


def during(operation: dict, db, cpus: str | None, scratch: Path, timeout: float = 900.0):
    """What load.run_level calls once its window is known: wait until `at_s` into the window,
    start the operation (on `cpus`, the server's), wait for it (bounded by `timeout`; stopped by
    PID on an error or interrupt), and return its result with when it started after the window
    opened (`started_s`)."""
    op = check(operation)
    params = {k: v for k, v in op.items() if k not in ("name", "at_s")}

    def run(t0: float, t1: float, control: dict) -> dict | None:
        due = t0 + op["at_s"]
        while (left := due - time.time()) > 0:
            if control.get("stop"):
                return None
            time.sleep(min(left, 0.01))
        with start(op["name"], db, scratch, cpus=cpus, **params) as handle:
            result = handle.wait(timeout)
        return {**result, "started_s": result["started"] - t0}
    return run


def _parse(kind: type, text: str):
    """A parameter's value from the command line (a bool is true or false, as `start` writes it)."""
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    return kind(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.infra.operations",
                                 description="Run one operation against a live SQLite database.")
    ap.add_argument("operation", choices=list(OPERATIONS))
    ap.add_argument("db")
    ap.add_argument("scratch")
    ns, rest = ap.parse_known_args(argv)
    params = {}
    for item in rest:
        if not item.startswith("--") or "=" not in item:
            ap.error(f"parameters are --name=value, not {item!r}")
        k, v = item[2:].split("=", 1)
        k = k.replace("-", "_")
        kind = PARAMS[ns.operation].get(k, str)
        try:
            params[k] = _parse(kind, v)
        except ValueError:
            ap.error(f"--{k} must be a {kind.__name__}, not {v!r}")
    # a SIGTERM (stop by PID) unwinds through the operation's finally blocks
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    try:
        result = run_here(ns.operation, ns.db, ns.scratch, **params)
    except (ValueError, FileNotFoundError, OperationError, sqlite3.Error) as e:
        print(f"operations: {ns.operation}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
