"""A real PostgreSQL for a run (issue 15): `initdb` into the run's scratch folder, started as an
unprivileged user (Postgres refuses root), listening on its own loopback port and a unix socket,
pinned to the server's CPUs, stopped by PID.

    with postgres.Postgres(scratch, durability="full", cpus="0") as pg:
        pg.prepare(users=1000, items=100)
        start_server("go-nethttp", pg.dsn, database="postgres", ...)
        pg.counts()          # the audit's counters, as databases.table_counts reads a file

Its configuration is declared here once: SETTINGS (fixed), `memory_settings` (sized to the machine)
and DURABILITY (matched to SQLite's `synchronous`); `settings()` is what a run records.
"""
from __future__ import annotations

import pandas as pd
import atexit
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlitelab.core import config, processes
from sqlitelab.infra import databases
from sqlitelab.core.processes import free_port, log_tail, pin_command

USER = "lab"      # the database role the servers connect as (trust authentication, local only)
DBNAME = "lab"
SCHEMA_SQL = config.SERVERS_DIR / "schema.postgres.sql"

# Every setting given to the postmaster on its command line (-c name=value), beside
# memory_settings() and DURABILITY. Nothing else changes from Postgres' defaults.
SETTINGS = {
    "listen_addresses": "127.0.0.1",   # loopback only; servers on this machine use the socket
    "max_connections": "200",          # every server's pools (4 stacks x processes x readers)
    "fsync": "on",
    "full_page_writes": "on",
    "wal_level": "minimal",            # no replicas: as SQLite's WAL, which serves one machine
    "max_wal_senders": "0",
    "max_wal_size": "1GB",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
    "log_connections": "off",
    "log_destination": "stderr",
    "logging_collector": "off",
}

# SQLite's `synchronous` beside Postgres' commit durability. FULL/EXTRA: every commit is on disk
# when acknowledged (synchronous_commit=on). NORMAL in WAL mode: a commit may be lost on power
# failure but the database stays consistent (synchronous_commit=off: same promise). OFF: no syncs
# at all (fsync=off: the same risk to the whole file as SQLite's OFF).
DURABILITY = {
    "full": {"synchronous_commit": "on"},
    "normal": {"synchronous_commit": "off"},
    "off": {"synchronous_commit": "off", "fsync": "off", "full_page_writes": "off"},
}
SYNCHRONOUS = {"0": "off", "off": "off", "1": "normal", "normal": "normal",
               "2": "full", "full": "full", "3": "full", "extra": "full"}


def durability_for(pragmas: str | None) -> str:
    """The DURABILITY key matching a LAB_PRAGMAS string's `synchronous` (SQLite's default, FULL,
    when it says nothing)."""
    for part in (pragmas or "").split(","):
        name, _, value = part.partition("=")
        if name.strip().lower() == "synchronous":
            try:
                return SYNCHRONOUS[value.strip().lower()]
            except KeyError:
                raise ValueError(f"synchronous={value!r} has no Postgres equivalent") from None
    return "full"


def memory_settings(ram_bytes: int | None = None) -> dict[str, str]:
    """Memory sized to the machine, by the usual rule of thumb: shared_buffers a quarter of RAM
    (at most 8 GB), effective_cache_size half of it; work_mem left at its default (4 MB)."""
    if ram_bytes is None:
        ram_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    mb = ram_bytes // (1024 * 1024)
    return {"shared_buffers": f"{min(mb // 4, 8192)}MB",
            "effective_cache_size": f"{mb // 2}MB"}


def settings(durability: str = "full", ram_bytes: int | None = None) -> dict[str, str]:
    """Everything the postmaster is started with: SETTINGS, memory, then durability."""
    if durability not in DURABILITY:
        raise ValueError(f"durability must be one of {', '.join(DURABILITY)}, not {durability!r}")
    return {**SETTINGS, **memory_settings(ram_bytes), **DURABILITY[durability]}


def settings_table(ram_bytes: int | None = None):
    """Every setting a run's Postgres gets and where it comes from, for a notebook to show."""
    rows = [{"setting": k, "value": v, "from": "fixed (SETTINGS)"} for k, v in SETTINGS.items()]
    rows += [{"setting": k, "value": v, "from": "memory, sized to this machine"}
             for k, v in memory_settings(ram_bytes).items()]
    for key, values in DURABILITY.items():
        rows += [{"setting": k, "value": v, "from": f"durability beside SQLite synchronous={key}"}
                 for k, v in values.items()]
    return pd.DataFrame(rows)


def bin_dir() -> Path:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/<v>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if found:
        return found[-1].parent
    pg = shutil.which("postgres")
    if pg:
        return Path(pg).parent
    raise PostgresError("PostgreSQL is not installed (Debian: apt-get install postgresql; `make setup` does)")


class PostgresError(RuntimeError):
    pass


def _as_user() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) that runs a program as the postgres user when we are root
    (Postgres refuses root), or as ourselves otherwise."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresError("running as root needs the `postgres` user (Debian's postgresql package makes it)") from None
    return (["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"],
            pw.pw_uid, pw.pw_gid)


def _reachable(path: Path, uid: int | None, gid: int | None) -> bool:
    """Can the user `uid` (None: ourselves) enter every folder down to `path`?"""
    if uid is None:
        return True
    for p in [path.resolve(), *path.resolve().parents]:
        st = p.stat()
        bits = 0o001 if st.st_uid != uid and st.st_gid != gid else (0o100 if st.st_uid == uid else 0o010)
        if not st.st_mode & bits:
            return False
    return True


# One data folder per interpreter and PostgreSQL, made once (initdb, then the empty database
# `lab` created in it) and copied into each new cluster's folder: the files a cluster would
# have after initdb and CREATE DATABASE (but its random system identifier, which nothing here
# reads), in a fraction of their time (about 1.5 s against a copy's 0.4 s on the reference
# machine), which a sweep pays once per server and profile.
_PRISTINE: dict[Path, Path] = {}


def _initdb(data_dir: Path, prefix: list[str], pg_bin: Path) -> None:
    init = subprocess.run([*prefix, str(pg_bin / "initdb"), "-D", str(data_dir), "-U", USER,
                           "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                          capture_output=True, text=True, timeout=120)
    if init.returncode != 0:
        raise PostgresError(f"initdb failed ({init.returncode}):\n{(init.stdout + init.stderr)[-2000:]}")


def _once_accepting(proc: subprocess.Popen, connect, log_path: Path, timeout: float):
    """`connect()`'s result once the postmaster `proc` accepts connections (polled every 20 ms);
    a PostgresError with its log's tail if it exits first or `timeout` s pass."""
    import psycopg  # lazy: only where a Postgres runs (psycopg loads libpq)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise PostgresError(f"postgres exited with status {proc.returncode} "
                                f"(log {log_path}):\n{log_tail(log_path)}")
        try:
            return connect()
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise PostgresError(f"postgres did not accept connections within {timeout:.0f} s "
                                    f"(log {log_path}):\n{log_tail(log_path)}") from None
        time.sleep(0.02)


def _with_lab_database(data_dir: Path, socket_dir: Path, prefix: list[str], pg_bin: Path) -> None:
    """Start a postmaster on the fresh cluster in `data_dir` (no TCP, its socket in `socket_dir`),
    create the empty database `lab`, and stop it cleanly (a fast shutdown: a checkpoint)."""
    port = free_port()
    log_path = socket_dir / "boot.log"
    with open(log_path, "ab") as log:
        proc = processes.spawn([*prefix, str(pg_bin / "postgres"), "-D", str(data_dir), "-k", str(socket_dir),
                                "-p", str(port), "-c", "listen_addresses="],
                               "Postgres making the pristine cluster", stop_signal=signal.SIGINT,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    def create() -> None:
        import psycopg  # lazy: only where a Postgres runs (psycopg loads libpq)
        with psycopg.connect(host=str(socket_dir), port=port, user=USER, dbname="postgres",
                             autocommit=True, connect_timeout=5) as con:
            con.execute(f"CREATE DATABASE {DBNAME}")
    try:
        _once_accepting(proc, create, log_path, 60.0)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(60)
        if proc.returncode != 0:
            raise PostgresError(f"postgres stopped with status {proc.returncode} making the pristine "
                                f"cluster (log {log_path}):\n{log_tail(log_path)}")
    finally:
        processes.stop(proc, 5)


def _fresh_data_dir(data_dir: Path, prefix: list[str], pg_bin: Path) -> None:
    """Fill the empty `data_dir` (owned by the user Postgres runs as) with a new cluster holding
    the empty database `lab`: a copy, by that user, of this interpreter's pristine cluster, made
    on first use."""
    pristine = _PRISTINE.get(pg_bin)
    if pristine is None or not (pristine / "PG_VERSION").exists():
        holder = Path(tempfile.mkdtemp(prefix="labpg-initdb-"))
        processes.own_path(holder)  # removed if we die; at exit otherwise
        atexit.register(lambda: (shutil.rmtree(holder, ignore_errors=True), processes.release_path(holder)))
        pristine = holder / "data"
        pristine.mkdir()
        if prefix:
            st = data_dir.stat()
            for p in (holder, pristine):
                os.chown(p, st.st_uid, st.st_gid)
        _initdb(pristine, prefix, pg_bin)
        _with_lab_database(pristine, holder, prefix, pg_bin)
        _PRISTINE[pg_bin] = pristine
    copy = subprocess.run([*prefix, "cp", "-a", f"{pristine}/.", str(data_dir)],
                          capture_output=True, text=True, timeout=120)
    if copy.returncode != 0:
        raise PostgresError(f"copying the initdb template failed ({copy.returncode}): {copy.stderr[-2000:]}")
    os.chmod(data_dir, 0o700)


_LIVE: dict[int, "Postgres"] = {}
atexit.register(lambda: [pg.stop() for pg in list(_LIVE.values())])


@dataclass
class Postgres:
    """One cluster: data folder under `scratch`, a socket folder of its own (short: a unix socket
    path has at most 107 bytes), a free loopback port."""
    scratch: Path
    durability: str = "full"
    cpus: str | None = None
    port: int | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)
    socket_dir: Path | None = None
    version: str | None = None
    pinned: str | None = None
    link: object | None = field(default=None, repr=False)  # a link.DelayLink the servers go through

    data_dir: Path | None = None

    @property
    def log_path(self) -> Path:
        return Path(self.scratch) / "postgres.log"

    @property
    def dsn(self) -> str:
        """What the servers get as LAB_DATABASE_URL (libpq key=value, over the unix socket)."""
        return f"host={self.socket_dir} port={self.port} user={USER} dbname={DBNAME}"

    @property
    def tcp_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={DBNAME}"

    @property
    def server_dsn(self) -> str:
        """What a server connects to: the unix socket, or, with a `link` (a database on a host
        of its own, sqlitelab.infra.link), the link's loopback port in front of the TCP port."""
        if self.link is None:
            return self.dsn
        host, _, port = self.link.url.removeprefix("http://").rpartition(":")
        return f"host={host} port={port} user={USER} dbname={DBNAME}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def settings(self) -> dict[str, str]:
        return settings(self.durability)

    def start(self, timeout: float = 60.0) -> "Postgres":
        prefix, uid, gid = _as_user()
        pg_bin = bin_dir()
        scratch = Path(self.scratch)
        scratch.mkdir(parents=True, exist_ok=True)
        self.socket_dir = Path(tempfile.mkdtemp(prefix="labpg-"))
        processes.own_path(self.socket_dir)  # removed if we die (the data folder may be in it)
        # The data folder in the run's scratch when the postgres user can reach it there;
        # otherwise (pytest's private tmp folders) beside the socket, removed at stop.
        self.data_dir = scratch / "pgdata" if _reachable(scratch, uid, gid) else self.socket_dir / "data"
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir()
        self.log_path.write_bytes(b"")
        if uid is not None:
            for p in (self.data_dir, self.socket_dir):
                os.chown(p, uid, gid)
        try:
            _fresh_data_dir(self.data_dir, prefix, pg_bin)
        except PostgresError:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            processes.release_path(self.socket_dir)
            raise
        self.port = self.port or free_port()
        args = [*prefix, str(pg_bin / "postgres"), "-D", str(self.data_dir), "-k", str(self.socket_dir),
                "-p", str(self.port)]
        for name, value in self.settings().items():
            args += ["-c", f"{name}={value}"]
        cmd, self.pinned = pin_command(args, self.cpus)
        with open(self.log_path, "ab") as log:
            # its fast shutdown (SIGINT) if we die; its backends follow the postmaster
            self.proc = processes.spawn(cmd, f"Postgres cluster (port {self.port})",
                                        stop_signal=signal.SIGINT, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        _LIVE[self.proc.pid] = self
        def version() -> str:  # the pristine copy holds the database `lab`
            with self.connect() as con:
                return con.execute("SHOW server_version").fetchone()[0]
        try:
            self.version = _once_accepting(self.proc, version, self.log_path, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def connect(self, dbname: str = DBNAME):
        import psycopg  # lazy: only where a Postgres runs (psycopg loads libpq)
        return psycopg.connect(host=str(self.socket_dir), port=self.port, user=USER,
                               dbname=dbname, autocommit=True, connect_timeout=5)

    def prepare(self, *, users: int = 0, items: int = 0, payload_bytes: int = 2048,
                user_bytes: int = 0) -> "Postgres":
        """The database `lab` made afresh from schema.postgres.sql and seeded as
        databases.prepare_database seeds a file (same rows, same values), by COPY."""
        if not isinstance(user_bytes, int) or not 0 <= user_bytes <= 1_000_000:
            raise ValueError(f"user_bytes must be an integer in 0..1,000,000, not {user_bytes!r}")
        with self.connect() as con:  # made afresh unless it is still as the cluster began: empty
            used = con.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").fetchone()[0]
        if used:
            with self.connect("postgres") as con:
                con.execute(f"DROP DATABASE IF EXISTS {DBNAME} WITH (FORCE)")
                con.execute(f"CREATE DATABASE {DBNAME}")
        with self.connect() as con:
            con.execute(SCHEMA_SQL.read_text())
            with con.transaction():
                if users:
                    deps = databases.USERS_DEPARTMENTS
                    with con.cursor().copy("COPY users (uid, username, departname, created, updates, bio) "
                                           "FROM STDIN") as copy:
                        bio = "b" * user_bytes
                        for i in range(1, users + 1):
                            copy.write_row((i, f"user{i}", deps[i % len(deps)], "2026-01-01", 0, bio))
                if items:
                    with con.cursor().copy("COPY items (id, payload, created_at) FROM STDIN") as copy:
                        payload = "x" * payload_bytes
                        for i in range(1, items + 1):
                            copy.write_row((i, payload, "2026-01-01T00:00:00.000000Z"))
                    con.execute("SELECT setval(pg_get_serial_sequence('items', 'id'), %s)", (items,))
            con.execute("VACUUM ANALYZE")
        return self

    def count_rows(self, counter: str) -> int:
        """One counter of databases.COUNTERS (the same SQL), read from the database."""
        with self.connect() as con:
            return int(con.execute(databases.COUNTERS[counter]).fetchone()[0])

    def counts(self) -> dict[str, int]:
        return {name: self.count_rows(name) for name in databases.COUNTERS}

    def integrity_check(self) -> str:
        """amcheck's bt_index_check on every index of the lab's tables: "ok", or what it found
        (Postgres' nearest to SQLite's `PRAGMA integrity_check`)."""
        with self.connect() as con:
            con.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            problems = []
            for (index,) in con.execute(
                    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
                    "WHERE n.nspname = 'public' ORDER BY 1").fetchall():
                try:
                    con.execute("SELECT bt_index_check(%s::regclass, true)", (index,))
                except Exception as e:  # noqa: BLE001 (a corrupt index is the answer, not an error)
                    problems.append(f"{index}: {e}".strip())
            return ";".join(problems) or "ok"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 30.0) -> int | None:
        """Fast shutdown (SIGINT) by PID; SIGKILL to its group after `grace` s. Removes the socket
        folder (the data folder stays with the run's scratch)."""
        proc = self.proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGINT)
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)
                except ProcessLookupError:
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            return proc.returncode
        finally:
            _LIVE.pop(proc.pid, None)
            processes.forget(proc.pid)
            if self.socket_dir is not None:
                shutil.rmtree(self.socket_dir, ignore_errors=True)
                processes.release_path(self.socket_dir)

    def __enter__(self) -> "Postgres":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def our_processes() -> list[int]:
    """PIDs of clusters this interpreter started that are still alive."""
    return [pid for pid, pg in _LIVE.items() if pg.alive()]
