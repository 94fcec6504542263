package postgres

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// recentRunsQuery reads what one page of the runs of every job is made of
// (stores.RecentRunPage), newest first by (COALESCE(started_at, tick), id),
// with the clock. For each finished outcome asked for ($1) it reads at
// most a page ($5) from runs_outcome_at_idx, starting after the cursor
// ($2, $3) and within the prefix's range [$4, $4 || '~') (job_id is in the
// index and checked there); those pages are merged into one. So it reads
// at most a page per outcome, however long the history.
//
// When running or expired runs are asked for ($6), it also reads at most
// a page of the runs still marked running (recentRunning), each with
// its job's lease, which shows it running or expired (leaseapi.Run.
// ShowExpiry). Apart, so that the lease is joined to running runs only:
// joined to every run, the planner would rather sort a scope's whole
// history than read the index in order.
var recentRunsQuery = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT r.*, c.now AS db_now
FROM c, (
	(SELECT r.* FROM unnest($1::text[]) AS o(outcome)
		CROSS JOIN LATERAL (
			SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
				COALESCE(r.started_at, r.tick) AS at, NULL::bigint AS lease_token, NULL::timestamptz AS lease_expires_at,
				NULL::timestamptz AS lease_released_at, NULL::boolean AS lease_revoked
			FROM runs AS r
			WHERE r.outcome = o.outcome
				AND (COALESCE(r.started_at, r.tick), r.id) < ($2::timestamptz, $3::bigint)
				AND r.job_id >= $4::text AND r.job_id < $4::text || '~'
			ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
			LIMIT $5
		) AS r
	ORDER BY r.at DESC, r.id DESC
	LIMIT $5)
	UNION ALL
	(` + recentRunning(`$2`, `$3`, `$4`) + ` AND $6::boolean
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $5)
) AS r`

// recentRunning reads the runs still marked running after the cursor
// (at, id) within the prefix's range [prefix, prefix || '~'), each with
// its job's lease (runGrantColumns).
func recentRunning(at, id, prefix string) string {
	return `SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
		COALESCE(r.started_at, r.tick) AS at, ` + runGrantColumns + `
	FROM runs AS r LEFT JOIN leases AS l ON l.job_id = r.job_id
	WHERE r.outcome = 'running'
		AND (COALESCE(r.started_at, r.tick), r.id) < (` + at + `::timestamptz, ` + id + `::bigint)
		AND r.job_id >= ` + prefix + `::text AND r.job_id < ` + prefix + `::text || '~'`
}

// recentRunningQuery reads the next page ($4) of the runs still marked
// running after the cursor ($1, $2) within the prefix $3: after the last
// one a read of recentRunsQuery, or of this query, returned, in the same
// transaction.
var recentRunningQuery = recentRunning(`$1`, `$2`, `$3`) + `
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $4`

type recentRunRow struct {
	runRow
	JobID string    `db:"job_id"`
	At    time.Time `db:"at"`
}

// recentRun is r as the domain sees it at now, with its key.
func (r *recentRunRow) recentRun(now time.Time) leaseapi.RecentRun {
	run := leaseapi.Run{
		JobID:     r.JobID,
		Token:     r.Token.Int64,
		Owner:     r.Owner.String,
		Tick:      nullTime(r.Tick),
		StartedAt: nullTime(r.StartedAt),
		EndedAt:   nullTime(r.EndedAt),
		Outcome:   leaseapi.Outcome(r.Outcome),
		RevokedBy: r.RevokedBy.String,
	}
	run.ShowExpiry(r.lease(now))
	return leaseapi.RecentRun{Run: run, Key: leaseapi.RunKey{At: r.At.UTC(), ID: r.ID}}
}

// RecentRuns returns one page of the runs of every job. See leaseapi.Store.
// When only some of the runs still marked running are listed (only the
// running ones, or only the expired ones), a page of them may keep fewer
// than a page: the next are then read in the same snapshot, in a
// read-only repeatable-read transaction, at the clock of the first read.
func (p *Store) RecentRuns(ctx context.Context, rp *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	if err := rp.Validate(); err != nil {
		return leaseapi.RunPage{}, err
	}
	finished, running, filtered := stores.RecentRunOutcomes(rp)
	// The first page starts after every run: a cursor at infinity keeps
	// the statement one plan, with the cursor as its index condition.
	var at any = "infinity"
	id := int64(math.MaxInt64)
	if rp.After != nil {
		at, id = rp.After.At, rp.After.ID
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.RunPage, error) {
		var q sqlx.QueryerContext = p.db
		if filtered {
			tx, err := p.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
			if err != nil {
				return leaseapi.RunPage{}, interpretError("recent runs", err)
			}
			defer func() { _ = tx.Rollback() }() // read-only: nothing to commit
			q = tx
		}
		page, err := p.recentRuns(ctx, q, rp, pq.Array(finished), at, id, running)
		if err != nil {
			return leaseapi.RunPage{}, interpretError("recent runs", err)
		}
		return page, nil
	})
}

// recentRuns reads and builds one page of rp with q (stores.RecentRunPage).
func (p *Store) recentRuns(ctx context.Context, q sqlx.QueryerContext, rp *leaseapi.RecentRunsParams, finished any,
	at any, id int64, running bool) (leaseapi.RunPage, error) {
	n := rp.Limit + 1
	var rows []recentRunRow
	if err := sqlx.SelectContext(ctx, q, &rows, recentRunsQuery, finished, at, id, rp.Prefix, n, running); err != nil {
		return leaseapi.RunPage{}, err
	}
	var now time.Time
	if len(rows) > 0 {
		now = rows[0].Now.UTC()
	} else if err := sqlx.GetContext(ctx, q, &now, dbNowQuery); err != nil {
		return leaseapi.RunPage{}, err
	}
	var done, open []leaseapi.RecentRun
	for i := range rows {
		if r := rows[i].recentRun(now); rows[i].Outcome == string(leaseapi.OutcomeRunning) {
			open = append(open, r)
		} else {
			done = append(done, r)
		}
	}
	page, err := stores.RecentRunPage(rp, done, open, func(after leaseapi.RunKey) ([]leaseapi.RecentRun, error) {
		var rows []recentRunRow
		if err := sqlx.SelectContext(ctx, q, &rows, recentRunningQuery, after.At, after.ID, rp.Prefix, n); err != nil {
			return nil, err
		}
		next := make([]leaseapi.RecentRun, len(rows))
		for i := range rows {
			next[i] = rows[i].recentRun(now)
		}
		return next, nil
	})
	page.Now = now.UTC()
	return page, err
}
