package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// The statements of a repair (Store.Repair), run in one transaction after
// lockForRepairQuery took the lease row's lock, so nothing moves the job
// between the read and the writes.
const (
	lockForRepairQuery = `SELECT ` + leaseColumns + readColumns + ` FROM leases WHERE job_id = $1 FOR UPDATE`

	// newestSucceededQuery is the tick of the job's newest succeeded run
	// at or before $2 (now + window).
	newestSucceededQuery = `
SELECT max(tick) FROM runs WHERE job_id = $1 AND outcome = 'succeeded' AND tick <= $2`

	// discardRunsQuery sets aside the runs whose tick is after $2 (now +
	// window); one still running ends now.
	discardRunsQuery = `
UPDATE runs SET outcome = 'discarded', ended_at = COALESCE(ended_at, clock_timestamp())
WHERE job_id = $1 AND tick > $2 AND outcome <> 'discarded'`

	// repairLeaseQuery writes the last completed tick, clears the owed
	// tick when $3 and the grant's tick when $5, on the grant the repair
	// left ($4: its token).
	repairLeaseQuery = `
UPDATE leases SET last_completed_tick = $2::timestamptz, tick = CASE WHEN $5::boolean THEN NULL ELSE tick END,
	(owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until) = (
		SELECT CASE WHEN $3::boolean THEN NULL ELSE owed_tick END, CASE WHEN $3::boolean THEN NULL ELSE owed_reason END,
			CASE WHEN $3::boolean THEN NULL ELSE owed_by END, CASE WHEN $3::boolean THEN NULL ELSE owed_trigger_reason END,
			CASE WHEN $3::boolean THEN NULL ELSE owed_until END)
WHERE job_id = $1 AND token = $4
RETURNING ` + leaseColumns
)

// repairRevokeQuery revokes the open grant (held or expired) whose token
// the lock read ($2) with the token $4 of WAL timeline $5
// (decide.TokenAfter), as revokeQuery does, and closes its run as revoked
// by $3; its slot, if it took one, stays in use until $6, the grant's
// expiry.
const repairRevokeQuery = `
WITH lease AS (
UPDATE leases AS l SET (token, timeline, revoked_at, expires_at, last_outcome, revoked_by) = (
	SELECT $4::bigint, $5::bigint, c.now, LEAST(l.expires_at, c.now), 'revoked', $3::text
	FROM (SELECT clock_timestamp() AS now) AS c
)
WHERE job_id = $1 AND token = $2 AND released_at IS NULL AND revoked_at IS NULL
RETURNING job_id, token, revoked_at, revoked_by
), run AS (
	UPDATE runs AS r SET (outcome, ended_at, revoked_by) = ('revoked', lease.revoked_at, lease.revoked_by)
	FROM lease WHERE r.job_id = lease.job_id AND r.token = $2 AND r.outcome = 'running'
), slot AS (
	UPDATE group_slots AS s SET revoked_until = $6::timestamptz
	FROM lease WHERE s.job_id = lease.job_id AND s.job_token = $2 AND s.revoked_until IS NULL
)
SELECT token FROM lease`

// Repair undoes what ticks ahead of the clock did to a job. See
// leaseapi.Store.
func (p *Store) Repair(ctx context.Context, rp *leaseapi.RepairParams) (leaseapi.Lease, error) {
	if err := rp.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("repair %q", rp.JobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var out leaseapi.Lease
		var revoked *leaseapi.Lease
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			revoked = nil
			var cur readRow
			if err := tx.QueryRowxContext(ctx, lockForRepairQuery, rp.JobID).Scan(cur.fields()...); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return leaseapi.ErrNotFound
				}
				return err
			}
			// The clock after the lock: the repair is decided at it.
			var now time.Time
			if err := tx.GetContext(ctx, &now, dbNowQuery); err != nil {
				return err
			}
			ahead := now.Add(rp.Window)
			var newest sql.NullTime
			if err := tx.GetContext(ctx, &newest, newestSucceededQuery, rp.JobID, ahead); err != nil {
				return err
			}
			l := cur.toLease()
			plan := decide.Repair(l, now, rp.Window, rp.Retention, nullTime(newest))
			token := cur.Token
			if plan.Revoke {
				by := sql.NullString{String: rp.By, Valid: rp.By != ""}
				if err := tx.GetContext(ctx, &token, repairRevokeQuery, rp.JobID, cur.Token, by,
					decide.TokenAfter(cur.Token, cur.WALTimeline), cur.WALTimeline, cur.ExpiresAt); err != nil {
					return err // no row: none can change under the lock
				}
				revoked = &l
			}
			res, err := tx.ExecContext(ctx, discardRunsQuery, rp.JobID, plan.Ahead)
			if err != nil {
				return err
			}
			discarded, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if discarded == 0 && !plan.Changes(l) {
				out = l // nothing ahead: nothing written
				return nil
			}
			var row leaseRow
			if err := tx.QueryRowxContext(ctx, repairLeaseQuery, rp.JobID,
				nullableTime(plan.LastCompletedTick), plan.ClearOwed, token, plan.ClearTick).Scan(row.fields()...); err != nil {
				return err
			}
			out = row.toLease()
			return nil
		})
		if err != nil {
			if errors.Is(err, leaseapi.ErrNotFound) {
				return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, err)
			}
			return leaseapi.Lease{}, interpretError(op, err)
		}
		if revoked != nil {
			p.observer.RunFinished(leaseapi.OutcomeRevoked, out.ExpiresAt.Sub(revoked.AcquiredAt))
		}
		return out, nil
	})
}

// jobsAheadQuery reads the jobs with a mark after the clock plus $1 ms
// (stores.AheadAt), the first $2 of them with the count of all: one scan
// of the leases.
var jobsAheadQuery = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() + $1::bigint * interval '1 millisecond' AS ahead)
SELECT l.job_id, count(*) OVER () AS total
FROM c, leases AS l
WHERE ` + stores.AheadAt(`c.ahead`) + `
ORDER BY l.job_id
LIMIT $2`

// JobsAhead counts the jobs with marks ahead of the clock. See
// leaseapi.Store.
func (p *Store) JobsAhead(ctx context.Context, window time.Duration, limit int) (leaseapi.JobsAhead, error) {
	if err := leaseapi.ValidateJobsAhead(window, limit); err != nil {
		return leaseapi.JobsAhead{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.JobsAhead, error) {
		var rows []stores.JobAheadRow
		if err := p.db.SelectContext(ctx, &rows, jobsAheadQuery, window.Milliseconds(), limit); err != nil {
			return leaseapi.JobsAhead{}, interpretError("jobs ahead", err)
		}
		return stores.JobsAhead(rows), nil
	})
}
