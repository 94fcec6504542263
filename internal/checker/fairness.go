package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// I12b, fair delivery: one team's webhook whose receiver hangs costs
// another team's webhook at most one delivery timeout. The run registers
// two webhooks on disjoint scopes: the judged one (Webhook, its receiver
// answers) and a hung one, whose receiver reads every message and never
// answers, so that each attempt at it runs out of time. Two things must
// hold:
//
//   - The hung webhook holds at most one delivery slot across the
//     instances: from the end of its first attempt (once an attempt has
//     timed out) no attempt reaches its receiver while another one is in
//     flight there, and before that at most one per instance.
//   - Every event of the judged webhook that became due while an attempt
//     at the hung receiver was in flight reached its receiver for the
//     first time within FairnessBound of becoming due, unless a fault of
//     the service or the database overlapped that span (or ended less
//     than FairnessRecovery before it).

// FairnessSlack is what the bound adds to one delivery timeout and one
// pass interval: the outbox row's created_at is stamped inside the
// transaction that decides the event, which commits a little later (the
// deliverers see it only then), and the claim statement, the dial and the
// receiver's read of the message take CPU on a machine other processes
// load. A fault-free first attempt on a loaded 2-core machine takes well
// under a second past the pass that claims it; an unfair deliverer makes
// another webhook's events wait for whole timeouts, so a second of slack
// hides no unfairness.
const FairnessSlack = time.Second

// FairnessRecovery is how long after a fault of the service or the
// database ends an event's first attempt is still not judged (the
// instances reconnect, a restarted one starts), as I9's recovery.
const FairnessRecovery = 5 * time.Second

// HungEndObservation is how late the hung receiver may learn that an
// attempt's connection closed: it sees the close when the HTTP server's
// reader of that connection next runs, while the next attempt needs the
// closing instance to report the timeout and claim again (two database
// round trips) before it arrives, so on a machine whose scheduler runs
// goroutines out of order an arrival may precede the recorded end by a
// few milliseconds. Two instances that share the slot overlap by up to a
// whole timeout.
const HungEndObservation = 50 * time.Millisecond

// Fairness is what a run with a hung webhook recorded (I12b).
type Fairness struct {
	// Timeout is the instances' delivery timeout (LEASEAPI_WEBHOOK_TIMEOUT),
	// Interval the deliverer's pass interval, Instances how many leaseapi
	// instances deliver.
	Timeout, Interval time.Duration
	Instances         int
	// HungScopes are the hung webhook's scopes.
	HungScopes []string
	// Hung are the attempts the hung receiver got: when each arrived and
	// when it saw the connection close (zero when it was still open at
	// Ended).
	Hung []Attempt
	// First are the first attempts of the judged webhook's events, one per
	// event (webhook-id): when the event became due (Due: the outbox
	// row's created_at, which the message's timestamp carries) and when
	// the attempt arrived at the receiver (At), refused or not.
	First []Attempt
	// Ended is when the receivers' records were taken.
	Ended time.Time
}

// Attempt is one attempt a receiver got.
type Attempt struct {
	ID  string
	Job string
	Due time.Time
	At  time.Time
	End time.Time
}

// Bound is how soon after becoming due a judged event's first attempt
// must arrive: one delivery timeout, one pass interval and FairnessSlack.
func (f *Fairness) Bound() time.Duration { return f.Timeout + f.Interval + FairnessSlack }

// hungUntil is when the hung attempt a stopped being in flight.
func (f *Fairness) hungUntil(a *Attempt) time.Time {
	if a.End.IsZero() {
		return f.Ended
	}
	return a.End
}

// hungAt reports whether an attempt at the hung receiver was in flight at t.
func (f *Fairness) hungAt(t time.Time) bool {
	return slices.ContainsFunc(f.Hung, func(a Attempt) bool {
		return !t.Before(a.At) && t.Before(f.hungUntil(&a))
	})
}

// deliveryFault reports whether a fault of kind k can delay a delivery:
// every fault but those of the replicas and of their way to the instances.
func deliveryFault(k FaultKind) bool {
	return k != ReplicaPause && k != ReplicaKill && k != APILatency
}

// checkFairness is I12b.
func checkFairness(h *History, r *Report) {
	if h.Webhook == nil || h.Webhook.Fairness == nil {
		return
	}
	w, f := h.Webhook, h.Webhook.Fairness
	s := &r.Stats
	s.FairnessRecorded, s.FairnessBound, s.HungAttempts = true, f.Bound(), len(f.Hung)

	// The hung webhook's one slot.
	hung := slices.Clone(f.Hung)
	sort.SliceStable(hung, func(i, j int) bool { return hung[i].At.Before(hung[j].At) })
	var firstEnd time.Time
	for i := range hung {
		if e := f.hungUntil(&hung[i]); firstEnd.IsZero() || e.Before(firstEnd) {
			firstEnd = e
		}
	}
	for j := range hung {
		b := &hung[j]
		var open []*Attempt
		for i := range hung[:j] {
			if a := &hung[i]; b.At.Before(f.hungUntil(a).Add(-HungEndObservation)) {
				open = append(open, a)
			}
		}
		s.HungMaxInFlight = max(s.HungMaxInFlight, len(open)+1)
		switch {
		case len(open) == 0:
		case !b.At.Before(firstEnd):
			r.add("I12b", b.Job, "the hung webhook's attempt %s arrived at %s while its attempt %s (arrived %s) was still in flight until %s: a webhook whose attempt timed out holds more than one delivery slot across the instances",
				b.ID, fmtTime(b.At), open[0].ID, fmtTime(open[0].At), fmtTime(f.hungUntil(open[0])))
		case len(open)+1 > f.Instances:
			r.add("I12b", b.Job, "the hung webhook's attempt %s arrived at %s with %d others in flight, more than one per instance (%d instances)",
				b.ID, fmtTime(b.At), len(open), f.Instances)
		}
	}

	// The judged webhook's first attempts. An event never attempted counts
	// as arriving at Ended.
	type due struct {
		id, job string
		due, at time.Time
	}
	var events []due
	seen := make(map[string]bool)
	for _, a := range f.First {
		if !seen[a.ID] {
			seen[a.ID] = true
			events = append(events, due{a.ID, a.Job, a.Due, a.At})
		}
	}
	for _, o := range w.Outbox {
		if !seen[o.ID] && w.covers(o.Job) && !o.Created.IsZero() {
			seen[o.ID] = true
			events = append(events, due{id: o.ID, job: o.Job, due: o.Created})
		}
	}
	bound := f.Bound()
	for _, e := range events {
		if !f.hungAt(e.due) {
			continue
		}
		end := e.due.Add(bound)
		if slices.ContainsFunc(h.Faults, func(ft Fault) bool {
			return deliveryFault(ft.Kind) && ft.Start.Before(end) && e.due.Before(ft.End.Add(FairnessRecovery))
		}) {
			s.FairnessFaulted++
			continue
		}
		if e.at.IsZero() {
			if f.Ended.Before(end) {
				continue // not yet late when the records were taken
			}
			r.add("I12b", e.job, "event %s, due at %s while the hung webhook had an attempt in flight, had not reached its receiver when the records were taken at %s (bound %s)",
				e.id, fmtTime(e.due), fmtTime(f.Ended), fmtDur(bound))
			continue
		}
		s.FairnessJudged++
		delay := e.at.Sub(e.due)
		s.FairnessMaxDelay = max(s.FairnessMaxDelay, delay)
		if delay > bound+clockTolerance {
			r.add("I12b", e.job, "event %s, due at %s while the hung webhook had an attempt in flight, first reached its receiver at %s, %s later: more than one delivery timeout, a pass and the slack (%s)",
				e.id, fmtTime(e.due), fmtTime(e.at), fmtDur(delay), fmtDur(bound))
		}
	}
}

// describeFairness is I12b's part of the summary line.
func describeFairness(s Stats) string {
	if !s.FairnessRecorded {
		return ""
	}
	return fmt.Sprintf(" | fair delivery: the hung receiver got %d attempts, at most %d in flight at once; %d events of the other webhook due while it hung judged (first attempt within %s: longest %s), %d not judged (a fault overlapped)",
		s.HungAttempts, s.HungMaxInFlight, s.FairnessJudged, fmtDur(s.FairnessBound), fmtDur(s.FairnessMaxDelay), s.FairnessFaulted)
}
