package repo

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// How the sweep decides the fate of a scheduled job's ticks. Both stores
// read the same facts under the job's row lock (scheduledJob, the grants
// around the ticks) and apply the same decision (decideTicks); only their
// SQL differs.

// maxTicksPerPass bounds the ticks one sweep pass decides for one job, so
// that a per-second job whose replicas were gone for a week is worked off
// over several passes instead of holding its row lock for one long one.
const maxTicksPerPass = 10_000

// tickSkew is how long before its tick a grant for it may start and still
// be found: a replica whose clock runs ahead asks for a tick early.
const tickSkew = time.Minute

// scheduledJob is a due job as the sweep reads it.
type scheduledJob struct {
	JobID    string
	Schedule string
	Grace    time.Duration
	// Since is when the spec was registered; NextTick the oldest undecided
	// tick, or nil for the first tick after Since.
	Since    time.Time
	NextTick *time.Time
	PausedAt *time.Time
	// The current grant, which holds its running run until ExpiresAt.
	Token     int64
	ExpiresAt time.Time
}

// grantRun is a run that had a holder, as the sweep reads it.
type grantRun struct {
	Token     int64
	Tick      *time.Time
	StartedAt time.Time
	EndedAt   *time.Time // nil while running
}

// tickPlan is the ticks of a job that are due at now, oldest first, and the
// oldest tick left undecided after them (zero when the schedule does not
// fire again).
type tickPlan struct {
	Due  []time.Time
	Next time.Time
}

// planTicks lists the ticks of j whose grace has ended by now.
func planTicks(j *scheduledJob, s *schedule.Schedule, now time.Time) tickPlan {
	var t time.Time
	if j.NextTick != nil {
		t = *j.NextTick
	} else {
		t = s.Next(j.Since)
	}
	var p tickPlan
	for !t.IsZero() && !t.Add(j.Grace).After(now) && len(p.Due) < maxTicksPerPass {
		p.Due = append(p.Due, t)
		t = s.Next(t)
	}
	p.Next = t
	return p
}

// tickDecision is what the sweep decided for one job in one pass.
type tickDecision struct {
	Ran, Paused, Skipped, Missed int64
	// MissedTicks are the missed ticks to record as runs: the newest
	// leaseapi.MaxMissedRunsPerSweep of them.
	MissedTicks []time.Time
	// LastMissedAt is the end of the grace of the newest decided tick when
	// it was missed, nil when it was not.
	LastMissedAt *time.Time
}

// result is d as one job's part of a sweep's result.
func (d tickDecision) result() leaseapi.SweepResult {
	return leaseapi.SweepResult{Jobs: 1, Ran: d.Ran, Paused: d.Paused, Skipped: d.Skipped, Missed: d.Missed}
}

// decideTicks decides each due tick of j, oldest first: ran when a grant
// was made for it; else paused when the job was paused by the end of its
// grace; else skipped when an earlier grant was held at the tick; else
// missed. runs are j's grants that started in the plan's window and the
// newest one that started before it.
func decideTicks(j *scheduledJob, due []time.Time, runs []grantRun) tickDecision {
	granted := make(map[int64]bool)
	for _, r := range runs {
		if r.Tick != nil {
			granted[r.Tick.UnixMilli()] = true
		}
	}
	// Grants never overlap (mutual exclusion), so sorted by start the grant
	// held at t, if any, is the last one that started at or before t.
	sort.Slice(runs, func(a, b int) bool { return runs[a].StartedAt.Before(runs[b].StartedAt) })
	heldAt := func(t time.Time) bool {
		i := sort.Search(len(runs), func(i int) bool { return runs[i].StartedAt.After(t) }) - 1
		if i < 0 {
			return false
		}
		r := runs[i]
		if r.EndedAt != nil {
			return r.EndedAt.After(t)
		}
		return r.Token == j.Token && j.ExpiresAt.After(t)
	}
	var d tickDecision
	for _, t := range due {
		end := t.Add(j.Grace)
		missed := false
		switch {
		case granted[t.UnixMilli()]:
			d.Ran++
		case j.PausedAt != nil && !j.PausedAt.After(end):
			d.Paused++
		case heldAt(t):
			d.Skipped++
		default:
			d.Missed++
			missed = true
			d.MissedTicks = append(d.MissedTicks, t)
		}
		if missed {
			d.LastMissedAt = &end
		} else {
			d.LastMissedAt = nil
		}
	}
	if n := len(d.MissedTicks); n > leaseapi.MaxMissedRunsPerSweep {
		d.MissedTicks = d.MissedTicks[n-leaseapi.MaxMissedRunsPerSweep:]
	}
	return d
}

// parsedSchedules caches parsed specs: the stores parse a spec on every
// acquire that sends one and on every read of a scheduled lease (its next
// tick), and replicas send the same few specs over and over.
var parsedSchedules = struct {
	sync.Mutex
	m map[string]*schedule.Schedule
}{m: make(map[string]*schedule.Schedule)}

// maxParsedSchedules bounds the cache; past it the cache starts over.
const maxParsedSchedules = 4096

// parseSchedule returns the parsed spec, or an *leaseapi.InvalidError with
// the parser's reason.
func parseSchedule(spec string) (*schedule.Schedule, error) {
	parsedSchedules.Lock()
	s, ok := parsedSchedules.m[spec]
	parsedSchedules.Unlock()
	if ok {
		return s, nil
	}
	s, err := schedule.Parse(spec)
	if err != nil {
		return nil, &leaseapi.InvalidError{Field: "schedule", Rule: fmt.Sprintf("is not a valid schedule: %v", err)}
	}
	parsedSchedules.Lock()
	if len(parsedSchedules.m) >= maxParsedSchedules {
		clear(parsedSchedules.m)
	}
	parsedSchedules.m[spec] = s
	parsedSchedules.Unlock()
	return s, nil
}

// setNextTick sets l.NextTick from its schedule at the store's now. A spec
// the store holds was valid when it was stored.
func setNextTick(l *leaseapi.Lease, now time.Time) {
	if l.Schedule == "" {
		return
	}
	s, err := parseSchedule(l.Schedule)
	if err != nil {
		return
	}
	if next := s.Next(now); !next.IsZero() {
		next = next.UTC()
		l.NextTick = &next
	}
}

// events are what one store call did that the metrics count, told to the
// store's Observer once the call's transaction has committed.
type events struct {
	finished []finishedRun
	skipped  int64
	expired  int64
}

type finishedRun struct {
	outcome leaseapi.Outcome
	d       time.Duration
}

func (e *events) runFinished(outcome leaseapi.Outcome, d time.Duration) {
	e.finished = append(e.finished, finishedRun{outcome, d})
}

// decided records what the sweep decided for one job: each missed tick is
// a finished run, the skipped ones are counted.
func (e *events) decided(d tickDecision) {
	for range d.Missed {
		e.runFinished(leaseapi.OutcomeMissed, 0)
	}
	e.skipped += d.Skipped
}

// emit tells o and forgets what it told.
func (e *events) emit(o leaseapi.Observer) {
	if e == nil {
		return
	}
	for _, f := range e.finished {
		o.RunFinished(f.outcome, f.d)
	}
	if e.skipped > 0 {
		o.TicksSkipped(e.skipped)
	}
	if e.expired > 0 {
		o.LeasesExpired(e.expired)
	}
	*e = events{}
}

// noObserver is the Observer of a store that was given none.
type noObserver struct{}

func (noObserver) RunFinished(leaseapi.Outcome, time.Duration) {}
func (noObserver) TicksSkipped(int64)                          {}
func (noObserver) LeasesExpired(int64)                         {}

func orNoObserver(o leaseapi.Observer) leaseapi.Observer {
	if o == nil {
		return noObserver{}
	}
	return o
}

// validateAcquire is p.Validate and, with a schedule, the schedule's parse.
func validateAcquire(p *leaseapi.AcquireParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Schedule != "" {
		if _, err := parseSchedule(p.Schedule); err != nil {
			return err
		}
	}
	return nil
}
