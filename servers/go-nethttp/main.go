// go-nethttp: the SQLite Production Lab contract (../README.md, ../openapi.yaml) on
// net/http (Go 1.22 ServeMux patterns) + database/sql + mattn/go-sqlite3.
//
// One process. Reads go through a pool of LAB_READERS connections; writes run either on
// that pool (LAB_WRITE_PATH=pool) or on one writer goroutine owning its own connection,
// fed by a channel (writer: one transaction per request; batch: group commit).
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
	pragmas                       []pragma
	txnMode                       string // deferred | immediate
	busy                          busyPolicy
	writePath                     string // pool | writer | batch
	processes, threads, readers   int
	metricsTxn                    string // request | record
	cache                         string // private | shared
	sqlLog                        string // off | on
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

	c.dbPath = env("LAB_DB", "")
	if c.dbPath == "" {
		return nil, errors.New("LAB_DB is required: the path of a database made from servers/schema.sql")
	}
	if st, err := os.Stat(c.dbPath); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("LAB_DB=%q is not an existing database file (make one from servers/schema.sql)", c.dbPath)
	}

	c.templates = env("LAB_TEMPLATES", "")
	if c.templates == "" {
		return nil, errors.New("LAB_TEMPLATES is required: the directory of request.html, user.html, user_page.html")
	}

	if s := strings.TrimSpace(env("LAB_PRAGMAS", "")); s != "" {
		for _, item := range strings.Split(s, ",") {
			name, value, ok := strings.Cut(item, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			value = strings.ToLower(strings.TrimSpace(value))
			if !ok || name == "" || value == "" {
				return nil, fmt.Errorf("LAB_PRAGMAS: %q is not name=value", strings.TrimSpace(item))
			}
			allowed, known := pragmaValues[name]
			if !known {
				return nil, fmt.Errorf("LAB_PRAGMAS: pragma '%s' is not allowed (allowed: %s)", name, allowedPragmas)
			}
			if allowed == nil {
				if _, err := strconv.ParseInt(value, 10, 64); err != nil {
					return nil, fmt.Errorf("LAB_PRAGMAS: %s='%s' is not an integer", name, value)
				}
			} else if !contains(allowed, value) {
				return nil, fmt.Errorf("LAB_PRAGMAS: %s='%s' is not one of %s", name, value, strings.Join(allowed, "|"))
			}
			c.pragmas = append(c.pragmas, pragma{name, value})
		}
	}

	c.txnMode = env("LAB_TXN_MODE", "deferred")
	if c.txnMode != "deferred" && c.txnMode != "immediate" {
		return nil, fmt.Errorf("LAB_TXN_MODE='%s' is not one of deferred|immediate", c.txnMode)
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
		return nil, fmt.Errorf("LAB_BUSY='%s' is not one of busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none", busy)
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

	c.cache = env("LAB_CACHE", "private")
	if c.cache != "private" && c.cache != "shared" {
		return nil, fmt.Errorf("LAB_CACHE='%s' is not one of private|shared", c.cache)
	}

	c.sqlLog = env("LAB_SQL_LOG", "off")
	if c.sqlLog != "off" && c.sqlLog != "on" {
		return nil, fmt.Errorf("LAB_SQL_LOG='%s' is not one of off|on", c.sqlLog)
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
	return c, nil
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

var errNotFound = errStatus(http.StatusNotFound, "not found")

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

// fail answers err: its own status for an httpError, 503 for SQLITE_BUSY/SQLITE_LOCKED,
// 500 (without details) for anything else.
func fail(w http.ResponseWriter, err error) {
	var he *httpError
	switch {
	case errors.As(err, &he):
		writeJSON(w, he.status, map[string]string{"error": he.msg})
	case isBusy(err):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "database is locked"})
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

var bg = context.Background() // statements are never interrupted half-way (and mattn runs them without a watcher goroutine)

// openDB opens a pool of n connections. Every connection gets the busy timeout (native
// policy, else 0) from the DSN, then the LAB_PRAGMAS in order from the ConnectHook of the
// registered "sqlite3_lab" driver. _synchronous=FULL undoes mattn's own
// `PRAGMA synchronous=NORMAL` so that an empty LAB_PRAGMAS means SQLite's defaults.
// _stmt_cache_size keeps the statements a transaction runs prepared on each connection.
// LAB_CACHE=shared adds cache=shared: SQLite's shared-cache mode (seed 004's DSN).
func openDB(c *config, n int) (*sql.DB, error) {
	timeout := 0
	if c.busy.kind == "busy_timeout" {
		timeout = c.busy.n
	}
	abs, err := filepath.Abs(c.dbPath)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:%s?mode=rw&_busy_timeout=%d&_synchronous=FULL&_stmt_cache_size=16",
		(&url.URL{Path: abs}).EscapedPath(), timeout)
	if c.cache == "shared" {
		dsn += "&cache=shared"
	}
	db, err := sql.Open("sqlite3_lab", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// Open all n now: pragmas are applied (and fail) at start-up, not under load.
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
	err := t.log.run(query, args, func() error {
		return t.step(func() (err error) { res, err = t.conn.ExecContext(bg, query, args...); return err })
	})
	return res, err
}

func (t *Tx) QueryRow(query string, args []any, dest ...any) error {
	return t.log.run(query, args, func() error {
		return t.step(func() error { return t.conn.QueryRowContext(bg, query, args...).Scan(dest...) })
	})
}

func (t *Tx) Insert(query string, args ...any) (int64, error) {
	res, err := t.Exec(query, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
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
	db        *sql.DB // reads (and, in pool mode, writes): LAB_READERS connections
	wdb       *sql.DB // writer/batch: the writer's one connection
	begin     string  // BEGIN DEFERRED | BEGIN IMMEDIATE
	log       *sqlLog // LAB_SQL_LOG=on, else nil
	jobs      chan *job
	writerWG  sync.WaitGroup
	handled   atomic.Int64
	pragmas   map[string]string // read back at start-up
	versions  map[string]string
	sqliteVer string

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
	if s.db, err = openDB(c, c.readers); err != nil {
		return nil, fmt.Errorf("LAB_DB=%q: %v", c.dbPath, err)
	}
	if c.writePath != "pool" {
		if s.wdb, err = openDB(c, 1); err != nil {
			return nil, fmt.Errorf("LAB_DB=%q: %v", c.dbPath, err)
		}
	}

	// The schema: every statement must prepare (tables and columns exist).
	for _, q := range []string{sqlInsertRequest, sqlLatestMetric, sqlInsertMetric, sqlInsertItem, sqlUpdateUser} {
		st, err := s.db.Prepare(q)
		if err != nil {
			return nil, fmt.Errorf("LAB_DB=%q has no lab schema (%v): make it from servers/schema.sql", c.dbPath, err)
		}
		st.Close()
	}
	for _, p := range []struct {
		st **sql.Stmt
		q  string
	}{{&s.getRequest, sqlGetRequest}, {&s.getItem, sqlGetItem}, {&s.getUser, sqlGetUser}} {
		if *p.st, err = s.db.Prepare(p.q); err != nil {
			return nil, fmt.Errorf("LAB_DB=%q has no lab schema (%v): make it from servers/schema.sql", c.dbPath, err)
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
	s.versions = map[string]string{"go": runtime.Version(), "net/http": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/mattn/go-sqlite3" {
				s.versions["mattn/go-sqlite3"] = d.Version
			}
		}
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
	t := &Tx{conn: conn, busy: s.cfg.busy, first: s.cfg.txnMode == "deferred", log: s.log}
	err := fn(t)
	if err == nil {
		err = s.exec(conn, "COMMIT", true)
	}
	if err != nil {
		s.exec(conn, "ROLLBACK", false)
	}
	return err
}

// write runs fn as one transaction and returns once it is committed (or failed).
func (s *Service) write(r *http.Request, fn func(*Tx) error) error {
	if s.jobs == nil { // pool: on a pooled connection, in the request's goroutine
		conn, err := s.db.Conn(r.Context())
		if err != nil {
			return err
		}
		defer conn.Close()
		return s.tx(conn, fn)
	}
	j := &job{fn: fn, done: make(chan error, 1)}
	select {
	case s.jobs <- j:
	case <-r.Context().Done(): // client gone before its write was queued
		return r.Context().Err()
	}
	return <-j.done
}

func (s *Service) startWriter(loop func(*sql.Conn)) error {
	conn, err := s.wdb.Conn(bg)
	if err != nil {
		return fmt.Errorf("LAB_DB=%q: the writer's connection: %v", s.cfg.dbPath, err)
	}
	s.jobs = make(chan *job, 1024)
	s.writerWG.Add(1)
	go func() {
		defer s.writerWG.Done()
		defer conn.Close()
		loop(conn)
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
func (s *Service) writeEach(conn *sql.Conn) {
	for j := range s.jobs {
		j.answer(s.tx(conn, func(t *Tx) error { return run(j, t) }))
	}
}

// writeBatch (group commit): everything queued, each job inside SAVEPOINT job ... RELEASE
// job, one COMMIT for the batch, then every job in it is answered. A failing job is rolled
// back to its savepoint and answered alone; a failing COMMIT fails the whole batch.
func (s *Service) writeBatch(conn *sql.Conn) {
	batch := make([]*job, 0, cap(s.jobs))
	for j := range s.jobs {
		batch = append(batch[:0], j)
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
		err := s.tx(conn, func(t *Tx) error {
			for _, j := range batch {
				if err := s.exec(conn, "SAVEPOINT job", false); err != nil {
					return err
				}
				if err := run(j, t); err != nil {
					rerr := s.exec(conn, "ROLLBACK TO job", false)
					if rerr == nil {
						rerr = s.exec(conn, "RELEASE job", false)
					}
					if rerr != nil {
						return rerr // the transaction itself is gone: fail the batch
					}
					j.answer(err)
					continue
				}
				if err := s.exec(conn, "RELEASE job", false); err != nil {
					return err
				}
			}
			return nil
		})
		// Committed: acknowledge the rest. Failed (BEGIN, a savepoint or COMMIT): none of
		// the rest is acknowledged.
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
	writeJSON(w, http.StatusOK, map[string]any{
		"server":         "go-nethttp",
		"versions":       s.versions,
		"sqlite_version": s.sqliteVer,
		"pid":            os.Getpid(),
		"knobs": map[string]any{
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
		},
		"emulated":         emulated,
		"requests_handled": s.handled.Load(),
	})
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
	return err
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
		return err
	}
	defer conn.Close()
	for i := range names {
		var prev sql.NullFloat64
		args := []any{instance, names[i]}
		err := s.log.run(sqlLatestMetric, args, func() error {
			return s.cfg.busy.retry(func() error {
				return conn.QueryRowContext(bg, sqlLatestMetric, args...).Scan(&prev)
			})
		})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := s.tx(conn, func(t *Tx) (err error) {
			ids[i], err = t.Insert(sqlInsertMetric, instance, names[i], values[i], prev, ts)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func validString(s *string, maxChars int) bool {
	return s != nil && *s != "" && utf8.RuneCountInString(*s) <= maxChars
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
