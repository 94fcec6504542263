package stores

import (
	"slices"

	"github.com/leaseapi/leaseapi"
)

// What both stores share of the reads across jobs: the lease list's
// filters, the recent runs and the counts of Stats.

// OverdueCondition is the one definition of an overdue job, in the SQL of
// both stores: scheduled, not paused, its newest decided tick was missed
// (missed_at, that tick plus its grace) and no grant started since. Stats
// counts it and the lease list filters by it.
const OverdueCondition = `(schedule IS NOT NULL AND paused_at IS NULL AND missed_at IS NOT NULL AND acquired_at < missed_at)`

// OwedAt is the one definition, in the SQL of both stores, of a job that
// owes a tick at now: it has one, and it is still claimable (owed_until).
// The read of what jobs owe and the owed-tick gauges use it.
func OwedAt(now string) string {
	return `(owed_tick IS NOT NULL AND owed_until > ` + now + `)`
}

// OwesCatchUp is the one definition, in the SQL of both stores, of a job
// that a sweep pass makes owe the tick it just decided missed, the newest
// tick it decided: its policy is catch-up latest, it is not paused
// (pausing cancels what a job owes, so a pass while it is paused makes it
// owe nothing, even for a tick whose grace ended before the pause), it owes
// no manual tick (a run now outranks a catch-up), no grant started since
// the tick's grace ended (missedAt), and the tick is still within the
// window (windowEnd, the tick plus catch_up_window_ms, after now). A NULL
// missedAt (the newest tick was not missed) owes nothing.
func OwesCatchUp(missedAt, windowEnd, now string) string {
	return `(catch_up = 'latest' AND paused_at IS NULL AND COALESCE(owed_reason, '') <> 'manual' AND acquired_at < ` + missedAt +
		` AND ` + windowEnd + ` > ` + now + `)`
}

// CatchUpDebt is what a sweep's decision writes to what the job owes, in
// the SQL of both stores: the owed_* columns and, in their order, each
// one's new value: the catch-up debt of tick, claimable until windowEnd,
// when owes (OwesCatchUp) holds, else the row's own value.
func CatchUpDebt(owes, tick, windowEnd string) (columns, values []string) {
	debt := []struct{ column, value string }{
		{"owed_tick", tick}, {"owed_reason", "'catch-up'"}, {"owed_by", "NULL"},
		{"owed_trigger_reason", "NULL"}, {"owed_until", windowEnd},
	}
	for _, d := range debt {
		columns = append(columns, d.column)
		values = append(values, `CASE WHEN `+owes+` THEN `+d.value+` ELSE `+d.column+` END`)
	}
	return columns, values
}

// ListFilters are the conditions of the lease list's paused and overdue
// filters, appended to its WHERE; a store's query refers to the leases
// row without a qualifier. They are spelled out rather than bound as
// parameters so that the planner can read the page through the partial
// indexes on paused_at and missed_at (migrations 0004), whose predicates a
// parameter could not imply.
func ListFilters(p *leaseapi.ListParams) string {
	var s string
	if p.Paused != nil {
		if *p.Paused {
			s += "\n\tAND paused_at IS NOT NULL"
		} else {
			s += "\n\tAND paused_at IS NULL"
		}
	}
	if p.Overdue != nil {
		if *p.Overdue {
			s += "\n\tAND missed_at IS NOT NULL AND " + OverdueCondition
		} else {
			s += "\n\tAND NOT " + OverdueCondition
		}
	}
	if p.Alerting != nil {
		if *p.Alerting {
			s += "\n\tAND alert_status = 'alerting'"
		} else {
			s += "\n\tAND COALESCE(alert_status, '') <> 'alerting'"
		}
	}
	return s
}

// RunOutcomes are the outcomes of a run.
var RunOutcomes = []leaseapi.Outcome{
	leaseapi.OutcomeRunning, leaseapi.OutcomeSucceeded, leaseapi.OutcomeFailed,
	leaseapi.OutcomeExpired, leaseapi.OutcomeRevoked, leaseapi.OutcomeMissed,
}

// RecentRunOutcomes returns the finished outcomes a run must have to be
// listed, stored as they are listed (every one when p names none), whether
// the runs still marked running must be read (they are listed as running,
// or as expired once their grant has expired: leaseapi.Run.ShowExpiry),
// and whether only some of those are listed (p names one of running and
// expired, not both), so that a read of them may keep fewer than it read
// (RecentRunPage).
func RecentRunOutcomes(p *leaseapi.RecentRunsParams) (finished []string, running, filtered bool) {
	outcomes := p.Outcomes
	if len(outcomes) == 0 {
		outcomes = RunOutcomes
	}
	for _, o := range outcomes {
		if o != leaseapi.OutcomeRunning {
			finished = append(finished, string(o))
		}
	}
	run, expired := slices.Contains(outcomes, leaseapi.OutcomeRunning), slices.Contains(outcomes, leaseapi.OutcomeExpired)
	return finished, run || expired, run != expired
}

// RecentRunPage is the page of p from what a store read at one clock, in
// one snapshot: finished, the newest runs of the finished outcomes asked
// for (RecentRunOutcomes), at most p.Limit + 1; running, the newest runs
// still marked running, as many or fewer (none when they are not asked
// for), each shown beside its job's lease (leaseapi.Run.ShowExpiry). The
// running runs whose outcome, so shown, is not asked for are left out;
// while a full read of them kept fewer than a page, and the runs after it
// could still be on the page, next reads the next ones after key (in the
// same snapshot, at the same clock, shown), as many as running held.
func RecentRunPage(p *leaseapi.RecentRunsParams, finished, running []leaseapi.RecentRun,
	next func(after leaseapi.RunKey) ([]leaseapi.RecentRun, error)) (leaseapi.RunPage, error) {
	n := p.Limit + 1
	finished = slices.Clone(finished)
	sortRuns(finished)
	kept := slices.Clone(finished)
	for {
		for _, r := range running {
			if len(p.Outcomes) == 0 || slices.Contains(p.Outcomes, r.Outcome) {
				kept = append(kept, r)
			}
		}
		if len(running) < n || len(kept)-len(finished) >= n {
			break
		}
		last := running[len(running)-1].Key
		if len(finished) >= n && finished[n-1].Key.Before(last) {
			break // every run after last sorts after a page of finished ones
		}
		var err error
		if running, err = next(last); err != nil {
			return leaseapi.RunPage{}, err
		}
	}
	sortRuns(kept)
	page := leaseapi.RunPage{Runs: kept}
	if len(kept) > p.Limit {
		page.Runs, page.More = kept[:p.Limit], true
	}
	return page, nil
}

// sortRuns sorts runs newest first by their keys (leaseapi.RunKey).
func sortRuns(runs []leaseapi.RecentRun) {
	slices.SortFunc(runs, func(a, b leaseapi.RecentRun) int {
		switch {
		case a.Key.Before(b.Key):
			return -1
		case b.Key.Before(a.Key):
			return 1
		}
		return 0
	})
}
