package leaseapi

import "time"

// JobHealth is what the per-job metrics say of one job: its latest
// outcomes, read from its lease and its run history.
type JobHealth struct {
	JobID string
	// LastSuccess is when the job's newest succeeded run ended; zero when
	// the history holds none.
	LastSuccess time.Time
	// LastFinish is when the job's newest finished run that had a holder
	// ended (succeeded, failed, expired or revoked; a grant that expired
	// and that no grant has taken over yet ends at its expiresAt, as Stats
	// counts it); zero when none.
	LastFinish time.Time
	// LastDuration is how long that run lasted; zero when none.
	LastDuration time.Duration
	// ConsecutiveFailures counts the failed and expired runs that started
	// after the newest succeeded one (all of them when none succeeded).
	// Missed ticks are counted by MissedTicks, revoked runs by neither.
	ConsecutiveFailures int64
	// Overdue: scheduled, not paused, its newest decided tick was missed
	// and no grant started since (Stats.Overdue counts these).
	Overdue bool
	// Paused: the job is paused.
	Paused bool
	// MissedTicks is the lease's counter of missed ticks.
	MissedTicks int64
	// AlertStatus is where the job's alert policy stands, "" without one
	// (Lease.AlertStatus); AlertReasons are the reasons of an alerting job.
	AlertStatus  AlertStatus
	AlertReasons []AlertReason
}

// JobHealthPage is the health of the first jobs in job id order.
type JobHealthPage struct {
	Jobs []JobHealth
	// Truncated counts the jobs left out by the limit.
	Truncated int64
	// Now is the store's clock when the page was read.
	Now time.Time
}

// MaxJobHealthLimit bounds the jobs one JobHealth call reads.
const MaxJobHealthLimit = 1_000_000

// ValidateJobHealthLimit returns an *InvalidError unless limit is from 1
// to MaxJobHealthLimit.
func ValidateJobHealthLimit(limit int) error {
	if limit < 1 || limit > MaxJobHealthLimit {
		return &InvalidError{Field: "limit", Rule: "must be from 1 to 1000000"}
	}
	return nil
}
