package repo

import (
	"context"
	"database/sql"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The Postgres store resolves an acquire's tick (resolveTick) before its
// statement, with a guess of the stored schedule (the one it last saw for
// the job) and of the database clock (its own), and the statement holds the
// guess to the facts: $7 is the stored schedule the guess assumed ("" for
// none; NULL when the tick does not depend on it: a schedule was sent, or
// the acquire names no tick), checked on the row under its lock, and
// [$9, $10) the clock readings at which a NearestTick acquire picks its
// tick ($8), checked with the clock that decides the grant. When a
// condition fails the statement grants nothing; the store reads the facts
// and resolves again. So an acquire that sends its schedule costs nothing
// more, and the others cost one more statement when the guess was wrong.

// resolvedGuard is the conditions of the statement as a one-row CTE per
// job, so that the upsert's ON CONFLICT clause, which sees only the lease
// and EXCLUDED, can read them in the batched statement too.
const resolvedGuard = `resolved AS (SELECT $1::text AS job_id, $7::text AS stored, $8::boolean AS nearest)`

// batchResolvedGuard is resolvedGuard of the batched statement, one row per
// input row.
const batchResolvedGuard = `resolved AS (SELECT i.job_id, i.stored, i.nearest FROM input AS i)`

// nearestClock holds when the clock c.now lies in [$9, $10).
const nearestClock = `($9::timestamptz IS NULL OR c.now >= $9::timestamptz) AND ($10::timestamptz IS NULL OR c.now < $10::timestamptz)`

// snapshotResolved holds when the snapshot's row l and clock c are what the
// tick was resolved with.
const snapshotResolved = `($7::text IS NULL OR COALESCE(l.schedule, '') = $7::text) AND ` + nearestClock

// storedAsResolved holds, under the row lock, when the stored schedule is
// the one the tick was resolved with. A lease row is never deleted, so a
// job with a stored schedule always conflicts: an insert needs no such
// test.
const storedAsResolved = `(SELECT g.stored IS NULL OR COALESCE(l.schedule, '') = g.stored FROM resolved AS g WHERE g.job_id = l.job_id)`

// renewsTick holds when an acquire by the holder renews its grant: no tick
// sent, the grant's tick, or any tick for a NearestTick acquire.
const renewsTick = `(EXCLUDED.tick IS NULL OR l.tick IS NOT DISTINCT FROM EXCLUDED.tick
		OR (SELECT g.nearest FROM resolved AS g WHERE g.job_id = l.job_id))`

// resolveFactsQuery reads what a tick is resolved with: the database clock
// and the job's stored schedule.
const resolveFactsQuery = `SELECT clock_timestamp(), (SELECT schedule FROM leases WHERE job_id = $1)`

// resolveFacts reads the database clock and jobID's stored schedule.
func (p *Postgres) resolveFacts(ctx context.Context, jobID string) (stored string, now time.Time, err error) {
	var spec sql.NullString
	_, err = bounded(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.db.QueryRowxContext(ctx, resolveFactsQuery, jobID).Scan(&now, &spec)
	})
	return spec.String, now, err
}

// guessFacts is the stored schedule and clock a's tick is first resolved
// with: the schedule last seen for the job and this process's clock. A
// NearestTick acquire without a schedule of a job whose schedule the store
// has not seen reads the facts instead, so that it is refused for want of
// a schedule only when the database has none.
func (p *Postgres) guessFacts(ctx context.Context, a *leaseapi.AcquireParams) (string, time.Time, error) {
	if a.Schedule != "" || (a.Tick == nil && !a.NearestTick) {
		return "", time.Now(), nil
	}
	stored, seen := p.schedules.get(a.JobID)
	if !seen && a.NearestTick {
		return p.resolveFacts(ctx, a.JobID)
	}
	return stored, time.Now(), nil
}

// resolvedCall is the statement's call for r.
func resolvedCall(r *resolvedTick) *acquireCall {
	a := &r.Params
	spec, grace := sql.NullString{String: a.Schedule, Valid: a.Schedule != ""}, sql.NullInt64{}
	if spec.Valid {
		grace = sql.NullInt64{Int64: a.Grace.Milliseconds(), Valid: true}
	}
	return &acquireCall{jobID: a.JobID, owner: a.Owner, tick: nullableTime(a.Tick), ttlMs: a.TTL.Milliseconds(),
		spec: spec, grace: grace,
		stored:  sql.NullString{String: r.Stored, Valid: r.CheckStored},
		nearest: a.NearestTick,
		from:    sql.NullTime{Time: r.ClockFrom, Valid: !r.ClockFrom.IsZero()},
		until:   sql.NullTime{Time: r.ClockUntil, Valid: !r.ClockUntil.IsZero()},
	}
}
