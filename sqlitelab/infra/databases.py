"""The servers' databases: a fresh file from servers/schema.sql, seeded (sqlite-utils) and kept
as a reusable template, the counts a sweep's audit reads from the file, the page-cache share
and `PRAGMA integrity_check`.

    db = prepare_database(tmp / "x.db", users=1000, items=1000)
    table_counts(db)   # {"requests": 0, "metrics": 0, "items": 1000, "users": 1000, ...}
"""
from __future__ import annotations

import hashlib
import inspect
import json
import sys
import argparse
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from sqlitelab.core import config

USERS_DEPARTMENTS = ["engineering", "sales", "support", "research", "operations"]


def prepare_database(path: Path | str, *, users: int = 0, items: int = 0,
                     payload_bytes: int = 2048, user_bytes: int = 0, batch: int = 50_000) -> Path:
    """A fresh database from schema.sql, seeded with sqlite-utils.

    `users` rows get uid 1..users, each with a `bio` of `user_bytes` characters (a wide row,
    as a real users table); `items` rows get ids 1..items with `payload_bytes` of text.
    Any existing file (and its -wal/-shm) is replaced.
    """
    if not isinstance(user_bytes, int) or not 0 <= user_bytes <= 1_000_000:
        raise ValueError(f"user_bytes must be an integer in 0..1,000,000, not {user_bytes!r}")
    import sqlite_utils  # lazy: `python -m sqlitelab.infra.databases` on an ssh host needs only sqlite3

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    db = sqlite_utils.Database(path)
    db.conn.executescript(config.SCHEMA_SQL.read_text())
    # Seeding is bulk loading: no durability needed until it is done.
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    if users:
        created = "2026-01-01"
        bio = ("b" * user_bytes)
        rows = ({"uid": i, "username": f"user{i}",
                 "departname": USERS_DEPARTMENTS[i % len(USERS_DEPARTMENTS)],
                 "created": created, "updates": 0, "bio": bio} for i in range(1, users + 1))
        db["users"].insert_all(rows, batch_size=batch)
    if items:
        payload = ("x" * payload_bytes)
        rows = ({"id": i, "payload": payload, "created_at": "2026-01-01T00:00:00.000000Z"}
                for i in range(1, items + 1))
        db["items"].insert_all(rows, batch_size=batch)
    db.execute("PRAGMA journal_mode=DELETE")
    db.conn.close()
    return path


TEMPLATES_KEPT = 4  # seeded templates kept in data/tmp/templates, most recently used first


def seeded_template(*, users: int = 0, items: int = 0, payload_bytes: int = 2048,
                    user_bytes: int = 0, directory: Path | None = None) -> tuple[Path, bool]:
    """A read-only seeded database to copy from, and whether it came from the cache.

    Seeding is deterministic, so a template is reused across sweeps when the schema, this
    module's seeding code and the arguments are the same (5,000,000 users take ~35 s to
    seed, seconds to copy). Sweeps copy it and never write to it."""

    directory = Path(directory or config.TMP_DIR / "templates")
    directory.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(config.SCHEMA_SQL.read_bytes())
    h.update(inspect.getsource(prepare_database).encode())
    h.update(repr(USERS_DEPARTMENTS).encode())
    key = f"u{users}-b{user_bytes}-i{items}-p{payload_bytes}-{h.hexdigest()[:12]}"
    path = directory / f"{key}.db"
    cached = path.exists()
    if not cached:
        part = directory / f"{key}.{os.getpid()}.part"
        prepare_database(part, users=users, items=items, payload_bytes=payload_bytes,
                         user_bytes=user_bytes)
        os.replace(part, path)  # atomic: a template either exists whole or not at all
    os.utime(path)
    for old in sorted(directory.glob("*.db"), key=lambda f: f.stat().st_mtime,
                      reverse=True)[TEMPLATES_KEPT:]:
        old.unlink(missing_ok=True)
    return path, cached


def table_counts(path) -> dict[str, int]:
    """Every counter of COUNTERS (rows per table, the sum of users.updates), read from the file
    (or from a running sqlitelab.infra.postgres.Postgres)."""
    return {name: count_rows(path, name) for name in COUNTERS}


def is_postgres(db) -> bool:
    """A running sqlitelab.infra.postgres.Postgres rather than a SQLite file (no import cycle)."""
    return hasattr(db, "dsn") and hasattr(db, "count_rows")


class OnHost:
    """A SQLite file on an ssh host (a server's there): read there, by this module's command
    line run with the lab at the same path (`python -m sqlitelab.infra.databases count|integrity|
    page-cache|size PATH`). `os.fspath` gives the path, as the server there knows it."""

    def __init__(self, path: Path | str, host):
        self.path, self.host = Path(path), host

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"OnHost({str(self.path)!r}, {str(self.host)!r})"

    def ask(self, *args: str):
        out = self.host.run([sys.executable, "-m", "sqlitelab.infra.databases", *args, str(self.path)],
                            timeout=3600)
        return json.loads(out)

    def count_rows(self, counter: str) -> int:
        return self.ask("count", counter)

    def integrity_check(self) -> str:
        return self.ask("integrity")

    def page_cache(self):
        got = self.ask("page-cache")
        return tuple(got) if got else None

    def size(self) -> int:
        return self.ask("size")


def size(db) -> int | None:
    """Bytes of the database file where it is (None for Postgres)."""
    if isinstance(db, OnHost):
        return db.size()
    if is_postgres(db):
        return None
    return Path(db).stat().st_size


def row(db, sql: str, params=()) -> tuple | None:
    """One row of a query with `?` placeholders, from a SQLite file or a Postgres (read-only
    intent; the tests and notebooks read back what the servers wrote)."""
    if is_postgres(db):
        with db.connect() as con:
            return con.execute(sql.replace("?", "%s"), params).fetchone()
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, params).fetchone()
    finally:
        con.close()


def page_cache(path: Path | str) -> tuple[int, int] | None:
    """(bytes of the file in the OS page cache, file size), by util-linux `fincore`;
    None where fincore is missing or fails."""
    if isinstance(path, OnHost):
        return path.page_cache()
    fincore = shutil.which("fincore")
    if is_postgres(path) or fincore is None or not Path(path).exists():
        return None
    out = subprocess.run([fincore, "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE",
                          str(path)], capture_output=True, text=True, timeout=60)
    try:
        cached, size = (int(x) for x in out.stdout.split())
    except ValueError:
        return None
    return min(cached, size), size


def integrity_check(path) -> str:
    """`PRAGMA integrity_check` ("ok"), or Postgres' amcheck over every index."""
    if is_postgres(path) or isinstance(path, OnHost):
        return path.integrity_check()
    con = sqlite3.connect(path)
    try:
        return ";".join(r[0] for r in con.execute("PRAGMA integrity_check"))
    finally:
        con.close()


COUNTERS = {  # what a scenario's writes grow (scenarios.toml `counter`), read one at a time
    # (the users table is GBs in 05)
    "requests": "SELECT count(*) FROM requests",
    "metrics": "SELECT count(*) FROM metrics",
    "items": "SELECT count(*) FROM items",
    "users": "SELECT count(*) FROM users",
    "user_updates": "SELECT coalesce(sum(updates), 0) FROM users",
}


def count_rows(db: Path | str, counter: str) -> int:
    """One counter of COUNTERS, read from the file itself (read-only), or from a Postgres."""
    if is_postgres(db) or isinstance(db, OnHost):
        return db.count_rows(counter)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(COUNTERS[counter]).fetchone()[0]
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    """What OnHost asks on the host that has the file; one JSON value on standard output.

    python -m sqlitelab.infra.databases count COUNTER PATH | integrity PATH | page-cache PATH | size PATH
    """
    ap = argparse.ArgumentParser(prog="python -m sqlitelab.infra.databases")
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("count")
    c.add_argument("counter", choices=sorted(COUNTERS))
    c.add_argument("path")
    for name in ("integrity", "page-cache", "size"):
        sub.add_parser(name).add_argument("path")
    a = ap.parse_args(argv)
    if not Path(a.path).is_file():
        ap.error(f"no database file {a.path}")
    got = {"count": lambda: count_rows(a.path, getattr(a, "counter", "")),
           "integrity": lambda: integrity_check(a.path),
           "page-cache": lambda: page_cache(a.path),
           "size": lambda: size(a.path)}[a.what]()
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
