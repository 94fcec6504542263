package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

// TestRepairOverHTTP: POST /leases/{jobId}/repair mends a job that a grant
// of a tick two days ahead, released succeeded, had made refuse every
// later tick (tick_done): the next tick is granted, the run ahead is listed
// discarded (valid against the spec), the repair is logged with who and
// why, and a second repair changes nothing.
func TestRepairOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("repair")

		// The fast replica's grant, made through the store: the marks such a
		// replica left before ticks ahead were refused.
		probe := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "probe"}))
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "probe", Token: probe.Token}))
		ahead := probe.AcquiredAt.Add(48 * time.Hour).Truncate(time.Second)
		l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: "fast", TTL: time.Minute, Tick: &ahead})
		if err != nil {
			t.Fatalf("Acquire of the tick ahead: %v", err)
		}
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "fast", Token: l.Token}))
		next := api.FormatTime(probe.AcquiredAt.Truncate(time.Second).Add(time.Second))
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &next}), http.StatusConflict, api.CodeTickDone)

		repaired := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: `{"reason":"clock two days fast"}`}))
		// No tick succeeded before: the last completed tick goes back to the
		// oldest kept history, now - the run retention (7 days by default).
		floor := probe.AcquiredAt.Add(-handlers.DefaultRepairRetention)
		if lct := repaired.LastCompletedTick; lct == nil || lct.Before(floor) || lct.After(floor.Add(time.Minute)) || repaired.Token != l.Token {
			t.Errorf("repair: lastCompletedTick %v, token %d; want about %v, %d", lct, repaired.Token, floor, l.Token)
		}
		if lines := b.logs.lines(t, map[string]any{"msg": "job repaired", "job_id": job, "reason": "clock two days fast"}); len(lines) != 1 {
			t.Errorf("log of the repair: got %d lines, want 1", len(lines))
		}
		var runs api.RunList
		decode(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + job + "/runs"}).body, &runs)
		if len(runs.Runs) != 2 || runs.Runs[0].Outcome != leaseapi.OutcomeDiscarded {
			t.Errorf("runs after the repair: %+v, want the run ahead discarded first", runs.Runs)
		}
		var recent api.RecentRunList
		decode(t, b.do(t, request{method: http.MethodGet, path: "/runs?outcome=discarded,succeeded"}).body, &recent)
		wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &next}))

		// Idempotent, and an empty body is a repair without a reason.
		again := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: `{}`}))
		if again.Token != repaired.Token+1 || again.State != "held" {
			t.Errorf("second repair: token %d, state %s; want the new grant %d held, untouched", again.Token, again.State, repaired.Token+1)
		}

		wantProblem(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + b.job("nobody") + "/repair", body: `{}`}),
			http.StatusNotFound, api.CodeNotFound)
		before := b.snapshot(t)
		for _, tc := range []struct{ name, body string }{
			{"ReasonTooLong", `{"reason":"` + strings.Repeat("x", 257) + `"}`},
			{"ReasonControl", `{"reason":"a\nb"}`},
			{"UnknownField", `{"window":"1h"}`},
			{"NoBody", ``},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := request{method: http.MethodPost, path: "/leases/" + job + "/repair", body: tc.body}
				if tc.body == "" {
					req.header = http.Header{"Content-Type": {"application/json"}}
				}
				wantProblem(t, b.doInvalid(t, req), http.StatusBadRequest, api.CodeInvalidRequest)
			})
		}
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a refused repair changed the store")
		}
	})
}
