package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

const (
	// putPolicyQuery sets a job's policy; a new one starts ok, since $10.
	putPolicyQuery = `
INSERT INTO job_policies (job_id, ` + stores.PolicySetColumns + `, since, updated_by, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $10)
ON CONFLICT (job_id) DO UPDATE SET (` + stores.PolicySetColumns + `, updated_by, updated_at) =
	(excluded.consecutive_failures, excluded.failure_rate_threshold, excluded.failure_rate_runs, excluded.max_runtime_ms,
	 excluded.min_runtime_ms, excluded.missed_ticks, excluded.recovery_threshold, excluded.realert_after_ms,
	 excluded.updated_by, excluded.updated_at)`

	getPolicyQuery = `SELECT ` + stores.PolicyColumns + ` FROM job_policies WHERE job_id = $1`

	writePolicyQuery = `UPDATE job_policies SET (status, reasons, since, alerted_at, exceeded_token) = ($2, $3, $4, $5, $6)
WHERE job_id = $1`

	// showPolicyQuery writes what the lease shows of the decision and
	// when it is next due: its repeat, or never.
	showPolicyQuery = `UPDATE leases SET (alert_status, alert_reasons, policy_due_at) = ($2, $3, $4)
WHERE job_id = $1
RETURNING ` + leaseColumns

	enqueuePolicyEventQuery = `INSERT INTO webhook_enqueue (type, job_id, run_id, detail) VALUES ($1, $2, $3, $4)`

	// duePoliciesQuery finds the policies to decide at $1: those due, those
	// of the jobs in the JSON array $3 (grants the pass found expired), and
	// those whose job's open grant passed max_runtime_ms and was not
	// decided yet.
	duePoliciesQuery = `
SELECT job_id FROM (SELECT job_id FROM leases WHERE policy_due_at <= $1 ORDER BY policy_due_at LIMIT $2)
UNION
SELECT job_id FROM leases WHERE job_id IN (SELECT value FROM json_each($3)) AND alert_status IS NOT NULL
UNION
SELECT job_id FROM (SELECT p.job_id FROM job_policies AS p JOIN leases AS l ON l.job_id = p.job_id
	WHERE p.max_runtime_ms > 0 AND l.released_at IS NULL AND l.revoked_at IS NULL AND l.token <> p.exceeded_token
		AND l.acquired_at + p.max_runtime_ms < $1
	LIMIT $2)`
)

// PutPolicy sets the job's policy and decides it. See leaseapi.Alerting.
func (s *Store) PutPolicy(ctx context.Context, p *leaseapi.PutPolicyParams) (leaseapi.JobPolicy, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.JobPolicy{}, err
	}
	op := fmt.Sprintf("put policy %q", p.JobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.JobPolicy, error) {
		if _, err := selectLease(ctx, tx, p.JobID); err != nil {
			return leaseapi.JobPolicy{}, err
		}
		args := append(append([]any{p.JobID}, stores.PolicyArgs(&p.Policy)...), now, p.By)
		if _, err := tx.ExecContext(ctx, putPolicyQuery, args...); err != nil {
			return leaseapi.JobPolicy{}, err
		}
		jp, _, err := decidePolicy(ctx, tx, p.JobID, now)
		return jp, err
	})
}

// Policy returns the job's policy. See leaseapi.Alerting.
func (s *Store) Policy(ctx context.Context, jobID string) (leaseapi.JobPolicy, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.JobPolicy{}, err
	}
	op := fmt.Sprintf("policy %q", jobID)
	return transact(ctx, s, op, s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.JobPolicy, error) {
		var row stores.PolicyRow
		err := tx.GetContext(ctx, &row, getPolicyQuery, jobID)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := selectLease(ctx, tx, jobID); err != nil {
				return leaseapi.JobPolicy{}, err
			}
			return leaseapi.JobPolicy{}, leaseapi.ErrPolicyNotFound
		}
		if err != nil {
			return leaseapi.JobPolicy{}, err
		}
		return row.JobPolicy(fromMs(now)), nil
	})
}

// DeletePolicy removes the job's policy. See leaseapi.Alerting.
func (s *Store) DeletePolicy(ctx context.Context, jobID string) error {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return err
	}
	op := fmt.Sprintf("delete policy %q", jobID)
	_, err := transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		r, err := tx.ExecContext(ctx, `DELETE FROM job_policies WHERE job_id = $1`, jobID)
		if err != nil {
			return struct{}{}, err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return struct{}{}, errors.Join(err, leaseapi.ErrPolicyNotFound)
		}
		_, err = tx.ExecContext(ctx, `UPDATE leases SET (alert_status, alert_reasons, policy_due_at) = (NULL, '', NULL) WHERE job_id = $1`, jobID)
		return struct{}{}, err
	})
	return err
}

// decidePolicy decides the policy of jobID at now under the write lock
// (decide.EvaluatePolicy): it reads the lease and the job's newest runs,
// writes the state and what the lease shows of it, and the event of a
// change to the outbox. sql.ErrNoRows when the job has no policy.
func decidePolicy(ctx context.Context, tx *sqlx.Tx, jobID string, now int64) (leaseapi.JobPolicy, leaseRow, error) {
	var pr stores.PolicyRow
	if err := tx.GetContext(ctx, &pr, getPolicyQuery, jobID); err != nil {
		return leaseapi.JobPolicy{}, leaseRow{}, err
	}
	cur, err := selectLease(ctx, tx, jobID)
	if err != nil {
		return leaseapi.JobPolicy{}, leaseRow{}, err
	}
	jp := pr.JobPolicy(fromMs(now))
	var rows []runRow
	if err := tx.SelectContext(ctx, &rows, runsQuery, jobID, jp.Policy.Window()); err != nil {
		return jp, cur, err
	}
	facts := decide.PolicyFacts{Runs: runsOf(jobID, rows, &cur, now), Lease: cur.lease(now), Now: fromMs(now)}
	d := decide.EvaluatePolicy(&jp.Policy, jp.State, &facts)
	exceeded := pr.ExceededToken
	if d.ExceededToken != 0 {
		exceeded = d.ExceededToken
	}
	reasons := leaseapi.FormatAlertReasons(d.State.Reasons)
	if _, err := tx.ExecContext(ctx, writePolicyQuery, jobID, string(d.State.Status), reasons,
		d.State.Since.UnixMilli(), toNullMs(d.State.AlertedAt), exceeded); err != nil {
		return jp, cur, err
	}
	shown, err := writeLease(ctx, tx, showPolicyQuery, jobID, string(d.State.Status), reasons, toNullMs(d.RealertAt))
	if err != nil {
		return jp, cur, err
	}
	if ev := d.Event; ev != nil {
		var run sql.NullInt64
		if ev.Run >= 0 {
			run = sql.NullInt64{Int64: rows[ev.Run].ID, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, enqueuePolicyEventQuery, ev.Type, jobID, run, string(stores.PolicyEventDetail(ev))); err != nil {
			return jp, cur, err
		}
	}
	jp.State = d.State
	return jp, shown, nil
}

// sweepPolicies decides, at now, the policies that are due, those of the
// jobs of expired (grants found expired) and those of open grants past
// their max runtime, up to batch of each kind. It returns how many it
// decided.
func sweepPolicies(ctx context.Context, tx *sqlx.Tx, now int64, batch int, expired []string) (int, error) {
	ids, err := json.Marshal(expired)
	if err != nil {
		return 0, err
	}
	var jobs []string
	if err := tx.SelectContext(ctx, &jobs, duePoliciesQuery, now, batch, string(ids)); err != nil {
		return 0, err
	}
	decided := 0
	for _, job := range jobs {
		_, _, err := decidePolicy(ctx, tx, job, now)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return decided, fmt.Errorf("policy of %q: %w", job, err)
		default:
			decided++
		}
	}
	return decided, nil
}
