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

// An acquire writes only the row it decided on: when another store takes
// the expired lease between this acquire's read and its write, the write
// finds the row changed and writes nothing, and the acquire reads again
// and is refused by the new holder.
func TestPostgresAcquireWriteRefusesChangedRow(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	ctx := context.Background()
	open := func() *postgres.Store {
		s, err := postgres.OpenVariant(ctx, postgres.Config{DSN: dsn}, false, true)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	store, other := open(), open()
	job := "changed-between-read-and-write"
	first, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the first grant never expired")
		}
		l, err := store.Get(ctx, job)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if l.State == leaseapi.StateExpired {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var writes int
	var taken leaseapi.Lease
	store.SetBeforeAcquireWrite(func() {
		writes++
		if writes == 1 {
			if taken, err = other.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "c", TTL: time.Minute}); err != nil {
				t.Errorf("the other store's acquire: %v", err)
			}
		}
	})
	_, err = store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "b", TTL: time.Minute})
	if !errors.Is(err, leaseapi.ErrLeaseHeld) {
		t.Fatalf("acquire whose row changed after its read: got %v, want lease_held", err)
	}
	if writes != 1 {
		t.Errorf("decided to write %d times, want once (the second decision is the refusal)", writes)
	}
	cur, err := store.Get(ctx, job)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if cur.Owner != "c" || cur.Token != first.Token+1 || cur.Token != taken.Token {
		t.Errorf("lease after the race: owner %q token %d, want c's grant, token %d", cur.Owner, cur.Token, first.Token+1)
	}
	runs, err := store.Runs(ctx, job, 10)
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	if len(runs) != 2 || runs[0].Owner != "c" || runs[1].Outcome != leaseapi.OutcomeExpired {
		t.Errorf("runs: got %+v, want c's running and a's expired", runs)
	}
}
