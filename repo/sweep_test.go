package repo_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
	"github.com/leaseapi/leaseapi/repo/sqlite"
	"github.com/leaseapi/leaseapi/schedule"
)

// TestPostgresSweepTwoInstances: two stores on one database sweep at the
// same time, as two leaseapi instances do; every tick is decided once: no
// tick is recorded missed twice, and each job's counter equals its missed
// runs.
func TestPostgresSweepTwoInstances(t *testing.T) {
	t.Parallel()
	dsn := repotest.PostgresURL(t)
	stores := make([]*postgres.Store, 2)
	for i := range stores {
		s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	ctx, a := t.Context(), stores[0]
	const spec, grace = "@every 1s", 100 * time.Millisecond
	prefix := fmt.Sprintf("two-sweepers-%d", time.Now().UnixNano())
	// The registering grant of each job, held from acquired to released.
	type grant struct{ acquired, released time.Time }
	registered := make(map[string]grant)
	for i := range 5 {
		job := fmt.Sprintf("%s-%d", prefix, i)
		l, err := a.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "registrar", TTL: time.Hour, Schedule: spec, Grace: grace})
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		rel, err := a.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "registrar", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
		if err != nil {
			t.Fatalf("Release: %v", err)
		}
		registered[job] = grant{l.AcquiredAt, *rel.ReleasedAt}
	}

	// Both sweep for three seconds: a few ticks of every job fall due.
	until := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Go(func() {
			for time.Now().Before(until) {
				if _, err := s.SweepTicks(ctx, 2); err != nil { // small batches: the two interleave
					t.Errorf("SweepTicks: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()

	sched, err := schedule.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	for job, reg := range registered {
		l, err := a.ForgetSchedule(ctx, job) // the counts stand still from here
		if err != nil {
			t.Fatalf("ForgetSchedule: %v", err)
		}
		runs, err := a.Runs(ctx, job, 1000)
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		seen := make(map[int64]bool)
		var missed int64
		for _, r := range runs {
			if r.Outcome != leaseapi.OutcomeMissed {
				continue
			}
			missed++
			if seen[r.Tick.UnixMilli()] {
				t.Errorf("%s: tick %s recorded missed twice", job, r.Tick)
			}
			seen[r.Tick.UnixMilli()] = true
		}
		if missed < 2 || missed != l.MissedTicks {
			t.Errorf("%s: got %d missed runs and MissedTicks %d, want them equal and at least 2", job, missed, l.MissedTicks)
		}
		// Consecutive from the first tick after registration, none skipped,
		// but for a tick the registering grant was held across (a
		// registration across a second boundary), which is skipped.
		tick := sched.Next(reg.acquired)
		for tick.Before(reg.released) {
			tick = sched.Next(tick)
		}
		for ; len(seen) > 0; tick = sched.Next(tick) {
			if !seen[tick.UnixMilli()] {
				t.Errorf("%s: tick %s was not recorded missed, but a later one was", job, tick)
				break
			}
			delete(seen, tick.UnixMilli())
		}
	}
}

// recordingObserver counts what a store tells its observer.
type recordingObserver struct {
	mu       sync.Mutex
	finished map[leaseapi.Outcome]int
	expired  int64
	skipped  int64
}

func (o *recordingObserver) RunFinished(outcome leaseapi.Outcome, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished[outcome]++
}
func (o *recordingObserver) TicksSkipped(n int64)        { o.mu.Lock(); o.skipped += n; o.mu.Unlock() }
func (o *recordingObserver) RunStarted(leaseapi.Trigger) {}
func (o *recordingObserver) LeasesExpired(n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expired += n
}

func (o *recordingObserver) counts() (map[leaseapi.Outcome]int, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := make(map[leaseapi.Outcome]int, len(o.finished))
	for k, v := range o.finished {
		c[k] = v
	}
	return c, o.expired
}

// TestObserverCountsOnce: on the embedded store (its own file, so the
// counts are this test's alone) every finished run is told once, and an
// expired grant is counted once, by the sweep or by the takeover that
// closes it, whichever comes first.
func TestObserverCountsOnce(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{finished: make(map[leaseapi.Outcome]int)}
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "leaseapi.db"), Observer: obs})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	ctx := t.Context()
	acquire := func(job, owner string, ttl time.Duration) leaseapi.Lease {
		t.Helper()
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl})
		if err != nil {
			t.Fatalf("Acquire(%s, %s): %v", job, owner, err)
		}
		return l
	}
	waitExpired := func(job string) {
		t.Helper()
		for range 2000 {
			if l, err := s.Get(ctx, job); err == nil && l.State == leaseapi.StateExpired {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("%s never expired", job)
	}

	ok := acquire("released", "a", time.Hour)
	rel := &leaseapi.ReleaseParams{JobID: "released", Owner: "a", Token: ok.Token, Outcome: leaseapi.OutcomeSucceeded}
	for range 2 { // the retry changes nothing and is not told
		if _, err := s.Release(ctx, rel); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	acquire("revoked", "a", time.Hour)
	for range 2 { // the second revoke finds nothing held
		if _, err := s.Revoke(ctx, &leaseapi.RevokeParams{JobID: "revoked"}); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
	}

	// Expired, then counted by the sweep, then taken over: counted once.
	acquire("swept", "a", 50*time.Millisecond)
	waitExpired("swept")
	for range 2 {
		if _, err := s.SweepTicks(ctx, 100); err != nil {
			t.Fatalf("SweepTicks: %v", err)
		}
	}
	acquire("swept", "b", time.Hour)
	// Expired, taken over before any sweep: counted once, by the takeover.
	acquire("taken", "a", 50*time.Millisecond)
	waitExpired("taken")
	acquire("taken", "b", time.Hour)
	if _, err := s.SweepTicks(ctx, 100); err != nil {
		t.Fatalf("SweepTicks: %v", err)
	}

	finished, expired := obs.counts()
	want := map[leaseapi.Outcome]int{leaseapi.OutcomeSucceeded: 1, leaseapi.OutcomeRevoked: 1, leaseapi.OutcomeExpired: 2}
	for outcome, n := range want {
		if finished[outcome] != n {
			t.Errorf("RunFinished(%s): told %d times, want %d", outcome, finished[outcome], n)
		}
	}
	if len(finished) != len(want) {
		t.Errorf("RunFinished: told %v, want %v", finished, want)
	}
	if expired != 2 {
		t.Errorf("LeasesExpired: told %d, want 2 (once for each expired grant)", expired)
	}
}
