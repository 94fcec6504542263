package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/schedule"
)

// TestNearestTickWrongGuess: the store resolves a
// nearestTick acquire with its own clock as a guess of the database's and
// the statement holds the guess to the database clock. With the guess an
// hour off, every acquire still takes the tick nearest to the database
// clock (on a new job, where the insert refuses the guess, and on an
// existing one, where the snapshot does), refuses another owner, and renews
// for the holder, on the batched, single and naive statements.
func TestNearestTickWrongGuess(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	db := openDB(t, dsn)
	dbClock := func() time.Time {
		t.Helper()
		var now time.Time
		if err := db.GetContext(t.Context(), &now, `SELECT clock_timestamp()`); err != nil {
			t.Fatalf("read the database clock: %v", err)
		}
		return now
	}
	const spec, margin = "@every 2s", time.Second
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	// nearest checks that tick is the tick the database clock picked at
	// some instant in [from, to].
	nearest := func(op string, from, to time.Time, tick *time.Time) {
		t.Helper()
		if tick == nil || !s.Latest(*tick).Equal(*tick) || tick.After(to.Add(margin)) || !s.Next(*tick).After(from.Add(margin)) {
			t.Errorf("%s: got tick %s, want the tick of %q nearest to the database clock between %s and %s",
				op, fmtTick(tick), spec, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
		}
	}
	for _, cfg := range []struct {
		name             string
		naive, unbatched bool
	}{
		{"Batched", false, false},
		{"Single", false, true},
		{"Naive", true, false},
	} {
		for _, skew := range []time.Duration{-time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("%s/%s", cfg.name, skew), func(t *testing.T) {
				t.Parallel()
				store, err := postgres.OpenVariant(t.Context(), postgres.Config{DSN: dsn}, cfg.naive, cfg.unbatched)
				if err != nil {
					t.Fatalf("OpenVariant: %v", err)
				}
				t.Cleanup(func() { _ = store.Close() })
				store.SetGuessClock(func() time.Time { return time.Now().Add(skew) })
				job := fmt.Sprintf("wrong-guess-%s-%d", cfg.name, skew/time.Hour)
				acquire := func(owner string) (leaseapi.Lease, error) {
					return store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute,
						NearestTick: true, Schedule: spec, Grace: time.Second})
				}

				from := dbClock()
				first, err := acquire("a")
				if err != nil {
					t.Fatalf("the first acquire of a new job: %v", err)
				}
				nearest("the first acquire of a new job", from, dbClock(), first.Tick)
				if _, err := store.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: first.Token,
					Outcome: leaseapi.OutcomeFailed}); err != nil {
					t.Fatalf("Release: %v", err)
				}

				from = dbClock()
				second, err := acquire("b")
				if err != nil {
					t.Fatalf("an acquire of a released job: %v", err)
				}
				nearest("an acquire of a released job", from, dbClock(), second.Tick)
				if _, err := acquire("c"); !errors.Is(err, leaseapi.ErrLeaseHeld) {
					t.Errorf("another owner's acquire: got %v, want lease_held", err)
				}
				renewed, err := acquire("b")
				if err != nil || renewed.Token != second.Token || !renewed.Tick.Equal(*second.Tick) {
					t.Errorf("the holder's retry: got token %d tick %s error %v, want token %d tick %s",
						renewed.Token, fmtTick(renewed.Tick), err, second.Token, fmtTick(second.Tick))
				}
			})
		}
	}
}

// openDB opens a pool on dsn that t closes.
func openDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func fmtTick(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
