package repo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestCoalescedPostgresStore holds the coalescing decorator to the whole
// store contract. Not parallel, like TestPostgresStore: the suite prunes.
func TestCoalescedPostgresStore(t *testing.T) {
	dsn := repotest.PostgresURL(t)
	repotest.RunStoreSuite(t, func(t *testing.T, o repotest.StoreOptions) leaseapi.Store {
		store, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxTickAhead: o.MaxTickAhead})
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		return repo.CoalesceAcquires(store, o.MaxTickAhead)
	})
}

// TestCoalescedHerd fires many owners at a few jobs at once, as replicas do
// at a tick, and checks that each job has exactly one winner and that every
// refusal names that winner.
func TestCoalescedHerd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t)})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	store := repo.CoalesceAcquires(pg, 0)
	t.Cleanup(func() { _ = store.Close() })

	const jobs, replicas = 5, 40
	tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	type result struct {
		job, owner string
		lease      leaseapi.Lease
		err        error
	}
	results := make(chan result, jobs*replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for j := range jobs {
		for r := range replicas {
			job, owner := fmt.Sprintf("herd-%d", j), fmt.Sprintf("replica-%d", r)
			wg.Go(func() {
				<-start
				l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute, Tick: &tick})
				results <- result{job, owner, l, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)

	winners := map[string]string{}
	var refusals []result
	for r := range results {
		var conflict *leaseapi.ConflictError
		switch {
		case r.err == nil:
			if w, ok := winners[r.job]; ok {
				t.Errorf("job %s granted to %s and %s", r.job, w, r.owner)
			}
			winners[r.job] = r.owner
		case errors.As(r.err, &conflict) && errors.Is(r.err, leaseapi.ErrLeaseHeld):
			refusals = append(refusals, result{r.job, r.owner, conflict.Lease, r.err})
		default:
			t.Errorf("acquire %s by %s: %v", r.job, r.owner, r.err)
		}
	}
	if len(winners) != jobs {
		t.Errorf("got %d jobs granted, want %d", len(winners), jobs)
	}
	for _, r := range refusals {
		if r.lease.Owner != winners[r.job] || r.lease.State != leaseapi.StateHeld {
			t.Errorf("refusal of %s to %s names %s (%s), want held by the winner %s",
				r.job, r.owner, r.lease.Owner, r.lease.State, winners[r.job])
		}
	}
}
