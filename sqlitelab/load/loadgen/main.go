// Command loadgen drives the lab's scenarios at one server: a dependency-free alternative to
// ONE Locust process running sqlitelab/load/locustfile.py (its recorder: recorder.py). It reads the same LAB_* environment,
// sends the same requests under the same names, and writes the same per-process JSON file
// (LAB_OUT_DIR/proc-<pid>.json) with the same in-window rules, plus "hist_values" (exact
// latencies in µs, aggregated by value) in place of an encoded HdrHistogram.
//
//	loadgen -scenario hello -users 64 -host http://127.0.0.1:8001 -max-seconds 30
//
// Each user is a goroutine with its own keep-alive HTTP/1.1 connection (with LAB_KEEPALIVE=0,
// a new connection per request, as `oha --disable-keepalive`) and a minimal client (request
// written in one write, response parsed from a bufio.Reader), so the generator costs far
// less CPU per request than Locust's gevent client.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	histMax        = 100_000_000 // µs: the lab's HdrHistogram covers 1 µs .. 100 s
	maxRedirects   = 30          // Locust's FastHttpUser.max_redirects
	signalGrace    = 5 * time.Second
	readBufferSize = 32 << 10
	captureLimit   = 1 << 20 // bytes of a response body kept for parsing (POST /items)
)

const usage = `usage: loadgen -spec FILE -users N -host http://127.0.0.1:PORT -max-seconds S

FILE is a scenario compiled from sqlitelab/load/scenarios.toml (python -m sqlitelab.load.scenarios NAME
[LAB_VAR=VALUE ...] > FILE; sqlitelab.load.driver writes one per level), the file Locust reads too.
Environment as sqlitelab/load/recorder.py: LAB_T0, LAB_T1, LAB_TARGET, LAB_OUT_DIR,
LAB_RATE_PER_USER, LAB_REQUEST_TIMEOUT, LAB_KEEPALIVE (1: one kept-alive connection per user;
0: a new connection per request, Connection: close), and for an open loop LAB_ARRIVAL_RATE
(requests/s of this process; 0: closed loop), LAB_ARRIVALS (constant | poisson) and
LAB_ARRIVAL_SEED (an integer: a reproducible Poisson schedule).
Writes LAB_OUT_DIR/proc-<pid>.json and exits 0; a usage error prints one line and exits 2.
LAB_SESSION=DIR (closed loop, no LAB_TARGET): after that file, wait for DIR/command-<n>.json
(n = 1, 2, ...): {"users": N, "out_dir": D, "t0": T0, "t1": T1, "max_seconds": S} runs the
next level as these flags and LAB_* would, {"quit": true} exits 0.
`

// ------------------------------------------------------------------------------ requests

// spec is one scenario compiled for one level (sqlitelab/load/scenarios.py documents the format):
// the requests a user draws from, each a method, the name it is recorded under, and a path
// and body made of literal pieces and uniform integers.
type spec struct {
	Scenario string    `json:"scenario"`
	MaxID    int64     `json:"max_id"`
	Requests []request `json:"requests"`
}

type request struct {
	Method     string   `json:"method"`
	Name       string   `json:"name"`
	Path       []piece  `json:"path"`
	Body       []piece  `json:"body"` // null: no body
	JSON       bool     `json:"json"` // Content-Type: application/json
	Follow     bool     `json:"follow"`
	Share      *float64 `json:"share"`
	TrackMaxID bool     `json:"track_max_id"`
	Redirects  bool     `json:"redirects"`
}

// piece is literal text, a uniform integer in [lo, hi], or one in [lo, max(lo, largest id seen)].
type piece struct {
	Lit        *string `json:"lit"`
	Int        []int64 `json:"int"`
	IntToMaxID *int64  `json:"int_to_max_id"`
}

// op is one request of the spec, by index.
type op int

func loadSpec(path string) (*spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-spec: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sp spec
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("-spec %s: %v", path, err)
	}
	if len(sp.Requests) == 0 {
		return nil, fmt.Errorf("-spec %s: no requests", path)
	}
	for i, r := range sp.Requests {
		if r.Method == "" || r.Name == "" || len(r.Path) == 0 {
			return nil, fmt.Errorf("-spec %s: request %d needs method, name and path", path, i)
		}
		if r.Share != nil && !(*r.Share >= 0 && *r.Share <= 1) {
			return nil, fmt.Errorf("-spec %s: request %d: share %v is not in 0..1", path, i, *r.Share)
		}
		for _, ps := range [][]piece{r.Path, r.Body} {
			for _, p := range ps {
				n := 0
				if p.Lit != nil {
					n++
				}
				if p.Int != nil {
					n++
					if len(p.Int) != 2 || p.Int[0] > p.Int[1] {
						return nil, fmt.Errorf("-spec %s: request %d: int %v is not [lo, hi]", path, i, p.Int)
					}
				}
				if p.IntToMaxID != nil {
					n++
				}
				if n != 1 {
					return nil, fmt.Errorf("-spec %s: request %d: a piece is one of lit, int, int_to_max_id", path, i)
				}
			}
		}
	}
	return &sp, nil
}

// appendPieces joins pieces as locustfile.py's _join does.
func appendPieces(b []byte, ps []piece, maxID int64) []byte {
	for _, p := range ps {
		switch {
		case p.Lit != nil:
			b = append(b, *p.Lit...)
		case p.Int != nil:
			b = strconv.AppendInt(b, p.Int[0]+rand.Int64N(p.Int[1]-p.Int[0]+1), 10)
		default:
			lo := *p.IntToMaxID
			b = strconv.AppendInt(b, lo+rand.Int64N(max(1, maxID-lo+1)), 10)
		}
	}
	return b
}

// ------------------------------------------------------------------------------ configuration

type config struct {
	spec       *spec
	users      int
	maxSeconds float64
	hostHeader string // the URL's host[:port], sent as Host
	addr       string // host:port to dial
	t0, t1     float64
	target     int64
	outDir     string
	rate       float64
	timeout    time.Duration
	// open loop: requests/s this process offers (0: closed loop), constant or poisson
	arrivalRate float64
	poisson     bool
	seed        int64
	seeded      bool
	keepalive   bool   // LAB_KEEPALIVE: false = a new connection per request, Connection: close
	session     string // LAB_SESSION: the folder of a session's commands ("": one level)
}

func parseConfig(args []string, getenv func(string) string) (*config, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	specPath := fs.String("spec", "", "compiled scenario (JSON)")
	users := fs.Int("users", 0, "users")
	host := fs.String("host", "", "base URL")
	maxSeconds := fs.Float64("max-seconds", 0, "hard bound on the run")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg := &config{}
	switch {
	case *specPath == "":
		return nil, errors.New("-spec is required (a scenario compiled by python -m sqlitelab.load.scenarios)")
	case *users < 1:
		return nil, fmt.Errorf("-users must be >= 1, not %d", *users)
	case !(*maxSeconds > 0 && *maxSeconds <= 1e9):
		return nil, fmt.Errorf("-max-seconds must be > 0 (a hard bound on the run), not %v", *maxSeconds)
	}
	cfg.users, cfg.maxSeconds = *users, *maxSeconds
	var err error
	if cfg.spec, err = loadSpec(*specPath); err != nil {
		return nil, err
	}
	if cfg.hostHeader, cfg.addr, err = parseHost(*host); err != nil {
		return nil, err
	}

	e := envReader{get: getenv}
	cfg.t0 = e.float("LAB_T0", "0")
	cfg.t1 = e.float("LAB_T1", "1e12")
	cfg.target = e.int("LAB_TARGET", "0")
	cfg.outDir = getenv("LAB_OUT_DIR")
	if cfg.outDir == "" {
		cfg.outDir = "."
	}
	cfg.rate = e.float("LAB_RATE_PER_USER", "0")
	timeout := e.float("LAB_REQUEST_TIMEOUT", "30")
	cfg.keepalive = e.flag("LAB_KEEPALIVE", "1")
	cfg.arrivalRate = e.float("LAB_ARRIVAL_RATE", "0")
	arrivals := e.value("LAB_ARRIVALS", "constant")
	if seed := e.value("LAB_ARRIVAL_SEED", ""); seed != "" {
		cfg.seed, cfg.seeded = e.int("LAB_ARRIVAL_SEED", "0"), true
	}
	if e.err != nil {
		return nil, e.err
	}
	switch {
	case cfg.arrivalRate < 0 || math.IsInf(cfg.arrivalRate, 0):
		return nil, fmt.Errorf("LAB_ARRIVAL_RATE must be a finite number >= 0 (0: closed loop), not %v", cfg.arrivalRate)
	case arrivals != "constant" && arrivals != "poisson":
		return nil, fmt.Errorf("LAB_ARRIVALS=%q must be constant or poisson", arrivals)
	case cfg.arrivalRate > 0 && (cfg.rate > 0 || cfg.target > 0):
		return nil, errors.New("open loop (LAB_ARRIVAL_RATE) takes neither LAB_RATE_PER_USER nor LAB_TARGET")
	}
	cfg.poisson = arrivals == "poisson"
	cfg.session = getenv("LAB_SESSION")
	switch {
	case cfg.session != "" && (cfg.arrivalRate > 0 || cfg.target > 0):
		return nil, errors.New("LAB_SESSION steps closed-loop levels of a duration: no LAB_TARGET, no LAB_ARRIVAL_RATE")
	case math.IsInf(cfg.t0, 0) || math.IsInf(cfg.t1, 0):
		return nil, errors.New("LAB_T0 and LAB_T1 must be finite epoch seconds")
	case cfg.target < 0:
		return nil, fmt.Errorf("LAB_TARGET must be >= 0, not %d", cfg.target)
	case cfg.rate < 0 || math.IsInf(cfg.rate, 0):
		return nil, fmt.Errorf("LAB_RATE_PER_USER must be >= 0 (0: closed loop), not %v", cfg.rate)
	case !(timeout > 0 && timeout <= 1e6):
		return nil, fmt.Errorf("LAB_REQUEST_TIMEOUT must be > 0 seconds, not %v", timeout)
	}
	cfg.timeout = time.Duration(timeout * float64(time.Second))
	return cfg, nil
}

// parseHost accepts http://HOST[:PORT][/] with a loopback HOST only.
func parseHost(raw string) (hostHeader, addr string, err error) {
	if raw == "" {
		return "", "", errors.New("-host is required (http://127.0.0.1:PORT)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("-host %q is not a URL", raw)
	}
	if u.Scheme != "http" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("-host %q must be http://HOST[:PORT] with no path", raw)
	}
	h := u.Hostname()
	loopback := strings.EqualFold(h, "localhost")
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	if !loopback {
		return "", "", fmt.Errorf("load goes to loopback only (127.x, localhost, [::1]), not %q", raw)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", "", fmt.Errorf("-host %q: bad port %q", raw, port)
	}
	return u.Host, net.JoinHostPort(h, port), nil
}

// envReader parses LAB_* variables as recorder.py does; an empty value means the default.
type envReader struct {
	get func(string) string
	err error
}

func (e *envReader) value(name, def string) string {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return def
	}
	return v
}

func (e *envReader) float(name, def string) float64 {
	v := e.value(name, def)
	f, err := strconv.ParseFloat(v, 64)
	if (err != nil || math.IsNaN(f)) && e.err == nil {
		e.err = fmt.Errorf("%s=%q is not a number", name, v)
	}
	return f
}

// flag reads a 1/0 switch; anything else is an error.
func (e *envReader) flag(name, def string) bool {
	v := e.value(name, def)
	if v != "0" && v != "1" && e.err == nil {
		e.err = fmt.Errorf("%s=%q must be 1 or 0", name, v)
	}
	return v == "1"
}

func (e *envReader) int(name, def string) int64 {
	v := e.value(name, def)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && e.err == nil {
		e.err = fmt.Errorf("%s=%q is not an integer", name, v)
	}
	return n
}

// ------------------------------------------------------------------------------ recorder

type runKey struct {
	op     op
	status int
}

// recorder mirrors record() and dump() in recorder.py. One mutex: every decision about the
// window and the target is taken in the order requests are recorded, as in Locust.
// Besides the window it keeps hey's accounting of the whole run (every finished request,
// before, inside and after the window): see runStats.
type recorder struct {
	mu                  sync.Mutex
	t0, t1              float64
	target              int64
	count, sumUS, bytes int64
	overran             int64
	maxOverrun          float64
	firstStart, lastEnd float64
	haveFirst           bool
	ended               bool    // state["t1"] is set: the target was reached
	endT1               float64 // ... at the end of this request
	status              map[int]int64
	failures            map[string]int64
	runCounts           map[runKey]int64
	names               []string // "<method> <name>" of each op, as Locust records it
	hist                map[int64]int64
	run                 runStats
	frozen              bool
	onTarget            func()
	// open loop (see schedule): sends more than lateTolerance after their due time, the
	// longest such lag; and every counted request by the second it finished in
	late    int64
	maxLag  float64
	seconds map[int64]*secondBucket
}

// lateTolerance: an open-loop request sent later than this after its due time is late.
const lateTolerance = 0.005

// secondBucket is one second of the window (locustfile.py's per_second).
type secondBucket struct {
	n, late  int64
	failures map[string]int64
	hist     map[int64]int64
}

// runStats is the whole run as `hey` reports it (rakyll/hey requester/report.go): results
// counts every finished request whatever its outcome (hey's numRes: responses of any status
// and transport errors); ok those with an HTTP status (status != 0, no transport error),
// over which sumUS and maxUS are taken (hey's Average and Slowest); firstStart and lastEnd
// bound them all (hey's Total runs until the last worker has finished its request).
type runStats struct {
	results, ok, sumUS, maxUS int64
	firstStart, lastEnd       float64
}

func newRecorder(names []string, t0, t1 float64, target int64, onTarget func()) *recorder {
	return &recorder{names: names, t0: t0, t1: t1, target: target, onTarget: onTarget,
		status: map[int]int64{}, failures: map[string]int64{},
		runCounts: map[runKey]int64{}, hist: map[int64]int64{}, seconds: map[int64]*secondBucket{}}
}

// record one finished request: start in epoch seconds, dur from the monotonic clock.
func (r *recorder) record(o op, status int, kind string, start float64, dur time.Duration, nbytes int64) {
	r.recordDue(o, status, kind, start, dur, nbytes, 0)
}

// recordDue records an open-loop request (due > 0: its due time, epoch seconds): in the
// window its latency counts from the due time, the wait for a free user included; the run's
// (hey's) accounting keeps the time from its actual send.
func (r *recorder) recordDue(o op, status int, kind string, start float64, dur time.Duration, nbytes int64, due float64) {
	end := start + dur.Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return
	}
	r.runCounts[runKey{o, status}]++
	us := int64(math.RoundToEven(float64(dur.Nanoseconds()) / 1000))
	if us < 1 {
		us = 1
	}
	if r.run.results == 0 {
		r.run.firstStart, r.run.lastEnd = start, end
	} else {
		r.run.firstStart = math.Min(r.run.firstStart, start)
		r.run.lastEnd = math.Max(r.run.lastEnd, end)
	}
	r.run.results++
	if status != 0 {
		r.run.ok++
		r.run.sumUS += us
		r.run.maxUS = max(r.run.maxUS, us)
	}
	windowEnd := r.t1
	if r.ended {
		windowEnd = r.endT1
	}
	if r.t0 <= start && start < windowEnd && windowEnd < end { // started inside, still running at the close
		r.overran++
		r.maxOverrun = math.Max(r.maxOverrun, end-windowEnd)
	}
	if start < r.t0 || end > r.t1 || r.ended {
		return
	}
	lag := 0.0
	if due > 0 {
		us = max(1, int64(math.RoundToEven((end-due)*1e6)))
		lag = math.Max(0, start-due)
		r.maxLag = math.Max(r.maxLag, lag)
	}
	late := lag > lateTolerance
	sec := int64(math.Floor(end - r.t0))
	b := r.seconds[sec]
	if b == nil {
		b = &secondBucket{failures: map[string]int64{}, hist: map[int64]int64{}}
		r.seconds[sec] = b
	}
	b.n++
	b.hist[min(us, histMax)]++
	if late {
		r.late++
		b.late++
	}
	if kind != "" {
		b.failures[kind]++
	}
	r.hist[min(us, histMax)]++
	r.count++
	r.sumUS += us
	r.bytes += nbytes
	if !r.haveFirst {
		r.firstStart, r.lastEnd, r.haveFirst = start, end, true
	} else {
		r.firstStart = math.Min(r.firstStart, start)
		r.lastEnd = math.Max(r.lastEnd, end)
	}
	r.status[status]++
	if kind != "" {
		r.failures[kind]++
	}
	if r.target > 0 && r.count >= r.target {
		r.ended, r.endT1 = true, end
		if r.onTarget != nil {
			r.onTarget()
		}
	}
}

// output is the per-process file of locustfile.py's dump(), plus hist_values and generator.
type output struct {
	PID         int              `json:"pid"`
	T0          float64          `json:"t0"`
	T1          float64          `json:"t1"`
	Target      int64            `json:"target"`
	Count       int64            `json:"count"`
	SumUS       int64            `json:"sum_us"`
	Bytes       int64            `json:"bytes"`
	Overran     int64            `json:"overran"`
	MaxOverrunS float64          `json:"max_overrun_s"`
	FirstStart  *float64         `json:"first_start"`
	LastEnd     *float64         `json:"last_end"`
	SpawnedAt   *float64         `json:"spawned_at"`
	Status      map[string]int64 `json:"status"`
	Failures    map[string]int64 `json:"failures"`
	RunCounts   map[string]int64 `json:"run_counts"`
	// requests sent and never answered when the process stopped, by request name (a write
	// among them may have been committed: the audit allows for it)
	RunInflight  map[string]int64 `json:"run_inflight"`
	LocustWindow any              `json:"locust_window"`
	Hist         any              `json:"hist"`
	HistValues   [][2]int64       `json:"hist_values"`
	Generator    string           `json:"generator"`
	Resent       int64            `json:"resent"` // requests sent again on a new connection (see roundTrip)
	// those by request name: a write among them may have been committed twice (its first
	// sending reached the server before the connection dropped), which the audit allows for
	RunResent map[string]int64 `json:"run_resent"`
	// The whole run, as hey counts it (see runStats): every request that finished, in the
	// window or not; requests abandoned at the hard bound are not in it.
	RunFirstStart *float64 `json:"run_first_start"`
	RunLastEnd    *float64 `json:"run_last_end"`
	RunResults    int64    `json:"run_results"`
	RunOK         int64    `json:"run_ok"`
	RunSumUS      int64    `json:"run_sum_us"`
	RunMaxUS      int64    `json:"run_max_us"`
	// open loop (null / 0 in closed loop) and the window second by second
	OpenLoop    bool         `json:"open_loop"`
	ArrivalRate *float64     `json:"arrival_rate"`
	Arrivals    *string      `json:"arrivals"`
	Offered     int64        `json:"offered"`
	Late        int64        `json:"late"`
	MaxLagS     float64      `json:"max_lag_s"`
	Backlog     int64        `json:"backlog"`
	Seconds     []secondJSON `json:"seconds"`
}

type secondJSON struct {
	S          int64            `json:"s"`
	N          int64            `json:"n"`
	Failures   map[string]int64 `json:"failures"`
	Late       int64            `json:"late"`
	HistValues [][2]int64       `json:"hist_values"`
}

// freeze ends recording at `now` (epoch seconds) and returns the file's content. inflight
// holds the start (UnixNano) of every request still running, 0 for an idle user: those
// started inside the window are abandoned and count as overran. ops, read under the lock (so
// a request is either recorded or in flight, never neither), gives each user's op in flight.
func (r *recorder) freeze(now float64, inflight []int64, spawnedAt *float64, ops func() []int32) *output {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
	runInflight := map[string]int64{}
	for _, o := range ops() {
		if o > 0 {
			runInflight[r.names[o-1]]++
		}
	}
	t1 := math.Min(r.t1, now)
	if r.ended {
		t1 = r.endT1
	}
	for _, ns := range inflight {
		if ns == 0 {
			continue
		}
		if start := float64(ns) / 1e9; r.t0 <= start && start < t1 {
			r.overran++
			r.maxOverrun = math.Max(r.maxOverrun, now-t1)
		}
	}
	out := &output{PID: os.Getpid(), T0: r.t0, T1: t1, Target: r.target, Count: r.count,
		SumUS: r.sumUS, Bytes: r.bytes, Overran: r.overran, MaxOverrunS: r.maxOverrun,
		SpawnedAt: spawnedAt, Status: map[string]int64{}, Failures: map[string]int64{},
		RunCounts: map[string]int64{}, RunInflight: runInflight, HistValues: [][2]int64{}, Generator: "loadgen",
		RunResults: r.run.results, RunOK: r.run.ok, RunSumUS: r.run.sumUS, RunMaxUS: r.run.maxUS}
	if r.haveFirst {
		fs, le := r.firstStart, r.lastEnd
		out.FirstStart, out.LastEnd = &fs, &le
	}
	if r.run.results > 0 {
		fs, le := r.run.firstStart, r.run.lastEnd
		out.RunFirstStart, out.RunLastEnd = &fs, &le
	}
	for s, n := range r.status {
		out.Status[strconv.Itoa(s)] = n
	}
	for k, n := range r.failures {
		out.Failures[k] = n
	}
	for k, n := range r.runCounts {
		out.RunCounts[r.names[k.op]+" "+strconv.Itoa(k.status)] = n
	}
	out.HistValues = histValues(r.hist)
	out.Late, out.MaxLagS = r.late, r.maxLag
	out.Seconds = []secondJSON{}
	for s, b := range r.seconds {
		out.Seconds = append(out.Seconds, secondJSON{S: s, N: b.n, Failures: b.failures, Late: b.late,
			HistValues: histValues(b.hist)})
	}
	sort.Slice(out.Seconds, func(i, j int) bool { return out.Seconds[i].S < out.Seconds[j].S })
	return out
}

// histValues: a histogram's (µs, count) pairs in order of value ("hist_values").
func histValues(h map[int64]int64) [][2]int64 {
	out := make([][2]int64, 0, len(h))
	for v, n := range h {
		out = append(out, [2]int64{v, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// ------------------------------------------------------------------------------ open loop

// schedule holds the due times of the process's open-loop requests (locustfile.py's
// Schedule): slot 0 when the first user asks, then every 1/rate s (constant) or after
// exponential gaps of mean 1/rate (poisson). Users take slots in order under its mutex.
type schedule struct {
	mu      sync.Mutex
	rate    float64
	poisson bool
	rng     *rand.Rand
	started bool
	origin  float64
	k       int64
	next    float64
	t0, t1  float64
	offered int64 // slots due in [t0, t1)
}

func newSchedule(cfg *config) *schedule {
	seed := uint64(time.Now().UnixNano())
	if cfg.seeded {
		seed = uint64(cfg.seed)
	}
	return &schedule{rate: cfg.arrivalRate, poisson: cfg.poisson, t0: cfg.t0, t1: cfg.t1,
		rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (s *schedule) advance() float64 {
	t := s.next
	if s.t0 <= t && t < s.t1 {
		s.offered++
	}
	s.k++
	if s.poisson {
		s.next = t + s.rng.ExpFloat64()/s.rate
	} else {
		s.next = s.origin + float64(s.k)/s.rate
	}
	return t
}

// take returns the next slot's due time (epoch seconds).
func (s *schedule) take(now float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started, s.origin, s.next = true, now, now
	}
	return s.advance()
}

// untaken counts the slots due more than lateTolerance before t1 that no user took (a slot
// due closer to the close was not late yet), and counts every slot due before t1 as offered
// (called once, after the users have stopped).
func (s *schedule) untaken(t1 float64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for s.started && s.next < t1 {
		if s.advance() < t1-lateTolerance {
			n++
		}
	}
	return n
}

// failureKind is sqlitelab/core/failures.py's failure_kind: "" for a success or redirect.
func failureKind(status int, err error) string {
	switch {
	case status == 503:
		return "busy"
	case status >= 500:
		return "server_error"
	case status >= 400:
		return "client_error"
	case status == 0 || (err != nil && status < 200):
		var ne net.Error
		if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())) {
			return "timeout"
		}
		if err != nil {
			text := strings.ToLower(err.Error())
			if strings.Contains(text, "timeout") || strings.Contains(text, "timed out") {
				return "timeout"
			}
		}
		return "connection"
	}
	return ""
}

// ------------------------------------------------------------------------------ the run

type run struct {
	cfg       *config
	rec       *recorder
	stopping  atomic.Bool
	stopOnce  sync.Once
	stopCh    chan struct{}
	maxID     atomic.Int64   // the largest id seen (int_to_max_id pieces)
	resent    atomic.Int64   // requests sent again after a stale kept-alive connection
	resentOps []atomic.Int64 // the same by op (the request a redirect's hop belongs to)
	users     []*user
	wg        sync.WaitGroup
	spawnedAt float64
	sched     *schedule // open loop; nil in closed loop
}

func newRun(cfg *config) *run {
	g := &run{cfg: cfg, stopCh: make(chan struct{}), resentOps: make([]atomic.Int64, len(cfg.spec.Requests))}
	names := make([]string, len(cfg.spec.Requests))
	for i, r := range cfg.spec.Requests {
		names[i] = r.Method + " " + r.Name
	}
	g.rec = newRecorder(names, cfg.t0, cfg.t1, cfg.target, g.stop)
	g.maxID.Store(cfg.spec.MaxID)
	if cfg.arrivalRate > 0 {
		g.sched = newSchedule(cfg)
	}
	return g
}

// stop: no new requests; users finish the one they are in.
func (g *run) stop() {
	g.stopping.Store(true)
	g.stopOnce.Do(func() { close(g.stopCh) })
}

func (g *run) shouldStop() bool {
	if g.stopping.Load() {
		return true
	}
	if epoch(time.Now()) >= g.cfg.t1 {
		g.stop()
		return true
	}
	return false
}

// start spawns every user at once and notes when all have started.
func (g *run) start() {
	g.users = make([]*user, g.cfg.users)
	for i := range g.users {
		g.users[i] = &user{g: g, cfg: g.cfg}
	}
	g.wg.Add(len(g.users))
	for _, u := range g.users {
		go u.loop()
	}
	g.spawnedAt = epoch(time.Now())
}

// inflightOps: the op (+1) each user has in flight, 0 for an idle one.
func (g *run) inflightOps() []int32 {
	ops := make([]int32, len(g.users))
	for i, u := range g.users {
		ops[i] = u.inflightOp.Load()
	}
	return ops
}

func (g *run) inflight() []int64 {
	starts := make([]int64, len(g.users))
	for i, u := range g.users {
		starts[i] = u.inflight.Load()
	}
	return starts
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// execute runs the load until the window closes (or the target, a signal, the hard bound)
// and returns the file's content, and whether every user had finished by then (no signal,
// no hard bound: a session may run its next level).
func execute(cfg *config, signals <-chan os.Signal) (*output, bool) {
	g := newRun(cfg)
	hard := time.NewTimer(time.Duration(cfg.maxSeconds * float64(time.Second)))
	defer hard.Stop()
	if now := epoch(time.Now()); now < cfg.t1 {
		g.start()
	} else {
		// started after its window closed (a machine too busy to start it in time): no user
		// runs, nothing is sent, and its file says when it started (spawned_at >= t1)
		g.spawnedAt = now
	}
	if d := cfg.t1 - epoch(time.Now()); d < cfg.maxSeconds+1 {
		t := time.AfterFunc(time.Duration(math.Max(d, 0)*float64(time.Second)), g.stop)
		defer t.Stop()
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	finished := false
	select {
	case <-done:
		finished = true
	case <-hard.C:
	case <-signals:
		g.stop()
		grace := time.NewTimer(signalGrace)
		select {
		case <-done:
		case <-hard.C:
		case <-grace.C:
		case <-signals:
		}
		grace.Stop()
	}
	spawned := g.spawnedAt
	now := epoch(time.Now())
	out := g.rec.freeze(now, g.inflight(), &spawned, g.inflightOps)
	out.Resent = g.resent.Load()
	out.RunResent = map[string]int64{}
	for i := range g.resentOps {
		if n := g.resentOps[i].Load(); n > 0 {
			out.RunResent[g.rec.names[i]] = n
		}
	}
	if g.sched != nil {
		// due before the close (by more than lateTolerance) and never sent: slots no user
		// took, and slots taken by a user that the stop reached before it sent
		closeAt := math.Min(cfg.t1, now)
		out.Backlog = g.sched.untaken(closeAt)
		for _, u := range g.users {
			if d := u.pendingDue; d > 0 && d < closeAt-lateTolerance {
				out.Backlog++
			}
		}
		rate, kind := cfg.arrivalRate, "constant"
		if cfg.poisson {
			kind = "poisson"
		}
		out.OpenLoop, out.ArrivalRate, out.Arrivals, out.Offered = true, &rate, &kind, g.sched.offered
	}
	return out, finished
}

func writeOutput(dir string, out *output) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("proc-%d.json", out.PID))
	tmp := filepath.Join(dir, fmt.Sprintf(".proc-%d.json.tmp", out.PID)) // not matched by proc-*.json
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

func main() { os.Exit(realMain(os.Args[1:])) }

func realMain(args []string) int {
	cfg, err := parseConfig(args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Print(usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		return 2
	}
	debug.SetGCPercent(400)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	return levels(cfg, signals)
}

// levels runs cfg's level and, in a session, each level its commands start, until one says
// quit; a level that a signal or the hard bound ended is the session's last.
func levels(cfg *config, signals <-chan os.Signal) int {
	for n := 1; ; n++ {
		out, finished := execute(cfg, signals)
		if code := report(cfg, out); code != 0 || cfg.session == "" || !finished {
			return code
		}
		next, err := awaitCommand(cfg, n, signals)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
			return 2
		}
		if next == nil {
			return 0
		}
		cfg = next
	}
}

// report writes a level's file and says what it measured.
func report(cfg *config, out *output) int {
	path, err := writeOutput(cfg.outDir, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: writing the measurements: %v\n", err)
		return 1
	}
	rps := 0.0
	if out.T1 > out.T0 {
		rps = float64(out.Count) / (out.T1 - out.T0)
	}
	conns := "keep-alive"
	if !cfg.keepalive {
		conns = "a connection per request"
	}
	fmt.Printf("loadgen %s users=%d (%s): %d requests in the window (%.0f/s), %d in the run, %d overran -> %s\n",
		cfg.spec.Scenario, cfg.users, conns, out.Count, rps, out.RunResults, out.Overran, path)
	return 0
}

// ------------------------------------------------------------------------------ a session

// A session (LAB_SESSION, sqlitelab.load.driver.Session) runs level after level in one process,
// as Locust's does (sqlitelab/load/locustfile.py documents the protocol): between levels no
// user runs (each closed its connection as it stopped), and the process waits for its next
// command. Told nothing for sessionIdle it ends itself: whoever drove it is gone.
const (
	sessionIdle = 600 * time.Second
	commandPoll = 5 * time.Millisecond
)

// command is a session's next step: a level (its window fixed in advance, as LAB_T0/LAB_T1
// fix the first one's), or quit.
type command struct {
	Quit       bool    `json:"quit"`
	Users      int     `json:"users"`
	OutDir     string  `json:"out_dir"`
	T0         float64 `json:"t0"`
	T1         float64 `json:"t1"`
	MaxSeconds float64 `json:"max_seconds"`
}

// awaitCommand waits for command n of cfg's session and returns the configuration of the level
// it starts; nil to end the session (quit, a signal, or nothing for sessionIdle).
func awaitCommand(cfg *config, n int, signals <-chan os.Signal) (*config, error) {
	path := filepath.Join(cfg.session, fmt.Sprintf("command-%d.json", n))
	deadline := time.Now().Add(sessionIdle)
	tick := time.NewTicker(commandPoll)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return nextLevel(cfg, data)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "loadgen: no command %s for %v: the session ends\n", path, sessionIdle)
			return nil, nil
		}
		select {
		case <-signals:
			return nil, nil
		case <-tick.C:
		}
	}
}

// nextLevel is cfg with a command's level (nil for quit), refused as parseConfig refuses flags.
func nextLevel(cfg *config, data []byte) (*config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c command
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("session command: %v", err)
	}
	switch {
	case c.Quit:
		return nil, nil
	case c.Users < 1:
		return nil, fmt.Errorf("session command: users must be >= 1, not %d", c.Users)
	case c.OutDir == "":
		return nil, errors.New("session command: out_dir is required")
	case !(c.MaxSeconds > 0 && c.MaxSeconds <= 1e9):
		return nil, fmt.Errorf("session command: max_seconds must be > 0, not %v", c.MaxSeconds)
	case !(c.T0 < c.T1) || math.IsInf(c.T1, 0):
		return nil, fmt.Errorf("session command: t0 < t1 must be finite epoch seconds, not %v, %v", c.T0, c.T1)
	}
	next := *cfg
	next.users, next.outDir, next.t0, next.t1, next.maxSeconds = c.Users, c.OutDir, c.T0, c.T1, c.MaxSeconds
	return &next, nil
}

// ------------------------------------------------------------------------------ one user

// user is one closed-loop (or paced) virtual user with its own keep-alive connection.
type user struct {
	g        *run
	cfg      *config
	conn     net.Conn
	br       *bufio.Reader
	req      []byte // the request as written
	path     []byte
	loc      []byte // the path of a redirect's target
	body     []byte // a request body built per request (POST /users/{uid})
	resp     []byte // the captured response body
	inflight atomic.Int64
	// the op (+1) of the request in flight, 0 when idle: what was abandoned at a stop
	inflightOp atomic.Int32
	// open loop: the due time of the slot taken and not yet sent (0: none); read by execute
	// after the user has stopped
	pendingDue float64
}

func (u *user) loop() {
	defer u.g.wg.Done()
	defer u.close()
	var period time.Duration
	if u.cfg.rate > 0 {
		period = time.Duration(float64(time.Second) / u.cfg.rate)
	}
	if u.g.sched != nil {
		u.openLoop()
		return
	}
	for !u.g.shouldStop() {
		cycle := time.Now()
		u.once(0)
		if period > 0 { // constant_throughput: each task + wait lasts at least 1/rate
			if wait := period - time.Since(cycle); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-u.g.stopCh:
					t.Stop()
					return
				}
			}
		}
	}
}

// openLoop: take the next due time, sleep until it (unless the stop comes first), send.
// When every user is busy, due requests wait for the next free user: their latency then
// includes that wait (no coordinated omission).
func (u *user) openLoop() {
	for !u.g.shouldStop() {
		due := u.g.sched.take(epoch(time.Now()))
		u.pendingDue = due
		if wait := time.Duration((due - epoch(time.Now())) * float64(time.Second)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-u.g.stopCh:
				t.Stop()
				return
			}
		}
		if u.g.shouldStop() {
			return
		}
		u.pendingDue = 0
		u.once(due)
	}
}

// once sends the scenario's next request and records it, as LabScenario's task does: the
// first request whose cumulative share exceeds a uniform draw, else the last. due > 0: an
// open-loop request's due time (epoch seconds).
func (u *user) once(due float64) {
	cfg, g := u.cfg, u.g
	reqs := cfg.spec.Requests
	o := op(len(reqs) - 1)
	if len(reqs) > 1 {
		draw, cum := rand.Float64(), 0.0
		for i, r := range reqs {
			if r.Share == nil {
				continue
			}
			cum += *r.Share
			if draw < cum {
				o = op(i)
				break
			}
		}
	}
	r := &reqs[o]
	maxID := g.maxID.Load()
	u.path = appendPieces(u.path[:0], r.Path, maxID)
	var body []byte
	if r.Body != nil {
		u.body = appendPieces(u.body[:0], r.Body, maxID)
		body = u.body
	}

	start := time.Now()
	startNs := start.UnixNano()
	u.inflight.Store(startNs)
	u.inflightOp.Store(int32(o) + 1)
	status, n, err := u.exchange(r.Method, u.path, body, r.JSON && r.Body != nil, r.Follow, r.TrackMaxID)
	dur := time.Since(start)
	g.rec.recordDue(o, status, failureKind(status, err), float64(startNs)/1e9, dur, n, due)
	u.inflight.Store(0)
	u.inflightOp.Store(0)
	if r.TrackMaxID && status == 201 && err == nil {
		if id, ok := parseID(u.resp); ok {
			for cur := g.maxID.Load(); id > cur && !g.maxID.CompareAndSwap(cur, id); cur = g.maxID.Load() {
			}
		}
	}
}

// parseID reads int(r.json()["id"]) of a 201 to POST /items.
func parseID(body []byte) (int64, bool) {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.ID) == 0 {
		return 0, false
	}
	raw := string(v.ID)
	if raw[0] == '"' {
		s, err := strconv.Unquote(raw)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		return n, err == nil
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(raw, 64); err == nil && math.Abs(f) < 9e18 {
		return int64(f), true
	}
	return 0, false
}

// ------------------------------------------------------------------------------ HTTP/1.1 client

type head struct {
	status        int
	contentLength int64 // -1: none
	chunked       bool
	close         bool
	location      string
}

var errTooManyRedirects = errors.New("too many redirects")

func isRedirect(status int) bool {
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308
}

// exchange sends one request and, with follow, follows redirects as Locust's FastHttpSession
// (geventhttpclient) does: 301/302/303 become a GET without body, 307/308 resend as they were;
// the whole chain is one request with the final status and body. Returns the final status
// (0: no response), the final body's length, and the error. A final response whose body
// failed to arrive keeps its status with length 0, as FastHttpSession reports it.
func (u *user) exchange(method string, path, body []byte, ctJSON, follow, capture bool) (int, int64, error) {
	for redirects := 0; ; redirects++ {
		u.buildRequest(method, path, body, ctJSON)
		h, n, err := u.roundTrip(method == "HEAD", capture)
		followed := follow && isRedirect(h.status) && h.location != ""
		if err != nil {
			if h.status == 0 || followed {
				return 0, 0, err
			}
			return h.status, 0, err
		}
		if !followed {
			return h.status, n, nil
		}
		if redirects >= maxRedirects {
			return 0, 0, errTooManyRedirects
		}
		if path, err = u.resolve(path, h.location); err != nil {
			return 0, 0, err
		}
		if h.status != 307 && h.status != 308 && method != "HEAD" {
			method, body, ctJSON = "GET", nil, false
		}
	}
}

// resolve the Location of a redirect against the current path; same origin only.
func (u *user) resolve(current []byte, location string) ([]byte, error) {
	target := location
	if !(strings.HasPrefix(location, "/") && !strings.HasPrefix(location, "//")) {
		base, err := url.Parse("http://" + u.cfg.hostHeader + string(current))
		if err != nil {
			return nil, err
		}
		ref, err := url.Parse(location)
		if err != nil {
			return nil, fmt.Errorf("bad redirect location %q", location)
		}
		abs := base.ResolveReference(ref)
		if abs.Scheme != "http" || abs.Host != u.cfg.hostHeader {
			return nil, fmt.Errorf("redirect to another origin is not followed: %q", location)
		}
		target = abs.RequestURI()
	}
	for i := 0; i < len(target); i++ {
		if target[i] <= ' ' || target[i] == 0x7f {
			return nil, fmt.Errorf("bad redirect location %q", location)
		}
	}
	u.loc = append(u.loc[:0], target...)
	return u.loc, nil
}

func (u *user) buildRequest(method string, path, body []byte, ctJSON bool) {
	b := append(u.req[:0], method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, u.cfg.hostHeader...)
	b = append(b, "\r\nUser-Agent: loadgen\r\nAccept: */*\r\n"...)
	if !u.cfg.keepalive {
		b = append(b, "Connection: close\r\n"...)
	}
	if ctJSON {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	u.req = append(b, body...)
}

func (u *user) dial() error {
	d := net.Dialer{Timeout: u.cfg.timeout}
	c, err := d.Dial("tcp", u.cfg.addr)
	if err != nil {
		return err
	}
	u.conn = c
	if u.br == nil {
		u.br = bufio.NewReaderSize(c, readBufferSize)
	} else {
		u.br.Reset(c)
	}
	return nil
}

func (u *user) close() {
	if u.conn != nil {
		u.conn.Close()
		u.conn = nil
	}
}

// resent counts a request sent once more on a new connection, under the op in flight.
func (u *user) resent() {
	u.g.resent.Add(1)
	if o := u.inflightOp.Load(); o > 0 {
		u.g.resentOps[o-1].Add(1)
	}
}

// staleConn: the server closed a kept-alive connection before answering anything.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED)
}

// roundTrip writes u.req and reads one response, the body to its end. On a reused
// connection that the server had closed (nothing received), it redials and sends once more,
// as geventhttpclient does. The deadline LAB_REQUEST_TIMEOUT covers each round trip. Without
// keep-alive every round trip (each hop of a redirect too) dials a new connection and closes
// it after the response, as `oha --disable-keepalive` does.
func (u *user) roundTrip(isHead, capture bool) (head, int64, error) {
	for attempt := 0; ; attempt++ {
		reused := u.conn != nil
		if !reused {
			if err := u.dial(); err != nil {
				return head{}, 0, err
			}
		}
		u.conn.SetDeadline(time.Now().Add(u.cfg.timeout))
		if _, err := u.conn.Write(u.req); err != nil {
			u.close()
			if reused && attempt == 0 && staleConn(err) {
				u.resent()
				continue
			}
			return head{}, 0, err
		}
		h, got, err := u.readHead()
		if err != nil {
			u.close()
			if reused && attempt == 0 && !got && staleConn(err) {
				u.resent()
				continue
			}
			return head{}, 0, err
		}
		n, err := u.readBody(&h, isHead, capture)
		if err != nil || h.close || !u.cfg.keepalive {
			u.close()
		}
		if err != nil {
			n = 0
		}
		return h, n, err
	}
}

// readHead reads a status line and headers, skipping interim 1xx responses.
func (u *user) readHead() (h head, got bool, err error) {
	for {
		line, err := u.br.ReadSlice('\n')
		if len(line) > 0 {
			got = true
		}
		if err != nil {
			return head{}, got, err
		}
		status, http10, ok := parseStatusLine(trimCRLF(line))
		if !ok {
			return head{}, true, fmt.Errorf("malformed status line %q", trimCRLF(line))
		}
		h = head{status: status, contentLength: -1}
		keepAlive := false
		for {
			line, err = u.br.ReadSlice('\n')
			if err != nil {
				return head{}, true, err
			}
			line = trimCRLF(line)
			if len(line) == 0 {
				break
			}
			i := indexByte(line, ':')
			if i <= 0 {
				continue
			}
			name, value := line[:i], trimSpace(line[i+1:])
			switch {
			case equalFold(name, "content-length"):
				n, ok := parseDigits(value)
				if !ok {
					return head{}, true, fmt.Errorf("bad Content-Length %q", value)
				}
				h.contentLength = n
			case equalFold(name, "transfer-encoding"):
				h.chunked = hasToken(value, "chunked")
			case equalFold(name, "connection"):
				h.close = h.close || hasToken(value, "close")
				keepAlive = keepAlive || hasToken(value, "keep-alive")
			case equalFold(name, "location"):
				h.location = string(value)
			}
		}
		if http10 && !keepAlive {
			h.close = true
		}
		if status >= 100 && status < 200 && status != 101 {
			continue
		}
		return h, true, nil
	}
}

// readBody reads the body to its end and returns its length (captured into u.resp if asked).
func (u *user) readBody(h *head, isHead, capture bool) (int64, error) {
	u.resp = u.resp[:0]
	switch {
	case isHead || h.status == 204 || h.status == 304 || (h.status >= 100 && h.status < 200):
		return 0, nil
	case h.chunked:
		return u.readChunked(capture)
	case h.contentLength >= 0:
		return h.contentLength, u.consume(h.contentLength, capture)
	}
	h.close = true // no length: the body runs to the end of the connection
	var n int64
	for {
		if u.br.Buffered() == 0 {
			if _, err := u.br.Peek(1); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
		}
		k := u.br.Buffered()
		u.keep(k, capture)
		u.br.Discard(k)
		n += int64(k)
	}
}

func (u *user) keep(k int, capture bool) {
	if capture && len(u.resp) < captureLimit {
		b, _ := u.br.Peek(k)
		u.resp = append(u.resp, b...)
	}
}

// consume reads exactly n body bytes.
func (u *user) consume(n int64, capture bool) error {
	for n > 0 {
		k := u.br.Buffered()
		if k == 0 {
			if _, err := u.br.Peek(1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
			k = u.br.Buffered()
		}
		if int64(k) > n {
			k = int(n)
		}
		u.keep(k, capture)
		u.br.Discard(k)
		n -= int64(k)
	}
	return nil
}

func (u *user) readChunked(capture bool) (int64, error) {
	var total int64
	for {
		line, err := u.br.ReadSlice('\n')
		if err != nil {
			return total, unexpected(err)
		}
		line = trimCRLF(line)
		if i := indexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, ok := parseHex(trimSpace(line))
		if !ok {
			return total, fmt.Errorf("malformed chunk size %q", line)
		}
		if size == 0 {
			for { // trailers, up to the empty line
				line, err := u.br.ReadSlice('\n')
				if err != nil {
					return total, unexpected(err)
				}
				if len(trimCRLF(line)) == 0 {
					return total, nil
				}
			}
		}
		if err := u.consume(size, capture); err != nil {
			return total, err
		}
		total += size
		line, err = u.br.ReadSlice('\n')
		if err != nil {
			return total, unexpected(err)
		}
		if len(trimCRLF(line)) != 0 {
			return total, errors.New("malformed chunk end")
		}
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ------------------------------------------------------------------------------ byte helpers

func parseStatusLine(line []byte) (status int, http10, ok bool) {
	// HTTP/1.x SP 3DIGIT [SP reason]
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return 0, false, false
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		status = status*10 + int(c-'0')
	}
	return status, line[7] == '0', true
}

func trimCRLF(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFold compares ASCII case-insensitively; s is lower case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// hasToken: a comma-separated header value contains token (lower case).
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		i := indexByte(v, ',')
		part := v
		if i >= 0 {
			part, v = v[:i], v[i+1:]
		} else {
			v = nil
		}
		if equalFold(trimSpace(part), token) {
			return true
		}
	}
	return false
}

func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func parseHex(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n*16 + int64(c-'0')
		case 'a' <= lower(c) && lower(c) <= 'f':
			n = n*16 + int64(lower(c)-'a'+10)
		default:
			return 0, false
		}
	}
	return n, true
}
