package checker

import (
	"strings"
	"testing"
)

// webhookHistory is the legal history with a webhook on run.failed,
// run.expired and run.missed: c's expired run (token 3), a failed run of
// token 5 and a missed tick 4, each delivered once, the missed one twice (a
// retry after a lost answer carries the same webhook-id).
func webhookHistory() *History {
	h := legal()
	failed := Run{ID: 5, Job: "j", Token: 5, Owner: "b", Tick: tick(5), StartedAt: at(10002), EndedAt: at(10500), Outcome: "failed"}
	missed := Run{Job: "j", Tick: tick(4), EndedAt: tick(4).Add(period / 2), Outcome: "missed"}
	h.Webhook = &Webhook{
		Events:    []string{EventRunFailed, EventRunExpired, EventRunMissed},
		DecidedBy: at(20000),
		Runs:      []Run{h.Runs[2], failed, missed},
		Deliveries: []Delivery{
			{ID: "msg_1", Type: EventRunExpired, Job: "j", Token: 3, Tick: tick(2), Outcome: "expired", At: at(7050), Verified: true},
			{ID: "msg_2", Type: EventRunMissed, Job: "j", Tick: tick(4), Outcome: "missed", At: at(9100), Verified: true},
			{ID: "msg_2", Type: EventRunMissed, Job: "j", Tick: tick(4), Outcome: "missed", At: at(14100), Verified: true},
			{ID: "msg_3", Type: EventRunFailed, Job: "j", Token: 5, Tick: tick(5), Outcome: "failed", At: at(10510), Verified: true},
		},
	}
	return h
}

func TestEveryAlertDeliveredPasses(t *testing.T) {
	t.Parallel()
	r := check(t, webhookHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	if got, want := [3]int{r.Stats.AlertedRuns, r.Stats.Deliveries, r.Stats.DeliveryEvents}, [3]int{3, 4, 3}; got != want {
		t.Errorf("alerted runs, deliveries, events: got %v, want %v", got, want)
	}
	if line := r.SummaryLine(); !strings.Contains(line, "3 failed, expired and missed runs, 4 webhook deliveries of 3 events") || !strings.Contains(line, "I12=0") {
		t.Errorf("summary line %q lacks the deliveries", line)
	}
}

// TestMissingDeliveryIsCaught: each change loses or spoils one delivery of
// the webhook history, which I12 must flag; the controls must pass.
func TestMissingDeliveryIsCaught(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(w *Webhook)
		want   string // a part of the violation, "" for a legal variant
	}{
		{"ExpiredNeverDelivered", func(w *Webhook) { w.Deliveries = w.Deliveries[1:] }, "token 3 (c, tick 07:00:04.000) ended expired"},
		{"MissedNeverDelivered", func(w *Webhook) { w.Deliveries = append(w.Deliveries[:1], w.Deliveries[3:]...) }, "tick 07:00:08.000 was recorded missed"},
		{"FailedNeverDelivered", func(w *Webhook) { w.Deliveries = w.Deliveries[:3] }, "token 5 (b, tick 07:00:10.000) ended failed"},
		{"DeliveredAsAnotherEvent", func(w *Webhook) { w.Deliveries[3].Type = EventRunExpired }, "never delivered as run.failed"},
		{"DeliveredForAnotherRun", func(w *Webhook) { w.Deliveries[3].Token = 4 }, "no such run"},
		{"BadSignature", func(w *Webhook) {
			w.Deliveries[0].Verified = false
		}, "does not verify"},
		{"AlertAboutNothing", func(w *Webhook) {
			w.Deliveries = append(w.Deliveries, Delivery{ID: "msg_9", Type: EventRunMissed, Job: "j", Tick: tick(7), At: at(16000), Verified: true})
		}, "says run.missed (token 0, tick 07:00:14.000), but the run history has no such run"},
		// Controls: a run decided after the wait, an event not subscribed,
		// an expiration followed by a late release.
		{"EndedAfterTheWait", func(w *Webhook) {
			w.Deliveries = w.Deliveries[:3]
			w.DecidedBy = at(10400)
		}, ""},
		{"NotSubscribed", func(w *Webhook) {
			w.Deliveries = w.Deliveries[:3]
			w.Events = []string{EventRunExpired, EventRunMissed}
		}, ""},
		{"ExpiredThenReleased", func(w *Webhook) {
			w.Runs[0].Outcome = "succeeded"
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := webhookHistory()
			tt.mutate(h.Webhook)
			r := check(t, h)
			if tt.want == "" {
				for _, v := range r.Violations {
					t.Errorf("violation in a legal variant: %s", v)
				}
				return
			}
			if !r.Caught("I12") {
				t.Fatalf("I12 not flagged; violations: %v", r.Violations)
			}
			found := false
			for _, v := range r.Violations {
				if v.Invariant != "I12" {
					t.Errorf("only I12 should be flagged, got %s", v)
				}
				found = found || strings.Contains(v.Detail, tt.want)
			}
			if !found {
				t.Errorf("no I12 violation says %q: %v", tt.want, r.Violations)
			}
		})
	}
}

// TestNoWebhookNothingJudged: a run without a webhook has nothing for I12.
func TestNoWebhookNothingJudged(t *testing.T) {
	t.Parallel()
	if got := Undelivered(nil); got != nil {
		t.Errorf("Undelivered(nil) = %v, want nothing", got)
	}
	h := webhookHistory()
	h.Webhook.Deliveries = nil
	if n := len(Undelivered(h.Webhook)); n != 3 {
		t.Errorf("with no delivery: %d violations, want 3 (one per run)", n)
	}
}
