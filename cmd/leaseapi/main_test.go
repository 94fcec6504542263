package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// waitTimeout bounds every wait of these tests (start-up with migrations,
// shutdown); it is a ceiling, never a sleep.
const waitTimeout = 30 * time.Second

// logWatcher is the stderr of a server under test: it keeps every line and
// hands the address of the "listening" line to addr, so tests wait on a
// channel instead of polling the log.
type logWatcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	part  []byte
	addr  chan string
	found bool
}

func newLogWatcher() *logWatcher {
	return &logWatcher{addr: make(chan string, 1)}
}

func (w *logWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		line := w.part[:i]
		w.part = w.part[i+1:]
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if !w.found && json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
			w.found = true
			w.addr <- rec.Addr
		}
	}
	return len(p), nil
}

func (w *logWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// records returns the JSON log records with message msg.
func (w *logWatcher) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(w.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// server is a leaseapi started by startServer.
type server struct {
	url  string
	logs *logWatcher
	stop func() error // cancels the context and returns what run/serve returned
}

// startServer runs start (run or serve) until the test stops it, and waits
// for its "listening" log line.
func startServer(t testing.TB, start func(ctx context.Context, stderr io.Writer) error) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs := newLogWatcher()
	done := make(chan error, 1)
	go func() { done <- start(ctx, logs) }()

	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(waitTimeout):
				stopErr = fmt.Errorf("server did not stop within %s", waitTimeout)
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })

	select {
	case addr := <-logs.addr:
		return &server{url: "http://" + addr, logs: logs, stop: stop}
	case err := <-done:
		t.Fatalf("server returned before listening: %v\nlogs:\n%s", err, logs)
	case <-time.After(waitTimeout):
		t.Fatalf("server did not log \"listening\" within %s\nlogs:\n%s", waitTimeout, logs)
	}
	return nil
}

// serveConfig is a configuration for tests: an ephemeral port on the
// loopback address and the embedded store in the test's directory.
func serveConfig(t testing.TB) Config {
	cfg := validConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.SQLitePath = filepath.Join(t.TempDir(), "leaseapi.db")
	cfg.LogLevel = "debug"
	// These tests are not about deadlines: a loaded CI machine must not turn
	// a slow answer into a 503.
	cfg.RequestTimeout = waitTimeout
	return cfg
}

// startServe runs serve with cfg.
func startServe(t testing.TB, cfg Config) *server {
	t.Helper()
	return startServer(t, func(ctx context.Context, stderr io.Writer) error {
		logger, err := newLogger(cfg, stderr)
		if err != nil {
			return err
		}
		return serve(ctx, cfg, logger)
	})
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

func do(t *testing.T, method, url, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	out := response{status: resp.StatusCode, header: resp.Header}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, url, raw, err)
		}
	}
	return out
}

// jobSeq makes job ids unique: tests share one database per package (and
// -count runs again on it), so they isolate by job id.
var jobSeq atomic.Int64

// exercise walks a server through the operations endpoints and the life of
// one lease of a new job (exerciseLease), then reads /metrics. It returns
// the job's URL.
func exercise(t *testing.T, base string) string {
	t.Helper()
	job := exerciseLease(t, base)
	if got := do(t, http.MethodGet, base+"/metrics", ""); got.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d, want 200", got.status)
	}
	return job
}

// exerciseLease walks a server through /healthz, /readyz and the life of
// one lease of a new job: acquire, a second replica refused, heartbeat,
// release, takeover. It returns the job's URL.
func exerciseLease(t *testing.T, base string) string {
	t.Helper()
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := do(t, http.MethodGet, base+path, ""); got.status != http.StatusOK {
			t.Fatalf("GET %s = %d %v, want 200", path, got.status, got.body)
		}
	}
	job := fmt.Sprintf("%s/leases/job-%d-%d", base, time.Now().UnixNano(), jobSeq.Add(1))
	got := do(t, http.MethodPost, job+"/acquire", `{"owner":"replica-a","ttlMs":30000}`)
	if got.status != http.StatusOK || got.body["token"] != 1.0 || got.body["state"] != "held" {
		t.Fatalf("acquire = %d %v, want 200 held with token 1", got.status, got.body)
	}
	got = do(t, http.MethodPost, job+"/acquire", `{"owner":"replica-b"}`)
	if got.status != http.StatusConflict || got.body["code"] != "lease_held" || got.header.Get("Retry-After") == "" {
		t.Fatalf("acquire by another replica = %d %v, want 409 lease_held with Retry-After", got.status, got.body)
	}
	got = do(t, http.MethodPost, job+"/heartbeat", `{"owner":"replica-a","token":1}`)
	if got.status != http.StatusOK {
		t.Fatalf("heartbeat = %d %v, want 200", got.status, got.body)
	}
	got = do(t, http.MethodPost, job+"/release", `{"owner":"replica-a","token":1,"outcome":"succeeded"}`)
	if got.status != http.StatusOK || got.body["state"] != "released" {
		t.Fatalf("release = %d %v, want 200 released", got.status, got.body)
	}
	got = do(t, http.MethodPost, job+"/acquire", `{"owner":"replica-b"}`)
	if got.status != http.StatusOK || got.body["token"] != 2.0 || got.body["owner"] != "replica-b" {
		t.Fatalf("takeover = %d %v, want 200 for replica-b with token 2", got.status, got.body)
	}
	return job
}

// exerciseGroup creates a concurrency group of limit 1 on the server at
// base, grants a job in it and has another job refused group_full, and
// returns the group's name.
func exerciseGroup(t *testing.T, base string) string {
	t.Helper()
	group := fmt.Sprintf("group-%d-%d", time.Now().UnixNano(), jobSeq.Add(1))
	if got := do(t, http.MethodPut, base+"/groups/"+group, `{"limit":1}`); got.status != http.StatusOK || got.body["limit"] != 1.0 {
		t.Fatalf("PUT /groups/%s = %d %v, want 200 with limit 1", group, got.status, got.body)
	}
	body := `{"owner":"replica-a","ttlMs":30000,"group":"` + group + `"}`
	if got := do(t, http.MethodPost, base+"/leases/"+group+"-a/acquire", body); got.status != http.StatusOK || got.body["slot"] != 1.0 {
		t.Fatalf("acquire in the group = %d %v, want 200 in slot 1", got.status, got.body)
	}
	got := do(t, http.MethodPost, base+"/leases/"+group+"-b/acquire", body)
	if got.status != http.StatusConflict || got.body["code"] != "group_full" || got.header.Get("Retry-After") == "" {
		t.Fatalf("acquire in the full group = %d %v, want 409 group_full with Retry-After", got.status, got.body)
	}
	return group
}

// setEnv replaces the LEASEAPI_ environment for one test.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// Tests that set the environment cannot be parallel; the rest are.

func TestRunServesUntilCancelled(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "leaseapi.db")
	setEnv(t, map[string]string{
		"LEASEAPI_ADDR":            "127.0.0.1:0",
		"LEASEAPI_SQLITE_PATH":     dbPath,
		"LEASEAPI_REQUEST_TIMEOUT": waitTimeout.String(),
	})
	srv := startServer(t, func(ctx context.Context, stderr io.Writer) error {
		return run(ctx, nil, io.Discard, stderr)
	})
	exercise(t, srv.url)

	if err := srv.stop(); err != nil {
		t.Fatalf("run() after cancel = %v, want nil\nlogs:\n%s", err, srv.logs)
	}
	if len(srv.logs.records(t, "stopped")) != 1 {
		t.Errorf("no \"stopped\" log line after shutdown\nlogs:\n%s", srv.logs)
	}
	if _, err := os.Stat(dbPath); err != nil {
		t.Errorf("embedded store file: %v", err)
	}
	store := srv.logs.records(t, "using the embedded SQLite store")
	if len(store) != 1 || !strings.Contains(fmt.Sprint(store[0]["note"]), "single leaseapi instance") {
		t.Errorf("store log = %v, want one record naming the embedded store and its single-instance limit", store)
	}
}

func TestRunBadConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{
			name: "CrossField",
			env:  map[string]string{"LEASEAPI_MIN_TTL": "5s", "LEASEAPI_DEFAULT_TTL": "1s"},
			want: "invalid configuration: LEASEAPI_MIN_TTL (5s) must not exceed LEASEAPI_DEFAULT_TTL (1s)",
		},
		{
			name: "Unparsable",
			env:  map[string]string{"LEASEAPI_REQUEST_TIMEOUT": "soon"},
			want: `invalid configuration: LEASEAPI_REQUEST_TIMEOUT: cannot parse "soon"`,
		},
		{
			name: "LogFormat",
			env:  map[string]string{"LEASEAPI_LOG_FORMAT": "yaml"},
			want: "LEASEAPI_LOG_FORMAT",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), nil, &stdout, &stderr)
			if err == nil {
				t.Fatalf("run() = nil, want an error containing %q", tt.want)
			}
			if got := oneLine(err.Error()); !strings.Contains(got, tt.want) {
				t.Errorf("run() = %q, want it to contain %q", got, tt.want)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("run() wrote %q and %q before failing, want nothing (main prints the one line)", stdout.String(), stderr.String())
			}
		})
	}
}

func TestRunMigrate(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "leaseapi.db")
	setEnv(t, map[string]string{"LEASEAPI_SQLITE_PATH": dbPath})
	for range 2 { // a second run finds nothing to do
		var stderr bytes.Buffer
		if err := run(t.Context(), []string{"migrate"}, io.Discard, &stderr); err != nil {
			t.Fatalf("run(migrate) = %v\nlogs:\n%s", err, stderr.String())
		}
		if !strings.Contains(stderr.String(), "migrations are up to date") {
			t.Errorf("run(migrate) logs = %q, want \"migrations are up to date\"", stderr.String())
		}
	}
	if _, err := os.Stat(dbPath); err != nil {
		t.Errorf("migrate did not create the embedded store: %v", err)
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("run(%q) = %v, want nil", args, err)
			}
			help := stdout.String()
			for _, k := range settingKeys(t) {
				if !strings.Contains(help, k) {
					t.Errorf("run(%q) help does not list %s:\n%s", args, k, help)
				}
			}
			for _, want := range []string{"leaseapi migrate", "30s", "single instance"} {
				if !strings.Contains(help, want) {
					t.Errorf("run(%q) help does not contain %q", args, want)
				}
			}
			if stderr.Len() != 0 {
				t.Errorf("run(%q) wrote to stderr: %q", args, stderr.String())
			}
		})
	}
}

// TestRunVersion: `leaseapi version` and `--version` print the build's
// version, commit, commit time and Go, and need no configuration.
func TestRunVersion(t *testing.T) {
	setEnv(t, map[string]string{"LEASEAPI_DEFAULT_TTL": "not a duration"})
	want := version.Get().String()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), args, &stdout, &stderr); err != nil {
			t.Fatalf("run(%q) = %v, want nil", args, err)
		}
		if stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("run(%q) wrote %q and %q, want %q and nothing", args, stdout.String(), stderr.String(), want)
		}
	}
}

func TestRunBadArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"server"}, `unknown command "server" (see leaseapi -h)`},
		{[]string{"-port", "80"}, "flag provided but not defined: -port (see leaseapi -h)"},
		{[]string{"migrate", "now"}, `migrate takes no arguments, got ["now"]`},
		{[]string{"--version", "migrate"}, `--version takes no command, got ["migrate"]`},
		{[]string{"upgrade"}, `upgrade needs status or finalize, got []`},
		{[]string{"upgrade", "now"}, `upgrade needs status or finalize, got ["now"]`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("run(%q) wrote %q and %q, want nothing", tt.args, stdout.String(), stderr.String())
			}
		})
	}
}

func TestServeEmbedded(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	srv := startServe(t, cfg)
	job := strings.TrimPrefix(exercise(t, srv.url), srv.url)
	if got := srv.logs.records(t, "no credential or token exists: the API answers only requests from this host to localhost until a credential is created (leaseapi credentials create); set LEASEAPI_OPEN=true to serve every peer without one"); len(got) != 1 || got[0]["level"] != "WARN" {
		t.Errorf("open-API warning = %v, want one WARN record", got)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("serve() after cancel = %v, want nil", err)
	}

	// Leases survive a restart on the same file.
	srv = startServe(t, cfg)
	got := do(t, http.MethodGet, srv.url+job, "")
	if got.status != http.StatusOK || got.body["token"] != 2.0 || got.body["owner"] != "replica-b" {
		t.Fatalf("after restart GET lease = %d %v, want replica-b's lease with token 2", got.status, got.body)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("serve() after cancel = %v, want nil", err)
	}
}

// TestServeEmbeddedSecondInstanceRefused: the embedded store serves a single
// instance; a second one on the same file stops with an error instead of
// double-granting.
func TestServeEmbeddedSecondInstanceRefused(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	srv := startServe(t, cfg)

	// Bounded: were the second start to succeed, it would serve until then.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	err := serve(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("second serve() on the same SQLite file = nil, want an error")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("second serve() error = %q, want one line", err)
	}
	t.Logf("second instance: %v", err)

	exercise(t, srv.url) // the first one is unaffected
	if err := srv.stop(); err != nil {
		t.Fatalf("serve() after cancel = %v, want nil", err)
	}
}

func TestServeWithTokens(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.APITokens = []string{"api-secret"}
	cfg.AdminTokens = []string{"admin-secret"}
	srv := startServe(t, cfg)

	got := do(t, http.MethodGet, srv.url+"/leases", "")
	if got.status != http.StatusUnauthorized {
		t.Errorf("GET /leases without a token = %d, want 401", got.status)
	}
	if got := do(t, http.MethodGet, srv.url+"/healthz", ""); got.status != http.StatusOK {
		t.Errorf("GET /healthz without a token = %d, want 200", got.status)
	}
	if strings.Contains(srv.logs.String(), "api-secret") || strings.Contains(srv.logs.String(), "admin-secret") {
		t.Errorf("the log contains a token:\n%s", srv.logs)
	}
	if strings.Contains(srv.logs.String(), "no API or admin tokens configured") {
		t.Errorf("open-API warning logged although tokens are set")
	}
}

func TestServeListenError(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	srv := startServe(t, cfg)
	busy := cfg
	busy.Addr = strings.TrimPrefix(srv.url, "http://")
	busy.SQLitePath = filepath.Join(t.TempDir(), "other.db")
	err := serve(t.Context(), busy, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr) {
		t.Errorf("serve() on a busy address = %v, want a listen error naming it", err)
	}
}

func TestServePostgres(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	cfg.DatabaseURL = repotest.PostgresURL(t)
	srv := startServe(t, cfg)
	exercise(t, srv.url)

	pg := srv.logs.records(t, "using the Postgres store")
	if len(pg) != 1 {
		t.Fatalf("Postgres store log = %v, want one record", pg)
	}
	if db := fmt.Sprint(pg[0]["database"]); strings.Contains(db, "@") || strings.Contains(db, "?") {
		t.Errorf("logged database %q, want host and name only", db)
	}
	if got := srv.logs.records(t, "using the embedded SQLite store"); len(got) != 0 {
		t.Errorf("embedded store logged with DATABASE_URL set: %v", got)
	}
	if got := srv.logs.String(); strings.Contains(got, "synchronous_commit is not on") {
		t.Errorf("synchronous_commit warning on a default server:\n%s", got)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("serve() after cancel = %v, want nil", err)
	}
}

func TestServePostgresSynchronousCommit(t *testing.T) {
	t.Parallel()
	const warning = "synchronous_commit is not on: a database crash or failover can lose acknowledged grants and fencing tokens; set synchronous_commit = on"
	for _, tt := range []struct {
		setting string
		warn    bool
	}{
		{"off", true},
		{"local", true},
		{"remote_write", true},
		{"on", false},
		{"remote_apply", false},
	} {
		t.Run(tt.setting, func(t *testing.T) {
			t.Parallel()
			dsn, err := url.Parse(repotest.PostgresURL(t))
			if err != nil {
				t.Fatal(err)
			}
			q := dsn.Query()
			q.Set("options", "-c synchronous_commit="+tt.setting) // this session's setting only
			dsn.RawQuery = q.Encode()

			cfg := serveConfig(t)
			cfg.DatabaseURL = dsn.String()
			srv := startServe(t, cfg)
			got := srv.logs.records(t, warning)
			switch {
			case tt.warn && (len(got) != 1 || got[0]["level"] != "WARN" || got[0]["synchronous_commit"] != tt.setting):
				t.Errorf("synchronous_commit warning = %v, want one WARN with synchronous_commit=%s\nlogs:\n%s", got, tt.setting, srv.logs)
			case !tt.warn && len(got) != 0:
				t.Errorf("synchronous_commit=%s logged %v, want no warning", tt.setting, got)
			}
		})
	}
}

func TestServePostgresUnreachable(t *testing.T) {
	t.Parallel()
	cfg := serveConfig(t)
	// Nothing listens on port 1; the start must fail, not hang.
	cfg.DatabaseURL = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"
	cfg.StartTimeout = time.Second // the start retries an unavailable database that long
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	err := serve(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("serve() with an unreachable database = nil, want an error")
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatalf("serve() waited for the test deadline: %v", err)
	}
}

func TestDescribeDSN(t *testing.T) {
	t.Parallel()
	tests := []struct{ dsn, want string }{
		{"postgres://u:secret@db.internal:5432/leases?sslmode=require&password=x", "db.internal:5432/leases"},
		{"postgresql://db/leases", "db/leases"},
		{"host=db password=secret dbname=leases", "(key=value DSN)"},
		{"postgres:// bad url with secret", "(key=value DSN)"},
	}
	for _, tt := range tests {
		if got := describeDSN(tt.dsn); got != tt.want {
			t.Errorf("describeDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	err := errors.Join(errors.New("first"), errors.New("second"))
	if got, want := oneLine(err.Error()), "first; second"; got != want {
		t.Errorf("oneLine() = %q, want %q", got, want)
	}
}

// TestServeOpenModeProtected: an open leaseapi answers a loopback peer
// naming localhost, refuses a Host of another name (DNS rebinding) with
// 403 except on the probes, and serves it with LEASEAPI_OPEN=true.
func TestServeOpenModeProtected(t *testing.T) {
	t.Parallel()
	get := func(url, host string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s (Host %s): %v", url, host, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, open := range []bool{false, true} {
		cfg := serveConfig(t)
		cfg.Open = open
		srv := startServe(t, cfg)
		port := srv.url[strings.LastIndex(srv.url, ":")+1:]
		if got := get(srv.url+"/whoami", "localhost:"+port); got != http.StatusOK {
			t.Errorf("open %v: GET /whoami to localhost: %d, want 200", open, got)
		}
		want := http.StatusForbidden
		if open {
			want = http.StatusOK
		}
		if got := get(srv.url+"/whoami", "rebound.example:"+port); got != want {
			t.Errorf("LEASEAPI_OPEN=%v: GET /whoami to rebound.example: %d, want %d", open, got, want)
		}
		if got := get(srv.url+"/healthz", "rebound.example:"+port); got != http.StatusOK {
			t.Errorf("LEASEAPI_OPEN=%v: GET /healthz to rebound.example: %d, want 200", open, got)
		}
	}
}
