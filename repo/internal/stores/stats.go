package stores

import (
	"time"

	"github.com/leaseapi/leaseapi"
)

// StatsRow is the row of either store's Stats query.
type StatsRow struct {
	Held     int64 `db:"held"`
	Released int64 `db:"released"`
	Expired  int64 `db:"expired"`
	Revoked  int64 `db:"revoked"`
	Paused   int64 `db:"paused"`
	Overdue  int64 `db:"overdue"`

	OwedCatchUp int64 `db:"owed_catch_up"`
	OwedManual  int64 `db:"owed_manual"`

	RunsSucceeded int64 `db:"runs_succeeded"`
	RunsFailed    int64 `db:"runs_failed"`
	RunsExpired   int64 `db:"runs_expired"`
	RunsRevoked   int64 `db:"runs_revoked"`
	RunsMissed    int64 `db:"runs_missed"`
}

// Stats is the row as leaseapi.Stats at now.
func (r StatsRow) Stats(now time.Time) leaseapi.Stats {
	return leaseapi.Stats{
		Leases: map[leaseapi.State]int64{
			leaseapi.StateHeld: r.Held, leaseapi.StateReleased: r.Released,
			leaseapi.StateExpired: r.Expired, leaseapi.StateRevoked: r.Revoked,
		},
		Paused: r.Paused, Overdue: r.Overdue,
		Runs24h: map[leaseapi.Outcome]int64{
			leaseapi.OutcomeSucceeded: r.RunsSucceeded, leaseapi.OutcomeFailed: r.RunsFailed,
			leaseapi.OutcomeExpired: r.RunsExpired, leaseapi.OutcomeRevoked: r.RunsRevoked,
			leaseapi.OutcomeMissed: r.RunsMissed,
		},
		Owed: map[leaseapi.Trigger]int64{leaseapi.TriggerCatchUp: r.OwedCatchUp, leaseapi.TriggerManual: r.OwedManual},
		Now:  now,
	}
}

// JobAheadRow is a row of either store's jobs-ahead query: a job, and the
// count of all the jobs the query found.
type JobAheadRow struct {
	JobID string `db:"job_id"`
	Total int64  `db:"total"`
}

// JobsAhead is the rows as leaseapi.JobsAhead.
func JobsAhead(rows []JobAheadRow) leaseapi.JobsAhead {
	var out leaseapi.JobsAhead
	for _, r := range rows {
		out.Count = r.Total
		out.JobIDs = append(out.JobIDs, r.JobID)
	}
	return out
}
