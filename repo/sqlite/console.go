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

// recentRunsBranch reads at most a page ($7) of the runs whose
// stored outcome is OUTCOME, when OUTCOME is one of $6 (a JSON array),
// from runs_outcome_at_idx, newest first, after the cursor ($1, $2) and
// within the prefix's range [$3, $4).
const recentRunsBranch = `SELECT * FROM (
	SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
		COALESCE(r.started_at, r.tick) AS at
	FROM runs AS r
	WHERE r.outcome = 'OUTCOME' AND 'OUTCOME' IN (SELECT value FROM json_each($6))
		AND (COALESCE(r.started_at, r.tick), r.id) < ($1, $2)
		AND r.job_id >= $3 AND r.job_id < $4
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $7)`

// runExpired: the grant of a run still marked running (l) is
// neither released nor revoked and has expired at $5.
var runExpired = stores.ExpiredAt(`$5`)

// recentRunningBranch reads, when $9, at most a page of the runs
// still marked running, as the other branches do. One whose grant has
// expired is shown as expired, ending at the grant's expiry, as Runs
// shows it; only those whose outcome, so computed, is one of $8 (a JSON
// array) are kept.
var recentRunningBranch = `SELECT * FROM (
	SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at,
		CASE WHEN ` + runExpired + ` THEN l.expires_at ELSE r.ended_at END AS ended_at,
		CASE WHEN ` + runExpired + ` THEN 'expired' ELSE r.outcome END AS outcome,
		r.revoked_by, COALESCE(r.started_at, r.tick) AS at
	FROM runs AS r
		JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
	WHERE $9 AND r.outcome = 'running'
		AND (COALESCE(r.started_at, r.tick), r.id) < ($1, $2)
		AND r.job_id >= $3 AND r.job_id < $4
		AND CASE WHEN ` + runExpired + ` THEN 'expired' ELSE r.outcome END IN (SELECT value FROM json_each($8))
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $7)`

// recentRunsQuery reads one page of the runs of every job: a branch
// per outcome (Store has no LATERAL, so they are spelled out), each
// reading at most a page, merged newest first by
// (COALESCE(started_at, tick), id).
var recentRunsQuery = func() string {
	var branches []string
	for _, o := range stores.RunOutcomes {
		if o != leaseapi.OutcomeRunning {
			branches = append(branches, strings.ReplaceAll(recentRunsBranch, "OUTCOME", string(o)))
		}
	}
	branches = append(branches, recentRunningBranch)
	return `SELECT id, job_id, token, owner, tick, started_at, ended_at, outcome, revoked_by, at FROM (
` + strings.Join(branches, "\nUNION ALL\n") + `)
ORDER BY at DESC, id DESC
LIMIT $7`
}()

type recentRunRow struct {
	ID int64 `db:"id"`
	runRow
	JobID string `db:"job_id"`
	At    int64  `db:"at"`
}

// RecentRuns returns one page of the runs of every job. See leaseapi.Store.
func (s *Store) RecentRuns(ctx context.Context, p *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.RunPage{}, err
	}
	want, finished, running := stores.RecentRunOutcomes(p)
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return leaseapi.RunPage{}, err
	}
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
	return transact(ctx, s, "recent runs", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.RunPage, error) {
		var rows []recentRunRow
		if err := tx.SelectContext(ctx, &rows, recentRunsQuery,
			at, id, start, end, now, string(finishedJSON), p.Limit+1, string(wantJSON), running); err != nil {
			return leaseapi.RunPage{}, err
		}
		page := leaseapi.RunPage{Runs: make([]leaseapi.RecentRun, 0, min(len(rows), p.Limit)), Now: fromMs(now)}
		if len(rows) > p.Limit {
			page.More, rows = true, rows[:p.Limit]
		}
		for _, r := range rows {
			page.Runs = append(page.Runs, leaseapi.RecentRun{
				Run: leaseapi.Run{
					JobID:     r.JobID,
					Token:     r.Token.Int64,
					Owner:     r.Owner.String,
					Tick:      fromNullMs(r.Tick),
					StartedAt: fromNullMs(r.StartedAt),
					EndedAt:   fromNullMs(r.EndedAt),
					Outcome:   leaseapi.Outcome(r.Outcome),
					RevokedBy: r.RevokedBy.String,
				},
				Key: leaseapi.RunKey{At: fromMs(r.At), ID: r.ID},
			})
		}
		return page, nil
	})
}
