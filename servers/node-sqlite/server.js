'use strict';
// node-sqlite: the SQLite Production Lab contract (../README.md, ../openapi.yaml) on Node's own
// `http` module + better-sqlite3, or with LAB_DATABASE=postgres + pg (node-postgres) and its
// pg.Pool.
//
// better-sqlite3 is synchronous: each process has ONE JavaScript thread, which runs the HTTP
// parsing, the handlers and every SQLite statement, one at a time, on ONE connection (reads and,
// on the pool path, writes). LAB_PROCESSES > 1 runs that many such processes under the `cluster`
// module; the primary accepts connections and hands them to the workers (Node's round-robin on
// Linux) and serves no request itself. The writer and batch paths are a queue drained on the
// event loop by one writer with its own connection. On Postgres the same handlers run on pg,
// asynchronously (each statement a round trip), on a pool of LAB_READERS connections.

// LAB_THREADS sizes libuv's thread pool: libuv reads UV_THREADPOOL_SIZE when the pool starts, the
// first time something uses it; `run` exports it, and this line covers `node server.js` started
// by hand (nothing has used the pool yet).
if (/^[1-9][0-9]{0,3}$/.test(process.env.LAB_THREADS || '')) process.env.UV_THREADPOOL_SIZE = process.env.LAB_THREADS;

const cluster = require('node:cluster');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { isUtf8 } = require('node:buffer');

const SERVER = 'node-sqlite';
const MAX_BODY = 1048576;             // 413 above this
const MAX_PAYLOAD = 65536;            // POST /items payload, bytes of UTF-8
const MAX_ID = 9223372036854775807n;  // ids and uids: 1 ... 2^63-1
const MAX_DELAY_MS = 10000;
const METRIC_NAMES = ['cpu', 'memory', 'disk', 'load', 'requests'];  // servers/shared.toml's metric_names
const SHUTDOWN_GRACE_MS = 8000;       // then the connections still open are closed (the lab SIGKILLs at 10 s)

// ---------------------------------------------------------------------------------------
// Configuration (LAB_* environment variables; every problem is one "lab: " line, exit 2)

class ConfigError extends Error {}

// The LAB_PRAGMAS allow-list of servers/shared.toml (tests/test_contract.py checks they agree);
// null: any integer.
const PRAGMA_VALUES = {
  journal_mode: ['delete', 'truncate', 'persist', 'memory', 'wal', 'off'],
  synchronous: ['off', 'normal', 'full', 'extra', '0', '1', '2', '3'],
  temp_store: ['default', 'file', 'memory', '0', '1', '2'],
  foreign_keys: ['on', 'off', 'true', 'false', '0', '1'],
  cache_size: null, mmap_size: null, journal_size_limit: null, wal_autocheckpoint: null,
};
const ALLOWED_PRAGMAS = Object.keys(PRAGMA_VALUES).sort().join(', ');
// SQLite's own knobs: with LAB_DATABASE=postgres they must be unset or empty (null in /health).
const SQLITE_ONLY = ['LAB_PRAGMAS', 'LAB_TXN_MODE', 'LAB_BUSY', 'LAB_CACHE', 'LAB_SQL_LOG'];
const TABLES = ['requests', 'metrics', 'items', 'users'];  // servers/schema.sql, schema.postgres.sql
const MAX_COUNT = 1024;  // processes, threads (libuv's own limit) and readers

function env(name, def) {
  const v = process.env[name];
  return v === undefined || v === '' ? def : v;
}

function choice(name, def, allowed) {
  const v = env(name, def);
  if (!allowed.includes(v)) throw new ConfigError(`${name}='${v}' is not one of ${allowed.join('|')}`);
  return v;
}

function positive(name, def) {
  const v = env(name, String(def));
  if (!/^[0-9]{1,9}$/.test(v) || Number(v) < 1 || Number(v) > MAX_COUNT) {
    throw new ConfigError(`${name}='${v}' is not an integer 1..${MAX_COUNT}`);
  }
  return Number(v);
}

function loadConfig() {
  const c = { host: env('LAB_HOST', '127.0.0.1') };
  const port = env('LAB_PORT', '');
  if (!/^[0-9]{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw new ConfigError(`LAB_PORT='${port}' is not a port number 1-65535 (required)`);
  }
  c.port = Number(port);

  c.database = choice('LAB_DATABASE', 'sqlite', ['sqlite', 'postgres']);
  if (c.database === 'sqlite') {
    if (env('LAB_DATABASE_URL', '')) {
      throw new ConfigError("LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite (or set LAB_DATABASE=postgres)");
    }
    loadSqlite(c);
  } else {
    loadPostgres(c);
  }

  c.templates = env('LAB_TEMPLATES', path.join(__dirname, '..', 'templates'));
  c.writePath = choice('LAB_WRITE_PATH', 'pool', ['pool', 'writer', 'batch']);
  c.metricsTxn = choice('LAB_METRICS_TXN', 'request', ['request', 'record']);
  if (c.metricsTxn === 'record' && c.writePath !== 'pool') {
    throw new ConfigError(`LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool (got ${c.writePath}: each record commits on the request's pooled connection)`);
  }
  if (c.database === 'sqlite') {
    c.cache = choice('LAB_CACHE', 'private', ['private', 'shared']);
    c.sqlLog = choice('LAB_SQL_LOG', 'off', ['off', 'on']);
  }

  c.processes = positive('LAB_PROCESSES', 1);
  // libuv's thread pool (fs, dns, crypto, zlib: nothing on a request's path here); the
  // JavaScript that serves requests is one thread per process whatever its size.
  const uv = env('UV_THREADPOOL_SIZE', '');
  c.threads = positive('LAB_THREADS', /^[1-9][0-9]{0,3}$/.test(uv) && Number(uv) <= MAX_COUNT ? Number(uv) : 4);
  // SQLite: one connection per process (LAB_READERS must be 1); Postgres: the pg.Pool's size.
  c.readers = positive('LAB_READERS', c.database === 'sqlite' ? 1 : c.threads);
  if (c.writePath !== 'pool' && c.processes > 1) {
    throw new ConfigError(`LAB_WRITE_PATH=${c.writePath} needs LAB_PROCESSES=1 (one writer serves one process; got LAB_PROCESSES=${c.processes})`);
  }
  if (c.database === 'sqlite' && c.readers !== 1) {
    throw new ConfigError(`LAB_READERS=${c.readers}: node-sqlite opens one SQLite connection per process (better-sqlite3 is synchronous: the process's one JavaScript thread runs one statement at a time, so a second connection would never be used); set LAB_READERS=1 and LAB_PROCESSES for more processes`);
  }
  if (c.database === 'sqlite' && c.cache === 'shared') {
    const why = sharedCacheMissing();
    if (why) throw new ConfigError(`LAB_CACHE=shared cannot be honoured: ${why}`);
  }
  return c;
}

// loadSqlite: LAB_DB and SQLite's own knobs.
function loadSqlite(c) {
  c.db = env('LAB_DB', '');
  if (!c.db) throw new ConfigError('LAB_DB is required: the path of a database made from servers/schema.sql');
  let st = null;
  try { st = fs.statSync(c.db); } catch { /* reported below */ }
  if (!st || !st.isFile()) {
    throw new ConfigError(`LAB_DB='${c.db}' is not an existing database file (make one from servers/schema.sql)`);
  }

  c.pragmas = [];
  for (const item of env('LAB_PRAGMAS', '').split(',')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    const name = (eq < 0 ? item : item.slice(0, eq)).trim().toLowerCase();
    const value = eq < 0 ? '' : item.slice(eq + 1).trim().toLowerCase();
    if (!Object.hasOwn(PRAGMA_VALUES, name)) {
      throw new ConfigError(`LAB_PRAGMAS: pragma '${name}' is not allowed (allowed: ${ALLOWED_PRAGMAS})`);
    }
    const allowed = PRAGMA_VALUES[name];
    if (allowed === null ? !/^-?[0-9]{1,19}$/.test(value) : !allowed.includes(value)) {
      throw new ConfigError(`LAB_PRAGMAS: ${name}='${value}' is not ${allowed === null ? 'an integer' : 'one of ' + allowed.join('|')}`);
    }
    c.pragmas.push([name, value]);
  }

  c.txnMode = choice('LAB_TXN_MODE', 'deferred', ['deferred', 'immediate']);

  const busy = env('LAB_BUSY', 'busy_timeout:5000');
  const m = /^(busy_timeout|sleep_poll|retries):([0-9]{1,10})$/.exec(busy);
  if (busy === 'none') {
    c.busy = { kind: 'none', n: 0 };
  } else if (m && Number(m[2]) <= 2147483647) {
    c.busy = { kind: m[1], n: Number(m[2]) };
  } else {
    throw new ConfigError(`LAB_BUSY='${busy}' is not one of busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none (ms and n at most 2147483647)`);
  }
}

// loadPostgres: LAB_DATABASE_URL (a libpq key=value string, parsed here; the start-up connects).
// LAB_DB is not read; SQLite's knobs are refused.
function loadPostgres(c) {
  for (const name of SQLITE_ONLY) {
    if (env(name, '')) throw new ConfigError(`${name} is SQLite's; unset it with LAB_DATABASE=postgres`);
  }
  const url = env('LAB_DATABASE_URL', '');
  if (!url) {
    throw new ConfigError("LAB_DATABASE_URL is required with LAB_DATABASE=postgres (a libpq key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')");
  }
  c.pg = pgConfig(url);
  Object.assign(c, { pragmas: null, txnMode: null, busy: { kind: 'none', n: 0 }, cache: null, sqlLog: null });
}

// The libpq keywords this server passes on to pg (node-postgres takes URLs, not key=value).
const PG_KEYS = { host: 'host', hostaddr: 'host', port: 'port', user: 'user', password: 'password',
  dbname: 'database', application_name: 'application_name', options: 'options',
  connect_timeout: null, sslmode: null };

// pgConfig: a libpq connection string (key=value pairs, values optionally 'single-quoted' with
// \-escapes; or a postgres:// URI) as pg's Client options. Where the string sets neither,
// connect_timeout is 10 s and application_name this server's name.
function pgConfig(s) {
  const out = { application_name: SERVER, connectionTimeoutMillis: 10000 };
  if (/^postgres(ql)?:\/\//.test(s)) return { ...out, connectionString: s };
  const err = (what) => new ConfigError(`LAB_DATABASE_URL: ${what}`);
  let i = 0;
  const space = () => { while (i < s.length && /\s/.test(s[i])) i++; };
  for (;;) {
    space();
    if (i >= s.length) break;
    let key = '';
    while (i < s.length && s[i] !== '=' && !/\s/.test(s[i])) key += s[i++];
    space();
    if (s[i] !== '=') throw err(`missing "=" after "${key}" in connection info string`);
    i++;
    space();
    let value = '';
    if (s[i] === "'") {
      for (i++; ; i++) {
        if (i >= s.length) throw err('unterminated quoted string in connection info string');
        if (s[i] === '\\') { value += s[++i] ?? ''; continue; }
        if (s[i] === "'") { i++; break; }
        value += s[i];
      }
    } else {
      for (; i < s.length && !/\s/.test(s[i]); i++) value += s[i] === '\\' ? (s[++i] ?? '') : s[i];
    }
    if (!Object.hasOwn(PG_KEYS, key)) {
      throw err(`invalid connection option "${key}" (node-sqlite passes ${Object.keys(PG_KEYS).join(', ')} to pg)`);
    }
    if (key === 'connect_timeout') {
      if (!/^[0-9]+$/.test(value)) throw err(`invalid integer value "${value}" for connection option "connect_timeout"`);
      out.connectionTimeoutMillis = Number(value) * 1000 || 0;
    } else if (key === 'sslmode') {
      const modes = { disable: false, allow: false, prefer: false, require: { rejectUnauthorized: false },
        'verify-ca': true, 'verify-full': true };
      if (!Object.hasOwn(modes, value)) throw err(`invalid sslmode value: "${value}"`);
      out.ssl = modes[value];
    } else if (key === 'port') {
      if (!/^[0-9]{1,5}$/.test(value)) throw err(`invalid port number: "${value}"`);
      out.port = Number(value);
    } else {
      out[PG_KEYS[key]] = value;
    }
  }
  return out;
}

// sharedCacheMissing: why the SQLite better-sqlite3 bundles cannot open a shared cache (null: it
// can). better-sqlite3 has no open flag for it, so it would take a `file:...?cache=shared` URI:
// its build compiles shared cache out (SQLITE_OMIT_SHARED_CACHE) and leaves URI filenames off
// (SQLITE_USE_URI=0, and it opens without SQLITE_OPEN_URI).
function sharedCacheMissing() {
  const options = sqliteInfo().options;
  if (options.includes('OMIT_SHARED_CACHE')) {
    return `better-sqlite3 ${packageVersion('better-sqlite3')} bundles SQLite ${sqliteInfo().version} compiled with SQLITE_OMIT_SHARED_CACHE (PRAGMA compile_options; and without URI filenames, SQLITE_USE_URI=0), so no connection it opens can share a cache; use LAB_CACHE=private`;
  }
  if (!uriFilenames()) {
    return `better-sqlite3 ${packageVersion('better-sqlite3')} opens SQLite without URI filenames (SQLITE_USE_URI=0), so it cannot ask for cache=shared; use LAB_CACHE=private`;
  }
  return null;
}

// uriFilenames: whether better-sqlite3 takes `file:` URIs (a read-only URI refuses a write).
function uriFilenames() {
  const Database = require('better-sqlite3');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lab-node-uri-'));
  try {
    new Database(path.join(dir, 'x.db')).close();
    const db = new Database(`file:${path.join(dir, 'x.db')}?mode=ro`, { fileMustExist: true });
    try { return db.readonly || db.prepare('PRAGMA query_only').pluck().get() === 1; } finally { db.close(); }
  } catch {
    return false;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

let SQLITE_INFO = null;

// sqliteInfo: the SQLite this process links (better-sqlite3's bundled amalgamation): its version
// and PRAGMA compile_options, read on an in-memory database (also with LAB_DATABASE=postgres).
function sqliteInfo() {
  if (!SQLITE_INFO) {
    const Database = require('better-sqlite3');
    const memory = new Database(':memory:');
    try {
      SQLITE_INFO = {
        version: memory.prepare('SELECT sqlite_version()').pluck().get(),
        options: memory.prepare('PRAGMA compile_options').pluck().all(),
      };
    } finally {
      memory.close();
    }
  }
  return SQLITE_INFO;
}

// packageVersion: an installed package's version, from its package.json (found from its main
// file: some packages' "exports" do not export their package.json).
function packageVersion(name) {
  for (let dir = path.dirname(require.resolve(name)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (pkg.name === name) return pkg.version;
    }
  }
  return 'unknown';
}

function oneLine(e) {
  const msg = e && (e.message || (Array.isArray(e.errors) && e.errors.map(oneLine).join('; ')) || e.code);
  return String(msg || e).replace(/\s+/g, ' ').trim();
}

// ---------------------------------------------------------------------------------------
// Templates: read once at start-up, split at every {{field}}

class Template {
  constructor(dir, name, fields) {
    let src;
    try {
      src = fs.readFileSync(path.join(dir, name), 'utf8');
    } catch (e) {
      throw new ConfigError(`LAB_TEMPLATES: ${oneLine(e)}`);
    }
    this.parts = src.split(/\{\{(\w+)\}\}/);  // even: text, odd: a field's name
    for (let i = 1; i < this.parts.length; i += 2) {
      if (!fields.includes(this.parts[i])) {
        throw new ConfigError(`LAB_TEMPLATES: ${name} uses {{${this.parts[i]}}}, not one of ${fields.join(', ')}`);
      }
    }
  }

  render(row) {
    let out = this.parts[0];
    for (let i = 1; i < this.parts.length; i += 2) out += escapeHtml(String(row[this.parts[i]])) + this.parts[i + 1];
    return out;
  }
}

const HTML_ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(s) {
  return /[&<>"']/.test(s) ? s.replace(/[&<>"']/g, (ch) => HTML_ESCAPES[ch]) : s;
}

// ---------------------------------------------------------------------------------------
// Errors and responses

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const LOCKED = () => new HttpError(503, 'database is locked');
const UNAVAILABLE = () => new HttpError(503, 'database unavailable');

// isBusy: SQLITE_BUSY or SQLITE_LOCKED with any extended code (better-sqlite3 turns extended
// result codes on: SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE, ...).
function isBusy(e) {
  return typeof e?.code === 'string' && (e.code.startsWith('SQLITE_BUSY') || e.code.startsWith('SQLITE_LOCKED'));
}

let counter = null;      // requests answered (Counter)
let shuttingDown = false;

// send writes one whole response: its Content-Length, a Date of its own (Node would reuse one per
// second, and a blocked event loop would make it stale) and, unless it answers /health, one more
// request counted (before it goes out: a client that has it can count it).
function send(req, res, status, type, body, headers) {
  const h = { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), Date: new Date().toUTCString(), ...headers };
  if (shuttingDown) h.Connection = 'close';
  if (req.labPath !== '/health') counter.bump();
  res.writeHead(status, h);
  res.end(body);
}

const TEXT = 'text/plain; charset=utf-8';
const HTML = 'text/html; charset=utf-8';
const JSON_TYPE = 'application/json';

function sendJSON(req, res, status, body, headers) {
  send(req, res, status, JSON_TYPE, typeof body === 'string' ? body : JSON.stringify(body), headers);
}

// fail answers an error: its own status for an HttpError (the database's busy/locked and lost
// connections become one in store.classify: 503), 500 without details for anything else.
function fail(req, res, e) {
  let he = e instanceof HttpError ? e : STORE.classify(e);
  if (!he) {
    console.error(`${SERVER} ${process.pid}: ${req.method} ${req.labPath}: ${e && e.stack ? e.stack : e}`);
    he = new HttpError(500, 'internal error');
  }
  if (res.headersSent) return;
  sendJSON(req, res, he.status, { error: he.message });
}

// pathId parses {id}/{uid}: ASCII digits only, 1 ... 9223372036854775807, as a BigInt (bound to
// SQLite as an integer, never rounded to a double).
function pathId(raw, name) {
  if (/^[0-9]{1,40}$/.test(raw)) {
    const n = BigInt(raw);
    if (n >= 1n && n <= MAX_ID) return n;
  }
  throw new HttpError(400, `${name} must be an integer 1..9223372036854775807`);
}

// readBody: the request body, at most 1 MiB (413 beyond, by Content-Length or by reading). A body
// over the limit is still read to its end (and dropped) before the 413 goes out: answered unread,
// the kernel would reset the connection under a client that is still sending.
function readBody(req) {
  return new Promise((resolve, reject) => {
    const length = req.headers['content-length'];
    let tooLarge = length !== undefined && Number(length) > MAX_BODY;
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > MAX_BODY) {
        tooLarge = true;
        chunks.length = 0;
      } else {
        chunks.push(chunk);
      }
    });
    req.on('end', () => {
      if (tooLarge) reject(new HttpError(413, `request body over ${MAX_BODY} bytes`));
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    });
    req.on('error', () => reject(new HttpError(400, 'could not read the request body')));
  });
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;  // a \u escape of U+D800..U+DFFF

// readJSON reads a JSON body (whatever its Content-Type) that must be Unicode text: valid UTF-8
// everywhere (no invalid bytes, overlong forms, encoded surrogates or code points above U+10FFFF:
// buffer.isUtf8) and no \u escape of an unpaired surrogate (JSON.parse would keep it as a lone
// UTF-16 unit). An empty body (or only whitespace) is undefined (JSON's `null` is a value, not an
// empty body); `required` makes it a 400.
async function readJSON(req, required) {
  const body = await readBody(req);
  let empty = true;
  for (let i = 0; i < body.length && empty; i++) empty = body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09;
  if (empty) {
    if (required) throw new HttpError(400, 'a JSON body is required');
    return undefined;
  }
  if (!isUtf8(body)) throw new HttpError(400, 'body is not valid UTF-8');
  const text = body.toString('utf8');
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `malformed JSON: ${oneLine(e).slice(0, 200)}`);
  }
  if (SURROGATE_ESCAPE.test(text) && !wellFormed(value)) {
    throw new HttpError(400, 'body has a \\u escape of an unpaired UTF-16 surrogate');
  }
  return value;
}

// wellFormed: no string (or key) in v holds a lone surrogate. The body was valid UTF-8, so any
// surrogate came from a \u escape that JSON.parse could not pair.
function wellFormed(v) {
  try {
    const walk = (x) => {
      if (typeof x === 'string') return x.isWellFormed();
      if (Array.isArray(x)) return x.every(walk);
      if (x !== null && typeof x === 'object') {
        for (const k of Object.keys(x)) if (!k.isWellFormed() || !walk(x[k])) return false;
      }
      return true;
    };
    return walk(v);
  } catch {
    return false;  // too deep to walk (RangeError): refused like malformed JSON
  }
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// characters: a string's length in code points (what "1-64 characters" counts), not UTF-16 units.
function characters(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) n--;
  }
  return n;
}

function shortString(v, field) {
  if (typeof v !== 'string' || v.length === 0 || v.length > 128 || characters(v) > 64) {
    throw new HttpError(400, `${field} must be a string of 1 to 64 characters`);
  }
  return storable(v, field);
}

// storable: a string the database can hold. Postgres' text cannot hold U+0000 (SQLite's can), so
// on Postgres it is a 400 before any write, not the driver's error (a 500).
function storable(v, field) {
  if (CFG.database === 'postgres' && v.includes('\u0000')) {
    throw new HttpError(400, `${field} holds U+0000, which Postgres text cannot store`);
  }
  return v;
}

// now: UTC ISO 8601 with microseconds (the milliseconds are the wall clock's, the microseconds
// within them the monotonic clock's).
function now() {
  const iso = new Date().toISOString();  // 2026-11-21T11:08:01.123Z
  const us = Number((process.hrtime.bigint() / 1000n) % 1000n);
  return `${iso.slice(0, 23)}${String(us).padStart(3, '0')}Z`;
}

// ---------------------------------------------------------------------------------------
// The statements, as the SQLite path runs them (Postgres: ? becomes $1, $2, ...)

const SQL = {
  insertRequest: 'INSERT INTO requests (uid, ip, method, url, parameters, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
  getRequest: 'SELECT id, uid, ip, method, url, parameters, created_at, updated_at FROM requests WHERE id = ?',
  latestMetric: 'SELECT value FROM metrics WHERE instance = ? AND name = ? ORDER BY id DESC LIMIT 1',
  insertMetric: 'INSERT INTO metrics (instance, name, value, previous, created_at) VALUES (?, ?, ?, ?, ?)',
  insertItem: 'INSERT INTO items (payload, created_at) VALUES (?, ?)',
  getItem: 'SELECT id, payload, created_at FROM items WHERE id = ?',
  updateUser: 'UPDATE users SET departname = ?, updates = updates + 1 WHERE uid = ?',
  getUser: 'SELECT uid, username, departname, created FROM users WHERE uid = ?',
};

// The writes, one function per endpoint, run inside a transaction by store.write (on the
// request's connection, or by the writer): synchronous on SQLite (better-sqlite3's calls return
// their rows), async on Postgres (each statement awaits its round trip). `tx` has get (the first
// row or undefined), run ({changes}) and insert (the new row's id).
const SQLITE_WORK = {
  request(tx, a) {
    return tx.insert(SQL.insertRequest, a.uid, a.ip, 'POST', a.url, a.parameters, a.ts, a.ts);
  },
  metrics(tx, a) {  // LAB_METRICS_TXN=request: the five look-ups and inserts in one transaction
    const ids = [];
    for (const [name, value] of a.measurements) {
      const prev = tx.get(SQL.latestMetric, a.instance, name);
      ids.push(tx.insert(SQL.insertMetric, a.instance, name, value, prev ? prev.value : null, a.ts));
    }
    return ids;
  },
  metric(tx, a) {  // LAB_METRICS_TXN=record: one record's INSERT
    return tx.insert(SQL.insertMetric, a.instance, a.name, a.value, a.previous, a.ts);
  },
  item(tx, a) {
    return tx.insert(SQL.insertItem, a.payload, a.ts);
  },
  user(tx, a) {
    if (tx.run(SQL.updateUser, a.departname, a.uid).changes === 0) throw new HttpError(404, `user ${a.uid} not found`);
    return tx.get(SQL.getUser, a.uid);
  },
};

const PG_WORK = {
  request: (tx, a) => tx.insert(SQL.insertRequest, a.uid, a.ip, 'POST', a.url, a.parameters, a.ts, a.ts),
  async metrics(tx, a) {
    const ids = [];
    for (const [name, value] of a.measurements) {
      const prev = await tx.get(SQL.latestMetric, a.instance, name);
      ids.push(await tx.insert(SQL.insertMetric, a.instance, name, value, prev ? prev.value : null, a.ts));
    }
    return ids;
  },
  metric: (tx, a) => tx.insert(SQL.insertMetric, a.instance, a.name, a.value, a.previous, a.ts),
  item: (tx, a) => tx.insert(SQL.insertItem, a.payload, a.ts),
  async user(tx, a) {
    if ((await tx.run(SQL.updateUser, a.departname, a.uid)).changes === 0) throw new HttpError(404, `user ${a.uid} not found`);
    return tx.get(SQL.getUser, a.uid);
  },
};

// ---------------------------------------------------------------------------------------
// SQLite: better-sqlite3

// A synchronous sleep: what a busy handler's sqlite3_sleep does to the thread that called it
// (here the event loop's).
const SLEEP_CELL = new Int32Array(new SharedArrayBuffer(4));
function sleepSync(ms) {
  Atomics.wait(SLEEP_CELL, 0, 0, ms);
}

// BusyPolicy: LAB_BUSY. busy_timeout is SQLite's own (better-sqlite3's `timeout` option:
// sqlite3_busy_timeout); none sets it to 0. better-sqlite3 has no busy-handler hook, so
// sleep_poll and retries run in JavaScript with busy_timeout 0, around exactly the statements
// where SQLite would call a handler (the callers pass retry: BEGIN IMMEDIATE, the first statement
// after BEGIN DEFERRED, autocommit reads, COMMIT, the start-up pragmas); a read -> write upgrade
// is never retried.
class BusyPolicy {
  constructor(busy) {
    this.kind = busy.kind;
    this.n = busy.n;
    this.emulated = this.kind === 'sleep_poll' || this.kind === 'retries';
  }

  get timeout() {  // better-sqlite3's `timeout` option
    return this.kind === 'busy_timeout' ? this.n : 0;
  }

  toString() {
    return this.kind === 'none' ? 'none' : `${this.kind}:${this.n}`;
  }

  retry(f) {
    if (this.kind === 'sleep_poll') {  // sleep 1 ms per try until n ms have passed since the first try
      const start = performance.now();
      for (;;) {
        try {
          return f();
        } catch (e) {
          if (!isBusy(e) || performance.now() - start >= this.n) throw e;
          sleepSync(1);
        }
      }
    }
    if (this.kind === 'retries') {  // a handler returning count <= n, never sleeping (Rails 7.1 `retries:`)
      for (let count = 0; ; count++) {
        try {
          return f();
        } catch (e) {
          if (!isBusy(e) || count > this.n) throw e;
        }
      }
    }
    return f();
  }
}

// SqlLog (LAB_SQL_LOG=on) is Rails' development log in miniature (seed 001's `rails s`): one line
// per statement, "  SQL (0.3ms)  <sql>  [bound values]", appended to <LAB_DB>.sql.log right after
// the statement finished or failed: one write(2) per line (fs.writeSync) on an O_APPEND file. The
// process's one thread is its lock. With off there is none, and SqliteStore.exec checks for null.
class SqlLog {
  constructor(file) {
    try {
      this.fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o644);
    } catch (e) {
      throw new ConfigError(`LAB_SQL_LOG=on: cannot open '${file}' for append: ${oneLine(e)}`);
    }
  }

  static value(v) {
    if (v === null || v === undefined) return 'nil';
    if (typeof v === 'string') return JSON.stringify(v);
    if (Buffer.isBuffer(v)) return `<${v.length} bytes of binary data>`;
    return String(v);
  }

  write(sql, params, started) {
    let line = `  SQL (${(performance.now() - started).toFixed(1)}ms)  ${sql}`;
    if (params.length) line += `  [${params.map(SqlLog.value).join(', ')}]`;
    try {
      fs.writeSync(this.fd, line + '\n');
    } catch (e) {  // as Ruby's Logger: the request goes on
      console.error(`log writing failed. ${oneLine(e)}`);
    }
  }

  close() {
    fs.closeSync(this.fd);
  }
}

// Tx is one write transaction on a connection. Under BEGIN DEFERRED the first statement takes
// the first lock, so only it goes through an emulated busy policy; later ones (the read -> write
// upgrade) never do.
class SqliteTx {
  constructor(store, conn, deferred) {
    this.store = store;
    this.conn = conn;
    this.first = deferred;
  }

  step(sql, params, how) {
    if (!this.first) return this.store.exec(this.conn, sql, params, how, false);
    try {
      const out = this.store.exec(this.conn, sql, params, how, true);
      this.first = false;
      return out;
    } catch (e) {
      if (!isBusy(e)) this.first = false;
      throw e;
    }
  }

  get(sql, ...params) { return this.step(sql, params, 'get'); }
  run(sql, ...params) { return this.step(sql, params, 'run'); }
  insert(sql, ...params) { return Number(this.step(sql, params, 'run').lastInsertRowid); }
}

// SqliteStore: one better-sqlite3 connection per process for reads (and, on the pool path, the
// writes), plus the writer's own connection with LAB_WRITE_PATH=writer|batch. Every statement is
// prepared once per connection when it opens and goes through exec.
class SqliteStore {
  constructor(cfg) {
    this.cfg = cfg;
    this.name = 'sqlite';
    this.policy = new BusyPolicy(cfg.busy);
    this.begin = cfg.txnMode === 'immediate' ? 'BEGIN IMMEDIATE' : 'BEGIN DEFERRED';
    this.work = SQLITE_WORK;
    this.log = cfg.sqlLog === 'on' ? new SqlLog(`${cfg.db}.sql.log`) : null;
    this.conn = this.connect();
    this.wconn = cfg.writePath === 'pool' ? null : this.connect();
    this.pragmas = {};
    for (const [name] of cfg.pragmas) {
      const q = `PRAGMA ${name}`;
      const v = this.exec(this.conn, q, [], 'pluck', false);
      this.pragmas[name] = String(v).toLowerCase();
    }
    this.version = sqliteInfo().version;
    this.writer = this.wconn ? new Writer(this, cfg.writePath === 'batch') : null;
  }

  // connect opens the database (never creating one) with the busy policy's timeout, runs
  // LAB_PRAGMAS in order, and prepares the statements (a database without the schema fails here).
  connect() {
    const Database = require('better-sqlite3');
    const where = `LAB_DB='${this.cfg.db}'`;
    let db;
    try {
      db = new Database(this.cfg.db, { fileMustExist: true, timeout: this.policy.timeout });
    } catch (e) {
      throw new ConfigError(`${where}: ${oneLine(e)}`);
    }
    const conn = { db, stmts: new Map() };
    for (const [name, value] of this.cfg.pragmas) {
      try {
        this.exec(conn, `PRAGMA ${name} = ${value}`, [], 'run', true);
      } catch (e) {
        db.close();
        throw new ConfigError(`LAB_PRAGMAS: PRAGMA ${name} = ${value}: ${oneLine(e)}`);
      }
    }
    try {
      for (const q of [...Object.values(SQL), 'BEGIN DEFERRED', 'BEGIN IMMEDIATE', 'COMMIT', 'ROLLBACK',
        'SAVEPOINT job', 'RELEASE job', 'ROLLBACK TO job']) {
        conn.stmts.set(q, db.prepare(q));
      }
    } catch (e) {
      db.close();
      throw new ConfigError(`${where} has no lab schema (${oneLine(e)}): make it from servers/schema.sql`);
    }
    return conn;
  }

  // exec runs one statement on conn: how is 'run' (its info), 'get' (the first row or undefined)
  // or 'pluck' (the first column of the first row); retry: the emulated busy policy re-runs it on
  // SQLITE_BUSY/SQLITE_LOCKED. With LAB_SQL_LOG=on it is logged once, retries included.
  exec(conn, sql, params, how, retry) {
    let st = conn.stmts.get(sql);
    if (st === undefined) {
      st = conn.db.prepare(sql);
      if (how === 'pluck') st.pluck();
      else conn.stmts.set(sql, st);
    }
    const f = how === 'run' ? () => st.run(...params) : () => st.get(...params);
    if (this.log === null) return retry ? this.policy.retry(f) : f();
    const started = performance.now();
    try {
      return retry ? this.policy.retry(f) : f();
    } finally {
      this.log.write(sql, params, started);
    }
  }

  // transaction runs work(tx, args) in one transaction on conn: BEGIN, work, COMMIT; ROLLBACK on
  // any error. Synchronous from BEGIN to COMMIT: nothing else runs on this thread meanwhile.
  transaction(conn, work, args) {
    this.exec(conn, this.begin, [], 'run', true);
    try {
      const out = work(new SqliteTx(this, conn, this.begin === 'BEGIN DEFERRED'), args);
      this.exec(conn, 'COMMIT', [], 'run', true);
      return out;
    } catch (e) {
      if (conn.db.inTransaction) {
        try { this.exec(conn, 'ROLLBACK', [], 'run', false); } catch { /* the error that matters is e */ }
      }
      throw e;
    }
  }

  // write runs one endpoint's work as a transaction and returns once it is committed (pool:
  // here and now, on the process's connection; writer/batch: a promise the writer settles after
  // its COMMIT).
  write(kind, args) {
    if (this.writer) return this.writer.submit(kind, args);
    return this.transaction(this.conn, this.work[kind], args);
  }

  // read: an autocommit read (the busy policy applies, as SQLite calls a handler for it).
  read(sql, id) {
    return this.exec(this.conn, sql, [id], 'get', true);
  }

  // metricsRecords is ActiveRecord's shape (LAB_METRICS_TXN=record, pool only): for each
  // measurement the SELECT of the latest value as an autocommit read, then one transaction for
  // its INSERT. A failure at record k throws; records 1..k-1 stay committed, as in Rails.
  metricsRecords(a) {
    const ids = [];
    for (const [name, value] of a.measurements) {
      const prev = this.exec(this.conn, SQL.latestMetric, [a.instance, name], 'get', true);
      ids.push(this.transaction(this.conn, SQLITE_WORK.metric,
        { instance: a.instance, name, value, previous: prev ? prev.value : null, ts: a.ts }));
    }
    return ids;
  }

  // runJobs (the writer's): writer, each job its own transaction; batch (group commit), every job
  // inside SAVEPOINT job ... RELEASE job in one transaction, one COMMIT, then each job is
  // answered. A failing job is rolled back to its savepoint and answered alone with its error; a
  // failing BEGIN, savepoint or COMMIT fails every job of the batch (none is acknowledged).
  runJobs(jobs, batch) {
    if (!batch) {
      for (const j of jobs) {
        try { j.resolve(this.transaction(this.wconn, this.work[j.kind], j.args)); } catch (e) { j.reject(e); }
      }
      return;
    }
    const done = [];
    try {
      this.transaction(this.wconn, (tx) => {
        for (const j of jobs) {
          this.exec(this.wconn, 'SAVEPOINT job', [], 'run', false);
          try {
            done.push([j, this.work[j.kind](tx, j.args)]);
          } catch (e) {
            this.exec(this.wconn, 'ROLLBACK TO job', [], 'run', false);  // throws: the transaction is gone, the batch fails
            j.failed = e;
          }
          this.exec(this.wconn, 'RELEASE job', [], 'run', false);
        }
      });
    } catch (e) {
      for (const j of jobs) j.reject(j.failed || e);
      return;
    }
    for (const j of jobs) if (j.failed) j.reject(j.failed);
    for (const [j, out] of done) j.resolve(out);
  }

  classify(e) {
    return isBusy(e) ? LOCKED() : null;
  }

  async close() {
    if (this.writer) await this.writer.idle();
    this.conn.db.close();
    if (this.wconn) this.wconn.db.close();
    if (this.log) this.log.close();
  }
}

// ---------------------------------------------------------------------------------------
// Postgres: pg (node-postgres) and its pg.Pool

// rebind numbers the ? placeholders: $1, $2, ... (the statements have no ? in literals).
function rebind(q) {
  let n = 0;
  return q.replace(/\?/g, () => `$${++n}`);
}

class PgTx {
  constructor(store, client) {
    this.store = store;
    this.client = client;
  }

  async get(sql, ...params) { return (await this.store.query(this.client, sql, params)).rows[0]; }
  async run(sql, ...params) { return { changes: (await this.store.query(this.client, sql, params)).rowCount }; }
  async insert(sql, ...params) { return Number((await this.store.query(this.client, sql, params, true)).rows[0].id); }
}

// PgStore: a pg.Pool of LAB_READERS connections per process, every one opened before the server
// listens, serving reads and (pool) writes; writer/batch add the writer's own pg.Client. The
// transactions are the SQLite path's: BEGIN (READ COMMITTED), the statements, COMMIT / ROLLBACK
// sent as plain statements; new ids come from INSERT ... RETURNING id.
class PgStore {
  constructor(cfg) {
    this.cfg = cfg;
    this.name = 'postgres';
    this.pg = require('pg');
    // bigint (ids, uids) as numbers: the lab's ids stay far below 2^53
    this.pg.types.setTypeParser(20, (v) => { const n = Number(v); return Number.isSafeInteger(n) ? n : v; });
    this.work = PG_WORK;
    this.statements = new Map();  // SQL text -> pg's named statement, prepared once per connection
    this.pragmas = null;
  }

  async open() {
    const { cfg } = this;
    const where = 'LAB_DATABASE_URL: cannot connect';
    // A checkout waits at most 30 s for a free connection (then 503 database unavailable).
    this.pool = new this.pg.Pool({ ...cfg.pg, max: cfg.readers, idleTimeoutMillis: 0,
      connectionTimeoutMillis: Math.max(cfg.pg.connectionTimeoutMillis || 0, 30000) });
    this.pool.on('error', () => { /* an idle connection lost: the pool drops it and opens another when needed */ });
    try {
      const clients = [];
      try {
        for (let i = 0; i < cfg.readers; i++) clients.push(await this.connectWithin(() => this.pool.connect()));
      } finally {
        for (const c of clients) c.release();
      }
      this.version = (await this.pool.query('SHOW server_version')).rows[0].server_version;
      if (cfg.writePath !== 'pool') this.wclient = await this.connectWithin(() => this.newClient());
    } catch (e) {
      await this.pool.end().catch(() => {});
      const hint = /timeout/i.test(oneLine(e)) ? ` (a pool of ${cfg.readers} connections, LAB_READERS; Postgres' max_connections?)` : '';
      throw new ConfigError(`${where}: ${oneLine(e)}${hint}`);
    }
    this.writer = this.wclient ? new Writer(this, cfg.writePath === 'batch') : null;
  }

  // connectWithin: a connection within the string's connect_timeout (pg.Pool's own timeout is the
  // 30 s a checkout may wait).
  connectWithin(connect) {
    const ms = this.cfg.pg.connectionTimeoutMillis || 0;
    if (!ms) return connect();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms (connect_timeout)`)), ms);
      connect().then((c) => { clearTimeout(timer); resolve(c); },
        (e) => { clearTimeout(timer); reject(e); });
    });
  }

  async newClient() {
    const client = new this.pg.Client(this.cfg.pg);
    client.on('error', () => { client.labBroken = true; });
    await client.connect();
    return client;
  }

  // checkTables (start-up, once per server): the four tables exist.
  static async checkTables(cfg) {
    const pg = require('pg');
    const client = new pg.Client(cfg.pg);
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (e) {
      throw new ConfigError(`LAB_DATABASE_URL: cannot connect: ${oneLine(e)}`);
    }
    try {
      const found = (await client.query('SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass(t) IS NOT NULL', [TABLES])).rows.map((r) => r.t);
      const missing = TABLES.filter((t) => !found.includes(t));
      if (missing.length) {
        throw new ConfigError(`LAB_DATABASE_URL: the database lacks tables ${missing.join(', ')} of servers/schema.postgres.sql`);
      }
    } catch (e) {
      if (e instanceof ConfigError) throw e;
      throw new ConfigError(`LAB_DATABASE_URL: cannot read the schema: ${oneLine(e)}`);
    } finally {
      await client.end().catch(() => {});
    }
  }

  // query runs one of SQL's statements as pg's named (prepared once per connection) statement;
  // returning: the INSERT with RETURNING id. An error that is not Postgres' own (a lost or closed
  // connection) is marked so that classify makes it 503 database unavailable.
  async query(client, sql, params, returning) {
    const key = returning ? `${sql} RETURNING id` : sql;
    let st = this.statements.get(key);
    if (st === undefined) {
      st = { name: `lab_${this.statements.size + 1}`, text: rebind(key) };
      this.statements.set(key, st);
    }
    try {
      return await client.query({ name: st.name, text: st.text, values: params });
    } catch (e) {
      throw this.mark(e);
    }
  }

  async simple(client, sql) {
    try {
      return await client.query(sql);
    } catch (e) {
      throw this.mark(e);
    }
  }

  mark(e) {
    if (!(e instanceof this.pg.DatabaseError) && e && typeof e === 'object') e.labLost = true;
    return e;
  }

  async checkout() {
    try {
      return await this.pool.connect();
    } catch (e) {
      throw this.mark(e);
    }
  }

  // classify: SQLSTATE 40001 (serialization failure), 40P01 (deadlock), 55P03 (lock not available)
  // are "database is locked"; class 08, 57P01-57P03 (admin or crash shutdown, cannot connect now)
  // and an error without a SQLSTATE from a lost connection are "database unavailable".
  classify(e) {
    if (e instanceof this.pg.DatabaseError) {
      const c = e.code || '';
      if (c === '40001' || c === '40P01' || c === '55P03') return LOCKED();
      if (c.startsWith('08') || c === '57P01' || c === '57P02' || c === '57P03') return UNAVAILABLE();
      return null;
    }
    return e && e.labLost ? UNAVAILABLE() : null;
  }

  // broken: after a failed transaction, a connection that cannot run another (lost, or still in
  // the transaction because its ROLLBACK failed) is destroyed instead of reused.
  broken(client, e) {
    return client.labBroken || e.rollbackFailed || this.classify(e)?.message === 'database unavailable';
  }

  async transaction(client, work, args) {
    await this.simple(client, 'BEGIN');
    try {
      const out = await work(new PgTx(this, client), args);
      await this.simple(client, 'COMMIT');
      return out;
    } catch (e) {
      try { await this.simple(client, 'ROLLBACK'); } catch { if (e && typeof e === 'object') e.rollbackFailed = true; }
      throw e;
    }
  }

  async withClient(fn) {
    const client = await this.checkout();
    try {
      const out = await fn(client);
      client.release();
      return out;
    } catch (e) {
      client.release(this.broken(client, e) ? true : undefined);
      throw e;
    }
  }

  write(kind, args) {
    if (this.writer) return this.writer.submit(kind, args);
    return this.withClient((client) => this.transaction(client, this.work[kind], args));
  }

  async read(sql, id) {
    return this.withClient(async (client) => (await this.query(client, sql, [id])).rows[0]);
  }

  metricsRecords(a) {
    return this.withClient(async (client) => {
      const ids = [];
      for (const [name, value] of a.measurements) {
        const prev = (await this.query(client, SQL.latestMetric, [a.instance, name])).rows[0];
        ids.push(await this.transaction(client, PG_WORK.metric,
          { instance: a.instance, name, value, previous: prev ? prev.value : null, ts: a.ts }));
      }
      return ids;
    });
  }

  // writerClient: the writer's connection; one Postgres lost is replaced before the next job.
  async writerClient() {
    if (!this.wclient) this.wclient = await this.newClient().catch((e) => { throw this.mark(e); });
    return this.wclient;
  }

  dropWriterClient(e) {
    if (this.wclient && this.broken(this.wclient, e)) {
      this.wclient.end().catch(() => {});
      this.wclient = null;
    }
  }

  // runJobs: the SQLite path's, awaiting each statement (see SqliteStore.runJobs).
  async runJobs(jobs, batch) {
    let client;
    try {
      client = await this.writerClient();
    } catch (e) {
      for (const j of jobs) j.reject(e);
      return;
    }
    if (!batch) {
      for (const j of jobs) {
        try {
          j.resolve(await this.transaction(client, this.work[j.kind], j.args));
        } catch (e) {
          this.dropWriterClient(e);
          j.reject(e);
        }
      }
      return;
    }
    const done = [];
    try {
      await this.transaction(client, async (tx) => {
        for (const j of jobs) {
          await this.simple(client, 'SAVEPOINT job');
          try {
            done.push([j, await this.work[j.kind](tx, j.args)]);
          } catch (e) {
            await this.simple(client, 'ROLLBACK TO SAVEPOINT job');
            j.failed = e;
          }
          await this.simple(client, 'RELEASE SAVEPOINT job');
        }
      });
    } catch (e) {
      this.dropWriterClient(e);
      for (const j of jobs) j.reject(j.failed || e);
      return;
    }
    for (const j of jobs) if (j.failed) j.reject(j.failed);
    for (const [j, out] of done) j.resolve(out);
  }

  versions() {
    return { pg: packageVersion('pg'), 'pg-pool': packageVersion('pg-pool') };
  }

  async close() {
    if (this.writer) await this.writer.idle();
    if (this.wclient) await this.wclient.end().catch(() => {});
    await this.pool.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------
// The writer (LAB_WRITE_PATH=writer|batch): a queue drained on the event loop

// Writer: requests queue their writes (submit) and wait for the promise it settles after the
// job's COMMIT. It is not a thread (a process has one): a loop on the event loop takes one job
// (writer) or everything queued (batch) and runs it on the writer's connection (SQLite: the whole
// transaction synchronously, COMMIT's fsync included; Postgres: awaiting each round trip), then
// yields a turn of the event loop (setImmediate) so that responses go out and the requests read
// meanwhile queue their jobs before the next batch is taken.
class Writer {
  constructor(store, batch) {
    this.store = store;
    this.batch = batch;
    this.queue = [];
    this.running = false;
    this.waiters = [];
    this.transactions = 0;
    this.jobs = 0;
    this.sizes = new Map();
  }

  submit(kind, args) {
    return new Promise((resolve, reject) => {
      this.queue.push({ kind, args, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => this.loop());
      }
    });
  }

  async loop() {
    try {
      while (this.queue.length) {
        const jobs = this.batch ? this.queue.splice(0) : [this.queue.shift()];
        this.transactions++;
        this.jobs += jobs.length;
        this.sizes.set(jobs.length, (this.sizes.get(jobs.length) || 0) + 1);
        try {
          await this.store.runJobs(jobs, this.batch);
        } catch (e) {  // not expected (runJobs answers every job): never leave one waiting
          for (const j of jobs) j.reject(e);
        }
        await new Promise(setImmediate);
      }
    } finally {
      this.running = false;
      for (const w of this.waiters.splice(0)) w();
    }
  }

  // idle: resolves once everything queued has been answered (shutdown).
  idle() {
    return this.running || this.queue.length ? new Promise((resolve) => this.waiters.push(resolve)) : Promise.resolve();
  }

  counts() {
    const sizes = {};
    for (const [k, v] of [...this.sizes].sort((a, b) => a[0] - b[0])) sizes[String(k)] = v;
    return { transactions: this.transactions, jobs: this.jobs, sizes };
  }
}

// ---------------------------------------------------------------------------------------
// The request counter, summed over every process

// Counter: requests this process answered. Alone (LAB_PROCESSES=1) it is a number; under the
// cluster every worker keeps its count in its own 8-byte slot of one file in LAB_RUNTIME_DIR (one
// pwrite per response), and /health reads the whole file and sums the slots.
class Counter {
  constructor(file, slot, slots) {
    this.n = 0;
    this.fd = null;
    if (file) {
      this.fd = fs.openSync(file, 'r+');
      this.slot = slot;
      this.buf = Buffer.alloc(8);
      this.all = Buffer.alloc(8 * slots);
      fs.readSync(this.fd, this.buf, 0, 8, 8 * slot);  // a worker forked again continues its slot
      this.n = this.buf.readDoubleLE(0);
    }
  }

  bump() {
    this.n++;
    if (this.fd !== null) {
      this.buf.writeDoubleLE(this.n);
      fs.writeSync(this.fd, this.buf, 0, 8, 8 * this.slot);
    }
  }

  total() {
    if (this.fd === null) return this.n;
    fs.readSync(this.fd, this.all, 0, this.all.length, 0);
    let sum = 0;
    for (let i = 0; i < this.all.length; i += 8) sum += this.all.readDoubleLE(i);
    return sum;
  }
}

// ---------------------------------------------------------------------------------------
// Handlers

let CFG = null;
let STORE = null;
let TEMPLATES = null;
let VERSIONS = null;

function health(req, res) {
  const emulated = {};
  if (STORE.policy && STORE.policy.emulated) {
    emulated.busy = `${STORE.policy} emulated in JavaScript (better-sqlite3 has no busy-handler hook, only its timeout option, sqlite3_busy_timeout; here 0): BEGIN IMMEDIATE, the first statement after BEGIN DEFERRED, autocommit reads, COMMIT and the start-up pragmas are retried on SQLITE_BUSY/SQLITE_LOCKED${STORE.policy.kind === 'sleep_poll' ? ', sleeping 1 ms per try synchronously (Atomics.wait: the event loop waits, as in a real handler)' : ''}`;
  }
  const sqlite = CFG.database === 'sqlite';
  sendJSON(req, res, 200, {
    server: SERVER,
    versions: VERSIONS,
    sqlite_version: sqliteInfo().version,
    sqlite_compile_options: sqliteInfo().options,
    database: CFG.database,
    database_version: STORE.version,
    pid: process.pid,
    knobs: {
      database: CFG.database,
      pragmas: STORE.pragmas,
      txn_mode: sqlite ? CFG.txnMode : null,
      busy: sqlite ? String(STORE.policy) : null,
      write_path: CFG.writePath,
      processes: CFG.processes,
      threads: CFG.threads,
      readers: CFG.readers,
      metrics_txn: CFG.metricsTxn,
      cache: CFG.cache,
      sql_log: CFG.sqlLog,
    },
    emulated,
    requests_handled: counter.total(),
    writer: STORE.writer ? STORE.writer.counts() : null,
  });
}

function hello(req, res) {
  send(req, res, 200, TEXT, 'Hello, World!');
}

// GET /delay/{ms}: a calibration endpoint for load generators: a timer on the event loop (no
// database, no CPU), then exactly /hello's answer.
function delay(req, res, ms) {
  if (!/^[0-9]{1,20}$/.test(ms) || Number(ms) > MAX_DELAY_MS) {
    throw new HttpError(400, `ms must be an integer 0..${MAX_DELAY_MS}`);
  }
  setTimeout(() => hello(req, res), Number(ms));
}

// POST /requests: the Rails scaffold's create (seed 000).
async function createRequest(req, res) {
  let params = await readJSON(req, false);
  if (params === undefined) params = {};
  if (!isObject(params)) throw new HttpError(400, 'the body must be empty or a JSON object');
  let ip = req.socket.remoteAddress || '';
  if (ip.startsWith('::ffff:')) ip = ip.slice(7);
  const ts = now();
  const id = await STORE.write('request', { uid: crypto.randomUUID(), ip, url: `http://${req.headers.host || ''}/requests`,
    parameters: JSON.stringify(params), ts });
  const location = `/requests/${id}`;
  send(req, res, 302, HTML, `<html><body>You are being <a href="${location}">redirected</a>.</body></html>`, { Location: location });
}

// GET /requests/{id}: the show page.
async function showRequest(req, res, raw) {
  const id = pathId(raw, 'id');
  const row = await STORE.read(SQL.getRequest, id);
  if (!row) throw new HttpError(404, `request ${raw} not found`);
  send(req, res, 200, HTML, TEMPLATES.request.render(row));
}

// POST /metrics: five SELECT-latest + INSERT pairs in one transaction (seed 001), or with
// LAB_METRICS_TXN=record one transaction per INSERT (STORE.metricsRecords).
async function createMetrics(req, res) {
  const body = await readJSON(req, false);
  let instance;
  let measurements;
  if (body === undefined) {  // an empty body: the article's load_test=true
    instance = `instance-${1 + Math.floor(Math.random() * 10)}`;
    measurements = METRIC_NAMES.map((name) => [name, Math.random() * 100]);
  } else {
    if (!isObject(body)) throw new HttpError(400, 'the body must be a JSON object');
    instance = shortString(body.instance, 'instance');
    const ms = body.measurements;
    if (!Array.isArray(ms) || ms.length !== 5) {
      throw new HttpError(400, 'measurements must be a list of exactly 5 {name, value} objects');
    }
    measurements = ms.map((m) => {
      if (!isObject(m) || typeof m.value !== 'number' || !Number.isFinite(m.value)) {
        throw new HttpError(400, 'each measurement needs a name and a finite numeric value');
      }
      return [shortString(m.name, 'measurement name'), m.value];
    });
  }
  const args = { instance, measurements, ts: now() };
  const ids = CFG.metricsTxn === 'record' ? await STORE.metricsRecords(args) : await STORE.write('metrics', args);
  sendJSON(req, res, 201, `{"instance":${JSON.stringify(instance)},"ids":[${ids.join(',')}]}`);
}

// POST /items (seed 002).
async function createItem(req, res) {
  const body = await readJSON(req, true);
  if (!isObject(body) || typeof body.payload !== 'string') {
    throw new HttpError(400, 'the body must be {"payload": "<string>"}');
  }
  if (Buffer.byteLength(body.payload, 'utf8') > MAX_PAYLOAD) throw new HttpError(400, `payload over ${MAX_PAYLOAD} bytes`);
  const payload = storable(body.payload, 'payload');
  const id = await STORE.write('item', { payload, ts: now() });
  sendJSON(req, res, 201, `{"id":${id}}`);
}

// GET /items/{id}.
async function showItem(req, res, raw) {
  const id = pathId(raw, 'id');
  const row = await STORE.read(SQL.getItem, id);
  if (!row) throw new HttpError(404, `item ${raw} not found`);
  sendJSON(req, res, 200, `{"id":${row.id},"payload":${JSON.stringify(row.payload)},"created_at":${JSON.stringify(row.created_at)}}`);
}

// GET /users/{uid} and GET /users/{uid}/page (seed 004).
async function showUser(req, res, raw, page) {
  const uid = pathId(raw, 'uid');
  const row = await STORE.read(SQL.getUser, uid);
  if (!row) throw new HttpError(404, `user ${raw} not found`);
  send(req, res, 200, HTML, (page ? TEMPLATES.userPage : TEMPLATES.user).render(row));
}

// POST /users/{uid}: UPDATE then re-SELECT in one transaction.
async function updateUser(req, res, raw) {
  const uid = pathId(raw, 'uid');
  const body = await readJSON(req, true);
  if (!isObject(body)) throw new HttpError(400, 'the body must be {"departname": "<string>"}');
  const departname = shortString(body.departname, 'departname');
  const row = await STORE.write('user', { departname, uid });
  send(req, res, 200, HTML, TEMPLATES.user.render(row));
}

// ---------------------------------------------------------------------------------------
// Routing: the raw path, as sent (Node never cleans it). One with an empty, "." or ".." segment
// names no resource: 404 before routing, as in every stack; "%2e%2e" is an ordinary segment.

const UNCLEAN = /\/\/|\/\.\.?(?:\/|$)/;
const GET = 'GET, HEAD';

// route: the handlers of a path by method, with the Allow header of its 405 and its {param}
// (never empty: "/items/" and "/delay/" match no route).
function route(p) {
  const s = p.split('/');
  if (s.length === 2) {
    switch (s[1]) {
      case 'health': return { allow: GET, GET: health };
      case 'hello': return { allow: GET, GET: hello };
      case 'requests': return { allow: 'POST', POST: createRequest };
      case 'metrics': return { allow: 'POST', POST: createMetrics };
      case 'items': return { allow: 'POST', POST: createItem };
    }
  } else if (s.length === 3 && s[2] !== '') {
    switch (s[1]) {
      case 'delay': return { allow: GET, GET: delay, param: s[2] };
      case 'requests': return { allow: GET, GET: showRequest, param: s[2] };
      case 'items': return { allow: GET, GET: showItem, param: s[2] };
      case 'users': return { allow: 'GET, HEAD, POST', GET: showUser, POST: updateUser, param: s[2] };
    }
  } else if (s.length === 4 && s[1] === 'users' && s[2] !== '' && s[3] === 'page') {
    return { allow: GET, GET: (req, res, uid) => showUser(req, res, uid, true), param: s[2] };
  }
  return null;
}

// onRequest: every request. A handler's error (thrown or rejected) is answered by fail: never a
// crash, never a stack trace in a body.
function onRequest(req, res) {
  let p = req.url;
  if (p[0] !== '/') {  // absolute-form ("http://host/path"): its path
    const m = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*(.*)$/.exec(p);
    p = m && m[1] ? m[1] : '/';
  }
  const q = p.indexOf('?');
  if (q >= 0) p = p.slice(0, q);
  req.labPath = p;
  try {
    const r = UNCLEAN.test(p) ? null : route(p);
    if (r === null) return sendJSON(req, res, 404, { error: 'not found' });
    const h = r[req.method === 'HEAD' ? 'GET' : req.method];
    if (h === undefined) return sendJSON(req, res, 405, { error: 'method not allowed' }, { Allow: r.allow });
    const out = h(req, res, r.param);
    if (out && typeof out.then === 'function') out.catch((e) => fail(req, res, e));
  } catch (e) {
    fail(req, res, e);
  }
}

// ---------------------------------------------------------------------------------------
// Start-up, the cluster, shutdown

function loadTemplates(dir) {
  return {
    request: new Template(dir, 'request.html', ['id', 'uid', 'ip', 'method', 'url', 'parameters', 'created_at', 'updated_at']),
    user: new Template(dir, 'user.html', ['uid', 'username', 'departname', 'created']),
    userPage: new Template(dir, 'user_page.html', ['uid', 'username', 'departname', 'created']),
  };
}

// checkDatabase (the cluster's primary, before it forks): what a start can refuse, checked once,
// so that a bad start is one `lab:` line before any worker runs (every pragma applied on a
// connection, the schema's statements prepared; Postgres reachable with the four tables).
async function checkDatabase(cfg) {
  if (cfg.database === 'postgres') return PgStore.checkTables(cfg);
  const check = new SqliteStore({ ...cfg, sqlLog: 'off', writePath: 'pool' });
  await check.close();
  if (cfg.sqlLog === 'on') new SqlLog(`${cfg.db}.sql.log`).close();  // each worker opens its own
  return undefined;
}

async function openStore(cfg) {
  if (cfg.database === 'postgres') {
    const store = new PgStore(cfg);
    await store.open();
    return store;
  }
  return new SqliteStore(cfg);
}

// serve: one process that serves (alone, or a cluster worker): its store, then its server.
async function serve(cfg, counterFile, slot) {
  CFG = cfg;
  TEMPLATES = loadTemplates(cfg.templates);
  counter = new Counter(counterFile, slot, cfg.processes);
  STORE = await openStore(cfg);
  VERSIONS = { node: process.versions.node, 'node:http': process.versions.node, llhttp: process.versions.llhttp,
    'better-sqlite3': packageVersion('better-sqlite3'), ...(cfg.database === 'postgres' ? STORE.versions() : {}) };
  const server = http.createServer(onRequest);
  // Expect: 100-continue (curl sends it for bodies over 1 MB): a body declared over 1 MiB is
  // refused before the client sends it, on a connection then closed (its unsent body would
  // otherwise be read as the next request); any other is told to continue.
  server.on('checkContinue', (req, res) => {
    if (Number(req.headers['content-length']) > MAX_BODY) {
      req.labPath = req.url;
      sendJSON(req, res, 413, { error: `request body over ${MAX_BODY} bytes` }, { Connection: 'close' });
      return;
    }
    res.writeContinue();
    onRequest(req, res);
  });
  server.on('clientError', (err, socket) => {  // a request Node's parser refused: JSON, not its bare 400
    if (!socket.writable || err.code === 'ECONNRESET') return socket.destroy();
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = JSON.stringify({ error: status === 431 ? 'request header fields too large' : status === 408 ? 'request timeout' : 'bad request' });
    socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${body.length}\r\nDate: ${new Date().toUTCString()}\r\nConnection: close\r\n\r\n${body}`);
  });
  await new Promise((resolve, reject) => {
    server.once('error', (e) => reject(new ConfigError(`LAB_HOST=${cfg.host} LAB_PORT=${cfg.port}: ${oneLine(e)}`)));
    server.listen({ host: cfg.host, port: cfg.port }, resolve);
  });
  return server;
}

// stop (SIGTERM, SIGINT): stop accepting, finish the requests in flight (their writes
// included: idle keep-alive connections are closed, busy ones after their response), let the
// writer commit and answer what is queued, close the connections, exit 0.
function stopper(server) {
  let started = false;
  return async () => {
    if (started) return;
    started = true;
    shuttingDown = true;
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeIdleConnections();
    const idle = setInterval(() => server.closeIdleConnections(), 50);
    const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    await closed;
    clearInterval(idle);
    clearTimeout(force);
    await STORE.close();
    process.exit(0);
  };
}

function startupFailed(e) {
  if (e instanceof ConfigError) return oneLine(e);
  return `start-up failed: ${oneLine(e)}`;
}

// main, alone: LAB_PROCESSES=1 (the default) serves in this very process.
async function single(cfg) {
  if (cfg.database === 'postgres') await PgStore.checkTables(cfg);  // SQLite's schema: its statements prepare
  const server = await serve(cfg, null, 0);
  const stop = stopper(server);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// primary: LAB_PROCESSES > 1. It checks the configuration and the database, makes the counters'
// file, forks the workers one after the other (each opens its own connections, then listens) and
// serves nothing. A worker that dies afterwards is forked again; on SIGTERM/SIGINT the workers
// stop (they are signalled too) and the primary exits once they have. A worker whose primary is
// gone (even SIGKILLed) exits at once: Node's cluster ends a worker whose IPC channel closes.
async function primary(cfg) {
  await checkDatabase(cfg);
  let dir = process.env.LAB_RUNTIME_DIR;
  let own = false;
  if (!dir || !fs.existsSync(dir)) {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lab-node-sqlite-'));
    own = true;
  }
  const file = path.join(dir, `node-sqlite-${process.pid}.counts`);
  fs.writeFileSync(file, Buffer.alloc(8 * cfg.processes));
  const cleanup = () => {
    try { if (own) fs.rmSync(dir, { recursive: true, force: true }); else fs.rmSync(file, { force: true }); } catch { /* best effort */ }
  };
  let stopping = false;
  let ready = false;
  const workers = new Map();  // slot -> worker

  const fork = (slot) => new Promise((resolve, reject) => {
    const w = cluster.fork({ LAB_WORKER_SLOT: String(slot), LAB_COUNTER_FILE: file });
    workers.set(slot, w);
    let failure = null;
    w.on('message', (m) => { if (m && m.lab) failure = m.lab; });
    w.once('listening', () => resolve(w));
    w.once('exit', (code, signal) => {
      if (workers.get(slot) === w) workers.delete(slot);
      if (stopping) {
        if (workers.size === 0) { cleanup(); process.exit(0); }
      } else if (!ready) {
        reject(new ConfigError(failure || `worker ${slot} exited (${signal || code}) before it listened`));
      } else {
        console.error(`${SERVER}: worker ${slot} (pid ${w.process.pid}) exited (${signal || code}); forking another`);
        setTimeout(() => { if (!stopping) fork(slot).catch(() => {}); }, 100);
      }
    });
  });

  const stop = () => {
    if (stopping) return;
    stopping = true;
    if (workers.size === 0) { cleanup(); process.exit(0); }
    for (const w of workers.values()) w.process.kill('SIGTERM');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  try {
    for (let slot = 0; slot < cfg.processes; slot++) {
      await fork(slot);
      if (stopping) return;
    }
  } catch (e) {
    for (const w of workers.values()) w.process.kill('SIGKILL');
    cleanup();
    throw e;
  }
  ready = true;
}

// worker: one process of the cluster (its primary checked the configuration).
async function worker(cfg) {
  let server;
  try {
    server = await serve(cfg, process.env.LAB_COUNTER_FILE, Number(process.env.LAB_WORKER_SLOT));
  } catch (e) {
    process.send({ lab: startupFailed(e) }, () => process.exit(1));
    return;
  }
  const stop = stopper(server);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

async function main() {
  let cfg;
  try {
    cfg = loadConfig();
    if (!cluster.isWorker) loadTemplates(cfg.templates);
  } catch (e) {
    if (cluster.isWorker) process.exit(1);
    console.error(`lab: ${startupFailed(e)}`);
    process.exit(2);
  }
  try {
    if (cluster.isWorker) await worker(cfg);
    else if (cfg.processes > 1) await primary(cfg);
    else await single(cfg);
  } catch (e) {
    console.error(`lab: ${startupFailed(e)}`);
    process.exit(e instanceof ConfigError ? 2 : 1);
  }
}

main();
