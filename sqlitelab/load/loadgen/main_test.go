package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Specs as sqlitelab/load/scenarios.py compiles them: fixtures for the interpreter here
// (tests/test_scenarios.py checks that Locust and loadgen send the registry's own alike).
const helloSpec = `{"scenario": "hello", "max_id": 1000, "requests": [{"method": "GET", "name": "GET /hello",
 "path": [{"lit": "/hello"}], "body": null, "json": false, "follow": true, "share": null,
 "track_max_id": false, "redirects": false}]}`

func mixSpec(share float64, payload string) string {
	return fmt.Sprintf(`{"scenario": "mix", "max_id": 1000, "requests": [
 {"method": "POST", "name": "POST /items", "path": [{"lit": "/items"}], "body": [{"lit": %q}],
  "json": true, "follow": true, "share": %v, "track_max_id": true, "redirects": false},
 {"method": "GET", "name": "GET /items/{id}", "path": [{"lit": "/items/"}, {"int_to_max_id": 1}],
  "body": null, "json": false, "follow": true, "share": null, "track_max_id": false, "redirects": false}]}`,
		`{"payload": "`+payload+`"}`, share)
}

func specFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var helloOps = []string{"GET GET /hello", "POST POST /requests"}

const (
	opHello op = iota
	opRequests
)

func TestParseConfigErrors(t *testing.T) {
	hello := specFile(t, helloSpec)
	ok := []string{"-spec", hello, "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"}
	if _, err := parseConfig(ok, env(nil)); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	bad := map[string][]string{
		"spec":      {"-spec", "/nonexistent/spec.json", "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		"no spec":   {"-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		"bad spec":  {"-spec", specFile(t, `{"scenario": "x", "requests": [{"method": "GET", "name": "x", "path": [{"lit": "/", "int": [1, 2]}]}]}`), "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		"unknown":   {"-spec", specFile(t, `{"scenario": "x", "verbs": []}`), "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		"users":     {"-spec", hello, "-users", "0", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		"remote":    {"-spec", hello, "-users", "1", "-host", "http://10.0.0.1:8001", "-max-seconds", "5"},
		"lookalike": {"-spec", hello, "-users", "1", "-host", "http://localhost.example.com:80", "-max-seconds", "5"},
		"https":     {"-spec", hello, "-users", "1", "-host", "https://127.0.0.1:8001", "-max-seconds", "5"},
		"path":      {"-spec", hello, "-users", "1", "-host", "http://127.0.0.1:8001/x", "-max-seconds", "5"},
		"seconds":   {"-spec", hello, "-users", "1", "-host", "http://127.0.0.1:8001"},
		"flag":      {"-bogus"},
	}
	for name, args := range bad {
		if _, err := parseConfig(args, env(nil)); err == nil {
			t.Errorf("%s: accepted %v", name, args)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", name, err)
		}
	}
	if _, err := parseConfig(ok, env(map[string]string{"LAB_T0": "soon"})); err == nil {
		t.Error("LAB_T0=soon accepted")
	}
	for _, v := range []string{"yes", "true", "2", "01", "off"} {
		_, err := parseConfig(ok, env(map[string]string{"LAB_KEEPALIVE": v}))
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "LAB_KEEPALIVE") {
			t.Errorf("LAB_KEEPALIVE=%q: %v", v, err)
		}
	}
	for v, want := range map[string]bool{"": true, "1": true, " 1 ": true, "0": false} {
		cfg, err := parseConfig(ok, env(map[string]string{"LAB_KEEPALIVE": v}))
		if err != nil || cfg.keepalive != want {
			t.Errorf("LAB_KEEPALIVE=%q: keepalive %v, %v", v, cfg != nil && cfg.keepalive, err)
		}
	}
	for _, h := range []string{"http://localhost:1", "http://[::1]:1", "http://127.1.2.3:1/", "http://LOCALHOST:9"} {
		if _, _, err := parseHost(h); err != nil {
			t.Errorf("%s refused: %v", h, err)
		}
	}
}

func TestPiecesJoinAsLocustDoes(t *testing.T) {
	lit, lo := "/users/", int64(3)
	ps := []piece{{Lit: &lit}, {Int: []int64{5, 5}}, {IntToMaxID: &lo}}
	if got := string(appendPieces(nil, ps, 1)); got != "/users/53" { // max(lo, max id seen)
		t.Fatalf("got %q", got)
	}
	for i := 0; i < 200; i++ {
		got := string(appendPieces(nil, ps[2:], 4))
		if got != "3" && got != "4" {
			t.Fatalf("int_to_max_id 3..4 gave %q", got)
		}
	}
}

func TestFailureKind(t *testing.T) {
	cases := []struct {
		status int
		err    error
		want   string
	}{
		{200, nil, ""}, {302, nil, ""}, {503, nil, "busy"}, {500, nil, "server_error"},
		{404, nil, "client_error"}, {0, os.ErrDeadlineExceeded, "timeout"},
		{0, io.ErrUnexpectedEOF, "connection"}, {0, fmt.Errorf("read timed out"), "timeout"},
	}
	for _, c := range cases {
		if got := failureKind(c.status, c.err); got != c.want {
			t.Errorf("failureKind(%d, %v) = %q, want %q", c.status, c.err, got, c.want)
		}
	}
}

func TestRecorderWindowTargetOverran(t *testing.T) {
	stopped := false
	r := newRecorder(helloOps, 100, 200, 2, func() { stopped = true })
	ms := time.Millisecond
	r.record(opHello, 200, "", 99.9, 200*ms, 5)   // starts before T0: run only
	r.record(opHello, 200, "", 150, 1500*ms, 5)   // in window
	r.record(opHello, 503, "busy", 151, 10*ms, 7) // in window, reaches the target at 151.01
	r.record(opHello, 200, "", 151.005, 20*ms, 5) // after the target: overran (ends 151.025)
	if !stopped {
		t.Fatal("target did not stop the run")
	}
	inFlight := func() []int32 { return []int32{int32(opHello) + 1, 0} }
	out := r.freeze(300, []int64{int64(151.0 * 1e9), 0}, nil, inFlight) // one abandoned in flight
	if len(out.RunInflight) != 1 || out.RunInflight["GET GET /hello"] != 1 {
		t.Fatalf("run_inflight %v", out.RunInflight)
	}
	if out.Count != 2 || out.Bytes != 12 || out.SumUS != 1_510_000 {
		t.Fatalf("count %d bytes %d sum %d", out.Count, out.Bytes, out.SumUS)
	}
	if math.Abs(out.T1-151.01) > 1e-9 || out.Overran != 2 || out.Failures["busy"] != 1 || out.Status["503"] != 1 {
		t.Fatalf("t1 %v overran %d failures %v status %v", out.T1, out.Overran, out.Failures, out.Status)
	}
	if out.RunCounts["GET GET /hello 200"] != 3 || out.RunCounts["GET GET /hello 503"] != 1 {
		t.Fatalf("run_counts %v", out.RunCounts)
	}
	if len(out.HistValues) != 2 || out.HistValues[0] != [2]int64{10_000, 1} {
		t.Fatalf("hist_values %v", out.HistValues)
	}
	r.record(opHello, 200, "", 151, ms, 1) // after freeze: ignored
	if r.runCounts[runKey{opHello, 200}] != 3 {
		t.Fatal("recorded after freeze")
	}
}

// The whole run as hey counts it: every finished request, in the window or not, transport
// errors among the results but not in the mean or the maximum; abandoned requests nowhere.
func TestRecorderRunLevelAccounting(t *testing.T) {
	ms := time.Millisecond
	r := newRecorder(helloOps, 100, 200, 0, nil)
	r.record(opHello, 200, "", 99, 300*ms, 5)               // warm-up, ends inside the window
	r.record(opHello, 0, "connection", 99.5, 2*ms, 0)       // a transport error in the warm-up
	r.record(opHello, 500, "server_error", 150, 40*ms, 3)   // in the window; a 500 has a status
	r.record(opHello, 0, "timeout", 170, 35*time.Second, 0) // a timeout ending at 205, after T1
	r.record(opHello, 200, "", 199.9, 5*time.Second, 5)     // a 5-s stall over the close
	r.record(opRequests, 302, "", 201, ms, 10)              // started after the window
	out := r.freeze(300, []int64{int64(199.95 * 1e9)}, nil, func() []int32 { return []int32{int32(opHello) + 1} }) // one abandoned in flight
	if out.Count != 1 || out.SumUS != 40_000 || out.Overran != 3 {
		t.Fatalf("window: count %d sum %d overran %d", out.Count, out.SumUS, out.Overran)
	}
	if out.RunResults != 6 || out.RunOK != 4 || out.RunSumUS != 300_000+40_000+5_000_000+1_000 || out.RunMaxUS != 5_000_000 {
		t.Fatalf("run: results %d ok %d sum %d max %d", out.RunResults, out.RunOK, out.RunSumUS, out.RunMaxUS)
	}
	if out.RunFirstStart == nil || *out.RunFirstStart != 99 || math.Abs(*out.RunLastEnd-205) > 1e-9 {
		t.Fatalf("run: first %v last %v", out.RunFirstStart, out.RunLastEnd)
	}
	var all, withStatus int64 // the identity merge_level's callers rely on
	for k, n := range out.RunCounts {
		all += n
		if !strings.HasSuffix(k, " 0") {
			withStatus += n
		}
	}
	if all != out.RunResults || withStatus != out.RunOK {
		t.Fatalf("run_counts %v vs results %d ok %d", out.RunCounts, out.RunResults, out.RunOK)
	}
	r.record(opHello, 200, "", 250, ms, 1) // after freeze: ignored
	if r.run.results != 6 {
		t.Fatal("recorded after freeze")
	}
	data, _ := json.Marshal(newRecorder(helloOps, 1, 2, 0, nil).freeze(3, nil, nil, func() []int32 { return nil }))
	var empty map[string]any
	json.Unmarshal(data, &empty)
	if empty["run_first_start"] != nil || empty["run_last_end"] != nil || empty["run_results"] != 0.0 || empty["run_max_us"] != 0.0 {
		t.Fatalf("no request: %s", data)
	}
}

// testServer mimics the lab contract closely enough for the client: it counts connections,
// POST /requests, and requests that asked for Connection: close.
func testServer(t *testing.T) (*httptest.Server, *atomic.Int64, *atomic.Int64, *atomic.Int64) {
	var conns, posts, closes atomic.Int64
	var mu sync.Mutex
	next := int64(1000)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "Hello, World!") })
	mux.HandleFunc("POST /requests", func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Location", "/requests/7")
		w.WriteHeader(302)
		io.WriteString(w, "redirected")
	})
	mux.HandleFunc("GET /requests/{id}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1500))
	})
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"id": 1}`) })
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		var v struct{ Payload string }
		if json.NewDecoder(r.Body).Decode(&v) != nil || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		next++
		id := next
		mu.Unlock()
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"id": %d}`, id)
	})
	mux.HandleFunc("GET /chunked", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "abc")
		w.(http.Flusher).Flush()
		io.WriteString(w, "defg")
	})
	mux.HandleFunc("GET /close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Close {
			closes.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns, &posts, &closes
}

func testUser(t *testing.T, srv *httptest.Server) *user {
	cfg, err := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "1", "-host", srv.URL, "-max-seconds", "5"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	u := &user{g: newRun(cfg), cfg: cfg}
	t.Cleanup(u.close)
	return u
}

func TestClientKeepAliveRedirectChunkedClose(t *testing.T) {
	srv, conns, posts, closes := testServer(t)
	u := testUser(t, srv)
	for i := 0; i < 50; i++ {
		if s, n, err := u.exchange("GET", []byte("/hello"), nil, false, true, false); s != 200 || n != 13 || err != nil {
			t.Fatalf("hello: %d %d %v", s, n, err)
		}
	}
	if s, n, err := u.exchange("POST", []byte("/requests"), nil, false, true, false); s != 200 || n != 1500 || err != nil {
		t.Fatalf("followed: %d %d %v", s, n, err)
	}
	if s, n, err := u.exchange("POST", []byte("/requests"), nil, false, false, false); s != 302 || n != 10 || err != nil {
		t.Fatalf("not followed: %d %d %v", s, n, err)
	}
	if s, n, err := u.exchange("GET", []byte("/chunked"), nil, false, true, true); s != 200 || n != 7 || string(u.resp) != "abcdefg" || err != nil {
		t.Fatalf("chunked: %d %d %q %v", s, n, u.resp, err)
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d connections for one user, want 1", got)
	}
	if s, _, err := u.exchange("GET", []byte("/close"), nil, false, true, false); s != 200 || err != nil || u.conn != nil {
		t.Fatalf("close: %d %v open=%v", s, err, u.conn != nil)
	}
	if s, _, _ := u.exchange("GET", []byte("/nope"), nil, false, true, false); s != 404 {
		t.Fatalf("unknown route: %d", s)
	}
	if conns.Load() != 2 || posts.Load() != 2 || closes.Load() != 0 {
		t.Fatalf("connections %d posts %d Connection: close %d", conns.Load(), posts.Load(), closes.Load())
	}
}

// LAB_KEEPALIVE=0: every request, and every hop of a followed redirect, on a new connection
// that carries Connection: close and is closed after the response.
func TestClientNewConnectionPerRequest(t *testing.T) {
	srv, conns, posts, closes := testServer(t)
	cfg, err := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "1", "-host", srv.URL, "-max-seconds", "5"},
		env(map[string]string{"LAB_KEEPALIVE": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	u := &user{g: newRun(cfg), cfg: cfg}
	defer u.close()
	for i := 0; i < 20; i++ {
		if s, n, err := u.exchange("GET", []byte("/hello"), nil, false, true, false); s != 200 || n != 13 || err != nil || u.conn != nil {
			t.Fatalf("hello %d: %d %d %v open=%v", i, s, n, err, u.conn != nil)
		}
	}
	if s, n, err := u.exchange("POST", []byte("/requests"), nil, false, true, false); s != 200 || n != 1500 || err != nil {
		t.Fatalf("followed: %d %d %v", s, n, err)
	}
	if conns.Load() != 22 || closes.Load() != 22 || posts.Load() != 1 || u.g.resent.Load() != 0 {
		t.Fatalf("connections %d Connection: close %d posts %d resent %d", conns.Load(), closes.Load(), posts.Load(), u.g.resent.Load())
	}
}

// A server that ignores Connection: close and keeps every connection open: without
// keep-alive the client still closes each after its response; with it, one connection.
func TestClientClosesWhatTheServerKeepsOpen(t *testing.T) {
	for _, keepalive := range []string{"0", "1"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var accepted, served, askedClose, closedByClient atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				go func(c net.Conn) {
					defer c.Close()
					br := bufio.NewReader(c)
					for {
						req, err := http.ReadRequest(br)
						if err != nil {
							if errors.Is(err, io.EOF) {
								closedByClient.Add(1)
							}
							return
						}
						served.Add(1)
						if req.Close {
							askedClose.Add(1)
						}
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					}
				}(c)
			}
		}()
		cfg, _ := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "1", "-host", "http://" + ln.Addr().String(), "-max-seconds", "5"},
			env(map[string]string{"LAB_KEEPALIVE": keepalive}))
		u := &user{g: newRun(cfg), cfg: cfg}
		for i := 0; i < 5; i++ {
			if s, n, err := u.exchange("GET", []byte("/hello"), nil, false, true, false); s != 200 || n != 2 || err != nil {
				t.Fatalf("keepalive=%s request %d: %d %d %v", keepalive, i, s, n, err)
			}
		}
		want, wantClose := int64(5), int64(5) // connections, each closed by the client after its response
		if keepalive == "1" {
			want, wantClose = 1, 0
			u.close()
		}
		for deadline := time.Now().Add(5 * time.Second); closedByClient.Load() < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		ln.Close()
		if accepted.Load() != want || closedByClient.Load() != want || served.Load() != 5 || askedClose.Load() != wantClose {
			t.Fatalf("keepalive=%s: accepted %d closed by the client %d served %d Connection: close %d",
				keepalive, accepted.Load(), closedByClient.Load(), served.Load(), askedClose.Load())
		}
	}
}

// A server that closes every connection after one response without saying so: the next
// request on the kept-alive connection finds it closed and is sent again on a new one.
func TestStaleConnectionRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				served.Add(1)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}(c)
		}
	}()
	cfg, _ := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "1", "-host", "http://" + ln.Addr().String(), "-max-seconds", "5"}, env(nil))
	u := &user{g: newRun(cfg), cfg: cfg}
	defer u.close()
	for i := 0; i < 5; i++ {
		time.Sleep(20 * time.Millisecond) // let the server's close arrive
		u.inflightOp.Store(1)             // as once() marks its op in flight
		if s, n, err := u.exchange("GET", []byte("/hello"), nil, false, true, false); s != 200 || n != 2 || err != nil {
			t.Fatalf("request %d: %d %d %v", i, s, n, err)
		}
		u.inflightOp.Store(0)
	}
	if served.Load() != 5 {
		t.Fatalf("served %d", served.Load())
	}
	// every request after the first went out on the closed connection, then again: counted
	// by op, so that a write sent twice is an unknown outcome to the audit
	if u.g.resent.Load() != 4 || u.g.resentOps[0].Load() != 4 {
		t.Fatalf("resent %d, of op 0 %d", u.g.resent.Load(), u.g.resentOps[0].Load())
	}
}

func TestExecuteMixWritesTheFile(t *testing.T) {
	srv, _, posts, _ := testServer(t)
	dir := t.TempDir()
	now := float64(time.Now().UnixNano()) / 1e9
	cfg, err := parseConfig([]string{"-spec", specFile(t, mixSpec(0.5, strings.Repeat("p", 100))), "-users", "4", "-host", srv.URL, "-max-seconds", "10"},
		env(map[string]string{"LAB_T0": fmt.Sprint(now + 0.2), "LAB_T1": fmt.Sprint(now + 0.7),
			"LAB_OUT_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := execute(cfg, nil)
	path, err := writeOutput(dir, out)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pid", "t0", "t1", "target", "count", "sum_us", "bytes", "overran",
		"max_overrun_s", "first_start", "last_end", "spawned_at", "status", "failures", "run_counts",
		"locust_window", "hist", "hist_values", "generator"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if out.Count == 0 || out.Status["200"] == 0 || out.Status["201"] == 0 || len(out.Failures) != 0 {
		t.Fatalf("count %d status %v failures %v", out.Count, out.Status, out.Failures)
	}
	if out.RunCounts["POST POST /items 201"] == 0 || out.RunCounts["GET GET /items/{id} 200"] == 0 || posts.Load() != 0 {
		t.Fatalf("run_counts %v", out.RunCounts)
	}
	var n int64
	for _, hv := range out.HistValues {
		n += hv[1]
	}
	if n != out.Count || *out.FirstStart < cfg.t0 || *out.LastEnd > cfg.t1 {
		t.Fatalf("hist %d count %d first %v last %v", n, out.Count, *out.FirstStart, *out.LastEnd)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*")); len(matches) != 1 {
		t.Fatalf("files %v", matches)
	}
	for _, k := range []string{"run_first_start", "run_last_end", "run_results", "run_ok", "run_sum_us", "run_max_us"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	var all int64
	for _, n := range out.RunCounts {
		all += n
	}
	maxWindow := out.HistValues[len(out.HistValues)-1][0]
	if out.RunResults != all || out.RunOK != all || out.RunResults <= out.Count || out.RunSumUS <= out.SumUS ||
		out.RunMaxUS < maxWindow || *out.RunFirstStart > *out.FirstStart || *out.RunLastEnd < *out.LastEnd {
		t.Fatalf("run: results %d ok %d (run_counts %d, window %d) sum %d max %d (window %d)",
			out.RunResults, out.RunOK, all, out.Count, out.RunSumUS, out.RunMaxUS, maxWindow)
	}
}

// A whole run without keep-alive: exactly one connection per finished request.
func TestExecuteWithoutKeepAliveOneConnectionPerRequest(t *testing.T) {
	srv, conns, _, closes := testServer(t)
	cfg, _ := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "4", "-host", srv.URL, "-max-seconds", "10"},
		env(map[string]string{"LAB_TARGET": "300", "LAB_KEEPALIVE": "0"}))
	out, _ := execute(cfg, nil)
	if out.Count != 300 || out.RunResults < 300 || out.RunOK != out.RunResults || out.Resent != 0 {
		t.Fatalf("count %d run results %d ok %d resent %d", out.Count, out.RunResults, out.RunOK, out.Resent)
	}
	if conns.Load() != out.RunResults || closes.Load() != out.RunResults {
		t.Fatalf("%d connections, %d Connection: close for %d requests", conns.Load(), closes.Load(), out.RunResults)
	}
}

// Started after its window closed: no user runs, nothing reaches the server, and the file
// says when it started.
func TestExecuteStartedAfterItsWindowSendsNothing(t *testing.T) {
	srv, conns, _, _ := testServer(t)
	t1 := epoch(time.Now()) - 0.5
	cfg, err := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "4", "-host", srv.URL, "-max-seconds", "10"},
		env(map[string]string{"LAB_T0": fmt.Sprint(t1 - 1), "LAB_T1": fmt.Sprint(t1)}))
	if err != nil {
		t.Fatal(err)
	}
	out, finished := execute(cfg, nil)
	if !finished || out.Count != 0 || out.RunResults != 0 || conns.Load() != 0 || out.SpawnedAt == nil || *out.SpawnedAt < t1 {
		t.Fatalf("finished %v count %d run results %d connections %d spawned %v (t1 %v)",
			finished, out.Count, out.RunResults, conns.Load(), out.SpawnedAt, t1)
	}
}

func TestExecuteExactTarget(t *testing.T) {
	srv, _, _, _ := testServer(t)
	cfg, _ := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "8", "-host", srv.URL, "-max-seconds", "10"},
		env(map[string]string{"LAB_TARGET": "500"}))
	out, _ := execute(cfg, nil)
	if out.Count != 500 || out.Status["200"] != 500 || out.T1 < *out.FirstStart || out.T1 > 1e11 {
		t.Fatalf("count %d status %v t1 %v", out.Count, out.Status, out.T1)
	}
}

func TestOpenLoopConfigErrors(t *testing.T) {
	hello := specFile(t, helloSpec)
	ok := []string{"-spec", hello, "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"}
	bad := []map[string]string{
		{"LAB_ARRIVAL_RATE": "-1"}, {"LAB_ARRIVAL_RATE": "NaN"}, {"LAB_ARRIVAL_RATE": "Inf"},
		{"LAB_ARRIVAL_RATE": "fast"}, {"LAB_ARRIVAL_RATE": "100", "LAB_ARRIVALS": "bursty"},
		{"LAB_ARRIVAL_RATE": "100", "LAB_ARRIVAL_SEED": "x"},
		{"LAB_ARRIVAL_RATE": "100", "LAB_RATE_PER_USER": "5"}, {"LAB_ARRIVAL_RATE": "100", "LAB_TARGET": "50"},
	}
	for _, e := range bad {
		if _, err := parseConfig(ok, env(e)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v", e, err)
		}
	}
	cfg, err := parseConfig(ok, env(map[string]string{"LAB_ARRIVAL_RATE": "250", "LAB_ARRIVALS": "poisson", "LAB_ARRIVAL_SEED": "7"}))
	if err != nil || cfg.arrivalRate != 250 || !cfg.poisson || !cfg.seeded || cfg.seed != 7 {
		t.Fatalf("valid open loop refused or misread: %+v %v", cfg, err)
	}
}

func TestScheduleConstantAndPoisson(t *testing.T) {
	c := newSchedule(&config{arrivalRate: 100, t0: 1000.5, t1: 1001.5})
	for k := 0; k < 5; k++ {
		if got, want := c.take(1000), 1000+float64(k)/100; math.Abs(got-want) > 1e-9 {
			t.Fatalf("slot %d due %v, want %v", k, got, want)
		}
	}
	// slots 5..149 untaken; those due before 1001.5 - lateTolerance are the backlog
	if n := c.untaken(1001.5); n != 145 {
		t.Errorf("untaken %d, want 145", n)
	}
	if c.offered != 100 { // due in [1000.5, 1001.5)
		t.Errorf("offered %d, want 100", c.offered)
	}
	p := newSchedule(&config{arrivalRate: 1000, poisson: true, seeded: true, seed: 3, t0: 0, t1: 1e12})
	first := p.take(0)
	var last float64
	for i := 0; i < 20000; i++ {
		last = p.take(0)
	}
	if mean := (last - first) / 20000; math.Abs(mean-0.001) > 0.00005 {
		t.Errorf("poisson mean gap %v, want 0.001", mean)
	}
	a := newSchedule(&config{arrivalRate: 1000, poisson: true, seeded: true, seed: 3, t1: 1e12})
	b := newSchedule(&config{arrivalRate: 1000, poisson: true, seeded: true, seed: 3, t1: 1e12})
	for i := 0; i < 100; i++ {
		if x, y := a.take(0), b.take(0); x != y {
			t.Fatalf("the same seed gives another schedule at slot %d: %v vs %v", i, x, y)
		}
	}
}

func TestOpenLoopQueuesBehindASlowServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	now := epoch(time.Now())
	args := []string{"-spec", specFile(t, helloSpec), "-users", "2", "-host", srv.URL, "-max-seconds", "10"}
	cfg, err := parseConfig(args, env(map[string]string{"LAB_ARRIVAL_RATE": "400", "LAB_T0": fmt.Sprint(now + 0.2),
		"LAB_T1": fmt.Sprint(now + 1.7), "LAB_OUT_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := execute(cfg, make(chan os.Signal))
	if !out.OpenLoop || out.Backlog == 0 || out.Late == 0 || out.Offered < 550 || out.Offered > 610 {
		t.Errorf("open %v backlog %d late %d offered %d", out.OpenLoop, out.Backlog, out.Late, out.Offered)
	}
	var n int64
	for _, s := range out.Seconds {
		n += s.N
	}
	if n != out.Count || len(out.Seconds) < 1 {
		t.Errorf("seconds hold %d requests, the window %d", n, out.Count)
	}
	// from due time, the first second's median is far below the last's: the queue grew
	p50 := func(hv [][2]int64) int64 {
		var total, seen int64
		for _, v := range hv {
			total += v[1]
		}
		for _, v := range hv {
			if seen += v[1]; 2*seen >= total {
				return v[0]
			}
		}
		return 0
	}
	firstP50, lastP50 := p50(out.Seconds[0].HistValues), p50(out.Seconds[len(out.Seconds)-1].HistValues)
	if lastP50 < firstP50+300_000 {
		t.Errorf("p50 from due time %d µs then %d µs: the queue did not grow", firstP50, lastP50)
	}
}

// A session: two levels of one process, each its own file, users and connections, the second
// started by a command once the first's file is written; then quit.
func TestSessionRunsLevelAfterLevel(t *testing.T) {
	srv, conns, _, _ := testServer(t)
	dir, session := t.TempDir(), t.TempDir()
	now := float64(time.Now().UnixNano()) / 1e9
	cfg, err := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "4", "-host", srv.URL, "-max-seconds", "10"},
		env(map[string]string{"LAB_T0": fmt.Sprint(now + 0.1), "LAB_T1": fmt.Sprint(now + 0.4),
			"LAB_OUT_DIR": filepath.Join(dir, "l1"), "LAB_SESSION": session}))
	if err != nil {
		t.Fatal(err)
	}
	code := make(chan int, 1)
	go func() { code <- levels(cfg, nil) }()
	first := awaitFile(t, filepath.Join(dir, "l1", fmt.Sprintf("proc-%d.json", os.Getpid())))
	if conns.Load() != 4 {
		t.Fatalf("level 1: %d connections for 4 users", conns.Load())
	}
	now = float64(time.Now().UnixNano()) / 1e9
	writeCommand(t, session, 1, fmt.Sprintf(`{"users": 2, "out_dir": %q, "t0": %v, "t1": %v, "max_seconds": 10}`,
		filepath.Join(dir, "l2"), now+0.1, now+0.4))
	second := awaitFile(t, filepath.Join(dir, "l2", fmt.Sprintf("proc-%d.json", os.Getpid())))
	writeCommand(t, session, 2, `{"quit": true}`)
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not quit")
	}
	if first.Count == 0 || second.Count == 0 || *second.RunFirstStart <= *first.RunLastEnd {
		t.Fatalf("level 1: %d requests, last end %v; level 2: %d, first start %v",
			first.Count, *first.RunLastEnd, second.Count, *second.RunFirstStart)
	}
	if conns.Load() != 6 { // each level's users dial their own
		t.Fatalf("%d connections for 4 then 2 users", conns.Load())
	}
}

func TestSessionCommandsAreChecked(t *testing.T) {
	cfg := &config{users: 4, outDir: "a", t0: 1, t1: 2, maxSeconds: 10}
	if next, err := nextLevel(cfg, []byte(`{"quit": true}`)); next != nil || err != nil {
		t.Fatalf("quit: %v %v", next, err)
	}
	next, err := nextLevel(cfg, []byte(`{"users": 2, "out_dir": "b", "t0": 5, "t1": 6, "max_seconds": 3}`))
	if err != nil || next.users != 2 || next.outDir != "b" || next.t0 != 5 || next.t1 != 6 || next.maxSeconds != 3 || cfg.users != 4 {
		t.Fatalf("level: %+v %v (was %+v)", next, err, cfg)
	}
	for _, bad := range []string{`{"users": 0, "out_dir": "b", "t0": 5, "t1": 6, "max_seconds": 3}`,
		`{"users": 2, "t0": 5, "t1": 6, "max_seconds": 3}`, `{"users": 2, "out_dir": "b", "t0": 6, "t1": 5, "max_seconds": 3}`,
		`{"users": 2, "out_dir": "b", "t0": 5, "t1": 6, "max_seconds": 0}`, `{"users": 2, "rate": 1}`, `not json`} {
		if _, err := nextLevel(cfg, []byte(bad)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := parseConfig([]string{"-spec", specFile(t, helloSpec), "-users", "2", "-host", "http://127.0.0.1:8001", "-max-seconds", "5"},
		env(map[string]string{"LAB_SESSION": t.TempDir(), "LAB_TARGET": "100"})); err == nil {
		t.Error("a session with LAB_TARGET accepted")
	}
}

func awaitFile(t *testing.T, path string) *output {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(path); err == nil {
			var out output
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatal(err)
			}
			return &out
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s", path)
	return nil
}

func writeCommand(t *testing.T, session string, n int, text string) {
	t.Helper()
	tmp := filepath.Join(session, fmt.Sprintf(".command-%d.tmp", n))
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(session, fmt.Sprintf("command-%d.json", n))); err != nil {
		t.Fatal(err)
	}
}
