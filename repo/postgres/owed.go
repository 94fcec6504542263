package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// Owed ticks (leaseapi.Owing): a trigger, its cancellation and the read of
// what jobs owe are one statement each.

// manualTickOf is the manual tick a trigger at the database clock owes l
// (leaseapi.ManualTick): the greatest of the clock, the last completed tick
// + 1 ms and the current tick + 1 ms, at millisecond precision.
const manualTickOf = `GREATEST(date_trunc('milliseconds', clock_timestamp()),
		date_trunc('milliseconds', l.last_completed_tick) + interval '1 millisecond',
		date_trunc('milliseconds', l.tick) + interval '1 millisecond')`

// triggerQuery makes an unpaused job owe a manual tick, replacing a
// catch-up debt, unless it owes a manual tick already or $4 is the key of
// its last manual tick: those answer the tick they made; or unless the
// tick would lie more than $6 ms after the clock (a tick of the future
// completed: no claim of it could be granted, decide.Ahead). The tick is
// claimable until it + max(the job's grace, $5 ms).
const triggerQuery = `
UPDATE leases AS l SET (owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until, manual_tick, manual_key) = (
	SELECT m.tick, 'manual', $2::text, $3::text,
		m.tick + GREATEST(COALESCE(l.grace_ms, 0), $5::bigint) * interval '1 millisecond', m.tick, $4::text
	FROM (SELECT ` + manualTickOf + ` AS tick) AS m
)
WHERE l.job_id = $1 AND l.paused_at IS NULL
	AND l.owed_reason IS DISTINCT FROM 'manual'
	AND NOT COALESCE(l.manual_key = $4::text, false)
	AND ` + manualTickOf + ` <= clock_timestamp() + $6::bigint * interval '1 millisecond'
RETURNING ` + leaseColumns

// manualKeyQuery reads whether $2 is the key of job $1's last manual tick.
const manualKeyQuery = `SELECT COALESCE(manual_key = $2::text, false) FROM leases WHERE job_id = $1`

// expireOwed forgets the debts that the rows of locked (a sub-select of
// leases ending in FOR UPDATE) name, which are past their claimable time,
// and records each unclaimed manual tick as a missed run with trigger
// manual (counted in no counter: it is no tick of the schedule); a
// catch-up tick was recorded missed when it was decided. It returns how
// many it forgot.
func expireOwed(locked string) string {
	return `
WITH expired AS (
	UPDATE leases AS l SET (owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until) = (NULL, NULL, NULL, NULL, NULL)
	FROM (SELECT job_id, owed_tick, owed_reason, owed_by, owed_until FROM leases ` + locked + `) AS o
	WHERE l.job_id = o.job_id
	RETURNING o.job_id, o.owed_tick, o.owed_reason, o.owed_by, o.owed_until
), missed AS (
	INSERT INTO runs (job_id, tick, ended_at, outcome, trigger, triggered_by)
	SELECT job_id, owed_tick, owed_until, 'missed', 'manual', owed_by FROM expired WHERE owed_reason = 'manual'
)
SELECT count(*) FROM expired`
}

var (
	// expireOwedQuery forgets up to $1 debts past their claimable time, in
	// the order they expired (leases_owed_idx), skipping the rows an
	// acquire has locked: the sweep's part.
	expireOwedQuery = expireOwed(`WHERE owed_tick IS NOT NULL AND owed_until <= statement_timestamp()
	ORDER BY owed_until LIMIT $1 FOR UPDATE SKIP LOCKED`)
	// expireJobOwedQuery forgets job $1's debt when it is past its
	// claimable time: a trigger's first step, so that a manual tick
	// nobody claimed is recorded before a new one replaces it.
	expireJobOwedQuery = expireOwed(`WHERE job_id = $1 AND owed_tick IS NOT NULL AND owed_until <= clock_timestamp() FOR UPDATE`)
)

// Trigger makes a job owe a manual tick. See leaseapi.Owing.
func (p *Store) Trigger(ctx context.Context, tp *leaseapi.TriggerParams) (leaseapi.Lease, error) {
	if err := tp.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("trigger %q", tp.JobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var row leaseRow
		triggered := false
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			var expired int
			if err := tx.GetContext(ctx, &expired, expireJobOwedQuery, tp.JobID); err != nil {
				return err
			}
			err := tx.QueryRowxContext(ctx, triggerQuery, tp.JobID,
				sql.NullString{String: tp.By, Valid: tp.By != ""},
				sql.NullString{String: tp.Reason, Valid: tp.Reason != ""},
				sql.NullString{String: tp.Key, Valid: tp.Key != ""},
				tp.Grace.Milliseconds(), p.maxAhead.Milliseconds()).Scan(row.fields()...)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			triggered = err == nil
			return err
		})
		if err != nil {
			return leaseapi.Lease{}, interpretError(op, err)
		}
		if triggered {
			return row.toLease(), nil
		}
		// Unknown, paused, answered by the tick it owes or its key made,
		// or its tick ahead of the clock.
		cur, err := p.echoGetRow(ctx, tp.JobID)
		if err != nil {
			return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, err)
		}
		l := cur.toLease()
		if l.Paused() {
			return leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrJobPaused, Lease: l}
		}
		if l.OwedReason == leaseapi.TriggerManual {
			return l, nil
		}
		m := leaseapi.ManualTick(cur.Now, l.LastCompletedTick, l.Tick)
		ahead := stores.ManualAhead(decide.Ahead(&m, cur.Now, p.maxAhead, &l))
		if ahead != nil && tp.Key != "" {
			var seen bool
			if err := p.db.GetContext(ctx, &seen, manualKeyQuery, tp.JobID, tp.Key); err != nil {
				return leaseapi.Lease{}, interpretError(op, err)
			}
			if seen {
				ahead = nil
			}
		}
		if ahead != nil {
			return leaseapi.Lease{}, ahead
		}
		return l, nil
	})
}

// cancelOwedQuery forgets what a job owes.
const cancelOwedQuery = `
UPDATE leases SET (owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until) = (NULL, NULL, NULL, NULL, NULL)
WHERE job_id = $1 AND owed_tick IS NOT NULL
RETURNING ` + leaseColumns

// CancelOwed cancels what a job owes. See leaseapi.Owing.
func (p *Store) CancelOwed(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("cancel owed %q", jobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var row leaseRow
		err := p.db.QueryRowxContext(ctx, cancelOwedQuery, jobID).Scan(row.fields()...)
		if err == nil {
			return row.toLease(), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return leaseapi.Lease{}, interpretError(op, err)
		}
		l, err := p.get(ctx, jobID) // owes nothing, or unknown
		if err != nil {
			return leaseapi.Lease{}, fmt.Errorf("%s: %w", op, err)
		}
		return l, nil
	})
}

// owedQuery reads what the named jobs owe, by primary key: a tick is owed
// while it is claimable (owed_until).
var owedQuery = `
SELECT job_id, owed_tick, owed_reason, owed_by, owed_trigger_reason
FROM leases
WHERE job_id = ANY($1::text[]) AND ` + stores.OwedAt(`clock_timestamp()`) + `
ORDER BY job_id`

// owedRow is one row of owedQuery.
type owedRow struct {
	JobID         string         `db:"job_id"`
	Tick          sql.NullTime   `db:"owed_tick"`
	Reason        string         `db:"owed_reason"`
	By            sql.NullString `db:"owed_by"`
	TriggerReason sql.NullString `db:"owed_trigger_reason"`
}

// Owed reads what jobs owe. See leaseapi.Owing.
func (p *Store) Owed(ctx context.Context, op *leaseapi.OwedParams) ([]leaseapi.Owed, error) {
	if err := op.Validate(); err != nil {
		return nil, err
	}
	return bounded(ctx, func(ctx context.Context) ([]leaseapi.Owed, error) {
		var rows []owedRow
		if err := p.db.SelectContext(ctx, &rows, owedQuery, pq.Array(op.JobIDs)); err != nil {
			return nil, interpretError("owed", err)
		}
		out := make([]leaseapi.Owed, len(rows))
		for i, r := range rows {
			out[i] = leaseapi.Owed{JobID: r.JobID, Tick: r.Tick.Time.UTC(), Reason: leaseapi.Trigger(r.Reason),
				TriggeredBy: r.By.String, TriggerReason: r.TriggerReason.String}
		}
		return out, nil
	})
}
