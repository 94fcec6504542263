package decide

import (
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// How an acquire's tick is resolved against the job's schedule: snapped to
// the schedule's newest tick at or before the tick it names, or, with
// NearestTick, picked from the store's clock. Both stores resolve with
// ResolveTick, and the acquire coalescer snaps a follower's named tick with
// it; it is pure, so that each caller decides where its inputs (the stored
// schedule, the clock) come from. The embedded store reads them under its
// write lock. The Postgres store guesses them and sends the guess
// as conditions of its acquire statement (Resolution.Stored, ClockFrom,
// ClockUntil), and resolves again and retries when they do not hold at the
// statement's instant.

// parsedSchedules caches parsed specs: the stores parse a spec on every
// acquire that sends one and on every read of a scheduled lease (its next
// tick), and replicas send the same few specs over and over.
var parsedSchedules = struct {
	sync.Mutex
	m map[parsedKey]*schedule.Schedule
}{m: make(map[parsedKey]*schedule.Schedule)}

// parsedKey is a spec and whether it was parsed as stored.
type parsedKey struct {
	spec   string
	stored bool
}

// maxParsedSchedules bounds the cache; past it the cache starts over.
const maxParsedSchedules = 4096

// ParseSchedule returns the parsed spec an acquire sends, or an
// *leaseapi.InvalidError with the parser's reason.
func ParseSchedule(spec string) (*schedule.Schedule, error) {
	return parseCached(spec, false)
}

// ParseStoredSchedule returns the parsed spec a store holds: it parses
// what an earlier version accepted too (schedule.ParseStored), so that a
// job stored then keeps its ticks.
func ParseStoredSchedule(spec string) (*schedule.Schedule, error) {
	return parseCached(spec, true)
}

func parseCached(spec string, stored bool) (*schedule.Schedule, error) {
	key := parsedKey{spec, stored}
	parsedSchedules.Lock()
	s, ok := parsedSchedules.m[key]
	parsedSchedules.Unlock()
	if ok {
		return s, nil
	}
	parse := schedule.Parse
	if stored {
		parse = schedule.ParseStored
	}
	s, err := parse(spec)
	if err != nil {
		return nil, leaseapi.InvalidSchedule(err)
	}
	parsedSchedules.Lock()
	if len(parsedSchedules.m) >= maxParsedSchedules {
		clear(parsedSchedules.m)
	}
	parsedSchedules.m[key] = s
	parsedSchedules.Unlock()
	return s, nil
}

// MaxNearestTickMargin bounds how far ahead of the store's clock a
// NearestTick acquire looks for its tick.
const MaxNearestTickMargin = time.Minute

// Resolution is an acquire's tick once its schedule has had its say, and
// the facts that decision assumed.
type Resolution struct {
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
	// Sent is the tick as the acquire sent it, at millisecond precision,
	// or nil (none, or NearestTick): the tick it takes when that is the
	// manual tick the job owes (ClaimedTick).
	Sent *time.Time
}

// ResolveTick resolves p's tick with stored, the job's stored schedule (""
// for none), at the store's clock now. Without a schedule sent or stored a
// tick stays as it is, and NearestTick is an *leaseapi.InvalidError.
func ResolveTick(p *leaseapi.AcquireParams, stored string, now time.Time) (Resolution, error) {
	r := Resolution{Params: *p}
	if p.Tick != nil && !p.NearestTick {
		sent := p.Tick.Truncate(time.Millisecond)
		r.Sent = &sent
	}
	if p.Tick == nil && !p.NearestTick {
		return r, nil // a plain mutex: no schedule has a say
	}
	spec, parse := p.Schedule, ParseSchedule
	if spec == "" {
		r.CheckStored, r.Stored, spec, parse = true, stored, stored, ParseStoredSchedule
	}
	if spec == "" {
		if p.NearestTick {
			return r, &leaseapi.InvalidError{Field: "nearestTick",
				Rule: "needs the job's schedule: send schedule (and graceMs) with this acquire, or register it with an earlier one"}
		}
		return r, nil
	}
	s, err := parse(spec)
	if err != nil {
		return r, err
	}
	if !p.NearestTick {
		if snapped := s.Latest(*p.Tick); !snapped.IsZero() {
			snapped = snapped.UTC()
			if !leaseapi.ValidTick(snapped) {
				return r, &leaseapi.InvalidError{Field: "tick",
					Rule: "must be a time from year 0001 to 9999, and its schedule's newest tick at or before it lies before year 0001"}
			}
			r.Params.Tick = &snapped
		}
		return r, nil
	}
	margin := min(MaxNearestTickMargin, s.MinGap()/2)
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
