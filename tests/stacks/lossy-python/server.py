"""lossy-python: a deliberately lossy SQLite-backed server, the test fixture that shows the lab's
durability checks have teeth (tests/test_durability.py) and a stand-in for "your own app".

Its fault: POST /items and POST /requests are acknowledged *before* their row is committed.
The handler takes the next id itself, answers 201 / 302 at once and puts the row on a queue; a
background writer thread commits what is queued (one transaction per batch) LAB_LOSSY_DELAY_MS
later. A share LAB_LOSSY_DROP of the acknowledged writes is never queued at all. A SIGKILL loses
everything still queued; SIGTERM commits the queue (not the dropped writes) and exits 0.

Standard library only: http.server.ThreadingHTTPServer (a thread per connection) + sqlite3.
Configuration: the LAB_* variables of servers/README.md (the subset below), plus
LAB_LOSSY_DROP (a fraction 0..1, default 0.05), LAB_LOSSY_DELAY_MS (default 20) and
LAB_LOSSY_SEED (an integer: the drops become reproducible).
"""
from __future__ import annotations

import html
import json
import os
import platform
import queue
import random
import re
import signal
import sqlite3
import sys
import threading
import time
import tomllib
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVER = "lossy-python"
TABLES = ("requests", "metrics", "items", "users")
# the LAB_PRAGMAS allow-list, read from where the bundled stacks declare it (servers/shared.toml)
PRAGMA_VALUES = {name: int if allowed == "integer" else tuple(allowed) for name, allowed in tomllib.loads(
    (Path(__file__).resolve().parents[3] / "servers" / "shared.toml").read_text())["pragmas"].items()}
MAX_ID = 9223372036854775807
MAX_BODY = 1_048_576
MAX_PAYLOAD = 65_536


class ConfigError(Exception):
    pass


def _choice(env, name, default, allowed):
    value = env.get(name) or default
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {'|'.join(allowed)}")
    return value


def _int_env(env, name, default, lo, hi):
    raw = env.get(name)
    if not raw:
        return default
    if not re.fullmatch(r"[0-9]+", raw) or not lo <= int(raw) <= hi:
        raise ConfigError(f"{name}={raw!r} is not an integer {lo}..{hi}")
    return int(raw)


def parse_config(env=os.environ) -> dict:
    cfg: dict = {"host": env.get("LAB_HOST") or "127.0.0.1"}
    if not env.get("LAB_PORT"):
        raise ConfigError("LAB_PORT is required")
    cfg["port"] = _int_env(env, "LAB_PORT", None, 1, 65535)
    if (env.get("LAB_DATABASE") or "sqlite") != "sqlite":
        raise ConfigError(f"LAB_DATABASE={env['LAB_DATABASE']!r}: lossy-python runs on sqlite only")
    db = env.get("LAB_DB")
    if not db or not Path(db).is_file():
        raise ConfigError(f"LAB_DB={db!r} does not exist (make it from servers/schema.sql)")
    try:
        con = sqlite3.connect(db)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        con.close()
    except sqlite3.Error as e:
        raise ConfigError(f"LAB_DB={db!r} is not a readable SQLite database: {e}")
    if set(TABLES) - tables:
        raise ConfigError(f"LAB_DB={db!r} lacks tables {sorted(set(TABLES) - tables)} of servers/schema.sql")
    cfg["db"] = db
    pragmas = []
    for part in filter(None, (p.strip() for p in (env.get("LAB_PRAGMAS") or "").split(","))):
        name, sep, value = (s.strip().lower() for s in part.partition("="))
        allowed = PRAGMA_VALUES.get(name)
        if allowed is None:
            raise ConfigError(f"LAB_PRAGMAS: pragma {name!r} is not allowed "
                              f"(allowed: {', '.join(sorted(PRAGMA_VALUES))})")
        if not sep or (allowed is int and not re.fullmatch(r"-?[0-9]+", value)) or \
                (allowed is not int and value not in allowed):
            raise ConfigError(f"LAB_PRAGMAS: {name}={value!r} is not "
                              + ("an integer" if allowed is int else "one of " + "|".join(allowed)))
        pragmas.append((name, value))
    cfg["pragmas"] = pragmas
    cfg["txn_mode"] = _choice(env, "LAB_TXN_MODE", "deferred", ("deferred", "immediate"))
    cfg["busy"] = env.get("LAB_BUSY") or "busy_timeout:5000"
    m = re.fullmatch(r"busy_timeout:([0-9]{1,9})", cfg["busy"])
    if not m:
        raise ConfigError(f"LAB_BUSY={cfg['busy']!r}: lossy-python implements busy_timeout:<ms> only")
    cfg["busy_ms"] = int(m.group(1))
    # Accepted and reported; whatever is asked, writes go through the lossy queue.
    cfg["write_path"] = _choice(env, "LAB_WRITE_PATH", "pool", ("pool", "writer", "batch"))
    cfg["processes"] = _int_env(env, "LAB_PROCESSES", 1, 1, 1)  # one process: the ids are its own
    cfg["threads"] = _int_env(env, "LAB_THREADS", 1, 1, 1024)   # reported; a thread per connection
    cfg["readers"] = _int_env(env, "LAB_READERS", cfg["threads"], 1, 1024)
    cfg["metrics_txn"] = _choice(env, "LAB_METRICS_TXN", "request", ("request",))
    cfg["cache"] = _choice(env, "LAB_CACHE", "private", ("private",))
    cfg["sql_log"] = _choice(env, "LAB_SQL_LOG", "off", ("off",))
    try:
        cfg["drop"] = float(env.get("LAB_LOSSY_DROP") or 0.05)
    except ValueError:
        cfg["drop"] = -1.0
    if not 0.0 <= cfg["drop"] <= 1.0:
        raise ConfigError(f"LAB_LOSSY_DROP={env.get('LAB_LOSSY_DROP')!r} is not a fraction 0..1")
    cfg["delay_ms"] = _int_env(env, "LAB_LOSSY_DELAY_MS", 20, 0, 10_000)
    seed = env.get("LAB_LOSSY_SEED")
    cfg["seed"] = _int_env(env, "LAB_LOSSY_SEED", None, 0, 2**63) if seed else None
    templates = env.get("LAB_TEMPLATES") or Path(__file__).resolve().parents[3] / "servers" / "templates"
    cfg["request_template"] = Path(templates) / "request.html"
    return cfg


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Store:
    """The ids, the queue and the writer thread that commits (most of) what was acknowledged."""

    INSERT = {"items": "INSERT INTO items (id, payload, created_at) VALUES (?, ?, ?)",
              "requests": "INSERT INTO requests (id, uid, ip, method, url, parameters, created_at, "
                          "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"}

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.rng = random.Random(cfg["seed"])
        self.lock = threading.Lock()
        self.queue: queue.Queue = queue.Queue()
        self.stopping = threading.Event()
        self.dropped = 0
        con = self.connect()
        self.next_id = {t: con.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {t}").fetchone()[0]
                        for t in self.INSERT}
        self.effective = {name: str(con.execute(f"PRAGMA {name}").fetchone()[0]).lower()
                          for name, _ in cfg["pragmas"]}
        con.close()
        self.writer = threading.Thread(target=self.loop, name="lossy-writer", daemon=True)
        self.writer.start()

    def connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.cfg["db"], isolation_level=None, check_same_thread=False,
                              timeout=self.cfg["busy_ms"] / 1000)
        for name, value in self.cfg["pragmas"]:
            con.execute(f"PRAGMA {name}={value}")
        return con

    def acknowledge(self, table: str, row: tuple) -> int:
        """The id the client is told at once; the row is queued (or dropped) for later."""
        with self.lock:
            new_id = self.next_id[table]
            self.next_id[table] += 1
            drop = self.rng.random() < self.cfg["drop"]
            if drop:
                self.dropped += 1
        if not drop:
            self.queue.put((table, (new_id, *row)))
        return new_id

    def loop(self) -> None:
        con = self.connect()
        begin = f"BEGIN {self.cfg['txn_mode'].upper()}"
        while True:
            try:
                first = self.queue.get(timeout=0.1)
            except queue.Empty:
                if self.stopping.is_set():
                    break
                continue
            if not self.stopping.is_set():
                time.sleep(self.cfg["delay_ms"] / 1000)  # the window in which acked writes are only in memory
            batch = [first]
            while True:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            for attempt in range(50):
                try:
                    con.execute(begin)
                    for table, row in batch:
                        con.execute(self.INSERT[table], row)
                    con.execute("COMMIT")
                    break
                except sqlite3.Error as e:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    print(f"lossy-python: batch of {len(batch)} failed ({e}); retrying", file=sys.stderr)
                    time.sleep(0.05)
        con.close()

    def read(self, sql: str, params=()):
        con = sqlite3.connect(self.cfg["db"], timeout=self.cfg["busy_ms"] / 1000)
        try:
            return con.execute(sql, params).fetchone()
        finally:
            con.close()

    def close(self) -> None:
        self.stopping.set()
        self.writer.join(30)


class Counter:
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def bump(self):
        with self.lock:
            self.n += 1


class HTTPError(Exception):
    def __init__(self, status: int, message: str, headers=None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def parse_id(raw: str) -> int:
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not 1 <= int(raw) <= MAX_ID:
        raise HTTPError(400, f"invalid id {raw[:40]!r}: expected an integer 1..{MAX_ID}")
    return int(raw)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return SERVER

    # path regex -> {method: handler name}
    ROUTES = [
        (r"/health", {"GET": "health"}),
        (r"/hello", {"GET": "hello"}),
        (r"/delay/([^/]+)", {"GET": "delay"}),
        (r"/items", {"POST": "create_item"}),
        (r"/items/([^/]+)", {"GET": "show_item"}),
        (r"/requests", {"POST": "create_request"}),
        (r"/requests/([^/]+)", {"GET": "show_request"}),
    ]

    def log_message(self, *args):  # no access log (servers/README.md)
        pass

    def dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        counted = True
        try:
            if any(seg in ("", ".", "..") for seg in path.split("/")[1:]):
                raise HTTPError(404, "not found")
            for pattern, methods in self.ROUTES:
                m = re.fullmatch(pattern, path)
                if m:
                    if method not in methods:
                        raise HTTPError(405, "method not allowed", {"Allow": ", ".join(methods)})
                    counted = path != "/health"
                    status, ctype, body, headers = getattr(self, methods[method])(*m.groups())
                    break
            else:
                raise HTTPError(404, "not found")
        except HTTPError as e:
            status, ctype, headers = e.status, "application/json", e.headers
            body = json.dumps({"error": e.message}).encode()
        except Exception as e:  # noqa: BLE001  (a 500, no stack trace in the body)
            print(f"lossy-python: {type(e).__name__}: {e}", file=sys.stderr)
            status, ctype, headers, body = 500, "application/json", {}, b'{"error": "internal error"}'
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if counted:
            COUNTER.bump()

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def body_json(self, required: bool):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            raise HTTPError(413, "request body too large")
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            if required:
                raise HTTPError(400, "a JSON body is required")
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise HTTPError(400, "malformed JSON")

    # --------------------------------------------------------------- endpoints
    def health(self):
        cfg = CFG
        body = {
            "server": SERVER,
            "versions": {"python": platform.python_version(), "http.server": "stdlib",
                         "sqlite3": "stdlib"},
            "sqlite_version": sqlite3.sqlite_version,
            "database": "sqlite",
            "database_version": sqlite3.sqlite_version,
            "pid": os.getpid(),
            "knobs": {"database": "sqlite", "pragmas": STORE.effective, "txn_mode": cfg["txn_mode"],
                      "busy": cfg["busy"], "write_path": cfg["write_path"],
                      "processes": cfg["processes"], "threads": cfg["threads"],
                      "readers": cfg["readers"], "metrics_txn": cfg["metrics_txn"],
                      "cache": cfg["cache"], "sql_log": cfg["sql_log"]},
            "emulated": {"write_path": "ignored: every write is acknowledged first, then queued "
                                       f"(or dropped, LAB_LOSSY_DROP={cfg['drop']}) for a background writer"},
            "requests_handled": COUNTER.n,
            "lossy": {"drop": cfg["drop"], "delay_ms": cfg["delay_ms"], "dropped": STORE.dropped,
                      "queued": STORE.queue.qsize()},
        }
        return 200, "application/json", json.dumps(body).encode(), {}

    def hello(self):
        return 200, "text/plain; charset=utf-8", b"Hello, World!", {}

    def delay(self, ms: str):
        m = re.fullmatch(r"0*([0-9]{1,5})", ms)
        if not m or int(m.group(1)) > 10_000:
            raise HTTPError(400, f"invalid delay {ms[:40]!r}: expected an integer 0..10000 (ms)")
        time.sleep(int(m.group(1)) / 1000)
        return self.hello()

    def create_item(self):
        body = self.body_json(required=True)
        if not isinstance(body, dict) or not isinstance(body.get("payload"), str):
            raise HTTPError(400, "expected {\"payload\": string}")
        if len(body["payload"].encode("utf-8", "surrogatepass")) > MAX_PAYLOAD:
            raise HTTPError(400, f"payload over {MAX_PAYLOAD} bytes")
        new_id = STORE.acknowledge("items", (body["payload"], now()))
        return 201, "application/json", json.dumps({"id": new_id}).encode(), {}

    def show_item(self, raw: str):
        row = STORE.read("SELECT id, payload, created_at FROM items WHERE id = ?", (parse_id(raw),))
        if row is None:
            raise HTTPError(404, f"item {raw} not found")
        return 200, "application/json", json.dumps(dict(zip(("id", "payload", "created_at"), row))).encode(), {}

    def create_request(self):
        params = self.body_json(required=False)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise HTTPError(400, "the body must be a JSON object")
        ts = now()
        url = f"http://{self.headers.get('Host', '')}/requests"
        new_id = STORE.acknowledge("requests", (str(uuid.uuid4()), self.client_address[0], "POST", url,
                                                json.dumps(params, separators=(",", ":")), ts, ts))
        location = f"/requests/{new_id}"
        body = f'<html><body>You are being <a href="{location}">redirected</a>.</body></html>'
        return 302, "text/html; charset=utf-8", body.encode(), {"Location": location}

    def show_request(self, raw: str):
        keys = ("id", "uid", "ip", "method", "url", "parameters", "created_at", "updated_at")
        row = STORE.read(f"SELECT {', '.join(keys)} FROM requests WHERE id = ?", (parse_id(raw),))
        if row is None:
            raise HTTPError(404, f"request {raw} not found")
        values = dict(zip(keys, row))
        page = re.sub(r"\{\{(\w+)\}\}", lambda m: html.escape(str(values[m.group(1)]), quote=True), TEMPLATE)
        return 200, "text/html; charset=utf-8", page.encode(), {}


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main() -> int:
    global CFG, STORE, COUNTER, TEMPLATE
    try:
        CFG = parse_config()
        TEMPLATE = CFG["request_template"].read_text() if CFG["request_template"].is_file() else \
            "<html><body>Request {{id}}: {{uid}} {{url}} {{parameters}} {{created_at}}</body></html>"
        STORE = Store(CFG)
    except (ConfigError, sqlite3.Error) as e:
        print(f"lab: {e}", file=sys.stderr)
        return 2
    COUNTER = Counter()
    httpd = Server((CFG["host"], CFG["port"]), Handler)

    def stop(signum, frame):  # shutdown() blocks until serve_forever returns: from another thread
        threading.Thread(target=httpd.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    httpd.serve_forever(poll_interval=0.1)
    httpd.server_close()
    STORE.close()  # commits what is queued (never what was dropped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
