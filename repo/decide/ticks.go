package decide

import (
	"sort"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// How the sweep decides the fate of a scheduled job's ticks. Both stores
// read the same facts (Job, the grants around the ticks) and apply the same
// decision (Pass: PlanTicks, then Ticks) to get what they write for each job
// (Outcome); only their SQL differs.

// MaxTicksPerPass bounds the ticks one sweep pass decides for one job, so
// that a per-second job whose replicas were gone for a week is worked off
// over several passes instead of holding its row lock for one long one.
const MaxTicksPerPass = 10_000

// TickSkew is how long before its tick a grant for it may start and still
// be found: a replica whose clock runs ahead asks for a tick early.
const TickSkew = time.Minute

// Job is a due job as the sweep reads it.
type Job struct {
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
	// The rest of the current grant, the job's newest, as the lease row
	// holds it (LeaseGrants): the tick it was for, when it started
	// (acquired_at, its run's start), when it was released or revoked
	// (nil: neither), and what started it.
	Tick         *time.Time
	AcquiredAt   time.Time
	EndedAt      *time.Time
	GrantTrigger leaseapi.Trigger
}

// Grant is a run that had a holder, as the sweep reads it.
type Grant struct {
	Token     int64
	Tick      *time.Time
	StartedAt time.Time
	EndedAt   *time.Time // nil while running
	// Trigger is what started it: a tick of the schedule, or an owed tick
	// (catch-up, manual).
	Trigger leaseapi.Trigger
}

// Plan is the ticks of a job that are due at now, oldest first, and the
// oldest tick left undecided after them (zero when the schedule does not
// fire again).
type Plan struct {
	Due  []time.Time
	Next time.Time
}

// PlanTicks lists the ticks of j whose grace has ended by now.
func PlanTicks(j *Job, s *schedule.Schedule, now time.Time) Plan {
	var t time.Time
	if j.NextTick != nil {
		t = *j.NextTick
	} else {
		t = s.Next(j.Since)
	}
	var p Plan
	for !t.IsZero() && !t.Add(j.Grace).After(now) && len(p.Due) < MaxTicksPerPass {
		p.Due = append(p.Due, t)
		t = s.Next(t)
	}
	p.Next = t
	return p
}

// Decision is what the sweep decided for one job in one pass.
type Decision struct {
	Ran, Paused, Skipped, Missed int64
	// MissedTicks are the missed ticks to record as runs: the newest
	// leaseapi.MaxMissedRunsPerSweep of them.
	MissedTicks []time.Time
	// LastMissedAt is the end of the grace of the newest decided tick when
	// it was missed, nil when it was not.
	LastMissedAt *time.Time
}

// LastMissedTick is the newest decided tick when it was missed (the tick
// a catch-up policy owes), nil when it was not.
func (d Decision) LastMissedTick() *time.Time {
	if d.LastMissedAt == nil {
		return nil
	}
	t := d.MissedTicks[len(d.MissedTicks)-1]
	return &t
}

// Result is d as one job's part of a sweep's result.
func (d Decision) Result() leaseapi.SweepResult {
	return leaseapi.SweepResult{Jobs: 1, Ran: d.Ran, Paused: d.Paused, Skipped: d.Skipped, Missed: d.Missed}
}

// GrantsFrom is where the grants that a decision of p needs begin: TickSkew
// before its oldest due tick. A store reads j's grants that started at or
// after it and the newest one that started before it. Only for a plan with
// due ticks.
func (p Plan) GrantsFrom() time.Time { return p.Due[0].Add(-TickSkew) }

// LeaseGrants returns the grants Decide needs for p's due ticks when j's
// lease row holds them all, and reports whether it does; otherwise a store
// reads them from the run history (p.GrantsFrom). The lease holds the
// job's newest grant, and a job's grants start in token order (each once
// the one before was released, revoked or had expired, by the database
// clock), so:
//   - when that grant started before p.GrantsFrom(), no grant started at
//     or after it, and the newest one that started before it is the
//     lease's own: the read would return exactly that grant;
//   - when exactly one tick is due and the lease's grant is for it, that
//     tick ran, whatever else the history holds.
//
// The lease's grant is its run as the run history holds it (a run that
// the history's pruning deleted included): ended when it was released or
// revoked, else running, held until the lease's ExpiresAt. Both stores
// decide with it and read the grants of the other jobs only: a job that
// ran its one due tick, or whose newest grant is older than the window,
// costs no read of its runs.
func (p Plan) LeaseGrants(j *Job) ([]Grant, bool) {
	if len(p.Due) == 0 || j.Token == 0 {
		return nil, false // nothing to decide, or no lease read
	}
	ranOnlyDue := len(p.Due) == 1 && j.Tick != nil && j.Tick.UnixMilli() == p.Due[0].UnixMilli()
	if !j.AcquiredAt.Before(p.GrantsFrom()) && !ranOnlyDue {
		return nil, false
	}
	return []Grant{{Token: j.Token, Tick: j.Tick, StartedAt: j.AcquiredAt, EndedAt: j.EndedAt, Trigger: j.GrantTrigger}}, true
}

// Pass plans and decides the due jobs of one sweep pass at one instant of
// the store's clock, parsing each spec once however many jobs share it.
type Pass struct {
	now       time.Time
	schedules map[string]*schedule.Schedule
}

// NewPass returns a pass that decides at now.
func NewPass(now time.Time) *Pass {
	return &Pass{now: now, schedules: make(map[string]*schedule.Schedule)}
}

// Plan lists the ticks of j whose grace has ended by the pass's now
// (PlanTicks). A spec that does not parse is an error: the store held it
// as valid.
func (p *Pass) Plan(j *Job) (Plan, error) {
	s, ok := p.schedules[j.Schedule]
	if !ok {
		var err error
		if s, err = ParseStoredSchedule(j.Schedule); err != nil {
			return Plan{}, err
		}
		p.schedules[j.Schedule] = s
	}
	return PlanTicks(j, s, p.now), nil
}

// Outcome is what a pass writes for one job.
type Outcome struct {
	// Decision is the fate of the due ticks (zero without any).
	Decision
	// Decided reports whether the pass decided a tick; then the job's
	// missed_at becomes the Decision's LastMissedAt (nil: the newest
	// decided tick was not missed), else it stays.
	Decided bool
	// Next is the oldest tick left undecided and DecideAt when it is due
	// (Next + grace); both nil when the schedule does not fire again.
	Next, DecideAt *time.Time
	// MissedRuns are the runs to record for Decision.MissedTicks: each
	// tick and its end, tick + grace.
	MissedRuns []MissedRun
}

// MissedRun is a tick recorded as a run with outcome missed.
type MissedRun struct {
	Tick, EndedAt time.Time
	// GroupFull: the job's group had every slot in use at EndedAt
	// (GroupFullAt; set by the store).
	GroupFull bool
}

// Decide decides the due ticks of plan (Ticks) with runs, j's grants from
// plan.GrantsFrom() on and the newest one before, and returns what the
// pass writes for j.
func Decide(j *Job, plan Plan, runs []Grant) Outcome {
	var o Outcome
	if len(plan.Due) > 0 {
		o.Decision, o.Decided = Ticks(j, plan.Due, runs), true
	}
	if !plan.Next.IsZero() {
		next, at := plan.Next, plan.Next.Add(j.Grace)
		o.Next, o.DecideAt = &next, &at
	}
	for _, t := range o.MissedTicks {
		o.MissedRuns = append(o.MissedRuns, MissedRun{Tick: t, EndedAt: t.Add(j.Grace)})
	}
	return o
}

// Ticks decides each due tick of j, oldest first: ran when a grant
// was made for it; else paused when the job was paused by the end of its
// grace; else skipped when an earlier grant was held at the tick, or a
// grant of an owed tick (catch-up, manual) started within its grace (the
// job ran); else missed. runs are j's grants that started in the plan's
// window and the newest one that started before it.
func Ticks(j *Job, due []time.Time, runs []Grant) Decision {
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
	// owedGrantWithin: a grant of an owed tick started in [t, end].
	owedGrantWithin := func(t, end time.Time) bool {
		for i := sort.Search(len(runs), func(i int) bool { return !runs[i].StartedAt.Before(t) }); i < len(runs) && !runs[i].StartedAt.After(end); i++ {
			if runs[i].Trigger != "" && runs[i].Trigger != leaseapi.TriggerSchedule {
				return true
			}
		}
		return false
	}
	var d Decision
	for _, t := range due {
		end := t.Add(j.Grace)
		missed := false
		switch {
		case granted[t.UnixMilli()]:
			d.Ran++
		case j.PausedAt != nil && !j.PausedAt.After(end):
			d.Paused++
		case heldAt(t) || owedGrantWithin(t, end):
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
