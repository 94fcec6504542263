package checker

import (
	"strings"
	"testing"
	"time"
)

// webhookHistory is the legal history with a webhook on run.failed,
// run.expired and run.missed. When the wait for delivery began, four runs
// owed five events: c's expired run (token 3), a failed run (token 5), a
// run whose expiry was counted and that a late release then ended failed
// (token 6: run.expired and run.failed), and a missed tick 4. Each was
// delivered once, the missed tick twice (a retry of one event, with its
// webhook-id). A tick 9 decided missed during the wait was delivered too.
func webhookHistory() *History {
	h := legal()
	expired := h.Runs[2]
	failed := Run{ID: 5, Job: "j", Token: 5, Owner: "b", Tick: tick(5), StartedAt: at(10002), EndedAt: at(10500), Outcome: "failed", Trigger: TriggerSchedule}
	late := Run{ID: 6, Job: "j", Token: 6, Owner: "c", Tick: tick(6), StartedAt: at(12002), EndedAt: at(15600), Outcome: "failed", Trigger: TriggerSchedule, ExpiryCounted: true}
	missed := Run{ID: 7, Job: "j", Tick: tick(4), EndedAt: tick(4).Add(period / 2), Outcome: "missed", Trigger: TriggerSchedule}
	during := Run{ID: 8, Job: "j", Tick: tick(9), EndedAt: tick(9).Add(period / 2), Outcome: "missed", Trigger: TriggerSchedule}
	h.Webhook = &Webhook{
		Events:   []string{EventRunFailed, EventRunExpired, EventRunMissed},
		Alerting: []Run{expired, failed, late, missed},
		Known:    []Run{expired, failed, late, missed, during},
		Deliveries: []Delivery{
			{ID: "msg_1", Type: EventRunExpired, Job: "j", Token: 3, Tick: tick(2), Outcome: "expired", Trigger: TriggerSchedule, At: at(7050), Verified: true},
			{ID: "msg_2", Type: EventRunMissed, Job: "j", Tick: tick(4), Outcome: "missed", Trigger: TriggerSchedule, At: at(9100), Verified: true},
			{ID: "msg_2", Type: EventRunMissed, Job: "j", Tick: tick(4), Outcome: "missed", Trigger: TriggerSchedule, At: at(14100), Verified: true},
			{ID: "msg_3", Type: EventRunFailed, Job: "j", Token: 5, Tick: tick(5), Outcome: "failed", Trigger: TriggerSchedule, At: at(10510), Verified: true},
			{ID: "msg_4", Type: EventRunExpired, Job: "j", Token: 6, Tick: tick(6), Outcome: "expired", Trigger: TriggerSchedule, At: at(15300), Verified: true},
			{ID: "msg_5", Type: EventRunFailed, Job: "j", Token: 6, Tick: tick(6), Outcome: "failed", Trigger: TriggerSchedule, At: at(15610), Verified: true},
			{ID: "msg_6", Type: EventRunMissed, Job: "j", Tick: tick(9), Outcome: "missed", Trigger: TriggerSchedule, At: at(19200), Verified: true},
		},
		Outbox:  []OutboxEvent{{ID: "msg_5", Type: EventRunFailed, Job: "j", Token: 6, Tick: tick(6), Trigger: TriggerSchedule, Attempts: 1}},
		Waited:  6 * time.Second,
		Refused: 2,
	}
	return h
}

func TestEveryAlertDeliveredPasses(t *testing.T) {
	t.Parallel()
	r := check(t, webhookHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	s := r.Stats
	if got, want := [5]int{s.AlertsDue[EventRunFailed], s.AlertsDue[EventRunExpired], s.AlertsDue[EventRunMissed], s.Deliveries, s.DeliveryEvents}, [5]int{2, 2, 1, 7, 6}; got != want {
		t.Errorf("events due (failed, expired, missed), deliveries, events: got %v, want %v", got, want)
	}
	line := r.SummaryLine()
	for _, want := range []string{
		"webhook: events due 2 run.failed, 2 run.expired, 1 run.missed; 7 deliveries of 6 events (1 duplicates), 2 first attempts refused; waited 6.00s, 0 events of its start left undelivered in the outbox",
		"I12=0",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
}

// without returns the deliveries of w without those of the given ids.
func without(w *Webhook, ids ...string) []Delivery {
	var out []Delivery
	for _, d := range w.Deliveries {
		if !strings.Contains(" "+strings.Join(ids, " ")+" ", " "+d.ID+" ") {
			out = append(out, d)
		}
	}
	return out
}

// TestMissingDeliveryIsCaught: each change loses, misdirects or spoils
// one delivery of the webhook history, which I12 must flag; the controls
// must pass.
func TestMissingDeliveryIsCaught(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(w *Webhook)
		want   string // a part of a violation, "" for a legal variant
	}{
		{"ExpiredNeverDelivered", func(w *Webhook) { w.Deliveries = without(w, "msg_1") },
			"run of token 3 (c, tick 07:00:04.000, started 07:00:04.002, outcome expired, ended 07:00:07.002) was never delivered as run.expired"},
		{"MissedNeverDelivered", func(w *Webhook) { w.Deliveries = without(w, "msg_2") },
			"missed tick 07:00:08.000 (trigger schedule), recorded at 07:00:09.000 was never delivered as run.missed"},
		{"FailedNeverDelivered", func(w *Webhook) { w.Deliveries = without(w, "msg_3") },
			"run of token 5 (b, tick 07:00:10.000, started 07:00:10.002, outcome failed, ended 07:00:10.500) was never delivered as run.failed"},
		{"CountedExpiryNeverDelivered", func(w *Webhook) { w.Deliveries = without(w, "msg_4") },
			"outcome failed, ended 07:00:15.600, expiry counted) was never delivered as run.expired"},
		{"LateFailureNeverDelivered", func(w *Webhook) { w.Deliveries = without(w, "msg_5") },
			"expiry counted) was never delivered as run.failed; its event msg_5 was in the outbox when the wait began and left it without reaching the receiver"},
		{"StillInTheOutbox", func(w *Webhook) {
			w.Deliveries = without(w, "msg_5")
			w.Outbox[0].Left, w.Outbox[0].Attempts, w.Outbox[0].NextAttempt = true, 3, at(30000)
		}, "its event msg_5 was still in the outbox when the harness stopped waiting after 6s (3 attempts, next attempt 07:00:30.000"},
		{"NeverInTheOutbox", func(w *Webhook) { w.Deliveries = without(w, "msg_3") },
			"no event of it was in the outbox when the wait began"},
		{"DeliveredAsAnotherEvent", func(w *Webhook) { w.Deliveries[3].Type = EventRunExpired }, `carries a run of outcome "failed"`},
		{"DeliveredWithAnotherOutcome", func(w *Webhook) { w.Deliveries[3].Outcome = "succeeded" }, `carries a run of outcome "succeeded"`},
		{"DeliveredForAnotherToken", func(w *Webhook) { w.Deliveries[3].Token = 4 }, "is about a run the run history does not have"},
		{"DeliveredForAnotherTick", func(w *Webhook) { w.Deliveries[3].Tick = tick(7) }, "token 5 (b, tick 07:00:10.000"},
		{"MissedOfAnotherTrigger", func(w *Webhook) {
			w.Deliveries[1].Trigger, w.Deliveries[2].Trigger = TriggerManual, TriggerManual
		}, `delivery msg_2 (run.missed, token 0, tick 07:00:08.000, trigger "manual") at 07:00:09.100 is about a run the run history does not have`},
		{"BadSignature", func(w *Webhook) { w.Deliveries[0].Verified = false }, "delivery msg_1 (run.expired, token 3, tick 07:00:04.000, trigger \"schedule\") at 07:00:07.050 carried a signature that does not verify"},
		{"BodyWithoutARun", func(w *Webhook) { w.Deliveries[3].Err = "data.run is null" }, "has a body that is not an event about a run: data.run is null"},
		{"EventNotSubscribed", func(w *Webhook) {
			w.Deliveries = append(w.Deliveries, Delivery{ID: "msg_8", Type: "job.overdue", Job: "j", Tick: tick(4), Outcome: "missed", At: at(9200), Verified: true})
		}, "is of an event the webhook did not subscribe to"},
		{"AlertAboutNothing", func(w *Webhook) {
			w.Deliveries = append(w.Deliveries, Delivery{ID: "msg_9", Type: EventRunMissed, Job: "j", Tick: tick(7), Outcome: "missed", Trigger: TriggerSchedule, At: at(16000), Verified: true})
		}, "delivery msg_9 (run.missed, token 0, tick 07:00:14.000, trigger \"schedule\") at 07:00:16.000 is about a run the run history does not have"},
		{"TwoMissedRunsOneEvent", func(w *Webhook) {
			again := w.Alerting[3]
			again.ID = 9
			w.Alerting = append(w.Alerting, again)
			w.Known = append(w.Known, again)
		}, "missed tick 07:00:08.000 (trigger schedule), recorded at 07:00:09.000 was never delivered as run.missed"},
		// Controls: an event not subscribed and not delivered, a run
		// decided during the wait and not delivered, a counted expiry that
		// a late release ended succeeded.
		{"NotSubscribed", func(w *Webhook) {
			w.Deliveries = without(w, "msg_3", "msg_5")
			w.Events = []string{EventRunExpired, EventRunMissed}
		}, ""},
		{"DecidedDuringTheWait", func(w *Webhook) {
			w.Known = append(w.Known, Run{ID: 10, Job: "j", Tick: tick(10), EndedAt: tick(10).Add(period / 2), Outcome: "missed", Trigger: TriggerSchedule})
		}, ""},
		{"CountedExpiryThenSucceeded", func(w *Webhook) {
			w.Alerting[2].Outcome, w.Known[2].Outcome = "succeeded", "succeeded"
			w.Deliveries = without(w, "msg_5")
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

// TestOutboxLeftCountsUndeliveredOnly: an event still in the outbox when
// the wait ended counts as left only if it never reached the receiver (a
// delivered one may be waiting for its report).
func TestOutboxLeftCountsUndeliveredOnly(t *testing.T) {
	t.Parallel()
	h := webhookHistory()
	h.Webhook.Outbox[0].Left = true
	if r := check(t, h); r.Stats.WebhookLeft != 0 || r.Failed() {
		t.Errorf("a delivered event still in the outbox: left %d, violations %v; want 0 and none", r.Stats.WebhookLeft, r.Violations)
	}
	h.Webhook.Deliveries = without(h.Webhook, "msg_5")
	if r := check(t, h); r.Stats.WebhookLeft != 1 || !r.Caught("I12") {
		t.Errorf("an undelivered event still in the outbox: left %d, I12 %d; want 1 and caught", r.Stats.WebhookLeft, r.Counts["I12"])
	}
}

// TestUndelivered: what the harness waits on. Nothing is judged without a
// webhook; with every delivery lost, each of the five events due is
// missing, and nothing else is reported (a bad signature is Check's).
func TestUndelivered(t *testing.T) {
	t.Parallel()
	if got := Undelivered(nil); got != nil {
		t.Errorf("Undelivered(nil) = %v, want nothing", got)
	}
	h := webhookHistory()
	if got := Undelivered(h.Webhook); len(got) != 0 {
		t.Errorf("every event delivered: Undelivered = %v, want nothing", got)
	}
	h.Webhook.Deliveries[0].Verified = false
	if got := Undelivered(h.Webhook); len(got) != 1 || !strings.Contains(got[0].Detail, "token 3") {
		t.Errorf("the expired run's only delivery unverified: Undelivered = %v, want that run alone", got)
	}
	h.Webhook.Deliveries = nil
	if n := len(Undelivered(h.Webhook)); n != 5 {
		t.Errorf("with no delivery: %d violations, want 5 (one per event due)", n)
	}
	r := check(t, legal())
	if r.Stats.WebhookRecorded || strings.Contains(r.SummaryLine(), "webhook:") {
		t.Errorf("a history without a webhook: stats %+v, summary %q; want no webhook", r.Stats, r.SummaryLine())
	}
}

// TestJobMissedCoversMissedRuns: a webhook subscribed to job.missed alone
// is told its missed runs by the job.missed events that list them, or by
// the count of one whose pass missed more than it lists (only runs older
// than the oldest it lists); a missed run that no event covers is still
// caught.
func TestJobMissedCoversMissedRuns(t *testing.T) {
	t.Parallel()
	h := webhookHistory()
	w := h.Webhook
	w.Events = []string{EventRunFailed, EventRunExpired, EventJobMissed}
	older := Run{ID: 9, Job: "j", Tick: tick(3), EndedAt: tick(4).Add(period / 2), Outcome: "missed", Trigger: TriggerSchedule}
	w.Alerting = append(w.Alerting, older)
	w.Known = append(w.Known, older)
	var kept []Delivery
	for _, d := range w.Deliveries {
		if d.Type != EventRunMissed {
			kept = append(kept, d)
		}
	}
	listing := Delivery{ID: "msg_7", Type: EventJobMissed, Job: "j", At: at(9100), Verified: true,
		Missed: []MissedRef{{Tick: tick(4), Trigger: TriggerSchedule}}, Count: 2}
	w.Deliveries = append(kept, listing)
	if got := Undelivered(w); len(got) != 0 {
		t.Errorf("missed runs listed or counted by job.missed: Undelivered = %v, want nothing", got)
	}
	if r := check(t, h); len(r.Violations) != 0 {
		t.Errorf("violations: %v", r.Violations)
	}

	listing.Count = 1 // the older tick is no longer covered
	w.Deliveries = append(kept, listing)
	if got := Undelivered(w); len(got) != 1 || !strings.Contains(got[0].Detail, "missed tick") {
		t.Errorf("a missed run no job.missed covers: Undelivered = %v, want it alone", got)
	}
	listing.Verified = false
	w.Deliveries = append(kept, listing)
	if got := Undelivered(w); len(got) != 2 {
		t.Errorf("the job.missed event unverified: Undelivered = %v, want both missed runs", got)
	}
}
