-- The one schema every server runs on (see servers/README.md for who writes what).
-- Applied by sqlitelab.databases.prepare_database(); servers refuse a database without it.

-- POST /requests, GET /requests/{id} (seed 000: the Rails scaffold `Request`)
CREATE TABLE IF NOT EXISTS requests (
    id          INTEGER PRIMARY KEY,
    uid         TEXT    NOT NULL UNIQUE,   -- request.uuid
    ip          TEXT    NOT NULL,          -- request.remote_ip
    method      TEXT    NOT NULL,
    url         TEXT    NOT NULL,          -- request.original_url
    parameters  TEXT    NOT NULL,          -- JSON object of the body's parameters
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
);

-- POST /metrics (seed 001: read the latest value, insert the new one, five times per request)
CREATE TABLE IF NOT EXISTS metrics (
    id          INTEGER PRIMARY KEY,
    instance    TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    value       REAL    NOT NULL,
    previous    REAL,                      -- the latest value before this one, NULL for the first
    created_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_latest ON metrics (instance, name, id);

-- POST /items, GET /items/{id} (seed 002)
CREATE TABLE IF NOT EXISTS items (
    id          INTEGER PRIMARY KEY,
    payload     TEXT    NOT NULL,
    created_at  TEXT    NOT NULL
);

-- GET/POST /users/{uid} (seed 004: the classic `userinfo` table)
CREATE TABLE IF NOT EXISTS users (
    uid         INTEGER PRIMARY KEY,
    username    TEXT    NOT NULL,
    departname  TEXT    NOT NULL,
    created     TEXT    NOT NULL,
    updates     INTEGER NOT NULL DEFAULT 0, -- +1 per acknowledged POST /users/{uid}: the audit counts it
    bio         TEXT    NOT NULL DEFAULT '' -- what makes a real users table wide (seed 004: "a file of
                                            -- multiple GBs"); seeded with `user_bytes` characters
);
