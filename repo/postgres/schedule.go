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

// The Postgres store's schedules, pause and sweep. Pause and forget are
// single statements; resume and the sweep decide ticks in Go (ticks.go),
// so they read and write under row locks in one short transaction.

// pauseQuery pauses a job that is not paused, and cancels what it owes; a
// paused one is left as it is.
const pauseQuery = `
UPDATE leases SET (paused_at, paused_by, paused_reason, owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until) =
	(SELECT clock_timestamp(), $2::text, $3::text, NULL::timestamptz, NULL, NULL, NULL, NULL::timestamptz)
WHERE job_id = $1 AND paused_at IS NULL
RETURNING ` + leaseColumns

// Pause pauses a job. See leaseapi.Store.
func (p *Store) Pause(ctx context.Context, pp *leaseapi.PauseParams) (leaseapi.Lease, error) {
	if err := pp.Validate(); err != nil {
		return leaseapi.Lease{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var row leaseRow
		err := p.db.QueryRowxContext(ctx, pauseQuery, pp.JobID,
			sql.NullString{String: pp.By, Valid: pp.By != ""},
			sql.NullString{String: pp.Reason, Valid: pp.Reason != ""}).Scan(row.fields()...)
		if err == nil {
			return row.toLease(), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return leaseapi.Lease{}, interpretError(fmt.Sprintf("pause %q", pp.JobID), err)
		}
		l, err := p.echoGet(ctx, pp.JobID) // paused already, or unknown
		if err != nil {
			return leaseapi.Lease{}, fmt.Errorf("pause %q: %w", pp.JobID, err)
		}
		return l, nil
	})
}

const (
	// dueJobColumns are what the sweep reads of a scheduled job.
	dueJobColumns = `job_id, schedule, grace_ms, schedule_since, next_tick, decide_at, paused_at, token, expires_at`

	// lockForResumeQuery locks one job for resume.
	lockForResumeQuery = `SELECT paused_at IS NOT NULL AS paused, schedule IS NOT NULL AS scheduled
FROM leases WHERE job_id = $1 FOR UPDATE`

	dueJobQuery = `SELECT ` + dueJobColumns + ` FROM leases WHERE job_id = $1`

	resumeQuery = `
UPDATE leases SET (paused_at, paused_by, paused_reason) = (NULL, NULL, NULL)
WHERE job_id = $1
RETURNING ` + leaseColumns
)

// Resume ends a job's pause. The ticks whose grace ended while it was
// paused are decided (paused) before the pause ends, so none of them counts
// as missed later. See leaseapi.Store.
func (p *Store) Resume(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	op := fmt.Sprintf("resume %q", jobID)
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var ev stores.Events
		var out leaseapi.Lease
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			var locked struct {
				Paused    bool `db:"paused"`
				Scheduled bool `db:"scheduled"`
			}
			if err := tx.GetContext(ctx, &locked, lockForResumeQuery, jobID); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return leaseapi.ErrNotFound
				}
				return err
			}
			if !locked.Paused {
				var row leaseRow
				if err := tx.QueryRowxContext(ctx, getQuery, jobID).Scan(row.fields()...); err != nil {
					return err
				}
				out = row.toLease()
				return nil
			}
			if locked.Scheduled {
				var job dueJob
				if err := tx.GetContext(ctx, &job, dueJobQuery, jobID); err != nil {
					return err
				}
				// The clock after the lock: the decision is made at it.
				var now time.Time
				if err := tx.GetContext(ctx, &now, dbNowQuery); err != nil {
					return err
				}
				if _, _, err := decideJob(ctx, tx, &job, now, &ev); err != nil {
					return err
				}
			}
			var row leaseRow
			if err := tx.QueryRowxContext(ctx, resumeQuery, jobID).Scan(row.fields()...); err != nil {
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
		ev.Emit(p.observer)
		return out, nil
	})
}

const forgetScheduleQuery = `
UPDATE leases SET (schedule, grace_ms, schedule_since, next_tick, decide_at, missed_at) =
	(NULL, NULL, NULL, NULL, NULL, NULL)
WHERE job_id = $1
RETURNING ` + leaseColumns

// ForgetSchedule removes a job's schedule. See leaseapi.Store.
func (p *Store) ForgetSchedule(ctx context.Context, jobID string) (leaseapi.Lease, error) {
	if err := leaseapi.ValidateJobID(jobID); err != nil {
		return leaseapi.Lease{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.Lease, error) {
		var row leaseRow
		err := p.db.QueryRowxContext(ctx, forgetScheduleQuery, jobID).Scan(row.fields()...)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseapi.Lease{}, fmt.Errorf("forget schedule %q: %w", jobID, leaseapi.ErrNotFound)
		}
		if err != nil {
			return leaseapi.Lease{}, interpretError(fmt.Sprintf("forget schedule %q", jobID), err)
		}
		return row.toLease(), nil
	})
}

// dueJob is a scheduled job as the sweep reads it.
type dueJob struct {
	JobID     string       `db:"job_id"`
	Schedule  string       `db:"schedule"`
	GraceMs   int64        `db:"grace_ms"`
	Since     time.Time    `db:"schedule_since"`
	NextTick  sql.NullTime `db:"next_tick"`
	DecideAt  sql.NullTime `db:"decide_at"`
	PausedAt  sql.NullTime `db:"paused_at"`
	Token     int64        `db:"token"`
	ExpiresAt time.Time    `db:"expires_at"`
}

const (
	// dueJobsQuery reads the jobs whose next tick is due, through
	// leases_decide_at_idx: its cost grows with the due jobs only. The
	// bound is statement_timestamp(), which the planner can use as an index
	// condition (clock_timestamp() is volatile: a filter over every entry
	// of the index); the decisions use the clock read afterwards. It takes
	// no lock: a decision is written by one conditional statement
	// (decideQuery), so that no lease row stays locked while a job's ticks
	// are decided, and so that of several instances sweeping at once only
	// one writes each decision.
	dueJobsQuery = `SELECT ` + dueJobColumns + ` FROM leases
WHERE decide_at <= statement_timestamp() ORDER BY decide_at LIMIT $1`

	// grantsAroundQuery reads a job's grants that started at or after $2,
	// and the newest one that started before it (runs_job_at_idx).
	grantsAroundQuery = `
(SELECT token, tick, started_at, ended_at, trigger FROM runs
	WHERE job_id = $1 AND COALESCE(started_at, tick) >= $2 AND token IS NOT NULL)
UNION ALL
(SELECT token, tick, started_at, ended_at, trigger FROM runs
	WHERE job_id = $1 AND COALESCE(started_at, tick) < $2 AND token IS NOT NULL
	ORDER BY COALESCE(started_at, tick) DESC LIMIT 1)`
)

// countExpiriesQuery marks, once, the open runs whose grant passed its
// expiresAt unreleased (runs_running_idx).
var countExpiriesQuery = `
UPDATE runs SET expiry_counted = true WHERE id IN (
	SELECT r.id FROM runs AS r JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
	WHERE r.outcome = 'running' AND NOT r.expiry_counted
		AND ` + stores.ExpiredAt(`clock_timestamp()`) + `
	LIMIT $1
	FOR UPDATE OF r SKIP LOCKED
)`

// catchUpColumns and catchUpValues are what decideQuery writes to what
// the job owes: the tick it decided missed ($13), while that tick is in
// the job's catch-up window, when the job owes it (stores.OwesCatchUp).
var catchUpColumns, catchUpValues = func() ([]string, []string) {
	windowEnd := `$13::timestamptz + catch_up_window_ms * interval '1 millisecond'`
	owes := `($13::timestamptz IS NOT NULL AND ` + stores.OwesCatchUp(`$6::timestamptz`, windowEnd, `clock_timestamp()`) + `)`
	return stores.CatchUpDebt(owes, `$13::timestamptz`, windowEnd)
}()

// decideQuery writes what a pass decided for one job, in one statement:
// the oldest undecided tick and when it is due, the counters, whether
// the newest decided tick was missed ($7: the pass decided a tick, then
// $6 is the new missed_at and $13 that tick), what the job owes for it
// (stores.OwesCatchUp: then that tick, as a catch-up), and a run for each
// missed tick to record ($11, with the grace $12). It writes only if the
// row is still as the pass read it ($8-$10): a concurrent sweep that
// decided the same ticks first, a new spec, or a pause or resume
// meanwhile make it write nothing, and the count it returns is 0.
var decideQuery = `
WITH decided AS (
	UPDATE leases SET (next_tick, decide_at, missed_ticks, skipped_ticks, missed_at,
			` + strings.Join(catchUpColumns, ", ") + `) =
		($2::timestamptz, $3::timestamptz, missed_ticks + $4::bigint, skipped_ticks + $5::bigint,
		 CASE WHEN $7::boolean THEN $6::timestamptz ELSE missed_at END,
		 ` + strings.Join(catchUpValues, ",\n\t\t ") + `)
	WHERE job_id = $1 AND decide_at IS NOT DISTINCT FROM $8::timestamptz AND schedule = $9::text
		AND paused_at IS NOT DISTINCT FROM $10::timestamptz
	RETURNING job_id
), missed AS (
	INSERT INTO runs (job_id, tick, ended_at, outcome)
	SELECT d.job_id, t, t + $12::bigint * interval '1 millisecond', 'missed'
	FROM decided AS d, unnest($11::timestamptz[]) AS t
)
SELECT count(*) FROM decided`

type grantRow struct {
	Token     int64        `db:"token"`
	Tick      sql.NullTime `db:"tick"`
	StartedAt time.Time    `db:"started_at"`
	EndedAt   sql.NullTime `db:"ended_at"`
	Trigger   string       `db:"trigger"`
}

// SweepTicks decides the due ticks of up to batch jobs, counts the expired
// grants and forgets the owed ticks nobody claimed in time. See
// leaseapi.Store.
func (p *Store) SweepTicks(ctx context.Context, batch int) (leaseapi.SweepResult, error) {
	if batch < 1 {
		return leaseapi.SweepResult{}, &leaseapi.InvalidError{Field: "batch", Rule: "must be at least 1"}
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.SweepResult, error) {
		var ev stores.Events
		var res leaseapi.SweepResult
		// Unclaimed debts first: a manual tick that expired is recorded
		// before a decision of this pass could owe a catch-up tick instead.
		if err := p.db.GetContext(ctx, &res.Unclaimed, expireOwedQuery, batch); err != nil {
			return res, interpretError("sweep ticks", err)
		}
		var due []dueJob
		if err := p.db.SelectContext(ctx, &due, dueJobsQuery, batch+1); err != nil {
			return res, interpretError("sweep ticks", err)
		}
		if len(due) > batch {
			res.More, due = true, due[:batch]
		}
		// The clock after the read: every decision is made at it.
		var now time.Time
		if err := p.db.GetContext(ctx, &now, dbNowQuery); err != nil {
			return res, interpretError("sweep ticks", err)
		}
		for i := range due {
			d, written, err := decideJob(ctx, p.db, &due[i], now, &ev)
			if err != nil {
				return leaseapi.SweepResult{}, interpretError(fmt.Sprintf("sweep ticks of %q", due[i].JobID), err)
			}
			if written {
				res.Add(d.Result())
			}
		}
		r, err := p.db.ExecContext(ctx, countExpiriesQuery, batch)
		if err != nil {
			return leaseapi.SweepResult{}, interpretError("sweep ticks", err)
		}
		if res.Expirations, err = r.RowsAffected(); err != nil {
			return leaseapi.SweepResult{}, interpretError("sweep ticks", err)
		}
		res.More = res.More || res.Expirations == int64(batch) || res.Unclaimed == int64(batch)
		ev.Expired += res.Expirations
		ev.Emit(p.observer)
		return res, nil
	})
}

// decideJob decides the due ticks of j at now and writes the decision,
// unless the row changed since j was read; written says whether it did.
func decideJob(ctx context.Context, q sqlx.ExtContext, j *dueJob, now time.Time, ev *stores.Events) (d decide.Decision, written bool, err error) {
	job := &decide.Job{
		JobID: j.JobID, Schedule: j.Schedule, Grace: time.Duration(j.GraceMs) * time.Millisecond,
		Since: j.Since, NextTick: nullTime(j.NextTick), PausedAt: nullTime(j.PausedAt),
		Token: j.Token, ExpiresAt: j.ExpiresAt,
	}
	sched, err := decide.ParseSchedule(job.Schedule)
	if err != nil {
		return d, false, err
	}
	plan := decide.PlanTicks(job, sched, now)
	if len(plan.Due) > 0 {
		var rows []grantRow
		if err := sqlx.SelectContext(ctx, q, &rows, grantsAroundQuery, j.JobID, plan.Due[0].Add(-decide.TickSkew)); err != nil {
			return d, false, err
		}
		runs := make([]decide.Grant, len(rows))
		for i, r := range rows {
			runs[i] = decide.Grant{Token: r.Token, Tick: nullTime(r.Tick), StartedAt: r.StartedAt, EndedAt: nullTime(r.EndedAt),
				Trigger: leaseapi.Trigger(r.Trigger)}
		}
		d = decide.Ticks(job, plan.Due, runs)
	}
	var next, decideAt sql.NullTime
	if !plan.Next.IsZero() {
		next = sql.NullTime{Time: plan.Next, Valid: true}
		decideAt = sql.NullTime{Time: plan.Next.Add(job.Grace), Valid: true}
	}
	missed := make([]string, len(d.MissedTicks))
	for i, t := range d.MissedTicks {
		missed[i] = t.UTC().Format(time.RFC3339Nano)
	}
	var n int
	if err := sqlx.GetContext(ctx, q, &n, decideQuery, j.JobID, next, decideAt, d.Missed, d.Skipped,
		nullableTime(d.LastMissedAt), len(plan.Due) > 0, j.DecideAt, j.Schedule, j.PausedAt,
		pq.Array(missed), j.GraceMs, nullableTime(d.LastMissedTick())); err != nil {
		return d, false, err
	}
	if n == 0 {
		return d, false, nil
	}
	ev.Decided(d)
	return d, true, nil
}

// statsQuery counts, at one instant (c, read once), the leases under a
// prefix ($1; [$1, $1 || '~') is exactly the ids that start with it) and
// the runs that ended in the 24 hours up to that instant (runs_ended_idx).
// Overdue is stores.OverdueCondition. A grant that has expired but that no grant
// has taken over yet still has its run marked running: it is counted as
// an expired run from the lease, ending at its expiresAt, as the run
// history shows it.
var statsQuery = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now),
counted_leases AS (
	SELECT
		count(*) FILTER (WHERE ` + stores.HeldAt(`c.now`) + `) AS held,
		count(*) FILTER (WHERE revoked_at IS NULL AND released_at IS NOT NULL) AS released,
		count(*) FILTER (WHERE ` + stores.ExpiredAt(`c.now`) + `) AS expired,
		count(*) FILTER (WHERE revoked_at IS NOT NULL) AS revoked,
		count(*) FILTER (WHERE paused_at IS NOT NULL) AS paused,
		count(*) FILTER (WHERE ` + stores.OverdueCondition + `) AS overdue,
		count(*) FILTER (WHERE ` + stores.OwedAt(`c.now`) + ` AND owed_reason = 'catch-up') AS owed_catch_up,
		count(*) FILTER (WHERE ` + stores.OwedAt(`c.now`) + ` AND owed_reason = 'manual') AS owed_manual,
		count(*) FILTER (WHERE ` + stores.ExpiredAt(`c.now`) + `
			AND expires_at > c.now - interval '24 hours') AS open_expired
	FROM c LEFT JOIN leases AS l ON job_id >= $1::text AND job_id < $1::text || '~'
), counted_runs AS (
	SELECT
		count(*) FILTER (WHERE outcome = 'succeeded') AS runs_succeeded,
		count(*) FILTER (WHERE outcome = 'failed') AS runs_failed,
		count(*) FILTER (WHERE outcome = 'expired') AS runs_expired,
		count(*) FILTER (WHERE outcome = 'revoked') AS runs_revoked,
		count(*) FILTER (WHERE outcome = 'missed') AS runs_missed
	FROM c JOIN runs ON ended_at > c.now - interval '24 hours' AND ended_at <= c.now
		AND job_id >= $1::text AND job_id < $1::text || '~'
)
SELECT l.held, l.released, l.expired, l.revoked, l.paused, l.overdue, l.owed_catch_up, l.owed_manual,
	r.runs_succeeded, r.runs_failed, r.runs_expired + l.open_expired AS runs_expired, r.runs_revoked, r.runs_missed,
	c.now AS db_now
FROM c, counted_leases AS l, counted_runs AS r`

// Stats counts the leases. See leaseapi.Store.
func (p *Store) Stats(ctx context.Context, prefix string) (leaseapi.Stats, error) {
	if err := leaseapi.ValidatePrefix(prefix); err != nil {
		return leaseapi.Stats{}, err
	}
	return bounded(ctx, func(ctx context.Context) (leaseapi.Stats, error) {
		var r struct {
			stores.StatsRow
			Now time.Time `db:"db_now"`
		}
		if err := p.db.GetContext(ctx, &r, statsQuery, prefix); err != nil {
			return leaseapi.Stats{}, interpretError("stats", err)
		}
		return r.Stats(r.Now.UTC()), nil
	})
}

// inTx runs fn in a transaction and commits unless fn fails.
func (p *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := p.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
