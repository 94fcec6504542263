package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/jobs"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// The runner tests run against the real service: handlers.New over the
// embedded SQLite store, in an httptest.Server. The only thing between the
// runner and the service is faultProxy, which can make requests fail the way
// a network or an overloaded service does.

// testTTL and friends are the runner settings of most tests. The service's
// own clock never decides anything in these tests: they finish in
// milliseconds of real time, long before a 30 s lease could expire.
const (
	testTTL       = 30 * time.Second
	testHeartbeat = 10 * time.Second
	testMargin    = 3 * time.Second
	// waitTimeout bounds every wait for an event; it is a safety net
	// against a hung test, never a timing assumption.
	waitTimeout = 20 * time.Second
)

// epoch is where the fake clocks start.
var epoch = time.Date(2026, 11, 30, 7, 0, 2, 0, time.UTC)

type testBundle struct {
	url    string
	client *client.ClientWithResponses
	faults *faultProxy
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "leases.db")})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	faults := &faultProxy{next: handlers.New(store, handlers.Options{
		MinTTL:         100 * time.Millisecond,
		RequestTimeout: 5 * time.Second,
	})}
	srv := httptest.NewServer(faults)
	t.Cleanup(srv.Close)
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return &testBundle{url: srv.URL, client: c, faults: faults}
}

// runner returns a runner of owner on clock with the test settings; mod may
// change the configuration.
func (b *testBundle) runner(t *testing.T, owner string, clock clockwork.Clock, mod func(*jobs.Config)) *jobs.Runner {
	t.Helper()
	cfg := jobs.Config{
		Client:            b.client,
		Owner:             owner,
		TTL:               testTTL,
		HeartbeatInterval: testHeartbeat,
		Margin:            testMargin,
		RequestTimeout:    5 * time.Second,
		Clock:             clock,
		// The owed poller's timer would be one more waiter on the fake
		// clock; the tests of owed ticks turn it on.
		OwedPollInterval: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := jobs.New(cfg)
	if err != nil {
		t.Fatalf("new runner: %v", err)
	}
	return r
}

func (b *testBundle) lease(t *testing.T, jobID string) client.Lease {
	t.Helper()
	resp, err := b.client.GetLeaseWithResponse(context.Background(), jobID)
	if err != nil {
		t.Fatalf("get lease %s: %v", jobID, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("get lease %s: status %d: %s", jobID, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

// runs returns the run history of jobID, newest first.
// tryLease returns the lease of jobID, or false while it has none.
func (b *testBundle) tryLease(jobID string) (client.Lease, bool) {
	resp, err := b.client.GetLeaseWithResponse(context.Background(), jobID)
	if err != nil || resp.JSON200 == nil {
		return client.Lease{}, false
	}
	return *resp.JSON200, true
}

func (b *testBundle) runs(t *testing.T, jobID string) []client.Run {
	t.Helper()
	limit := 1000
	resp, err := b.client.ListRunsWithResponse(context.Background(), jobID, &client.ListRunsParams{Limit: &limit})
	if err != nil {
		t.Fatalf("list runs %s: %v", jobID, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("list runs %s: status %d: %s", jobID, resp.StatusCode(), resp.Body)
	}
	return resp.JSON200.Runs
}

func (b *testBundle) acquire(t *testing.T, jobID, owner string, tick time.Time) client.Lease {
	t.Helper()
	resp, err := b.client.AcquireLeaseWithResponse(context.Background(), jobID, client.AcquireRequest{Owner: owner, Tick: &tick})
	if err != nil {
		t.Fatalf("acquire %s: %v", jobID, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("acquire %s: status %d: %s", jobID, resp.StatusCode(), resp.Body)
	}
	return *resp.JSON200
}

func (b *testBundle) release(t *testing.T, jobID, owner string, token int64) {
	t.Helper()
	resp, err := b.client.ReleaseLeaseWithResponse(context.Background(), jobID, client.ReleaseRequest{Owner: owner, Token: token})
	if err != nil {
		t.Fatalf("release %s: %v", jobID, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("release %s: status %d: %s", jobID, resp.StatusCode(), resp.Body)
	}
}

func (b *testBundle) revoke(t *testing.T, jobID string) {
	t.Helper()
	resp, err := b.client.RevokeLeaseWithResponse(context.Background(), jobID)
	if err != nil {
		t.Fatalf("revoke %s: %v", jobID, err)
	}
	if resp.JSON200 == nil {
		t.Fatalf("revoke %s: status %d: %s", jobID, resp.StatusCode(), resp.Body)
	}
}

// faultProxy passes requests to the service, except the ones it is told to
// fail: those get 503 unavailable, as from a service whose database is gone.
// It counts the answers per operation (acquire, heartbeat, release) and
// status.
type faultProxy struct {
	next http.Handler
	// failAcquires is how many of the next acquires fail.
	failAcquires atomic.Int32
	// failHeartbeats fails every heartbeat while set.
	failHeartbeats atomic.Bool
	// retryAfter is the Retry-After of the injected answers in seconds; 0
	// means 1, as leaseapi sends.
	retryAfter atomic.Int32
	// rateLimited injects 429 rate_limited instead of 503 unavailable.
	rateLimited atomic.Bool
	// beforeAcquire, when set, runs before an acquire is passed on: a test
	// uses it to move a fake clock while the request is on its way.
	beforeAcquire atomic.Pointer[func()]
	// groupFull is how many of the next acquires are refused 409
	// group_full, with Retry-After retryAfter, for the group groupFullBody
	// names: every slot of "reports" held by the job "other".
	groupFull atomic.Int32
	// groupFullBare leaves Retry-After out of the group_full answers, as a
	// proxy that drops headers would.
	groupFullBare atomic.Bool
	// newRefusals is how many of the next acquires are refused 409 with a
	// code this release does not know, some_new_refusal, carrying a lease
	// held by "replica-z": an answer of a later leaseapi.
	newRefusals atomic.Int32
	// newFields adds a field this release does not know, someNewField, to
	// every JSON object of every answer of the service, as a later leaseapi
	// may send.
	newFields atomic.Bool

	// lastAcquire is the body of the last acquire.
	lastAcquire atomic.Pointer[[]byte]
	// hold, while set, makes acquires and heartbeats (single or batched)
	// wait until it is closed: a test holds a runner's request in flight
	// so that the runner's next calls queue behind it for one batch.
	hold atomic.Pointer[chan struct{}]
	// held counts the requests that waited on hold, heldItems the calls
	// they carry (a batch's items), heldPath is the path of the last one.
	held      atomic.Int32
	heldItems atomic.Int32
	heldPath  atomic.Pointer[string]
	// noBatchRoutes answers the batch routes 404, as a leaseapi older than
	// them does.
	noBatchRoutes atomic.Bool
	// rateLimitItems is how many of the next items of acquire batches are
	// answered 429 rate_limited, as the service answers the items beyond a
	// credential's rate: they are taken out of the batch it passes on.
	rateLimitItems atomic.Int32

	mu     sync.Mutex
	counts map[string]int
}

func (f *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if strings.Count(r.URL.Path, "/") == 1 && (op == "acquire" || op == "heartbeat") {
		op += "-batch" // POST /acquire, POST /heartbeat
		if f.noBatchRoutes.Load() {
			f.count(op, http.StatusNotFound)
			w.Header().Set("Content-Type", api.ProblemContentType)
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"https://leaseapi.dev/problems/not_found","title":"Not found","status":404,"detail":"no such route","code":"not_found"}`))
			return
		}
		if op == "acquire-batch" && f.rateLimitItems.Load() > 0 {
			f.rateLimitBatch(w, r)
			return
		}
	}
	if hold := f.hold.Load(); hold != nil && (op == "acquire" || op == "heartbeat" || op == "acquire-batch" || op == "heartbeat-batch") {
		items := 1
		if strings.HasSuffix(op, "-batch") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var batch struct {
				Items []json.RawMessage `json:"items"`
			}
			_ = json.Unmarshal(body, &batch)
			items = len(batch.Items)
		}
		f.heldItems.Add(int32(items))
		f.held.Add(1)
		path := r.URL.Path
		f.heldPath.Store(&path)
		<-*hold
	}
	fail := false
	switch op {
	case "acquire":
		fail = f.failAcquires.Add(-1) >= 0
		if hook := f.beforeAcquire.Load(); hook != nil {
			(*hook)()
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.lastAcquire.Store(&body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !fail && f.newRefusals.Add(-1) >= 0 {
			f.count(op, http.StatusConflict)
			w.Header().Set("Content-Type", api.ProblemContentType)
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(newRefusalBody))
			return
		}
		if !fail && f.groupFull.Add(-1) >= 0 {
			f.count(op, http.StatusConflict)
			w.Header().Set("Content-Type", api.ProblemContentType)
			if !f.groupFullBare.Load() {
				w.Header().Set("Retry-After", strconv.Itoa(max(1, int(f.retryAfter.Load()))))
			}
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(groupFullBody))
			return
		}
	case "heartbeat":
		fail = f.failHeartbeats.Load()
	}
	if fail {
		status, code, title := http.StatusServiceUnavailable, api.CodeUnavailable, "Service unavailable"
		if f.rateLimited.Load() {
			status, code, title = http.StatusTooManyRequests, api.CodeRateLimited, "Rate limited"
		}
		f.count(op, status)
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(f.retryAfter.Load()))))
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.Problem{
			Type: api.ProblemTypePrefix + code, Title: title, Status: status, Detail: "injected fault", Code: code,
		})
		return
	}
	if f.newFields.Load() {
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r)
		f.count(op, rec.Code)
		body := rec.Body.Bytes()
		var v any
		if strings.HasSuffix(rec.Header().Get("Content-Type"), "json") && json.Unmarshal(body, &v) == nil {
			body, _ = json.Marshal(withNewField(v))
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
		return
	}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	f.next.ServeHTTP(rec, r)
	f.count(op, rec.status)
}

// withNewField is v with someNewField added to each of its objects.
func withNewField(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			v[k] = withNewField(c)
		}
		v["someNewField"] = map[string]any{"since": "a later release"}
	case []any:
		for i, c := range v {
			v[i] = withNewField(c)
		}
	}
	return v
}

// rateLimitBatch answers an acquire batch whose first rateLimitItems items
// are refused 429 rate_limited: the rest go to the service as the batch,
// and the refusals are put back in their place in its answer.
func (f *faultProxy) rateLimitBatch(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	var items []json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || json.Unmarshal(req["items"], &items) != nil {
		http.Error(w, "bad batch", http.StatusBadRequest)
		return
	}
	var limited []api.BatchResult
	for len(items) > 0 && f.rateLimitItems.Add(-1) >= 0 {
		var item struct {
			JobID string `json:"jobId"`
		}
		_ = json.Unmarshal(items[0], &item)
		limited = append(limited, api.BatchResult{JobID: item.JobID, Status: http.StatusTooManyRequests, Problem: &api.Problem{
			Type: api.ProblemTypePrefix + api.CodeRateLimited, Title: "Rate limited", Status: http.StatusTooManyRequests,
			Detail: "injected fault", Code: api.CodeRateLimited,
		}})
		items = items[1:]
	}
	var rest api.BatchResponse
	if len(items) > 0 {
		req["items"], _ = json.Marshal(items)
		body, _ := json.Marshal(req)
		inner := r.Clone(r.Context())
		inner.Body = io.NopCloser(bytes.NewReader(body))
		inner.ContentLength = int64(len(body))
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, inner)
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &rest) != nil {
			f.count("acquire-batch", rec.Code)
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
	}
	f.count("acquire-batch", http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(api.BatchResponse{Results: append(limited, rest.Results...)}.AppendJSON(nil))
}

// groupFullBody is the problem of an acquire refused group_full: the group
// "reports" with limit 1, its one slot held by the job "other".
const groupFullBody = `{"type":"https://leaseapi.dev/problems/group_full","title":"Group full","status":409,` +
	`"detail":"every slot of group \"reports\" is in use (1 of 1); retry after Retry-After","code":"group_full",` +
	`"group":{"name":"reports","limit":1,"held":1,"holders":[{"jobId":"other","owner":"replica-z","token":4,` +
	`"slot":1,"slotToken":9,"expiresAt":"2026-11-30T07:00:31.000Z"}],"createdBy":"ops","createdAt":"2026-11-01T00:00:00.000Z"}}`

// newRefusalBody is a refusal of an acquire with a code this release does
// not know, as a later leaseapi may answer: a 409 carrying the lease.
const newRefusalBody = `{"type":"https://leaseapi.dev/problems/some_new_refusal","title":"Some new refusal","status":409,` +
	`"detail":"a refusal of a later release","code":"some_new_refusal","lease":{"jobId":"report","owner":"replica-z",` +
	`"token":7,"state":"held","acquiredAt":"2026-11-30T07:00:01.000Z","renewedAt":"2026-11-30T07:00:01.000Z",` +
	`"expiresAt":"2026-11-30T07:00:31.000Z","releasedAt":null,"ttlMs":30000,"tick":"2026-11-30T07:00:00.000Z",` +
	`"lastCompletedTick":null,"lastOutcome":null,"someNewField":1}}`

// sentGroup returns the group the last acquire sent, and whether it sent one.
func (f *faultProxy) sentGroup(t *testing.T) (string, bool) {
	t.Helper()
	body := f.lastAcquire.Load()
	if body == nil {
		t.Fatal("no acquire was sent")
	}
	var req struct {
		Group *string `json:"group"`
	}
	if err := json.Unmarshal(*body, &req); err != nil {
		t.Fatalf("acquire body %s: %v", *body, err)
	}
	if req.Group == nil {
		return "", false
	}
	return *req.Group, true
}

func (f *faultProxy) count(op string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = make(map[string]int)
	}
	f.counts[op+" "+http.StatusText(status)]++
}

// answered returns how many requests of op were answered with status.
func (f *faultProxy) answered(op string, status int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op+" "+http.StatusText(status)]
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

// waitCtx is the context of every wait of a test.
func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// blockUntil waits until n goroutines wait on the fake clock.
func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	if err := clock.BlockUntilContext(waitCtx(t), n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}

// receive waits for a value from ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-waitCtx(t).Done():
		var zero T
		t.Fatalf("timed out waiting for %s", what)
		return zero
	}
}

// runResult is what Run returned, for tests that run it in a goroutine.
type runResult struct {
	report jobs.Report
	err    error
}

func goRun(ctx context.Context, r *jobs.Runner, jobID string, tick time.Time, fn jobs.Func, opts ...jobs.JobOption) <-chan runResult {
	ch := make(chan runResult, 1)
	go func() {
		rep, err := r.Run(ctx, jobID, tick, fn, opts...)
		ch <- runResult{rep, err}
	}()
	return ch
}

// blockForever returns a channel that is closed when the test ends: a job
// that waits on it ignores its context, like a stuck job.
func blockForever(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

// timerWatch is a fake clock that tells which timers are created, for a test
// that must wait for one particular timer among several.
type timerWatch struct {
	*clockwork.FakeClock
	created chan time.Duration
}

func (c *timerWatch) NewTimer(d time.Duration) clockwork.Timer {
	t := c.FakeClock.NewTimer(d)
	select {
	case c.created <- d:
	default:
	}
	return t
}
