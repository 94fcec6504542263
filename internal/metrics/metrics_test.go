package metrics_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/metrics"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestEveryLabelFromTheStart: before anything happened every series exists
// with 0, so alert expressions never see a missing series.
func TestEveryLabelFromTheStart(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP leaseapi_leases Leases by state, as of the last refresh (leaseapi_stats_refreshed_timestamp_seconds).
# TYPE leaseapi_leases gauge
leaseapi_leases{state="expired"} 0
leaseapi_leases{state="held"} 0
leaseapi_leases{state="released"} 0
leaseapi_leases{state="revoked"} 0
# HELP leaseapi_runs_finished_total Runs by final outcome, counted once when decided: succeeded or failed at release, revoked at revocation, expired when a takeover closes the run, missed by the tick sweep.
# TYPE leaseapi_runs_finished_total counter
leaseapi_runs_finished_total{outcome="expired"} 0
leaseapi_runs_finished_total{outcome="failed"} 0
leaseapi_runs_finished_total{outcome="missed"} 0
leaseapi_runs_finished_total{outcome="revoked"} 0
leaseapi_runs_finished_total{outcome="succeeded"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leaseapi_leases", "leaseapi_runs_finished_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"leaseapi_lease_expirations_total", "leaseapi_ticks_skipped_total",
		"leaseapi_jobs_paused", "leaseapi_jobs_overdue", "leaseapi_jobs_ticks_ahead", "leaseapi_run_duration_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v; want it exported from the start", name, n, err)
		}
	}
}

// TestCountsWhatTheStoreDecides: a store with the metrics as its observer
// counts releases, revocations and missed ticks, and the refresher sets the
// gauges from the store's counts.
func TestCountsWhatTheStoreDecides(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	s := openSQLite(t, m)
	l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "report", Owner: "a", TTL: time.Hour, Schedule: "@every 1s", Grace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: "report", Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeFailed}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "other", Owner: "a", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, &leaseapi.RevokeParams{JobID: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pause(ctx, &leaseapi.PauseParams{JobID: "other"}); err != nil {
		t.Fatal(err)
	}
	// Sweep until a tick of report was missed (bounded).
	for i := 0; finished(t, reg, "missed") < 1; i++ {
		if i == 1000 {
			t.Fatal("no missed tick after 1000 sweeps")
		}
		if _, err := s.SweepTicks(ctx, 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for outcome, want := range map[string]float64{"failed": 1, "revoked": 1, "succeeded": 0} {
		if got := finished(t, reg, outcome); got != want {
			t.Errorf("runs_finished_total{outcome=%q}: got %v, want %v", outcome, got, want)
		}
	}

	r, err := metrics.NewStatsRefresher(s, m, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RefreshOnce(ctx, r); err != nil {
		t.Fatal(err)
	}
	const want = `
# HELP leaseapi_jobs_overdue Scheduled, unpaused jobs whose latest decided tick was missed and that have not run since, as of the last refresh.
# TYPE leaseapi_jobs_overdue gauge
leaseapi_jobs_overdue 1
# HELP leaseapi_jobs_paused Paused jobs, as of the last refresh.
# TYPE leaseapi_jobs_paused gauge
leaseapi_jobs_paused 1
# HELP leaseapi_leases Leases by state, as of the last refresh (leaseapi_stats_refreshed_timestamp_seconds).
# TYPE leaseapi_leases gauge
leaseapi_leases{state="expired"} 0
leaseapi_leases{state="held"} 0
leaseapi_leases{state="released"} 1
leaseapi_leases{state="revoked"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leaseapi_leases", "leaseapi_jobs_paused", "leaseapi_jobs_overdue"); err != nil {
		t.Error(err)
	}
}

// finished is the value of leaseapi_runs_finished_total{outcome}.
func finished(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "leaseapi_runs_finished_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("leaseapi_runs_finished_total{outcome=%q} not exported", outcome)
	return 0
}

// openSQLite opens a migrated embedded store in the test's directory that
// tells observer (nil: nobody), closed when the test ends.
func openSQLite(t *testing.T, observer leaseapi.Observer) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "leaseapi.db"), Observer: observer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// newMetrics registers a fresh set of metrics on a registry of its own.
func newMetrics(t *testing.T) (*prometheus.Registry, *metrics.Leases) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// TestJobsTicksAhead: the refresher counts the jobs whose marks lie ahead
// of the clock plus the window (a replica with a fast clock left them,
// written here with SQL), and a repaired job no longer.
func TestJobsTicksAhead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	path := filepath.Join(t.TempDir(), "leaseapi.db")
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"sound", "poisoned"} {
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.ExecContext(ctx, `UPDATE leases SET last_completed_tick = $1 WHERE job_id = 'poisoned'`,
		time.Now().Add(48*time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	r, err := metrics.NewStatsRefresher(s, m, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.CountJobsAhead(5 * time.Minute)
	gauge := func(want float64) {
		t.Helper()
		if err := metrics.RefreshOnce(ctx, r); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf(`
# HELP leaseapi_jobs_ticks_ahead Jobs whose last completed tick, open grant's tick or owed tick lies later than the database clock plus LEASEAPI_MAX_TICK_AHEAD (left by a replica whose clock was fast; POST /leases/{jobId}/repair mends them), as of the last refresh.
# TYPE leaseapi_jobs_ticks_ahead gauge
leaseapi_jobs_ticks_ahead %v
`, want)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(text), "leaseapi_jobs_ticks_ahead"); err != nil {
			t.Error(err)
		}
	}
	gauge(1)
	if _, err := s.Repair(ctx, &leaseapi.RepairParams{JobID: "poisoned", Window: 5 * time.Minute, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	gauge(0)
}

// TestOwedTickMetrics: the refresher counts the jobs that owe a tick by
// reason, and a grant counts the run it starts by trigger: schedule, or
// manual for the claim of a triggered tick.
func TestOwedTickMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	s := openSQLite(t, m)
	l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "report", Owner: "a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: "report", Owner: "a", Token: l.Token, Outcome: leaseapi.OutcomeSucceeded}); err != nil {
		t.Fatal(err)
	}
	owing, err := s.Trigger(ctx, &leaseapi.TriggerParams{JobID: "report", By: "ops", Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := metrics.NewStatsRefresher(s, m, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := metrics.RefreshOnce(ctx, r); err != nil {
		t.Fatal(err)
	}
	const owed = `
# HELP leaseapi_ticks_owed Jobs that owe a tick, by reason (catch-up or manual), as of the last refresh.
# TYPE leaseapi_ticks_owed gauge
leaseapi_ticks_owed{reason="catch-up"} 0
leaseapi_ticks_owed{reason="manual"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(owed), "leaseapi_ticks_owed"); err != nil {
		t.Error(err)
	}
	if _, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: "report", Owner: "b", TTL: time.Hour, Tick: owing.OwedTick}); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RefreshOnce(ctx, r); err != nil {
		t.Fatal(err)
	}
	const started = `
# HELP leaseapi_runs_started_total Runs started by a grant, by trigger: schedule (a tick of the schedule, or a job without one), catch-up or manual (the owed tick the grant claimed).
# TYPE leaseapi_runs_started_total counter
leaseapi_runs_started_total{trigger="catch-up"} 0
leaseapi_runs_started_total{trigger="manual"} 1
leaseapi_runs_started_total{trigger="schedule"} 1
# HELP leaseapi_ticks_owed Jobs that owe a tick, by reason (catch-up or manual), as of the last refresh.
# TYPE leaseapi_ticks_owed gauge
leaseapi_ticks_owed{reason="catch-up"} 0
leaseapi_ticks_owed{reason="manual"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(started), "leaseapi_runs_started_total", "leaseapi_ticks_owed"); err != nil {
		t.Error(err)
	}
}
