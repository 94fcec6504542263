package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// I14, alert policies: some jobs of the run have a policy, and a webhook
// subscribed to job.alerting and job.ok tells its receiver each change of
// their status. Per job with a policy:
//
//   - Every message verifies with the webhook's secret, is a job.alerting
//     or a job.ok of a job with a policy, and one webhook-id is always
//     delivered with one body (a retry repeats its event, never another).
//   - Each webhook-id is one transition, counted once however often it was
//     delivered. In the order the store decided them (the body's
//     timestamp, the outbox row's created_at, stamped under the policy's
//     row lock), the transitions alternate: job.alerting, job.ok,
//     job.alerting, ... starting with job.alerting, since a job with a
//     new policy is ok. A repeat (a job.alerting with repeat set) is not a
//     transition and comes only while the job is alerting.
//   - Once the workload stopped and the webhook's outbox drained, the last
//     transition delivered agrees with the job's status (GET policy):
//     alerting after a job.alerting, ok after a job.ok or none.

// The policy events I14 is about.
const (
	EventJobAlerting = "job.alerting"
	EventJobOK       = "job.ok"
)

// PolicyEvents are the events the policy webhook subscribes to.
var PolicyEvents = []string{EventJobAlerting, EventJobOK}

// Policies is what a run with alert policies recorded (I14).
type Policies struct {
	// Jobs are the jobs with a policy.
	Jobs []PolicyJob
	// Deliveries are every message the policy webhook's receiver got,
	// retries and refused first attempts included.
	Deliveries []PolicyDelivery
	// Refused counts the first attempts the receiver refused on purpose
	// (503), so that retries are exercised.
	Refused int
	// Drained reports that, after the workload stopped, the webhook's
	// outbox was empty and stayed so while the harness read every job's
	// final status: only then is the final status judged.
	Drained bool
	// Waited is how long the harness waited for the outbox to drain.
	Waited time.Duration
}

// PolicyJob is a job with a policy and its status once the outbox drained.
type PolicyJob struct {
	Job                 string
	ConsecutiveFailures int
	RecoveryThreshold   int
	// Set reports whether the harness's PUT policy was answered 200.
	Set bool
	// Final is the job's status (ok, alerting) read with GET policy after
	// the outbox drained; "" when it could not be read.
	Final string
}

// PolicyDelivery is one message the policy webhook's receiver got.
type PolicyDelivery struct {
	// ID is the webhook-id header.
	ID string
	// Type, Job, Reasons and Repeat are the body's.
	Type    string
	Job     string
	Reasons []string
	Repeat  bool
	// Due is the body's timestamp: when the store decided the event.
	Due time.Time
	// At is when the receiver got it.
	At time.Time
	// Body is the body as delivered: every attempt of one webhook-id
	// carries the same.
	Body string
	// Verified reports whether the signature matched the secret; Err says
	// why the body could not be read as a policy event ("" when it could).
	Verified bool
	Err      string
}

// policyTransition is one event (webhook-id) of a job, as first delivered.
type policyTransition struct {
	PolicyDelivery
	attempts int
}

// checkPolicies is I14.
func checkPolicies(h *History, r *Report) {
	p := h.Policies
	if p == nil {
		return
	}
	s := &r.Stats
	s.PoliciesRecorded = true
	s.PolicyJobs = len(p.Jobs)
	s.PolicyDeliveries = len(p.Deliveries)
	s.PolicyRefused = p.Refused
	s.PolicyWaited = p.Waited
	s.PolicyTransitions = make(map[string]int)
	jobs := make(map[string]*PolicyJob, len(p.Jobs))
	for i := range p.Jobs {
		jobs[p.Jobs[i].Job] = &p.Jobs[i]
		if p.Jobs[i].Set {
			s.PolicyJobsSet++
		}
	}

	// One body per webhook-id; every message a verified event of a job
	// with a policy.
	byID := make(map[string]*policyTransition)
	perJob := make(map[string][]*policyTransition)
	for _, d := range p.Deliveries {
		switch {
		case !d.Verified:
			r.add("I14", d.Job, "webhook-id %s (%s) at %s: the signature does not verify with the webhook's secret", d.ID, d.Type, fmtTime(d.At))
			continue
		case d.Err != "":
			r.add("I14", d.Job, "webhook-id %s at %s: %s", d.ID, fmtTime(d.At), d.Err)
			continue
		case !slices.Contains(PolicyEvents, d.Type):
			r.add("I14", d.Job, "webhook-id %s at %s: type %q, the webhook subscribed %v only", d.ID, fmtTime(d.At), d.Type, PolicyEvents)
			continue
		case jobs[d.Job] == nil:
			r.add("I14", d.Job, "webhook-id %s (%s) at %s: the job has no policy", d.ID, d.Type, fmtTime(d.At))
			continue
		}
		if t, ok := byID[d.ID]; ok {
			t.attempts++
			if d.Body != t.Body {
				r.add("I14", d.Job, "webhook-id %s delivered with two different payloads: %s at %s and %s at %s",
					d.ID, t.Body, fmtTime(t.At), d.Body, fmtTime(d.At))
			}
			continue
		}
		t := &policyTransition{PolicyDelivery: d, attempts: 1}
		byID[d.ID] = t
		perJob[d.Job] = append(perJob[d.Job], t)
		if d.Type == EventJobAlerting && len(d.Reasons) == 0 {
			r.add("I14", d.Job, "webhook-id %s: job.alerting without a reason", d.ID)
		}
	}
	s.PolicyEvents = len(byID)

	for _, j := range p.Jobs {
		ts := perJob[j.Job]
		// The order the store decided them in: created_at, stamped under
		// the policy's row lock, increases with every decision of a job.
		sort.SliceStable(ts, func(a, b int) bool { return ts[a].Due.Before(ts[b].Due) })
		last := EventJobOK // a new policy starts ok
		var seq []string
		for _, t := range ts {
			seq = append(seq, fmt.Sprintf("%s %s@%s", t.ID, t.Type, fmtTime(t.Due)))
			if t.Repeat {
				s.PolicyRepeats++
				if t.Type != EventJobAlerting || last != EventJobAlerting {
					r.add("I14", j.Job, "webhook-id %s: a repeated %s decided at %s while the job was not alerting (transitions %s)",
						t.ID, t.Type, fmtTime(t.Due), strings.Join(seq, ", "))
				}
				continue
			}
			s.PolicyTransitions[t.Type]++
			switch {
			case t.Type == last && len(seq) == 1:
				r.add("I14", j.Job, "webhook-id %s: the first transition, decided at %s, is %s, but a job with a new policy is ok", t.ID, fmtTime(t.Due), t.Type)
			case t.Type == last:
				r.add("I14", j.Job, "webhook-id %s: %s decided at %s follows another %s: the transitions do not alternate (%s)",
					t.ID, t.Type, fmtTime(t.Due), last, strings.Join(seq, ", "))
			}
			last = t.Type
		}
		if !p.Drained || j.Final == "" {
			continue
		}
		s.PolicyFinalJudged++
		want := "ok"
		if last == EventJobAlerting {
			want = "alerting"
		}
		if j.Final != want {
			r.add("I14", j.Job, "the job is %s once the outbox drained, but the last transition delivered says %s (transitions %s)",
				j.Final, want, strings.Join(seq, ", "))
		}
	}
}

// describePolicies is the summary's part about I14.
func describePolicies(s Stats) string {
	if !s.PoliciesRecorded {
		return ""
	}
	return fmt.Sprintf(" | policies: %d jobs (%d set); %d job.alerting and %d job.ok transitions (%d repeats) in %d deliveries of %d events, %d first attempts refused; the outbox drained in %s, %d final statuses judged",
		s.PolicyJobs, s.PolicyJobsSet, s.PolicyTransitions[EventJobAlerting], s.PolicyTransitions[EventJobOK], s.PolicyRepeats,
		s.PolicyDeliveries, s.PolicyEvents, s.PolicyRefused, fmtDur(s.PolicyWaited), s.PolicyFinalJudged)
}
