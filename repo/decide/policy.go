package decide

import (
	"slices"
	"time"

	"github.com/leaseapi/leaseapi"
)

// PolicyFacts are what a store read to decide a job's policy: the job's
// newest runs and its lease, at one instant of its clock.
type PolicyFacts struct {
	// Runs are the newest runs of the job, newest first in the order of
	// the run history (start, or tick for a missed run), at most the
	// policy's Window.
	Runs []leaseapi.Run
	// Lease is the job's lease: a running run whose grant it shows expired
	// counts as expired.
	Lease leaseapi.Lease
	Now   time.Time
}

// PolicyEvent is a change the decision tells: job.alerting (also each
// repeat) or job.ok.
type PolicyEvent struct {
	// Type is "job.alerting" or "job.ok".
	Type string
	// Reasons are the state's reasons (for job.ok, those it recovers from).
	Reasons []leaseapi.AlertReason
	// Repeat marks a job.alerting told again after RealertAfter.
	Repeat bool
	// Run is the index in PolicyFacts.Runs of the run that caused it: the
	// newest run counted; -1 for none.
	Run int
}

// The events of a policy.
const (
	EventJobAlerting = "job.alerting"
	EventJobOK       = "job.ok"
)

// policyView is the history as a policy reads it.
type policyView struct {
	failures     int           // failed or expired runs in a row, newest first (missed skipped)
	missed       int           // missed ticks in a row, newest first
	successes    int           // clean successes in a row, newest first
	rate         bool          // the failure rate holds
	exceeded     bool          // the newest run with a holder ran past MaxRuntime
	tooShort     bool          // the newest finished run succeeded under MinRuntime
	newest       int           // the index of the newest run counted, -1 for none
	openExceeded *leaseapi.Run // the open run (held or expired unclosed) past MaxRuntime
}

// outcomeAt is r's outcome as a policy counts it at the facts' instant: a
// running run whose grant expired (the lease shows it) counts as expired.
func outcomeAt(r *leaseapi.Run, l *leaseapi.Lease) leaseapi.Outcome {
	if r.Outcome == leaseapi.OutcomeRunning && l.Token == r.Token && l.State == leaseapi.StateExpired {
		return leaseapi.OutcomeExpired
	}
	return r.Outcome
}

// runtimeOf is how long r ran, or has run at now while running.
func runtimeOf(r *leaseapi.Run, l *leaseapi.Lease, now time.Time) time.Duration {
	if r.StartedAt == nil {
		return 0
	}
	end := now
	switch {
	case r.EndedAt != nil:
		end = *r.EndedAt
	case l.Token == r.Token && l.ExpiresAt.Before(now):
		end = l.ExpiresAt
	}
	return end.Sub(*r.StartedAt)
}

// view reads the facts as p counts them.
func view(p *leaseapi.AlertPolicy, f *PolicyFacts) policyView {
	v := policyView{newest: -1}
	failuresDone, missedDone, successesDone := false, false, false
	rateRuns, rateFailed := 0, 0
	holderSeen, finishedSeen := false, false
	for i := range f.Runs {
		r := &f.Runs[i]
		o := outcomeAt(r, &f.Lease)
		if o == leaseapi.OutcomeRevoked || o == leaseapi.OutcomeDiscarded {
			continue
		}
		if v.newest < 0 {
			v.newest = i
		}
		d := runtimeOf(r, &f.Lease, f.Now)
		if r.Outcome == leaseapi.OutcomeRunning && !holderSeen && p.MaxRuntime > 0 && d > p.MaxRuntime {
			v.openExceeded = r
		}
		if o == leaseapi.OutcomeRunning {
			if !holderSeen && p.MaxRuntime > 0 && d > p.MaxRuntime {
				v.exceeded = true
			}
			holderSeen = true
			missedDone = true
			continue // neither a success nor a failure yet
		}
		failed := o == leaseapi.OutcomeFailed || o == leaseapi.OutcomeExpired
		clean := o == leaseapi.OutcomeSucceeded && (p.MinRuntime == 0 || d >= p.MinRuntime) && (p.MaxRuntime == 0 || d <= p.MaxRuntime)
		if o == leaseapi.OutcomeMissed {
			if !missedDone {
				v.missed++
			}
			successesDone = true
			continue
		}
		// A finished run with a holder.
		missedDone = true
		if !holderSeen {
			holderSeen = true
			v.exceeded = p.MaxRuntime > 0 && d > p.MaxRuntime
		}
		if !finishedSeen {
			finishedSeen = true
			v.tooShort = o == leaseapi.OutcomeSucceeded && p.MinRuntime > 0 && d < p.MinRuntime
		}
		if !failuresDone {
			if failed {
				v.failures++
			} else {
				failuresDone = true
			}
		}
		if !successesDone {
			if clean {
				v.successes++
			} else {
				successesDone = true
			}
		}
		if p.FailureRate != nil && rateRuns < p.FailureRate.Runs {
			rateRuns++
			if failed {
				rateFailed++
			}
		}
	}
	if r := p.FailureRate; r != nil && rateRuns == r.Runs {
		// The share, not Threshold×Runs: 0.28×25 is 7.000000000000001 in
		// floating point, while 7/25 rounds to the same double as 0.28.
		v.rate = float64(rateFailed)/float64(r.Runs) >= r.Threshold
	}
	return v
}

// Reasons are the conditions of p that hold on the facts, in the order of
// leaseapi.AlertReasons.
func (v *policyView) reasons(p *leaseapi.AlertPolicy) []leaseapi.AlertReason {
	var out []leaseapi.AlertReason
	if p.ConsecutiveFailures > 0 && v.failures >= p.ConsecutiveFailures {
		out = append(out, leaseapi.ReasonFailures)
	}
	if v.rate {
		out = append(out, leaseapi.ReasonFailureRate)
	}
	if v.exceeded {
		out = append(out, leaseapi.ReasonRuntimeExceeded)
	}
	if v.tooShort {
		out = append(out, leaseapi.ReasonRuntimeTooShort)
	}
	if p.MissedTicks > 0 && v.missed >= p.MissedTicks {
		out = append(out, leaseapi.ReasonMissed)
	}
	return out
}

// PolicyDecision is what EvaluatePolicy decided.
type PolicyDecision struct {
	State leaseapi.PolicyState
	// Event is the change to tell, or nil.
	Event *PolicyEvent
	// RealertAt is when a repeat is due (nil when none will be).
	RealertAt *time.Time
	// ExceededToken is the token of the grant whose run is still open
	// and past MaxRuntime (0 for none): a store looks for such runs
	// (ones held past MaxRuntime) and decides each grant once.
	ExceededToken int64
}

// EvaluatePolicy decides the policy p of a job in state s on the facts f,
// the one rule of alert policies:
//
//   - The conditions that hold are read off the newest history (view):
//     failed or expired runs in a row (missed ticks skipped), the failure
//     rate of the newest FailureRate.Runs finished runs with a holder
//     (nothing decided with fewer), the newest run with a holder past
//     MaxRuntime (a held one too), the newest finished run a success under
//     MinRuntime, missed ticks in a row. Revoked and discarded runs are
//     passed over; a running run is neither a success nor a failure.
//   - An ok job with a condition holding becomes alerting with those
//     reasons (job.alerting).
//   - An alerting job adds the reasons that hold to its own, and becomes
//     ok (job.ok) when none holds and its newest RecoveryThreshold
//     finished runs with a holder are successes within MinRuntime and
//     MaxRuntime with no missed tick between them.
//   - An alerting job tells job.alerting again once RealertAfter has passed
//     since it last did.
//
// It is a function of the history, not of the runs seen one by one, so
// deciding again on the same facts changes nothing: a store may decide a
// job more than once (a crash between a release and its decision, a sweep
// and a release at once) and tells each change once.
func EvaluatePolicy(p *leaseapi.AlertPolicy, s leaseapi.PolicyState, f *PolicyFacts) PolicyDecision {
	v := view(p, f)
	holds := v.reasons(p)
	next := s
	next.Reasons = slices.Clone(s.Reasons)
	var ev *PolicyEvent
	switch {
	case s.Status != leaseapi.AlertAlerting && len(holds) > 0:
		at := f.Now
		next = leaseapi.PolicyState{Status: leaseapi.AlertAlerting, Reasons: holds, Since: f.Now, AlertedAt: &at}
		ev = &PolicyEvent{Type: EventJobAlerting, Reasons: holds, Run: v.newest}
	case s.Status == leaseapi.AlertAlerting && len(holds) == 0 && v.successes >= p.Recovery():
		next = leaseapi.PolicyState{Status: leaseapi.AlertOK, Since: f.Now}
		ev = &PolicyEvent{Type: EventJobOK, Reasons: s.Reasons, Run: v.newest}
	case s.Status == leaseapi.AlertAlerting:
		next.Reasons = unionReasons(s.Reasons, holds)
		if p.RealertAfter > 0 && (s.AlertedAt == nil || !f.Now.Before(s.AlertedAt.Add(p.RealertAfter))) {
			at := f.Now
			next.AlertedAt = &at
			ev = &PolicyEvent{Type: EventJobAlerting, Reasons: next.Reasons, Repeat: true, Run: v.newest}
		}
	default:
		next.Status = leaseapi.AlertOK
	}
	d := PolicyDecision{State: next, Event: ev}
	if next.Status == leaseapi.AlertAlerting && p.RealertAfter > 0 && next.AlertedAt != nil {
		at := next.AlertedAt.Add(p.RealertAfter)
		d.RealertAt = &at
	}
	if v.openExceeded != nil {
		d.ExceededToken = v.openExceeded.Token
	}
	return d
}

// unionReasons is a ∪ b in the order of leaseapi.AlertReasons.
func unionReasons(a, b []leaseapi.AlertReason) []leaseapi.AlertReason {
	var out []leaseapi.AlertReason
	for _, r := range leaseapi.AlertReasons {
		if slices.Contains(a, r) || slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}
