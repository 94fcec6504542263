package repo

import (
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
)

// How an acquire's tick is resolved against the job's schedule: snapped to
// the schedule's newest tick at or before the tick it names, or, with
// NearestTick, picked from the store's clock. Both stores resolve with
// resolveTick; it is pure, so that each store decides where its inputs
// (the stored schedule, the clock) come from. The embedded store reads them
// under its write lock. The Postgres store guesses them and sends the
// guess as conditions of its acquire statement (resolvedTick.expect,
// clockFrom, clockUntil), which re-resolves and retries when they do not
// hold at the statement's instant.

// maxNearestTickMargin bounds how far ahead of the store's clock a
// NearestTick acquire looks for its tick.
const maxNearestTickMargin = time.Minute

// resolvedTick is an acquire's tick once its schedule has had its say,
// and the facts that decision assumed.
type resolvedTick struct {
	// Params are the acquire's parameters with Tick resolved.
	Params leaseapi.AcquireParams
	// CheckStored reports whether the decision depends on the stored
	// schedule (no schedule was sent, and the acquire names or asks for a
	// tick); Stored is the stored schedule it assumed ("" for none).
	CheckStored bool
	Stored      string
	// ClockFrom and ClockUntil bound the store clock readings at which a
	// NearestTick acquire picks Params.Tick: [ClockFrom, ClockUntil). Zero
	// is unbounded; both are zero without NearestTick.
	ClockFrom, ClockUntil time.Time
}

// resolveTick resolves p's tick with stored, the job's stored schedule (""
// for none), at the store's clock now. Without a schedule sent or stored a
// tick stays as it is, and NearestTick is an *leaseapi.InvalidError.
func resolveTick(p *leaseapi.AcquireParams, stored string, now time.Time) (resolvedTick, error) {
	r := resolvedTick{Params: *p}
	if p.Tick == nil && !p.NearestTick {
		return r, nil // a plain mutex: no schedule has a say
	}
	spec := p.Schedule
	if spec == "" {
		r.CheckStored, r.Stored, spec = true, stored, stored
	}
	if spec == "" {
		if p.NearestTick {
			return r, &leaseapi.InvalidError{Field: "nearestTick",
				Rule: "needs the job's schedule: send schedule (and graceMs) with this acquire, or register it with an earlier one"}
		}
		return r, nil
	}
	s, err := parseSchedule(spec)
	if err != nil {
		return r, err
	}
	if !p.NearestTick {
		if snapped := s.Latest(*p.Tick); !snapped.IsZero() {
			snapped = snapped.UTC()
			r.Params.Tick = &snapped
		}
		return r, nil
	}
	margin := min(maxNearestTickMargin, s.MinGap()/2)
	tick := s.Latest(now.Add(margin))
	if tick.IsZero() {
		return r, &leaseapi.InvalidError{Field: "nearestTick",
			Rule: "found no tick of the schedule in the five years before now"}
	}
	tick = tick.UTC()
	r.Params.Tick = &tick
	r.ClockFrom = tick.Add(-margin)
	if next := s.Next(tick); !next.IsZero() {
		r.ClockUntil = next.Add(-margin)
	}
	return r, nil
}

// holds reports whether r is still the resolution with the stored schedule
// stored at the store's clock now.
func (r *resolvedTick) holds(stored string, now time.Time) bool {
	if r.CheckStored && stored != r.Stored {
		return false
	}
	return (r.ClockFrom.IsZero() || !now.Before(r.ClockFrom)) &&
		(r.ClockUntil.IsZero() || now.Before(r.ClockUntil))
}

// guarded reports whether r depends on facts its store may have guessed.
func (r *resolvedTick) guarded() bool {
	return r.CheckStored || !r.ClockFrom.IsZero() || !r.ClockUntil.IsZero()
}

// storedSchedules remembers the schedule each job had when a store last
// saw it, the Postgres store's guess for the next acquire of the job that
// sends a tick without a schedule. A wrong guess costs a retry, never a
// wrong tick. It is bounded; past the bound it starts over.
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
