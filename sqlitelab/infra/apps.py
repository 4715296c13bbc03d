"""Your own app (notebook 10): any HTTP server on this machine, measured the way the lab measures
its bundled servers. Either the lab starts it — a command line with `{port}` (and optionally
`{db}`) in it, pinned to the server's CPUs, in a process group of its own that dies with the
lab — or it is already listening on loopback and the lab only sends it load. Its SQLite file,
when given, is read on read-only connections only: the audit's count query, the page cache's
share, the WAL's size, the integrity check.

    app = apps.App.of(command="python -m myapp --port {port} --db {db}", db="app.db",
                      count_query="SELECT count(*) FROM orders")
    with apps.start_app(app, run_dir / "app.db", cpus="0", log_path=run_dir / "app.log") as srv:
        ...                                  # a servers.Server: url, pids, log, stop

Every check here runs before any load and fails with one line that says what to change: a
command without `{port}`, a program that is not there, a URL off loopback, a file that is not a
SQLite database, a count query that is not one read-only SELECT of one number.
"""
from __future__ import annotations

import ipaddress
import os
import shlex
import shutil
import sqlite3
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from sqlitelab.core.processes import free_port
from sqlitelab.infra import servers

PLACEHOLDERS = ("{port}", "{db}")
SQLITE_HEADER = b"SQLite format 3\x00"
LOOPBACK_NAMES = ("localhost",)


class AppError(ValueError):
    """What the lab was given for an app cannot be measured: one line that says why."""


def check_command(command: str, db: Path | None) -> list[str]:
    """The command as an argument list (split like a shell's words, never run by a shell), with
    `{port}` in it and `{db}` only when there is a database to put there; its program found."""
    if not isinstance(command, str) or not command.strip():
        raise AppError("command must be a command line that starts your app, with {port} where "
                       "its port goes, e.g. \"python -m myapp --port {port}\"")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise AppError(f"command {command!r} cannot be split into words: {e}") from None
    if not any("{port}" in a for a in argv):
        raise AppError(f"command {command!r} has no {{port}}: the lab picks a free port and puts "
                       f"it there (your app must listen on 127.0.0.1 at that port)")
    if db is None and any("{db}" in a for a in argv):
        raise AppError(f"command {command!r} has {{db}} but no database was given (db=...)")
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else (
        program if os.access(program, os.X_OK) and Path(program).is_file() else None)
    if found is None:
        raise AppError(f"command {command!r}: {program!r} is not an executable program here")
    return argv


def command_line(argv: list[str], port: int, db: Path | None) -> list[str]:
    """`argv` with its placeholders filled: `{port}` the port, `{db}` the database's path
    (nothing else in braces is touched: a command may hold JSON or a shell's `{}`)."""
    out = []
    for a in argv:
        a = a.replace("{port}", str(port))
        if db is not None:
            a = a.replace("{db}", os.fspath(db))
        out.append(a)
    return out


def check_url(url: str) -> str:
    """`url` as the base URL load goes to: http, on loopback (127.0.0.0/8, ::1 or localhost),
    with a port; anything else is refused — load from the lab stays on this machine."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except (ValueError, TypeError, AttributeError):
        raise AppError(f"url {url!r} is not a URL like http://127.0.0.1:8000") from None
    if parts.scheme != "http":
        raise AppError(f"url {url!r}: the lab sends plain http (http://127.0.0.1:<port>), not "
                       f"{parts.scheme or 'no scheme'}")
    host = parts.hostname or ""
    if host not in LOOPBACK_NAMES:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise AppError(f"url {url!r}: the lab sends load to loopback only (127.0.0.1, ::1 or "
                           f"localhost), never to {host or 'no host'}")
    if port is None:
        raise AppError(f"url {url!r} names no port (http://127.0.0.1:<port>)")
    if parts.query or parts.fragment or parts.path not in ("", "/"):
        raise AppError(f"url {url!r}: give the app's root (http://{parts.netloc}); paths belong to "
                       f"the scenario or locustfile")
    return f"http://{parts.netloc}"


def check_database(path: Path | str) -> Path:
    """`path` as a SQLite database file: it exists, starts with SQLite's header and opens
    read-only (a WAL file beside it is fine)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise AppError(f"db {os.fspath(path)!r} is not a file")
    with open(p, "rb") as f:
        head = f.read(len(SQLITE_HEADER))
    if head != SQLITE_HEADER:
        raise AppError(f"db {os.fspath(path)!r} is not a SQLite database (no SQLite header"
                       f"{'; the file is empty' if not head else ''})")
    try:
        with read_only(p) as con:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise AppError(f"db {os.fspath(path)!r} does not open as a SQLite database: {e}") from None
    return p.resolve()


class read_only:
    """A read-only connection to a database file (`mode=ro`: it never writes, and never
    creates a file that is not there), closed at the end of the `with` block."""

    def __init__(self, path: Path | str):
        uri = "file:" + urllib.parse.quote(os.fspath(Path(path).resolve())) + "?mode=ro"
        self.con = sqlite3.connect(uri, uri=True, timeout=5.0)

    def __enter__(self) -> sqlite3.Connection:
        return self.con

    def __exit__(self, *exc) -> None:
        self.con.close()


# What a count query may do: read (SQLite's authorizer actions; a CTE is SQLITE_RECURSIVE).
_READS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
          getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _only_reads(action, *args) -> int:
    return sqlite3.SQLITE_OK if action in _READS else sqlite3.SQLITE_DENY


def count(path: Path | str, query: str) -> int:
    """The number `query` (checked by check_count_query) returns on `path`, read-only."""
    with read_only(path) as con:
        con.set_authorizer(_only_reads)
        row = con.execute(query).fetchone()
    return row[0]


def check_query_text(query) -> None:
    """A count query's text, before any database can run it: a non-empty string."""
    if not isinstance(query, str) or not query.strip():
        raise AppError("count_query must be a SELECT that returns one number, e.g. "
                       "\"SELECT count(*) FROM orders\"")


def check_count_query(path: Path | str, query: str) -> int:
    """`query` as the audit's count: one SELECT that only reads and returns one integer (each
    acknowledged write grows it by one). Run once here, on a read-only connection with an
    authorizer that denies everything but reading; returns the count it gives now."""
    check_query_text(query)
    try:
        with read_only(path) as con:
            con.set_authorizer(_only_reads)
            cur = con.execute(query)
            rows = cur.fetchall()
            width = len(cur.description or ())
    except sqlite3.ProgrammingError as e:  # "You can only execute one statement at a time."
        raise AppError(f"count_query {query!r} must be one statement: {e}") from None
    except sqlite3.DatabaseError as e:  # denied, a syntax error, an unknown table
        denied = "not authorized" in str(e)
        raise AppError(f"count_query {query!r} " + (
            "must only read (a SELECT): it would write or change the database" if denied
            else f"fails on {os.fspath(path)}: {e}")) from None
    if len(rows) != 1 or width != 1 or type(rows[0][0]) is not int:
        got = rows[0] if len(rows) == 1 else f"{len(rows)} rows"
        raise AppError(f"count_query {query!r} must return one row of one integer, not {got!r}")
    return rows[0][0]


@dataclass(frozen=True)
class App:
    """An app the lab measures: started by `command` (an argument list from check_command) or
    reached at `url`, its SQLite file `db` (or None), its audit's `count_query`, `env` added to
    the lab's environment for its command, and `ready_path`, where any HTTP answer means it
    has started."""
    name: str
    command: tuple[str, ...] | None = None
    url: str | None = None
    db: Path | None = None
    count_query: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready_path: str = "/"
    # `db` is missing or empty until the app started by `command` creates it: its file and the
    # count query are checked once the app answers (check_started), not before
    creates_db: bool = False

    @classmethod
    def of(cls, *, name: str = "your app", command: str | None = None, url: str | None = None,
           db: Path | str | None = None, count_query: str | None = None,
           env: dict | None = None, ready_path: str = "/") -> "App":
        """An App from a notebook's parameters, every one checked (AppError, one line). A `db`
        that is missing or empty is one the app creates: allowed for an app the lab starts by its
        `command` (its file and count query are then checked once it answers, check_started);
        an app reached by its `url` is running, and its file must be there."""
        if (command is None) == (url is None):
            raise AppError("give the app's command (the lab starts it) or its url (it is already "
                           "listening on loopback), not both and not neither")
        creates = command is not None and db is not None and not _has_content(db)
        path = (Path(db).expanduser().resolve() if creates else
                check_database(db) if db is not None else None)
        argv = tuple(check_command(command, path)) if command is not None else None
        base = check_url(url) if url is not None else None
        if count_query is not None:
            if path is None:
                raise AppError("count_query is run on the app's database: give db= too")
            if command is None:
                check_count_query(path, count_query)
            else:  # run on the app's file once it answers (check_started)
                check_query_text(count_query)
        env = dict(env or {})
        bad = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise AppError(f"env must map names to strings; not: {bad}")
        if not isinstance(ready_path, str) or not ready_path.startswith("/"):
            raise AppError(f"ready_path {ready_path!r} must be a path starting with /")
        if not isinstance(name, str) or not name.strip():
            raise AppError("name must be a few words that name the app in figures")
        return cls(name=name.strip(), command=argv, url=base, db=path, count_query=count_query,
                   env=env, ready_path=ready_path, creates_db=creates)


def _has_content(db: Path | str) -> bool:
    """Whether `db` names something other than a missing or empty file (that, check_database
    judges: a directory, a text file, a SQLite file)."""
    p = Path(db).expanduser()
    return p.exists() and not (p.is_file() and p.stat().st_size == 0)


def check_started(app: App, db: Path | None) -> int | None:
    """What an app started by its command was given, checked once it answers its ready_path and
    before any load: its database file `db` (the run's copy, which the app may just have created:
    a SQLite file) and its count query on it (one read-only SELECT of one number). Returns the
    count it gives then (None: no count query). AppError, one line, naming the moment."""
    if db is None:
        return None
    when = f"once {app.name} answered {app.ready_path}"
    try:
        check_database(db)
        return check_count_query(db, app.count_query) if app.count_query is not None else None
    except AppError as e:
        raise AppError(f"{when}: {e}" + (" (your app was to create it: does it, at start?)"
                                        if app.creates_db else "")) from None


def start_app(app: App, db: Path | None, *, cpus: str | None, log_path: Path,
              timeout: float = 60.0) -> servers.Server:
    """Start `app.command` on a free loopback port (`db`: the file `{db}` names, a copy of the
    app's own that the run may write), pinned to `cpus`, and wait until it answers any HTTP
    request on `app.ready_path`; a command that exits first, or never answers, is a
    ServerStartError with its log's tail. A `with` block, an exception or the interpreter's
    exit stops its process group."""
    if app.command is None:
        raise AppError(f"{app.name} is reached at {app.url}: the lab starts only an app given by "
                       f"its command")
    port = free_port()
    argv = command_line(list(app.command), port, db)
    srv = servers.Server(stack=app.name, db=db, port=port, env={**app.env}, log_path=log_path,
                         cpus=cpus, command=argv, ready_path=app.ready_path)
    return srv.start(timeout=timeout)


def listener(port: int) -> int | None:
    """The PID of the process listening on loopback `port` (None: nothing listens there)."""
    for c in psutil.net_connections(kind="tcp"):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            return c.pid
    return None


def reach(app: App) -> servers.Server:
    """An app already listening at `app.url`: the process that listens there (its CPU and memory
    are sampled as a started server's), never stopped by the lab. Nothing listening there is an
    AppError."""
    parts = urllib.parse.urlsplit(app.url)
    pid = listener(parts.port)
    if pid is None:
        raise AppError(f"nothing listens at {app.url}: start your app first, or give its command")
    return servers.Server(stack=app.name, db=app.db, port=parts.port, env={}, log_path=Path(os.devnull),
                          host=parts.hostname, attached=pid, ready_path=app.ready_path)
