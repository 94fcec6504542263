package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/internal/metrics"
)

func TestTeam(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"billing:invoices":   "billing:",
		"ops.backup:nightly": "ops.",
		"a:b.c":              "a:",
		"report":             "",
		":x":                 ":",
	} {
		if got := metrics.Team(id); got != want {
			t.Errorf("Team(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestJobSeries: the refresher reads the first jobs' health from the store
// into the per-job series, with their team (and the reasons of an alerting
// job), and counts the jobs left out.
func TestJobSeries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, m := newMetrics(t)
	if err := m.EnableJobSeries(reg, 2); err != nil {
		t.Fatal(err)
	}
	if err := m.EnableJobSeries(reg, 2); err == nil {
		t.Error("EnableJobSeries twice: no error")
	}
	s := openSQLite(t, nil)
	for _, r := range []struct {
		job     string
		outcome leaseapi.Outcome
	}{{"billing:invoices", leaseapi.OutcomeFailed}, {"billing:invoices", leaseapi.OutcomeFailed},
		{"ops.backup", leaseapi.OutcomeSucceeded}, {"zz-left-out", leaseapi.OutcomeFailed}} {
		l, err := s.Acquire(ctx, &leaseapi.AcquireParams{JobID: r.job, Owner: "a", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, &leaseapi.ReleaseParams{JobID: r.job, Owner: "a", Token: l.Token, Outcome: r.outcome}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pause(ctx, &leaseapi.PauseParams{JobID: "ops.backup"}); err != nil {
		t.Fatal(err)
	}
	// billing:invoices's policy holds it alerting for two reasons;
	// ops.backup's holds it ok, which has no alerting series.
	for job, p := range map[string]leaseapi.AlertPolicy{
		"billing:invoices": {ConsecutiveFailures: 2, FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 2}},
		"ops.backup":       {ConsecutiveFailures: 1},
	} {
		if _, err := s.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: p}); err != nil {
			t.Fatal(err)
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
# HELP leaseapi_job_alerting 1 for each reason (failures, failure_rate, runtime_exceeded, runtime_too_short, missed) of a job its alert policy holds alerting; no series for a job that is ok or has no policy. As of the last refresh.
# TYPE leaseapi_job_alerting gauge
leaseapi_job_alerting{job_id="billing:invoices",reason="failure_rate",team="billing:"} 1
leaseapi_job_alerting{job_id="billing:invoices",reason="failures",team="billing:"} 1
# HELP leaseapi_job_consecutive_failures Failed or expired runs of the job since its newest succeeded run (all of them when none succeeded). As of the last refresh.
# TYPE leaseapi_job_consecutive_failures gauge
leaseapi_job_consecutive_failures{job_id="billing:invoices",team="billing:"} 2
leaseapi_job_consecutive_failures{job_id="ops.backup",team="ops."} 0
# HELP leaseapi_job_metrics_truncated Jobs left out of the per-job series by LEASEAPI_JOB_METRICS_LIMIT (the series cover the first jobs in job id order), as of the last refresh.
# TYPE leaseapi_job_metrics_truncated gauge
leaseapi_job_metrics_truncated 1
# HELP leaseapi_job_paused 1 when the job is paused; else 0. As of the last refresh.
# TYPE leaseapi_job_paused gauge
leaseapi_job_paused{job_id="billing:invoices",team="billing:"} 0
leaseapi_job_paused{job_id="ops.backup",team="ops."} 1
`
	names := []string{"leaseapi_job_alerting", "leaseapi_job_consecutive_failures", "leaseapi_job_metrics_truncated", "leaseapi_job_paused"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// Every job has each series but the success time, which the job that
	// never succeeded lacks.
	for name, n := range map[string]int{
		"leaseapi_job_last_success_timestamp_seconds": 1, "leaseapi_job_last_finish_timestamp_seconds": 2,
		"leaseapi_job_last_duration_seconds": 2, "leaseapi_job_overdue": 2, "leaseapi_job_missed_ticks": 2,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series (%v), want %d", name, got, err, n)
		}
	}

	// A job that is gone from the store's answer is gone from every series.
	m.SetJobHealth(leaseapi.JobHealthPage{Jobs: []leaseapi.JobHealth{{JobID: "ops.backup", Paused: true}}})
	const after = `
# HELP leaseapi_job_paused 1 when the job is paused; else 0. As of the last refresh.
# TYPE leaseapi_job_paused gauge
leaseapi_job_paused{job_id="ops.backup",team="ops."} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(after), "leaseapi_job_paused"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{"leaseapi_job_consecutive_failures": 1, "leaseapi_job_alerting": 0} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s after billing:invoices went: %d series (%v), want %d", name, got, err, n)
		}
	}
}

// TestNoJobSeriesByDefault: without EnableJobSeries no series carries a job.
func TestNoJobSeriesByDefault(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t)
	m.SetJobHealth(leaseapi.JobHealthPage{Jobs: []leaseapi.JobHealth{{JobID: "billing:invoices"}}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "leaseapi_job_") {
			t.Errorf("%s exported without EnableJobSeries", f.GetName())
		}
	}
}
