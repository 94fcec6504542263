package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// The store resolves an acquire's tick (decide.ResolveTick) before its
// statement, with a guess of the stored schedule (the one it last saw for
// the job) and of the database clock (its own), and the statement holds the
// guess to the facts (storedAs, clockWithin in statements.go): the stored
// schedule the guess assumed, checked on the snapshot and on the row under
// its lock, and the clock readings at which a NearestTick acquire picks its
// tick, checked with the statement's clock. When a condition fails the
// statement grants nothing; the store resolves again with the facts the
// snapshot returned, or reads them, and retries. So an acquire that sends
// its schedule costs nothing more, and the others cost one more statement
// when the guess was wrong.

// storedSchedules remembers the schedule each job had when the store last
// saw it, the guess for the next acquire of the job that sends a tick
// without a schedule. A wrong guess costs a retry, never a wrong tick. It
// is bounded; past the bound it starts over.
type storedSchedules struct {
	mu sync.Mutex
	m  map[string]string
}

// maxStoredSchedules bounds the guesses a store keeps.
const maxStoredSchedules = 1 << 16

// get returns the last schedule seen for jobID, and whether one was seen.
func (c *storedSchedules) get(jobID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	spec, ok := c.m[jobID]
	return spec, ok
}

// put remembers spec as jobID's stored schedule.
func (c *storedSchedules) put(jobID, spec string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxStoredSchedules {
		c.m = make(map[string]string)
	}
	c.m[jobID] = spec
}

// resolveFactsQuery reads what a tick is resolved with: the database clock
// and the job's stored schedule.
const resolveFactsQuery = `SELECT clock_timestamp(), (SELECT schedule FROM leases WHERE job_id = $1)`

// resolveFacts reads the database clock and jobID's stored schedule.
func (p *Store) resolveFacts(ctx context.Context, jobID string) (stored string, now time.Time, err error) {
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
func (p *Store) guessFacts(ctx context.Context, a *leaseapi.AcquireParams) (string, time.Time, error) {
	now := time.Now
	if p.clock != nil {
		now = p.clock
	}
	if a.Schedule != "" || (a.Tick == nil && !a.NearestTick) {
		return "", now(), nil
	}
	stored, seen := p.schedules.get(a.JobID)
	if !seen && a.NearestTick {
		return p.resolveFacts(ctx, a.JobID)
	}
	return stored, now(), nil
}

// resolvedCall is the statement's call for r, refused when its tick lies
// more than maxAhead after the database clock.
func resolvedCall(r *decide.Resolution, maxAhead time.Duration) *acquireCall {
	a := &r.Params
	spec, grace := sql.NullString{String: a.Schedule, Valid: a.Schedule != ""}, sql.NullInt64{}
	if spec.Valid {
		grace = sql.NullInt64{Int64: a.Grace.Milliseconds(), Valid: true}
	}
	c := &acquireCall{jobID: a.JobID, owner: a.Owner, tick: nullableTime(a.Tick), ttlMs: a.TTL.Milliseconds(),
		spec: spec, grace: grace,
		stored:     sql.NullString{String: r.Stored, Valid: r.CheckStored},
		nearest:    a.NearestTick,
		from:       sql.NullTime{Time: r.ClockFrom, Valid: !r.ClockFrom.IsZero()},
		until:      sql.NullTime{Time: r.ClockUntil, Valid: !r.ClockUntil.IsZero()},
		sent:       nullableTime(r.Sent),
		maxAheadMs: maxAhead.Milliseconds(),
	}
	if a.CatchUp != "" {
		c.catchUp = sql.NullString{String: string(a.CatchUp), Valid: true}
		c.catchUpWindowMs = sql.NullInt64{Int64: cmp.Or(a.CatchUpWindow, leaseapi.DefaultCatchUpWindow).Milliseconds(), Valid: true}
	}
	return c
}
