package metrics

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
)

// jobSeries are the per-job series: the last leaseapi.JobHealthPage the
// refresher read, served whole at every scrape and replaced whole at every
// refresh, so that a job that disappeared disappears from every series at
// once and a scrape never sees half of two refreshes.
type jobSeries struct {
	page atomic.Pointer[leaseapi.JobHealthPage]

	lastSuccess, lastFinish, failures, lastDuration, overdue, paused, missed *prometheus.Desc
	// alerting is labelled with the reason too: one series per reason of
	// an alerting job.
	alerting  *prometheus.Desc
	truncated *prometheus.Desc
}

// DefaultJobSeriesLimit is how many jobs have per-job series by default.
const DefaultJobSeriesLimit = 10_000

// jobLabels are the labels of every per-job series.
var jobLabels = []string{"job_id", "team"}

func newJobSeries() *jobSeries {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help+" As of the last refresh.", jobLabels, nil)
	}
	return &jobSeries{
		lastSuccess: desc("leaseapi_job_last_success_timestamp_seconds",
			"When the job's newest succeeded run ended (Unix seconds); absent while its run history holds none."),
		lastFinish: desc("leaseapi_job_last_finish_timestamp_seconds",
			"When the job's newest finished run with a holder ended, whatever its outcome (Unix seconds); absent while there is none."),
		failures: desc("leaseapi_job_consecutive_failures",
			"Failed or expired runs of the job since its newest succeeded run (all of them when none succeeded)."),
		lastDuration: desc("leaseapi_job_last_duration_seconds",
			"How long the job's newest finished run with a holder lasted; absent while there is none."),
		overdue: desc("leaseapi_job_overdue",
			"1 when the job is scheduled, not paused, its newest decided tick was missed and no grant started since; else 0."),
		paused: desc("leaseapi_job_paused", "1 when the job is paused; else 0."),
		missed: desc("leaseapi_job_missed_ticks", "Ticks of the job that ran on no replica (the lease's counter)."),
		alerting: prometheus.NewDesc("leaseapi_job_alerting",
			"1 for each reason (failures, failure_rate, runtime_exceeded, runtime_too_short, missed) of a job its alert policy holds alerting; no series for a job that is ok or has no policy. As of the last refresh.",
			append(slices.Clone(jobLabels), "reason"), nil),
		truncated: prometheus.NewDesc("leaseapi_job_metrics_truncated",
			"Jobs left out of the per-job series by LEASEAPI_JOB_METRICS_LIMIT (the series cover the first jobs in job id order), as of the last refresh.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *jobSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.lastSuccess, s.lastFinish, s.failures, s.lastDuration,
		s.overdue, s.paused, s.missed, s.alerting, s.truncated} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *jobSeries) Collect(ch chan<- prometheus.Metric) {
	page := s.page.Load()
	if page == nil {
		ch <- prometheus.MustNewConstMetric(s.truncated, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(s.truncated, prometheus.GaugeValue, float64(page.Truncated))
	for i := range page.Jobs {
		h := &page.Jobs[i]
		labels := []string{h.JobID, Team(h.JobID)}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		if !h.LastSuccess.IsZero() {
			gauge(s.lastSuccess, float64(h.LastSuccess.UnixMilli())/1000)
		}
		if !h.LastFinish.IsZero() {
			gauge(s.lastFinish, float64(h.LastFinish.UnixMilli())/1000)
			gauge(s.lastDuration, h.LastDuration.Seconds())
		}
		gauge(s.failures, float64(h.ConsecutiveFailures))
		gauge(s.overdue, bit(h.Overdue))
		gauge(s.paused, bit(h.Paused))
		gauge(s.missed, float64(h.MissedTicks))
		if h.AlertStatus == leaseapi.AlertAlerting {
			for _, r := range h.AlertReasons {
				ch <- prometheus.MustNewConstMetric(s.alerting, prometheus.GaugeValue, 1, append(labels, string(r))...)
			}
		}
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Team is the team label of a job: its id up to and including the first
// ":" or ".", the way teams name their jobs ("billing:invoices" is team
// "billing:"), or "" when the id has neither.
func Team(jobID string) string {
	if i := strings.IndexAny(jobID, ":."); i >= 0 {
		return jobID[:i+1]
	}
	return ""
}

// EnableJobSeries registers the per-job series on reg: from then on the
// refresher also reads the health of the first limit jobs (1 to
// leaseapi.MaxJobHealthLimit) at every refresh, by one query of the store.
func (m *Leases) EnableJobSeries(reg prometheus.Registerer, limit int) error {
	if err := leaseapi.ValidateJobHealthLimit(limit); err != nil {
		return fmt.Errorf("per-job series: %w", err)
	}
	if m.jobs != nil {
		return fmt.Errorf("per-job series: already enabled")
	}
	s := newJobSeries()
	if err := reg.Register(s); err != nil {
		return fmt.Errorf("register per-job series: %w", err)
	}
	m.jobs, m.jobLimit = s, limit
	return nil
}

// SetJobHealth replaces the per-job series with page's; a no-op unless
// EnableJobSeries was called.
func (m *Leases) SetJobHealth(page leaseapi.JobHealthPage) {
	if m.jobs != nil {
		m.jobs.page.Store(&page)
	}
}
