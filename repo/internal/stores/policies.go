package stores

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// PolicySetColumns are the columns of job_policies a PutPolicy writes, in
// the order of PolicyArgs.
const PolicySetColumns = `consecutive_failures, failure_rate_threshold, failure_rate_runs, max_runtime_ms,
	min_runtime_ms, missed_ticks, recovery_threshold, realert_after_ms`

// PolicyColumns are the columns of job_policies a store reads (PolicyRow).
const PolicyColumns = `job_id, ` + PolicySetColumns + `, status, reasons, since, alerted_at, exceeded_token, updated_by, updated_at`

// PolicyArgs are p's values of PolicySetColumns.
func PolicyArgs(p *leaseapi.AlertPolicy) []any {
	var threshold sql.NullFloat64
	var runs sql.NullInt64
	if r := p.FailureRate; r != nil {
		threshold = sql.NullFloat64{Float64: r.Threshold, Valid: true}
		runs = sql.NullInt64{Int64: int64(r.Runs), Valid: true}
	}
	return []any{p.ConsecutiveFailures, threshold, runs, p.MaxRuntime.Milliseconds(),
		p.MinRuntime.Milliseconds(), p.MissedTicks, p.RecoveryThreshold, p.RealertAfter.Milliseconds()}
}

// PolicyRow is a job_policies row; its times are time.Time (Postgres) or
// Unix milliseconds (SQLite).
type PolicyRow struct {
	JobID                string          `db:"job_id"`
	ConsecutiveFailures  int             `db:"consecutive_failures"`
	FailureRateThreshold sql.NullFloat64 `db:"failure_rate_threshold"`
	FailureRateRuns      sql.NullInt64   `db:"failure_rate_runs"`
	MaxRuntimeMs         int64           `db:"max_runtime_ms"`
	MinRuntimeMs         int64           `db:"min_runtime_ms"`
	MissedTicks          int             `db:"missed_ticks"`
	RecoveryThreshold    int             `db:"recovery_threshold"`
	RealertAfterMs       int64           `db:"realert_after_ms"`
	Status               string          `db:"status"`
	Reasons              string          `db:"reasons"`
	Since                any             `db:"since"`
	AlertedAt            any             `db:"alerted_at"`
	ExceededToken        int64           `db:"exceeded_token"`
	UpdatedBy            string          `db:"updated_by"`
	UpdatedAt            any             `db:"updated_at"`
}

// JobPolicy is the row as the domain sees it, read at now.
func (r *PolicyRow) JobPolicy(now time.Time) leaseapi.JobPolicy {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	p := leaseapi.AlertPolicy{
		ConsecutiveFailures: r.ConsecutiveFailures, MaxRuntime: ms(r.MaxRuntimeMs), MinRuntime: ms(r.MinRuntimeMs),
		MissedTicks: r.MissedTicks, RecoveryThreshold: r.RecoveryThreshold, RealertAfter: ms(r.RealertAfterMs),
	}
	if r.FailureRateThreshold.Valid && r.FailureRateRuns.Valid {
		p.FailureRate = &leaseapi.FailureRate{Threshold: r.FailureRateThreshold.Float64, Runs: int(r.FailureRateRuns.Int64)}
	}
	s := leaseapi.PolicyState{Status: leaseapi.AlertStatus(r.Status), Reasons: leaseapi.ParseAlertReasons(r.Reasons), Since: AnyTime(r.Since)}
	if r.AlertedAt != nil {
		at := AnyTime(r.AlertedAt)
		s.AlertedAt = &at
	}
	return leaseapi.JobPolicy{JobID: r.JobID, Policy: p, State: s, UpdatedBy: r.UpdatedBy, UpdatedAt: AnyTime(r.UpdatedAt), Now: now.UTC()}
}

// PolicyEventDetail is the detail an outbox row of a policy event carries.
func PolicyEventDetail(ev *decide.PolicyEvent) []byte {
	reasons := make([]string, len(ev.Reasons))
	for i, r := range ev.Reasons {
		reasons[i] = string(r)
	}
	b, _ := json.Marshal(struct {
		Reasons []string `json:"reasons"`
		Repeat  bool     `json:"repeat"`
	}{reasons, ev.Repeat}) // cannot fail: strings and a bool
	return b
}
