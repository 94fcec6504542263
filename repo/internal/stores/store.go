package stores

import (
	"context"
	"errors"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// SetNextTick sets l.NextTick from its schedule at the store's now. A spec
// the store holds was valid when it was stored.
func SetNextTick(l *leaseapi.Lease, now time.Time) {
	if l.Schedule == "" {
		return
	}
	s, err := decide.ParseStoredSchedule(l.Schedule)
	if err != nil {
		return
	}
	if next := s.Next(now); !next.IsZero() {
		next = next.UTC()
		l.NextTick = &next
	}
}

// Events are what one store call did that the metrics count, told to the
// store's Observer once the call's transaction has committed.
type Events struct {
	finished []finishedRun
	skipped  int64
	// Expired counts the grants found past their expiresAt unreleased.
	Expired int64
	started []leaseapi.Trigger
}

type finishedRun struct {
	outcome leaseapi.Outcome
	d       time.Duration
}

// RunFinished records a run that ended with outcome after d.
func (e *Events) RunFinished(outcome leaseapi.Outcome, d time.Duration) {
	e.finished = append(e.finished, finishedRun{outcome, d})
}

// RunStarted records a run a grant started for trigger.
func (e *Events) RunStarted(trigger leaseapi.Trigger) { e.started = append(e.started, trigger) }

// Decided records what the sweep decided for one job: each missed tick is
// a finished run, the skipped ones are counted.
func (e *Events) Decided(d decide.Decision) {
	for range d.Missed {
		e.RunFinished(leaseapi.OutcomeMissed, 0)
	}
	e.skipped += d.Skipped
}

// Emit tells o and forgets what it told.
func (e *Events) Emit(o leaseapi.Observer) {
	if e == nil {
		return
	}
	for _, tr := range e.started {
		o.RunStarted(tr)
	}
	for _, f := range e.finished {
		o.RunFinished(f.outcome, f.d)
	}
	if e.skipped > 0 {
		o.TicksSkipped(e.skipped)
	}
	if e.Expired > 0 {
		o.LeasesExpired(e.Expired)
	}
	*e = Events{}
}

// noObserver is the Observer of a store that was given none.
type noObserver struct{}

func (noObserver) RunFinished(leaseapi.Outcome, time.Duration) {}
func (noObserver) TicksSkipped(int64)                          {}
func (noObserver) LeasesExpired(int64)                         {}
func (noObserver) RunStarted(leaseapi.Trigger)                 {}

// OrNoObserver is o, or an Observer that tells nobody when o is nil.
func OrNoObserver(o leaseapi.Observer) leaseapi.Observer {
	if o == nil {
		return noObserver{}
	}
	return o
}

// ValidateAcquire is p.Validate and, with a schedule, the schedule's parse.
func ValidateAcquire(p *leaseapi.AcquireParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Schedule != "" {
		if _, err := decide.ParseSchedule(p.Schedule); err != nil {
			return err
		}
	}
	return nil
}

// SetOwed sets what l owes from its row: tick and reason while the debt is
// claimable at now (until after now, as OwedAt says), else nothing. A debt
// past its claimable time is no longer owed, so the lease shows none, and
// an acquire decided on the lease (decide.Claim, decide.ClaimedTick)
// cannot claim it, until the sweep clears it.
func SetOwed(l *leaseapi.Lease, tick *time.Time, reason string, until *time.Time, now time.Time) {
	if tick != nil && until != nil && until.After(now) {
		l.OwedTick, l.OwedReason = tick, leaseapi.Trigger(reason)
	}
}

// MaxTickAhead is the lead a store allows a tick on its clock, given the
// configured d: d, or leaseapi.DefaultMaxTickAhead when d is not positive.
func MaxTickAhead(d time.Duration) time.Duration {
	if d <= 0 {
		return leaseapi.DefaultMaxTickAhead
	}
	return d
}

// ManualAhead marks err, decide.Ahead's refusal of a trigger's manual
// tick (or nil), as a manual tick's, for the detail of its answer.
func ManualAhead(err error) error {
	if ahead, ok := errors.AsType[*leaseapi.TickAheadError](err); ok {
		ahead.Manual = true
	}
	return err
}

// Each answers the calls ps of a batch one after the other with call:
// the batch of a store that has no round trips to save.
func Each[P any](ctx context.Context, ps []*P, call func(context.Context, *P) (leaseapi.Lease, error)) []leaseapi.Answer {
	out := make([]leaseapi.Answer, len(ps))
	for i, p := range ps {
		out[i].Lease, out[i].Err = call(ctx, p)
	}
	return out
}
