package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

const (
	// putPolicyQuery sets a job's policy; a new one starts ok, since now.
	putPolicyQuery = `
INSERT INTO job_policies (job_id, ` + stores.PolicySetColumns + `, since, updated_by, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, clock_timestamp(), $10, clock_timestamp())
ON CONFLICT (job_id) DO UPDATE SET (` + stores.PolicySetColumns + `, updated_by, updated_at) =
	(EXCLUDED.consecutive_failures, EXCLUDED.failure_rate_threshold, EXCLUDED.failure_rate_runs, EXCLUDED.max_runtime_ms,
	 EXCLUDED.min_runtime_ms, EXCLUDED.missed_ticks, EXCLUDED.recovery_threshold, EXCLUDED.realert_after_ms,
	 EXCLUDED.updated_by, EXCLUDED.updated_at)`

	lockPolicyQuery = `SELECT ` + stores.PolicyColumns + ` FROM job_policies WHERE job_id = $1 FOR UPDATE`
	getPolicyQuery  = `SELECT ` + stores.PolicyColumns + ` FROM job_policies WHERE job_id = $1`

	// writePolicyQuery writes a decision's state.
	writePolicyQuery = `UPDATE job_policies SET (status, reasons, since, alerted_at, exceeded_token) = ($2, $3, $4, $5, $6)
WHERE job_id = $1`

	// showPolicyQuery writes what the lease shows of the decision, and
	// when the policy is next due: a mark written since the read ($4) by a
	// run that ended meanwhile stays, else the repeat ($5) or none.
	showPolicyQuery = `UPDATE leases SET (alert_status, alert_reasons, policy_due_at) =
	($2, $3, CASE WHEN policy_due_at > $4 AND policy_due_at <= clock_timestamp() THEN policy_due_at ELSE $5 END)
WHERE job_id = $1
RETURNING ` + leaseColumns

	// enqueuePolicyEventQuery writes a policy event to the outbox of
	// every webhook subscribed to it (webhook_enqueue, migration 0012),
	// with run $3 (NULL for none).
	enqueuePolicyEventQuery = `SELECT webhook_enqueue($1::text, $2::text, (SELECT to_jsonb(r) FROM runs AS r WHERE r.id = $3), $4::jsonb)`

	deletePolicyQuery = `
WITH gone AS (DELETE FROM job_policies WHERE job_id = $1 RETURNING job_id)
UPDATE leases SET (alert_status, alert_reasons, policy_due_at) = (NULL, '', NULL)
WHERE job_id IN (SELECT job_id FROM gone)
RETURNING job_id`

	// duePoliciesQuery finds the policies to decide: those due
	// (leases_policy_due_idx), those of jobs among $2 (grants the pass
	// found expired), and those whose job's open grant passed
	// max_runtime_ms and was not decided yet (job_policies_runtime_idx).
	duePoliciesQuery = `
(SELECT job_id FROM leases WHERE policy_due_at <= clock_timestamp() ORDER BY policy_due_at LIMIT $1)
UNION
SELECT job_id FROM leases WHERE job_id = ANY($2::text[]) AND alert_status IS NOT NULL
UNION
(SELECT p.job_id FROM job_policies AS p JOIN leases AS l ON l.job_id = p.job_id
WHERE p.max_runtime_ms > 0 AND l.released_at IS NULL AND l.revoked_at IS NULL AND l.token <> p.exceeded_token
	AND l.acquired_at + p.max_runtime_ms * interval '1 millisecond' < clock_timestamp()
LIMIT $1)`
)

// PutPolicy sets the job's policy and decides it. See leaseapi.Alerting.
func (p *Store) PutPolicy(ctx context.Context, pp *leaseapi.PutPolicyParams) (leaseapi.JobPolicy, error) {
	if err := pp.Validate(); err != nil {
		return leaseapi.JobPolicy{}, err
	}
	op := fmt.Sprintf("put policy %q", pp.JobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.JobPolicy, error) {
		var jp leaseapi.JobPolicy
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			args := append(append([]any{pp.JobID}, stores.PolicyArgs(&pp.Policy)...), pp.By)
			if _, err := tx.ExecContext(ctx, putPolicyQuery, args...); err != nil {
				var pqErr *pq.Error
				if errors.As(err, &pqErr) && pqErr.Code == "23503" { // no lease row
					return leaseapi.ErrNotFound
				}
				return err
			}
			var err error
			jp, _, err = p.decidePolicy(ctx, tx, pp.JobID)
			return err
		})
		if err != nil {
			return leaseapi.JobPolicy{}, interpretError(op, err)
		}
		return jp, nil
	})
}

// Policy returns the job's policy. See leaseapi.Alerting.
func (p *Store) Policy(ctx context.Context, jobID string) (leaseapi.JobPolicy, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.JobPolicy{}, err
	}
	op := fmt.Sprintf("policy %q", jobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.JobPolicy, error) {
		var row stores.PolicyRow
		err := p.db.GetContext(ctx, &row, getPolicyQuery, jobID)
		if errors.Is(err, sql.ErrNoRows) {
			if _, err := p.get(ctx, jobID); err != nil {
				return leaseapi.JobPolicy{}, fmt.Errorf("%s: %w", op, err)
			}
			return leaseapi.JobPolicy{}, leaseapi.ErrPolicyNotFound
		}
		if err != nil {
			return leaseapi.JobPolicy{}, interpretError(op, err)
		}
		var now time.Time
		if err := p.db.GetContext(ctx, &now, dbNowQuery); err != nil {
			return leaseapi.JobPolicy{}, interpretError(op, err)
		}
		return row.JobPolicy(now), nil
	})
}

// DeletePolicy removes the job's policy. See leaseapi.Alerting.
func (p *Store) DeletePolicy(ctx context.Context, jobID string) error {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return err
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		var gone string
		err := p.db.GetContext(ctx, &gone, deletePolicyQuery, jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return struct{}{}, leaseapi.ErrPolicyNotFound
		}
		return struct{}{}, interpretError(fmt.Sprintf("delete policy %q", jobID), err)
	})
	return err
}

// decidePolicy decides the policy of jobID in tx (decide.EvaluatePolicy):
// under the policy row's lock it reads the lease and the job's newest
// runs, writes the state and what the lease shows of it, and the event of
// a change to the outbox. found is false when the job has no policy.
func (p *Store) decidePolicy(ctx context.Context, tx *sqlx.Tx, jobID string) (jp leaseapi.JobPolicy, l leaseapi.Lease, err error) {
	var pr stores.PolicyRow
	if err := tx.GetContext(ctx, &pr, lockPolicyQuery, jobID); err != nil {
		return jp, l, err
	}
	var lr leaseRow
	if err := tx.QueryRowxContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE job_id = $1`, jobID).Scan(lr.fields()...); err != nil {
		return jp, l, err
	}
	jp = pr.JobPolicy(lr.Now)
	var rows []runRow
	if err := tx.SelectContext(ctx, &rows, runsQuery, jobID, jp.Policy.Window()); err != nil {
		return jp, l, err
	}
	facts := decide.PolicyFacts{Runs: make([]leaseapi.Run, len(rows)), Lease: lr.toLease(), Now: lr.Now.UTC()}
	for i := range rows {
		facts.Runs[i] = rows[i].run(jobID)
	}
	d := decide.EvaluatePolicy(&jp.Policy, jp.State, &facts)
	if p.q.policyDecision != nil {
		p.q.policyDecision(jp.State, &d) // a chaos mutant's (mutants_chaos.go)
	}
	exceeded := pr.ExceededToken
	if d.ExceededToken != 0 {
		exceeded = d.ExceededToken
	}
	if _, err := tx.ExecContext(ctx, writePolicyQuery, jobID, string(d.State.Status),
		leaseapi.FormatAlertReasons(d.State.Reasons), d.State.Since, nullableTime(d.State.AlertedAt), exceeded); err != nil {
		return jp, l, err
	}
	var shown leaseRow
	if err := tx.QueryRowxContext(ctx, showPolicyQuery, jobID, string(d.State.Status), leaseapi.FormatAlertReasons(d.State.Reasons),
		lr.Now, nullableTime(d.RealertAt)).Scan(shown.fields()...); err != nil {
		return jp, l, err
	}
	if ev := d.Event; ev != nil {
		var run sql.NullInt64
		if ev.Run >= 0 {
			run = sql.NullInt64{Int64: rows[ev.Run].ID, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, enqueuePolicyEventQuery, ev.Type, jobID, run, string(stores.PolicyEventDetail(ev))); err != nil {
			return jp, l, err
		}
	}
	jp.State = d.State
	return jp, shown.toLease(), nil
}

// decidePolicyNow decides the policy of jobID in a transaction of its own,
// returning the lease as it then shows it; ok is false when the job has
// no policy (any more).
func (p *Store) decidePolicyNow(ctx context.Context, jobID string) (l leaseapi.Lease, ok bool, err error) {
	err = p.inTx(ctx, func(tx *sqlx.Tx) error {
		_, l, err = p.decidePolicy(ctx, tx, jobID)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	return l, err == nil, err
}

// sweepPolicies decides the policies that are due, those of the jobs of
// expired (grants found expired) and those of open grants past their max
// runtime, up to batch of each kind, each in its own transaction. It
// returns how many it decided.
func (p *Store) sweepPolicies(ctx context.Context, batch int, expired []string) (int, error) {
	var jobs []string
	if err := p.db.SelectContext(ctx, &jobs, duePoliciesQuery, batch, pq.Array(expired)); err != nil {
		return 0, err
	}
	var errs []string
	decided := 0
	for _, job := range jobs {
		if _, ok, err := p.decidePolicyNow(ctx, job); err != nil {
			errs = append(errs, err.Error())
		} else if ok {
			decided++
		}
	}
	if len(errs) > 0 {
		return decided, fmt.Errorf("deciding %d of %d policies: %s", len(errs), len(jobs), strings.Join(errs, "; "))
	}
	return decided, nil
}
