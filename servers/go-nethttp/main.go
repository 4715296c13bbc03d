// go-nethttp: the SQLite Production Lab contract (../README.md, ../openapi.yaml) on
// net/http (Go 1.22 ServeMux patterns) + database/sql + mattn/go-sqlite3, or with
// LAB_DATABASE=postgres + jackc/pgx/v5's database/sql driver (stdlib).
//
// One process. Reads go through a pool of LAB_READERS connections; writes run either on
// that pool (LAB_WRITE_PATH=pool) or on one writer goroutine owning its own connection,
// fed by a channel (writer: one transaction per request; batch: group commit). Both
// databases run the same handlers and transactions; what differs (connect, placeholders,
// new ids, savepoint syntax, error mapping) is behind the dialect interface.
package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/mattn/go-sqlite3"
)

const (
	maxBody    = 1 << 20 // 413 above this
	maxPayload = 65536   // POST /items payload, bytes of UTF-8
	timeLayout = "2006-01-02T15:04:05.000000Z"
)

// ---------------------------------------------------------------------------------------
// Configuration (LAB_* environment variables; every problem is one "lab: " line, exit 1)

type config struct {
	host, port, dbPath, templates string
	database                      string          // sqlite | postgres
	pgConfig                      *pgx.ConnConfig // LAB_DATABASE_URL, parsed (postgres)
	pragmas                       []pragma
	txnMode                       string // deferred | immediate
	busy                          busyPolicy
	writePath                     string // pool | writer | batch
	processes, threads, readers   int
	metricsTxn                    string // request | record
	cache                         string // private | shared
	sqlLog                        string // off | on
	pool                          string // fixed | default (this stack's own knob: stack.toml)
}

type pragma struct{ name, value string }

type busyPolicy struct {
	kind string // busy_timeout | sleep_poll | retries | none
	n    int    // milliseconds or retry count
}

func (b busyPolicy) String() string {
	if b.kind == "none" {
		return "none"
	}
	return b.kind + ":" + strconv.Itoa(b.n)
}

// emulated: mattn/go-sqlite3 has no sqlite3_busy_handler hook, so these run in Go.
func (b busyPolicy) emulated() bool { return b.kind == "sleep_poll" || b.kind == "retries" }

// retry runs f again where SQLite would have called a busy handler, i.e. only for the
// statements the caller passes here (BEGIN IMMEDIATE, the first statement after BEGIN
// DEFERRED, autocommit reads, COMMIT). With native busy_timeout or none it runs f once.
func (b busyPolicy) retry(f func() error) error {
	switch b.kind {
	case "sleep_poll": // sleep 1 ms per try until n ms have passed since the first try
		start := time.Now()
		for {
			err := f()
			if !isBusy(err) || time.Since(start) >= time.Duration(b.n)*time.Millisecond {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	case "retries": // a handler returning count <= n, never sleeping (Rails 7.1 `retries:`)
		for count := 0; ; count++ {
			err := f()
			if !isBusy(err) || count > b.n {
				return err
			}
		}
	}
	return f()
}

// The LAB_PRAGMAS allow-list of servers/shared.toml (tests/test_contract.py checks they agree).
var pragmaValues = map[string][]string{
	"journal_mode": {"delete", "truncate", "persist", "memory", "wal", "off"},
	"synchronous":  {"off", "normal", "full", "extra", "0", "1", "2", "3"},
	"temp_store":   {"default", "file", "memory", "0", "1", "2"},
	"foreign_keys": {"on", "off", "true", "false", "0", "1"},
	// nil: any integer
	"cache_size": nil, "mmap_size": nil, "journal_size_limit": nil, "wal_autocheckpoint": nil,
}

const allowedPragmas = "cache_size, foreign_keys, journal_mode, journal_size_limit, mmap_size, synchronous, temp_store, wal_autocheckpoint"

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func positive(name, def string) (int, error) {
	v := env(name, def)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not an integer >= 1", name, v)
	}
	return n, nil
}

func loadConfig() (*config, error) {
	c := &config{host: env("LAB_HOST", "127.0.0.1")}

	c.port = env("LAB_PORT", "")
	if p, err := strconv.Atoi(c.port); c.port == "" || err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("LAB_PORT=%q is not a port number 1-65535 (required)", c.port)
	}

	c.database = env("LAB_DATABASE", "sqlite")
	var err error
	switch c.database {
	case "sqlite":
		if env("LAB_DATABASE_URL", "") != "" {
			return nil, errors.New("LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite (or set LAB_DATABASE=postgres)")
		}
		err = c.loadSQLite()
	case "postgres":
		err = c.loadPostgres()
	default:
		return nil, fmt.Errorf("LAB_DATABASE='%s' is not one of sqlite|postgres", c.database)
	}
	if err != nil {
		return nil, err
	}

	c.templates = env("LAB_TEMPLATES", "")
	if c.templates == "" {
		return nil, errors.New("LAB_TEMPLATES is required: the directory of request.html, user.html, user_page.html")
	}

	c.writePath = env("LAB_WRITE_PATH", "pool")
	if !contains([]string{"pool", "writer", "batch"}, c.writePath) {
		return nil, fmt.Errorf("LAB_WRITE_PATH='%s' is not one of pool|writer|batch", c.writePath)
	}

	c.metricsTxn = env("LAB_METRICS_TXN", "request")
	if c.metricsTxn != "request" && c.metricsTxn != "record" {
		return nil, fmt.Errorf("LAB_METRICS_TXN='%s' is not one of request|record", c.metricsTxn)
	}
	if c.metricsTxn == "record" && c.writePath != "pool" {
		return nil, fmt.Errorf("LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool (got %s: each record commits on the request's pooled connection)", c.writePath)
	}

	if c.database == "sqlite" {
		c.cache = env("LAB_CACHE", "private")
		if c.cache != "private" && c.cache != "shared" {
			return nil, fmt.Errorf("LAB_CACHE='%s' is not one of private|shared", c.cache)
		}

		c.sqlLog = env("LAB_SQL_LOG", "off")
		if c.sqlLog != "off" && c.sqlLog != "on" {
			return nil, fmt.Errorf("LAB_SQL_LOG='%s' is not one of off|on", c.sqlLog)
		}
	}

	if c.processes, err = positive("LAB_PROCESSES", "1"); err != nil {
		return nil, err
	}
	if c.processes > 1 {
		return nil, fmt.Errorf("LAB_PROCESSES=%d: go-nethttp is a single-process server (one Go process uses every core; set LAB_THREADS)", c.processes)
	}
	if c.threads, err = positive("LAB_THREADS", strconv.Itoa(runtime.GOMAXPROCS(0))); err != nil {
		return nil, err
	}
	if c.readers, err = positive("LAB_READERS", strconv.Itoa(c.threads)); err != nil {
		return nil, err
	}
	c.pool = env("LAB_POOL", "fixed")
	if c.pool != "fixed" && c.pool != "default" {
		return nil, fmt.Errorf("LAB_POOL='%s' is not one of fixed|default", c.pool)
	}
	return c, nil
}

// sqliteOnly: SQLite's own knobs, which must be unset or empty with LAB_DATABASE=postgres
// (/health reports them as null).
var sqliteOnly = []string{"LAB_PRAGMAS", "LAB_TXN_MODE", "LAB_BUSY", "LAB_CACHE", "LAB_SQL_LOG"}

// loadPostgres: LAB_DATABASE_URL (a libpq key=value string, parsed here; newService
// connects). LAB_DB is not read; SQLite's knobs are refused.
func (c *config) loadPostgres() error {
	for _, name := range sqliteOnly {
		if env(name, "") != "" {
			return fmt.Errorf("%s is SQLite's; unset it with LAB_DATABASE=postgres", name)
		}
	}
	url := env("LAB_DATABASE_URL", "")
	if url == "" {
		return errors.New("LAB_DATABASE_URL is required with LAB_DATABASE=postgres (a libpq key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')")
	}
	pc, err := pgx.ParseConfig(url) // its errors redact the password
	if err != nil {
		return fmt.Errorf("LAB_DATABASE_URL: %v", err)
	}
	// Defaults only where the string says nothing: a host that never answers fails in 10 s,
	// not in minutes, and pg_stat_activity names the server.
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = 10 * time.Second
	}
	if _, ok := pc.RuntimeParams["application_name"]; !ok {
		pc.RuntimeParams["application_name"] = "go-nethttp"
	}
	c.pgConfig = pc
	// Postgres waits for row locks itself: no busy policy, and BEGIN is Postgres' BEGIN.
	c.busy = busyPolicy{kind: "none"}
	return nil
}

// loadSQLite: LAB_DB and SQLite's own knobs.
func (c *config) loadSQLite() error {
	c.dbPath = env("LAB_DB", "")
	if c.dbPath == "" {
		return errors.New("LAB_DB is required: the path of a database made from servers/schema.sql")
	}
	if st, err := os.Stat(c.dbPath); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("LAB_DB=%q is not an existing database file (make one from servers/schema.sql)", c.dbPath)
	}

	if s := strings.TrimSpace(env("LAB_PRAGMAS", "")); s != "" {
		for _, item := range strings.Split(s, ",") {
			name, value, ok := strings.Cut(item, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			value = strings.ToLower(strings.TrimSpace(value))
			if !ok || name == "" || value == "" {
				return fmt.Errorf("LAB_PRAGMAS: %q is not name=value", strings.TrimSpace(item))
			}
			allowed, known := pragmaValues[name]
			if !known {
				return fmt.Errorf("LAB_PRAGMAS: pragma '%s' is not allowed (allowed: %s)", name, allowedPragmas)
			}
			if allowed == nil {
				if _, err := strconv.ParseInt(value, 10, 64); err != nil {
					return fmt.Errorf("LAB_PRAGMAS: %s='%s' is not an integer", name, value)
				}
			} else if !contains(allowed, value) {
				return fmt.Errorf("LAB_PRAGMAS: %s='%s' is not one of %s", name, value, strings.Join(allowed, "|"))
			}
			c.pragmas = append(c.pragmas, pragma{name, value})
		}
	}

	c.txnMode = env("LAB_TXN_MODE", "deferred")
	if c.txnMode != "deferred" && c.txnMode != "immediate" {
		return fmt.Errorf("LAB_TXN_MODE='%s' is not one of deferred|immediate", c.txnMode)
	}

	busy := env("LAB_BUSY", "busy_timeout:5000")
	kind, arg, _ := strings.Cut(busy, ":")
	n, err := strconv.Atoi(arg)
	switch {
	case busy == "none":
		c.busy = busyPolicy{kind: "none"}
	case (kind == "busy_timeout" || kind == "sleep_poll" || kind == "retries") && err == nil && n >= 0:
		c.busy = busyPolicy{kind: kind, n: n}
	default:
		return fmt.Errorf("LAB_BUSY='%s' is not one of busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none", busy)
	}

	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------------------
// Templates: read once at start-up, split at every {{field}}

type template struct {
	parts []part
}

type part struct {
	text  string
	field int // index into the values passed to render, -1 for text only
}

func loadTemplate(dir, name string, fields ...string) (*template, error) {
	src, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("LAB_TEMPLATES: %v", err)
	}
	t, s := &template{}, string(src)
	for {
		i := strings.Index(s, "{{")
		j := strings.Index(s[max(i, 0):], "}}")
		if i < 0 || j < 0 {
			t.parts = append(t.parts, part{s, -1})
			return t, nil
		}
		field := s[i+2 : i+j]
		k := indexOf(fields, field)
		if k < 0 {
			return nil, fmt.Errorf("LAB_TEMPLATES: %s uses {{%s}}, not one of %s", name, field, strings.Join(fields, ", "))
		}
		t.parts = append(t.parts, part{s[:i], k})
		s = s[i+j+2:]
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (t *template) render(w http.ResponseWriter, status int, values ...string) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	for _, p := range t.parts {
		buf.WriteString(p.text)
		if p.field >= 0 {
			buf.WriteString(html.EscapeString(values[p.field])) // & < > " '
		}
	}
	write(w, status, "text/html; charset=utf-8", buf.Bytes())
	bufPool.Put(buf)
}

// ---------------------------------------------------------------------------------------
// Responses

func write(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":"internal error"}`)
		status = http.StatusInternalServerError
	}
	write(w, status, "application/json", bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	bufPool.Put(buf)
}

type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errStatus(status int, msg string) error { return &httpError{status, msg} }

var (
	errNotFound    = errStatus(http.StatusNotFound, "not found")
	errLocked      = errStatus(http.StatusServiceUnavailable, "database is locked")
	errUnavailable = errStatus(http.StatusServiceUnavailable, "database unavailable")
)

// isBusy: SQLITE_BUSY or SQLITE_LOCKED with any extended code (SQLITE_LOCKED_SHAREDCACHE
// included); the mask keeps it true should extended result codes ever be enabled.
func isBusy(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code & 0xff
	return code == sqlite3.ErrBusy || code == sqlite3.ErrLocked
}

// fail answers err: its own status for an httpError (the database's busy/locked and lost
// connections become one in dialect.classify: 503), 500 (without details) for anything else.
func fail(w http.ResponseWriter, err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeJSON(w, he.status, map[string]string{"error": he.msg})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
	}
}

// pathID parses {id}/{uid}: ASCII digits only, 1 ... 9223372036854775807.
func pathID(r *http.Request, name string) (int64, error) {
	s := r.PathValue(name)
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			s = ""
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, errStatus(http.StatusBadRequest, name+" must be an integer 1..9223372036854775807")
	}
	return n, nil
}

// readBody reads at most 1 MiB (413 beyond, by Content-Length or by reading).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, errStatus(http.StatusRequestEntityTooLarge, "request body over 1048576 bytes")
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errStatus(http.StatusRequestEntityTooLarge, "request body over 1048576 bytes")
	} else if err != nil {
		return nil, errStatus(http.StatusBadRequest, "could not read the request body")
	}
	return b, nil
}

// readJSONText reads a JSON body (at most 1 MiB) that must be Unicode text: valid UTF-8
// (no invalid bytes, overlong forms or encoded surrogates) with no \u escape of an unpaired
// surrogate. encoding/json would otherwise store U+FFFD in place of what was sent.
func readJSONText(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errStatus(http.StatusBadRequest, "body is not valid UTF-8")
	}
	if loneSurrogate(b) {
		return nil, errStatus(http.StatusBadRequest, "body has a \\u escape of an unpaired UTF-16 surrogate")
	}
	return b, nil
}

// loneSurrogate reports whether JSON text b has a \uD800-\uDFFF escape that is not a high
// surrogate directly followed by a low one. Escapes only occur in strings (a backslash
// elsewhere is malformed JSON, rejected by the decoder), and "\\" is skipped whole.
func loneSurrogate(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 || i+j+1 >= len(b) {
			return false
		}
		i += j
		if b[i+1] != 'u' {
			i += 2
			continue
		}
		c, ok := hex4(b[i+2:])
		if !ok {
			i += 2
			continue
		}
		i += 6
		if c >= 0xDC00 && c <= 0xDFFF {
			return true
		}
		if c >= 0xD800 && c <= 0xDBFF {
			if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
				return true
			}
			if lo, ok := hex4(b[i+2:]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
}

// hex4 parses the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var c rune
	for _, d := range b[:4] {
		switch {
		case d >= '0' && d <= '9':
			c = c<<4 | rune(d-'0')
		case d >= 'a' && d <= 'f':
			c = c<<4 | rune(d-'a'+10)
		case d >= 'A' && d <= 'F':
			c = c<<4 | rune(d-'A'+10)
		default:
			return 0, false
		}
	}
	return c, true
}

// decodeJSON reads the body (whatever its Content-Type) into v; empty reports an empty body.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) (empty bool, err error) {
	b, err := readJSONText(w, r)
	if err != nil {
		return false, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return true, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, errStatus(http.StatusBadRequest, "malformed JSON or wrong types")
	}
	return false, nil
}

func now() string { return time.Now().UTC().Format(timeLayout) }

func uuid4() string {
	var b [16]byte
	crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// ---------------------------------------------------------------------------------------
// Database: connections, transactions, the writer

// The statements, as the SQLite path runs them; dialect.query gives them as the database
// takes them (postgres: $1, $2, ... for ?).
const (
	sqlInsertRequest = `INSERT INTO requests (uid, ip, method, url, parameters, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlGetRequest    = `SELECT id, uid, ip, method, url, parameters, created_at, updated_at FROM requests WHERE id = ?`
	sqlLatestMetric  = `SELECT value FROM metrics WHERE instance = ? AND name = ? ORDER BY id DESC LIMIT 1`
	sqlInsertMetric  = `INSERT INTO metrics (instance, name, value, previous, created_at) VALUES (?, ?, ?, ?, ?)`
	sqlInsertItem    = `INSERT INTO items (payload, created_at) VALUES (?, ?)`
	sqlGetItem       = `SELECT id, payload, created_at FROM items WHERE id = ?`
	sqlUpdateUser    = `UPDATE users SET departname = ?, updates = updates + 1 WHERE uid = ?`
	sqlGetUser       = `SELECT uid, username, departname, created FROM users WHERE uid = ?`
)

var statements = []string{sqlInsertRequest, sqlGetRequest, sqlLatestMetric, sqlInsertMetric,
	sqlInsertItem, sqlGetItem, sqlUpdateUser, sqlGetUser}

var bg = context.Background() // statements are never interrupted half-way (and mattn runs them without a watcher goroutine)

// dialect is the seam between the one application code path (handlers, Service.tx, the
// writer) and a database: how a pool is opened, how a statement is spelled, how an INSERT
// gives its new id, the savepoint syntax, and which errors are busy or a lost connection.
type dialect interface {
	name() string                                       // LAB_DATABASE
	where() string                                      // what a start-up error names: LAB_DB=... | LAB_DATABASE_URL
	schemaFile() string                                 // the schema a database is made from
	sqlDB() (*sql.DB, error)                            // a new database/sql pool (openDB sizes and fills it)
	query(q string) string                              // q (one of statements) as the database takes it
	insert(t *Tx, q string, args ...any) (int64, error) // an INSERT in t; the new row's id
	release() string                                    // RELEASE job, in the database's syntax
	rollbackTo() string                                 // ROLLBACK TO job, in the database's syntax
	classify(err error) error                           // busy/locked -> errLocked, lost connection -> errUnavailable
	broken(conn *sql.Conn) bool                         // after a failed transaction: conn cannot run another (it is discarded)
	version(db *sql.DB) (string, error)                 // /health's database_version
}

// sqliteDialect: mattn/go-sqlite3 through the "sqlite3_lab" driver (newService registers it).
type sqliteDialect struct{ c *config }

func (sqliteDialect) name() string          { return "sqlite" }
func (d sqliteDialect) where() string       { return fmt.Sprintf("LAB_DB=%q", d.c.dbPath) }
func (sqliteDialect) schemaFile() string    { return "servers/schema.sql" }
func (sqliteDialect) query(q string) string { return q }
func (sqliteDialect) release() string       { return "RELEASE job" }
func (sqliteDialect) rollbackTo() string    { return "ROLLBACK TO job" }
func (sqliteDialect) broken(*sql.Conn) bool { return false }

// sqlDB: every connection gets the busy timeout (native policy, else 0) from the DSN, then
// the LAB_PRAGMAS in order from the ConnectHook of the registered "sqlite3_lab" driver.
// _synchronous=FULL undoes mattn's own `PRAGMA synchronous=NORMAL` so that an empty
// LAB_PRAGMAS means SQLite's defaults. _stmt_cache_size keeps the statements a transaction
// runs prepared on each connection. LAB_CACHE=shared adds cache=shared: SQLite's
// shared-cache mode (seed 004's DSN).
func (d sqliteDialect) sqlDB() (*sql.DB, error) {
	timeout := 0
	if d.c.busy.kind == "busy_timeout" {
		timeout = d.c.busy.n
	}
	abs, err := filepath.Abs(d.c.dbPath)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?mode=rw&_busy_timeout=%d&_synchronous=FULL&_stmt_cache_size=16",
		(&url.URL{Path: abs}).EscapedPath(), timeout)
	if d.c.cache == "shared" {
		dsn += "&cache=shared"
	}
	return sql.Open("sqlite3_lab", dsn)
}

func (sqliteDialect) insert(t *Tx, q string, args ...any) (int64, error) {
	res, err := t.Exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (sqliteDialect) classify(err error) error {
	if isBusy(err) {
		return errLocked
	}
	return err
}

func (sqliteDialect) version(*sql.DB) (string, error) {
	v, _, _ := sqlite3.Version()
	return v, nil
}

// postgresDialect: jackc/pgx/v5 through its database/sql driver (stdlib), so that the pool,
// the transactions and the writer are the SQLite path's. pgx prepares each statement once
// per connection and keeps it (its statement cache); BEGIN/COMMIT without arguments go as
// simple queries.
type postgresDialect struct {
	c         *config
	stmts     map[string]string // the statements with $n placeholders (read-only after start-up)
	returning map[string]string // the INSERTs with $n placeholders and RETURNING id
}

func newPostgresDialect(c *config) *postgresDialect {
	d := &postgresDialect{c: c, stmts: map[string]string{}, returning: map[string]string{}}
	for _, q := range statements {
		d.stmts[q] = rebind(q)
		if strings.HasPrefix(q, "INSERT ") {
			d.returning[q] = rebind(q) + " RETURNING id"
		}
	}
	return d
}

// rebind numbers the ? placeholders: $1, $2, ... (the statements have no ? in literals).
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (postgresDialect) name() string       { return "postgres" }
func (postgresDialect) where() string      { return "LAB_DATABASE_URL" }
func (postgresDialect) schemaFile() string { return "servers/schema.postgres.sql" }
func (postgresDialect) release() string    { return "RELEASE SAVEPOINT job" }
func (postgresDialect) rollbackTo() string { return "ROLLBACK TO SAVEPOINT job" }

func (d *postgresDialect) sqlDB() (*sql.DB, error) { return stdlib.OpenDB(*d.c.pgConfig), nil }

func (d *postgresDialect) query(q string) string {
	if pq, ok := d.stmts[q]; ok {
		return pq
	}
	return rebind(q)
}

func (d *postgresDialect) insert(t *Tx, q string, args ...any) (int64, error) {
	var id int64
	err := t.queryRow(q, d.returning[q], args, &id)
	return id, err
}

// classify: SQLSTATE 40001 (serialization failure), 40P01 (deadlock), 55P03 (lock not
// available) are "database is locked"; a connection that could not be made or was lost
// (class 08, 57P01-57P03 admin/crash shutdown or not yet up, or no SQLSTATE at all: EOF,
// a network error, database/sql's bad connection) is "database unavailable".
func (postgresDialect) classify(err error) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return errUnavailable
	case errors.As(err, &pe):
		switch c := pe.Code; {
		case c == "40001" || c == "40P01" || c == "55P03":
			return errLocked
		case strings.HasPrefix(c, "08") || c == "57P01" || c == "57P02" || c == "57P03":
			return errUnavailable
		}
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errUnavailable
	}
	return err
}

// broken: the connection is closed (lost, or terminated by the server), or is still inside a
// transaction because its ROLLBACK failed; Postgres would take a later BEGIN there with a
// mere warning. Raw's driver.ErrBadConn makes database/sql close it; the pool opens a new one.
func (postgresDialect) broken(conn *sql.Conn) bool {
	bad := false
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if ok && (c.Conn().IsClosed() || c.Conn().PgConn().TxStatus() != 'I') {
			bad = true
			return driver.ErrBadConn
		}
		return nil
	})
	return bad || err != nil
}

func (postgresDialect) version(db *sql.DB) (v string, err error) {
	err = db.QueryRowContext(bg, "SHOW server_version").Scan(&v)
	return v, err
}

// openDB opens a pool of n connections: SetMaxOpenConns = SetMaxIdleConns = n, no lifetime
// limit, and all n opened now (SQLite's pragmas are applied, and fail, at start-up; a
// Postgres that cannot be reached fails the start-up), not under load. With pool "default"
// (LAB_POOL=default, seed 004's `sql.Open` as it leaves it) n means nothing: database/sql's
// own defaults stay (no limit on open connections, 2 idle, no lifetime limit), and one
// connection is opened now, for the start-up's checks; the rest open when requests need them.
func openDB(d dialect, n int, pool string) (*sql.DB, error) {
	db, err := d.sqlDB()
	if err != nil {
		return nil, err
	}
	if pool == "default" {
		n = 1
	} else {
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
	}
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	for range n {
		conn, err := db.Conn(bg)
		if err != nil {
			db.Close()
			return nil, err
		}
		conns = append(conns, conn)
	}
	return db, nil
}

// sqlLog (LAB_SQL_LOG=on) is Rails' development log in miniature (seed 001's `rails s`): one
// line per statement, "  SQL (0.3ms)  <sql>  [bound values]", appended to <LAB_DB>.sql.log right
// after the statement finished, in the goroutine that ran it: one write(2) per line on an
// O_APPEND file, under a mutex (as Ruby's Logger). With off it is nil, and run is a nil check.
type sqlLog struct {
	mu sync.Mutex
	f  *os.File
}

func openSQLLog(path string) (*sqlLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("LAB_SQL_LOG=on: cannot open %q for append: %v", path, err)
	}
	return &sqlLog{f: f}, nil
}

// run runs one statement, f (with any retries of an emulated busy policy inside it), then
// logs it once, whether it succeeded or failed (as Rails does). Every statement the server
// runs goes through here.
func (l *sqlLog) run(query string, args []any, f func() error) error {
	if l == nil {
		return f()
	}
	start := time.Now()
	err := f()
	l.write(query, args, time.Since(start))
	return err
}

func (l *sqlLog) write(query string, args []any, took time.Duration) {
	b := make([]byte, 0, 64+len(query))
	b = append(b, "  SQL ("...)
	b = strconv.AppendFloat(b, float64(took.Nanoseconds())/1e6, 'f', 1, 64)
	b = append(b, "ms)  "...)
	b = append(b, query...)
	if len(args) > 0 {
		b = append(b, "  ["...)
		for i, v := range args {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendSQLValue(b, v)
		}
		b = append(b, ']')
	}
	b = append(b, '\n')
	l.mu.Lock()
	_, err := l.f.Write(b)
	l.mu.Unlock()
	if err != nil { // as Ruby's Logger: the request goes on
		fmt.Fprintln(os.Stderr, "log writing failed.", err)
	}
}

func appendSQLValue(b []byte, v any) []byte {
	if valuer, ok := v.(driver.Valuer); ok { // sql.NullFloat64 and friends
		if dv, err := valuer.Value(); err == nil {
			v = dv
		}
	}
	switch x := v.(type) {
	case nil:
		return append(b, "nil"...)
	case string:
		return strconv.AppendQuote(b, x)
	case []byte:
		return fmt.Appendf(b, "<%d bytes of binary data>", len(x))
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case int64:
		return strconv.AppendInt(b, x, 10)
	default:
		return fmt.Append(b, x)
	}
}

func (l *sqlLog) close() {
	if l != nil {
		l.f.Close()
	}
}

// Tx is one write transaction on a dedicated connection. database/sql's *sql.Tx is not
// used because its Commit cannot be retried (on error it rolls back), and an emulated
// busy policy must retry COMMIT.
type Tx struct {
	conn  *sql.Conn
	db    dialect
	busy  busyPolicy
	first bool // no statement has taken a lock yet (BEGIN DEFERRED)
	log   *sqlLog
}

// step runs one statement; the first lock-taking statement after BEGIN DEFERRED is retried
// by an emulated busy policy, later ones (a read -> write upgrade) never are.
func (t *Tx) step(f func() error) error {
	if !t.first {
		return f()
	}
	err := t.busy.retry(f)
	if !isBusy(err) {
		t.first = false
	}
	return err
}

func (t *Tx) Exec(query string, args ...any) (sql.Result, error) {
	var res sql.Result
	q := t.db.query(query)
	err := t.log.run(query, args, func() error {
		return t.step(func() (err error) { res, err = t.conn.ExecContext(bg, q, args...); return err })
	})
	return res, err
}

func (t *Tx) QueryRow(query string, args []any, dest ...any) error {
	return t.queryRow(query, t.db.query(query), args, dest...)
}

// queryRow runs q, query as the database takes it (query is what the SQL log shows).
func (t *Tx) queryRow(query, q string, args []any, dest ...any) error {
	return t.log.run(query, args, func() error {
		return t.step(func() error { return t.conn.QueryRowContext(bg, q, args...).Scan(dest...) })
	})
}

// Insert runs an INSERT and returns the new row's id (SQLite: LastInsertId; Postgres:
// the same INSERT with RETURNING id).
func (t *Tx) Insert(query string, args ...any) (int64, error) {
	return t.db.insert(t, query, args...)
}

// writerCounts: the transactions the writer ran, the jobs in them, and how many transactions
// held each count of jobs (/health's `writer`).
type writerCounts struct {
	mu           sync.Mutex
	transactions int64
	jobs         int64
	sizes        map[int]int64
}

func (c *writerCounts) add(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sizes == nil {
		c.sizes = map[int]int64{}
	}
	c.transactions++
	c.jobs += int64(n)
	c.sizes[n]++
}

func (c *writerCounts) snapshot() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	sizes := map[string]int64{}
	for k, v := range c.sizes {
		sizes[strconv.Itoa(k)] = v
	}
	return map[string]any{"transactions": c.transactions, "jobs": c.jobs, "sizes": sizes}
}

// job is one request's write, run by the writer goroutine; done gets its outcome after COMMIT.
type job struct {
	fn       func(*Tx) error
	done     chan error
	answered bool // writer goroutine only
}

func (j *job) answer(err error) {
	j.answered = true
	j.done <- err
}

type Service struct {
	cfg       *config
	dialect   dialect // sqlite | postgres: the seam
	db        *sql.DB // reads (and, in pool mode, writes): LAB_READERS connections
	wdb       *sql.DB // writer/batch: the writer's one connection
	begin     string  // BEGIN DEFERRED | BEGIN IMMEDIATE (SQLite), BEGIN (Postgres)
	log       *sqlLog // LAB_SQL_LOG=on, else nil
	jobs      chan *job
	writerWG  sync.WaitGroup
	counts    writerCounts // /health's `writer` (writer/batch)
	handled   atomic.Int64
	pragmas   map[string]string // read back at start-up (SQLite)
	versions  map[string]string
	sqliteVer string
	sqliteOpt []string // PRAGMA compile_options of the linked SQLite
	dbVersion string   // /health's database_version

	getRequest, getItem, getUser *sql.Stmt

	requestTpl, userTpl, userPageTpl *template
}

func newService(c *config) (*Service, error) {
	s := &Service{cfg: c, begin: "BEGIN " + strings.ToUpper(c.txnMode), pragmas: map[string]string{}}
	var err error
	if s.requestTpl, err = loadTemplate(c.templates, "request.html",
		"id", "uid", "ip", "method", "url", "parameters", "created_at", "updated_at"); err != nil {
		return nil, err
	}
	if s.userTpl, err = loadTemplate(c.templates, "user.html", "uid", "username", "departname", "created"); err != nil {
		return nil, err
	}
	if s.userPageTpl, err = loadTemplate(c.templates, "user_page.html", "uid", "username", "departname", "created"); err != nil {
		return nil, err
	}

	if c.database == "postgres" {
		s.dialect = newPostgresDialect(c)
		s.begin = "BEGIN" // Postgres' default isolation, READ COMMITTED
		s.pragmas = nil
	} else {
		s.dialect = sqliteDialect{c}
		if c.sqlLog == "on" {
			if s.log, err = openSQLLog(c.dbPath + ".sql.log"); err != nil {
				return nil, err
			}
		}
		sql.Register("sqlite3_lab", &sqlite3.SQLiteDriver{
			ConnectHook: func(conn *sqlite3.SQLiteConn) error {
				for _, p := range c.pragmas {
					q := "PRAGMA " + p.name + " = " + p.value
					err := s.log.run(q, nil, func() error {
						return c.busy.retry(func() error { _, err := conn.Exec(q, nil); return err })
					})
					if err != nil {
						return fmt.Errorf("PRAGMA %s = %s: %w", p.name, p.value, err)
					}
				}
				return nil
			},
		})
	}
	d := s.dialect
	openErr := func(err error) error {
		if d.name() == "postgres" {
			return fmt.Errorf("%s: cannot connect: %v", d.where(), err)
		}
		return fmt.Errorf("%s: %v", d.where(), err)
	}
	if s.db, err = openDB(d, c.readers, c.pool); err != nil {
		return nil, openErr(err)
	}
	if c.writePath != "pool" {
		if s.wdb, err = openDB(d, 1, "fixed"); err != nil { // one writer connection, whatever the pool
			return nil, openErr(err)
		}
	}

	// The schema: every statement must prepare (tables and columns exist).
	schemaErr := func(err error) error {
		if d.name() == "postgres" {
			return fmt.Errorf("%s: the database has no lab schema (%v): make it from %s", d.where(), err, d.schemaFile())
		}
		return fmt.Errorf("%s has no lab schema (%v): make it from %s", d.where(), err, d.schemaFile())
	}
	for _, q := range []string{sqlInsertRequest, sqlLatestMetric, sqlInsertMetric, sqlInsertItem, sqlUpdateUser} {
		st, err := s.db.Prepare(d.query(q))
		if err != nil {
			return nil, schemaErr(err)
		}
		st.Close()
	}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{{&s.getRequest, sqlGetRequest}, {&s.getItem, sqlGetItem}, {&s.getUser, sqlGetUser}} {
		if *p.st, err = s.db.Prepare(d.query(p.q)); err != nil {
			return nil, schemaErr(err)
		}
	}

	for _, p := range c.pragmas {
		var v sql.NullString
		q := "PRAGMA " + p.name
		if err := s.log.run(q, nil, func() error { return s.db.QueryRow(q).Scan(&v) }); err != nil {
			return nil, fmt.Errorf("LAB_PRAGMAS: reading back %s: %v", p.name, err)
		}
		s.pragmas[p.name] = strings.ToLower(v.String)
	}

	s.sqliteVer, _, _ = sqlite3.Version()
	if s.sqliteOpt, err = compileOptions(); err != nil {
		return nil, fmt.Errorf("reading SQLite's compile options: %v", err)
	}
	if s.dbVersion, err = d.version(s.db); err != nil {
		return nil, fmt.Errorf("%s: reading the server's version: %v", d.where(), err)
	}
	s.versions = map[string]string{"go": runtime.Version(), "net/http": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			switch {
			case dep.Path == "github.com/mattn/go-sqlite3":
				s.versions["mattn/go-sqlite3"] = dep.Version
			case dep.Path == "github.com/jackc/pgx/v5" && d.name() == "postgres":
				s.versions["jackc/pgx"] = dep.Version
			}
		}
	}
	if d.name() == "postgres" { // the pool: database/sql's own, part of Go
		s.versions["database/sql"] = runtime.Version()
	}

	switch c.writePath {
	case "writer":
		err = s.startWriter(s.writeEach)
	case "batch":
		err = s.startWriter(s.writeBatch)
	}
	return s, err
}

// exec runs a statement without arguments or rows on conn (BEGIN, COMMIT, ROLLBACK, the
// savepoints); retry: an emulated busy policy re-runs it on SQLITE_BUSY (BEGIN, COMMIT).
func (s *Service) exec(conn *sql.Conn, query string, retry bool) error {
	return s.log.run(query, nil, func() error {
		f := func() error { _, err := conn.ExecContext(bg, query); return err }
		if retry {
			return s.cfg.busy.retry(f)
		}
		return f()
	})
}

// tx runs fn in one transaction on conn: BEGIN, fn, COMMIT; ROLLBACK on any error.
func (s *Service) tx(conn *sql.Conn, fn func(*Tx) error) error {
	if err := s.exec(conn, s.begin, true); err != nil {
		return err
	}
	t := &Tx{conn: conn, db: s.dialect, busy: s.cfg.busy, first: s.cfg.txnMode == "deferred", log: s.log}
	err := fn(t)
	if err == nil {
		err = s.exec(conn, "COMMIT", true)
	}
	if err != nil {
		s.exec(conn, "ROLLBACK", false)
	}
	return err
}

// write runs fn as one transaction and returns once it is committed (or failed); a busy
// or lost database comes back as its 503 (dialect.classify).
func (s *Service) write(r *http.Request, fn func(*Tx) error) error {
	if s.jobs == nil { // pool: on a pooled connection, in the request's goroutine
		conn, err := s.db.Conn(r.Context())
		if err != nil {
			return s.dialect.classify(err)
		}
		defer conn.Close()
		err = s.tx(conn, fn)
		if err != nil {
			s.dialect.broken(conn) // Postgres: a lost connection is discarded, not pooled
		}
		return s.dialect.classify(err)
	}
	j := &job{fn: fn, done: make(chan error, 1)}
	select {
	case s.jobs <- j:
	case <-r.Context().Done(): // client gone before its write was queued
		return r.Context().Err()
	}
	return s.dialect.classify(<-j.done)
}

// writerConn is the writer's one connection. A connection Postgres lost (or one left
// inside a transaction) is dropped after the transaction that found it so, and the next
// job opens a new one; SQLite's is never dropped.
type writerConn struct {
	s    *Service
	conn *sql.Conn
}

func (w *writerConn) get() (*sql.Conn, error) {
	if w.conn == nil {
		conn, err := w.s.wdb.Conn(bg)
		if err != nil {
			return nil, err
		}
		w.conn = conn
	}
	return w.conn, nil
}

// failed is called after a failed transaction.
func (w *writerConn) failed() {
	if w.s.dialect.broken(w.conn) {
		w.conn.Close()
		w.conn = nil
	}
}

func (s *Service) startWriter(loop func(*writerConn)) error {
	w := &writerConn{s: s}
	if _, err := w.get(); err != nil {
		return fmt.Errorf("%s: the writer's connection: %v", s.dialect.where(), err)
	}
	s.jobs = make(chan *job, 1024)
	s.writerWG.Add(1)
	go func() {
		defer s.writerWG.Done()
		defer func() {
			if w.conn != nil {
				w.conn.Close()
			}
		}()
		loop(w)
	}()
	return nil
}

// run calls a job's fn, turning a panic into an error so the writer keeps going.
func run(j *job, t *Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return j.fn(t)
}

// writeEach (writer): one transaction per job, answered after its COMMIT.
func (s *Service) writeEach(w *writerConn) {
	for j := range s.jobs {
		s.counts.add(1)
		conn, err := w.get()
		if err == nil {
			if err = s.tx(conn, func(t *Tx) error { return run(j, t) }); err != nil {
				w.failed()
			}
		}
		j.answer(err)
	}
}

// writeBatch (group commit): everything queued, each job inside SAVEPOINT job ... RELEASE
// job, one COMMIT for the batch, then every job in it is answered. A failing job is rolled
// back to its savepoint and answered alone; a failing COMMIT fails the whole batch.
func (s *Service) writeBatch(w *writerConn) {
	batch := make([]*job, 0, cap(s.jobs))
	release, rollbackTo := s.dialect.release(), s.dialect.rollbackTo()
	for j := range s.jobs {
		batch = append(batch[:0], j)
		// Let the handlers that are ready queue their jobs before the batch is taken: with
		// one CPU the writer would otherwise commit what one handler queued while the others
		// wait for it to block in its COMMIT's fsync.
		runtime.Gosched()
	drain:
		for len(batch) < cap(batch) {
			select {
			case j, ok := <-s.jobs:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		s.counts.add(len(batch))
		conn, err := w.get()
		if err != nil {
			for _, j := range batch {
				j.answer(err)
			}
			continue
		}
		err = s.tx(conn, func(t *Tx) error {
			for _, j := range batch {
				if err := s.exec(conn, "SAVEPOINT job", false); err != nil {
					return err
				}
				if err := run(j, t); err != nil {
					rerr := s.exec(conn, rollbackTo, false)
					if rerr == nil {
						rerr = s.exec(conn, release, false)
					}
					if rerr != nil {
						return rerr // the transaction itself is gone: fail the batch
					}
					j.answer(err)
					continue
				}
				if err := s.exec(conn, release, false); err != nil {
					return err
				}
			}
			return nil
		})
		// Committed: acknowledge the rest. Failed (BEGIN, a savepoint or COMMIT): none of
		// the rest is acknowledged.
		if err != nil {
			w.failed()
		}
		for _, j := range batch {
			if !j.answered {
				j.answer(err)
			}
		}
	}
}

func (s *Service) close() {
	if s.jobs != nil {
		close(s.jobs) // the writer answers what is queued, then returns
		s.writerWG.Wait()
		s.wdb.Close()
	}
	s.db.Close()
	s.log.close()
}

// ---------------------------------------------------------------------------------------
// Handlers

func (s *Service) health(w http.ResponseWriter, r *http.Request) {
	emulated := map[string]string{}
	if s.cfg.busy.emulated() {
		emulated["busy"] = fmt.Sprintf("%s emulated in Go (mattn/go-sqlite3 has no busy-handler hook; "+
			"busy_timeout=0): BEGIN IMMEDIATE, the first statement after BEGIN DEFERRED, autocommit reads "+
			"and COMMIT are retried on SQLITE_BUSY/SQLITE_LOCKED", s.cfg.busy)
	}
	knobs := map[string]any{
		"database":    s.cfg.database,
		"pragmas":     s.pragmas,
		"txn_mode":    s.cfg.txnMode,
		"busy":        s.cfg.busy.String(),
		"write_path":  s.cfg.writePath,
		"processes":   s.cfg.processes,
		"threads":     runtime.GOMAXPROCS(0),
		"readers":     s.cfg.readers,
		"metrics_txn": s.cfg.metricsTxn,
		"cache":       s.cfg.cache,
		"sql_log":     s.cfg.sqlLog,
		"pool":        s.cfg.pool,
	}
	if s.cfg.database == "postgres" { // SQLite's own knobs
		for _, k := range []string{"pragmas", "txn_mode", "busy", "cache", "sql_log"} {
			knobs[k] = nil
		}
	}
	var writer any // null on the pool path
	if s.jobs != nil {
		writer = s.counts.snapshot()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"server":                 "go-nethttp",
		"versions":               s.versions,
		"sqlite_version":         s.sqliteVer,
		"sqlite_compile_options": s.sqliteOpt,
		"database":               s.cfg.database,
		"database_version":       s.dbVersion,
		"pid":                    os.Getpid(),
		"knobs":                  knobs,
		"emulated":               emulated,
		"requests_handled":       s.handled.Load(),
		"writer":                 writer,
	})
}

// compileOptions: PRAGMA compile_options of the SQLite this binary links, read on an in-memory
// database (also with LAB_DATABASE=postgres).
func compileOptions() ([]string, error) {
	memory, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		return nil, err
	}
	defer memory.Close()
	rows, err := memory.Query("PRAGMA compile_options")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var option string
		if err := rows.Scan(&option); err != nil {
			return nil, err
		}
		out = append(out, option)
	}
	return out, rows.Err()
}

func hello(w http.ResponseWriter, r *http.Request) {
	write(w, http.StatusOK, "text/plain; charset=utf-8", []byte("Hello, World!"))
}

const maxDelayMs = 10000

// GET /delay/{ms}: a calibration endpoint for load generators. It sleeps ms (0..10000) in the
// handler's goroutine (no database, no CPU), then answers exactly as /hello does.
func delay(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.ParseUint(r.PathValue("ms"), 10, 64) // ASCII digits only: no sign, no "_"
	if err != nil || ms > maxDelayMs {
		fail(w, errStatus(http.StatusBadRequest, "ms must be an integer 0..10000"))
		return
	}
	wait := time.Duration(ms) * time.Millisecond
	// The server's 10 s WriteTimeout (seed 004's) starts after the wait: /delay/10000 is answered.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
	time.Sleep(wait)
	hello(w, r)
}

// POST /requests: the Rails scaffold's create (seed 000).
func (s *Service) createRequest(w http.ResponseWriter, r *http.Request) {
	body, err := readJSONText(w, r)
	if err != nil {
		fail(w, err)
		return
	}
	params := []byte("{}")
	if b := bytes.TrimSpace(body); len(b) > 0 {
		var buf bytes.Buffer
		if b[0] != '{' || json.Compact(&buf, b) != nil {
			fail(w, errStatus(http.StatusBadRequest, "the body must be empty or a JSON object"))
			return
		}
		params = buf.Bytes()
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	ts := now()
	var id int64
	err = s.write(r, func(t *Tx) (err error) {
		id, err = t.Insert(sqlInsertRequest, uuid4(), ip, "POST", "http://"+r.Host+"/requests", string(params), ts, ts)
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	loc := "/requests/" + strconv.FormatInt(id, 10)
	w.Header().Set("Location", loc)
	write(w, http.StatusFound, "text/html; charset=utf-8",
		[]byte(`<html><body>You are being <a href="`+loc+`">redirected</a>.</body></html>`))
}

// read runs an autocommit read of query, prepared as st (retried by an emulated busy policy).
func (s *Service) read(st *sql.Stmt, query string, id int64, dest ...any) error {
	args := []any{id}
	err := s.log.run(query, args, func() error {
		return s.cfg.busy.retry(func() error { return st.QueryRowContext(bg, args...).Scan(dest...) })
	})
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFound
	}
	return s.dialect.classify(err)
}

// GET /requests/{id}: the show page.
func (s *Service) showRequest(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		fail(w, err)
		return
	}
	var v [8]string
	if err := s.read(s.getRequest, sqlGetRequest, id, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]); err != nil {
		fail(w, err)
		return
	}
	s.requestTpl.render(w, http.StatusOK, v[:]...)
}

// servers/shared.toml's metric_names.
var metricNames = [5]string{"cpu", "memory", "disk", "load", "requests"}

type measurement struct {
	Name  *string  `json:"name"`
	Value *float64 `json:"value"`
}

// POST /metrics: five SELECT-latest + INSERT pairs in one transaction (seed 001), or with
// LAB_METRICS_TXN=record one transaction per INSERT (metricsRecords).
func (s *Service) createMetrics(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Instance     *string       `json:"instance"`
		Measurements []measurement `json:"measurements"`
	}
	empty, err := decodeJSON(w, r, &in)
	if err != nil {
		fail(w, err)
		return
	}
	var instance string
	var names [5]string
	var values [5]float64
	if empty { // the article's load_test=true
		instance = "instance-" + strconv.Itoa(1+rand.IntN(10))
		names = metricNames
		for i := range values {
			values[i] = rand.Float64() * 100
		}
	} else {
		if !validString(in.Instance, 64) || len(in.Measurements) != 5 {
			fail(w, errStatus(http.StatusBadRequest, "expected {instance: string(1-64), measurements: 5 x {name, value}}"))
			return
		}
		instance = *in.Instance
		for i, m := range in.Measurements {
			if !validString(m.Name, 64) || m.Value == nil {
				fail(w, errStatus(http.StatusBadRequest, "each measurement needs name: string(1-64) and value: number"))
				return
			}
			names[i], values[i] = *m.Name, *m.Value
		}
		err := s.storable("instance", instance)
		for i := 0; i < len(names) && err == nil; i++ {
			err = s.storable("measurement name", names[i])
		}
		if err != nil {
			fail(w, err)
			return
		}
	}
	ts := now()
	var ids [5]int64
	if s.cfg.metricsTxn == "record" {
		if err := s.metricsRecords(r, instance, &names, &values, ts, &ids); err != nil {
			fail(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"instance": instance, "ids": ids})
		return
	}
	err = s.write(r, func(t *Tx) error {
		for i := range names {
			var prev sql.NullFloat64
			err := t.QueryRow(sqlLatestMetric, []any{instance, names[i]}, &prev)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if ids[i], err = t.Insert(sqlInsertMetric, instance, names[i], values[i], prev, ts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"instance": instance, "ids": ids})
}

// metricsRecords is ActiveRecord's shape (LAB_METRICS_TXN=record, pool only): for each
// measurement, the SELECT of the latest value as an autocommit read on the request's pooled
// connection, then one transaction for its INSERT. A failure at record k returns its error;
// records 1..k-1 stay committed, as in Rails.
func (s *Service) metricsRecords(r *http.Request, instance string, names *[5]string, values *[5]float64, ts string, ids *[5]int64) error {
	conn, err := s.db.Conn(r.Context())
	if err != nil {
		return s.dialect.classify(err)
	}
	defer conn.Close()
	latest := s.dialect.query(sqlLatestMetric)
	for i := range names {
		var prev sql.NullFloat64
		args := []any{instance, names[i]}
		err := s.log.run(sqlLatestMetric, args, func() error {
			return s.cfg.busy.retry(func() error {
				return conn.QueryRowContext(bg, latest, args...).Scan(&prev)
			})
		})
		if err == nil || errors.Is(err, sql.ErrNoRows) {
			err = s.tx(conn, func(t *Tx) (err error) {
				ids[i], err = t.Insert(sqlInsertMetric, instance, names[i], values[i], prev, ts)
				return err
			})
		}
		if err != nil {
			s.dialect.broken(conn) // Postgres: a lost connection is discarded, not pooled
			return s.dialect.classify(err)
		}
	}
	return nil
}

func validString(s *string, maxChars int) bool {
	return s != nil && *s != "" && utf8.RuneCountInString(*s) <= maxChars
}

// storable: a string the database can hold. Postgres' text cannot hold U+0000 (SQLite's
// can), so on Postgres it is a 400 before any write, not the driver's error (a 500).
func (s *Service) storable(field, v string) error {
	if s.cfg.database == "postgres" && strings.IndexByte(v, 0) >= 0 {
		return errStatus(http.StatusBadRequest, field+" holds U+0000, which Postgres text cannot store")
	}
	return nil
}

// POST /items (seed 002).
func (s *Service) createItem(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Payload *string `json:"payload"`
	}
	if _, err := decodeJSON(w, r, &in); err != nil {
		fail(w, err)
		return
	}
	if in.Payload == nil || len(*in.Payload) > maxPayload {
		fail(w, errStatus(http.StatusBadRequest, "expected {payload: string of at most 65536 bytes}"))
		return
	}
	if err := s.storable("payload", *in.Payload); err != nil {
		fail(w, err)
		return
	}
	ts := now()
	var id int64
	err := s.write(r, func(t *Tx) (err error) {
		id, err = t.Insert(sqlInsertItem, *in.Payload, ts)
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]int64{"id": id})
}

// GET /items/{id}.
func (s *Service) showItem(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r, "id")
	if err != nil {
		fail(w, err)
		return
	}
	var item struct {
		ID        int64  `json:"id"`
		Payload   string `json:"payload"`
		CreatedAt string `json:"created_at"`
	}
	if err := s.read(s.getItem, sqlGetItem, id, &item.ID, &item.Payload, &item.CreatedAt); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &item)
}

// GET /users/{uid} and GET /users/{uid}/page (seed 004).
func (s *Service) showUser(tpl *template) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		uid, err := pathID(r, "uid")
		if err != nil {
			fail(w, err)
			return
		}
		var v [4]string
		if err := s.read(s.getUser, sqlGetUser, uid, &v[0], &v[1], &v[2], &v[3]); err != nil {
			fail(w, err)
			return
		}
		tpl.render(w, http.StatusOK, v[:]...)
	}
}

// POST /users/{uid}: UPDATE then re-SELECT in one transaction.
func (s *Service) updateUser(w http.ResponseWriter, r *http.Request) {
	uid, err := pathID(r, "uid")
	if err != nil {
		fail(w, err)
		return
	}
	var in struct {
		Departname *string `json:"departname"`
	}
	if _, err := decodeJSON(w, r, &in); err != nil {
		fail(w, err)
		return
	}
	if !validString(in.Departname, 64) {
		fail(w, errStatus(http.StatusBadRequest, "expected {departname: string(1-64)}"))
		return
	}
	if err := s.storable("departname", *in.Departname); err != nil {
		fail(w, err)
		return
	}
	var v [4]string
	err = s.write(r, func(t *Tx) error {
		res, err := t.Exec(sqlUpdateUser, *in.Departname, uid)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errNotFound
		}
		return t.QueryRow(sqlGetUser, []any{uid}, &v[0], &v[1], &v[2], &v[3])
	})
	if err != nil {
		fail(w, err)
		return
	}
	s.userTpl.render(w, http.StatusOK, v[:]...)
}

// ---------------------------------------------------------------------------------------
// Routing: ServeMux answers unknown routes and wrong methods in plain text, so every path
// also gets a method-less pattern (405 JSON with Allow) and "/" is a 404 JSON catch-all.
// ServeMux also redirects (307) an unclean path ("/../x", "/./hello", "//hello") to its
// cleaned form, and "/users" to "/users/" (the "/users/{$}" pattern): both are a 404 JSON
// here, as in the other stacks, and never a redirect.

func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"GET", "/health", s.health},
		{"GET", "/hello", hello},
		{"GET", "/delay/{ms}", delay},
		{"POST", "/requests", s.createRequest},
		{"GET", "/requests/{id}", s.showRequest},
		{"POST", "/metrics", s.createMetrics},
		{"POST", "/items", s.createItem},
		{"GET", "/items/{id}", s.showItem},
		{"GET", "/users/{uid}", s.showUser(s.userTpl)},
		{"POST", "/users/{uid}", s.updateUser},
		{"GET", "/users/{uid}/page", s.showUser(s.userPageTpl)},
		// an empty id ("/items/") is a bad id, not an unknown route
		{"GET", "/requests/{$}", s.showRequest},
		{"GET", "/items/{$}", s.showItem},
		{"GET", "/users/{$}", s.showUser(s.userTpl)},
		{"POST", "/users/{$}", s.updateUser},
	}
	var paths []string
	allow := map[string][]string{}
	for _, rt := range routes {
		mux.HandleFunc(rt.method+" "+rt.path, rt.h)
		if _, seen := allow[rt.path]; !seen {
			paths = append(paths, rt.path)
		}
		allow[rt.path] = append(allow[rt.path], rt.method)
		if rt.method == "GET" {
			allow[rt.path] = append(allow[rt.path], "HEAD")
		}
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		})
	}
	for _, p := range paths { // "/users" would be redirected to "/users/" (matched by "/users/{$}")
		if base, ok := strings.CutSuffix(p, "/{$}"); ok && allow[base] == nil {
			mux.HandleFunc(base, notFound)
		}
	}
	mux.HandleFunc("/", notFound)

	// Count every answered request but /health; a panic becomes a 500, never a crash.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
			}
			if r.URL.Path != "/health" {
				s.handled.Add(1)
			}
		}()
		// ServeMux's own test before it redirects to the cleaned path (it skips CONNECT).
		if p := r.URL.EscapedPath(); r.Method != http.MethodConnect && p != cleanPath(p) {
			notFound(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// cleanPath is net/http's: path.Clean (no ".", "..", "//"), a leading "/", the trailing
// "/" kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// ---------------------------------------------------------------------------------------

func main() {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "lab: "+strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

func serve() error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if os.Getenv("LAB_THREADS") != "" {
		runtime.GOMAXPROCS(cfg.threads) // else Go's default: the CPUs it may use
	}
	s, err := newService(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.host, cfg.port))
	if err != nil {
		s.close()
		return fmt.Errorf("LAB_HOST=%s LAB_PORT=%s: %v", cfg.host, cfg.port, err)
	}
	// The seed 004 server's timeouts.
	srv := &http.Server{
		Handler:      s.routes(),
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 10 * time.Second,
		IdleTimeout:  120 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Stop accepting, finish the requests in flight (their writes included), then let the
	// writer drain its queue and close every connection.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %v", err)
	}
	s.close()
	return nil
}
