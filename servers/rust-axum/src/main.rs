//! SQLite Production Lab server: Axum + rusqlite (bundled SQLite), or, with
//! LAB_DATABASE=postgres, tokio-postgres on a deadpool-postgres pool.
//!
//! The contract is ../openapi.yaml and ../README.md. The handlers, transactions, the writer and
//! the batches are written once, as async code over a `Session`: one connection of either
//! database, the seam that holds what differs (placeholders, BEGIN and the savepoint
//! statements, new ids, error mapping). Its SQLite arms never await, so on SQLite that code
//! runs to completion in one poll where the connection is: blocking SQLite work never runs on
//! the tokio workers. Reads (and, with LAB_WRITE_PATH=pool, writes) run through
//! `spawn_blocking` on a pool of LAB_READERS connections; `writer` and `batch` send every write
//! to one dedicated std::thread over a channel and answer through a oneshot only after COMMIT.
//! On Postgres the same code runs on tokio tasks: a deadpool of LAB_READERS connections, and
//! for `writer`/`batch` one writer task with its own connection, fed by the same queue.

use std::{
    env,
    fs::{File, OpenOptions},
    future::{Future, poll_fn},
    io::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    process::ExitCode,
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll, Waker},
    thread,
    time::{Duration, Instant},
};

use axum::{
    Json, Router,
    body::{Bytes, HttpBody as _},
    extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State},
    http::{HeaderMap, StatusCode, Uri, header, request::Parts},
    middleware::{self, Next},
    response::{Html, IntoResponse, Response},
    routing::{get, post},
    serve::ListenerExt,
};
use rusqlite::{
    Connection, ErrorCode, OpenFlags, OptionalExtension, ToSql,
    types::{ToSqlOutput, ValueRef},
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_postgres::{Error as PgError, Row as PgRow, types::ToSql as PgToSql};

const BODY_LIMIT: usize = 1_048_576;
/// A body over BODY_LIMIT is still read (and thrown away) up to this many bytes before the 413:
/// closing a connection with unread data resets it, and a client still sending its body would
/// see a broken pipe instead of the 413. Beyond it the connection is closed unread.
const DRAIN_LIMIT: usize = 16 * BODY_LIMIT;
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

/// LAB_DATABASE: the database the same application code runs on.
enum Backend {
    Sqlite(SqliteConfig),
    /// LAB_DATABASE_URL, parsed (a libpq key=value string).
    Postgres(tokio_postgres::Config),
}

/// LAB_DB and SQLite's own knobs.
struct SqliteConfig {
    db: PathBuf,
    pragmas: Vec<(String, String)>,
    txn_mode: TxnMode,
    busy: Busy,
    shared_cache: bool,
    sql_log: bool,
}

struct Config {
    host: String,
    port: u16,
    backend: Backend,
    write_path: WritePath,
    processes: u64,
    threads: usize,
    readers: usize,
    templates: PathBuf,
    metrics_txn: MetricsTxn,
}

/// SQLite's own knobs: unset or empty with LAB_DATABASE=postgres (null in /health).
const SQLITE_ONLY: [&str; 5] = [
    "LAB_PRAGMAS",
    "LAB_TXN_MODE",
    "LAB_BUSY",
    "LAB_CACHE",
    "LAB_SQL_LOG",
];

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

/// LAB_DATABASE_URL (required with postgres). Defaults only where the string says nothing: a
/// host that never answers fails in 10 s, and pg_stat_activity names the server.
fn database_url() -> Result<tokio_postgres::Config, String> {
    let url = var("LAB_DATABASE_URL").ok_or(
        "LAB_DATABASE_URL is required with LAB_DATABASE=postgres (a libpq key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')",
    )?;
    let mut pg: tokio_postgres::Config = url
        .parse()
        .map_err(|e: PgError| format!("LAB_DATABASE_URL: {}", chain(&e)))?;
    if pg.get_connect_timeout().is_none() {
        pg.connect_timeout(Duration::from_secs(10));
    }
    if pg.get_application_name().is_none() {
        pg.application_name("rust-axum");
    }
    Ok(pg)
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
        let postgres = match var("LAB_DATABASE").as_deref() {
            None | Some("sqlite") => None,
            Some("postgres") => {
                if let Some(name) = SQLITE_ONLY.iter().find(|name| var(name).is_some()) {
                    return Err(format!(
                        "{name} is SQLite's; unset it with LAB_DATABASE=postgres"
                    ));
                }
                Some(database_url()?)
            }
            Some(v) => {
                return Err(format!("LAB_DATABASE='{v}' is not one of sqlite|postgres"));
            }
        };
        // With postgres LAB_DB is not read, and SQLite's knobs (all unset) parse to defaults.
        let db = match postgres {
            Some(_) => PathBuf::new(),
            None => {
                if var("LAB_DATABASE_URL").is_some() {
                    return Err("LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite (or set LAB_DATABASE=postgres)".into());
                }
                let db = PathBuf::from(
                    var("LAB_DB").ok_or("LAB_DB is required (a database made from schema.sql)")?,
                );
                if !db.is_file() {
                    return Err(format!(
                        "LAB_DB='{}' does not exist (make it from schema.sql)",
                        db.display()
                    ));
                }
                db
            }
        };
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
        let backend = match postgres {
            Some(pg) => Backend::Postgres(pg),
            None => Backend::Sqlite(SqliteConfig {
                db,
                pragmas,
                txn_mode,
                busy,
                shared_cache,
                sql_log,
            }),
        };
        Ok(Config {
            host: var("LAB_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port,
            backend,
            write_path,
            processes,
            threads,
            readers,
            templates,
            metrics_txn,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// LAB_SQL_LOG=on: Rails' development log in miniature (seed 001's `rails s`). One line per
// statement, "  SQL (0.3ms)  <sql>  [bound values]", appended to <LAB_DB>.sql.log right after the
// statement finished, in the thread that ran it: one write(2) per line on an O_APPEND file, under
// a mutex (as Ruby's Logger). Every statement the server runs goes through `logged`. (SQLite
// only: LAB_SQL_LOG is SQLite's knob.)
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

    fn statement(&self, sql: &str, params: &[&dyn Param], took: Duration) {
        use std::fmt::Write as _;
        let mut line = format!("  SQL ({:.1}ms)  {sql}", took.as_secs_f64() * 1000.0);
        if !params.is_empty() {
            line.push_str("  [");
            for (i, p) in params.iter().enumerate() {
                if i > 0 {
                    line.push_str(", ");
                }
                let output = p.sqlite().to_sql();
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
    params: &[&dyn Param],
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
// SQLite connections: busy policy (all native in rusqlite), pragmas, schema check.
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

fn open_connection(cfg: &SqliteConfig) -> Result<Connection, String> {
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
        logged(&sql, &[], || conn.execute_batch(&sql))
            .map_err(|e| format!("LAB_PRAGMAS: {name}={value} failed on '{db}': {e}"))?;
    }
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// The tables and columns the server uses (both databases' start-up check).
const SCHEMA: [(&str, &[&str]); 4] = [
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

/// PRAGMA compile_options of the SQLite this binary links, read on an in-memory database (also
/// with LAB_DATABASE=postgres).
fn compile_options() -> Result<Vec<String>, String> {
    let memory = Connection::open_in_memory().map_err(|e| format!("SQLite's compile options: {e}"))?;
    let mut stmt = memory
        .prepare("PRAGMA compile_options")
        .map_err(|e| format!("SQLite's compile options: {e}"))?;
    let rows = stmt
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(|e| format!("SQLite's compile options: {e}"))?;
    rows.collect::<Result<Vec<String>, _>>().map_err(|e| format!("SQLite's compile options: {e}"))
}

fn check_schema(conn: &Connection, db: &Path) -> Result<(), String> {
    let mut missing = Vec::new();
    for (table, columns) in SCHEMA {
        let sql = "SELECT name FROM pragma_table_info(?1)";
        let have: Vec<String> = logged(sql, &[&table], || {
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
        let v = logged(&sql, &[], || {
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
// Postgres connections (LAB_DATABASE=postgres): tokio-postgres on deadpool-postgres pools.
// ---------------------------------------------------------------------------------------------

/// Connects for the pools and keeps the tasks that drive the connections. deadpool-postgres'
/// own connector aborts a connection's task when the pool drops its client; this one hands the
/// pool a stand-in task instead, so a dropped client's connection sends Postgres its Terminate
/// and ends by itself, and shutdown waits for that (`closed`).
#[derive(Clone, Default)]
struct PgConnector {
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

type PgConnect<'a> = Pin<
    Box<
        dyn Future<Output = Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), PgError>>
            + Send
            + 'a,
    >,
>;

impl deadpool_postgres::Connect for PgConnector {
    fn connect(&self, pg: &tokio_postgres::Config) -> PgConnect<'_> {
        let pg = pg.clone();
        Box::pin(async move {
            let (client, connection) = pg.connect(tokio_postgres::NoTls).await?;
            let task = tokio::spawn(async move {
                let _ = connection.await; // ends when the client is dropped (or the server goes)
            });
            let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
            tasks.retain(|t| !t.is_finished());
            tasks.push(task);
            Ok((client, tokio::spawn(async {})))
        })
    }
}

impl PgConnector {
    /// A pool of at most `size` connections (none opened yet), recycled with an is_closed check.
    fn pool(
        &self,
        pg: &tokio_postgres::Config,
        size: usize,
    ) -> Result<deadpool_postgres::Pool, String> {
        let manager = deadpool_postgres::Manager::from_connect(
            pg.clone(),
            self.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        deadpool_postgres::Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| format!("LAB_DATABASE_URL: cannot make a pool: {e}"))
    }

    /// Shutdown: waits (at most `limit`) for every connection to finish closing.
    async fn closed(&self, limit: Duration) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        let deadline = tokio::time::Instant::now() + limit;
        for task in tasks {
            let _ = tokio::time::timeout_at(deadline, task).await;
        }
    }
}

/// Opens `n` connections of `pool` now (a server that cannot connect fails at start-up, not
/// under load) and hands them back to it.
async fn fill(
    pool: &deadpool_postgres::Pool,
    n: usize,
) -> Result<deadpool_postgres::Object, String> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(pool.get().await.map_err(|e| {
            let why = match &e {
                deadpool_postgres::PoolError::Backend(e) => chain(e),
                e => e.to_string(),
            };
            format!("LAB_DATABASE_URL: cannot connect: {why}")
        })?);
    }
    Ok(conns.swap_remove(0)) // one stays checked out for the caller; the others go back
}

/// The tables and columns of `SCHEMA`, on the search path of LAB_DATABASE_URL's user.
async fn check_pg_schema(client: &tokio_postgres::Client) -> Result<(), String> {
    let sql = "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped";
    let mut missing = Vec::new();
    for (table, columns) in SCHEMA {
        let have: Vec<String> = client
            .query(sql, &[&table])
            .await
            .map_err(|e| format!("LAB_DATABASE_URL: reading the schema: {}", chain(&e)))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for c in columns.iter().filter(|c| !have.iter().any(|h| h == *c)) {
            missing.push(format!("{table}.{c}"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "LAB_DATABASE_URL: the database lacks the schema of schema.postgres.sql (missing: {})",
            missing.join(", ")
        ))
    }
}

/// A Postgres column as text, as `text` does for SQLite (the templates show every column).
fn pg_text(row: &PgRow, i: usize) -> Result<String, PgError> {
    use tokio_postgres::types::Type;
    let ty = row.columns()[i].type_();
    let v = if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map(|n| n.to_string())
    } else if *ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map(|f| f.to_string())
    } else {
        row.try_get::<_, Option<String>>(i)?
    };
    Ok(v.unwrap_or_default())
}

/// An error and its causes on one line (tokio-postgres' own Display names only the kind).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out.replace('\n', " ")
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
    /// Postgres: the connection was lost or the server is shutting down.
    Unavailable,
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

/// Postgres errors as the contract maps them: SQLSTATE 40001, 40P01, 55P03 are "database is
/// locked"; class 08, 57P01-57P03, or a connection lost without a SQLSTATE (closed, I/O, could
/// not connect) are "database unavailable"; anything else is a 500.
fn pg_error(e: PgError) -> AppError {
    match e.code().map(|c| c.code()) {
        Some("40001" | "40P01" | "55P03") => AppError::Busy,
        Some(c) if c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03") => {
            AppError::Unavailable
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|c| c.is::<std::io::Error>()) =>
        {
            AppError::Unavailable
        }
        _ => AppError::Internal(format!("database error: {}", chain(&e))),
    }
}

/// A connection the pool could not hand out: what connecting said, or unavailable.
fn pool_error(e: deadpool_postgres::PoolError) -> AppError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => pg_error(e),
        deadpool_postgres::PoolError::Timeout(_) | deadpool_postgres::PoolError::Closed => {
            AppError::Unavailable
        }
        e => AppError::Internal(format!("database pool: {e}")),
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
            AppError::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "database unavailable".into(),
            ),
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
/// A larger body is read to its end (at most DRAIN_LIMIT bytes) and discarded before the 413,
/// unless the client waits for `100 Continue` before sending it.
struct Body(Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = AppError;

    async fn from_request(req: Request, _: &S) -> Result<Self, AppError> {
        let headers = req.headers();
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut too_large = declared.is_some_and(|n| n > BODY_LIMIT as u64);
        let waits = headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if too_large && waits {
            return Err(AppError::TooLarge);
        }
        let mut body = req.into_body();
        let mut kept = Vec::with_capacity(declared.filter(|_| !too_large).unwrap_or(0) as usize);
        let mut read = 0;
        while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            let frame =
                frame.map_err(|e| bad(format!("Failed to buffer the request body: {e}")))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            read += data.len();
            too_large |= read > BODY_LIMIT;
            if read > DRAIN_LIMIT {
                break;
            }
            if !too_large {
                kept.extend_from_slice(&data);
            }
        }
        if too_large {
            return Err(AppError::TooLarge);
        }
        Ok(Body(kept.into()))
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
// The database seam: one connection of either database. Everything above it (transactions,
// the writer, batches, handlers) is written once; each method here is SQLite's code or
// Postgres' code for the same step.
// ---------------------------------------------------------------------------------------------

/// A bound value both drivers take (String, &str, i64, f64, Option<f64>).
trait Param: Sync {
    fn sqlite(&self) -> &dyn ToSql;
    fn pg(&self) -> &(dyn PgToSql + Sync);
}

impl<T: ToSql + PgToSql + Sync> Param for T {
    fn sqlite(&self) -> &dyn ToSql {
        self
    }
    fn pg(&self) -> &(dyn PgToSql + Sync) {
        self
    }
}

fn sqlite_params<'p>(
    p: &'p [&'p dyn Param],
) -> rusqlite::ParamsFromIter<impl Iterator<Item = &'p dyn ToSql>> {
    rusqlite::params_from_iter(p.iter().map(|x| x.sqlite()))
}

/// The statements are written once, for SQLite, with numbered placeholders (`?1`) and no `?`
/// in literals; Postgres numbers them `$1`.
fn pg_sql(sql: &str) -> String {
    sql.replace('?', "$")
}

/// The statements that shape a transaction, as each database spells them.
#[derive(Clone, Copy)]
enum Ctl {
    Begin,
    Commit,
    Savepoint,
    Release,
    RollbackTo,
}

impl Ctl {
    fn sqlite(self, mode: TxnMode) -> &'static str {
        match self {
            Ctl::Begin => match mode {
                TxnMode::Deferred => "BEGIN DEFERRED",
                TxnMode::Immediate => "BEGIN IMMEDIATE",
            },
            Ctl::Commit => "COMMIT",
            Ctl::Savepoint => "SAVEPOINT job",
            Ctl::Release => "RELEASE job",
            Ctl::RollbackTo => "ROLLBACK TO job",
        }
    }

    /// BEGIN is Postgres' default isolation, READ COMMITTED.
    fn postgres(self) -> &'static str {
        match self {
            Ctl::Begin => "BEGIN",
            Ctl::Commit => "COMMIT",
            Ctl::Savepoint => "SAVEPOINT job",
            Ctl::Release => "RELEASE SAVEPOINT job",
            Ctl::RollbackTo => "ROLLBACK TO SAVEPOINT job",
        }
    }
}

/// A Postgres connection checked out of its pool, and whether a transaction is open on it
/// (tokio-postgres does not say). One left inside a transaction (its ROLLBACK failed, or the
/// task panicked) is taken out of the pool and closed, never handed out again.
struct PgConn {
    client: Option<deadpool_postgres::Object>,
    in_txn: bool,
}

impl PgConn {
    fn new(client: deadpool_postgres::Object) -> PgConn {
        PgConn {
            client: Some(client),
            in_txn: false,
        }
    }

    fn client(&self) -> &deadpool_postgres::Object {
        self.client.as_ref().expect("a checked-out connection")
    }

    /// A statement prepared once per connection (deadpool's statement cache), then run.
    async fn query_opt(&self, sql: &str, p: &[&dyn Param]) -> Result<Option<PgRow>, PgError> {
        let client = self.client();
        let statement = client.prepare_cached(sql).await?;
        let p: Vec<_> = p.iter().map(|x| x.pg()).collect();
        client.query_opt(&statement, &p).await
    }

    async fn execute(&self, sql: &str, p: &[&dyn Param]) -> Result<u64, PgError> {
        let client = self.client();
        let statement = client.prepare_cached(sql).await?;
        let p: Vec<_> = p.iter().map(|x| x.pg()).collect();
        client.execute(&statement, &p).await
    }
}

impl Drop for PgConn {
    fn drop(&mut self) {
        if let (true, Some(client)) = (self.in_txn, self.client.take()) {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// One connection of either database, for the length of one unit of work.
enum Session<'a> {
    Sqlite {
        conn: &'a mut Connection,
        mode: TxnMode,
    },
    Postgres(&'a mut PgConn),
}

impl Session<'_> {
    /// BEGIN, COMMIT or a savepoint statement.
    async fn exec(&mut self, ctl: Ctl) -> Result<(), AppError> {
        match self {
            Session::Sqlite { conn, mode } => Ok(exec(conn, ctl.sqlite(*mode))?),
            Session::Postgres(pg) => {
                let result = pg.client().batch_execute(ctl.postgres()).await;
                match ctl {
                    Ctl::Begin => pg.in_txn = result.is_ok(),
                    Ctl::Commit => pg.in_txn = false, // a COMMIT that fails ends it too
                    _ => {}
                }
                result.map_err(pg_error)
            }
        }
    }

    /// ROLLBACK, if a transaction is open (errors ignored: the work already failed).
    async fn rollback(&mut self) {
        match self {
            Session::Sqlite { conn, .. } => rollback(conn),
            Session::Postgres(pg) => {
                if pg.in_txn && pg.client().batch_execute("ROLLBACK").await.is_ok() {
                    pg.in_txn = false;
                }
            }
        }
    }

    /// COMMIT after statements that succeeded; ROLLBACK on any error.
    async fn finish<T>(&mut self, result: Result<T, AppError>) -> Result<T, AppError> {
        let result = match result {
            Ok(v) => self.exec(Ctl::Commit).await.map(|()| v),
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.rollback().await;
        }
        result
    }

    /// The database ended the open transaction itself (SQLite rolled it back; Postgres lost
    /// the connection): nothing written in it survives.
    fn txn_lost(&self) -> bool {
        match self {
            Session::Sqlite { conn, .. } => conn.is_autocommit(),
            Session::Postgres(pg) => pg.client().is_closed(),
        }
    }

    /// An INSERT; the new row's id (SQLite: last_insert_rowid; Postgres: RETURNING id).
    async fn insert(&mut self, sql: &'static str, p: &[&dyn Param]) -> Result<i64, AppError> {
        match self {
            Session::Sqlite { conn, .. } => Ok(logged(sql, p, || {
                conn.prepare_cached(sql)?.insert(sqlite_params(p))
            })?),
            Session::Postgres(pg) => {
                let sql = format!("{} RETURNING id", pg_sql(sql));
                match pg.query_opt(&sql, p).await.map_err(pg_error)? {
                    Some(row) => row.try_get(0).map_err(pg_error),
                    None => Err(AppError::Internal("INSERT returned no id".into())),
                }
            }
        }
    }

    /// An UPDATE; the number of rows it changed.
    async fn execute(&mut self, sql: &'static str, p: &[&dyn Param]) -> Result<u64, AppError> {
        match self {
            Session::Sqlite { conn, .. } => Ok(logged(sql, p, || {
                conn.prepare_cached(sql)?.execute(sqlite_params(p))
            })? as u64),
            Session::Postgres(pg) => pg.execute(&pg_sql(sql), p).await.map_err(pg_error),
        }
    }

    /// The number in the first column of the first row, if there is a row.
    async fn value(
        &mut self,
        sql: &'static str,
        p: &[&dyn Param],
    ) -> Result<Option<f64>, AppError> {
        match self {
            Session::Sqlite { conn, .. } => Ok(logged(sql, p, || {
                conn.prepare_cached(sql)?
                    .query_row(sqlite_params(p), |r| r.get(0))
                    .optional()
            })?),
            Session::Postgres(pg) => match pg.query_opt(&pg_sql(sql), p).await {
                Ok(row) => row.map(|r| r.try_get(0)).transpose().map_err(pg_error),
                Err(e) => Err(pg_error(e)),
            },
        }
    }

    /// The first row, every column as text (what the templates show), if there is one.
    async fn row(
        &mut self,
        sql: &'static str,
        p: &[&dyn Param],
    ) -> Result<Option<Vec<String>>, AppError> {
        match self {
            Session::Sqlite { conn, .. } => Ok(logged(sql, p, || {
                let mut statement = conn.prepare_cached(sql)?;
                let n = statement.column_count();
                statement
                    .query_row(sqlite_params(p), |r| {
                        (0..n).map(|i| Ok(text(r.get_ref(i)?))).collect()
                    })
                    .optional()
            })?),
            Session::Postgres(pg) => match pg.query_opt(&pg_sql(sql), p).await {
                Ok(None) => Ok(None),
                Ok(Some(row)) => (0..row.len())
                    .map(|i| pg_text(&row, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some)
                    .map_err(pg_error),
                Err(e) => Err(pg_error(e)),
            },
        }
    }
}

/// Runs to completion, in one poll, a future that never waits: the shared database code on a
/// SQLite connection (its SQLite arms never await), on the blocking thread that holds it.
fn ready<T>(work: impl Future<Output = T>) -> T {
    let mut work = std::pin::pin!(work);
    match work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("SQLite work never awaits"),
    }
}

/// A statement without parameters or rows: BEGIN, COMMIT, the savepoints.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    logged(sql, &[], || {
        conn.prepare_cached(sql)?.execute([]).map(|_| ())
    })
}

fn rollback(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = logged("ROLLBACK", &[], || conn.execute_batch("ROLLBACK"));
    }
}

// ---------------------------------------------------------------------------------------------
// Pools: LAB_READERS connections. SQLite's are used only inside spawn_blocking; Postgres' run
// their work on a tokio task of its own, so a request that goes away never cuts a transaction
// short (as spawn_blocking does not either).
// ---------------------------------------------------------------------------------------------

enum Pool {
    Sqlite(Arc<SqlitePool>),
    Postgres(deadpool_postgres::Pool),
}

struct SqlitePool {
    conns: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
    mode: TxnMode,
}

/// Puts the connection back even if the request future was dropped or the closure panicked.
struct Pooled<'a> {
    pool: &'a SqlitePool,
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

impl SqlitePool {
    fn new(conns: Vec<Connection>, mode: TxnMode) -> Arc<SqlitePool> {
        let n = conns.len();
        Arc::new(SqlitePool {
            conns: Mutex::new(conns),
            permits: Arc::new(Semaphore::new(n)),
            mode,
        })
    }

    /// Waits (asynchronously) for a free connection, then does `work` on a blocking thread.
    async fn run(self: &Arc<Self>, work: Work) -> Result<Done, AppError> {
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
                Some(conn) => ready(work.perform(&mut Session::Sqlite {
                    conn,
                    mode: pool.mode,
                })),
                None => Err(AppError::Internal("no pooled connection".into())),
            }
        })
        .await
        .map_err(|_| AppError::Internal("database task failed".into()))?
    }
}

impl Pool {
    async fn run(&self, work: Work) -> Result<Done, AppError> {
        match self {
            Pool::Sqlite(pool) => pool.run(work).await,
            Pool::Postgres(pool) => {
                let client = pool.get().await.map_err(pool_error)?;
                tokio::spawn(async move {
                    work.perform(&mut Session::Postgres(&mut PgConn::new(client)))
                        .await
                })
                .await
                .map_err(|_| AppError::Internal("database task failed".into()))?
            }
        }
    }

    /// Shutdown: Postgres' idle connections close now, the others as they come back.
    fn close(&self) {
        if let Pool::Postgres(pool) = self {
            pool.close();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The work: one read, one write transaction (pool, writer) or savepoints inside one
// transaction (batch), or LAB_METRICS_TXN=record's five transactions.
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

enum Work {
    ShowRequest(i64),
    ShowItem(i64),
    ShowUser(i64),
    Write(Write),
    MetricRecords {
        instance: String,
        measurements: Vec<(String, f64)>,
        ts: String,
    },
}

/// What a piece of work answers: a new id, the five new ids, or a row as text.
enum Done {
    Id(i64),
    Ids(Vec<i64>),
    Row(Vec<String>),
}

const SQL_INSERT_REQUEST: &str = "INSERT INTO requests (uid, ip, method, url, parameters, created_at, updated_at) \
                                  VALUES (?1, ?2, 'POST', ?3, ?4, ?5, ?5)";
const SQL_GET_REQUEST: &str = "SELECT id, uid, ip, method, url, parameters, created_at, updated_at FROM requests WHERE id = ?1";
const SQL_LATEST_METRIC: &str =
    "SELECT value FROM metrics WHERE instance = ?1 AND name = ?2 ORDER BY id DESC LIMIT 1";
const SQL_INSERT_METRIC: &str =
    "INSERT INTO metrics (instance, name, value, previous, created_at) VALUES (?1, ?2, ?3, ?4, ?5)";
const SQL_INSERT_ITEM: &str = "INSERT INTO items (payload, created_at) VALUES (?1, ?2)";
const SQL_GET_ITEM: &str = "SELECT id, payload, created_at FROM items WHERE id = ?1";
const SQL_UPDATE_USER: &str =
    "UPDATE users SET departname = ?1, updates = updates + 1 WHERE uid = ?2";
const SQL_GET_USER: &str = "SELECT uid, username, departname, created FROM users WHERE uid = ?1";

impl Work {
    async fn perform(self, s: &mut Session<'_>) -> Result<Done, AppError> {
        match self {
            Work::ShowRequest(id) => s
                .row(SQL_GET_REQUEST, &[&id])
                .await?
                .map(Done::Row)
                .ok_or(AppError::NotFound("request not found")),
            Work::ShowItem(id) => s
                .row(SQL_GET_ITEM, &[&id])
                .await?
                .map(Done::Row)
                .ok_or(AppError::NotFound("item not found")),
            Work::ShowUser(uid) => select_user(s, uid).await.map(Done::Row),
            Work::Write(write) => transaction(s, &write).await,
            Work::MetricRecords {
                instance,
                measurements,
                ts,
            } => metrics_records(s, &instance, &measurements, &ts)
                .await
                .map(Done::Ids),
        }
    }
}

impl Write {
    /// The statements of one write, run inside an open transaction (or savepoint).
    async fn apply(&self, s: &mut Session<'_>) -> Result<Done, AppError> {
        match self {
            Write::Request {
                uid,
                ip,
                url,
                parameters,
                ts,
            } => Ok(Done::Id(
                s.insert(SQL_INSERT_REQUEST, &[uid, ip, url, parameters, ts])
                    .await?,
            )),
            Write::Metrics {
                instance,
                measurements,
                ts,
            } => {
                let mut ids = Vec::with_capacity(measurements.len());
                for (name, value) in measurements {
                    let previous = s.value(SQL_LATEST_METRIC, &[instance, name]).await?;
                    ids.push(
                        s.insert(SQL_INSERT_METRIC, &[instance, name, value, &previous, ts])
                            .await?,
                    );
                }
                Ok(Done::Ids(ids))
            }
            Write::Item { payload, ts } => {
                Ok(Done::Id(s.insert(SQL_INSERT_ITEM, &[payload, ts]).await?))
            }
            Write::User { uid, departname } => {
                let changed = s.execute(SQL_UPDATE_USER, &[departname, uid]).await?;
                if changed == 0 {
                    return Err(AppError::NotFound("user not found"));
                }
                Ok(Done::Row(select_user(s, *uid).await?))
            }
        }
    }
}

async fn select_user(s: &mut Session<'_>, uid: i64) -> Result<Vec<String>, AppError> {
    s.row(SQL_GET_USER, &[&uid])
        .await?
        .ok_or(AppError::NotFound("user not found"))
}

/// BEGIN (SQLite: deferred|immediate), the write's statements, COMMIT; ROLLBACK on any error.
async fn transaction(s: &mut Session<'_>, write: &Write) -> Result<Done, AppError> {
    s.exec(Ctl::Begin).await?;
    let result = write.apply(s).await;
    s.finish(result).await
}

/// LAB_METRICS_TXN=record, ActiveRecord's shape (pool only): for each measurement, the SELECT
/// of the latest value as an autocommit read, then one transaction for its INSERT. A failure
/// at record k is returned; records 1..k-1 stay committed, as in Rails.
async fn metrics_records(
    s: &mut Session<'_>,
    instance: &str,
    measurements: &[(String, f64)],
    ts: &str,
) -> Result<Vec<i64>, AppError> {
    let mut ids = Vec::with_capacity(measurements.len());
    for (name, value) in measurements {
        let previous = s.value(SQL_LATEST_METRIC, &[&instance, name]).await?;
        s.exec(Ctl::Begin).await?;
        let id = s
            .insert(SQL_INSERT_METRIC, &[&instance, name, value, &previous, &ts])
            .await;
        ids.push(s.finish(id).await?);
    }
    Ok(ids)
}

// ---------------------------------------------------------------------------------------------
// The writer (LAB_WRITE_PATH=writer|batch): one connection fed by a queue; each request waits
// for its own transaction's COMMIT. SQLite: a dedicated std::thread; Postgres: a tokio task.
// ---------------------------------------------------------------------------------------------

struct Job {
    write: Write,
    reply: oneshot::Sender<Result<Done, AppError>>,
}

enum Msg {
    Job(Job),
    Stop,
}

/// The writer's connection: SQLite's own, or a pool of one Postgres connection (a connection
/// Postgres lost is replaced for the next job).
enum WriterDb {
    Sqlite(Connection, TxnMode),
    Postgres(deadpool_postgres::Pool),
}

impl WriterDb {
    async fn run(&mut self, jobs: Vec<Job>, batch: bool) {
        match self {
            WriterDb::Sqlite(conn, mode) => {
                let mode = *mode;
                run_jobs(&mut Session::Sqlite { conn, mode }, jobs, batch).await
            }
            WriterDb::Postgres(pool) => match pool.get().await {
                Ok(client) => {
                    let mut conn = PgConn::new(client);
                    run_jobs(&mut Session::Postgres(&mut conn), jobs, batch).await
                }
                Err(e) => {
                    let e = pool_error(e);
                    for job in jobs {
                        let _ = job.reply.send(Err(e.clone()));
                    }
                }
            },
        }
    }
}

/// The transactions the writer ran, the jobs in them, and how many transactions held each count
/// of jobs (/health's `writer`).
#[derive(Default)]
struct WriterCounts {
    transactions: u64,
    jobs: u64,
    sizes: std::collections::BTreeMap<usize, u64>,
}

impl WriterCounts {
    fn add(counts: &Mutex<WriterCounts>, n: usize) {
        let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
        c.transactions += 1;
        c.jobs += n as u64;
        *c.sizes.entry(n).or_insert(0) += 1;
    }

    fn snapshot(counts: &Mutex<WriterCounts>) -> Value {
        let c = counts.lock().unwrap_or_else(|e| e.into_inner());
        let sizes: serde_json::Map<String, Value> =
            c.sizes.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        json!({"transactions": c.transactions, "jobs": c.jobs, "sizes": sizes})
    }
}

/// One transaction per job (`writer`), or group commit (`batch`).
async fn writer_loop(
    mut db: WriterDb,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    batch: bool,
    counts: Arc<Mutex<WriterCounts>>,
) {
    let mut stopping = false;
    while !stopping {
        let mut jobs = match rx.recv().await {
            Some(Msg::Job(job)) => vec![job],
            Some(Msg::Stop) | None => break,
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
        }
        if batch {
            WriterCounts::add(&counts, jobs.len());
        } else {
            for _ in &jobs {
                WriterCounts::add(&counts, 1);
            }
        }
        db.run(jobs, batch).await;
    }
    // Answer anything still queued after Stop (nothing should be: the server has drained).
    let mut rest = Vec::new();
    while let Ok(Msg::Job(job)) = rx.try_recv() {
        rest.push(job);
    }
    for _ in &rest {
        WriterCounts::add(&counts, 1);
    }
    if !rest.is_empty() {
        db.run(rest, false).await;
    }
}

async fn run_jobs(s: &mut Session<'_>, jobs: Vec<Job>, batch: bool) {
    if batch {
        run_batch(s, jobs).await;
    } else {
        for job in jobs {
            let _ = job.reply.send(transaction(s, &job.write).await);
        }
    }
}

/// Group commit: SAVEPOINT job ... RELEASE job for each job (a job that fails is rolled back to
/// its savepoint and answered alone), one COMMIT, then every answer. If the database ended the
/// transaction, a savepoint statement failed, or the COMMIT fails, every job fails: none of
/// them is acknowledged. (On Postgres a COMMIT after an error that was not rolled back to its
/// savepoint would roll everything back without an error: that never happens here.)
async fn run_batch(s: &mut Session<'_>, jobs: Vec<Job>) {
    if let Err(e) = s.exec(Ctl::Begin).await {
        for job in jobs {
            let _ = job.reply.send(Err(e.clone()));
        }
        return;
    }
    let mut results = Vec::with_capacity(jobs.len());
    let mut lost: Option<AppError> = None;
    for job in &jobs {
        let outcome = match s.exec(Ctl::Savepoint).await {
            Ok(()) => job.write.apply(s).await,
            Err(e) => {
                lost = Some(e);
                break;
            }
        };
        let answer = match outcome {
            Ok(done) => s.exec(Ctl::Release).await.map(|()| Ok(done)),
            Err(e) if s.txn_lost() => Err(e),
            Err(e) => match s.exec(Ctl::RollbackTo).await {
                Ok(()) => s.exec(Ctl::Release).await.map(|()| Err(e)),
                Err(undo) => Err(undo),
            },
        };
        match answer {
            Ok(answer) => results.push(answer),
            Err(e) => {
                lost = Some(e);
                break;
            }
        }
    }
    let outcome = match lost {
        Some(e) => Err(e),
        None => s.exec(Ctl::Commit).await,
    };
    match outcome {
        Ok(()) => {
            for (job, r) in jobs.into_iter().zip(results) {
                let _ = job.reply.send(r);
            }
        }
        Err(e) => {
            s.rollback().await;
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
    pool: Pool,
    writer: Option<mpsc::UnboundedSender<Msg>>,
    metrics_txn: MetricsTxn,
    postgres: bool,
    templates: Templates,
    health: Value,
    requests_handled: AtomicU64,
    writer_counts: Option<Arc<Mutex<WriterCounts>>>, // writer/batch: /health's `writer`
}

type Shared = Arc<AppState>;

impl AppState {
    async fn write(&self, write: Write) -> Result<Done, AppError> {
        match &self.writer {
            None => self.pool.run(Work::Write(write)).await,
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

    /// Postgres' text cannot hold U+0000 (SQLite's can): there, a string that holds it is a 400
    /// before any write, not the driver's error.
    fn storable(&self, field: &str, value: &str) -> Result<(), AppError> {
        if self.postgres && value.contains('\0') {
            return Err(bad(format!(
                "{field} holds U+0000, which Postgres text cannot store"
            )));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers.
// ---------------------------------------------------------------------------------------------

async fn health(State(st): State<Shared>) -> Json<Value> {
    let mut h = st.health.clone();
    h["requests_handled"] = json!(st.requests_handled.load(Ordering::Relaxed));
    h["writer"] = st.writer_counts.as_ref().map_or(Value::Null, |c| WriterCounts::snapshot(c));
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
    let Done::Id(id) = st.write(write).await? else {
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
    let Done::Row(row) = st.pool.run(Work::ShowRequest(id)).await? else {
        unreachable!()
    };
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
        st.storable("instance", &m.instance)?;
        for x in &m.measurements {
            st.storable("measurement name", &x.name)?;
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
        let work = Work::MetricRecords {
            instance: instance.clone(),
            measurements,
            ts: now(),
        };
        let Done::Ids(ids) = st.pool.run(work).await? else {
            unreachable!()
        };
        return Ok((
            StatusCode::CREATED,
            Json(json!({ "instance": instance, "ids": ids })),
        )
            .into_response());
    }
    let Done::Ids(ids) = st
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
    st.storable("payload", &payload)?;
    let Done::Id(id) = st.write(Write::Item { payload, ts: now() }).await? else {
        unreachable!()
    };
    Ok((StatusCode::CREATED, Json(json!({ "id": id }))).into_response())
}

async fn show_item(State(st): State<Shared>, Id(id): Id) -> Result<Json<Value>, AppError> {
    let Done::Row(row) = st.pool.run(Work::ShowItem(id)).await? else {
        unreachable!()
    };
    let [id, payload, created_at] = <[String; 3]>::try_from(row)
        .map_err(|_| AppError::Internal("an items row of the wrong shape".into()))?;
    let id: i64 = id
        .parse()
        .map_err(|_| AppError::Internal(format!("items.id '{id}' is not an integer")))?;
    Ok(Json(
        json!({ "id": id, "payload": payload, "created_at": created_at }),
    ))
}

async fn show_user(State(st): State<Shared>, Id(uid): Id) -> Result<Html<String>, AppError> {
    let Done::Row(row) = st.pool.run(Work::ShowUser(uid)).await? else {
        unreachable!()
    };
    Ok(Html(st.templates.user.render(&row)))
}

async fn show_user_page(State(st): State<Shared>, Id(uid): Id) -> Result<Html<String>, AppError> {
    let Done::Row(row) = st.pool.run(Work::ShowUser(uid)).await? else {
        unreachable!()
    };
    Ok(Html(st.templates.user_page.render(&row)))
}

#[derive(Deserialize)]
struct UserIn {
    departname: String,
}

async fn update_user(
    State(st): State<Shared>,
    id: Result<Id, AppError>,
    body: Result<Body, AppError>,
) -> Result<Html<String>, AppError> {
    // The body is read before a bad id is refused: refused unread, hyper closes the keep-alive
    // connection without a `Connection: close`, and a client's next request on it fails.
    let Id(uid) = id?;
    let Body(body) = body?;
    let UserIn { departname } = json_object(&body)?;
    check_len("departname", &departname)?;
    st.storable("departname", &departname)?;
    let Done::Row(row) = st.write(Write::User { uid, departname }).await? else {
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

/// The writer's thread (SQLite) or task (Postgres).
enum WriterHandle {
    Thread(thread::JoinHandle<()>),
    Task(tokio::task::JoinHandle<()>),
}

/// A database opened at start-up.
struct Opened {
    pool: Pool,
    writer: Option<WriterDb>,
    /// SQLite's version, or Postgres' `SHOW server_version`.
    version: String,
    /// The pragmas read back (SQLite), or null (Postgres).
    pragmas: Value,
}

/// SQLite: the SQL log, LAB_READERS connections (the first checks the schema and reads the
/// pragmas back), then the writer's connection.
fn open_sqlite(sc: &SqliteConfig, cfg: &Config) -> Result<Opened, String> {
    if sc.sql_log {
        let mut path = sc.db.clone().into_os_string();
        path.push(".sql.log");
        let _ = SQL_LOG.set(SqlLog::open(Path::new(&path))?);
    }
    let first = open_connection(sc)?;
    check_schema(&first, &sc.db)?;
    let pragmas = read_pragmas(&first, &sc.pragmas)?;
    let mut readers = vec![first];
    for _ in 1..cfg.readers {
        readers.push(open_connection(sc)?);
    }
    let writer = match cfg.write_path {
        WritePath::Pool => None,
        WritePath::Writer | WritePath::Batch => {
            Some(WriterDb::Sqlite(open_connection(sc)?, sc.txn_mode))
        }
    };
    Ok(Opened {
        pool: Pool::Sqlite(SqlitePool::new(readers, sc.txn_mode)),
        writer,
        version: rusqlite::version().to_string(),
        pragmas: Value::Object(pragmas),
    })
}

/// Postgres: a pool of LAB_READERS connections, all opened now (the first checks the schema
/// and reads the server's version), then the writer's pool of one, opened now too.
async fn open_postgres(
    pg: &tokio_postgres::Config,
    cfg: &Config,
    connector: &PgConnector,
) -> Result<Opened, String> {
    let pool = connector.pool(pg, cfg.readers)?;
    let first = fill(&pool, cfg.readers).await?;
    check_pg_schema(&first).await?;
    let version: String = first
        .query_one("SHOW server_version", &[])
        .await
        .and_then(|r| r.try_get(0))
        .map_err(|e| format!("LAB_DATABASE_URL: SHOW server_version: {}", chain(&e)))?;
    drop(first);
    let writer = match cfg.write_path {
        WritePath::Pool => None,
        WritePath::Writer | WritePath::Batch => {
            let writer = connector.pool(pg, 1)?;
            drop(fill(&writer, 1).await?);
            Some(WriterDb::Postgres(writer))
        }
    };
    Ok(Opened {
        pool: Pool::Postgres(pool),
        writer,
        version,
        pragmas: Value::Null,
    })
}

fn run() -> Result<(), String> {
    let cfg = Config::from_env()?;
    let templates = Templates {
        request: Template::load(&cfg.templates, "request.html", &REQUEST_FIELDS)?,
        user: Template::load(&cfg.templates, "user.html", &USER_FIELDS)?,
        user_page: Template::load(&cfg.templates, "user_page.html", &USER_FIELDS)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .enable_all()
        .build()
        .map_err(|e| format!("LAB_THREADS={}: cannot start tokio: {e}", cfg.threads))?;

    let connector = PgConnector::default();
    let sqlite = match &cfg.backend {
        Backend::Sqlite(sc) => Some(sc),
        Backend::Postgres(_) => None,
    };
    let opened = match &cfg.backend {
        Backend::Sqlite(sc) => open_sqlite(sc, &cfg)?,
        Backend::Postgres(pg) => runtime.block_on(open_postgres(pg, &cfg, &connector))?,
    };
    let batch = cfg.write_path == WritePath::Batch;
    let counts = Arc::new(Mutex::new(WriterCounts::default()));
    let (writer_tx, writer) = match opened.writer {
        None => (None, None),
        Some(db) => {
            let (tx, rx) = mpsc::unbounded_channel();
            let handle = match db {
                // The shared writer code on its own thread: only the queue is waited for.
                WriterDb::Sqlite(..) => {
                    let rt = runtime.handle().clone();
                    let counts = Arc::clone(&counts);
                    let thread = thread::Builder::new()
                        .name("lab-writer".into())
                        .spawn(move || rt.block_on(writer_loop(db, rx, batch, counts)))
                        .map_err(|e| format!("cannot start the writer thread: {e}"))?;
                    WriterHandle::Thread(thread)
                }
                WriterDb::Postgres(_) => {
                    WriterHandle::Task(runtime.spawn(writer_loop(db, rx, batch, Arc::clone(&counts))))
                }
            };
            (Some(tx), Some(handle))
        }
    };

    let write_path = match cfg.write_path {
        WritePath::Pool => "pool",
        WritePath::Writer => "writer",
        WritePath::Batch => "batch",
    };
    let database = if sqlite.is_some() {
        "sqlite"
    } else {
        "postgres"
    };
    let mut versions = json!({
        "rust": env!("LAB_RUSTC_VERSION"),
        "axum": env!("LAB_VERSION_AXUM"),
        "hyper": env!("LAB_VERSION_HYPER"),
        "tokio": env!("LAB_VERSION_TOKIO"),
        "rusqlite": env!("LAB_VERSION_RUSQLITE"),
        "libsqlite3-sys": env!("LAB_VERSION_LIBSQLITE3_SYS"),
    });
    if sqlite.is_none() {
        versions["tokio-postgres"] = json!(env!("LAB_VERSION_TOKIO_POSTGRES"));
        versions["deadpool-postgres"] = json!(env!("LAB_VERSION_DEADPOOL_POSTGRES"));
    }
    // SQLite's own knobs are null with postgres.
    let health = json!({
        "server": "rust-axum",
        "versions": versions,
        "sqlite_version": rusqlite::version(),
        "sqlite_compile_options": compile_options()?,
        "database": database,
        "database_version": opened.version,
        "pid": std::process::id(),
        "knobs": {
            "database": database,
            "pragmas": opened.pragmas,
            "txn_mode": sqlite.map(|s| if s.txn_mode == TxnMode::Immediate { "immediate" } else { "deferred" }),
            "busy": sqlite.map(|s| s.busy.describe()),
            "write_path": write_path,
            "processes": cfg.processes,
            "threads": cfg.threads,
            "readers": cfg.readers,
            "metrics_txn": if cfg.metrics_txn == MetricsTxn::Record { "record" } else { "request" },
            "cache": sqlite.map(|s| if s.shared_cache { "shared" } else { "private" }),
            "sql_log": sqlite.map(|s| if s.sql_log { "on" } else { "off" }),
        },
        "emulated": {},
        "requests_handled": 0,
    });
    let state = Arc::new(AppState {
        pool: opened.pool,
        writer: writer_tx.clone(),
        metrics_txn: cfg.metrics_txn,
        postgres: sqlite.is_none(),
        templates,
        health,
        requests_handled: AtomicU64::new(0),
        writer_counts: writer_tx.as_ref().map(|_| Arc::clone(&counts)),
    });

    runtime.block_on(serve(&cfg, Arc::clone(&state)))?;

    // The server has finished every request in flight: let the writer drain and stop.
    if let (Some(tx), Some(handle)) = (writer_tx, writer) {
        let _ = tx.send(Msg::Stop);
        match handle {
            WriterHandle::Thread(thread) => {
                let _ = thread.join();
            }
            WriterHandle::Task(task) => {
                let _ = runtime.block_on(task);
            }
        }
    }
    // Close the connections (Postgres: each says Terminate, and shutdown waits for that).
    state.pool.close();
    drop(state);
    runtime.block_on(connector.closed(Duration::from_secs(5)));
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
