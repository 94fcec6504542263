package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

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
