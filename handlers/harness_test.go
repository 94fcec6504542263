package handlers_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/apitest"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// openStore opens a new, migrated, real store; the test closes it.
type openStore func(t *testing.T) leaseapi.Store

func openSQLite(t *testing.T) leaseapi.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "leases.db")})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close sqlite: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return s
}

func openPostgres(t *testing.T) leaseapi.Store {
	t.Helper()
	p, err := postgres.Open(context.Background(), postgres.Config{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close postgres: %v", err)
		}
	})
	return p
}

// forEachStore runs fn as a parallel subtest against each real store: the
// embedded SQLite store and Postgres (the package's database, migrated by
// repotest.WrapTestMain; tests isolate by unique job ids).
func forEachStore(t *testing.T, fn func(t *testing.T, open openStore)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open openStore
	}{
		{"SQLite", openSQLite},
		{"Postgres", openPostgres},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			fn(t, s.open)
		})
	}
}

// The contract, loaded once: every request and response of these tests is
// validated against it, by kin-openapi (routes, parameters, status codes,
// headers, bodies) and, for response bodies, also by a strict reader of
// OpenAPI 3.0.3 (apitest), which accepts null only where the spec allows it
// under 3.0.3's own rule. Both read the closed form of the spec
// (apitest.ClosedSpec): the server sends no field and no code the spec
// does not list, though the published spec leaves room for later ones.
var contract = sync.OnceValues(func() (*specContract, error) {
	closed, err := apitest.ClosedSpec()
	if err != nil {
		return nil, fmt.Errorf("closed form of the spec: %w", err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(closed)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate spec: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	strict, err := apitest.Strict()
	if err != nil {
		return nil, fmt.Errorf("strict contract: %w", err)
	}
	return &specContract{doc: doc, router: router, strict: strict}, nil
})

type specContract struct {
	doc    *openapi3.T
	router routers.Router
	strict *apitest.Contract
}

func loadContract(t *testing.T) *specContract {
	t.Helper()
	c, err := contract()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// validationOptions: security is validated (a bearerAuth requirement needs a
// Bearer header; the spec also allows none, since tokens are optional
// configuration), every response status must be in the spec, and bodies,
// problem+json included, are checked against their schemas.
func validationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
			if in.SecuritySchemeName != "bearerAuth" {
				return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
			}
			if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
				return errors.New("no bearer token")
			}
			return nil
		},
	}
}

// request is one HTTP call of a test.
type request struct {
	method string
	path   string // with query; may contain escapes
	// body is sent as is; with a body, Content-Type defaults to application/json.
	body   string
	header http.Header
	// host, when set, is sent as the Host header.
	host string
	// bodyReader, when set, replaces body (for huge bodies), with
	// contentLength as the announced length (-1: unknown, sent chunked).
	bodyReader    io.Reader
	contentLength int64
}

func (r request) String() string {
	body := r.body
	if len(body) > 80 {
		body = body[:80] + "…"
	}
	return r.method + " " + r.path + " " + body
}

func (r request) build(t *testing.T, baseURL string) *http.Request {
	t.Helper()
	var body io.Reader = strings.NewReader(r.body)
	if r.bodyReader != nil {
		body = r.bodyReader
	}
	req, err := http.NewRequest(r.method, baseURL+r.path, body)
	if err != nil {
		t.Fatalf("build %s: %v", r, err)
	}
	if r.bodyReader == nil && r.body == "" {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	if r.bodyReader != nil && r.contentLength > 0 {
		req.ContentLength = r.contentLength
	}
	if r.body != "" || r.bodyReader != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, vs := range r.header {
		req.Header.Del(k)
		for _, v := range vs {
			if v != "" {
				req.Header.Add(k, v)
			}
		}
	}
	return req
}

// response is what a test sees of one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) problem(t *testing.T) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("decode problem: %v\n%s", err, r.body)
	}
	return p
}

func (r response) lease(t *testing.T) api.Lease {
	t.Helper()
	var l api.Lease
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("decode lease: %v\n%s", err, r.body)
	}
	return l
}

// consolePage is the path of the console's page, which the spec documents
// as the file it serves, /ui/index.html: no path of the spec ends in a slash
// (Redocly's no-path-trailing-slash, which `make lint` applies too).
const consolePage = "/ui/"

// findRoute finds the operation of vreq (a clone: the console's page is
// looked up as /ui/index.html).
func (c *specContract) findRoute(vreq *http.Request) (*routers.Route, map[string]string, error) {
	if vreq.URL.Path == consolePage {
		vreq.URL.Path, vreq.URL.RawPath = consolePage+"index.html", ""
	}
	return c.router.FindRoute(vreq)
}

// validateRequest checks req against the contract.
func (c *specContract) validateRequest(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := c.findRoute(vreq)
	if err != nil {
		return nil, fmt.Errorf("find route: %w", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: validationOptions()}
	return in, openapi3filter.ValidateRequest(context.Background(), in)
}

// validateResponse checks a response against the contract. A request the
// contract has no operation for (unknown path or method, or a path the
// router cannot match, such as an escaped slash in a jobId) must get a
// 400, 404 or 405 problem that matches the Problem schema.
func (c *specContract) validateResponse(req *http.Request, resp response) error {
	vreq := req.Clone(context.Background())
	vreq.Body = http.NoBody
	route, params, err := c.findRoute(vreq)
	if err != nil {
		switch resp.status {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
		default:
			return fmt.Errorf("status %d for a request without an operation in the spec (%v)", resp.status, err)
		}
		if err := c.strict.ValidateJSON(apitest.SchemaPointer("Problem"), resp.body); err != nil {
			return fmt.Errorf("problem does not match the Problem schema: %w", err)
		}
		return nil
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: validationOptions()},
		Status:                 resp.status,
		Header:                 resp.header,
		Options:                validationOptions(),
	}
	in.SetBodyBytes(resp.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	return c.strict.ValidateResponse(route.Path, req.Method, resp.status, resp.header, resp.body)
}

// testBundle is one handler over one real store, served over TCP.
type testBundle struct {
	store    leaseapi.Store
	server   *httptest.Server
	contract *specContract
	registry *prometheus.Registry
	logs     *logBuffer
	// prefix makes this test's job ids unique in a shared database.
	prefix string
}

// defaultOptions are the production defaults with a short request timeout.
func defaultOptions() handlers.Options {
	return handlers.Options{
		DefaultTTL:     30 * time.Second,
		MinTTL:         time.Second,
		MaxTTL:         time.Hour,
		RequestTimeout: 5 * time.Second,
	}
}

func setup(t *testing.T, store leaseapi.Store, opts handlers.Options) *testBundle {
	t.Helper()
	return setupHandler(t, store, opts, func(o handlers.Options) http.Handler { return handlers.New(store, o) })
}

func setupHandler(t *testing.T, store leaseapi.Store, opts handlers.Options, newHandler func(handlers.Options) http.Handler) *testBundle {
	t.Helper()
	b := &testBundle{
		store:    store,
		contract: loadContract(t),
		registry: prometheus.NewRegistry(),
		logs:     &logBuffer{},
		prefix:   uniquePrefix(),
	}
	opts.Registry = b.registry
	opts.Logger = slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.server = httptest.NewServer(newHandler(opts))
	t.Cleanup(b.server.Close)
	return b
}

func uniquePrefix() string {
	var r [5]byte
	_, _ = rand.Read(r[:])
	return "t" + hex.EncodeToString(r[:]) + "-"
}

// job is a job id unique to this test.
func (b *testBundle) job(name string) string { return b.prefix + name }

// do sends req, which must be valid by the contract, and checks the
// response against the contract.
func (b *testBundle) do(t *testing.T, req request) response {
	t.Helper()
	return b.send(t, req, true)
}

// doInvalid sends req, which breaks the contract on purpose, and checks only
// the response against the contract.
func (b *testBundle) doInvalid(t *testing.T, req request) response {
	t.Helper()
	return b.send(t, req, false)
}

func (b *testBundle) send(t *testing.T, r request, validRequest bool) response {
	t.Helper()
	req := r.build(t, b.server.URL)
	if validRequest {
		if _, err := b.contract.validateRequest(req, []byte(r.body)); err != nil {
			t.Fatalf("%s: the request does not match the spec: %v", r, err)
		}
	}
	client := *b.server.Client()      // a copy: concurrent requests set their own bound
	client.Timeout = 30 * time.Second // a bound, not a measurement
	httpResp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	defer httpResp.Body.Close()
	body, err := io.ReadAll(httpResp.Body)
	if err != nil {
		t.Fatalf("%s: read response: %v", r, err)
	}
	resp := response{status: httpResp.StatusCode, header: httpResp.Header, body: body}
	if err := b.contract.validateResponse(req, resp); err != nil {
		t.Fatalf("%s: the response does not match the spec: %v\nstatus %d, headers %v\n%s", r, err, resp.status, resp.header, resp.body)
	}
	checkCommon(t, r, resp)
	return resp
}

// checkCommon holds for every response: a request id, and problems that are
// consistent with their status and code.
func checkCommon(t *testing.T, r request, resp response) {
	t.Helper()
	if resp.header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", r)
	}
	if resp.status < 400 {
		return
	}
	if ct := resp.header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Errorf("%s: Content-Type %q, want %q", r, ct, api.ProblemContentType)
	}
	p := resp.problem(t)
	if p.Status != resp.status || p.Type != api.ProblemTypePrefix+p.Code || p.Title == "" || p.Detail == "" {
		t.Errorf("%s: inconsistent problem for status %d: %+v", r, resp.status, p)
	}
}

// wantProblem checks status and problem code.
func wantProblem(t *testing.T, resp response, status int, code string) api.Problem {
	t.Helper()
	if resp.status != status {
		t.Fatalf("status: got %d, want %d\n%s", resp.status, status, resp.body)
	}
	p := resp.problem(t)
	if p.Code != code {
		t.Fatalf("code: got %q, want %q\n%s", p.Code, code, resp.body)
	}
	return p
}

// wantLease checks a 200 and returns the lease.
func wantLease(t *testing.T, resp response) api.Lease {
	t.Helper()
	if resp.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200\n%s", resp.status, resp.body)
	}
	return resp.lease(t)
}

// Request builders.

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

func (b *testBundle) acquire(t *testing.T, job string, req api.AcquireRequest) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: jsonBody(t, req)})
}

func (b *testBundle) heartbeat(t *testing.T, job string, req api.HeartbeatRequest) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/heartbeat", body: jsonBody(t, req)})
}

func (b *testBundle) release(t *testing.T, job string, req api.ReleaseRequest) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release", body: jsonBody(t, req)})
}

func (b *testBundle) get(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, request{method: http.MethodGet, path: path})
}

// snapshot is the store's view of this test's jobs: every lease with its run
// history. Bad input must leave it unchanged.
type snapshot struct {
	leases []leaseapi.Lease
	runs   map[string][]leaseapi.Run
}

func (b *testBundle) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := b.store.List(ctx, &leaseapi.ListParams{Prefix: b.prefix, Limit: 1000})
	if err != nil {
		t.Fatalf("snapshot: list: %v", err)
	}
	s := snapshot{leases: page.Leases, runs: map[string][]leaseapi.Run{}}
	for _, l := range page.Leases {
		runs, err := b.store.Runs(ctx, l.JobID, 1000)
		if err != nil {
			t.Fatalf("snapshot: runs of %s: %v", l.JobID, err)
		}
		s.runs[l.JobID] = runs
	}
	return s
}

func (s snapshot) equal(o snapshot) bool {
	if len(s.leases) != len(o.leases) || !reflect.DeepEqual(s.runs, o.runs) {
		return false
	}
	for i := range s.leases {
		if !equalLease(s.leases[i], o.leases[i]) {
			return false
		}
	}
	return true
}

// equalLease compares leases by value (times with Equal, pointers by what
// they point to).
func equalLease(a, b leaseapi.Lease) bool {
	return a.JobID == b.JobID && a.Owner == b.Owner && a.Token == b.Token && a.State == b.State &&
		a.AcquiredAt.Equal(b.AcquiredAt) && a.RenewedAt.Equal(b.RenewedAt) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		equalTimePtr(a.ReleasedAt, b.ReleasedAt) && a.TTL == b.TTL && equalTimePtr(a.Tick, b.Tick) &&
		equalTimePtr(a.LastCompletedTick, b.LastCompletedTick) && a.LastOutcome == b.LastOutcome
}

func equalTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// logBuffer collects the handler's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the log records that have every given key/value.
func (l *logBuffer) lines(t *testing.T, match map[string]any) []map[string]any {
	t.Helper()
	l.mu.Lock()
	data := l.buf.String()
	l.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(data) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		ok := true
		for k, v := range match {
			if rec[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}

// waitForState polls GET /leases/{job} until the lease has state, bounded.
func (b *testBundle) waitForState(t *testing.T, job string, state leaseapi.State) api.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l := wantLease(t, b.get(t, "/leases/"+job))
		if l.State == state {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s: state %s after 10s, want %s", job, l.State, state)
		}
		<-tick.C
	}
}

// counter returns the value of a counter with the given labels, 0 if absent.
func (b *testBundle) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := b.registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
