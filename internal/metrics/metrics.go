// Package metrics holds the Prometheus metrics of what happens to leases,
// runs and ticks, whichever instance decided it: the stores tell them
// through leaseapi.Observer, and a loop refreshes the gauges of the lease
// table. (The HTTP and store-latency metrics live with the handlers.)
//
// Every label value is present from the start, with 0, so that a query
// over a metric never finds it missing. No label carries a job id unless
// the per-job series are enabled (EnableJobSeries).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaseapi/leaseapi"
)

// Leases are the metrics of runs and ticks; they implement
// leaseapi.Observer.
type Leases struct {
	runsFinished   *prometheus.CounterVec
	runsStarted    *prometheus.CounterVec
	ticksOwed      *prometheus.GaugeVec
	runDuration    *prometheus.HistogramVec
	expirations    prometheus.Counter
	ticksSkipped   prometheus.Counter
	leases         *prometheus.GaugeVec
	jobsPaused     prometheus.Gauge
	jobsOverdue    prometheus.Gauge
	jobsAhead      prometheus.Gauge
	statsRefreshed prometheus.Gauge

	// jobs are the per-job series, nil unless EnableJobSeries was
	// called; jobLimit is how many jobs they cover.
	jobs     *jobSeries
	jobLimit int
	// groups are the per-group series, nil unless EnableGroupSeries was
	// called; groupLimit is how many groups they cover.
	groups     *groupSeries
	groupLimit int
}

var _ leaseapi.Observer = (*Leases)(nil)

// The outcomes a finished run can have, and the states a lease can be in:
// the label values, all present from the start.
var (
	finishedOutcomes = []leaseapi.Outcome{leaseapi.OutcomeSucceeded, leaseapi.OutcomeFailed,
		leaseapi.OutcomeExpired, leaseapi.OutcomeRevoked, leaseapi.OutcomeMissed}
	states   = []leaseapi.State{leaseapi.StateHeld, leaseapi.StateReleased, leaseapi.StateExpired, leaseapi.StateRevoked}
	triggers = []leaseapi.Trigger{leaseapi.TriggerSchedule, leaseapi.TriggerCatchUp, leaseapi.TriggerManual}
	owedBy   = []leaseapi.Trigger{leaseapi.TriggerCatchUp, leaseapi.TriggerManual}
)

// New registers the metrics on reg.
func New(reg prometheus.Registerer) (*Leases, error) {
	m := &Leases{
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_runs_finished_total",
			Help: "Runs by final outcome, counted once when decided: succeeded or failed at release, revoked at revocation, expired when a takeover closes the run, missed by the tick sweep.",
		}, []string{"outcome"}),
		runsStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaseapi_runs_started_total",
			Help: "Runs started by a grant, by trigger: schedule (a tick of the schedule, or a job without one), catch-up or manual (the owed tick the grant claimed).",
		}, []string{"trigger"}),
		ticksOwed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leaseapi_ticks_owed",
			Help: "Jobs that owe a tick, by reason (catch-up or manual), as of the last refresh.",
		}, []string{"reason"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leaseapi_run_duration_seconds",
			Help:    "Duration of finished runs that had a holder, by outcome.",
			Buckets: []float64{.1, .5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600},
		}, []string{"outcome"}),
		expirations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leaseapi_lease_expirations_total",
			Help: "Grants that passed their expiresAt unreleased (a holder that died or hung mid-run), counted once by the tick sweep or the takeover that closed them.",
		}),
		ticksSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leaseapi_ticks_skipped_total",
			Help: "Ticks that fell while an earlier grant of the job was still held.",
		}),
		leases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leaseapi_leases",
			Help: "Leases by state, as of the last refresh (leaseapi_stats_refreshed_timestamp_seconds).",
		}, []string{"state"}),
		jobsPaused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_jobs_paused",
			Help: "Paused jobs, as of the last refresh.",
		}),
		jobsOverdue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_jobs_overdue",
			Help: "Scheduled, unpaused jobs whose latest decided tick was missed and that have not run since, as of the last refresh.",
		}),
		jobsAhead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_jobs_ticks_ahead",
			Help: "Jobs whose last completed tick, open grant's tick or owed tick lies later than the database clock plus LEASEAPI_MAX_TICK_AHEAD (left by a replica whose clock was fast; POST /leases/{jobId}/repair mends them), as of the last refresh.",
		}),
		statsRefreshed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaseapi_stats_refreshed_timestamp_seconds",
			Help: "When the lease gauges were last computed (Unix seconds, the store's clock); 0 before the first time.",
		}),
	}
	for _, c := range []prometheus.Collector{m.runsFinished, m.runsStarted, m.ticksOwed, m.runDuration, m.expirations, m.ticksSkipped,
		m.leases, m.jobsPaused, m.jobsOverdue, m.jobsAhead, m.statsRefreshed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	for _, o := range finishedOutcomes {
		m.runsFinished.WithLabelValues(string(o))
		if o != leaseapi.OutcomeMissed {
			m.runDuration.WithLabelValues(string(o))
		}
	}
	for _, s := range states {
		m.leases.WithLabelValues(string(s))
	}
	for _, tr := range triggers {
		m.runsStarted.WithLabelValues(string(tr))
	}
	for _, r := range owedBy {
		m.ticksOwed.WithLabelValues(string(r))
	}
	return m, nil
}

// RunFinished counts a run that ended with outcome after d.
func (m *Leases) RunFinished(outcome leaseapi.Outcome, d time.Duration) {
	m.runsFinished.WithLabelValues(string(outcome)).Inc()
	if outcome != leaseapi.OutcomeMissed {
		m.runDuration.WithLabelValues(string(outcome)).Observe(d.Seconds())
	}
}

// RunStarted counts a run a grant started for trigger.
func (m *Leases) RunStarted(trigger leaseapi.Trigger) {
	m.runsStarted.WithLabelValues(string(trigger)).Inc()
}

// TicksSkipped counts n skipped ticks.
func (m *Leases) TicksSkipped(n int64) { m.ticksSkipped.Add(float64(n)) }

// LeasesExpired counts n grants that passed their expiresAt unreleased.
func (m *Leases) LeasesExpired(n int64) { m.expirations.Add(float64(n)) }

// SetStats sets the gauges from st.
func (m *Leases) SetStats(st leaseapi.Stats) {
	for _, s := range states {
		m.leases.WithLabelValues(string(s)).Set(float64(st.Leases[s]))
	}
	m.jobsPaused.Set(float64(st.Paused))
	m.jobsOverdue.Set(float64(st.Overdue))
	for _, r := range owedBy {
		m.ticksOwed.WithLabelValues(string(r)).Set(float64(st.Owed[r]))
	}
	m.statsRefreshed.Set(float64(st.Now.UnixMilli()) / 1000)
}

// StatsRefresher computes the gauges of the lease table at start and then
// every interval: a count of the table on a timer, never one per scrape;
// with the per-job series enabled, also one read of the jobs' health; with
// the per-group series, one read of the groups; and
// with CountOutbox, a count of the webhook outbox; with CountJobsAhead, a
// count of the jobs with marks ahead of the clock.
type StatsRefresher struct {
	store    leaseapi.Store
	metrics  *Leases
	interval time.Duration
	logger   *slog.Logger
	// outbox counts the webhook outbox; nil unless CountOutbox was called.
	outbox func(context.Context) error
	// aheadWindow is the window of the jobs-ahead count; zero unless
	// CountJobsAhead was called.
	aheadWindow time.Duration
}

// DefaultStatsInterval is how often the gauges are computed.
const DefaultStatsInterval = 15 * time.Second

// statsTimeout bounds one count.
const statsTimeout = 10 * time.Second

// NewStatsRefresher returns a refresher of m from store every interval
// (zero: DefaultStatsInterval).
func NewStatsRefresher(store leaseapi.Store, m *Leases, interval time.Duration, logger *slog.Logger) (*StatsRefresher, error) {
	if interval == 0 {
		interval = DefaultStatsInterval
	}
	if interval < 0 {
		return nil, fmt.Errorf("stats refresher: interval %s must be positive", interval)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &StatsRefresher{store: store, metrics: m, interval: interval, logger: logger}, nil
}

// CountJobsAhead makes each refresh count the jobs whose marks lie later
// than the store's clock plus window (leaseapi_jobs_ticks_ahead).
func (r *StatsRefresher) CountJobsAhead(window time.Duration) { r.aheadWindow = window }

// Run refreshes now and then every interval until ctx is cancelled.
func (r *StatsRefresher) Run(ctx context.Context) {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		if err := r.runOnce(ctx); err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "counting the leases for the gauges failed", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (r *StatsRefresher) runOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	st, err := r.store.Stats(ctx, "")
	if err == nil {
		r.metrics.SetStats(st)
	}
	if r.metrics.jobs != nil {
		page, jerr := r.store.JobHealth(ctx, r.metrics.jobLimit)
		if jerr == nil {
			r.metrics.SetJobHealth(page)
		}
		err = errors.Join(err, jerr)
	}
	if r.metrics.groups != nil {
		err = errors.Join(err, r.metrics.refreshGroups(ctx, r.store))
	}
	if r.outbox != nil {
		err = errors.Join(err, r.outbox(ctx))
	}
	if r.aheadWindow > 0 {
		ja, aerr := r.store.JobsAhead(ctx, r.aheadWindow, 1)
		if aerr == nil {
			r.metrics.jobsAhead.Set(float64(ja.Count))
		}
		err = errors.Join(err, aerr)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
