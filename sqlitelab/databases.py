"""The servers' databases: a fresh file from servers/schema.sql, seeded (sqlite-utils) and kept
as a reusable template, the counts a sweep's audit reads from the file, the page-cache share
and `PRAGMA integrity_check`.

    db = prepare_database(tmp / "x.db", users=1000, items=1000)
    table_counts(db)   # {"requests": 0, "metrics": 0, "items": 1000, "users": 1000, ...}
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

from . import config

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
    import sqlite_utils

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
    import hashlib
    import inspect

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


def table_counts(path: Path | str) -> dict[str, int]:
    """Every counter of COUNTERS (rows per table, the sum of users.updates), read from the file."""
    return {name: count_rows(path, name) for name in COUNTERS}


def page_cache(path: Path | str) -> tuple[int, int] | None:
    """(bytes of the file in the OS page cache, file size), by util-linux `fincore`;
    None where fincore is missing or fails."""
    fincore = shutil.which("fincore")
    if fincore is None or not Path(path).exists():
        return None
    out = subprocess.run([fincore, "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE",
                          str(path)], capture_output=True, text=True, timeout=60)
    try:
        cached, size = (int(x) for x in out.stdout.split())
    except ValueError:
        return None
    return min(cached, size), size


def integrity_check(path: Path | str) -> str:
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
    """One counter of COUNTERS, read from the file itself (read-only)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(COUNTERS[counter]).fetchone()[0]
    finally:
        con.close()
