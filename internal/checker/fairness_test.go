package checker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// fairHistory is the webhook history with a second, hung webhook (scope
// "a.") beside the judged one (scope "j"), on two instances, with a 2 s
// delivery timeout and a 1 s pass: a bound of 4 s. The hung receiver got
// two attempts at once before any had ended (one per instance), then one
// at a time; the fifth arrived 10 ms before the receiver saw the fourth
// close (within HungEndObservation), the sixth was still open when the
// records were taken. Every first attempt of the judged webhook arrived
// within the bound, msg_4's after 3.3 s.
func fairHistory() *History {
	h := webhookHistory()
	w := h.Webhook
	w.Scopes = []string{"j"}
	w.Outbox[0].Created = at(15600)
	w.Fairness = &Fairness{
		Timeout: 2 * time.Second, Interval: time.Second, Instances: 2, HungScopes: []string{"a."},
		Hung: []Attempt{
			{ID: "msg_a1", Job: "a.x", At: at(5000), End: at(7000)},
			{ID: "msg_a2", Job: "a.x", At: at(5500), End: at(7500)},
			{ID: "msg_a3", Job: "a.x", At: at(7600), End: at(9600)},
			{ID: "msg_a4", Job: "a.x", At: at(9650), End: at(11650)},
			{ID: "msg_a5", Job: "a.x", At: at(11640), End: at(13640)},
			{ID: "msg_a6", Job: "a.x", At: at(14000)},
		},
		First: []Attempt{
			{ID: "msg_1", Job: "j", Due: at(7000), At: at(7050)},
			{ID: "msg_2", Job: "j", Due: at(9000), At: at(9100)},
			{ID: "msg_3", Job: "j", Due: at(10490), At: at(10510)},
			{ID: "msg_4", Job: "j", Due: at(12000), At: at(15300)},
			{ID: "msg_5", Job: "j", Due: at(15600), At: at(15610)},
			{ID: "msg_6", Job: "j", Due: at(19000), At: at(19200)},
		},
		Ended: at(25000),
	}
	return h
}

func TestFairDeliveryPasses(t *testing.T) {
	t.Parallel()
	r := check(t, fairHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	s := r.Stats
	if got, want := [4]int{s.HungAttempts, s.HungMaxInFlight, s.FairnessJudged, s.FairnessFaulted}, [4]int{6, 2, 6, 0}; got != want {
		t.Errorf("hung attempts, most in flight, judged, not judged: got %v, want %v", got, want)
	}
	if s.FairnessMaxDelay != 3300*time.Millisecond || s.FairnessBound != 4*time.Second {
		t.Errorf("longest first attempt %s, bound %s; want 3.3s and 4s", s.FairnessMaxDelay, s.FairnessBound)
	}
	line := r.SummaryLine()
	for _, want := range []string{
		"fair delivery: the hung receiver got 6 attempts, at most 2 in flight at once; 6 events of the other webhook due while it hung judged (first attempt within 4.00s: longest 3.30s), 0 not judged",
		"I12b=0",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
	if r := check(t, webhookHistory()); r.Stats.FairnessRecorded || strings.Contains(r.SummaryLine(), "fair delivery") {
		t.Errorf("a history without a hung webhook: summary %q; want no fair delivery part", r.SummaryLine())
	}
}

// TestUnfairDeliveryIsCaught: each change makes the hung webhook hold a
// second slot or delays an event of the other webhook past the bound,
// which I12b must flag; the controls must pass.
func TestUnfairDeliveryIsCaught(t *testing.T) {
	t.Parallel()
	first := func(f *Fairness, id string) *Attempt {
		return &f.First[slices.IndexFunc(f.First, func(a Attempt) bool { return a.ID == id })]
	}
	tests := []struct {
		name   string
		mutate func(h *History, f *Fairness)
		want   string // a part of a violation, "" for a legal variant
	}{
		{"HungHoldsTwoSlots", func(_ *History, f *Fairness) { f.Hung[3].At = at(9000) },
			"the hung webhook's attempt msg_a4 arrived at 07:00:09.000 while its attempt msg_a3 (arrived 07:00:07.600) was still in flight until 07:00:09.600"},
		{"HungSecondSlotWhileStillOpen", func(_ *History, f *Fairness) {
			f.Hung = append(f.Hung, Attempt{ID: "msg_a7", Job: "a.x", At: at(20000), End: at(22000)})
		}, "attempt msg_a7 arrived at 07:00:20.000 while its attempt msg_a6 (arrived 07:00:14.000) was still in flight until 07:00:25.000"},
		{"HungMoreThanOnePerInstance", func(_ *History, f *Fairness) {
			f.Hung = append(f.Hung, Attempt{ID: "msg_a0", Job: "a.x", At: at(6000), End: at(7400)})
		}, "the hung webhook's attempt msg_a0 arrived at 07:00:06.000 with 2 others in flight, more than one per instance (2 instances)"},
		{"FirstAttemptLate", func(_ *History, f *Fairness) { first(f, "msg_4").At = at(16100) },
			"event msg_4, due at 07:00:12.000 while the hung webhook had an attempt in flight, first reached its receiver at 07:00:16.100, 4.10s later"},
		{"NeverAttempted", func(h *History, f *Fairness) {
			h.Webhook.Outbox = append(h.Webhook.Outbox, OutboxEvent{ID: "msg_7", Type: EventRunFailed, Job: "j", Created: at(16000), Left: true})
		}, "event msg_7, due at 07:00:16.000 while the hung webhook had an attempt in flight, had not reached its receiver when the records were taken at 07:00:25.000"},
		{"ReplicaFaultExcusesNothing", func(h *History, f *Fairness) {
			first(f, "msg_4").At = at(16100)
			h.Faults = append(h.Faults, Fault{Kind: ReplicaKill, Target: "r1#1", Instance: -1, Start: at(13000), End: at(14000)})
		}, "event msg_4, due at 07:00:12.000"},
		// Controls: a late event during a fault of the database, one
		// that a fault's recovery overlapped, one due while nothing hung,
		// one not yet late when the records were taken, another team's
		// event in the outbox, and an arrival just before the recorded
		// end of the attempt before it.
		{"LateDuringADatabaseFault", func(h *History, f *Fairness) {
			first(f, "msg_4").At = at(16100)
			h.Faults = append(h.Faults, Fault{Kind: DBBlackhole, Instance: 0, Start: at(13000), End: at(16000)})
		}, ""},
		{"LateAfterAnInstanceKill", func(h *History, f *Fairness) {
			first(f, "msg_4").At = at(16100)
			h.Faults = append(h.Faults, Fault{Kind: InstanceKill, Instance: 1, Start: at(3000), End: at(8000)})
		}, ""},
		{"LateWhileNothingHung", func(_ *History, f *Fairness) {
			f.First = append(f.First, Attempt{ID: "msg_8", Job: "j", Due: at(4000), At: at(9000)})
		}, ""},
		{"NotYetLate", func(h *History, _ *Fairness) {
			h.Webhook.Outbox = append(h.Webhook.Outbox, OutboxEvent{ID: "msg_7", Type: EventRunFailed, Job: "j", Created: at(22000), Left: true})
		}, ""},
		{"AnotherTeamsEventInTheOutbox", func(h *History, _ *Fairness) {
			h.Webhook.Outbox = append(h.Webhook.Outbox, OutboxEvent{ID: "msg_a9", Type: EventRunFailed, Job: "a.x", Created: at(16000), Left: true})
		}, ""},
		{"ArrivalAtTheRecordedEnd", func(_ *History, f *Fairness) { f.Hung[3].At = f.Hung[2].End }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := fairHistory()
			tt.mutate(h, h.Webhook.Fairness)
			r := check(t, h)
			if tt.want == "" {
				for _, v := range r.Violations {
					t.Errorf("violation in a legal variant: %s", v)
				}
				return
			}
			found := false
			for _, v := range r.Violations {
				if v.Invariant != "I12b" {
					t.Errorf("only I12b should be flagged, got %s", v)
				}
				found = found || strings.Contains(v.Detail, tt.want)
			}
			if !found {
				t.Errorf("no I12b violation says %q: %v", tt.want, r.Violations)
			}
		})
	}
}

// TestWebhookScopes: a webhook owes only the events of the jobs in its
// scopes, and a delivery about another job is flagged (I12).
func TestWebhookScopes(t *testing.T) {
	t.Parallel()
	h := webhookHistory()
	h.Webhook.Scopes = []string{"j"}
	if r := check(t, h); r.Failed() {
		t.Errorf("every job in scope: violations %v", r.Violations)
	}
	h.Webhook.Scopes = []string{"k."}
	h.Webhook.Deliveries = without(h.Webhook, "msg_1", "msg_2", "msg_4", "msg_5", "msg_6")
	if got := Undelivered(h.Webhook); len(got) != 0 {
		t.Errorf("no job in scope: Undelivered = %v, want nothing", got)
	}
	r := check(t, h)
	if r.Counts["I12"] != 1 || len(r.Violations) != 1 ||
		!strings.Contains(r.Violations[0].Detail, "delivery msg_3 (run.failed, token 5, tick 07:00:10.000, trigger \"schedule\") at 07:00:10.510 is about a job outside the webhook's scopes [k.]") {
		t.Errorf("a delivery about a job outside the scopes: %v, want it flagged alone", r.Violations)
	}
	if r.Stats.AlertsDue[EventRunFailed]+r.Stats.AlertsDue[EventRunExpired]+r.Stats.AlertsDue[EventRunMissed] != 0 {
		t.Errorf("events due outside the scopes: %v, want none", r.Stats.AlertsDue)
	}
}
