package sqlite

import (
	"context"
	"encoding/json"
	"math"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// recentRunsBranch reads at most a page ($6) of the runs whose
// stored outcome is OUTCOME, when OUTCOME is one of $5 (a JSON array),
// from runs_outcome_at_idx, newest first, after the cursor ($1, $2) and
// within the prefix's range [$3, $4).
const recentRunsBranch = `SELECT * FROM (
	SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
		COALESCE(r.started_at, r.tick) AS at
	FROM runs AS r
	WHERE r.outcome = 'OUTCOME' AND 'OUTCOME' IN (SELECT value FROM json_each($5))
		AND (COALESCE(r.started_at, r.tick), r.id) < ($1, $2)
		AND r.job_id >= $3 AND r.job_id < $4
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $6)`

// recentRunningQuery reads at most a page ($5) of the runs still marked
// running, newest first, after the cursor ($1, $2) within the prefix's
// range [$3, $4), each with its job's lease, which shows it running or
// expired (leaseapi.Run.ShowExpiry).
const recentRunningQuery = `
SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
	COALESCE(r.started_at, r.tick) AS at, ` + runGrantColumns + `
FROM runs AS r LEFT JOIN leases AS l ON l.job_id = r.job_id
WHERE r.outcome = 'running'
	AND (COALESCE(r.started_at, r.tick), r.id) < ($1, $2)
	AND r.job_id >= $3 AND r.job_id < $4
ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
LIMIT $5`

// recentRunsQuery reads the newest runs of the finished outcomes asked
// for: a branch per outcome (Store has no LATERAL, so they are spelled
// out), each reading at most a page, merged newest first by
// (COALESCE(started_at, tick), id) into one page.
var recentRunsQuery = func() string {
	var branches []string
	for _, o := range stores.RunOutcomes {
		if o != leaseapi.OutcomeRunning {
			branches = append(branches, strings.ReplaceAll(recentRunsBranch, "OUTCOME", string(o)))
		}
	}
	return `SELECT id, job_id, token, owner, tick, started_at, ended_at, outcome, revoked_by, at FROM (
` + strings.Join(branches, "\nUNION ALL\n") + `)
ORDER BY at DESC, id DESC
LIMIT $6`
}()

type recentRunRow struct {
	runRow
	JobID string `db:"job_id"`
	At    int64  `db:"at"`
}

// recentRun is r as the domain sees it at now, with its key.
func (r *recentRunRow) recentRun(now int64) leaseapi.RecentRun {
	run := leaseapi.Run{
		JobID:     r.JobID,
		Token:     r.Token.Int64,
		Owner:     r.Owner.String,
		Tick:      fromNullMs(r.Tick),
		StartedAt: fromNullMs(r.StartedAt),
		EndedAt:   fromNullMs(r.EndedAt),
		Outcome:   leaseapi.Outcome(r.Outcome),
		RevokedBy: r.RevokedBy.String,
	}
	run.ShowExpiry(r.lease(now))
	return leaseapi.RecentRun{Run: run, Key: leaseapi.RunKey{At: fromMs(r.At), ID: r.ID}}
}

// RecentRuns returns one page of the runs of every job. See leaseapi.Store.
func (s *Store) RecentRuns(ctx context.Context, p *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.RunPage{}, err
	}
	finished, running, _ := stores.RecentRunOutcomes(p)
	finishedJSON, err := json.Marshal(finished)
	if err != nil {
		return leaseapi.RunPage{}, err
	}
	// The first page starts after every run.
	at, id := int64(math.MaxInt64), int64(math.MaxInt64)
	if p.After != nil {
		at, id = p.After.At.UnixMilli(), p.After.ID
	}
	// Every job id character sorts below '~': [prefix, prefix+"~") holds
	// exactly the ids that start with prefix.
	start, end := p.Prefix, p.Prefix+"~"
	n := p.Limit + 1
	return transact(ctx, s, "recent runs", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.RunPage, error) {
		var rows []recentRunRow
		if err := tx.SelectContext(ctx, &rows, recentRunsQuery, at, id, start, end, string(finishedJSON), n); err != nil {
			return leaseapi.RunPage{}, err
		}
		done := make([]leaseapi.RecentRun, len(rows))
		for i := range rows {
			done[i] = rows[i].recentRun(now)
		}
		readRunning := func(at, id int64) ([]leaseapi.RecentRun, error) {
			var rows []recentRunRow
			if err := tx.SelectContext(ctx, &rows, recentRunningQuery, at, id, start, end, n); err != nil {
				return nil, err
			}
			open := make([]leaseapi.RecentRun, len(rows))
			for i := range rows {
				open[i] = rows[i].recentRun(now)
			}
			return open, nil
		}
		var open []leaseapi.RecentRun
		if running {
			if open, err = readRunning(at, id); err != nil {
				return leaseapi.RunPage{}, err
			}
		}
		page, err := stores.RecentRunPage(p, done, open, func(after leaseapi.RunKey) ([]leaseapi.RecentRun, error) {
			return readRunning(after.At.UnixMilli(), after.ID)
		})
		page.Now = fromMs(now)
		return page, err
	})
}
