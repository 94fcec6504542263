package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// rowLocker returns the xmax of a job's lease row: the transaction that last
// updated or locked it. A losing acquire on the naive path takes the row
// lock (ON CONFLICT DO UPDATE locks even when its WHERE is false), which
// sets xmax; on the fast path it must leave the row untouched.
func rowLocker(t *testing.T, db *sqlx.DB, jobID string) string {
	t.Helper()
	var xmax string
	if err := db.Get(&xmax, `SELECT xmax::text FROM leases WHERE job_id = $1`, jobID); err != nil {
		t.Fatalf("read xmax of %q: %v", jobID, err)
	}
	return xmax
}

func TestPostgresLosingAcquireTakesNoLock(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	db := openDB(t, dsn)
	ctx := context.Background()

	for _, tc := range []struct {
		name       string
		naive      bool
		wantLocked bool
	}{
		{"FastPath", false, false},
		{"NaivePath", true, true}, // the control: proves the probe can see a lock
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := postgres.OpenVariant(ctx, postgres.Config{DSN: dsn}, tc.naive, false)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = store.Close() })
			jobID := "nolock-" + tc.name
			tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
			if _, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: "winner", TTL: time.Minute, Tick: &tick}); err != nil {
				t.Fatalf("winner's acquire: %v", err)
			}
			before := rowLocker(t, db, jobID)
			_, err = store.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: "loser", TTL: time.Minute, Tick: &tick})
			if !errors.Is(err, leaseapi.ErrLeaseHeld) {
				t.Fatalf("loser's acquire: got %v, want ErrLeaseHeld", err)
			}
			after := rowLocker(t, db, jobID)
			if locked := after != before; locked != tc.wantLocked {
				t.Errorf("row xmax before %s, after %s: locked = %v, want %v", before, after, locked, tc.wantLocked)
			}
		})
	}
}

// TestPostgresRefusalsShowAHeldLease checks, under churn, that every
// lease_held refusal carries a lease that was held by someone else when the
// refusal was decided: the fast path never refuses a grantable lease.
func TestPostgresRefusalsShowAHeldLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })

	const owners, rounds = 8, 40
	jobID := "refusals-" + t.Name()
	var wg sync.WaitGroup
	errs := make(chan error, owners*rounds)
	for i := range owners {
		owner := fmt.Sprintf("owner-%d", i)
		wg.Go(func() {
			for range rounds {
				l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: jobID, Owner: owner, TTL: time.Minute})
				var conflict *leaseapi.ConflictError
				switch {
				case err == nil:
					_, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: jobID, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
					if errors.Is(err, leaseapi.ErrUnavailable) {
						// The lease stays held by owner, whose next round
						// renews it and releases again.
						t.Logf("release by %s: %v", owner, err)
					} else if err != nil {
						errs <- fmt.Errorf("release by %s: %w", owner, err)
					}
				case errors.Is(err, leaseapi.ErrUnavailable):
					// lock_timeout on a loaded machine: not the property
					// under test; the next round retries.
					t.Logf("acquire by %s: %v", owner, err)
				case errors.As(err, &conflict):
					if conflict.Lease.State != leaseapi.StateHeld || conflict.Lease.Owner == owner {
						errs <- fmt.Errorf("decide.Refusal for %s carries lease of %s in state %s, want held by another owner",
							owner, conflict.Lease.Owner, conflict.Lease.State)
					}
				default:
					errs <- fmt.Errorf("acquire by %s: %w", owner, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func openDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
