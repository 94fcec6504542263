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
// single statements; resume and the sweep decide ticks in Go (decide.Pass)
// between a read of the due jobs and their grants and one conditional
// write of every decision (decideJobs): resume under its row lock in one
// short transaction, the sweep without one.

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
	// dueJobColumns are what the sweep reads of a scheduled job, with its
	// newest grant (decide.Plan.LeaseGrants).
	dueJobColumns = `job_id, schedule, grace_ms, schedule_since, next_tick, decide_at, paused_at, token, expires_at,
	tick, acquired_at, COALESCE(released_at, revoked_at) AS grant_ended_at, grant_trigger, group_name`

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
				written, err := p.decideJobs(ctx, tx, []dueJob{job}, now)
				if err != nil {
					return err
				}
				for _, d := range written {
					ev.Decided(d)
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
	JobID     string         `db:"job_id"`
	GroupName sql.NullString `db:"group_name"`
	Schedule  string         `db:"schedule"`
	GraceMs   int64          `db:"grace_ms"`
	Since     time.Time      `db:"schedule_since"`
	NextTick  sql.NullTime   `db:"next_tick"`
	DecideAt  sql.NullTime   `db:"decide_at"`
	PausedAt  sql.NullTime   `db:"paused_at"`
	Token     int64          `db:"token"`
	ExpiresAt time.Time      `db:"expires_at"`
	// The newest grant's tick, start, end (its release or revocation)
	// and trigger.
	Tick         sql.NullTime `db:"tick"`
	AcquiredAt   time.Time    `db:"acquired_at"`
	GrantEndedAt sql.NullTime `db:"grant_ended_at"`
	GrantTrigger string       `db:"grant_trigger"`
}

func (j *dueJob) job() *decide.Job {
	return &decide.Job{
		JobID: j.JobID, Schedule: j.Schedule, Grace: time.Duration(j.GraceMs) * time.Millisecond,
		Since: j.Since, NextTick: nullTime(j.NextTick), PausedAt: nullTime(j.PausedAt),
		Token: j.Token, ExpiresAt: j.ExpiresAt,
		Tick: nullTime(j.Tick), AcquiredAt: j.AcquiredAt, EndedAt: nullTime(j.GrantEndedAt), GrantTrigger: leaseapi.Trigger(j.GrantTrigger),
	}
}

const (
	// dueJobsQuery reads the jobs whose next tick is due, through
	// leases_decide_at_idx: its cost grows with the due jobs only. The
	// bound is statement_timestamp(), which the planner can use as an index
	// condition (clock_timestamp() is volatile: a filter over every entry
	// of the index); the decisions use the clock read afterwards. It takes
	// no lock: the decisions are written by one conditional statement
	// (decideQuery), so that no lease row stays locked while the jobs'
	// ticks are decided, and so that of several instances sweeping at once
	// only one writes each decision.
	dueJobsQuery = `SELECT ` + dueJobColumns + ` FROM leases
WHERE decide_at <= statement_timestamp() ORDER BY decide_at LIMIT $1`

	// grantsAroundQuery reads, for each job of $1, its grants that started
	// at or after its bound in $2 and the newest one that started before
	// it: two probes of runs_job_at_idx per job, in one statement. Only
	// for the jobs whose lease row does not decide them alone
	// (decide.Plan.LeaseGrants).
	grantsAroundQuery = `
SELECT i.in_job_id AS job_id, r.token, r.tick, r.started_at, r.ended_at, r.trigger
FROM unnest($1::text[], $2::timestamptz[]) AS i(in_job_id, in_from),
LATERAL (
	(SELECT token, tick, started_at, ended_at, trigger FROM runs
		WHERE job_id = i.in_job_id AND COALESCE(started_at, tick) >= i.in_from AND token IS NOT NULL AND outcome <> 'discarded')
	UNION ALL
	(SELECT token, tick, started_at, ended_at, trigger FROM runs
		WHERE job_id = i.in_job_id AND COALESCE(started_at, tick) < i.in_from AND token IS NOT NULL AND outcome <> 'discarded'
		ORDER BY COALESCE(started_at, tick) DESC LIMIT 1)
) AS r`
)

// countExpiriesQuery marks, once, the open runs whose grant passed its
// expiresAt unreleased (runs_running_idx), and returns their jobs.
var countExpiriesQuery = `
UPDATE runs SET expiry_counted = true WHERE id IN (
	SELECT r.id FROM runs AS r JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
	WHERE r.outcome = 'running' AND NOT r.expiry_counted
		AND ` + stores.ExpiredAt(`clock_timestamp()`) + `
	LIMIT $1
	FOR UPDATE OF r SKIP LOCKED
)
RETURNING job_id`

// unchangedSinceRead is the condition under which a decision is written:
// the row is still as the pass read it (the i.read_* columns of
// decideQuery's input). A concurrent sweep that decided the same ticks
// first moved decide_at; a new spec, a pause or resume, or a grant
// (token) meanwhile changed what the decision was made from.
const unchangedSinceRead = `l.decide_at IS NOT DISTINCT FROM i.read_decide_at AND l.schedule = i.read_schedule
		AND l.paused_at IS NOT DISTINCT FROM i.read_paused_at AND l.token = i.read_token`

// catchUpColumns and catchUpValues are what decideQuery writes to what a
// job owes: the tick it decided missed (in_missed_tick), while that tick
// is in the job's catch-up window, when the job owes it
// (stores.OwesCatchUp).
var catchUpColumns, catchUpValues = func() ([]string, []string) {
	windowEnd := `i.in_missed_tick + l.catch_up_window_ms * interval '1 millisecond'`
	owes := `(i.in_missed_tick IS NOT NULL AND ` + stores.OwesCatchUp(`i.in_missed_at`, windowEnd, `clock_timestamp()`) + `)`
	return stores.CatchUpDebt(owes, `i.in_missed_tick`, windowEnd)
}()

// decideQuery writes what a pass decided for its jobs, in one statement,
// each array holding one element per job ($1-$12) or per missed run
// ($13-$15): each job's oldest undecided tick and when it is due, its
// counters, whether the newest decided tick was missed (in_decided: the
// pass decided a tick, then in_missed_at is the new missed_at and
// in_missed_tick that tick), what it owes for it (stores.OwesCatchUp: then
// that tick, as a catch-up), and a run for each missed tick to record.
// A job's row is written only if it is still as the pass read it
// (unchangedSinceRead), and its missed runs only with it; the statement
// returns the jobs it wrote. The rows are locked first, in job id order
// (the locked CTE), as the batched lease statements lock theirs, so that
// two sweeps, or a sweep and an acquire batch, cannot deadlock; locked
// carries each job's input, so that the update joins the rows it locked
// by their key alone (joined to the input as well, it was planned over
// 1 M jobs as a scan of all 1,000 inputs for each of the 1,000 rows).
var decideQuery = `
WITH input AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::bigint[], $5::bigint[],
		$6::timestamptz[], $7::boolean[], $8::timestamptz[], $9::text[], $10::timestamptz[], $11::bigint[], $12::timestamptz[])
		AS i(in_job_id, in_next_tick, in_decide_at, in_missed, in_skipped,
			in_missed_at, in_decided, read_decide_at, read_schedule, read_paused_at, read_token, in_missed_tick)
), locked AS MATERIALIZED (
	SELECT i.* FROM leases AS l JOIN input AS i ON i.in_job_id = l.job_id
	WHERE l.job_id = ANY($1::text[])
	ORDER BY l.job_id
	FOR NO KEY UPDATE OF l
), decided AS (
	UPDATE leases AS l SET (next_tick, decide_at, missed_ticks, skipped_ticks, missed_at, policy_due_at,
			` + strings.Join(catchUpColumns, ", ") + `) =
		(i.in_next_tick, i.in_decide_at, l.missed_ticks + i.in_missed, l.skipped_ticks + i.in_skipped,
		 CASE WHEN i.in_decided THEN i.in_missed_at ELSE l.missed_at END,
		 CASE WHEN i.in_missed > 0 AND l.alert_status IS NOT NULL THEN clock_timestamp() ELSE l.policy_due_at END,
		 ` + strings.Join(catchUpValues, ",\n\t\t ") + `)
	FROM locked AS i
	WHERE l.job_id = i.in_job_id AND ` + unchangedSinceRead + `
	RETURNING l.job_id
), missed AS (
	INSERT INTO runs (job_id, tick, ended_at, outcome, group_full)
	SELECT m.in_job_id, m.in_tick, m.in_ended_at, 'missed', m.in_group_full
	FROM unnest($13::text[], $14::timestamptz[], $15::timestamptz[], $16::boolean[]) AS m(in_job_id, in_tick, in_ended_at, in_group_full)
	WHERE m.in_job_id IN (SELECT job_id FROM decided)
)
SELECT job_id FROM decided`

type grantRow struct {
	JobID     string       `db:"job_id"`
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
		if len(due) > 0 {
			// The clock after the read: every decision is made at it.
			var now time.Time
			if err := p.db.GetContext(ctx, &now, dbNowQuery); err != nil {
				return res, interpretError("sweep ticks", err)
			}
			written, err := p.decideJobs(ctx, p.db, due, now)
			if err != nil {
				return leaseapi.SweepResult{}, interpretError("sweep ticks", err)
			}
			for _, d := range written {
				res.Add(d.Result())
				ev.Decided(d)
			}
		}
		var expired []string
		if err := p.db.SelectContext(ctx, &expired, countExpiriesQuery, batch); err != nil {
			return leaseapi.SweepResult{}, interpretError("sweep ticks", err)
		}
		res.Expirations = int64(len(expired))
		res.More = res.More || res.Expirations == int64(batch) || res.Unclaimed == int64(batch)
		ev.Expired += res.Expirations
		ev.Emit(p.observer)
		var err error
		if res.Policies, err = p.sweepPolicies(ctx, batch, expired); err != nil {
			return res, interpretError("sweep policies", err)
		}
		res.More = res.More || res.Policies >= batch
		return res, nil
	})
}

// decideJobs decides the due ticks of jobs at now, with their grants as
// their lease rows hold them (decide.Plan.LeaseGrants) or, for the other
// jobs, as one read of the run history finds them, and writes the
// decisions with one statement (decideQuery), except for the jobs whose
// row changed since it was read. It returns the decisions it wrote.
func (p *Store) decideJobs(ctx context.Context, q sqlx.ExtContext, jobs []dueJob, now time.Time) ([]decide.Decision, error) {
	pass := decide.NewPass(now)
	djobs := make([]*decide.Job, len(jobs))
	plans := make([]decide.Plan, len(jobs))
	grants := make(map[string][]decide.Grant, len(jobs))
	var ids, froms []string
	for i := range jobs {
		djobs[i] = jobs[i].job()
		plan, err := pass.Plan(djobs[i])
		if err != nil {
			return nil, fmt.Errorf("job %q: %w", jobs[i].JobID, err)
		}
		plans[i] = plan
		if len(plan.Due) == 0 {
			continue
		}
		if g, ok := plan.LeaseGrants(djobs[i]); ok {
			grants[jobs[i].JobID] = g
			continue
		}
		ids, froms = append(ids, jobs[i].JobID), append(froms, timeText(plan.GrantsFrom()))
	}
	if len(ids) > 0 {
		var rows []grantRow
		if err := sqlx.SelectContext(ctx, q, &rows, grantsAroundQuery, pq.Array(ids), pq.Array(froms)); err != nil {
			return nil, err
		}
		for _, r := range rows {
			grants[r.JobID] = append(grants[r.JobID], decide.Grant{Token: r.Token, Tick: nullTime(r.Tick),
				StartedAt: r.StartedAt, EndedAt: nullTime(r.EndedAt), Trigger: leaseapi.Trigger(r.Trigger)})
		}
	}
	w := newDecisionWrite(len(jobs))
	outcomes := make(map[string]decide.Outcome, len(jobs))
	for i := range jobs {
		o := decide.Decide(djobs[i], plans[i], grants[jobs[i].JobID])
		if jobs[i].GroupName.Valid {
			if err := markGroupFull(ctx, q, jobs[i].GroupName.String, o.MissedRuns); err != nil {
				return nil, err
			}
		}
		outcomes[jobs[i].JobID] = o
		w.add(&jobs[i], &o)
	}
	if p.beforeSweepWrite != nil {
		p.beforeSweepWrite()
	}
	var written []string
	if err := sqlx.SelectContext(ctx, q, &written, decideQuery, w.args()...); err != nil {
		return nil, err
	}
	out := make([]decide.Decision, len(written))
	for i, job := range written {
		out[i] = outcomes[job].Decision
	}
	return out, nil
}

// decisionWrite is decideQuery's arguments: one element per job in each
// of the first twelve arrays, one per missed run in the last three.
type decisionWrite struct {
	jobs                       []string
	next, decideAt, missedAt   []sql.NullString
	missed, skipped, tokens    []int64
	decided                    []bool
	readDecideAt, readPausedAt []sql.NullString
	readSchedule               []string
	missedTick                 []sql.NullString
	runJobs, runTicks, runEnds []string
	runGroupFull               []bool
}

func newDecisionWrite(n int) *decisionWrite {
	return &decisionWrite{
		jobs: make([]string, 0, n), next: make([]sql.NullString, 0, n), decideAt: make([]sql.NullString, 0, n),
		missedAt: make([]sql.NullString, 0, n), missed: make([]int64, 0, n), skipped: make([]int64, 0, n),
		tokens: make([]int64, 0, n), decided: make([]bool, 0, n), readDecideAt: make([]sql.NullString, 0, n),
		readPausedAt: make([]sql.NullString, 0, n), readSchedule: make([]string, 0, n), missedTick: make([]sql.NullString, 0, n),
	}
}

// add appends the outcome o of j, as j was read.
func (w *decisionWrite) add(j *dueJob, o *decide.Outcome) {
	w.jobs = append(w.jobs, j.JobID)
	w.next, w.decideAt = append(w.next, tickText(nullableTime(o.Next))), append(w.decideAt, tickText(nullableTime(o.DecideAt)))
	w.missed, w.skipped = append(w.missed, o.Missed), append(w.skipped, o.Skipped)
	w.missedAt, w.decided = append(w.missedAt, tickText(nullableTime(o.LastMissedAt))), append(w.decided, o.Decided)
	w.readDecideAt, w.readSchedule = append(w.readDecideAt, tickText(j.DecideAt)), append(w.readSchedule, j.Schedule)
	w.readPausedAt, w.tokens = append(w.readPausedAt, tickText(j.PausedAt)), append(w.tokens, j.Token)
	w.missedTick = append(w.missedTick, tickText(nullableTime(o.LastMissedTick())))
	for _, m := range o.MissedRuns {
		w.runJobs = append(w.runJobs, j.JobID)
		w.runTicks, w.runEnds = append(w.runTicks, timeText(m.Tick)), append(w.runEnds, timeText(m.EndedAt))
		w.runGroupFull = append(w.runGroupFull, m.GroupFull)
	}
}

func (w *decisionWrite) args() []any {
	return []any{pq.Array(w.jobs), pq.Array(w.next), pq.Array(w.decideAt), pq.Array(w.missed), pq.Array(w.skipped),
		pq.Array(w.missedAt), pq.Array(w.decided), pq.Array(w.readDecideAt), pq.Array(w.readSchedule),
		pq.Array(w.readPausedAt), pq.Array(w.tokens), pq.Array(w.missedTick),
		pq.Array(w.runJobs), pq.Array(w.runTicks), pq.Array(w.runEnds), pq.Array(w.runGroupFull)}
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

// groupRunsAtQuery reads group $1's limit and the grants made in it that
// started at or before $2 and had not ended by then (runs_group_idx), and
// those revoked before $2 whose slot stays in use after it, with what
// bounds a running grant (its lease's expiry) or a revoked one (its
// slot's revoked_until).
const groupRunsAtQuery = `
SELECT (SELECT "limit" FROM groups WHERE name = $1) AS "limit", r.started_at, r.outcome, r.ended_at,
	CASE WHEN r.outcome = 'running' THEN l.expires_at END AS held_until
FROM runs AS r LEFT JOIN leases AS l ON l.job_id = r.job_id AND l.token = r.token
WHERE r.group_name = $1 AND (r.ended_at > $2 OR r.ended_at IS NULL) AND r.started_at <= $2
UNION ALL
SELECT (SELECT "limit" FROM groups WHERE name = $1), r.started_at, r.outcome, r.ended_at, s.revoked_until
FROM group_slots AS s JOIN runs AS r ON r.job_id = s.job_id AND r.token = s.job_token
WHERE s.group_name = $1 AND s.revoked_until > $2 AND r.ended_at <= $2`

// markGroupFull sets GroupFull on the missed runs of a job in group
// (stores.MarkGroupFull) with groupRunsAtQuery.
func markGroupFull(ctx context.Context, q sqlx.QueryerContext, group string, missed []decide.MissedRun) error {
	return stores.MarkGroupFull(missed, func(at time.Time) (int, []decide.GroupRun, bool, error) {
		var rows []struct {
			Limit     sql.NullInt64 `db:"limit"`
			StartedAt time.Time     `db:"started_at"`
			Outcome   string        `db:"outcome"`
			EndedAt   sql.NullTime  `db:"ended_at"`
			HeldUntil sql.NullTime  `db:"held_until"`
		}
		if err := sqlx.SelectContext(ctx, q, &rows, groupRunsAtQuery, group, at); err != nil || len(rows) == 0 || !rows[0].Limit.Valid {
			return 0, nil, false, err
		}
		runs := make([]decide.GroupRun, len(rows))
		for k, r := range rows {
			runs[k] = decide.GroupRun{StartedAt: r.StartedAt, Outcome: leaseapi.Outcome(r.Outcome),
				EndedAt: nullTime(r.EndedAt), HeldUntil: nullTime(r.HeldUntil)}
		}
		return int(rows[0].Limit.Int64), runs, true, nil
	})
}
