package postgres_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// TestMain gives the package a fresh, migrated Postgres database
// (repotest.PostgresURL), or skips the database tests with -short.
func TestMain(m *testing.M) { repotest.WrapTestMain(m) }

// TestPostgresStore runs the store conformance suite on Postgres. It is not
// parallel: the suite's PruneRuns subtest prunes the whole database before
// the other tests of the package start.
func TestPostgresStore(t *testing.T) {
	dsn := repotest.PostgresURL(t)
	repotest.RunStoreSuite(t, func(t *testing.T, o repotest.StoreOptions) leaseapi.Store {
		// Every store is a new pool over the one package database; the
		// suite closes each store it opens.
		store, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxTickAhead: o.MaxTickAhead})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return store
	})
}

// TestPostgresSweep runs the sweep suite on Postgres: three instances on a
// database of each subtest's own, so that nothing else sweeps its jobs.
func TestPostgresSweep(t *testing.T) {
	t.Parallel()
	repotest.RunSweepSuite(t, func(t *testing.T, o leaseapi.Observer) *repotest.SweepHarness {
		dsn := repotest.NewPostgresURL(t)
		h := &repotest.SweepHarness{
			SetBeforeWrite: func(s leaseapi.Store, f func()) { s.(*postgres.Store).SetBeforeSweepWrite(f) },
		}
		for range 3 {
			store, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, Observer: o})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = store.Close() })
			h.Stores = append(h.Stores, store)
		}
		first := h.Stores[0].(*postgres.Store)
		h.Rewind = func(t *testing.T, jobID string, d time.Duration) {
			t.Helper()
			if err := first.Rewind(t.Context(), jobID, d); err != nil {
				t.Fatal(err)
			}
		}
		return h
	})
}

// TestPostgresStatsRuns24h: Stats counts the runs that ended in the last 24
// hours of the database clock and no older one. The store cannot backdate a
// run, so the test moves finished runs back in time with SQL.
func TestPostgresStatsRuns24h(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	ctx := t.Context()
	store, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })

	const prefix = "stats-24h."
	for _, job := range []string{"old", "recent", "now"} {
		l, err := store.Acquire(ctx, &leaseapi.AcquireParams{JobID: prefix + job, Owner: "a", TTL: time.Minute})
		if err != nil {
			t.Fatalf("Acquire %s: %v", job, err)
		}
		if _, err := store.Release(ctx, &leaseapi.ReleaseParams{JobID: l.JobID, Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeFailed}); err != nil {
			t.Fatalf("Release %s: %v", job, err)
		}
	}
	for job, back := range map[string]string{"old": "24 hours 1 minute", "recent": "23 hours 59 minutes"} {
		if _, err := db.ExecContext(ctx, `UPDATE runs SET started_at = started_at - $2::interval, ended_at = ended_at - $2::interval WHERE job_id = $1`, prefix+job, back); err != nil {
			t.Fatalf("backdate %s: %v", job, err)
		}
	}
	st, err := store.Stats(ctx, prefix)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if got := st.Runs24h[leaseapi.OutcomeFailed]; got != 2 {
		t.Errorf("Stats.Runs24h[failed]: got %d, want 2 (the run 23 h 59 min ago and the one now, not the one 24 h 1 min ago)", got)
	}
}

// TestPostgresRepair runs the repair suite on Postgres, on a database of
// its own: the store suite's pruning and job health read every job of the
// package database while this suite runs.
func TestPostgresRepair(t *testing.T) {
	t.Parallel()
	dsn := repotest.NewPostgresURL(t)
	repotest.RunRepairSuite(t, &repotest.RepairHarness{
		Open: func(t *testing.T) leaseapi.Store {
			store, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return store
		},
		OpenAlone: func(t *testing.T) leaseapi.Store {
			store, err := postgres.Open(t.Context(), postgres.Config{DSN: repotest.NewPostgresURL(t)})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return store
		},
		SetTicks: func(t *testing.T, s leaseapi.Store, jobID string, grant, owed *time.Time) {
			t.Helper()
			if err := s.(*postgres.Store).SetTicks(t.Context(), jobID, grant, owed); err != nil {
				t.Fatal(err)
			}
		},
	})
}
