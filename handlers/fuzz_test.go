package handlers_test

// Fuzz targets for hostile input: the request body decoder (acquire,
// heartbeat, release), path and query validation (jobId, owner, limit,
// state, prefix, cursor), bearer tokens and the problem writer. Run one with
//
//	go test ./handlers -run '^$' -fuzz '^FuzzAcquireBody$' -fuzztime 60s
//
// Without -fuzz, `go test` (and so `make test`) runs their seed corpora as
// ordinary tests: the cases of badCases, a few valid requests, and the
// regression seeds in testdata/fuzz.
//
// Every target serves its input through handlers.New over the real SQLite
// store, recorded by recordingStore, and holds the response to the same
// properties (checkFuzzResponse): no panic, never a 5xx, a 2xx that decodes
// strictly into its api type, every 4xx a valid problem of at most 1 KiB,
// and no invalid value ever reaching the store.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/repo/sqlite"
	"github.com/leaseapi/leaseapi/ui"
)

// Jobs of the fuzz store: fuzzHeld is held by owner "a" with token 1 (for an
// hour) when a target starts, so heartbeat and release can succeed;
// fuzzFresh does not exist, so acquire can create it.
const (
	fuzzHeld  = "fuzz-held"
	fuzzFresh = "fuzz-fresh"
	// fuzzAPIToken and fuzzAdminToken are the tokens of FuzzAuthorization.
	fuzzAPIToken   = "api-token-1"
	fuzzAdminToken = "admin-token"
)

// storeCall is one call that reached the store, with what was wrong with its
// parameters (nil when they are valid).
type storeCall struct {
	op      string
	invalid error
	// storeValidates: only the store can tell whether the call is valid (a
	// nearestTick acquire without a schedule needs the stored one; a group
	// must exist), so it may answer invalid_request.
	storeValidates bool
}

// recordingStore is the real store with every call recorded, so a target can
// tell whether a request reached the store and with which values. It is a
// decorator, not a mock: every call goes to the real store.
type recordingStore struct {
	leaseapi.Store
	opts handlers.Options

	mu    sync.Mutex
	calls []storeCall
}

func (s *recordingStore) record(op string, problems ...string) {
	var err error
	if len(problems) > 0 {
		err = errors.New(strings.Join(problems, "; "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, storeCall{op: op, invalid: err})
}

// take returns the calls since the last take.
func (s *recordingStore) take() []storeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

// check collects the problems of one parameter.
type check []string

func (c *check) that(ok bool, format string, args ...any) {
	if !ok {
		*c = append(*c, fmt.Sprintf(format, args...))
	}
}

func (c *check) jobID(id string) { c.that(leaseapi.ValidJobID(id), "jobId %q", id) }
func (c *check) owner(o string)  { c.that(leaseapi.ValidOwner(o), "owner %q", o) }
func (c *check) token(tok int64) { c.that(tok >= 1, "token %d", tok) }

func (c *check) ttl(d time.Duration, opts handlers.Options, zeroOK bool) {
	if d == 0 && zeroOK {
		return
	}
	c.that(d >= opts.MinTTL && d <= opts.MaxTTL && d%time.Millisecond == 0, "ttl %s outside [%s, %s] or not whole ms", d, opts.MinTTL, opts.MaxTTL)
}

func (c *check) limit(n int) { c.that(n >= 1 && n <= 1000, "limit %d", n) }

func (s *recordingStore) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	s.recordAcquire(p)
	return s.Store.Acquire(ctx, p)
}

// AcquireBatch records each item as an acquire.
func (s *recordingStore) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	for _, p := range ps {
		s.recordAcquire(p)
	}
	return s.Store.AcquireBatch(ctx, ps)
}

func (s *recordingStore) recordAcquire(p *leaseapi.AcquireParams) {
	var c check
	c.jobID(p.JobID)
	c.owner(p.Owner)
	c.ttl(p.TTL, s.opts, false)
	if p.Tick != nil {
		c.that(p.Tick.Location() == time.UTC && p.Tick.Equal(p.Tick.Truncate(time.Millisecond)), "tick %s not UTC milliseconds", p.Tick)
	}
	if p.Group != nil && *p.Group != "" {
		c.jobID(*p.Group)
	}
	s.record("acquire", c...)
	// Only the store knows whether the job has a schedule to pick a
	// nearest tick from, and whether a group exists.
	if (p.NearestTick && p.Schedule == "") || (p.Group != nil && *p.Group != "") {
		s.mu.Lock()
		s.calls[len(s.calls)-1].storeValidates = true
		s.mu.Unlock()
	}
}

func (s *recordingStore) Heartbeat(ctx context.Context, p *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
	s.recordHeartbeat(p)
	return s.Store.Heartbeat(ctx, p)
}

// HeartbeatBatch records each item as a heartbeat.
func (s *recordingStore) HeartbeatBatch(ctx context.Context, ps []*leaseapi.HeartbeatParams) []leaseapi.Answer {
	for _, p := range ps {
		s.recordHeartbeat(p)
	}
	return s.Store.HeartbeatBatch(ctx, ps)
}

func (s *recordingStore) recordHeartbeat(p *leaseapi.HeartbeatParams) {
	var c check
	c.jobID(p.JobID)
	c.owner(p.Owner)
	c.token(p.Token)
	c.ttl(p.TTL, s.opts, true)
	s.record("heartbeat", c...)
}

func (s *recordingStore) Release(ctx context.Context, p *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	var c check
	c.jobID(p.JobID)
	c.owner(p.Owner)
	c.token(p.Token)
	c.that(p.Outcome.ValidRelease(), "outcome %q", p.Outcome)
	s.record("release", c...)
	return s.Store.Release(ctx, p)
}

func (s *recordingStore) Revoke(ctx context.Context, p *leaseapi.RevokeParams) (leaseapi.Lease, error) {
	var c check
	c.jobID(p.JobID)
	s.record("revoke", c...)
	return s.Store.Revoke(ctx, p)
}

func (s *recordingStore) Repair(ctx context.Context, p *leaseapi.RepairParams) (leaseapi.Lease, error) {
	var c check
	c.jobID(p.JobID)
	c.that(p.Window > 0 && p.Retention > 0, "window %s, retention %s", p.Window, p.Retention)
	s.record("repair", c...)
	return s.Store.Repair(ctx, p)
}

func (s *recordingStore) Get(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	var c check
	c.jobID(jobID)
	s.record("get", c...)
	return s.Store.Get(ctx, jobID)
}

func (s *recordingStore) List(ctx context.Context, p *leaseapi.ListParams) (leaseapi.LeasePage, error) {
	var c check
	c.that(p.State == "" || p.State.Valid(), "state %q", p.State)
	if p.Owner != "" {
		c.owner(p.Owner)
	}
	c.that(len(p.Prefix) <= 128 && strings.Trim(p.Prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == "", "prefix %q", p.Prefix)
	if p.After != "" {
		c.jobID(p.After)
	}
	c.limit(p.Limit)
	s.record("list", c...)
	return s.Store.List(ctx, p)
}

func (s *recordingStore) Runs(ctx context.Context, jobID string, limit int) ([]leaseapi.Run, error) {
	var c check
	c.jobID(jobID)
	c.limit(limit)
	s.record("runs", c...)
	return s.Store.Runs(ctx, jobID, limit)
}

func (s *recordingStore) PutPolicy(ctx context.Context, p *leaseapi.PutPolicyParams) (leaseapi.JobPolicy, error) {
	var c check
	c.jobID(p.JobID)
	pol := &p.Policy
	count := func(field string, n int) { c.that(n >= 0 && n <= 100, "%s %d", field, n) }
	runtime := func(field string, d time.Duration) {
		c.that(d >= 0 && d <= 7*24*time.Hour && d%time.Millisecond == 0, "%s %s", field, d)
	}
	count("consecutiveFailures", pol.ConsecutiveFailures)
	count("missedTicks", pol.MissedTicks)
	count("recoveryThreshold", pol.RecoveryThreshold)
	runtime("maxRuntime", pol.MaxRuntime)
	runtime("minRuntime", pol.MinRuntime)
	c.that(pol.MaxRuntime == 0 || pol.MinRuntime < pol.MaxRuntime, "minRuntime %s, maxRuntime %s", pol.MinRuntime, pol.MaxRuntime)
	if r := pol.FailureRate; r != nil {
		c.that(r.Threshold > 0 && r.Threshold <= 1 && r.Runs >= 1 && r.Runs <= 64, "failureRate %+v", *r)
	}
	c.that(pol.RealertAfter == 0 || pol.RealertAfter >= time.Minute && pol.RealertAfter <= 30*24*time.Hour && pol.RealertAfter%time.Millisecond == 0,
		"realertAfter %s", pol.RealertAfter)
	c.that(pol.ConsecutiveFailures+pol.MissedTicks > 0 || pol.FailureRate != nil || pol.MaxRuntime+pol.MinRuntime > 0, "no condition")
	c.that(p.By != "", "no By")
	s.record("put_policy", c...)
	return s.Store.PutPolicy(ctx, p)
}

func (s *recordingStore) Policy(ctx context.Context, jobID string) (leaseapi.JobPolicy, error) {
	var c check
	c.jobID(jobID)
	s.record("policy", c...)
	return s.Store.Policy(ctx, jobID)
}

func (s *recordingStore) DeletePolicy(ctx context.Context, jobID string) error {
	var c check
	c.jobID(jobID)
	s.record("delete_policy", c...)
	return s.Store.DeletePolicy(ctx, jobID)
}

// fuzzBundle is one handler over a recorded real SQLite store.
type fuzzBundle struct {
	handler http.Handler
	store   *recordingStore
}

// fuzzOptions are the production TTL bounds. The request timeout is long: a
// fuzzing machine is busy, and a 503 from a slow store would be reported as
// a 5xx for the input.
func fuzzOptions() handlers.Options {
	opts := defaultOptions()
	opts.RequestTimeout = time.Minute
	opts.Open = true // httptest's requests come from 192.0.2.1 to example.com
	return opts
}

// newFuzzBundle opens a new SQLite store in f's directory (one per fuzz
// worker process), holds fuzzHeld in it, and serves it with opts.
func newFuzzBundle(f *testing.F, opts handlers.Options) *fuzzBundle {
	f.Helper()
	return newFuzzBundleWith(f, opts, nil)
}

// newFuzzBundleWith is newFuzzBundle; configure, when not nil, completes
// opts with the store (its credentials, its webhooks) before the handler is
// built.
func newFuzzBundleWith(f *testing.F, opts handlers.Options, configure func(*handlers.Options, *sqlite.Store)) *fuzzBundle {
	f.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(f.TempDir(), "fuzz.db")})
	if err != nil {
		f.Fatalf("open sqlite: %v", err)
	}
	f.Cleanup(func() {
		if err := s.Close(); err != nil {
			f.Errorf("close sqlite: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		f.Fatalf("migrate sqlite: %v", err)
	}
	if _, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: fuzzHeld, Owner: "a", TTL: time.Hour}); err != nil {
		f.Fatalf("hold %s: %v", fuzzHeld, err)
	}
	if configure != nil {
		configure(&opts, s)
	}
	rec := &recordingStore{Store: s, opts: opts}
	return &fuzzBundle{handler: handlers.New(rec, opts), store: rec}
}

// serve runs req through the handler and checks the response; input is
// what the fuzzer controls (a leak marker in it may be echoed).
func (b *fuzzBundle) serve(t *testing.T, req *http.Request, input string) *httptest.ResponseRecorder {
	t.Helper()
	b.store.take()
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	checkFuzzResponse(t, req, rec, b.store.take(), input)
	return rec
}

// refusalCodes are the problem codes the handlers decide before any store
// call; a request refused with one of them must not have reached the store.
var refusalCodes = []string{
	api.CodeInvalidRequest, api.CodeUnauthorized, api.CodeForbidden, api.CodeMethodNotAllowed,
	api.CodePayloadTooLarge, api.CodeUnsupportedMediaType, api.CodeFeatureDisabled,
}

// problemStatus is the status of every problem code.
var problemStatus = map[string]int{
	api.CodeInvalidRequest:       http.StatusBadRequest,
	api.CodeUnauthorized:         http.StatusUnauthorized,
	api.CodeForbidden:            http.StatusForbidden,
	api.CodeNotFound:             http.StatusNotFound,
	api.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	api.CodeLeaseHeld:            http.StatusConflict,
	api.CodeTickDone:             http.StatusConflict,
	api.CodeLeaseLost:            http.StatusConflict,
	api.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	api.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	api.CodeInternal:             http.StatusInternalServerError,
	api.CodeUnavailable:          http.StatusServiceUnavailable,
	api.CodeOverloaded:           http.StatusServiceUnavailable,
	api.CodeRateLimited:          http.StatusTooManyRequests,
	api.CodeJobPaused:            http.StatusConflict,
	api.CodeTickAhead:            http.StatusConflict,
	api.CodeGroupFull:            http.StatusConflict,
	api.CodeCredentialExists:     http.StatusConflict,
	api.CodePolicyNotFound:       http.StatusNotFound,
	api.CodeTooSoon:              http.StatusConflict,
	api.CodeFeatureDisabled:      http.StatusBadRequest,
}

// leakMarkers must never appear in a response unless the client sent them.
var leakMarkers = []string{"sql", "pq:", "goroutine", ".go:", "postgres", "runtime.", "panic", "driver"}

// checkFuzzResponse holds one response to the fuzz properties.
func checkFuzzResponse(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder, calls []storeCall, input string) {
	t.Helper()
	for _, c := range calls {
		if c.invalid != nil {
			t.Fatalf("%s %s: invalid input reached the store (%s): %v", req.Method, req.URL, c.op, c.invalid)
		}
	}
	status, body := rec.Code, rec.Body.Bytes()
	ct := rec.Header().Get("Content-Type")
	switch {
	case status >= 500:
		t.Fatalf("%s %s: status %d for client input\n%s", req.Method, req.URL, status, body)
	case status >= 200 && status < 300:
		checkSuccess(t, req, ct, body)
		return
	case status < 400 && (req.Method == http.MethodGet || req.Method == http.MethodHead) && rec.Header().Get("Location") == ui.Prefix:
		return // the way to the console (GET /)
	case status < 400:
		t.Fatalf("%s %s: status %d, want a success, the console's redirect or a 4xx problem", req.Method, req.URL, status)
	}

	if ct != api.ProblemContentType {
		t.Fatalf("%s %s: status %d with Content-Type %q, want %s", req.Method, req.URL, status, ct, api.ProblemContentType)
	}
	if len(body) > 1024 {
		t.Errorf("%s %s: problem of %d bytes, want at most 1 KiB\n%s", req.Method, req.URL, len(body), body)
	}
	var p api.Problem
	if err := strictDecode(body, &p); err != nil {
		t.Fatalf("%s %s: problem does not decode: %v\n%s", req.Method, req.URL, err, body)
	}
	leaseCode := checkProblem(t, req.Method+" "+req.URL.String(), status, p)
	if slices.Contains(refusalCodes, p.Code) && len(calls) > 0 &&
		!(p.Code == api.CodeInvalidRequest && len(calls) == 1 && calls[0].storeValidates) {
		t.Fatalf("%s %s: refused with %s after calling the store (%s)", req.Method, req.URL, p.Code, calls[0].op)
	}
	if leaseCode && len(calls) == 0 {
		t.Errorf("%s %s: 409 without a store call", req.Method, req.URL)
	}
	lower, in := strings.ToLower(string(body)), strings.ToLower(input)
	for _, leak := range leakMarkers {
		if strings.Contains(lower, leak) && !strings.Contains(in, leak) {
			t.Errorf("%s %s: problem leaks %q: %s", req.Method, req.URL, leak, body)
		}
	}
}

// checkProblem holds problem p, answered with status (by where), to the
// properties of every problem, and tells whether its code is about a lease.
func checkProblem(t *testing.T, where string, status int, p api.Problem) (leaseCode bool) {
	t.Helper()
	if want, ok := problemStatus[p.Code]; !ok || want != status || p.Status != status {
		t.Fatalf("%s: status %d with problem code %q and status %d", where, status, p.Code, p.Status)
	}
	if p.Type != api.ProblemTypePrefix+p.Code || p.Title == "" || p.Detail == "" {
		t.Errorf("%s: incomplete problem %+v", where, p)
	}
	// A lease rides only on a 409, always on the codes about a lease; a
	// tick_ahead carries one when the job has one; credential_exists and
	// idempotency_key_in_flight are about no lease.
	leaseCode = slices.Contains([]string{api.CodeLeaseHeld, api.CodeLeaseLost, api.CodeTickDone, api.CodeJobPaused, api.CodeTooSoon}, p.Code)
	if p.Lease != nil && status != http.StatusConflict || leaseCode && p.Lease == nil {
		t.Errorf("%s: status %d, code %s with lease %+v; a 409 about a lease, and only a 409, carries the lease", where, status, p.Code, p.Lease)
	}
	return leaseCode
}

// checkBatch holds each result of a batch's answer to the properties of a
// single call's answer: no 5xx (the store is up), a lease exactly with 200,
// else a problem of that status.
func checkBatch(t *testing.T, req *http.Request, res *api.BatchResponse) {
	t.Helper()
	if len(res.Results) == 0 {
		t.Fatalf("%s %s: a batch answered without results", req.Method, req.URL)
	}
	for i, r := range res.Results {
		where := fmt.Sprintf("%s %s: results[%d] (job %q)", req.Method, req.URL, i, r.JobID)
		switch {
		case !leaseapi.ValidJobID(r.JobID):
			t.Errorf("%s: invalid job id", where)
		case r.Status == http.StatusOK && (r.Lease == nil || r.Problem != nil):
			t.Errorf("%s: 200 without its lease alone", where)
		case r.Status != http.StatusOK && (r.Lease != nil || r.Problem == nil):
			t.Errorf("%s: status %d without its problem alone", where, r.Status)
		case r.Problem != nil:
			if r.Status >= 500 {
				t.Fatalf("%s: status %d for client input: %+v", where, r.Status, r.Problem)
			}
			checkProblem(t, where, r.Status, *r.Problem)
		}
	}
}

// checkSuccess decodes a 2xx body strictly into the api type of its route,
// so that every value the server sends, times included, is one a client can
// read back.
func checkSuccess(t *testing.T, req *http.Request, ct string, body []byte) {
	t.Helper()
	if ct != "application/json" {
		if req.URL.Path == "/openapi.yaml" || req.URL.Path == "/metrics" {
			return
		}
		t.Fatalf("%s %s: 2xx with Content-Type %q", req.Method, req.URL, ct)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatalf("%s %s: 2xx body is not a JSON object: %v\n%s", req.Method, req.URL, err, body)
	}
	var v any
	switch {
	case keys["leases"] != nil:
		v = &api.LeaseList{}
	case keys["owed"] != nil:
		v = &api.OwedList{}
	case keys["results"] != nil:
		v = &api.BatchResponse{}
	case keys["secret"] != nil:
		v = &api.CreatedWebhook{}
	case keys["token"] != nil && keys["role"] != nil:
		v = &api.CreatedCredential{}
	case keys["runs"] != nil:
		v = &api.RunList{}
	case keys["statusSince"] != nil:
		v = &api.JobPolicy{}
	case keys["jobId"] != nil:
		v = &api.Lease{}
	case keys["version"] != nil:
		v = &api.Health{}
	default:
		v = &api.Status{}
	}
	if err := strictDecode(body, v); err != nil {
		t.Fatalf("%s %s: 2xx body does not decode into %T: %v\n%s", req.Method, req.URL, v, err, body)
	}
	if res, ok := v.(*api.BatchResponse); ok {
		checkBatch(t, req, res)
	}
	if l, ok := v.(*api.LeaseList); ok && l.NextCursor != nil {
		id, err := base64.RawURLEncoding.Strict().DecodeString(*l.NextCursor)
		if err != nil || !leaseapi.ValidJobID(string(id)) {
			t.Errorf("%s %s: nextCursor %q does not encode a job id", req.Method, req.URL, *l.NextCursor)
		}
	}
}

// strictDecode decodes one JSON value into v, refusing unknown fields.
func strictDecode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// bodySeed is a request body with its headers, from badCases or valid.
type bodySeed struct {
	contentType, contentEncoding string
	body                         []byte
}

// bodySeeds are the bodies of the badCases that post to suffix, plus the
// given valid bodies.
func bodySeeds(suffix string, valid ...string) []bodySeed {
	var seeds []bodySeed
	for _, v := range valid {
		seeds = append(seeds, bodySeed{contentType: "application/json", body: []byte(v)})
	}
	for _, c := range badCases(fuzzFresh, fuzzHeld) {
		if c.req.method != http.MethodPost || !strings.HasSuffix(c.req.path, suffix) {
			continue
		}
		s := bodySeed{body: []byte(c.req.body)}
		if c.req.body != "" {
			s.contentType = "application/json"
		}
		if vs, ok := c.req.header["Content-Type"]; ok {
			s.contentType = strings.Join(vs, "")
		}
		s.contentEncoding = c.req.header.Get("Content-Encoding")
		seeds = append(seeds, s)
	}
	return seeds
}

// fuzzBody fuzzes the body of POST /leases/{job}{suffix}; job returns the
// job id of each input.
func fuzzBody(f *testing.F, job func() string, suffix string, valid ...string) {
	for _, s := range bodySeeds(suffix, valid...) {
		f.Add(s.contentType, s.contentEncoding, s.body)
	}
	b := newFuzzBundle(f, fuzzOptions())
	f.Fuzz(func(t *testing.T, contentType, contentEncoding string, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/leases/"+job()+suffix, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Content-Encoding", contentEncoding)
		b.serve(t, req, contentType+contentEncoding+string(body))
	})
}

func FuzzAcquireBody(f *testing.F) {
	// A new job for every input, so that every valid body is granted and
	// its values (tick, ttlMs) are stored and read back.
	var n atomic.Int64
	newJob := func() string { return fuzzFresh + "-" + strconv.FormatInt(n.Add(1), 10) }
	fuzzBody(f, newJob, "/acquire",
		`{"owner":"a"}`,
		`{"owner":"a","group":""}`,
		`{"owner":"a","group":"no-such-group"}`,
		`{"owner":"a","group":"-bad"}`,
		`{"owner":"a","minIntervalMs":60000}`,
		`{"owner":"a","minIntervalMs":0}`,
		`{"owner":"a","minIntervalMs":-1}`,
		`{"owner":"replica-1","ttlMs":30000,"tick":"2026-11-30T07:00:00Z"}`,
		`{"owner":"b","ttlMs":1000,"tick":"2026-11-30T07:00:00.123456789+05:30"}`,
		`{"owner":"a","tick":"0000-01-01T00:00:00+01:00"}`,
		`{"owner":"a","tick":"9999-12-31T23:59:59.999-01:00"}`,
		`{"owner":"a","nearestTick":true,"schedule":"CRON_TZ=Europe/Berlin 30 2 * * *"}`,
	)
}

func heldJob() string { return fuzzHeld }

func FuzzHeartbeatBody(f *testing.F) {
	fuzzBody(f, heldJob, "/heartbeat",
		`{"owner":"a","token":1}`,
		`{"owner":"a","token":1,"ttlMs":3600000}`,
		`{"owner":"b","token":2}`,
	)
}

func FuzzReleaseBody(f *testing.F) {
	fuzzBody(f, heldJob, "/release",
		`{"owner":"a","token":1}`,
		`{"owner":"a","token":1,"outcome":"failed"}`,
		`{"owner":"b","token":7,"outcome":"succeeded"}`,
	)
}

// FuzzPathAndQuery fuzzes the request line: any method and request target
// that net/http parses reaches the router as the server would hand it over.
// POSTs carry a valid body, so that only the path and query can be wrong.
func FuzzPathAndQuery(f *testing.F) {
	for _, c := range badCases(fuzzFresh, fuzzHeld) {
		f.Add(c.req.method, c.req.path)
	}
	cursor := base64.RawURLEncoding.EncodeToString([]byte(fuzzFresh))
	for _, target := range []string{
		"/leases", "/leases?limit=1&state=held&owner=a&prefix=fuzz-&cursor=" + cursor,
		"/leases?state=expired&limit=1000", "/leases/" + fuzzHeld, "/leases/" + fuzzHeld + "/runs?limit=5",
		"/leases/" + fuzzHeld + "/acquire", "/leases/" + fuzzHeld + "/heartbeat", "/leases/" + fuzzHeld + "/release",
		"/healthz", "/readyz", "/openapi.yaml", "/metrics", "/leases/%41/runs", "//leases", "/leases/a/../b",
		"/leases?prefix=" + strings.Repeat("p", 128), "/leases?cursor=" + base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("j", 128))),
		"*", "http://example.com/leases", "/leases/a;b", "/leases/a?limit=+1",
	} {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			f.Add(m, target)
		}
	}
	f.Add("PATCH", "/nope")
	f.Add("get", "/leases")
	f.Add("OPTIONS", "/leases/"+fuzzHeld)
	b := newFuzzBundle(f, fuzzOptions())
	f.Fuzz(func(t *testing.T, method, target string) {
		body := `{"owner":"fuzz"}`
		if !strings.HasSuffix(strings.SplitN(target, "?", 2)[0], "/acquire") {
			body = `{"owner":"a","token":1}`
		}
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: leaseapi\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", method, target, len(body), body)
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Skip("net/http refuses this request line before any handler")
		}
		// What the server sets; ReadRequest leaves it empty.
		req.RemoteAddr = "127.0.0.1:1"
		b.serve(t, req, method+target)
		checkCursor(t, req, b)
	})
}

// checkCursor: a cursor the server accepts is the canonical encoding of the
// job id the store got (checked through a second, identical request).
func checkCursor(t *testing.T, req *http.Request, b *fuzzBundle) {
	t.Helper()
	q, err := url.ParseQuery(req.URL.RawQuery)
	if err != nil || req.Method != http.MethodGet || req.URL.Path != "/leases" || !q.Has("cursor") {
		return
	}
	after, err := base64.RawURLEncoding.Strict().DecodeString(q.Get("cursor"))
	accepted := err == nil && leaseapi.ValidJobID(string(after))
	canonical := accepted && base64.RawURLEncoding.EncodeToString(after) == q.Get("cursor")
	if accepted != canonical {
		t.Errorf("cursor %q decodes to %q but is not its canonical encoding", q.Get("cursor"), after)
	}
}

// FuzzAuthorization fuzzes the Authorization header: only a configured
// token, after the scheme "Bearer" in any case and one space, gets in, and
// only the admin token may revoke.
func FuzzAuthorization(f *testing.F) {
	for _, h := range []string{
		"", "Bearer " + fuzzAPIToken, "bearer " + fuzzAPIToken, "Bearer " + fuzzAdminToken,
		"Basic YXBpLXRva2VuLTE6", "Bearer", "Bearer ", "Bearer  " + fuzzAPIToken, "Bearer " + fuzzAPIToken + " ",
		"Bearer api-token", "Bearer api-token-11", fuzzAPIToken, "Bearer\t" + fuzzAPIToken, "Bearer " + fuzzAPIToken + "\x00",
	} {
		f.Add(h, false)
		f.Add(h, true)
	}
	opts := fuzzOptions()
	opts.APITokens = []string{fuzzAPIToken}
	opts.AdminTokens = []string{fuzzAdminToken}
	b := newFuzzBundle(f, opts)
	f.Fuzz(func(t *testing.T, authorization string, revoke bool) {
		// A job that does not exist: a revoke that gets through is a 404
		// and changes nothing, so every input starts from the same store.
		method := http.MethodGet
		if revoke {
			method = http.MethodDelete
		}
		req := httptest.NewRequest(method, "/leases/"+fuzzFresh+"-auth", nil)
		req.Header["Authorization"] = []string{authorization}
		rec := b.serve(t, req, authorization)

		scheme, token, _ := strings.Cut(authorization, " ")
		role := "none"
		if strings.EqualFold(scheme, "Bearer") {
			switch token {
			case fuzzAPIToken:
				role = "api"
			case fuzzAdminToken:
				role = "admin"
			}
		}
		want := http.StatusNotFound // got through to the store
		switch {
		case role == "none":
			want = http.StatusUnauthorized
		case revoke && role != "admin":
			want = http.StatusForbidden
		}
		if rec.Code != want {
			t.Errorf("%s with Authorization %q: status %d, want %d", method, authorization, rec.Code, want)
		}
	})
}

// Kinds of error of FuzzWriteProblem.
const (
	errKindNotFound = iota
	errKindLeaseHeld
	errKindTickDone
	errKindLeaseLost
	errKindUnavailable
	errKindDeadline
	errKindCanceled
	errKindInternal
	errKindBareSentinel
	errKindJoined
	errKinds
)

// leakCanary prefixes the cause of every fuzzed error: it must never reach
// a response body.
const leakCanary = "zq-cause-"

// FuzzWriteProblem fuzzes the problem writer with every kind of error a
// store or handler returns, wrapped in any message, and any lease a store
// could return with a conflict.
func FuzzWriteProblem(f *testing.F) {
	for kind := range errKinds {
		f.Add(uint8(kind), `pq: relation "leases" does not exist`, "job", "holder", int64(7), int64(30_000), int64(12_345))
	}
	f.Add(uint8(errKindLeaseHeld), "", strings.Repeat("j", 128), strings.Repeat("o", 128), int64(1<<62), int64(3_600_000), int64(-1))
	f.Add(uint8(errKindLeaseHeld), "x", strings.Repeat("j", 128), strings.Repeat(`"`, 128), int64(1), int64(1), int64(1<<62))
	f.Add(uint8(errKindLeaseLost), "x", "job", `\u202e`, int64(1), int64(0), int64(-1<<62))
	f.Fuzz(func(t *testing.T, kind uint8, msg, jobID, owner string, token, ttlMs, expiresInMs int64) {
		now := time.Now()
		lease := leaseapi.Lease{
			JobID: jobID, Owner: owner, Token: token, State: leaseapi.StateHeld,
			AcquiredAt: now, RenewedAt: now,
			ExpiresAt: now.Add(time.Duration(expiresInMs) * time.Millisecond),
			TTL:       time.Duration(ttlMs) * time.Millisecond,
		}
		// A lease like the stores return: valid values, not the canary.
		validLease := leaseapi.ValidJobID(jobID) && leaseapi.ValidOwner(owner) && token >= 1 && ttlMs >= 1 &&
			!strings.Contains(jobID+owner, leakCanary)
		cause := errors.New(leakCanary + msg)
		conflict := func(sentinel error) error {
			return fmt.Errorf("%w: %w", &leaseapi.ConflictError{Err: sentinel, Lease: lease}, cause)
		}
		var (
			err        error
			wantCode   string
			retryAfter bool
		)
		switch kind % errKinds {
		case errKindNotFound:
			err, wantCode = fmt.Errorf("%w: %w", cause, leaseapi.ErrNotFound), api.CodeNotFound
		case errKindLeaseHeld:
			err, wantCode, retryAfter = conflict(leaseapi.ErrLeaseHeld), api.CodeLeaseHeld, true
		case errKindTickDone:
			err, wantCode = conflict(leaseapi.ErrTickDone), api.CodeTickDone
		case errKindLeaseLost:
			err, wantCode = conflict(leaseapi.ErrLeaseLost), api.CodeLeaseLost
		case errKindUnavailable:
			err, wantCode, retryAfter = fmt.Errorf("%w: %w", cause, leaseapi.ErrUnavailable), api.CodeUnavailable, true
		case errKindDeadline:
			err, wantCode, retryAfter = fmt.Errorf("%w: %w", cause, context.DeadlineExceeded), api.CodeUnavailable, true
		case errKindCanceled:
			err, wantCode, retryAfter = fmt.Errorf("%w: %w", cause, context.Canceled), api.CodeUnavailable, true
		case errKindInternal:
			err, wantCode = cause, api.CodeInternal
		case errKindBareSentinel:
			err, wantCode = fmt.Errorf("%w: %w", cause, leaseapi.ErrLeaseHeld), api.CodeInternal
		case errKindJoined:
			err, wantCode, retryAfter = errors.Join(cause, leaseapi.ErrUnavailable), api.CodeUnavailable, true
		}

		rec := httptest.NewRecorder()
		handlers.WriteProblem(rec, httptest.NewRequest(http.MethodGet, "/leases/job", nil), err)
		body := rec.Body.Bytes()
		if got := rec.Header().Get("Content-Type"); got != api.ProblemContentType {
			t.Fatalf("Content-Type %q", got)
		}
		if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(body)) {
			t.Errorf("Content-Length %q for %d bytes", got, len(body))
		}
		var p api.Problem
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("problem does not decode: %v\n%q", err, body)
		}
		if p.Code != wantCode || p.Status != rec.Code || problemStatus[p.Code] != rec.Code ||
			p.Type != api.ProblemTypePrefix+p.Code || p.Title == "" || p.Detail == "" {
			t.Fatalf("error kind %d: status %d, problem %+v; want code %s", kind%errKinds, rec.Code, p, wantCode)
		}
		if (rec.Code == http.StatusConflict) != (p.Lease != nil) {
			t.Errorf("status %d with lease %+v", rec.Code, p.Lease)
		}
		ra := rec.Header().Get("Retry-After")
		if n, err := strconv.Atoi(ra); retryAfter != (err == nil && n >= 1) || (!retryAfter && ra != "") {
			t.Errorf("error kind %d: Retry-After %q, want present=%v (whole seconds >= 1)", kind%errKinds, ra, retryAfter)
		}
		if p.Lease != nil && !validLease {
			return // no store returns such a lease; only the checks above apply
		}
		if bytes.Contains(body, []byte(leakCanary)) {
			t.Errorf("the cause leaks into the body: %s", body)
		}
		// At most 1 KiB besides the lease a conflict carries: the lease is as
		// long as its job id, owner, schedule and pause reason make it.
		if n := len(body) - len(leaseJSON(p.Lease)); n > 1024 {
			t.Errorf("problem of %d bytes besides its lease, want at most 1 KiB\n%s", n, body)
		}
		if p.Lease != nil && (p.Lease.JobID != jobID || p.Lease.Owner != owner || p.Lease.Token != token) {
			t.Errorf("lease %+v, want %s/%s/%d", p.Lease, jobID, owner, token)
		}
	})
}

// leaseJSON is l as a problem carries it, or nothing.
func leaseJSON(l *api.Lease) []byte {
	if l == nil {
		return nil
	}
	return l.AppendJSON(nil)
}
