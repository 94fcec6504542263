package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// The statements of a repair (Store.Repair), run under the write lock, so
// nothing moves the job between the read and the writes. Times are Unix
// milliseconds.
const (
	// newestSucceededQuery is the tick of the job's newest succeeded run
	// at or before $2 (now + window).
	newestSucceededQuery = `
SELECT max(tick) FROM runs WHERE job_id = $1 AND outcome = 'succeeded' AND tick <= $2`

	// repairRevokeQuery revokes the open grant (held or expired) the lock
	// read, as revokeQuery does; revokeRunQuery then closes its run.
	repairRevokeQuery = `
UPDATE leases AS l SET token = token + 1, revoked_at = $3, expires_at = min(expires_at, $3),
	last_outcome = 'revoked', revoked_by = $4
WHERE job_id = $1 AND token = $2 AND ` + stores.GrantOpen + `
RETURNING ` + leaseColumns

	// discardRunsQuery sets aside the runs whose tick is after $2 (now +
	// window); one still running ends at $3 (now).
	discardRunsQuery = `
UPDATE runs SET outcome = 'discarded', ended_at = COALESCE(ended_at, $3)
WHERE job_id = $1 AND tick > $2 AND outcome <> 'discarded'`

	// repairLeaseQuery writes the last completed tick, clears the owed
	// tick when $3 and the grant's tick when $5, on the grant the repair
	// left ($4: its token).
	repairLeaseQuery = `
UPDATE leases SET last_completed_tick = $2, tick = CASE WHEN $5 THEN NULL ELSE tick END,
	owed_tick = CASE WHEN $3 THEN NULL ELSE owed_tick END,
	owed_reason = CASE WHEN $3 THEN NULL ELSE owed_reason END,
	owed_by = CASE WHEN $3 THEN NULL ELSE owed_by END,
	owed_trigger_reason = CASE WHEN $3 THEN NULL ELSE owed_trigger_reason END,
	owed_until = CASE WHEN $3 THEN NULL ELSE owed_until END
WHERE job_id = $1 AND token = $4
RETURNING ` + leaseColumns
)

// Repair undoes what ticks ahead of the clock did to a job. See
// leaseapi.Store.
func (s *Store) Repair(ctx context.Context, p *leaseapi.RepairParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("repair %q", p.JobID)
	var ev stores.Events
	return observedTx(ctx, s, op, s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		cur, err := selectLease(ctx, tx, p.JobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		ahead := now + p.Window.Milliseconds()
		var newest sql.NullInt64
		if err := tx.GetContext(ctx, &newest, newestSucceededQuery, p.JobID, ahead); err != nil {
			return leaseapi.Lease{}, err
		}
		l := cur.lease(now)
		plan := decide.Repair(l, fromMs(now), p.Window, p.Retention, fromNullMs(newest))
		token := cur.Token
		if plan.Revoke {
			by := sql.NullString{String: p.By, Valid: p.By != ""}
			row, err := writeLease(ctx, tx, repairRevokeQuery, p.JobID, cur.Token, now, by)
			if err != nil {
				return leaseapi.Lease{}, err
			}
			token = row.Token
			if _, err := tx.ExecContext(ctx, revokeRunQuery, p.JobID, cur.Token, now, by); err != nil {
				return leaseapi.Lease{}, err
			}
			if _, err := tx.ExecContext(ctx, revokedSlotQuery, p.JobID, cur.Token, cur.ExpiresAt); err != nil {
				return leaseapi.Lease{}, err
			}
			ev.RunFinished(leaseapi.OutcomeRevoked, time.Duration(now-cur.AcquiredAt)*time.Millisecond)
		}
		res, err := tx.ExecContext(ctx, discardRunsQuery, p.JobID, plan.Ahead.UnixMilli(), now)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		discarded, err := res.RowsAffected()
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if discarded == 0 && !plan.Changes(l) {
			return l, nil // nothing ahead: nothing written
		}
		row, err := writeLease(ctx, tx, repairLeaseQuery, p.JobID, toNullMs(plan.LastCompletedTick), plan.ClearOwed, token, plan.ClearTick)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// jobsAheadQuery reads the jobs with a mark after $1 (now + window, Unix
// ms; stores.AheadAt), the first $2 of them with the count of all: one
// scan of the leases.
var jobsAheadQuery = `
SELECT l.job_id, count(*) OVER () AS total
FROM leases AS l
WHERE ` + stores.AheadAt(`$1`) + `
ORDER BY l.job_id
LIMIT $2`

// JobsAhead counts the jobs with marks ahead of the clock. See
// leaseapi.Store.
func (s *Store) JobsAhead(ctx context.Context, window time.Duration, limit int) (leaseapi.JobsAhead, error) {
	if err := leaseapi.ValidateJobsAhead(window, limit); err != nil {
		return leaseapi.JobsAhead{}, err
	}
	return transact(ctx, s, "jobs ahead", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.JobsAhead, error) {
		var rows []stores.JobAheadRow
		if err := tx.SelectContext(ctx, &rows, jobsAheadQuery, now+window.Milliseconds(), limit); err != nil {
			return leaseapi.JobsAhead{}, err
		}
		return stores.JobsAhead(rows), nil
	})
}
