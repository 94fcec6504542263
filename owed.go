package leaseapi

import (
	"time"
)

// Owed ticks: the domain of catch-up and run now. A job may owe one tick
// at a time, to be run once by whichever replica claims it with an
// ordinary acquire of that tick:
//
//   - a catch-up tick: with CatchUpLatest, the latest decided tick of a
//     job that is overdue (its latest decided tick was missed and it has
//     not run since), while that tick lies within the job's catch-up
//     window. Any grant after the miss settles it, so it is owed at most
//     once, however many ticks were missed.
//   - a manual tick: an administrator's trigger (TriggerParams), claimable
//     for the longer of the job's grace and the trigger grace, after which
//     it is recorded as a missed run with trigger manual and is not owed
//     again.
//
// These types are the parameters and their rules; the stores and the HTTP
// routes that use them are built on them.

// CatchUp is a job's catch-up policy: what it owes after a missed tick.
type CatchUp string

// The catch-up policies.
const (
	// CatchUpNone: a missed tick is recorded and owes nothing (the default).
	CatchUpNone CatchUp = "none"
	// CatchUpLatest: a job whose latest decided tick was missed owes that
	// tick once while it is within the catch-up window.
	CatchUpLatest CatchUp = "latest"
)

// Valid reports whether c is one of the catch-up policies.
func (c CatchUp) Valid() bool { return c == CatchUpNone || c == CatchUpLatest }

// The bounds and the default of the catch-up window: how old a missed tick
// may be and still be owed.
const (
	MinCatchUpWindow     = time.Minute
	MaxCatchUpWindow     = 7 * 24 * time.Hour
	DefaultCatchUpWindow = 24 * time.Hour
)

// ValidateCatchUp checks a catch-up policy and window as an acquire sends
// them: "" (keep the stored policy) or a valid policy, and a window of
// zero (the default) or from MinCatchUpWindow to MaxCatchUpWindow.
func ValidateCatchUp(c CatchUp, window time.Duration) error {
	if c != "" && !c.Valid() {
		return &InvalidError{Field: "catchUp", Rule: `must be "none" or "latest"`}
	}
	if window != 0 && (window < MinCatchUpWindow || window > MaxCatchUpWindow) {
		return &InvalidError{Field: "catchUpWindowMs", Rule: "must be an integer from 60000 to 604800000 (milliseconds)"}
	}
	return nil
}

// Trigger is what started a run.
type Trigger string

// The triggers of a run.
const (
	// TriggerSchedule: a tick of the schedule, or a job without one.
	TriggerSchedule Trigger = "schedule"
	// TriggerCatchUp: the tick a job owed under CatchUpLatest.
	TriggerCatchUp Trigger = "catch-up"
	// TriggerManual: the tick an administrator's trigger owed.
	TriggerManual Trigger = "manual"
)

// Valid reports whether t is one of the triggers of a run.
func (t Trigger) Valid() bool {
	return t == TriggerSchedule || t == TriggerCatchUp || t == TriggerManual
}

// DefaultTriggerGrace is how long a manual tick stays claimable when the
// job's grace is shorter and the instance configures nothing else.
const DefaultTriggerGrace = 5 * time.Minute

// MaxIdempotencyKeyLength is the longest Idempotency-Key a trigger may
// carry, in bytes.
const MaxIdempotencyKeyLength = 256

// TriggerParams are the inputs of a manual trigger: the job owes one
// manual tick, the greatest of the store's clock, its last completed tick
// + 1 ms and its current tick + 1 ms, at millisecond precision.
type TriggerParams struct {
	JobID string
	// By names who triggers (a credential's name), or "" when the API is
	// open; set by the service.
	By string
	// Reason says why, at most MaxReasonLength characters, or "".
	Reason string
	// Key is the request's Idempotency-Key, or "": a trigger with the key
	// of the job's last manual tick answers that tick, whatever became of
	// it.
	Key string
	// Grace is the instance's trigger grace: the manual tick is claimable
	// for the longer of it and the job's grace. At least a millisecond.
	Grace time.Duration
}

// Validate checks p against the domain: a valid job id, a reason as a
// pause takes it, a key of 1 to MaxIdempotencyKeyLength printable ASCII
// characters (or none), and a positive grace.
func (p *TriggerParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	if err := validateReason(p.Reason); err != nil {
		return err
	}
	if len(p.Key) > MaxIdempotencyKeyLength {
		return &InvalidError{Field: "Idempotency-Key", Rule: "must be at most 256 printable ASCII characters"}
	}
	for i := 0; i < len(p.Key); i++ {
		if c := p.Key[i]; c < 0x20 || c > 0x7E {
			return &InvalidError{Field: "Idempotency-Key", Rule: "must be at most 256 printable ASCII characters"}
		}
	}
	if p.Grace < time.Millisecond {
		return &InvalidError{Field: "grace", Rule: "must be at least a millisecond"}
	}
	return nil
}

// MaxOwedJobs is the most job ids one owed query may name.
const MaxOwedJobs = 1000

// OwedParams name the jobs whose owed ticks a replica asks for.
type OwedParams struct {
	// JobIDs are 1 to MaxOwedJobs valid job ids; repeats are allowed and
	// answered once.
	JobIDs []string
}

// Validate checks p against the domain: 1 to MaxOwedJobs ids, each a
// valid job id.
func (p *OwedParams) Validate() error {
	if len(p.JobIDs) < 1 || len(p.JobIDs) > MaxOwedJobs {
		return &InvalidError{Field: "jobs", Rule: "must name 1 to 1000 job ids"}
	}
	for _, id := range p.JobIDs {
		if !ValidJobID(id) {
			return &InvalidError{Field: "jobs", Rule: "each " + jobIDRule}
		}
	}
	return nil
}

// Owed is one tick a job owes.
type Owed struct {
	JobID string
	Tick  time.Time
	// Reason is TriggerCatchUp or TriggerManual.
	Reason Trigger
	// TriggeredBy and TriggerReason are a manual tick's trigger's (either
	// may be ""); "" for a catch-up tick.
	TriggeredBy   string
	TriggerReason string
}

// ManualTick is the tick a trigger at now owes a job whose last completed
// tick and current tick are lastCompleted and current (nil when none): the
// greatest of now, lastCompleted + 1 ms and current + 1 ms, truncated to
// the millisecond first, so that it is a tick the stores keep exactly and
// that no earlier grant or completed tick shadows.
func ManualTick(now time.Time, lastCompleted, current *time.Time) time.Time {
	m := now.UTC().Truncate(time.Millisecond)
	for _, t := range []*time.Time{lastCompleted, current} {
		if t == nil {
			continue
		}
		if next := t.UTC().Truncate(time.Millisecond).Add(time.Millisecond); next.After(m) {
			m = next
		}
	}
	return m
}

// ManualTickGrace is how long a manual tick stays claimable: the longer of
// the job's grace (zero without a schedule) and the trigger grace.
func ManualTickGrace(jobGrace, triggerGrace time.Duration) time.Duration {
	return max(jobGrace, triggerGrace)
}
