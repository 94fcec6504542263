package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/jobs"
)

// TestRunAgainstALaterRelease: the runner against the answers a later
// leaseapi may give, which API v1 allows (docs/upgrading.md). A field it
// does not know, in every object of every answer, changes nothing: the run
// is acquired, run and released. A refusal with a code it does not know is
// read by its status: the job is not run, and Run returns the *APIError
// with the status and the code; it is neither a skip (a refusal the runner
// can name) nor retried (a 409 is no outage).
func TestRunAgainstALaterRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.newFields.Store(true)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	tick := epoch.Truncate(time.Minute)

	rep, err := r.Run(context.Background(), "report", tick, func(ctx context.Context) error {
		if l, ok := jobs.LeaseFromContext(ctx); !ok || l.Owner != "replica-a" || !l.Tick.Equal(tick) {
			t.Errorf("the lease in the job: %+v, %v; want replica-a's for %s", l, ok, tick)
		}
		return nil
	})
	if err != nil || rep.Result != jobs.ResultSucceeded || rep.Token != 1 {
		t.Fatalf("Run with new fields in every answer: got %+v, %v; want succeeded with token 1", rep, err)
	}
	if n := b.faults.answered("release", http.StatusOK); n != 1 {
		t.Fatalf("releases answered 200: %d, want 1", n)
	}
	// The answers did carry the new field, and the generated client reads
	// them as before.
	resp, err := b.client.GetLeaseWithResponse(context.Background(), "report")
	if err != nil || resp.JSON200 == nil || !bytes.Contains(resp.Body, []byte(`"someNewField"`)) || resp.JSON200.Owner != "replica-a" {
		t.Fatalf("get lease: %v, %s; want replica-a's lease with someNewField", err, resp.Body)
	}

	b.faults.newRefusals.Store(1)
	called := false
	rep, err = r.Run(context.Background(), "report", tick.Add(time.Minute), func(context.Context) error {
		called = true
		return nil
	})
	apiErr, ok := errors.AsType[*jobs.APIError](err)
	if !ok || apiErr.StatusCode != http.StatusConflict || apiErr.Code != "some_new_refusal" {
		t.Fatalf("Run refused some_new_refusal: got %v (%T), want a *jobs.APIError 409 some_new_refusal", err, err)
	}
	if called || rep.Token != 0 || jobs.Skipped(err) || errors.Is(err, leaseapi.ErrUnavailable) {
		t.Fatalf("Run refused some_new_refusal: job called %v, report %+v, skipped %v, unavailable %v; want none of them",
			called, rep, jobs.Skipped(err), errors.Is(err, leaseapi.ErrUnavailable))
	}
	if n := b.faults.answered("acquire", http.StatusConflict); n != 1 {
		t.Fatalf("acquires answered 409: %d, want 1 (a 409 is not retried)", n)
	}
}
