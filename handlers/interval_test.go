package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestMinIntervalOverHTTP: an acquire with minIntervalMs is refused 409
// too_soon with the lease and a Retry-After of the interval's rest while
// the job's previous grant started less than that long ago; the holder's
// renewal and the first grant are not; 0 is no minimum; a value out of
// range is 400 invalid_request naming the field. A batch item is answered
// as its single call.
func TestMinIntervalOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("interval")
		const hour = int64(3_600_000)
		first := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr(hour)}))
		if renewed := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr(hour)})); renewed.Token != first.Token {
			t.Errorf("the holder's renewal: token %d, want %d", renewed.Token, first.Token)
		}
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", MinIntervalMs: ptr(hour)}), http.StatusConflict, api.CodeLeaseHeld)
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: first.Token}))

		resp := b.acquire(t, job, api.AcquireRequest{Owner: "b", MinIntervalMs: ptr(hour)})
		p := wantProblem(t, resp, http.StatusConflict, api.CodeTooSoon)
		retry, err := strconv.Atoi(resp.header.Get("Retry-After"))
		if err != nil || retry < 3590 || retry > 3600 {
			t.Errorf("Retry-After %q, want the seconds left of an hour from the grant", resp.header.Get("Retry-After"))
		}
		if p.Lease == nil || p.Lease.Token != first.Token || p.Lease.State != leaseapi.StateReleased ||
			!strings.Contains(p.Detail, "minIntervalMs (3600000)") || !strings.Contains(p.Detail, api.FormatTime(first.AcquiredAt.Time)) {
			t.Errorf("too_soon: problem %+v; want the released lease, a detail naming the interval and the grant's start", p)
		}
		if got := wantLease(t, b.get(t, "/leases/"+job)); got.Token != first.Token || got.State != leaseapi.StateReleased {
			t.Errorf("after too_soon the lease reads back as token %d %s, want it untouched", got.Token, got.State)
		}
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "too_soon"}); got != 1 {
			t.Errorf(`leaseapi_acquire_total{result="too_soon"}: got %v, want 1`, got)
		}

		// A batch item is answered as its single call, retryAfter too.
		res := wantResults(t, b.acquireBatch(t, api.AcquireBatchRequest{Owner: ptr("b"), MinIntervalMs: ptr(hour),
			Items: []api.AcquireBatchItem{{JobID: job}}}, nil), job)
		sameProblem(t, wantItemProblem(t, res[0], http.StatusConflict, api.CodeTooSoon), resp)
		if res[0].RetryAfter == nil || *res[0].RetryAfter < 3590 {
			t.Errorf("the item's retryAfter %v, want its single call's", res[0].RetryAfter)
		}
		// The item's own 0 wins over the default: no minimum, granted.
		res = wantResults(t, b.acquireBatch(t, api.AcquireBatchRequest{Owner: ptr("b"), MinIntervalMs: ptr(hour),
			Items: []api.AcquireBatchItem{{JobID: job, MinIntervalMs: ptr[int64](0)}}}, nil), job)
		if l := wantItemLease(t, res[0]); l.Token != first.Token+1 {
			t.Errorf("the item without a minimum: token %d, want %d", l.Token, first.Token+1)
		}

		for _, ms := range []int64{-1, 2_678_400_001, 1 << 62} {
			p := wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire",
				body: `{"owner": "c", "minIntervalMs": ` + strconv.FormatInt(ms, 10) + `}`}), http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, "minIntervalMs") {
				t.Errorf("minIntervalMs %d: detail %q does not name the field", ms, p.Detail)
			}
		}
	})
}

// TestMinIntervalGate: while the database is not finalized for the rule,
// an acquire with minIntervalMs is 400 feature_disabled, whose detail tells
// the operator what to do, and reaches no store; a batch item likewise,
// alone; without the field, or with 0, it is decided. Finalized, the same
// acquire is decided.
func TestMinIntervalGate(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	gate := leaseapi.NewGate(0)
	opts.Gate = gate
	b := setup(t, openSQLite(t), opts)
	job, other := b.job("gated"), b.job("other")

	p := wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr[int64](60000)}),
		http.StatusBadRequest, api.CodeFeatureDisabled)
	if !strings.Contains(p.Detail, "minIntervalMs") || !strings.Contains(p.Detail, "leaseapi upgrade finalize") ||
		!strings.Contains(p.Detail, leaseapi.FeatureMinInterval.Release) {
		t.Errorf("feature_disabled: detail %q; want the field, the release and the finalize step named", p.Detail)
	}
	wantProblem(t, b.get(t, "/leases/"+job), http.StatusNotFound, api.CodeNotFound)
	// An invalid value is invalid whatever the gate says.
	wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire",
		body: `{"owner": "a", "minIntervalMs": -5}`}), http.StatusBadRequest, api.CodeInvalidRequest)

	res := wantResults(t, b.acquireBatch(t, api.AcquireBatchRequest{Owner: ptr("a"),
		Items: []api.AcquireBatchItem{{JobID: job, MinIntervalMs: ptr[int64](60000)}, {JobID: other}}}, nil), job, other)
	sameProblem(t, wantItemProblem(t, res[0], http.StatusBadRequest, api.CodeFeatureDisabled),
		b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr[int64](60000)}))
	wantItemLease(t, res[1])
	wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr[int64](0)}))

	gate.Set(leaseapi.FeatureLevel)
	if l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", MinIntervalMs: ptr[int64](60000)})); l.Owner != "a" {
		t.Errorf("finalized: the holder's renewal answered %+v", l)
	}
	wantProblem(t, b.acquire(t, other, api.AcquireRequest{Owner: "b", MinIntervalMs: ptr[int64](60000)}), http.StatusConflict, api.CodeLeaseHeld)
}
