package postgres

import (
	"context"
	"math"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// recentRunsQuery reads one page of the runs of every job, newest first by
// (COALESCE(started_at, tick), id). For each finished outcome asked for
// ($1) it reads at most a page from runs_outcome_at_idx, starting after
// the cursor ($2, $3) and within the prefix's range [$4, $4 || '~') (job_id
// is in the index and checked there); the pages are merged into one. So it
// reads at most a page per outcome, however long the history.
//
// The runs still marked running are read apart, when running or expired
// runs are asked for ($7): one whose grant has expired is shown as
// expired, ending at the grant's expiry, as runsQuery shows it, and only
// those whose outcome, so computed, is one of $5 are kept. Apart, so that
// the lease is joined to running runs only: joined to every run, the
// planner would rather sort a scope's whole history than read the index
// in order.
var recentRunsQuery = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now)
SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by, r.at, c.now AS db_now
FROM c, (
	SELECT r.* FROM unnest($1::text[]) AS o(outcome)
		CROSS JOIN LATERAL (
			SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at, r.ended_at, r.outcome, r.revoked_by,
				COALESCE(r.started_at, r.tick) AS at
			FROM runs AS r
			WHERE r.outcome = o.outcome
				AND (COALESCE(r.started_at, r.tick), r.id) < ($2::timestamptz, $3::bigint)
				AND r.job_id >= $4::text AND r.job_id < $4::text || '~'
			ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
			LIMIT $6
		) AS r
	UNION ALL
	(SELECT r.id, r.job_id, r.token, r.owner, r.tick, r.started_at,
		CASE WHEN s.expired THEN l.expires_at ELSE r.ended_at END,
		CASE WHEN s.expired THEN 'expired' ELSE r.outcome END,
		r.revoked_by, COALESCE(r.started_at, r.tick)
	FROM c, runs AS r
		LEFT JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
		CROSS JOIN LATERAL (SELECT COALESCE(` + stores.ExpiredAt(`c.now`) + `, false) AS expired) AS s
	WHERE $7::boolean AND r.outcome = 'running'
		AND (COALESCE(r.started_at, r.tick), r.id) < ($2::timestamptz, $3::bigint)
		AND r.job_id >= $4::text AND r.job_id < $4::text || '~'
		AND CASE WHEN s.expired THEN 'expired' ELSE r.outcome END = ANY($5::text[])
	ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
	LIMIT $6)
) AS r
ORDER BY r.at DESC, r.id DESC
LIMIT $6`

type recentRunRow struct {
	ID int64 `db:"id"`
	runRow
	JobID string    `db:"job_id"`
	At    time.Time `db:"at"`
	Now   time.Time `db:"db_now"`
}

// RecentRuns returns one page of the runs of every job. See leaseapi.Store.
func (p *Store) RecentRuns(ctx context.Context, rp *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	if err := rp.Validate(); err != nil {
		return leaseapi.RunPage{}, err
	}
	want, finished, running := stores.RecentRunOutcomes(rp)
	// The first page starts after every run: a cursor at infinity keeps
	// the statement one plan, with the cursor as its index condition.
	var at any = "infinity"
	id := int64(math.MaxInt64)
	if rp.After != nil {
		at, id = rp.After.At, rp.After.ID
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.RunPage, error) {
		var rows []recentRunRow
		if err := p.db.SelectContext(ctx, &rows, recentRunsQuery,
			pq.Array(finished), at, id, rp.Prefix, pq.Array(want), rp.Limit+1, running); err != nil {
			return leaseapi.RunPage{}, interpretError("recent runs", err)
		}
		page := leaseapi.RunPage{Runs: make([]leaseapi.RecentRun, 0, min(len(rows), rp.Limit))}
		if len(rows) > rp.Limit {
			page.More, rows = true, rows[:rp.Limit]
		}
		for _, r := range rows {
			page.Runs = append(page.Runs, leaseapi.RecentRun{
				Run: leaseapi.Run{
					JobID:     r.JobID,
					Token:     r.Token.Int64,
					Owner:     r.Owner.String,
					Tick:      nullTime(r.Tick),
					StartedAt: nullTime(r.StartedAt),
					EndedAt:   nullTime(r.EndedAt),
					Outcome:   leaseapi.Outcome(r.Outcome),
					RevokedBy: r.RevokedBy.String,
				},
				Key: leaseapi.RunKey{At: r.At.UTC(), ID: r.ID},
			})
		}
		if len(rows) > 0 {
			page.Now = rows[0].Now.UTC()
			return page, nil
		}
		if err := p.db.GetContext(ctx, &page.Now, dbNowQuery); err != nil {
			return leaseapi.RunPage{}, interpretError("recent runs", err)
		}
		page.Now = page.Now.UTC()
		return page, nil
	})
}
