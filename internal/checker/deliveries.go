package checker

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The webhook events I12 is about, in the order the summary counts them.
const (
	EventRunFailed  = "run.failed"
	EventRunExpired = "run.expired"
	EventRunMissed  = "run.missed"
	// EventJobMissed lists the missed runs of one sweep pass of a job: a
	// subscriber of it is told its missed runs that way, and I12 accepts
	// either form for a missed run.
	EventJobMissed = "job.missed"
)

// AlertEvents are the events I12 judges.
var AlertEvents = []string{EventRunFailed, EventRunExpired, EventRunMissed}

// Delivery is one webhook message the harness's receiver got.
type Delivery struct {
	// ID is the webhook-id header: one per event, the same on every retry.
	ID string
	// Type is the body's type (run.failed, run.expired, run.missed, ...).
	Type string
	// Job, Token, Tick, Outcome and Trigger are the run of the body's data
	// (Token 0 for a missed run, zero Tick for none).
	Job     string
	Token   int64
	Tick    time.Time
	Outcome string
	Trigger string
	// At is when the receiver got it.
	At time.Time
	// Verified reports whether the webhook-signature matched the
	// webhook's secret (webhook.Verify).
	Verified bool
	// Err says why the body of a verified message could not be read as an
	// event about a run ("" when it could).
	Err string
	// Missed and Count are a job.missed event's: the missed runs it lists
	// (Tick and Trigger each) and the count of every tick its pass decided
	// missed, listed or not.
	Missed []MissedRef
	Count  int64
}

// MissedRef is a missed run as a job.missed event lists it.
type MissedRef struct {
	Tick    time.Time
	Trigger string
}

// OutboxEvent is an event of the webhook's outbox as the harness saw it
// when it began to wait for delivery, named by the run it carries.
type OutboxEvent struct {
	ID      string
	Type    string
	Job     string
	Token   int64
	Tick    time.Time
	Trigger string
	// Created is the row's created_at: when the event was decided, and
	// first due.
	Created time.Time
	// Left reports whether it was still in the outbox when the wait
	// ended; Attempts, NextAttempt and ClaimedUntil are as last read.
	Left         bool
	Attempts     int
	NextAttempt  time.Time
	ClaimedUntil time.Time
}

// Webhook is what a run with a webhook registered recorded: the events it
// subscribed, the runs that owed an event, what the outbox held and what
// the harness's receiver got.
type Webhook struct {
	// Events are the subscribed event types.
	Events []string
	// Scopes are the webhook's scopes, job id prefixes or "*" (none: every
	// job): only the runs of its jobs owe it events, and a delivery about
	// another job is a violation (a team hears nothing of another's jobs).
	Scopes []string
	// Alerting are the failed, expired and missed runs the database held
	// when the harness began to wait for delivery, after the faults ended:
	// I12 wants each one's events delivered. A run is expired when its
	// outcome is, or when its expiry was counted (ExpiryCounted) while it
	// was still running, which is when the service tells it; a run that a
	// late release then ended owes both events.
	Alerting []Run
	// Known are the same runs when the deliveries were collected: each
	// delivery must be about one of them.
	Known      []Run
	Deliveries []Delivery
	// Outbox are the events waiting for delivery when the wait began.
	Outbox []OutboxEvent
	// Waited is how long the harness waited for delivery; Refused counts
	// the first attempts the receiver refused on purpose (503), so that
	// retries are exercised.
	Waited  time.Duration
	Refused int
	// Fairness is what I12b judges when another team's webhook, whose
	// receiver hangs, shared the deliverers with this one; nil without.
	Fairness *Fairness
}

// covers reports whether job lies within w's scopes.
func (w *Webhook) covers(job string) bool {
	if len(w.Scopes) == 0 {
		return true
	}
	for _, s := range w.Scopes {
		if s == "*" || strings.HasPrefix(job, s) {
			return true
		}
	}
	return false
}

// alertEvents are the events run owes, in AlertEvents order.
func alertEvents(run *Run) []string {
	var out []string
	switch run.Outcome {
	case "failed":
		out = append(out, EventRunFailed)
	case "missed":
		return []string{EventRunMissed}
	}
	if run.Outcome == "expired" || run.ExpiryCounted {
		out = append(out, EventRunExpired)
	}
	return out
}

// eventOutcome is the outcome the run of an event of type typ carries.
func eventOutcome(typ string) string {
	switch typ {
	case EventRunFailed:
		return "failed"
	case EventRunExpired:
		return "expired"
	case EventRunMissed:
		return "missed"
	}
	return ""
}

// alertKey names the run an event is about: a run with a holder by its
// job, token and tick, a missed run (no token) by its job, tick and
// trigger (a scheduled tick or a manual one nobody claimed).
type alertKey struct {
	typ     string
	job     string
	token   int64
	tick    int64
	trigger string
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func keyOf(typ, job string, token int64, tick time.Time, trigger string) alertKey {
	k := alertKey{typ: typ, job: job, token: token, tick: unixMilli(tick)}
	if token == 0 {
		k.trigger = trigger
	}
	return k
}

func runKey(typ string, run *Run) alertKey {
	return keyOf(typ, run.Job, run.Token, run.Tick, run.Trigger)
}

func (d *Delivery) key() alertKey { return keyOf(d.Type, d.Job, d.Token, d.Tick, d.Trigger) }

// counts reports whether d counts as the delivery of the run it names: a
// verified message about a run, with the outcome its type carries.
func (d *Delivery) counts() bool {
	return d.Verified && d.Err == "" && eventOutcome(d.Type) != "" && d.Outcome == eventOutcome(d.Type)
}

// Undelivered returns the I12 violations of w that the wait for delivery
// can end: a subscribed event of a run of w.Alerting that no delivery
// counts for. Runs that share a key (two missed runs of one tick and
// trigger) need as many distinct events (webhook-ids); retries of one
// event count once. The harness calls it to know when every event it is
// waiting for has arrived; Check reports it as I12.
func Undelivered(w *Webhook) []Violation {
	if w == nil {
		return nil
	}
	left := make(map[alertKey]int)
	seen := make(map[string]bool)
	// unlisted are the job.missed events whose pass missed more ticks than
	// they list (at most 100): each covers that many more missed runs of
	// its job older than the oldest it lists.
	type unlisted struct {
		oldest time.Time
		n      int64
	}
	beyond := make(map[string][]*unlisted)
	for i := range w.Deliveries {
		d := &w.Deliveries[i]
		if seen[d.ID] || !d.Verified || d.Err != "" {
			continue
		}
		switch {
		case d.Type == EventJobMissed:
			seen[d.ID] = true
			for _, m := range d.Missed {
				left[keyOf(EventRunMissed, d.Job, 0, m.Tick, m.Trigger)]++
			}
			if extra := d.Count - int64(len(d.Missed)); extra > 0 && len(d.Missed) > 0 {
				beyond[d.Job] = append(beyond[d.Job], &unlisted{oldest: d.Missed[len(d.Missed)-1].Tick, n: extra})
			}
		case d.counts():
			seen[d.ID] = true
			left[d.key()]++
		}
	}
	var out []Violation
	for i := range w.Alerting {
		run := &w.Alerting[i]
		if !w.covers(run.Job) {
			continue
		}
		for _, typ := range alertEvents(run) {
			if !w.subscribed(typ) {
				continue
			}
			k := runKey(typ, run)
			if left[k] > 0 {
				left[k]--
				continue
			}
			if covered := slices.IndexFunc(beyond[run.Job], func(u *unlisted) bool {
				return typ == EventRunMissed && u.n > 0 && run.Tick.Before(u.oldest)
			}); covered >= 0 {
				beyond[run.Job][covered].n--
				continue
			}
			out = append(out, Violation{Invariant: "I12", Job: run.Job,
				Detail: fmt.Sprintf("%s was never delivered as %s; %s", describeAlerting(run), typ, w.outboxFate(k))})
		}
	}
	return out
}

// subscribed reports whether w hears of the events of type typ: a missed
// run through run.missed or job.missed.
func (w *Webhook) subscribed(typ string) bool {
	return slices.Contains(w.Events, typ) || typ == EventRunMissed && slices.Contains(w.Events, EventJobMissed)
}

// describeAlerting names a run of w.Alerting.
func describeAlerting(run *Run) string {
	if run.Token == 0 {
		return fmt.Sprintf("missed tick %s (trigger %s), recorded at %s", fmtTime(run.Tick), run.Trigger, fmtTime(run.EndedAt))
	}
	s := fmt.Sprintf("run of token %d (%s, tick %s, started %s, outcome %s", run.Token, run.Owner, fmtTime(run.Tick), fmtTime(run.StartedAt), run.Outcome)
	if !run.EndedAt.IsZero() {
		s += ", ended " + fmtTime(run.EndedAt)
	}
	if run.ExpiryCounted {
		s += ", expiry counted"
	}
	return s + ")"
}

// outboxFate says where the event of key k was while the harness waited.
func (w *Webhook) outboxFate(k alertKey) string {
	for _, e := range w.Outbox {
		if keyOf(e.Type, e.Job, e.Token, e.Tick, e.Trigger) != k {
			continue
		}
		if e.Left {
			return fmt.Sprintf("its event %s was still in the outbox when the harness stopped waiting after %s (%d attempts, next attempt %s, claimed until %s)",
				e.ID, w.Waited.Round(100*time.Millisecond), e.Attempts, fmtTime(e.NextAttempt), fmtTime(e.ClaimedUntil))
		}
		return fmt.Sprintf("its event %s was in the outbox when the wait began and left it without reaching the receiver", e.ID)
	}
	return "no event of it was in the outbox when the wait began: the outbox never had it, or it left the outbox before without reaching the receiver"
}

// checkDeliveries is I12: every failed, expired and missed run was
// delivered to the webhook at least once, signed with its secret, and
// every delivery is about such a run.
func checkDeliveries(h *History, r *Report) {
	w := h.Webhook
	if w == nil {
		return
	}
	s := &r.Stats
	s.WebhookRecorded = true
	s.AlertsDue = make(map[string]int)
	for i := range w.Alerting {
		if !w.covers(w.Alerting[i].Job) {
			continue
		}
		for _, typ := range alertEvents(&w.Alerting[i]) {
			if w.subscribed(typ) {
				s.AlertsDue[typ]++
			}
		}
	}
	ids := make(map[string]bool)
	for _, d := range w.Deliveries {
		ids[d.ID] = true
	}
	s.Deliveries, s.DeliveryEvents = len(w.Deliveries), len(ids)
	s.WebhookRefused, s.WebhookWaited = w.Refused, w.Waited
	for _, e := range w.Outbox {
		if e.Left && !ids[e.ID] {
			s.WebhookLeft++
		}
	}

	for _, v := range Undelivered(w) {
		r.add(v.Invariant, v.Job, "%s", v.Detail)
	}
	known := make(map[alertKey]bool)
	for i := range w.Known {
		if !w.covers(w.Known[i].Job) {
			continue
		}
		for _, typ := range alertEvents(&w.Known[i]) {
			known[runKey(typ, &w.Known[i])] = true
		}
	}
	reported := make(map[string]bool) // one violation per event, not per retry
	for i := range w.Deliveries {
		d := &w.Deliveries[i]
		if reported[d.ID] {
			continue
		}
		var what string
		switch {
		case !d.Verified:
			what = "carried a signature that does not verify with the webhook's secret"
		case d.Err != "":
			what = "has a body that is not an event about a run: " + d.Err
		case !slices.Contains(w.Events, d.Type):
			what = "is of an event the webhook did not subscribe to"
		case !w.covers(d.Job):
			what = fmt.Sprintf("is about a job outside the webhook's scopes %v", w.Scopes)
		case eventOutcome(d.Type) == "":
			continue // an event I12 does not judge
		case d.Outcome != eventOutcome(d.Type):
			what = fmt.Sprintf("carries a run of outcome %q", d.Outcome)
		case !known[d.key()]:
			what = "is about a run the run history does not have"
		default:
			continue
		}
		reported[d.ID] = true
		r.add("I12", d.Job, "delivery %s (%s, token %d, tick %s, trigger %q) at %s %s",
			d.ID, d.Type, d.Token, fmtTime(d.Tick), d.Trigger, fmtTime(d.At), what)
	}
}
