package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// Owed ticks (leaseapi.Owing), decided under the single writer's lock as
// the Postgres store decides them in one statement each.

// manualStateQuery reads what a trigger decides with.
const manualStateQuery = `
SELECT paused_at IS NOT NULL AS paused, owed_reason IS NOT NULL AND owed_reason = 'manual' AS manual_owed,
	COALESCE(manual_key = $2, 0) AS key_seen
FROM leases WHERE job_id = $1`

// triggerQuery makes the job owe the manual tick $2, claimable until $5.
const triggerQuery = `
UPDATE leases SET owed_tick = $2, owed_reason = 'manual', owed_by = $3, owed_trigger_reason = $4,
	owed_until = $5, manual_tick = $2, manual_key = $6
WHERE job_id = $1`

const (
	// expiredOwedQuery reads up to $3 debts past their claimable time at
	// $1 ($2: of that job only, or of every job when empty), in the order
	// they expired (leases_owed_idx).
	expiredOwedQuery = `
SELECT job_id, owed_tick, owed_reason, owed_by, owed_until FROM leases
WHERE owed_tick IS NOT NULL AND owed_until <= $1 AND ($2 = '' OR job_id = $2)
ORDER BY owed_until LIMIT $3`

	// insertUnclaimedRunQuery records a manual tick nobody claimed as a
	// missed run with trigger manual.
	insertUnclaimedRunQuery = `
INSERT INTO runs (job_id, tick, ended_at, outcome, trigger, triggered_by) VALUES ($1, $2, $3, 'missed', 'manual', $4)`
)

// expiredOwed is one row of expiredOwedQuery.
type expiredOwed struct {
	JobID  string         `db:"job_id"`
	Tick   int64          `db:"owed_tick"`
	Reason string         `db:"owed_reason"`
	By     sql.NullString `db:"owed_by"`
	Until  int64          `db:"owed_until"`
}

// expireOwed forgets up to limit debts past their claimable time at now
// (of jobID only, unless it is empty), and records each unclaimed manual
// tick as a missed run with trigger manual, counted in no counter (it is no
// tick of the schedule); a catch-up tick was recorded missed when it was
// decided. It returns how many it forgot. The sweep calls it for every
// job, and a trigger for its job first, so that a manual tick nobody
// claimed is recorded before a new one replaces it.
func expireOwed(ctx context.Context, tx *sqlx.Tx, now int64, jobID string, limit int) (int64, error) {
	var rows []expiredOwed
	if err := tx.SelectContext(ctx, &rows, expiredOwedQuery, now, jobID, limit); err != nil {
		return 0, err
	}
	for _, r := range rows {
		if r.Reason == string(leaseapi.TriggerManual) {
			if _, err := tx.ExecContext(ctx, insertUnclaimedRunQuery, r.JobID, r.Tick, r.Until, r.By); err != nil {
				return 0, err
			}
		}
		if _, err := tx.ExecContext(ctx, cancelOwedQuery, r.JobID); err != nil {
			return 0, err
		}
	}
	return int64(len(rows)), nil
}

// Trigger makes a job owe a manual tick. See leaseapi.Owing.
func (s *Store) Trigger(ctx context.Context, p *leaseapi.TriggerParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("trigger %q", p.JobID)
	key := sql.NullString{String: p.Key, Valid: p.Key != ""}
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		if _, err := expireOwed(ctx, tx, now, p.JobID, 1); err != nil {
			return leaseapi.Lease{}, err
		}
		var state struct {
			Paused     bool `db:"paused"`
			ManualOwed bool `db:"manual_owed"`
			KeySeen    bool `db:"key_seen"`
		}
		if err := tx.GetContext(ctx, &state, manualStateQuery, p.JobID, key); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return leaseapi.Lease{}, leaseapi.ErrNotFound
			}
			return leaseapi.Lease{}, err
		}
		row, err := selectLease(ctx, tx, p.JobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		switch {
		case state.Paused:
			return leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrJobPaused, Lease: row.lease(now)}
		case state.ManualOwed || state.KeySeen:
			return row.lease(now), nil // answered by the tick it owes or its key made
		}
		m := leaseapi.ManualTick(fromMs(now), fromNullMs(row.LastCompletedTick), fromNullMs(row.Tick))
		if err := stores.ManualAhead(decide.Ahead(&m, fromMs(now), s.maxAhead, new(row.lease(now)))); err != nil {
			return leaseapi.Lease{}, err // a tick of the future ran: no claim of M could be granted
		}
		grace := leaseapi.ManualTickGrace(time.Duration(row.GraceMs.Int64)*time.Millisecond, p.Grace)
		if _, err := tx.ExecContext(ctx, triggerQuery, p.JobID, m.UnixMilli(),
			sql.NullString{String: p.By, Valid: p.By != ""},
			sql.NullString{String: p.Reason, Valid: p.Reason != ""},
			m.Add(grace).UnixMilli(), key); err != nil {
			return leaseapi.Lease{}, err
		}
		if row, err = selectLease(ctx, tx, p.JobID); err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// cancelOwedQuery forgets what a job owes.
const cancelOwedQuery = `
UPDATE leases SET owed_tick = NULL, owed_reason = NULL, owed_by = NULL, owed_trigger_reason = NULL, owed_until = NULL
WHERE job_id = $1 AND owed_tick IS NOT NULL`

// CancelOwed cancels what a job owes. See leaseapi.Owing.
func (s *Store) CancelOwed(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("cancel owed %q", jobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		if _, err := tx.ExecContext(ctx, cancelOwedQuery, jobID); err != nil {
			return leaseapi.Lease{}, err
		}
		row, err := selectLease(ctx, tx, jobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// owedQuery reads what the named jobs ($2, a JSON array of ids) owe, by
// primary key: a tick is owed while it is claimable (owed_until > $1).
var owedQuery = `
SELECT job_id, owed_tick, owed_reason, owed_by, owed_trigger_reason
FROM leases
WHERE job_id IN (SELECT value FROM json_each($2)) AND ` + stores.OwedAt(`$1`) + `
ORDER BY job_id`

// owedRow is one row of owedQuery.
type owedRow struct {
	JobID         string         `db:"job_id"`
	Tick          int64          `db:"owed_tick"`
	Reason        string         `db:"owed_reason"`
	By            sql.NullString `db:"owed_by"`
	TriggerReason sql.NullString `db:"owed_trigger_reason"`
}

// Owed reads what jobs owe. See leaseapi.Owing.
func (s *Store) Owed(ctx context.Context, p *leaseapi.OwedParams) ([]leaseapi.Owed, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ids, err := json.Marshal(p.JobIDs)
	if err != nil {
		return nil, fmt.Errorf("owed: %w", err)
	}
	return transact(ctx, s, "owed", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) ([]leaseapi.Owed, error) {
		var rows []owedRow
		if err := tx.SelectContext(ctx, &rows, owedQuery, now, string(ids)); err != nil {
			return nil, err
		}
		out := make([]leaseapi.Owed, len(rows))
		for i, r := range rows {
			out[i] = leaseapi.Owed{JobID: r.JobID, Tick: fromMs(r.Tick), Reason: leaseapi.Trigger(r.Reason),
				TriggeredBy: r.By.String, TriggerReason: r.TriggerReason.String}
		}
		return out, nil
	})
}
