//! SQLite Production Lab server: Axum + rusqlite (bundled SQLite).
//!
//! The contract is ../openapi.yaml and ../README.md. Blocking SQLite work never runs on the
//! tokio workers: reads (and, with LAB_WRITE_PATH=pool, writes) run through `spawn_blocking` on
//! a pool of LAB_READERS connections; `writer` and `batch` send every write to one dedicated
//! std::thread over a channel and answer through a oneshot only after COMMIT.

use std::{
    env,
    fs::{File, OpenOptions},
    io::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{ConnectInfo, DefaultBodyLimit, FromRequest, FromRequestParts, Request, State},
    http::{HeaderMap, StatusCode, Uri, header, request::Parts},
    middleware::{self, Next},
    response::{Html, IntoResponse, Response},
    routing::{get, post},
    serve::ListenerExt,
};
use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, ToSql, params,
    types::{ToSqlOutput, ValueRef},
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, oneshot};

const BODY_LIMIT: usize = 1_048_576;
const PAYLOAD_LIMIT: usize = 65_536;
// As servers/shared.toml declares them, with the pragma values below (tests/test_contract.py checks).
const METRIC_NAMES: [&str; 5] = ["cpu", "memory", "disk", "load", "requests"];
const ALLOWED_PRAGMAS: &str = "cache_size, foreign_keys, journal_mode, journal_size_limit, mmap_size, synchronous, temp_store, wal_autocheckpoint";

// ---------------------------------------------------------------------------------------------
// Configuration (LAB_* environment variables); every failure is one "lab: " line and exit 1.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum TxnMode {
    Deferred,
    Immediate,
}

#[derive(Clone, Copy)]
enum Busy {
    Timeout(u64),
    SleepPoll(u64),
    Retries(i32),
    Off,
}

#[derive(Clone, Copy, PartialEq)]
enum WritePath {
    Pool,
    Writer,
    Batch,
}

/// LAB_METRICS_TXN: POST /metrics in one transaction, or one per record (ActiveRecord).
#[derive(Clone, Copy, PartialEq)]
enum MetricsTxn {
    Request,
    Record,
}

struct Config {
    host: String,
    port: u16,
    db: PathBuf,
    pragmas: Vec<(String, String)>,
    txn_mode: TxnMode,
    busy: Busy,
    write_path: WritePath,
    processes: u64,
    threads: usize,
    readers: usize,
    templates: PathBuf,
    metrics_txn: MetricsTxn,
    shared_cache: bool,
    sql_log: bool,
}

fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn positive(name: &str, default: usize) -> Result<usize, String> {
    match var(name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(format!("{name}='{v}' is not an integer >= 1")),
        },
    }
}

fn parse_pragmas(spec: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            return Err(format!("LAB_PRAGMAS: '{item}' is not name=value"));
        };
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        let keywords: &[&str] = match name.as_str() {
            "journal_mode" => &["delete", "truncate", "persist", "memory", "wal", "off"],
            "synchronous" => &["off", "normal", "full", "extra", "0", "1", "2", "3"],
            "temp_store" => &["default", "file", "memory", "0", "1", "2"],
            "foreign_keys" => &["on", "off", "true", "false", "0", "1"],
            "cache_size" | "mmap_size" | "journal_size_limit" | "wal_autocheckpoint" => {
                if value.parse::<i64>().is_err() {
                    return Err(format!("LAB_PRAGMAS: {name}='{value}' is not an integer"));
                }
                &[]
            }
            _ => {
                return Err(format!(
                    "LAB_PRAGMAS: pragma '{name}' is not allowed (allowed: {ALLOWED_PRAGMAS})"
                ));
            }
        };
        if !keywords.is_empty() && !keywords.contains(&value.as_str()) {
            return Err(format!(
                "LAB_PRAGMAS: {name}='{value}' is not one of {}",
                keywords.join("|")
            ));
        }
        out.push((name, value));
    }
    Ok(out)
}

fn parse_busy(spec: &str) -> Result<Busy, String> {
    let bad = || {
        format!(
            "LAB_BUSY='{spec}' is not one of busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none"
        )
    };
    if spec == "none" {
        return Ok(Busy::Off);
    }
    let (kind, n) = spec.split_once(':').ok_or_else(bad)?;
    let n: i32 = n.parse().ok().filter(|n| *n >= 0).ok_or_else(bad)?;
    match kind {
        "busy_timeout" => Ok(Busy::Timeout(n as u64)),
        "sleep_poll" => Ok(Busy::SleepPoll(n as u64)),
        "retries" => Ok(Busy::Retries(n)),
        _ => Err(bad()),
    }
}

impl Busy {
    fn describe(self) -> String {
        match self {
            Busy::Timeout(ms) => format!("busy_timeout:{ms}"),
            Busy::SleepPoll(ms) => format!("sleep_poll:{ms}"),
            Busy::Retries(n) => format!("retries:{n}"),
            Busy::Off => "none".into(),
        }
    }
}

impl Config {
    fn from_env() -> Result<Config, String> {
        let port = match var("LAB_PORT") {
            None => return Err("LAB_PORT is required (1-65535)".into()),
            Some(v) => v
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p >= 1)
                .ok_or_else(|| format!("LAB_PORT='{v}' is not a port number (1-65535)"))?,
        };
        let db = PathBuf::from(
            var("LAB_DB").ok_or("LAB_DB is required (a database made from schema.sql)")?,
        );
        if !db.is_file() {
            return Err(format!(
                "LAB_DB='{}' does not exist (make it from schema.sql)",
                db.display()
            ));
        }
        let pragmas = parse_pragmas(&var("LAB_PRAGMAS").unwrap_or_default())?;
        let txn_mode = match var("LAB_TXN_MODE").as_deref() {
            None | Some("deferred") => TxnMode::Deferred,
            Some("immediate") => TxnMode::Immediate,
            Some(v) => {
                return Err(format!(
                    "LAB_TXN_MODE='{v}' is not one of deferred|immediate"
                ));
            }
        };
        let busy = parse_busy(var("LAB_BUSY").as_deref().unwrap_or("busy_timeout:5000"))?;
        let write_path = match var("LAB_WRITE_PATH").as_deref() {
            None | Some("pool") => WritePath::Pool,
            Some("writer") => WritePath::Writer,
            Some("batch") => WritePath::Batch,
            Some(v) => {
                return Err(format!(
                    "LAB_WRITE_PATH='{v}' is not one of pool|writer|batch"
                ));
            }
        };
        let metrics_txn = match var("LAB_METRICS_TXN").as_deref() {
            None | Some("request") => MetricsTxn::Request,
            Some("record") => MetricsTxn::Record,
            Some(v) => {
                return Err(format!(
                    "LAB_METRICS_TXN='{v}' is not one of request|record"
                ));
            }
        };
        if metrics_txn == MetricsTxn::Record && write_path != WritePath::Pool {
            let path = var("LAB_WRITE_PATH").unwrap_or_default();
            return Err(format!(
                "LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool (got {path}: each record commits on the request's pooled connection)"
            ));
        }
        let shared_cache = match var("LAB_CACHE").as_deref() {
            None | Some("private") => false,
            Some("shared") => true,
            Some(v) => return Err(format!("LAB_CACHE='{v}' is not one of private|shared")),
        };
        let sql_log = match var("LAB_SQL_LOG").as_deref() {
            None | Some("off") => false,
            Some("on") => true,
            Some(v) => return Err(format!("LAB_SQL_LOG='{v}' is not one of off|on")),
        };
        let processes = positive("LAB_PROCESSES", 1)? as u64;
        if processes > 1 {
            let path = var("LAB_WRITE_PATH").unwrap_or_default();
            if write_path != WritePath::Pool {
                return Err(format!(
                    "LAB_WRITE_PATH={path} needs LAB_PROCESSES=1 (one writer thread serves one process)"
                ));
            }
            return Err(format!(
                "LAB_PROCESSES={processes}: rust-axum is a single-process stack (one tokio runtime; scale with LAB_THREADS)"
            ));
        }
        let cpus = thread::available_parallelism().map_or(1, |n| n.get());
        let threads = positive("LAB_THREADS", cpus)?;
        let readers = positive("LAB_READERS", threads)?;
        let templates = var("LAB_TEMPLATES")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../templates"));
        Ok(Config {
            host: var("LAB_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port,
            db,
            pragmas,
            txn_mode,
            busy,
            write_path,
            processes,
            threads,
            readers,
            templates,
            metrics_txn,
            shared_cache,
            sql_log,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// LAB_SQL_LOG=on: Rails' development log in miniature (seed 001's `rails s`). One line per
// statement, "  SQL (0.3ms)  <sql>  [bound values]", appended to <LAB_DB>.sql.log right after the
// statement finished, in the thread that ran it: one write(2) per line on an O_APPEND file, under
// a mutex (as Ruby's Logger). Every statement the server runs goes through `logged`.
// ---------------------------------------------------------------------------------------------

/// Set once at start-up with LAB_SQL_LOG=on; empty with off, when `logged` is one check of it.
static SQL_LOG: OnceLock<SqlLog> = OnceLock::new();

struct SqlLog {
    file: Mutex<File>,
}

impl SqlLog {
    fn open(path: &Path) -> Result<SqlLog, String> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| {
                format!(
                    "LAB_SQL_LOG=on: cannot open '{}' for append: {e}",
                    path.display()
                )
            })?;
        Ok(SqlLog {
            file: Mutex::new(file),
        })
    }

    fn statement(&self, sql: &str, params: &[&dyn ToSql], took: Duration) {
        use std::fmt::Write as _;
        let mut line = format!("  SQL ({:.1}ms)  {sql}", took.as_secs_f64() * 1000.0);
        if !params.is_empty() {
            line.push_str("  [");
            for (i, p) in params.iter().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                let output = p.to_sql();
                let value = match &output {
                    Ok(ToSqlOutput::Borrowed(v)) => Some(*v),
                    Ok(ToSqlOutput::Owned(v)) => Some(ValueRef::from(v)),
                    _ => None,
                };
                let _ = match value {
                    None => write!(line, "?"),
                    Some(ValueRef::Null) => write!(line, "nil"),
                    Some(ValueRef::Integer(i)) => write!(line, "{i}"),
                    Some(ValueRef::Real(f)) => write!(line, "{f:?}"),
                    Some(ValueRef::Text(t)) => write!(line, "{:?}", String::from_utf8_lossy(t)),
                    Some(ValueRef::Blob(b)) => write!(line, "<{} bytes of binary data>", b.len()),
                };
            }
            line.push(']');
        }
        line.push('\n');
        let file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = (&*file).write_all(line.as_bytes()) {
            eprintln!("log writing failed. {e}"); // as Ruby's Logger: the request goes on
        }
    }
}

/// Runs one statement (`run`) and, with LAB_SQL_LOG=on, logs it once after it finished or
/// failed (as Rails does).
fn logged<T>(
    sql: &str,
    params: &[&dyn ToSql],
    run: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let Some(log) = SQL_LOG.get() else {
        return run();
    };
    let start = Instant::now();
    let result = run();
    log.statement(sql, params, start.elapsed());
    result
}

// ---------------------------------------------------------------------------------------------
// Connections: busy policy (all native in rusqlite), pragmas, schema check.
// ---------------------------------------------------------------------------------------------

fn set_busy(conn: &mut Connection, busy: Busy) -> rusqlite::Result<()> {
    match busy {
        Busy::Timeout(ms) => conn.busy_timeout(Duration::from_millis(ms)),
        // A busy handler that sleeps 1 ms per try until `ms` have passed since the first try
        // of this locking event (SQLite passes count = 0 on the first try).
        Busy::SleepPoll(ms) => {
            let limit = Duration::from_millis(ms);
            let mut first = Instant::now();
            conn.busy_handler(Some(move |count: i32| {
                if count == 0 {
                    first = Instant::now();
                }
                if first.elapsed() >= limit {
                    return false;
                }
                thread::sleep(Duration::from_millis(1));
                true
            }))
        }
        // Rails 7.1 `retries:`: retry immediately, never sleep.
        Busy::Retries(n) => conn.busy_handler(Some(move |count: i32| count <= n)),
        Busy::Off => conn.busy_handler(None::<fn(i32) -> bool>),
    }
}

fn open_connection(cfg: &Config) -> Result<Connection, String> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    if cfg.shared_cache {
        // LAB_CACHE=shared: SQLite's shared-cache mode for every connection of this process.
        flags |= OpenFlags::SQLITE_OPEN_SHARED_CACHE;
    }
    let db = cfg.db.display();
    let mut conn = Connection::open_with_flags(&cfg.db, flags)
        .map_err(|e| format!("LAB_DB='{db}' cannot be opened: {e}"))?;
    set_busy(&mut conn, cfg.busy).map_err(|e| format!("LAB_BUSY: {e}"))?;
    for (name, value) in &cfg.pragmas {
        // Names and values were checked against the allow-list, so this is not injectable.
        let sql = format!("PRAGMA {name} = {value}");
        logged(&sql, params![], || conn.execute_batch(&sql))
            .map_err(|e| format!("LAB_PRAGMAS: {name}={value} failed on '{db}': {e}"))?;
    }
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

fn check_schema(conn: &Connection, db: &Path) -> Result<(), String> {
    let wanted: [(&str, &[&str]); 4] = [
        ("requests", &REQUEST_FIELDS),
        (
            "metrics",
            &["id", "instance", "name", "value", "previous", "created_at"],
        ),
        ("items", &["id", "payload", "created_at"]),
        (
            "users",
            &["uid", "username", "departname", "created", "updates"],
        ),
    ];
    let mut missing = Vec::new();
    for (table, columns) in wanted {
        let sql = "SELECT name FROM pragma_table_info(?1)";
        let have: Vec<String> = logged(sql, params![table], || {
            conn.prepare(sql)
                .and_then(|mut s| s.query_map([table], |r| r.get(0))?.collect())
        })
        .map_err(|e| {
            format!(
                "LAB_DB='{}' is not a usable SQLite database: {e}",
                db.display()
            )
        })?;
        for c in columns.iter().filter(|c| !have.iter().any(|h| h == *c)) {
            missing.push(format!("{table}.{c}"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "LAB_DB='{}' lacks the schema of schema.sql (missing: {})",
            db.display(),
            missing.join(", ")
        ))
    }
}

/// Each requested pragma read back from SQLite, as a lower-case string.
fn read_pragmas(
    conn: &Connection,
    pragmas: &[(String, String)],
) -> Result<serde_json::Map<String, Value>, String> {
    let mut out = serde_json::Map::new();
    for (name, _) in pragmas {
        let sql = format!("PRAGMA {name}");
        let v = logged(&sql, params![], || {
            conn.query_row(&sql, [], |r| Ok(text(r.get_ref(0)?)))
        })
        .map_err(|e| format!("LAB_PRAGMAS: reading back {name}: {e}"))?;
        out.insert(name.clone(), Value::String(v.to_lowercase()));
    }
    Ok(out)
}

/// Any SQLite value as text (the templates and the seeded users accept whatever is stored).
fn text(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => String::new(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Errors: every error is JSON {"error": "..."}.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum AppError {
    BadRequest(String),
    NotFound(&'static str),
    MethodNotAllowed,
    TooLarge,
    Busy,
    Internal(String),
}

impl From<rusqlite::Error> for AppError {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => AppError::Busy,
            _ if matches!(e, rusqlite::Error::QueryReturnedNoRows) => {
                AppError::NotFound("not found")
            }
            _ => AppError::Internal(format!("database error: {e}")),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, msg) = match self {
            AppError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            AppError::NotFound(m) => (StatusCode::NOT_FOUND, m.to_string()),
            AppError::MethodNotAllowed => {
                (StatusCode::METHOD_NOT_ALLOWED, "method not allowed".into())
            }
            AppError::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request body over 1048576 bytes".into(),
            ),
            AppError::Busy => (StatusCode::SERVICE_UNAVAILABLE, "database is locked".into()),
            AppError::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
        };
        (status, Json(json!({ "error": msg }))).into_response()
    }
}

fn bad(msg: impl Into<String>) -> AppError {
    AppError::BadRequest(msg.into())
}

// ---------------------------------------------------------------------------------------------
// Extractors: ids in paths, raw bodies parsed as JSON whatever the Content-Type.
// ---------------------------------------------------------------------------------------------

/// A path id: ASCII digits only, 1 ..= i64::MAX.
struct Id(i64);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| bad("invalid id"))?;
        match raw.parse::<i64>() {
            Ok(n) if n >= 1 && raw.bytes().all(|b| b.is_ascii_digit()) => Ok(Id(n)),
            _ => Err(bad(format!(
                "invalid id '{raw}': expected an integer 1..9223372036854775807"
            ))),
        }
    }
}

/// The raw request body, at most 1 MiB (by Content-Length, or by reading at most that much).
struct Body(Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > BODY_LIMIT as u64) {
            return Err(AppError::TooLarge);
        }
        match Bytes::from_request(req, state).await {
            Ok(b) => Ok(Body(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(AppError::TooLarge),
            Err(e) => Err(bad(e.body_text())),
        }
    }
}

/// Parses a body that must be a JSON object into `T` (extra fields ignored). The whole body
/// must be Unicode text (serde_json checks the strings it keeps, not those of ignored fields):
/// valid UTF-8, with no `\u` escape of an unpaired surrogate.
fn json_object<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, AppError> {
    let text = std::str::from_utf8(body).map_err(|_| bad("body is not valid UTF-8"))?;
    if lone_surrogate(body) {
        return Err(bad("body has a \\u escape of an unpaired UTF-16 surrogate"));
    }
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(bad("body must be a JSON object"));
    }
    serde_json::from_str(text).map_err(|e| bad(format!("invalid JSON body: {e}")))
}

/// Whether JSON text has a `\uD800`-`\uDFFF` escape that is not a high surrogate directly
/// followed by a low one. Escapes are read left to right, so `\\` is skipped whole (outside
/// strings a backslash is malformed JSON anyway).
fn lone_surrogate(b: &[u8]) -> bool {
    let hex4 = |i: usize| -> Option<u32> {
        b.get(i..i + 4)?
            .iter()
            .try_fold(0, |n, &d| Some(n << 4 | char::from(d).to_digit(16)?))
    };
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let escape = if b[i + 1] == b'u' { hex4(i + 2) } else { None };
        let Some(c) = escape else {
            i += 2;
            continue;
        };
        i += 6;
        match c {
            0xDC00..=0xDFFF => return true,
            0xD800..=0xDBFF => match (b.get(i..i + 2), hex4(i + 2)) {
                (Some(b"\\u"), Some(0xDC00..=0xDFFF)) => i += 6,
                _ => return true,
            },
            _ => {}
        }
    }
    false
}

fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Templates: read once at start-up, `{{field}}` replaced by the HTML-escaped value.
// ---------------------------------------------------------------------------------------------

enum Part {
    Lit(String),
    Field(usize),
}

struct Template {
    parts: Vec<Part>,
    literal_len: usize,
}

const REQUEST_FIELDS: [&str; 8] = [
    "id",
    "uid",
    "ip",
    "method",
    "url",
    "parameters",
    "created_at",
    "updated_at",
];
const USER_FIELDS: [&str; 4] = ["uid", "username", "departname", "created"];

impl Template {
    fn load(dir: &Path, file: &str, fields: &[&str]) -> Result<Template, String> {
        let path = dir.join(file);
        let src = std::fs::read_to_string(&path)
            .map_err(|e| format!("LAB_TEMPLATES='{}': cannot read {file}: {e}", dir.display()))?;
        let mut parts = Vec::new();
        let mut rest = src.as_str();
        while let Some(start) = rest.find("{{") {
            let Some(len) = rest[start + 2..].find("}}") else {
                break;
            };
            let name = rest[start + 2..start + 2 + len].trim();
            let idx = fields.iter().position(|f| *f == name).ok_or_else(|| {
                format!(
                    "LAB_TEMPLATES: {} uses unknown field {{{{{name}}}}}",
                    path.display()
                )
            })?;
            parts.push(Part::Lit(rest[..start].to_string()));
            parts.push(Part::Field(idx));
            rest = &rest[start + 2 + len + 2..];
        }
        parts.push(Part::Lit(rest.to_string()));
        let literal_len = parts
            .iter()
            .map(|p| if let Part::Lit(s) = p { s.len() } else { 0 })
            .sum();
        Ok(Template { parts, literal_len })
    }

    fn render(&self, values: &[String]) -> String {
        let escaped: Vec<String> = values.iter().map(|v| escape(v)).collect();
        let mut out = String::with_capacity(self.literal_len + 64 * values.len());
        for part in &self.parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Field(i) => out.push_str(&escaped[*i]),
            }
        }
        out
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

struct Templates {
    request: Template,
    user: Template,
    user_page: Template,
}

// ---------------------------------------------------------------------------------------------
// The connection pool: LAB_READERS connections, used only inside spawn_blocking.
// ---------------------------------------------------------------------------------------------

struct Pool {
    conns: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

/// Puts the connection back even if the request future was dropped or the closure panicked.
struct Pooled<'a> {
    pool: &'a Pool,
    conn: Option<Connection>,
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            rollback(&c);
            self.pool
                .conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(c);
        }
    }
}

impl Pool {
    fn new(conns: Vec<Connection>) -> Arc<Pool> {
        let n = conns.len();
        Arc::new(Pool {
            conns: Mutex::new(conns),
            permits: Arc::new(Semaphore::new(n)),
        })
    }

    /// Waits (asynchronously) for a free connection, then runs `f` on a blocking thread.
    async fn run<T, F>(self: &Arc<Self>, f: F) -> Result<T, AppError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, AppError> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| AppError::Internal("pool closed".into()))?;
        let pool = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _permit = permit; // released after the connection is back (drop order)
            let conn = pool.conns.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut pooled = Pooled { pool: &pool, conn };
            match pooled.conn.as_mut() {
                Some(c) => f(c),
                None => Err(AppError::Internal("no pooled connection".into())),
            }
        })
        .await
        .map_err(|_| AppError::Internal("database task failed".into()))?
    }
}

// ---------------------------------------------------------------------------------------------
// Writes: one transaction each (pool, writer) or savepoints inside one transaction (batch).
// ---------------------------------------------------------------------------------------------

enum Write {
    Request {
        uid: String,
        ip: String,
        url: String,
        parameters: String,
        ts: String,
    },
    Metrics {
        instance: String,
        measurements: Vec<(String, f64)>,
        ts: String,
    },
    Item {
        payload: String,
        ts: String,
    },
    User {
        uid: i64,
        departname: String,
    },
}

const SQL_LATEST_METRIC: &str =
    "SELECT value FROM metrics WHERE instance = ?1 AND name = ?2 ORDER BY id DESC LIMIT 1";
const SQL_INSERT_METRIC: &str =
    "INSERT INTO metrics (instance, name, value, previous, created_at) VALUES (?1, ?2, ?3, ?4, ?5)";

enum Written {
    Request(i64),
    Metrics(Vec<i64>),
    Item(i64),
    User(Vec<String>),
}

impl Write {
    /// The statements of one write, run inside an open transaction (or savepoint).
    fn apply(&self, conn: &Connection) -> Result<Written, AppError> {
        match self {
            Write::Request {
                uid,
                ip,
                url,
                parameters,
                ts,
            } => {
                let sql = "INSERT INTO requests (uid, ip, method, url, parameters, created_at, updated_at) \
                           VALUES (?1, ?2, 'POST', ?3, ?4, ?5, ?5)";
                let p = params![uid, ip, url, parameters, ts];
                let id = logged(sql, p, || conn.prepare_cached(sql)?.insert(p))?;
                Ok(Written::Request(id))
            }
            Write::Metrics {
                instance,
                measurements,
                ts,
            } => {
                let mut latest = conn.prepare_cached(SQL_LATEST_METRIC)?;
                let mut insert = conn.prepare_cached(SQL_INSERT_METRIC)?;
                let mut ids = Vec::with_capacity(measurements.len());
                for (name, value) in measurements {
                    let p = params![instance, name];
                    let previous: Option<f64> = logged(SQL_LATEST_METRIC, p, || {
                        latest.query_row(p, |r| r.get(0)).optional()
                    })?;
                    let p = params![instance, name, value, previous, ts];
                    ids.push(logged(SQL_INSERT_METRIC, p, || insert.insert(p))?);
                }
                Ok(Written::Metrics(ids))
            }
            Write::Item { payload, ts } => {
                let sql = "INSERT INTO items (payload, created_at) VALUES (?1, ?2)";
                let p = params![payload, ts];
                let id = logged(sql, p, || conn.prepare_cached(sql)?.insert(p))?;
                Ok(Written::Item(id))
            }
            Write::User { uid, departname } => {
                let sql = "UPDATE users SET departname = ?1, updates = updates + 1 WHERE uid = ?2";
                let p = params![departname, uid];
                let changed = logged(sql, p, || conn.prepare_cached(sql)?.execute(p))?;
                if changed == 0 {
                    return Err(AppError::NotFound("user not found"));
                }
                Ok(Written::User(select_user(conn, *uid)?))
            }
        }
    }
}

/// A statement without parameters or rows: BEGIN, COMMIT, the savepoints.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    logged(sql, params![], || {
        conn.prepare_cached(sql)?.execute([]).map(|_| ())
    })
}

fn begin_sql(mode: TxnMode) -> &'static str {
    match mode {
        TxnMode::Deferred => "BEGIN DEFERRED",
        TxnMode::Immediate => "BEGIN IMMEDIATE",
    }
}

fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = logged("ROLLBACK", params![], || conn.execute_batch("ROLLBACK"));
    }
}

/// BEGIN (deferred|immediate), the write's statements, COMMIT; ROLLBACK on any error.
fn transaction(conn: &Connection, mode: TxnMode, write: &Write) -> Result<Written, AppError> {
    in_transaction(conn, mode, |conn| write.apply(conn))
}

fn in_transaction<T>(
    conn: &Connection,
    mode: TxnMode,
    statements: impl FnOnce(&Connection) -> Result<T, AppError>,
) -> Result<T, AppError> {
    exec(conn, begin_sql(mode))?;
    let result =
        statements(conn).and_then(|w| exec(conn, "COMMIT").map(|_| w).map_err(AppError::from));
    if result.is_err() {
        rollback(conn);
    }
    result
}

/// LAB_METRICS_TXN=record, ActiveRecord's shape (pool only): for each measurement, the SELECT
/// of the latest value as an autocommit read, then one transaction for its INSERT. A failure
/// at record k is returned; records 1..k-1 stay committed, as in Rails.
fn metrics_records(
    conn: &Connection,
    mode: TxnMode,
    instance: &str,
    measurements: &[(String, f64)],
    ts: &str,
) -> Result<Vec<i64>, AppError> {
    let mut ids = Vec::with_capacity(measurements.len());
    for (name, value) in measurements {
        let p = params![instance, name];
        let previous: Option<f64> = logged(SQL_LATEST_METRIC, p, || {
            conn.prepare_cached(SQL_LATEST_METRIC)?
                .query_row(p, |r| r.get(0))
                .optional()
        })?;
        ids.push(in_transaction(conn, mode, |conn| {
            let p = params![instance, name, value, previous, ts];
            Ok(logged(SQL_INSERT_METRIC, p, || {
                conn.prepare_cached(SQL_INSERT_METRIC)?.insert(p)
            })?)
        })?);
    }
    Ok(ids)
}

struct Job {
    write: Write,
    reply: oneshot::Sender<Result<Written, AppError>>,
}

enum Msg {
    Job(Job),
    Stop,
}

/// The dedicated writer thread: one transaction per job (`writer`), or group commit (`batch`).
fn writer_loop(conn: Connection, rx: mpsc::Receiver<Msg>, mode: TxnMode, batch: bool) {
    let mut stopping = false;
    while !stopping {
        let mut jobs = match rx.recv() {
            Ok(Msg::Job(job)) => vec![job],
            Ok(Msg::Stop) | Err(_) => break,
        };
        if batch {
            loop {
                match rx.try_recv() {
                    Ok(Msg::Job(job)) => jobs.push(job),
                    Ok(Msg::Stop) => {
                        stopping = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
            run_batch(&conn, mode, jobs);
        } else {
            for job in jobs {
                let _ = job.reply.send(transaction(&conn, mode, &job.write));
            }
        }
    }
    // Answer anything still queued after Stop (nothing should be: the server has drained).
    while let Ok(Msg::Job(job)) = rx.try_recv() {
        let _ = job.reply.send(transaction(&conn, mode, &job.write));
    }
}

/// Group commit: SAVEPOINT job ... RELEASE job for each job, one COMMIT, then every answer.
fn run_batch(conn: &Connection, mode: TxnMode, jobs: Vec<Job>) {
    if let Err(e) = exec(conn, begin_sql(mode)) {
        let e = AppError::from(e);
        for job in jobs {
            let _ = job.reply.send(Err(e.clone()));
        }
        return;
    }
    let mut results = Vec::with_capacity(jobs.len());
    let mut lost: Option<AppError> = None;
    for job in &jobs {
        let r = exec(conn, "SAVEPOINT job")
            .map_err(AppError::from)
            .and_then(|_| job.write.apply(conn));
        match r {
            Ok(w) => match exec(conn, "RELEASE job") {
                Ok(()) => results.push(Ok(w)),
                Err(e) => results.push(Err(AppError::from(e))),
            },
            Err(e) => {
                if conn.is_autocommit() {
                    // SQLite rolled the whole transaction back: nothing in this batch survives.
                    lost = Some(e);
                    break;
                }
                let _ = exec(conn, "ROLLBACK TO job").and_then(|_| exec(conn, "RELEASE job"));
                results.push(Err(e));
            }
        }
    }
    let outcome = match lost {
        Some(e) => Err(e),
        None => exec(conn, "COMMIT").map_err(AppError::from),
    };
    match outcome {
        Ok(()) => {
            for (job, r) in jobs.into_iter().zip(results) {
                let _ = job.reply.send(r);
            }
        }
        Err(e) => {
            rollback(conn);
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Application state, built once.
// ---------------------------------------------------------------------------------------------

struct AppState {
    pool: Arc<Pool>,
    writer: Option<mpsc::Sender<Msg>>,
    txn_mode: TxnMode,
    metrics_txn: MetricsTxn,
    templates: Templates,
    health: Value,
    requests_handled: AtomicU64,
}

type Shared = Arc<AppState>;

impl AppState {
    async fn write(&self, write: Write) -> Result<Written, AppError> {
        match &self.writer {
            None => {
                let mode = self.txn_mode;
                self.pool
                    .run(move |conn| transaction(conn, mode, &write))
                    .await
            }
            Some(tx) => {
                let (reply, answer) = oneshot::channel();
                tx.send(Msg::Job(Job { write, reply }))
                    .map_err(|_| AppError::Internal("writer thread stopped".into()))?;
                answer
                    .await
                    .map_err(|_| AppError::Internal("writer thread stopped".into()))?
            }
        }
    }
}

fn select_user(conn: &Connection, uid: i64) -> Result<Vec<String>, AppError> {
    let sql = "SELECT uid, username, departname, created FROM users WHERE uid = ?1";
    logged(sql, params![uid], || {
        conn.prepare_cached(sql)?
            .query_row([uid], |r| (0..4).map(|i| Ok(text(r.get_ref(i)?))).collect())
            .optional()
    })?
    .ok_or(AppError::NotFound("user not found"))
}

// ---------------------------------------------------------------------------------------------
// Handlers.
// ---------------------------------------------------------------------------------------------

async fn health(State(st): State<Shared>) -> Json<Value> {
    let mut h = st.health.clone();
    h["requests_handled"] = json!(st.requests_handled.load(Ordering::Relaxed));
    Json(h)
}

async fn hello() -> &'static str {
    "Hello, World!"
}

/// GET /delay/{ms}: a calibration endpoint for load generators. Waits ms (ASCII digits,
/// 0 ..= 10000) on tokio's timer (no database, no blocking thread), then answers like `hello`.
async fn delay(
    raw: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<&'static str, AppError> {
    let raw = raw.map(|p| p.0).unwrap_or_default();
    match raw.parse::<u64>() {
        Ok(ms) if ms <= 10_000 && raw.bytes().all(|b| b.is_ascii_digit()) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(hello().await)
        }
        _ => Err(bad(format!(
            "invalid delay '{raw}': expected an integer 0..10000 (ms)"
        ))),
    }
}

async fn create_request(
    State(st): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: Uri,
    Body(body): Body,
) -> Result<Response, AppError> {
    let parameters = if body.is_empty() {
        "{}".to_string()
    } else {
        let obj: serde_json::Map<String, Value> = json_object(&body)?;
        serde_json::to_string(&obj).map_err(|e| AppError::Internal(e.to_string()))?
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or("localhost");
    let path = uri.path_and_query().map_or("/requests", |p| p.as_str());
    let write = Write::Request {
        uid: uuid::Uuid::new_v4().to_string(),
        ip: peer.ip().to_string(),
        url: format!("http://{host}{path}"),
        parameters,
        ts: now(),
    };
    let Written::Request(id) = st.write(write).await? else {
        unreachable!()
    };
    let location = format!("/requests/{id}");
    let page =
        format!("<html><body>You are being <a href=\"{location}\">redirected</a>.</body></html>");
    Ok((
        StatusCode::FOUND,
        [(header::LOCATION, location)],
        Html(page),
    )
        .into_response())
}

async fn show_request(State(st): State<Shared>, Id(id): Id) -> Result<Html<String>, AppError> {
    let row = st
        .pool
        .run(move |conn| {
            let sql = "SELECT id, uid, ip, method, url, parameters, created_at, updated_at FROM requests WHERE id = ?1";
            logged(sql, params![id], || {
                conn.prepare_cached(sql)?
                    .query_row([id], |r| (0..8).map(|i| Ok(text(r.get_ref(i)?))).collect::<Result<Vec<_>, _>>())
                    .optional()
            })?
            .ok_or(AppError::NotFound("request not found"))
        })
        .await?;
    Ok(Html(st.templates.request.render(&row)))
}

#[derive(Deserialize)]
struct MetricsIn {
    instance: String,
    measurements: Vec<Measurement>,
}

#[derive(Deserialize)]
struct Measurement {
    name: String,
    value: f64,
}

fn check_len(field: &str, s: &str) -> Result<(), AppError> {
    match s.chars().count() {
        1..=64 => Ok(()),
        _ => Err(bad(format!("{field} must be 1-64 characters"))),
    }
}

async fn create_metrics(State(st): State<Shared>, Body(body): Body) -> Result<Response, AppError> {
    let (instance, measurements): (String, Vec<(String, f64)>) = if body.is_empty() {
        let instance = format!("instance-{}", rand::random_range(1..=10));
        let m = METRIC_NAMES
            .iter()
            .map(|n| (n.to_string(), rand::random_range(0.0..100.0)))
            .collect();
        (instance, m)
    } else {
        let m: MetricsIn = json_object(&body)?;
        check_len("instance", &m.instance)?;
        if m.measurements.len() != 5 {
            return Err(bad("measurements must have exactly 5 entries"));
        }
        for x in &m.measurements {
            check_len("measurement name", &x.name)?;
        }
        (
            m.instance,
            m.measurements
                .into_iter()
                .map(|x| (x.name, x.value))
                .collect(),
        )
    };
    if st.metrics_txn == MetricsTxn::Record {
        let (mode, name, ts) = (st.txn_mode, instance.clone(), now());
        let ids = st
            .pool
            .run(move |conn| metrics_records(conn, mode, &name, &measurements, &ts))
            .await?;
        return Ok((
            StatusCode::CREATED,
            Json(json!({ "instance": instance, "ids": ids })),
        )
            .into_response());
    }
    let Written::Metrics(ids) = st
        .write(Write::Metrics {
            instance: instance.clone(),
            measurements,
            ts: now(),
        })
        .await?
    else {
        unreachable!()
    };
    Ok((
        StatusCode::CREATED,
        Json(json!({ "instance": instance, "ids": ids })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct ItemIn {
    payload: String,
}

async fn create_item(State(st): State<Shared>, Body(body): Body) -> Result<Response, AppError> {
    let ItemIn { payload } = json_object(&body)?;
    if payload.len() > PAYLOAD_LIMIT {
        return Err(bad("payload over 65536 bytes"));
    }
    let Written::Item(id) = st.write(Write::Item { payload, ts: now() }).await? else {
        unreachable!()
    };
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

async fn show_item(State(st): State<Shared>, Id(id): Id) -> Result<Json<Value>, AppError> {
    st.pool
        .run(move |conn| {
            let sql = "SELECT id, payload, created_at FROM items WHERE id = ?1";
            logged(sql, params![id], || {
                conn.prepare_cached(sql)?
                    .query_row([id], |r| {
                        Ok(json!({ "id": r.get::<_, i64>(0)?, "payload": text(r.get_ref(1)?), "created_at": text(r.get_ref(2)?) }))
                    })
                    .optional()
            })?
            .map(Json)
            .ok_or(AppError::NotFound("item not found"))
        })
        .await
}

async fn show_user(State(st): State<Shared>, Id(uid): Id) -> Result<Html<String>, AppError> {
    let row = st.pool.run(move |conn| select_user(conn, uid)).await?;
    Ok(Html(st.templates.user.render(&row)))
}

async fn show_user_page(State(st): State<Shared>, Id(uid): Id) -> Result<Html<String>, AppError> {
    let row = st.pool.run(move |conn| select_user(conn, uid)).await?;
    Ok(Html(st.templates.user_page.render(&row)))
}

#[derive(Deserialize)]
struct UserIn {
    departname: String,
}

async fn update_user(
    State(st): State<Shared>,
    Id(uid): Id,
    Body(body): Body,
) -> Result<Html<String>, AppError> {
    let UserIn { departname } = json_object(&body)?;
    check_len("departname", &departname)?;
    let Written::User(row) = st.write(Write::User { uid, departname }).await? else {
        unreachable!()
    };
    Ok(Html(st.templates.user.render(&row)))
}

async fn empty_id() -> AppError {
    bad("invalid id: empty")
}

async fn not_found() -> AppError {
    AppError::NotFound("no such route")
}

async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}

/// requests_handled: every answered request except /health, counted as the response leaves.
async fn count_requests(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let counted = req.uri().path() != "/health";
    let response = next.run(req).await;
    if counted {
        st.requests_handled.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// A path with an empty, `.` or `..` segment (`//hello`, `/./hello`, `/items/../hello`) names
/// no resource, whatever it would resolve to: 404, as in every stack (Go's ServeMux would
/// redirect it to the cleaned path). The raw path: `%2e%2e` is an ordinary segment.
async fn reject_unclean_paths(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path.contains("//") || path.split('/').any(|s| s == "." || s == "..") {
        return AppError::NotFound("no such route").into_response();
    }
    next.run(req).await
}

fn router(state: Shared) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/hello", get(hello))
        .route("/delay/{ms}", get(delay))
        .route("/requests", post(create_request))
        .route("/requests/{id}", get(show_request))
        .route("/metrics", post(create_metrics))
        .route("/items", post(create_item))
        .route("/items/{id}", get(show_item))
        .route("/users/{uid}", get(show_user).post(update_user))
        .route("/users/{uid}/page", get(show_user_page))
        // An empty id is a bad id (400), not an unknown route.
        .route("/requests/", get(empty_id))
        .route("/items/", get(empty_id))
        .route("/users/", get(empty_id).post(empty_id))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(reject_unclean_paths))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            count_requests,
        ))
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Start-up and graceful shutdown.
// ---------------------------------------------------------------------------------------------

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("lab: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let cfg = Config::from_env()?;
    let templates = Templates {
        request: Template::load(&cfg.templates, "request.html", &REQUEST_FIELDS)?,
        user: Template::load(&cfg.templates, "user.html", &USER_FIELDS)?,
        user_page: Template::load(&cfg.templates, "user_page.html", &USER_FIELDS)?,
    };

    if cfg.sql_log {
        let mut path = cfg.db.clone().into_os_string();
        path.push(".sql.log");
        let _ = SQL_LOG.set(SqlLog::open(Path::new(&path))?);
    }
    let first = open_connection(&cfg)?;
    check_schema(&first, &cfg.db)?;
    let pragmas = read_pragmas(&first, &cfg.pragmas)?;
    let mut readers = vec![first];
    for _ in 1..cfg.readers {
        readers.push(open_connection(&cfg)?);
    }
    let (writer_tx, writer_thread) = match cfg.write_path {
        WritePath::Pool => (None, None),
        WritePath::Writer | WritePath::Batch => {
            let conn = open_connection(&cfg)?;
            let (tx, rx) = mpsc::channel();
            let (mode, batch) = (cfg.txn_mode, cfg.write_path == WritePath::Batch);
            let handle = thread::Builder::new()
                .name("lab-writer".into())
                .spawn(move || writer_loop(conn, rx, mode, batch))
                .map_err(|e| format!("cannot start the writer thread: {e}"))?;
            (Some(tx), Some(handle))
        }
    };

    let write_path = match cfg.write_path {
        WritePath::Pool => "pool",
        WritePath::Writer => "writer",
        WritePath::Batch => "batch",
    };
    let health = json!({
        "server": "rust-axum",
        "versions": {
            "rust": env!("LAB_RUSTC_VERSION"),
            "axum": env!("LAB_VERSION_AXUM"),
            "hyper": env!("LAB_VERSION_HYPER"),
            "tokio": env!("LAB_VERSION_TOKIO"),
            "rusqlite": env!("LAB_VERSION_RUSQLITE"),
            "libsqlite3-sys": env!("LAB_VERSION_LIBSQLITE3_SYS"),
        },
        "sqlite_version": rusqlite::version(),
        "pid": std::process::id(),
        "knobs": {
            "pragmas": pragmas,
            "txn_mode": if cfg.txn_mode == TxnMode::Immediate { "immediate" } else { "deferred" },
            "busy": cfg.busy.describe(),
            "write_path": write_path,
            "processes": cfg.processes,
            "threads": cfg.threads,
            "readers": cfg.readers,
            "metrics_txn": if cfg.metrics_txn == MetricsTxn::Record { "record" } else { "request" },
            "cache": if cfg.shared_cache { "shared" } else { "private" },
            "sql_log": if cfg.sql_log { "on" } else { "off" },
        },
        "emulated": {},
        "requests_handled": 0,
    });
    let state = Arc::new(AppState {
        pool: Pool::new(readers),
        writer: writer_tx.clone(),
        txn_mode: cfg.txn_mode,
        metrics_txn: cfg.metrics_txn,
        templates,
        health,
        requests_handled: AtomicU64::new(0),
    });

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .enable_all()
        .build()
        .map_err(|e| format!("LAB_THREADS={}: cannot start tokio: {e}", cfg.threads))?;
    runtime.block_on(serve(&cfg, Arc::clone(&state)))?;

    // The server has finished every request in flight: let the writer drain and stop.
    if let (Some(tx), Some(handle)) = (writer_tx, writer_thread) {
        let _ = tx.send(Msg::Stop);
        let _ = handle.join();
    }
    drop(state);
    drop(runtime);
    Ok(())
}

async fn serve(cfg: &Config, state: Shared) -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port))
        .await
        .map_err(|e| {
            format!(
                "LAB_HOST={} LAB_PORT={}: cannot listen: {e}",
                cfg.host, cfg.port
            )
        })?
        .tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
        .await
        .map_err(|e| format!("server error: {e}"))
}
