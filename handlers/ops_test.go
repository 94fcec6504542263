package handlers_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

func TestOperations(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.Version = "1.2.3"
		b := setup(t, open(t), opts)

		for path, want := range map[string]string{"/healthz": `{"status":"ok","version":"1.2.3"}`, "/readyz": `{"status":"ok"}`} {
			resp := b.get(t, path)
			if resp.status != http.StatusOK || strings.TrimSpace(string(resp.body)) != want {
				t.Errorf("%s: %d %s, want 200 %s", path, resp.status, resp.body, want)
			}
		}
		// Without Options.Version, /healthz reports the running binary's.
		unset := setup(t, open(t), defaultOptions())
		want := `{"status":"ok","version":"` + version.Get().Version + `"}`
		if resp := unset.get(t, "/healthz"); strings.TrimSpace(string(resp.body)) != want {
			t.Errorf("/healthz without Options.Version: %s, want %s", resp.body, want)
		}

		resp := b.get(t, "/openapi.yaml")
		if !bytes.Equal(resp.body, api.Spec) || resp.header.Get("Content-Type") != "application/yaml" {
			t.Errorf("/openapi.yaml: Content-Type %q, %d bytes; want application/yaml and api.Spec", resp.header.Get("Content-Type"), len(resp.body))
		}

		wantLease(t, b.acquire(t, b.job("m"), api.AcquireRequest{Owner: "a"}))
		resp = b.get(t, "/metrics")
		for _, want := range []string{
			`leaseapi_http_requests_total{code="200",route="/leases/{jobId}/acquire"} 1`,
			`leaseapi_http_request_duration_seconds_bucket{route="/readyz",le="+Inf"} 1`,
			`leaseapi_acquire_total{result="granted"} 1`,
			`leaseapi_store_duration_seconds_count{operation="acquire"} 1`,
			`leaseapi_store_duration_seconds_count{operation="ready"} 1`,
		} {
			if !strings.Contains(string(resp.body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestRequestIDAndAccessLog: the request id is taken from the client when
// it is safe, generated otherwise, echoed, and on every log line of the
// request; the access log has method, route, status and duration. (The
// harness logs at debug level, so it sees every access log line.)
func TestRequestIDAndAccessLog(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	job := b.job("rid")

	resp := b.do(t, request{method: http.MethodGet, path: "/leases/" + job, header: http.Header{"X-Request-Id": {"client-id.42"}}})
	if got := resp.header.Get("X-Request-Id"); got != "client-id.42" {
		t.Errorf("echoed X-Request-Id: got %q", got)
	}
	lines := b.logs.lines(t, map[string]any{"request_id": "client-id.42", "msg": "request"})
	if len(lines) != 1 {
		t.Fatalf("access log lines for the request: %d", len(lines))
	}
	line := lines[0]
	if line["method"] != "GET" || line["route"] != "/leases/{jobId}" || line["status"] != float64(404) || line["level"] != "INFO" {
		t.Errorf("access log: %v", line)
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("access log without duration_ms: %v", line)
	}

	// The expected answers of a herd, a grant and a conflict, are logged at
	// debug level; the 404 above at info.
	for _, tc := range []struct {
		owner  string
		status int
	}{{"a", http.StatusOK}, {"b", http.StatusConflict}} {
		status := b.acquire(t, job, api.AcquireRequest{Owner: tc.owner}).status
		if status != tc.status {
			t.Fatalf("acquire by %s: %d, want %d", tc.owner, status, tc.status)
		}
		accessLines := b.logs.lines(t, map[string]any{"msg": "request", "route": "/leases/{jobId}/acquire", "status": float64(status)})
		if len(accessLines) != 1 || accessLines[0]["level"] != "DEBUG" {
			t.Errorf("access log of an acquire answered %d: %v, want one line at DEBUG", status, accessLines)
		}
	}

	generated := regexp.MustCompile(`^[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for _, id := range []string{"", "has space", strings.Repeat("x", 129), "semi;colon"} {
		resp := b.do(t, request{method: http.MethodGet, path: "/healthz", header: http.Header{"X-Request-Id": {id}}})
		got := resp.header.Get("X-Request-Id")
		if !generated.MatchString(got) || seen[got] {
			t.Errorf("X-Request-Id for %q: got %q, want a new generated id", id, got)
		}
		seen[got] = true
		if n := len(b.logs.lines(t, map[string]any{"request_id": got})); n != 1 {
			t.Errorf("log lines with request_id %s: %d, want 1", got, n)
		}
	}
	if n := len(b.logs.lines(t, map[string]any{"route": "unmatched"})); n != 0 {
		t.Errorf("unmatched routes logged: %d", n)
	}
	b.doInvalid(t, request{method: http.MethodGet, path: "/nope"})
	if n := len(b.logs.lines(t, map[string]any{"route": "unmatched", "status": float64(404)})); n != 1 {
		t.Errorf("unknown path: %d access log lines with route unmatched, want 1", n)
	}
}

// TestPanicRecovered: a panic becomes a logged 500 internal problem with a
// generic detail, and the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	b := setupHandler(t, store, defaultOptions(), func(o handlers.Options) http.Handler {
		return handlers.NewWithExtraRoute(store, o, "/panic", func(http.ResponseWriter, *http.Request) {
			panic("secret internal state")
		})
	})
	req, _ := http.NewRequest(http.MethodGet, b.server.URL+"/panic", nil)
	req.Header.Set("X-Request-Id", "panic-1")
	httpResp, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer httpResp.Body.Close()
	raw, err := io.ReadAll(httpResp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if httpResp.StatusCode != http.StatusInternalServerError || httpResp.Header.Get("Content-Type") != api.ProblemContentType {
		t.Fatalf("panic: %d %s", httpResp.StatusCode, httpResp.Header.Get("Content-Type"))
	}
	if err := b.contract.strict.ValidateJSON(problemSchema("Internal"), raw); err != nil {
		t.Errorf("500 does not match the Internal response: %v", err)
	}
	if strings.Contains(string(raw), "secret") {
		t.Errorf("500 leaks the panic: %s", raw)
	}
	logged := b.logs.lines(t, map[string]any{"request_id": "panic-1", "msg": "panic"})
	if len(logged) != 1 || !strings.Contains(fmt.Sprint(logged[0]["stack"]), "goroutine") {
		t.Errorf("panic log lines: %v", logged)
	}
	if resp := b.get(t, "/healthz"); resp.status != http.StatusOK {
		t.Errorf("after a panic: /healthz %d", resp.status)
	}
}

// unanswered are the requests TestUnavailable expects 503 for.
func unanswered(job string) []request {
	return []request{
		{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"a"}`},
		{method: http.MethodPost, path: "/leases/" + job + "/heartbeat", body: `{"owner":"a","token":1}`},
		{method: http.MethodPost, path: "/leases/" + job + "/release", body: `{"owner":"a","token":1}`},
		{method: http.MethodDelete, path: "/leases/" + job},
		// Batches whose every item is 503 answer that 503 themselves.
		{method: http.MethodPost, path: "/acquire", body: `{"owner":"a","items":[{"jobId":"` + job + `"},{"jobId":"` + job + `-2"}]}`},
		{method: http.MethodPost, path: "/heartbeat", body: `{"owner":"a","items":[{"jobId":"` + job + `","token":1},{"jobId":"` + job + `-2","token":1}]}`},
	}
}

func wantUnavailable(t *testing.T, resp response) {
	t.Helper()
	wantProblem(t, resp, http.StatusServiceUnavailable, api.CodeUnavailable)
	if got := resp.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After: got %q, want 1", got)
	}
}

// TestUnavailable: when the database does not answer, every request still
// answers by its deadline, with 503 unavailable and Retry-After: 1. The
// bound is the client's timeout, not a measured latency.
func TestUnavailable(t *testing.T) {
	t.Parallel()

	t.Run("PostgresNotAnswering", func(t *testing.T) {
		t.Parallel()
		addr := blackHole(t)
		store, err := postgres.Open(context.Background(), postgres.Config{
			DSN: "postgres://postgres@" + addr + "/leaseapi?sslmode=disable",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		opts := defaultOptions()
		opts.RequestTimeout = 200 * time.Millisecond
		// The credentials live elsewhere (an empty store: open mode), so the
		// lease calls reach the store that does not answer; with the
		// credentials on it too, authentication would answer 503 first.
		opts.Credentials = openSQLite(t).(leaseapi.CredentialStore)
		b := setup(t, store, opts)
		job := b.job("down")

		reqs := append(unanswered(job),
			request{method: http.MethodGet, path: "/leases/" + job},
			request{method: http.MethodGet, path: "/leases/" + job + "/runs"},
			request{method: http.MethodGet, path: "/leases?prefix=" + b.prefix},
			request{method: http.MethodGet, path: "/readyz"},
		)
		for _, req := range reqs {
			wantUnavailable(t, b.do(t, req))
		}
		if resp := b.get(t, "/healthz"); resp.status != http.StatusOK {
			t.Errorf("/healthz while the database is down: %d", resp.status)
		}
		// The single acquire and the batch's two items.
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "error"}); got != 3 {
			t.Errorf("acquire error: got %v, want 3", got)
		}
	})

	t.Run("SQLiteLockedByAnotherWriter", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "leases.db")
		store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		if err := store.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		opts := defaultOptions()
		// Long enough that the calls the lock does not block answer on a
		// loaded machine; the blocked ones still answer 503 within it.
		opts.RequestTimeout = time.Second
		b := setup(t, store, opts)
		job := b.job("locked")
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))

		// A foreign connection holds SQLite's write lock.
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatalf("take the write lock: %v", err)
		}
		for _, req := range unanswered(job) {
			wantUnavailable(t, b.do(t, req))
		}
		// Readers are not blocked by a writer (WAL).
		if got := wantLease(t, b.get(t, "/leases/"+job)); got.Token != l.Token || got.State != leaseapi.StateHeld {
			t.Errorf("lease after refused writes: %+v", got)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		// The writes whose outcome was unknown are safe to retry.
		wantLease(t, b.heartbeat(t, job, api.HeartbeatRequest{Owner: "a", Token: l.Token}))
	})
}

// blackHole listens on a local port, accepts connections and never
// answers: a database host that hangs.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestWriteProblem maps store errors, wrapped or not, to problems that
// match the spec's response for their status.
func TestWriteProblem(t *testing.T) {
	t.Parallel()
	spec := loadContract(t)
	now := time.Now()
	lease := leaseapi.Lease{
		JobID: "job", Owner: "holder", Token: 7, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Hour), TTL: time.Hour,
	}
	conflict := func(sentinel error) error { return &leaseapi.ConflictError{Err: sentinel, Lease: lease} }
	tests := []struct {
		name       string
		err        error
		status     int
		code       string
		response   string // components/responses entry
		retryAfter bool
		withLease  bool
	}{
		{"NotFound", fmt.Errorf("get job: %w", leaseapi.ErrNotFound), 404, api.CodeNotFound, "NotFound", false, false},
		// A store's own validation (the handlers validate first) is a 400 that names the rule.
		{"StoreRefusedInput", (&leaseapi.ReleaseParams{JobID: "job", Owner: "o", Token: 1}).Validate(), 400, api.CodeInvalidRequest, "BadRequest", false, false},
		{"LeaseHeld", conflict(leaseapi.ErrLeaseHeld), 409, api.CodeLeaseHeld, "AcquireConflict", true, true},
		{"LeaseHeldWrapped", fmt.Errorf("acquire: %w", conflict(leaseapi.ErrLeaseHeld)), 409, api.CodeLeaseHeld, "AcquireConflict", true, true},
		{"TickDone", conflict(leaseapi.ErrTickDone), 409, api.CodeTickDone, "AcquireConflict", false, true},
		{"LeaseLost", fmt.Errorf("heartbeat: %w", conflict(leaseapi.ErrLeaseLost)), 409, api.CodeLeaseLost, "LeaseLost", false, true},
		// tick_ahead: no Retry-After (asking again soon does not help), the
		// store's clock as now, the lease when the job has one.
		{"TickAhead", &leaseapi.TickAheadError{Tick: now.Add(48 * time.Hour), Now: now, MaxAhead: leaseapi.DefaultMaxTickAhead, Lease: &lease},
			409, api.CodeTickAhead, "AcquireConflict", false, true},
		{"TickAheadNewJob", &leaseapi.TickAheadError{Tick: now.Add(48 * time.Hour), Now: now, MaxAhead: leaseapi.DefaultMaxTickAhead},
			409, api.CodeTickAhead, "AcquireConflict", false, false},
		{"TriggerTickAhead", &leaseapi.TickAheadError{Tick: now.Add(48 * time.Hour), Now: now, MaxAhead: leaseapi.DefaultMaxTickAhead, Lease: &lease, Manual: true},
			409, api.CodeTickAhead, "TriggerConflict", false, true},
		{"TriggerPaused", conflict(leaseapi.ErrJobPaused), 409, api.CodeJobPaused, "TriggerConflict", false, true},
		// too_soon: the lease, and Retry-After the rest of the interval by
		// the store's clock.
		{"TooSoon", &leaseapi.ConflictError{Err: &leaseapi.TooSoonError{MinInterval: time.Hour, Until: now.Add(90 * time.Second), Now: now}, Lease: lease},
			409, api.CodeTooSoon, "AcquireConflict", true, true},
		{"FeatureDisabled", fmt.Errorf("acquire: %w", leaseapi.NewGate(0).Check(leaseapi.FeatureMinInterval)),
			400, api.CodeFeatureDisabled, "AcquireBadRequest", false, false},
		{"Unavailable", fmt.Errorf("acquire: %w: dial tcp: refused", leaseapi.ErrUnavailable), 503, api.CodeUnavailable, "Unavailable", true, false},
		{"Overloaded", fmt.Errorf("acquire \"j\": 256 store calls in flight: %w", leaseapi.ErrOverloaded), 503, api.CodeOverloaded, "Unavailable", true, false},
		{"DeadlineExceeded", fmt.Errorf("store get: %w", context.DeadlineExceeded), 503, api.CodeUnavailable, "Unavailable", true, false},
		{"Canceled", context.Canceled, 503, api.CodeUnavailable, "Unavailable", true, false},
		{"Joined", errors.Join(errors.New("x"), leaseapi.ErrUnavailable), 503, api.CodeUnavailable, "Unavailable", true, false},
		{"Unknown", errors.New(`pq: relation "leases" does not exist`), 500, api.CodeInternal, "Internal", false, false},
		// A store must wrap conflicts in *ConflictError; a bare sentinel has
		// no lease for the 409 body, so it is a server bug.
		{"BareSentinel", leaseapi.ErrLeaseHeld, 500, api.CodeInternal, "Internal", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			handlers.WriteProblem(rec, httptest.NewRequest(http.MethodGet, "/leases/job", nil), tt.err)
			if rec.Code != tt.status || rec.Header().Get("Content-Type") != api.ProblemContentType {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Header().Get("Content-Type"), tt.status)
			}
			if err := spec.strict.ValidateJSON(problemSchema(tt.response), rec.Body.Bytes()); err != nil {
				t.Errorf("does not match responses/%s: %v\n%s", tt.response, err, rec.Body.Bytes())
			}
			var p api.Problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if p.Code != tt.code || p.Status != tt.status || p.Type != api.ProblemTypePrefix+tt.code {
				t.Errorf("problem: %+v", p)
			}
			if (p.Lease != nil) != tt.withLease || (p.Lease != nil && p.Lease.Token != 7) {
				t.Errorf("lease: %+v, want present=%v", p.Lease, tt.withLease)
			}
			if wantNow := tt.code == api.CodeTickAhead; (p.Now != nil) != wantNow || wantNow && !p.Now.Equal(now.Truncate(time.Millisecond)) {
				t.Errorf("now: %v, want present=%v (%s)", p.Now, wantNow, now)
			}
			if got := rec.Header().Get("Retry-After"); (got != "") != tt.retryAfter || tt.code == api.CodeTooSoon && got != "90" {
				t.Errorf("Retry-After %q, want present=%v", got, tt.retryAfter)
			}
			// Shed calls never reached the store: the detail says so, where
			// other 503s say the outcome of a write is unknown.
			if shed := strings.Contains(p.Detail, "did nothing"); shed != (tt.name == "Overloaded") {
				t.Errorf("detail %q: says nothing was done = %v, want %v", p.Detail, shed, tt.name == "Overloaded")
			}
			if strings.Contains(p.Detail, "pq") || strings.Contains(p.Detail, "refused") {
				t.Errorf("detail leaks the cause: %q", p.Detail)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		expiresIn time.Duration
		ttl       time.Duration
		want      int
	}{
		{"RoundsUp", 2500 * time.Millisecond, 30 * time.Second, 3},
		{"Whole", 2 * time.Second, 30 * time.Second, 2},
		{"JustAbove", 29*time.Second + time.Millisecond, 30 * time.Second, 30},
		{"AlmostExpired", time.Millisecond, 30 * time.Second, 1},
		{"AlreadyExpired", -5 * time.Second, 30 * time.Second, 1},
		{"ClockSkewCappedAtTTL", time.Hour, 30 * time.Second, 30},
		{"SubSecondTTL", 400 * time.Millisecond, 500 * time.Millisecond, 1},
	}
	for _, tt := range tests {
		l := leaseapi.Lease{ExpiresAt: now.Add(tt.expiresIn), TTL: tt.ttl}
		if got := handlers.RetryAfter(l, now); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}

// problemSchema is the JSON pointer of the problem schema of
// components/responses/name.
func problemSchema(name string) string {
	return "/components/responses/" + name + "/content/application~1problem+json/schema"
}
