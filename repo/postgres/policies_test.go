package postgres_test

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestPolicyDecidedAfterACrash: a release that committed but whose
// instance stopped before deciding the job's policy left the policy due
// (the release statement's mark), and the next sweep, of any instance,
// decides it.
func TestPolicyDecidedAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := postgres.Open(ctx, postgres.Config{DSN: repotest.NewPostgresURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	job, owner := "crash:policy", "replica-a"
	l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: leaseapi.AlertPolicy{ConsecutiveFailures: 1}}); err != nil {
		t.Fatal(err)
	}
	released, err := store.ReleaseOnly(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
	if err != nil {
		t.Fatal(err)
	}
	if released.AlertStatus != leaseapi.AlertOK {
		t.Fatalf("release statement alone: lease shows %q, want ok (not decided yet)", released.AlertStatus)
	}
	res, err := store.SweepTicks(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if res.Policies != 1 {
		t.Errorf("sweep decided %d policies, want 1", res.Policies)
	}
	jp, err := store.Policy(ctx, job)
	if err != nil || jp.State.Status != leaseapi.AlertAlerting {
		t.Fatalf("after the sweep: policy %+v, %v; want alerting", jp.State, err)
	}
	// Decided, the mark is gone: the next sweep decides nothing.
	if res, err = store.SweepTicks(ctx, 100); err != nil || res.Policies != 0 {
		t.Fatalf("second sweep: decided %d policies, %v; want 0", res.Policies, err)
	}
}
