package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// An acquire reads the job's row with the database clock and WAL timeline
// (readQuery; concurrent reads of different jobs go as one statement,
// batch.go), decides in Go (decide.PlanAcquire), and writes the plan with
// one conditional statement (insertQuery, grantQuery, takeoverQuery,
// renewQuery; concurrent grants of different jobs that take over no
// expired run go as one, batchGrantQuery). A refusal is the read alone: no row lock, no transaction id, no commit to
// wait for. When the write finds the row changed since the read, or the
// clock past the plan's ValidUntil, it writes nothing and the acquire
// reads and decides again.

// walTimeline is the primary's current WAL timeline, read as Patroni reads
// it: the first 8 hex digits of the name of its current WAL file.
// (pg_control_checkpoint() reports the old timeline until the first
// checkpoint after a promotion.) On a server in recovery pg_current_wal_lsn
// fails with 55000, which the guard answers as unavailable.
const walTimeline = `('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint`

// readColumns follow leaseColumns in a read for a decision: the row's
// version (xmin, the id of the transaction that wrote it, which every
// update of the row changes) and the WAL timeline a new token is for.
const readColumns = `, xmin::text AS version, ` + walTimeline + ` AS wal_timeline`

const (
	// readQuery reads what an acquire of job $1 is decided on.
	readQuery = `SELECT ` + leaseColumns + readColumns + ` FROM leases WHERE job_id = $1`
	// batchReadQuery is readQuery for the jobs of a batch.
	batchReadQuery = `SELECT ` + leaseColumns + readColumns + ` FROM leases WHERE job_id = ANY($1::text[])`
	// naiveReadQuery is readQuery taking the row lock: the benchmark's
	// baseline, in which every acquire locks the row and commits.
	naiveReadQuery = readQuery + ` FOR UPDATE`
	// clockQuery reads the clock and timeline an acquire of a job without
	// a row is decided with.
	clockQuery = `SELECT clock_timestamp(), ` + walTimeline
)

// readRow is a row read for a decision.
type readRow struct {
	leaseRow
	Version     string `db:"version"`
	WALTimeline int64  `db:"wal_timeline"`
}

func (r *readRow) fields() []any { return append(r.leaseRow.fields(), &r.Version, &r.WALTimeline) }

// facts are the decision's facts of r.
func (r *readRow) facts() decide.Facts {
	l := r.toLease()
	return decide.Facts{Lease: &l, Now: r.Now, Timeline: r.WALTimeline, Revoked: r.RevokedAt.Valid,
		OwedUntil: nullTime(r.OwedUntil), OwedBy: r.OwedBy.String,
		GrantTrigger: leaseapi.Trigger(r.GrantTrigger), GrantTriggeredBy: r.GrantTriggeredBy.String,
		ScheduleSince: nullTime(r.ScheduleSince), NextTick: nullTime(r.NextTick), DecideAt: nullTime(r.DecideAt)}
}

// The writes of a plan. Each reads the clock once (c), so that the times
// it writes are one instant, and the instant it checks the plan's
// ValidUntil against ($validUntil NULL: none); an UPDATE writes only the
// row version the decision read (xmin), so a row that changed after the
// read, even while the statement waited for its lock, is not written. A
// grant also checks the WAL timeline its token was computed for: after a
// failover between the read and the write it writes nothing. The run of a
// grant is inserted, and the run of the grant it takes over after expiry
// closed, in the same statement.
// grantInput names the columns of a grant's input row i, in planArgs'
// order: the single grant reads one from its parameters, the batched one
// (batchGrantQuery) one per call from arrays.
const grantInput = `i(in_job_id, in_owner, in_token, in_timeline, in_tick, in_ttl_ms,
	in_last_outcome, in_trigger, in_triggered_by,
	in_schedule, in_grace_ms, in_schedule_since, in_next_tick, in_decide_at, in_catch_up, in_catch_up_window_ms,
	in_settles_owed, in_version, in_valid_until, in_group, in_slot, in_slot_token)`

// grantSet writes a grant's plan, input row i, at the write's clock c.now:
// the plan's columns, and the owed columns cleared when it settles the debt.
const grantSet = `SET (owner, token, timeline, tick, ttl_ms, acquired_at, renewed_at, expires_at, released_at, revoked_at,
	last_outcome, grant_trigger, grant_triggered_by,
	schedule, grace_ms, schedule_since, next_tick, decide_at, catch_up, catch_up_window_ms,
	owed_tick, owed_reason, owed_by, owed_trigger_reason, owed_until, group_name, slot, slot_token) = (
	i.in_owner, i.in_token, i.in_timeline, i.in_tick, i.in_ttl_ms, c.now, c.now, c.now + i.in_ttl_ms * interval '1 millisecond', NULL, NULL,
	i.in_last_outcome, i.in_trigger, i.in_triggered_by,
	i.in_schedule, i.in_grace_ms, i.in_schedule_since, i.in_next_tick, i.in_decide_at, i.in_catch_up, i.in_catch_up_window_ms,
	CASE WHEN i.in_settles_owed THEN NULL ELSE l.owed_tick END, CASE WHEN i.in_settles_owed THEN NULL ELSE l.owed_reason END,
	CASE WHEN i.in_settles_owed THEN NULL ELSE l.owed_by END, CASE WHEN i.in_settles_owed THEN NULL ELSE l.owed_trigger_reason END,
	CASE WHEN i.in_settles_owed THEN NULL ELSE l.owed_until END, i.in_group, i.in_slot, i.in_slot_token)`

// grantUnchanged: the row l is the version the plan was decided on, the
// clock c has not passed the plan's ValidUntil, and the WAL timeline is
// the one its token was computed for.
const grantUnchanged = `l.xmin = i.in_version::xid AND (i.in_valid_until IS NULL OR c.now < i.in_valid_until)
	AND c.wal_timeline = i.in_timeline`

const (
	insertQuery = `
WITH c AS (SELECT clock_timestamp() AS now), lease AS (
INSERT INTO leases AS l (job_id, owner, token, timeline, tick, ttl_ms, acquired_at, renewed_at, expires_at,
	schedule, grace_ms, schedule_since, decide_at, catch_up, catch_up_window_ms, group_name, slot, slot_token)
SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::timestamptz, $6::bigint, c.now, c.now, c.now + $6::bigint * interval '1 millisecond',
	$7::text, $8::bigint, $9::timestamptz, $10::timestamptz, $11::text, $12::bigint, $14::text, $15::integer, $16::bigint
FROM c
WHERE ($13::timestamptz IS NULL OR c.now < $13::timestamptz) AND ` + walTimeline + ` = $4::bigint
ON CONFLICT (job_id) DO NOTHING
RETURNING ` + leaseColumns + `
)` + startedRun + `SELECT *, NULL::timestamptz, NULL::boolean FROM lease`

	// grantLease is the grant's write of the lease row, the lease CTE of
	// grantQuery and takeoverQuery: grantWrite over the call's parameters.
	grantLease = `
WITH c AS (SELECT clock_timestamp() AS now, ` + walTimeline + ` AS wal_timeline), lease AS (
UPDATE leases AS l ` + grantSet + `
FROM (SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::timestamptz, $6::bigint, $7::text, $8::text, $9::text,
	$10::text, $11::bigint, $12::timestamptz, $13::timestamptz, $14::timestamptz, $15::text, $16::bigint,
	$17::boolean, $18::text, $19::timestamptz, $20::text, $21::integer, $22::bigint) AS ` + grantInput + `, c
WHERE l.job_id = i.in_job_id AND ` + grantUnchanged + `
RETURNING ` + leaseColumns + `
`

	grantQuery = grantLease + `)` + startedRun + `SELECT *, NULL::timestamptz, NULL::boolean FROM lease`

	// takeoverQuery is grantQuery for a grant that takes over a grant
	// that expired: it also closes that grant's run ($20: its token) as
	// expired at $21, and returns when the run started and whether the
	// sweep had counted its expiry.
	takeoverQuery = grantLease + `), prev AS (
	SELECT id, started_at, expiry_counted FROM runs
	WHERE job_id = $1::text AND token = $23::bigint AND outcome = 'running' AND EXISTS (SELECT 1 FROM lease)
	FOR UPDATE
), closed AS (
	UPDATE runs AS r SET (outcome, ended_at, expiry_counted) = ('expired', $24::timestamptz, true)
	FROM prev WHERE r.id = prev.id
	RETURNING prev.started_at, prev.expiry_counted
)` + startedRun + `SELECT lease.*, closed.started_at, closed.expiry_counted FROM lease LEFT JOIN closed ON true`

	renewQuery = `
WITH c AS (SELECT clock_timestamp() AS now)
UPDATE leases AS l SET (ttl_ms, renewed_at, expires_at,
	schedule, grace_ms, schedule_since, next_tick, decide_at, catch_up, catch_up_window_ms) = (
	$2::bigint, c.now, c.now + $2::bigint * interval '1 millisecond',
	$3::text, $4::bigint, $5::timestamptz, $6::timestamptz, $7::timestamptz, $8::text, $9::bigint)
FROM c
WHERE l.job_id = $1::text AND l.xmin = $10::text::xid AND c.now < $11::timestamptz
RETURNING ` + leaseColumns + `, NULL::timestamptz, NULL::boolean`
)

// startedRun inserts the run of the grant the lease CTE wrote.
const startedRun = `, run AS (
	INSERT INTO runs (job_id, token, owner, tick, started_at, timeline, trigger, triggered_by, group_name, slot, slot_token)
	SELECT job_id, token, owner, tick, acquired_at, timeline, grant_trigger, grant_triggered_by, group_name, slot, slot_token FROM lease
	ON CONFLICT (job_id, token) DO NOTHING
)
`

// acquireAttempts bounds the reads and decisions of one acquire whose
// writes find the row changed each time; the request's deadline usually
// ends them first.
const acquireAttempts = 10

// Acquire grants, renews or refuses the lease. See leaseapi.Store.
func (p *Store) Acquire(ctx context.Context, a *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	if err := stores.ValidateAcquire(a); err != nil {
		return leaseapi.Lease{}, err
	}
	for attempt := 1; attempt <= acquireAttempts; attempt++ {
		o, err := p.acquireOnce(ctx, a, attempt == 1)
		if err != nil {
			return leaseapi.Lease{}, interpretError(fmt.Sprintf("acquire %q", a.JobID), err)
		}
		if o.refused != nil {
			return leaseapi.Lease{}, o.refused
		}
		if o.written {
			return o.lease, nil
		}
		p.logger.DebugContext(ctx, "acquire: the lease changed after the read; deciding again",
			slog.String("job_id", a.JobID), slog.Int("attempt", attempt))
	}
	return leaseapi.Lease{}, fmt.Errorf("acquire %q: the lease changed between the read and the write at each of %d attempts, nothing was done: %w",
		a.JobID, acquireAttempts, leaseapi.ErrUnavailable)
}

// AcquireBatch decides each acquire of as as Acquire decides it. See
// leaseapi.Batching. The reads of every acquire go in the batches of
// concurrent reads, and the grants that take over no expired run in those
// of concurrent grants; an acquire that needs more (a job without a row, a
// renewal, a takeover, a group, a row changed since its read) is then made
// as a single Acquire.
func (p *Store) AcquireBatch(ctx context.Context, as []*leaseapi.AcquireParams) []leaseapi.Answer {
	out := make([]leaseapi.Answer, len(as))
	// again are made as single acquires, together; grouped too, but one
	// after the other in item order, so that a group's free slots go to
	// the batch's items in their order, as to single calls made in turn.
	var again, grouped, read []int // indexes of as
	var ids []*string
	for i, a := range as {
		switch out[i].Err = stores.ValidateAcquire(a); {
		case out[i].Err != nil:
		case p.naive:
			again = append(again, i)
		default:
			read, ids = append(read, i), append(ids, &as[i].JobID)
		}
	}
	rows, errs := sendAll(ctx, p.reads, p.readShared, ids)
	var grants []*grantCall
	var granted []int
	for k, i := range read {
		a := as[i]
		if errs[k] != nil {
			switch {
			case errors.Is(errs[k], sql.ErrNoRows) && a.Group != nil && *a.Group != "":
				grouped = append(grouped, i)
			case errors.Is(errs[k], sql.ErrNoRows):
				again = append(again, i)
			default:
				out[i].Err = interpretError(fmt.Sprintf("acquire %q", a.JobID), errs[k])
			}
			continue
		}
		d, err := p.decide(a, rows[k], true, nil)
		switch {
		case err != nil:
			out[i].Err = interpretError(fmt.Sprintf("acquire %q", a.JobID), err)
		case d.refused != nil:
			out[i].Err = d.refused
		case d.plan.NeedsGroup():
			grouped = append(grouped, i)
		case d.stale || planQuery(&d.plan) != grantQuery:
			again = append(again, i)
		default:
			// A copy of the plan: taking d's address would move every
			// decision of the batch to the heap, refusals included.
			plan := d.plan
			grants = append(grants, &grantCall{plan: &plan, version: rows[k].Version})
			granted = append(granted, i)
		}
	}
	if p.beforeAcquireWrite != nil && len(grants) > 0 {
		p.beforeAcquireWrite()
	}
	written, errs := sendAll(ctx, p.grants, p.grantOne, grants)
	for k, i := range granted {
		switch err := errs[k]; {
		case err == nil:
			out[i].Lease = p.observeWrite(grants[k].plan, &written[k])
		case errors.Is(err, sql.ErrNoRows):
			again = append(again, i)
		default:
			out[i].Err = interpretError(fmt.Sprintf("acquire %q", as[i].JobID), err)
		}
	}
	// The acquires made again go together, as their single calls would,
	// so that their reads and grants meet in the batches.
	var wg sync.WaitGroup
	for _, i := range again {
		wg.Go(func() { out[i].Lease, out[i].Err = p.Acquire(ctx, as[i]) })
	}
	wg.Go(func() {
		for _, i := range grouped {
			out[i].Lease, out[i].Err = p.Acquire(ctx, as[i])
		}
	})
	wg.Wait()
	return out
}

// acquireOutcome is one read, decision and write of an acquire: the
// refusal, or the lease written, or neither (the write found the row
// changed since the read, or the clock past the plan's ValidUntil).
type acquireOutcome struct {
	refused error
	written bool
	lease   leaseapi.Lease
}

// acquireOnce reads, decides and writes once; the first attempt's read
// goes with concurrent ones (batched).
func (p *Store) acquireOnce(ctx context.Context, a *leaseapi.AcquireParams, batched bool) (acquireOutcome, error) {
	if p.naive {
		return bounded(ctx, func(ctx context.Context) (acquireOutcome, error) { return p.naiveAcquire(ctx, a) })
	}
	row, found, err := p.readFacts(ctx, a.JobID, batched)
	if err != nil {
		return acquireOutcome{}, err
	}
	d, err := p.decide(a, &row, found, nil)
	if err != nil || d.refused != nil {
		return d.acquireOutcome, err
	}
	if p.beforeAcquireWrite != nil {
		p.beforeAcquireWrite()
	}
	if d.plan.NeedsGroup() {
		return p.writeInGroup(ctx, a, &row, found, d.plan.Group)
	}
	return p.write(ctx, nil, &d.plan, row.Version)
}

// readFacts reads jobID's row for a decision (batched with concurrent
// reads when batched), or, when the job has none, the clock and timeline.
func (p *Store) readFacts(ctx context.Context, jobID string, batched bool) (readRow, bool, error) {
	var row readRow
	var err error
	if batched {
		var shared *readRow
		if shared, err = send(ctx, p.reads, p.readShared, &jobID); err == nil {
			row = *shared
		}
	} else {
		row, err = bounded(ctx, func(ctx context.Context) (readRow, error) { return p.readOne(ctx, &jobID) })
	}
	if err == nil {
		return row, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return row, false, err
	}
	row = readRow{}
	_, err = bounded(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.scanPrepared(ctx, clockQuery, nil, &row.Now, &row.WALTimeline)
	})
	return row, false, err
}

// readOne reads one job's row with readQuery.
func (p *Store) readOne(ctx context.Context, jobID *string) (readRow, error) {
	var row readRow
	err := p.scanPrepared(ctx, readQuery, []any{*jobID}, row.fields()...)
	return row, err
}

// readShared is readOne for the batches of reads, whose rows are shared
// by pointer (readBatch).
func (p *Store) readShared(ctx context.Context, jobID *string) (*readRow, error) {
	row := new(readRow)
	err := p.scanPrepared(ctx, readQuery, []any{*jobID}, row.fields()...)
	return row, err
}

// naiveAcquire is the benchmark's baseline: the read takes the row lock,
// and the decision and the write are in its transaction, which commits
// whether the acquire was granted or refused.
func (p *Store) naiveAcquire(ctx context.Context, a *leaseapi.AcquireParams) (acquireOutcome, error) {
	tx, err := p.db.BeginTxx(ctx, nil)
	if err != nil {
		return acquireOutcome{}, err
	}
	defer func() { _ = tx.Rollback() }()
	var row readRow
	found := true
	err = tx.QueryRowxContext(ctx, naiveReadQuery, a.JobID).Scan(row.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		found = false
		err = tx.QueryRowxContext(ctx, clockQuery).Scan(&row.Now, &row.WALTimeline)
	}
	if err != nil {
		return acquireOutcome{}, err
	}
	d, err := p.decide(a, &row, found, nil)
	o := d.acquireOutcome
	switch {
	case err != nil || d.refused != nil:
	case d.plan.NeedsGroup():
		o, err = p.grantInGroup(ctx, tx, a, &row, found, d.plan.Group)
	default:
		o, err = p.write(ctx, tx, &d.plan, row.Version)
	}
	if err != nil {
		return acquireOutcome{}, err
	}
	return o, tx.Commit()
}

// decision is an acquire's decision: the refusal or the plan to write,
// or neither when the facts read disagree (stale: read again).
type decision struct {
	acquireOutcome
	plan  decide.AcquirePlan
	stale bool
}

// decide decides a on row (found false: the job has no row, row holds
// only the clock and timeline) and, for a grant in a group, its facts g
// (nil before they are read), with the facts the store's rules give it
// (Store.facts).
func (p *Store) decide(a *leaseapi.AcquireParams, row *readRow, found bool, g *decide.GroupFacts) (decision, error) {
	f := decide.Facts{Now: row.Now, Timeline: row.WALTimeline}
	if found {
		if p.facts != nil {
			p.facts(a, &row.leaseRow)
		}
		f = row.facts()
	}
	f.Group = g
	plan, err := decide.PlanAcquire(a, &f, p.maxAhead)
	if errors.Is(err, decide.ErrFactsChanged) {
		return decision{stale: true}, nil
	}
	if err != nil {
		if isRefusal(err) {
			return decision{acquireOutcome: acquireOutcome{refused: err}}, nil
		}
		return decision{}, err
	}
	return decision{plan: plan}, nil
}

// isRefusal reports whether err is a decision's answer rather than a
// failure: a conflict, a tick ahead, an invalid request.
func isRefusal(err error) bool {
	var c *leaseapi.ConflictError
	var t *leaseapi.TickAheadError
	var i *leaseapi.InvalidError
	return errors.As(err, &c) || errors.As(err, &t) || errors.As(err, &i)
}

// write writes plan, decided on the row version, in tx, or, when tx is
// nil, within ctx's deadline (bounded) with the statement prepared on the
// pool; a grant that takes over no expired run goes with concurrent ones
// (batched).
func (p *Store) write(ctx context.Context, tx rowQuerier, plan *decide.AcquirePlan, version string) (acquireOutcome, error) {
	var w writtenRow
	var err error
	switch {
	case tx != nil:
		err = tx.QueryRowContext(ctx, planQuery(plan), planArgs(plan, version)...).Scan(w.fields()...)
	case planQuery(plan) == grantQuery:
		w, err = send(ctx, p.grants, p.grantOne, &grantCall{plan: plan, version: version})
	default:
		w, err = bounded(ctx, func(ctx context.Context) (writtenRow, error) {
			var w writtenRow
			err := p.scanPrepared(ctx, planQuery(plan), planArgs(plan, version), w.fields()...)
			return w, err
		})
	}
	if errors.Is(err, sql.ErrNoRows) {
		return acquireOutcome{}, nil
	}
	if err != nil {
		return acquireOutcome{}, err
	}
	return acquireOutcome{written: true, lease: p.observeWrite(plan, &w)}, nil
}

// observeWrite tells the observer what the write of plan, which returned
// w, started and ended, and returns the lease written.
func (p *Store) observeWrite(plan *decide.AcquirePlan, w *writtenRow) leaseapi.Lease {
	if !plan.Renew {
		p.observer.RunStarted(plan.Trigger)
	}
	if w.ClosedStart.Valid {
		p.observer.RunFinished(leaseapi.OutcomeExpired, plan.PrevExpiresAt.Sub(w.ClosedStart.Time))
		if !w.ClosedCounted.Bool {
			p.observer.LeasesExpired(1)
		}
	}
	return w.toLease()
}

// rowQuerier runs a statement of one row: the pool or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// writtenRow is the row a plan's write returns, with the start of the run
// it closed as expired and whether the sweep had counted that expiry.
type writtenRow struct {
	leaseRow
	ClosedStart   sql.NullTime
	ClosedCounted sql.NullBool
}

func (r *writtenRow) fields() []any {
	return append(r.leaseRow.fields(), &r.ClosedStart, &r.ClosedCounted)
}

// planQuery is the statement that writes plan.
func planQuery(plan *decide.AcquirePlan) string {
	switch {
	case plan.Insert:
		return insertQuery
	case plan.Renew:
		return renewQuery
	case plan.CloseExpired:
		return takeoverQuery
	}
	return grantQuery
}

// planArgs are planQuery's parameters for plan, decided on the row version.
func planArgs(plan *decide.AcquirePlan, version string) []any {
	g := &plan.Registration
	spec, grace := sql.NullString{String: g.Schedule, Valid: g.Schedule != ""}, sql.NullInt64{}
	if spec.Valid {
		grace = sql.NullInt64{Int64: g.Grace.Milliseconds(), Valid: true}
	}
	valid := sql.NullTime{Time: plan.ValidUntil, Valid: !plan.ValidUntil.IsZero()}
	ttl := plan.TTL.Milliseconds()
	since, next, due := nullableTime(g.ScheduleSince), nullableTime(g.NextTick), nullableTime(g.DecideAt)
	catchUp, window := string(g.CatchUp), g.CatchUpWindow.Milliseconds()
	group := sql.NullString{String: plan.Group, Valid: plan.Group != ""}
	slot := sql.NullInt64{Int64: int64(plan.Slot), Valid: plan.Slot != 0}
	slotToken := sql.NullInt64{Int64: plan.SlotToken, Valid: plan.Slot != 0}
	switch {
	case plan.Insert:
		return []any{plan.JobID, plan.Owner, plan.Token, plan.Timeline, nullableTime(plan.Tick), ttl,
			spec, grace, since, due, catchUp, window, valid, group, slot, slotToken}
	case plan.Renew:
		return []any{plan.JobID, ttl, spec, grace, since, next, due, catchUp, window, version, valid}
	}
	args := []any{plan.JobID, plan.Owner, plan.Token, plan.Timeline, nullableTime(plan.Tick), ttl,
		sql.NullString{String: string(plan.LastOutcome), Valid: plan.LastOutcome != ""},
		string(plan.Trigger), sql.NullString{String: plan.TriggeredBy, Valid: plan.TriggeredBy != ""},
		spec, grace, since, next, due, catchUp, window,
		plan.SettlesOwed, version, valid, group, slot, slotToken}
	if plan.CloseExpired {
		args = append(args, plan.PrevToken, plan.PrevExpiresAt)
	}
	return args
}
