package checker

import (
	"fmt"
	"strings"
	"testing"
)

// policyDelivery is a verified message of webhook-id id: an event of job
// of type typ decided at due and delivered at due + 5 ms (ms from base).
func policyDelivery(id, job, typ string, due int) PolicyDelivery {
	d := PolicyDelivery{ID: id, Type: typ, Job: job, Due: at(due), At: at(due + 5), Verified: true}
	if typ == EventJobAlerting || typ == EventJobOK {
		d.Reasons = []string{"failures"}
	}
	d.Body = fmt.Sprintf(`{"type":%q,"timestamp":%q,"data":{"jobId":%q,"reasons":["failures"]}}`, typ, d.Due.Format("15:04:05.000"), job)
	return d
}

// legalPolicies: job a alerted (its first attempt refused and retried),
// recovered and alerted again, with a repeat; job b never alerted. Both
// finals agree.
func legalPolicies() *Policies {
	retry := policyDelivery("msg_a1", "a", EventJobAlerting, 100)
	retry.At = at(5200)
	repeat := policyDelivery("msg_a4", "a", EventJobAlerting, 9000)
	repeat.Repeat = true
	return &Policies{
		Jobs: []PolicyJob{{Job: "a", ConsecutiveFailures: 1, RecoveryThreshold: 2, Set: true, Final: "alerting"},
			{Job: "b", ConsecutiveFailures: 2, RecoveryThreshold: 1, Set: true, Final: "ok"}},
		Deliveries: []PolicyDelivery{
			policyDelivery("msg_a1", "a", EventJobAlerting, 100),
			// job.ok reached the receiver before the refused job.alerting's
			// retry: the order judged is the store's.
			policyDelivery("msg_a2", "a", EventJobOK, 3000),
			retry,
			policyDelivery("msg_a3", "a", EventJobAlerting, 7000),
			repeat,
		},
		Refused: 1,
		Drained: true,
	}
}

func checkPoliciesOf(p *Policies) *Report {
	r := &Report{Counts: make(map[string]int)}
	checkPolicies(&History{Policies: p}, r)
	return r
}

func TestPolicyTransitions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(p *Policies)
		// want is part of the violation I14 must report ("" for none).
		want string
	}{
		{name: "legal", change: func(*Policies) {}},
		{name: "a retry with another payload", want: "two different payloads", change: func(p *Policies) {
			p.Deliveries[2].Body = strings.Replace(p.Deliveries[2].Body, "failures", "missed", 1)
		}},
		{name: "one transition written twice", want: "follows another job.alerting", change: func(p *Policies) {
			p.Deliveries = append(p.Deliveries, policyDelivery("msg_a9", "a", EventJobAlerting, 101))
		}},
		{name: "a first transition to ok", want: "a job with a new policy is ok", change: func(p *Policies) {
			p.Deliveries = append(p.Deliveries, policyDelivery("msg_b1", "b", EventJobOK, 50))
		}},
		{name: "a transition lost", want: "follows another job.alerting", change: func(p *Policies) {
			p.Deliveries = append(p.Deliveries[:1], p.Deliveries[2:]...) // job.ok gone
		}},
		{name: "a final status that disagrees", want: "the job is ok once the outbox drained", change: func(p *Policies) {
			p.Jobs[0].Final = "ok"
		}},
		{name: "a final status undrained is not judged", change: func(p *Policies) {
			p.Jobs[0].Final, p.Drained = "ok", false
		}},
		{name: "a repeat while ok", want: "while the job was not alerting", change: func(p *Policies) {
			rep := policyDelivery("msg_b2", "b", EventJobAlerting, 400)
			rep.Repeat = true
			p.Deliveries = append(p.Deliveries, rep)
		}},
		{name: "a signature that does not verify", want: "does not verify", change: func(p *Policies) {
			p.Deliveries[3].Verified = false
		}},
		{name: "a job without a policy", want: "the job has no policy", change: func(p *Policies) {
			p.Deliveries = append(p.Deliveries, policyDelivery("msg_c1", "c", EventJobAlerting, 400))
		}},
		{name: "another event", want: "subscribed", change: func(p *Policies) {
			p.Deliveries = append(p.Deliveries, policyDelivery("msg_a8", "a", EventRunFailed, 400))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := legalPolicies()
			tc.change(p)
			r := checkPoliciesOf(p)
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.String())
			}
			all := strings.Join(got, "\n")
			switch {
			case tc.want == "" && r.Failed():
				t.Errorf("flagged a legal history:\n%s", all)
			case tc.want != "" && (!r.Caught("I14") || !strings.Contains(all, tc.want)):
				t.Errorf("want an I14 violation saying %q, got:\n%s", tc.want, all)
			}
		})
	}
}

// TestPolicyStats: the legal history's counts, each webhook-id once.
func TestPolicyStats(t *testing.T) {
	t.Parallel()
	r := checkPoliciesOf(legalPolicies())
	s := r.Stats
	if s.PolicyTransitions[EventJobAlerting] != 2 || s.PolicyTransitions[EventJobOK] != 1 || s.PolicyRepeats != 1 ||
		s.PolicyEvents != 4 || s.PolicyDeliveries != 5 || s.PolicyFinalJudged != 2 || s.PolicyRefused != 1 {
		t.Errorf("stats %+v: want 2 job.alerting, 1 job.ok, 1 repeat, 4 events in 5 deliveries, 2 finals judged, 1 refused", s)
	}
	if line := describePolicies(s); !strings.Contains(line, "2 job.alerting and 1 job.ok transitions (1 repeats)") {
		t.Errorf("summary %q", line)
	}
}
