//go:build chaos_mutants

package postgres_test

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestMutantM14KeepsThePolicyState: a job with the policy
// consecutiveFailures 1 whose run failed is alerting in a production
// store; in a store of mutant M14 the decision's state is not written, so
// the job stays ok (and its lease shows no alert).
func TestMutantM14KeepsThePolicyState(t *testing.T) {
	for _, tc := range []struct{ mutant, want string }{{"", "alerting"}, {"M14", "ok"}} {
		t.Run("mutant="+tc.mutant, func(t *testing.T) {
			t.Setenv("LEASEAPI_MUTANT", tc.mutant)
			ctx := t.Context()
			store, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t), MaxOpenConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			job := "m14-" + tc.want
			l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: leaseapi.AlertPolicy{ConsecutiveFailures: 1}}); err != nil {
				t.Fatal(err)
			}
			released, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeFailed})
			if err != nil {
				t.Fatal(err)
			}
			jp, err := store.Policy(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if string(jp.State.Status) != tc.want || string(released.AlertStatus) != tc.want {
				t.Errorf("after a failed run: policy %s, the release's lease %q; want %s", jp.State.Status, released.AlertStatus, tc.want)
			}
		})
	}
}
