package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// The embedded store's schedules, pause and sweep: the same decisions as the
// Postgres store's (ticks.go), with the single writer's lock in place of row
// locks.

// pauseQuery pauses a job that is not paused, and cancels what it owes.
const pauseQuery = `
UPDATE leases SET paused_at = $2, paused_by = $3, paused_reason = $4,
	owed_tick = NULL, owed_reason = NULL, owed_by = NULL, owed_trigger_reason = NULL, owed_until = NULL
WHERE job_id = $1 AND paused_at IS NULL`

// Pause pauses a job. See leaseapi.Store.
func (s *Store) Pause(ctx context.Context, p *leaseapi.PauseParams) (leaseapi.Lease, error) {
	if err := p.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("pause %q", p.JobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		if _, err := tx.ExecContext(ctx, pauseQuery, p.JobID, now,
			sql.NullString{String: p.By, Valid: p.By != ""},
			sql.NullString{String: p.Reason, Valid: p.Reason != ""}); err != nil {
			return leaseapi.Lease{}, err
		}
		row, err := selectLease(ctx, tx, p.JobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

const resumeQuery = `
UPDATE leases SET paused_at = NULL, paused_by = NULL, paused_reason = NULL WHERE job_id = $1`

// Resume ends a job's pause. The ticks whose grace ended while it was
// paused are decided (paused) before the pause ends, so none of them counts
// as missed later. See leaseapi.Store.
func (s *Store) Resume(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("resume %q", jobID)
	var ev stores.Events
	return observedTx(ctx, s, op, s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		row, err := selectLease(ctx, tx, jobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		if !row.PausedAt.Valid {
			return row.lease(now), nil
		}
		if row.Schedule.Valid {
			var job dueJob
			if err := tx.GetContext(ctx, &job, dueJobQuery, jobID); err != nil {
				return leaseapi.Lease{}, err
			}
			if _, err := decideJob(ctx, tx, decide.NewPass(fromMs(now)), &job, now, &ev); err != nil {
				return leaseapi.Lease{}, err
			}
		}
		if _, err := tx.ExecContext(ctx, resumeQuery, jobID); err != nil {
			return leaseapi.Lease{}, err
		}
		row, err = selectLease(ctx, tx, jobID)
		if err != nil {
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

const forgetScheduleQuery = `
UPDATE leases SET schedule = NULL, grace_ms = NULL, schedule_since = NULL,
	next_tick = NULL, decide_at = NULL, missed_at = NULL
WHERE job_id = $1
RETURNING ` + leaseColumns

// ForgetSchedule removes a job's schedule. See leaseapi.Store.
func (s *Store) ForgetSchedule(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("forget schedule %q", jobID)
	return transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Lease, error) {
		var row leaseRow
		if err := tx.GetContext(ctx, &row, forgetScheduleQuery, jobID); err != nil {
			if err == sql.ErrNoRows {
				return leaseapi.Lease{}, leaseapi.ErrNotFound
			}
			return leaseapi.Lease{}, err
		}
		return row.lease(now), nil
	})
}

// dueJob is a scheduled job as the sweep reads it.
type dueJob struct {
	JobID     string        `db:"job_id"`
	Schedule  string        `db:"schedule"`
	GraceMs   int64         `db:"grace_ms"`
	Since     int64         `db:"schedule_since"`
	NextTick  sql.NullInt64 `db:"next_tick"`
	PausedAt  sql.NullInt64 `db:"paused_at"`
	Token     int64         `db:"token"`
	ExpiresAt int64         `db:"expires_at"`
	// The newest grant's tick, start, end (its release or revocation)
	// and trigger.
	Tick         sql.NullInt64 `db:"tick"`
	AcquiredAt   int64         `db:"acquired_at"`
	GrantEndedAt sql.NullInt64 `db:"grant_ended_at"`
	GrantTrigger string        `db:"grant_trigger"`
	// The job's concurrency group.
	GroupName sql.NullString `db:"group_name"`
}

const (
	dueJobColumns = `job_id, schedule, grace_ms, schedule_since, next_tick, paused_at, token, expires_at,
	tick, acquired_at, COALESCE(released_at, revoked_at) AS grant_ended_at, grant_trigger, group_name`

	// dueJobsQuery reads the jobs whose next tick is due, through
	// leases_decide_at_idx: its cost grows with the due jobs only.
	dueJobsQuery = `SELECT ` + dueJobColumns + ` FROM leases
WHERE decide_at <= $1 ORDER BY decide_at LIMIT $2`

	dueJobQuery = `SELECT ` + dueJobColumns + ` FROM leases WHERE job_id = $1 AND schedule IS NOT NULL`

	// grantsAroundQuery reads a job's grants that started at or
	// after $2, and the newest one that started before it
	// (runs_job_at_idx), when its lease row does not decide it alone
	// (decide.Plan.LeaseGrants).
	grantsAroundQuery = `
SELECT token, tick, started_at, ended_at, trigger FROM (
	SELECT token, tick, started_at, ended_at, trigger FROM runs
	WHERE job_id = $1 AND COALESCE(started_at, tick) >= $2 AND token IS NOT NULL AND outcome <> 'discarded'
	UNION ALL
	SELECT * FROM (
		SELECT token, tick, started_at, ended_at, trigger FROM runs
		WHERE job_id = $1 AND COALESCE(started_at, tick) < $2 AND token IS NOT NULL AND outcome <> 'discarded'
		ORDER BY COALESCE(started_at, tick) DESC LIMIT 1
	)
)`

	insertMissedRunQuery = `
INSERT INTO runs (job_id, tick, ended_at, outcome, group_full) VALUES ($1, $2, $3, 'missed', $4)`

	// groupRunsAtQuery reads group $1's limit and the grants made in it
	// that started at or before $2 and had not ended by then, and those
	// revoked before $2 whose slot stays in use after it (the Postgres
	// store's query of the same name).
	groupRunsAtQuery = `
SELECT (SELECT "limit" FROM groups WHERE name = $1) AS "limit", r.started_at, r.outcome, r.ended_at,
	CASE WHEN r.outcome = 'running' THEN l.expires_at END AS held_until
FROM runs AS r LEFT JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
WHERE r.group_name = $1 AND (r.ended_at > $2 OR r.ended_at IS NULL) AND r.started_at <= $2
UNION ALL
SELECT (SELECT "limit" FROM groups WHERE name = $1), r.started_at, r.outcome, r.ended_at, s.revoked_until
FROM group_slots AS s JOIN runs AS r ON r.job_id = s.job_id AND r.token = s.job_token
WHERE s.group_name = $1 AND s.revoked_until > $2 AND r.ended_at <= $2`
)

// markGroupFull sets GroupFull on the missed runs of a job in group
// (stores.MarkGroupFull) with groupRunsAtQuery.
func markGroupFull(ctx context.Context, tx *sqlx.Tx, group string, missed []decide.MissedRun) error {
	return stores.MarkGroupFull(missed, func(at time.Time) (int, []decide.GroupRun, bool, error) {
		var rows []struct {
			Limit     sql.NullInt64 `db:"limit"`
			StartedAt int64         `db:"started_at"`
			Outcome   string        `db:"outcome"`
			EndedAt   sql.NullInt64 `db:"ended_at"`
			HeldUntil sql.NullInt64 `db:"held_until"`
		}
		if err := tx.SelectContext(ctx, &rows, groupRunsAtQuery, group, at.UnixMilli()); err != nil || len(rows) == 0 || !rows[0].Limit.Valid {
			return 0, nil, false, err
		}
		runs := make([]decide.GroupRun, len(rows))
		for k, r := range rows {
			runs[k] = decide.GroupRun{StartedAt: fromMs(r.StartedAt), Outcome: leaseapi.Outcome(r.Outcome),
				EndedAt: fromNullMs(r.EndedAt), HeldUntil: fromNullMs(r.HeldUntil)}
		}
		return int(rows[0].Limit.Int64), runs, true, nil
	})
}

// catchUpSet is what decidedQuery writes to what the job owes: the tick
// it decided missed ($8), while that tick is in the job's catch-up window,
// when the job owes it at $9 (stores.OwesCatchUp).
var catchUpSet = func() string {
	windowEnd := `$8 + catch_up_window_ms`
	owes := `($8 IS NOT NULL AND ` + stores.OwesCatchUp(`$6`, windowEnd, `$9`) + `)`
	columns, values := stores.CatchUpDebt(owes, `$8`, windowEnd)
	set := make([]string, len(columns))
	for i := range columns {
		set[i] = columns[i] + ` = ` + values[i]
	}
	return strings.Join(set, ",\n\t")
}()

// decidedQuery records a pass: the oldest undecided tick, when it is
// due, the counters, whether the newest decided tick was missed ($7: 1
// when the pass decided a tick, then $6 is the new missed_at and $8 that
// tick), and what the job owes for it (stores.OwesCatchUp: then that tick,
// as a catch-up); a missed tick makes the job's policy due at $9, now. SQLite evaluates every SET expression on the row as it
// was, as Postgres does.
var decidedQuery = `
UPDATE leases SET next_tick = $2, decide_at = $3,
	missed_ticks = missed_ticks + $4, skipped_ticks = skipped_ticks + $5,
	missed_at = CASE WHEN $7 THEN $6 ELSE missed_at END,
	policy_due_at = CASE WHEN $4 > 0 AND alert_status IS NOT NULL THEN $9 ELSE policy_due_at END,
	` + catchUpSet + `
WHERE job_id = $1`

// countExpiriesQuery marks, once, the open runs whose grant passed its
// expiresAt unreleased (runs_running_idx), and returns their jobs.
var countExpiriesQuery = `
UPDATE runs SET expiry_counted = 1 WHERE id IN (
	SELECT r.id FROM runs AS r JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
	WHERE r.outcome = 'running' AND r.expiry_counted = 0
		AND ` + stores.ExpiredAt(`$1`) + `
	LIMIT $2
)
RETURNING job_id`

type grantRow struct {
	Token     int64         `db:"token"`
	Tick      sql.NullInt64 `db:"tick"`
	StartedAt int64         `db:"started_at"`
	EndedAt   sql.NullInt64 `db:"ended_at"`
	Trigger   string        `db:"trigger"`
}

// SweepTicks decides the due ticks of up to batch jobs and counts the
// expired grants. See leaseapi.Store.
func (s *Store) SweepTicks(ctx context.Context, batch int) (leaseapi.SweepResult, error) {
	if batch < 1 {
		return leaseapi.SweepResult{}, &leaseapi.InvalidError{Field: "batch", Rule: "must be at least 1"}
	}
	var ev stores.Events
	return observedTx(ctx, s, "sweep ticks", s.writeTx, &ev, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.SweepResult, error) {
		var res leaseapi.SweepResult
		// Unclaimed debts first: a manual tick that expired is recorded
		// before a decision of this pass could owe a catch-up tick instead.
		var err error
		if res.Unclaimed, err = expireOwed(ctx, tx, now, "", batch); err != nil {
			return res, err
		}
		var due []dueJob
		if err := tx.SelectContext(ctx, &due, dueJobsQuery, now, batch+1); err != nil {
			return res, err
		}
		if len(due) > batch {
			res.More, due = true, due[:batch]
		}
		pass := decide.NewPass(fromMs(now))
		for i := range due {
			d, err := decideJob(ctx, tx, pass, &due[i], now, &ev)
			if err != nil {
				return res, fmt.Errorf("job %q: %w", due[i].JobID, err)
			}
			res.Add(d.Result())
		}
		var expired []string
		if err := tx.SelectContext(ctx, &expired, countExpiriesQuery, now, batch); err != nil {
			return res, err
		}
		res.Expirations = int64(len(expired))
		res.More = res.More || res.Expirations == int64(batch) || res.Unclaimed == int64(batch)
		ev.Expired += res.Expirations
		if res.Policies, err = sweepPolicies(ctx, tx, now, batch, expired); err != nil {
			return res, err
		}
		res.More = res.More || res.Policies >= batch
		return res, nil
	})
}

// decideJob decides the due ticks of j in pass and records the decision:
// the store's single writer holds its lock, so the row is as it was read.
func decideJob(ctx context.Context, tx *sqlx.Tx, pass *decide.Pass, j *dueJob, now int64, ev *stores.Events) (decide.Decision, error) {
	job := &decide.Job{
		JobID: j.JobID, Schedule: j.Schedule, Grace: time.Duration(j.GraceMs) * time.Millisecond,
		Since: fromMs(j.Since), NextTick: fromNullMs(j.NextTick), PausedAt: fromNullMs(j.PausedAt),
		Token: j.Token, ExpiresAt: fromMs(j.ExpiresAt),
		Tick: fromNullMs(j.Tick), AcquiredAt: fromMs(j.AcquiredAt), EndedAt: fromNullMs(j.GrantEndedAt),
		GrantTrigger: leaseapi.Trigger(j.GrantTrigger),
	}
	plan, err := pass.Plan(job)
	if err != nil {
		return decide.Decision{}, err
	}
	runs, fromLease := plan.LeaseGrants(job)
	if len(plan.Due) > 0 && !fromLease {
		var rows []grantRow
		if err := tx.SelectContext(ctx, &rows, grantsAroundQuery, j.JobID, plan.GrantsFrom().UnixMilli()); err != nil {
			return decide.Decision{}, err
		}
		runs = make([]decide.Grant, len(rows))
		for i, r := range rows {
			runs[i] = decide.Grant{Token: r.Token, Tick: fromNullMs(r.Tick), StartedAt: fromMs(r.StartedAt), EndedAt: fromNullMs(r.EndedAt),
				Trigger: leaseapi.Trigger(r.Trigger)}
		}
	}
	o := decide.Decide(job, plan, runs)
	if j.GroupName.Valid {
		if err := markGroupFull(ctx, tx, j.GroupName.String, o.MissedRuns); err != nil {
			return o.Decision, err
		}
	}
	for _, m := range o.MissedRuns {
		if _, err := tx.ExecContext(ctx, insertMissedRunQuery, j.JobID, m.Tick.UnixMilli(), m.EndedAt.UnixMilli(), m.GroupFull); err != nil {
			return o.Decision, err
		}
	}
	if _, err := tx.ExecContext(ctx, decidedQuery, j.JobID, toNullMs(o.Next), toNullMs(o.DecideAt), o.Missed, o.Skipped,
		toNullMs(o.LastMissedAt), o.Decided, toNullMs(o.LastMissedTick()), now); err != nil {
		return o.Decision, err
	}
	ev.Decided(o.Decision)
	return o.Decision, nil
}

// statsQuery counts, at $1, the leases under a prefix (job_id in
// [$2, $3), or from $2 on when $3 is empty) and the runs that ended in the
// 24 hours up to $1 (runs_ended_idx). Overdue is stores.OverdueCondition. A grant
// that has expired but that no grant has taken over yet still has its run
// marked running: it is counted as an expired run from the lease, ending
// at its expiresAt, as the run history shows it.
var statsQuery = `
SELECT l.held, l.released, l.expired, l.revoked, l.paused, l.overdue, l.owed_catch_up, l.owed_manual,
	r.runs_succeeded, r.runs_failed, r.runs_expired + l.open_expired AS runs_expired, r.runs_revoked, r.runs_missed
FROM (
	SELECT
		COALESCE(SUM(` + stores.HeldAt(`$1`) + `), 0) AS held,
		COALESCE(SUM(revoked_at IS NULL AND released_at IS NOT NULL), 0) AS released,
		COALESCE(SUM(` + stores.ExpiredAt(`$1`) + `), 0) AS expired,
		COALESCE(SUM(revoked_at IS NOT NULL), 0) AS revoked,
		COALESCE(SUM(paused_at IS NOT NULL), 0) AS paused,
		COALESCE(SUM(` + stores.OverdueCondition + `), 0) AS overdue,
		COALESCE(SUM(` + stores.OwedAt(`$1`) + ` AND owed_reason = 'catch-up'), 0) AS owed_catch_up,
		COALESCE(SUM(` + stores.OwedAt(`$1`) + ` AND owed_reason = 'manual'), 0) AS owed_manual,
		COALESCE(SUM(` + stores.ExpiredAt(`$1`) + `
			AND expires_at > $1 - 86400000), 0) AS open_expired
	FROM leases AS l
	WHERE job_id >= $2 AND ($3 = '' OR job_id < $3)
) AS l, (
	SELECT
		COALESCE(SUM(outcome = 'succeeded'), 0) AS runs_succeeded,
		COALESCE(SUM(outcome = 'failed'), 0) AS runs_failed,
		COALESCE(SUM(outcome = 'expired'), 0) AS runs_expired,
		COALESCE(SUM(outcome = 'revoked'), 0) AS runs_revoked,
		COALESCE(SUM(outcome = 'missed'), 0) AS runs_missed
	FROM runs
	WHERE ended_at IS NOT NULL AND ended_at > $1 - 86400000 AND ended_at <= $1
		AND job_id >= $2 AND ($3 = '' OR job_id < $3)
) AS r`

// Stats counts the leases. See leaseapi.Store.
func (s *Store) Stats(ctx context.Context, prefix string) (leaseapi.Stats, error) {
	if err := leaseapi.ValidatePrefix(prefix); err != nil {
		return leaseapi.Stats{}, err
	}
	end := ""
	if prefix != "" {
		end, _ = prefixEnd(prefix) // a valid prefix has a byte below 0xFF
	}
	return transact(ctx, s, "stats", s.readTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (leaseapi.Stats, error) {
		var r stores.StatsRow
		if err := tx.GetContext(ctx, &r, statsQuery, now, prefix, end); err != nil {
			return leaseapi.Stats{}, err
		}
		return r.Stats(fromMs(now)), nil
	})
}
