"""The LAB_* environment (servers/README.md), parsed and checked without Django: server.py checks
it before gunicorn starts (one `lab: ` line and a non-zero exit on an error), and
labsite/settings.py turns the same configuration into Django's settings in each worker."""
from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from pathlib import Path

SERVER = "python-django"
HERE = Path(__file__).resolve().parent.parent  # servers/python-django
TABLES = ("requests", "metrics", "items", "users")  # servers/schema.sql, schema.postgres.sql
# SQLite's own knobs: with LAB_DATABASE=postgres they must be unset or empty (null in /health).
SQLITE_ONLY = ("LAB_PRAGMAS", "LAB_TXN_MODE", "LAB_BUSY", "LAB_CACHE", "LAB_SQL_LOG")
DEFAULT_THREADS = 4  # gunicorn gthread threads per worker when LAB_THREADS is not set

# The LAB_PRAGMAS allow-list of servers/shared.toml (tests/test_contract.py checks they agree).
PRAGMA_VALUES = {
    "journal_mode": ("delete", "truncate", "persist", "memory", "wal", "off"),
    "synchronous": ("off", "normal", "full", "extra", "0", "1", "2", "3"),
    "temp_store": ("default", "file", "memory", "0", "1", "2"),
    "foreign_keys": ("on", "off", "true", "false", "0", "1"),
    "cache_size": int, "mmap_size": int, "journal_size_limit": int, "wal_autocheckpoint": int,
}


class ConfigError(Exception):
    """A start the server refuses: its message is the `lab: ` line."""


def _choice(env, name, default, allowed):
    """An enumerated LAB_* value (empty: the default); anything else is a start-up error."""
    value = env.get(name) or default
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {'|'.join(allowed)}")
    return value


def _int_env(env, name, default, minimum=1, maximum=None):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum or (maximum and int(raw) > maximum):
        bound = f"{minimum}..{maximum}" if maximum else f">= {minimum}"
        raise ConfigError(f"{name}={raw!r} is not an integer {bound}")
    return int(raw)


def one_line(e: BaseException) -> str:
    """An error's message on one line (libpq's run over several)."""
    return " ".join(str(e).split()) or type(e).__name__


def sqlite_uri(path: str, **params: str) -> str:
    """A `file:` URI (Django opens SQLite with uri=True): the path percent-escaped (a '?', '#'
    or '%' in it would otherwise be read as URI syntax), then the query parameters."""
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{urllib.parse.urlencode(params)}"


def parse_config(env=os.environ) -> dict:
    """Every LAB_* knob, LAB_DATABASE first, and the impossible combinations."""
    cfg: dict = {}
    cfg["host"] = env.get("LAB_HOST") or "127.0.0.1"
    if not env.get("LAB_PORT"):
        raise ConfigError("LAB_PORT is required")
    cfg["port"] = _int_env(env, "LAB_PORT", None, 1, 65535)
    cfg["database"] = _choice(env, "LAB_DATABASE", "sqlite", ("sqlite", "postgres"))
    if cfg["database"] == "postgres":
        _parse_postgres(env, cfg)
    else:
        if env.get("LAB_DATABASE_URL"):
            raise ConfigError("LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite "
                              "(or set LAB_DATABASE=postgres)")
        _parse_sqlite(env, cfg)

    cfg["write_path"] = path = _choice(env, "LAB_WRITE_PATH", "pool", ("pool", "writer", "batch"))
    cfg["processes"] = _int_env(env, "LAB_PROCESSES", 1, 1, 256)
    cfg["threads"] = _int_env(env, "LAB_THREADS", DEFAULT_THREADS, 1, 1024)
    cfg["readers"] = _int_env(env, "LAB_READERS", cfg["threads"], 1, 1024)
    if path != "pool" and cfg["processes"] > 1:
        raise ConfigError(f"LAB_WRITE_PATH={path} needs LAB_PROCESSES=1 "
                          "(one writer thread serves one process)")
    if cfg["database"] == "sqlite" and cfg["readers"] != cfg["threads"]:
        # Django keeps one connection per thread (and no pool for SQLite): a gunicorn worker's
        # LAB_THREADS threads are its LAB_THREADS connections, nothing else can be honoured.
        raise ConfigError(f"LAB_READERS={cfg['readers']} needs LAB_READERS=LAB_THREADS "
                          f"(LAB_THREADS={cfg['threads']}) on SQLite: Django keeps one connection per "
                          "gunicorn thread; set LAB_THREADS for that many connections")

    metrics_txn = _choice(env, "LAB_METRICS_TXN", "request", ("request", "record"))
    if metrics_txn == "record" and path != "pool":
        raise ConfigError("LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool "
                          f"(got {path}: each record commits on the request's pooled connection)")
    cfg["metrics_txn"] = metrics_txn
    if cfg["database"] == "sqlite":
        cfg["cache"] = _choice(env, "LAB_CACHE", "private", ("private", "shared"))
        cfg["sql_log"] = _choice(env, "LAB_SQL_LOG", "off", ("off", "on"))
    cfg["templates"] = Path(env.get("LAB_TEMPLATES") or HERE.parent / "templates")
    return cfg


def _parse_postgres(env, cfg: dict) -> None:
    """LAB_DATABASE=postgres: LAB_DATABASE_URL (a libpq key=value string, checked for syntax
    here, connected to by check_postgres); SQLite's knobs refused, reported as null."""
    for name in SQLITE_ONLY:
        if env.get(name):
            raise ConfigError(f"{name} is SQLite's; unset it with LAB_DATABASE=postgres")
    url = env.get("LAB_DATABASE_URL")
    if not url:
        raise ConfigError("LAB_DATABASE_URL is required with LAB_DATABASE=postgres (a libpq "
                          "key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')")
    try:
        import psycopg.conninfo
    except ImportError as e:
        raise ConfigError(f"LAB_DATABASE=postgres needs psycopg and psycopg-pool "
                          f"(servers/python-django/requirements.lock): {e}")
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: {one_line(e)}")
    # Defaults only where the URL says nothing: a host that never answers fails in 10 s, not
    # never, and pg_stat_activity names the server.
    for key, value in {"connect_timeout": "10", "application_name": SERVER}.items():
        params.setdefault(key, value)
    cfg["database_url"] = psycopg.conninfo.make_conninfo("", **params)
    cfg["postgres_params"] = params
    cfg["db"] = None
    cfg.update(pragmas=None, txn_mode=None, busy=None, busy_kind=None, busy_arg=None,
               cache=None, sql_log=None)


def _parse_sqlite(env, cfg: dict) -> None:
    db = env.get("LAB_DB")
    if not db:
        raise ConfigError("LAB_DB is required (a database made from servers/schema.sql)")
    if not Path(db).is_file():
        raise ConfigError(f"LAB_DB={db!r} does not exist (make it from servers/schema.sql)")
    cfg["db"] = db

    pragmas = []
    for part in filter(None, (p.strip() for p in (env.get("LAB_PRAGMAS") or "").split(","))):
        name, sep, value = part.partition("=")
        name, value = name.strip().lower(), value.strip().lower()
        if name not in PRAGMA_VALUES:
            raise ConfigError(f"LAB_PRAGMAS: pragma {name!r} is not allowed "
                              f"(allowed: {', '.join(sorted(PRAGMA_VALUES))})")
        allowed = PRAGMA_VALUES[name]
        if not sep or (allowed is int and not re.fullmatch(r"-?[0-9]+", value)) or \
                (allowed is not int and value not in allowed):
            want = "an integer" if allowed is int else "one of " + "|".join(allowed)
            raise ConfigError(f"LAB_PRAGMAS: {name}={value!r} is not {want}")
        pragmas.append((name, value))
    cfg["pragmas"] = pragmas

    cfg["txn_mode"] = _choice(env, "LAB_TXN_MODE", "deferred", ("deferred", "immediate"))

    busy = env.get("LAB_BUSY") or "busy_timeout:5000"
    m = re.fullmatch(r"(busy_timeout|sleep_poll|retries):([0-9]{1,9})|none", busy)
    if not m:
        raise ConfigError(f"LAB_BUSY={busy!r} is not busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none")
    cfg["busy"] = busy
    cfg["busy_kind"], cfg["busy_arg"] = (m.group(1), int(m.group(2))) if m.group(1) else ("none", 0)


# ----------------------------------------------------------------------------- start-up checks

def check_sqlite(cfg: dict) -> None:
    """The file opens read-write (never created; a hot journal a crash left is rolled back here,
    as at any open), has the four tables, takes every pragma, and the SQL log opens."""
    db = cfg["db"]
    try:
        con = sqlite3.connect(sqlite_uri(db, mode="rw"), uri=True)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            missing = set(TABLES) - tables
            if missing:
                raise ConfigError(f"LAB_DB={db!r} lacks tables {sorted(missing)} of servers/schema.sql")
            for name, value in cfg["pragmas"]:  # a value SQLite rejects fails here, not under load
                try:
                    con.execute(f"PRAGMA {name} = {value}")
                except sqlite3.Error as e:
                    raise ConfigError(f"LAB_PRAGMAS: {name}={value}: {e}")
        finally:
            con.close()
    except sqlite3.Error as e:
        raise ConfigError(f"LAB_DB={db!r} is not a readable SQLite database: {e}")
    if cfg["sql_log"] == "on":
        path = f"{db}.sql.log"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError as e:
            raise ConfigError(f"LAB_SQL_LOG=on: cannot open {path!r} for append: {e.strerror}")


def check_postgres(cfg: dict) -> None:
    """LAB_DATABASE=postgres: the database answers and has the four tables (each worker then
    opens its own pool)."""
    import psycopg
    try:
        con = psycopg.connect(cfg["database_url"], autocommit=True)
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: cannot connect: {one_line(e)}")
    try:
        found = {r[0] for r in con.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL", (list(TABLES),))}
    except psycopg.Error as e:
        raise ConfigError(f"LAB_DATABASE_URL: cannot read the schema: {one_line(e)}")
    finally:
        con.close()
    missing = set(TABLES) - found
    if missing:
        raise ConfigError(f"LAB_DATABASE_URL: the database lacks tables {sorted(missing)} "
                          "of servers/schema.postgres.sql")


def checked_config(env=os.environ) -> dict:
    """The configuration with everything a start can refuse checked: the knobs, the templates
    and the database. ConfigError otherwise."""
    cfg = parse_config(env)
    for name in ("request", "user", "user_page"):
        if not (cfg["templates"] / f"{name}.html").is_file():
            raise ConfigError(f"LAB_TEMPLATES={str(cfg['templates'])!r} lacks {name}.html")
    if cfg["database"] == "postgres":
        check_postgres(cfg)
    else:
        check_sqlite(cfg)
    return cfg


# ----------------------------------------------------------------------------- Django's DATABASES

def databases(cfg: dict) -> dict:
    """settings.DATABASES for this configuration: `default` serves the request threads; with
    LAB_WRITE_PATH=writer|batch, `writer` is the writer thread's own connection."""
    if cfg["database"] == "postgres":
        params = dict(cfg["postgres_params"])
        name = params.pop("dbname", None) or os.environ.get("PGDATABASE") or \
            params.get("user") or os.environ.get("PGUSER") or _login()
        base = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": params.pop("user", ""),
            "PASSWORD": params.pop("password", ""),
            "HOST": params.pop("host", ""),
            "PORT": params.pop("port", ""),
        }
        default = {**base, "CONN_MAX_AGE": 0,  # Django's pool wants 0: a request's connection goes back
                   "OPTIONS": {**params, "pool": {
                       "min_size": cfg["readers"], "max_size": cfg["readers"], "timeout": 30.0,
                       "name": f"{SERVER}-{os.getpid()}"}}}
        out = {"default": default}
        if cfg["write_path"] != "pool":
            out["writer"] = {**base, "CONN_MAX_AGE": None, "OPTIONS": dict(params)}
        return out
    uri_params = {"mode": "rw", **({"cache": "shared"} if cfg["cache"] == "shared" else {})}
    busy_ms = cfg["busy_arg"] if cfg["busy_kind"] == "busy_timeout" else 0
    default = {
        "ENGINE": "lab.backend",  # django.db.backends.sqlite3, plus LAB_BUSY's emulation and LAB_SQL_LOG
        "NAME": sqlite_uri(cfg["db"], **uri_params),
        "CONN_MAX_AGE": None,      # persistent: each gunicorn thread keeps its connection
        "OPTIONS": {
            # sqlite3.connect(timeout=seconds) is sqlite3_busy_timeout(ms); the half millisecond
            # keeps its truncation (int)(seconds * 1000) at exactly <ms>
            "timeout": (busy_ms + 0.5) / 1000 if busy_ms else 0,
            "transaction_mode": cfg["txn_mode"].upper(),  # BEGIN DEFERRED | BEGIN IMMEDIATE
            "init_command": ";".join(f"PRAGMA {n} = {v}" for n, v in cfg["pragmas"]),
            "cached_statements": 256,
            "lab": {"busy_kind": cfg["busy_kind"], "busy_arg": cfg["busy_arg"],
                    "sql_log": f"{cfg['db']}.sql.log" if cfg["sql_log"] == "on" else None},
        },
    }
    out = {"default": default}
    if cfg["write_path"] != "pool":
        out["writer"] = {**default, "OPTIONS": {**default["OPTIONS"]}}
    return out


def _login() -> str:
    import getpass
    return getpass.getuser()
