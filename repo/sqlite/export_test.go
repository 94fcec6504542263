package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// rewindLeaseQuery, rewindRunsQuery and the policy's queries move
// everything that happened to job $1 $2 ms earlier: the lease's times, its
// runs' starts and ends (not the ticks they name) and its policy's.
const (
	rewindLeaseQuery = `
UPDATE leases SET acquired_at = acquired_at - $2, renewed_at = renewed_at - $2, expires_at = expires_at - $2,
	released_at = released_at - $2, revoked_at = revoked_at - $2, schedule_since = schedule_since - $2,
	decide_at = decide_at - $2, paused_at = paused_at - $2, missed_at = missed_at - $2, owed_until = owed_until - $2
WHERE job_id = $1`
	rewindRunsQuery = `
UPDATE runs SET started_at = started_at - $2, ended_at = ended_at - $2 WHERE job_id = $1`
	rewindPolicyQuery = `
UPDATE job_policies SET since = since - $2, alerted_at = alerted_at - $2, updated_at = updated_at - $2 WHERE job_id = $1`
	rewindPolicyDueQuery = `UPDATE leases SET policy_due_at = policy_due_at - $2 WHERE job_id = $1`
)

// Rewind moves everything that happened to job d earlier, as
// repotest.SweepHarness.Rewind says.
func (s *Store) Rewind(ctx context.Context, jobID string, d time.Duration) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx, _ int64) error {
		for _, q := range []string{rewindLeaseQuery, rewindRunsQuery, rewindPolicyQuery, rewindPolicyDueQuery} {
			if _, err := tx.ExecContext(ctx, q, jobID, d.Milliseconds()); err != nil {
				return fmt.Errorf("rewind %q: %w", jobID, err)
			}
		}
		return nil
	})
}

// setGrantTickQuery moves job $1's grant to tick $2 (the lease's and its
// run's); setOwedTickQuery makes it owe the manual tick $2.
const (
	setGrantTickQuery = `UPDATE leases SET tick = $2 WHERE job_id = $1`
	setRunTickQuery   = `
UPDATE runs SET tick = $2 WHERE job_id = $1 AND token = (SELECT token FROM leases WHERE job_id = $1)`
	setOwedTickQuery = `
UPDATE leases SET owed_tick = $2, owed_reason = 'manual', owed_until = $2 + 3600000 WHERE job_id = $1`
)

// SetTicks writes ticks ahead of the clock into job's rows, as
// repotest.RepairHarness.SetTicks says.
func (s *Store) SetTicks(ctx context.Context, jobID string, grant, owed *time.Time) error {
	return s.writeTx(ctx, func(tx *sqlx.Tx, _ int64) error {
		if grant != nil {
			for _, q := range []string{setGrantTickQuery, setRunTickQuery} {
				if _, err := tx.ExecContext(ctx, q, jobID, grant.UnixMilli()); err != nil {
					return fmt.Errorf("set tick %q: %w", jobID, err)
				}
			}
		}
		if owed != nil {
			if _, err := tx.ExecContext(ctx, setOwedTickQuery, jobID, owed.UnixMilli()); err != nil {
				return fmt.Errorf("set owed tick %q: %w", jobID, err)
			}
		}
		return nil
	})
}
