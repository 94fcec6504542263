package checker

import (
	"fmt"
	"slices"
	"time"
)

// The webhook events I12 is about, and the run outcome each reports.
const (
	EventRunFailed  = "run.failed"
	EventRunExpired = "run.expired"
	EventRunMissed  = "run.missed"
)

// Delivery is one webhook message the harness's receiver got.
type Delivery struct {
	// ID is the webhook-id header: one per event, the same on every retry.
	ID string
	// Type is the body's type (run.failed, run.expired, run.missed, ...).
	Type string
	// Job, Token and Tick name the run of the body's data (Token 0 for a
	// missed run, zero Tick for none).
	Job   string
	Token int64
	Tick  time.Time
	// Outcome is the run's outcome as the event carried it.
	Outcome string
	// At is when the receiver got it.
	At time.Time
	// Verified reports whether the webhook-signature matched the
	// webhook's secret (webhook.Verify); the receiver answers 2xx only then.
	Verified bool
}

// Webhook is what a run with a webhook registered recorded: the events it
// subscribed, the runs the service had decided when the harness stopped
// waiting for delivery, and what the receiver got.
type Webhook struct {
	// Events are the subscribed event types.
	Events []string
	// DecidedBy bounds the runs I12 judges: a run that ended after it may
	// have been decided after delivery stopped being waited for.
	DecidedBy time.Time
	// Runs are the failed and expired runs with a holder and the missed
	// runs (without one, Token 0) the database held at the end of the
	// wait.
	Runs       []Run
	Deliveries []Delivery
}

// alertEvent is the event a run of outcome out must be delivered as, or "".
func alertEvent(out string) string {
	switch out {
	case "failed":
		return EventRunFailed
	case "expired":
		return EventRunExpired
	case "missed":
		return EventRunMissed
	}
	return ""
}

// deliveryKey names the run an event is about: a run with a holder by its
// token, a missed run (no token) by its tick.
type deliveryKey struct {
	typ   string
	job   string
	token int64
	tick  int64
}

func runKey(typ string, run Run) deliveryKey {
	if run.Token > 0 {
		return deliveryKey{typ: typ, job: run.Job, token: run.Token}
	}
	return deliveryKey{typ: typ, job: run.Job, tick: run.Tick.UnixMilli()}
}

// Undelivered returns the I12 violations of w: a failed, expired or missed
// run that ended by w.DecidedBy and whose event is subscribed but was never
// delivered with a valid signature; a delivery whose signature did not
// verify; a run.failed or run.missed delivery of a run the database does
// not have with that outcome (an alert about nothing). The harness calls it
// to know when delivery has drained; Check reports it as I12.
func Undelivered(w *Webhook) []Violation {
	if w == nil {
		return nil
	}
	var out []Violation
	add := func(job, format string, args ...any) {
		out = append(out, Violation{Invariant: "I12", Job: job, Detail: fmt.Sprintf(format, args...)})
	}
	got := make(map[deliveryKey]bool)
	for _, d := range w.Deliveries {
		if !d.Verified {
			add(d.Job, "delivery %s (%s) at %s carried a signature that does not verify with the webhook's secret", d.ID, d.Type, fmtTime(d.At))
			continue
		}
		k := deliveryKey{typ: d.Type, job: d.Job, token: d.Token}
		if d.Token <= 0 {
			k.tick = d.Tick.UnixMilli()
		}
		got[k] = true
	}
	known := make(map[deliveryKey]bool)
	for _, run := range w.Runs {
		typ := alertEvent(run.Outcome)
		if typ == "" {
			continue
		}
		k := runKey(typ, run)
		known[k] = true
		if !slices.Contains(w.Events, typ) || got[k] || run.EndedAt.IsZero() || run.EndedAt.After(w.DecidedBy) {
			continue
		}
		if run.Token > 0 {
			add(run.Job, "run of token %d (%s, tick %s) ended %s at %s and was never delivered as %s",
				run.Token, run.Owner, fmtTime(run.Tick), run.Outcome, fmtTime(run.EndedAt), typ)
		} else {
			add(run.Job, "tick %s was recorded missed at %s and never delivered as %s", fmtTime(run.Tick), fmtTime(run.EndedAt), typ)
		}
	}
	// A failed release and a missed tick are final: their event always
	// names a run the history has. (An expiration may be followed by a
	// late release that records the run's real outcome.)
	for _, d := range w.Deliveries {
		if !d.Verified || (d.Type != EventRunFailed && d.Type != EventRunMissed) {
			continue
		}
		k := deliveryKey{typ: d.Type, job: d.Job, token: d.Token}
		if d.Token <= 0 {
			k.tick = d.Tick.UnixMilli()
		}
		if !known[k] {
			add(d.Job, "delivery %s says %s (token %d, tick %s), but the run history has no such run", d.ID, d.Type, d.Token, fmtTime(d.Tick))
		}
	}
	return out
}

// checkDeliveries is I12: every failed, expired and missed run was
// delivered to the webhook at least once, signed with its secret.
func checkDeliveries(h *History, r *Report) {
	w := h.Webhook
	if w == nil {
		return
	}
	ids := make(map[string]int)
	for _, d := range w.Deliveries {
		ids[d.ID]++
	}
	r.Stats.Deliveries = len(w.Deliveries)
	r.Stats.DeliveryEvents = len(ids)
	for _, run := range w.Runs {
		if alertEvent(run.Outcome) != "" && !run.EndedAt.IsZero() && !run.EndedAt.After(w.DecidedBy) {
			r.Stats.AlertedRuns++
		}
	}
	for _, v := range Undelivered(w) {
		r.add(v.Invariant, v.Job, "%s", v.Detail)
	}
}
