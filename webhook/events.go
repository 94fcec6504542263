package webhook

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Event is the type of a webhook event, the "type" of its body.
type Event string

// The events a webhook can subscribe to.
const (
	RunFailed    Event = "run.failed"
	RunExpired   Event = "run.expired"
	RunMissed    Event = "run.missed"
	JobOverdue   Event = "job.overdue"
	RunSucceeded Event = "run.succeeded"
	// JobRecovered: a run succeeded after the job was overdue or failing.
	JobRecovered Event = "job.recovered"
	// JobMissed: one event per job per sweep pass that decided ticks
	// missed, listing the missed runs (opt-in; run.missed is one per run).
	JobMissed Event = "job.missed"
	// JobAlerting: the job's alert policy has it alerting; told again
	// (data "repeat": true) every realertAfter while it stays alerting.
	JobAlerting Event = "job.alerting"
	// JobOK: an alerting job's policy has it ok again.
	JobOK Event = "job.ok"
)

// Events lists every event in a fixed order.
var Events = []Event{RunFailed, RunExpired, RunMissed, JobOverdue, RunSucceeded, JobRecovered, JobMissed, JobAlerting, JobOK}

// Format is how a delivery's body is written.
type Format string

// The formats of a webhook.
const (
	// FormatStandard: {"type","timestamp","data"}, signed per Standard Webhooks.
	FormatStandard Format = "standard"
	// FormatSlack: a Slack incoming-webhook {"text": ...}.
	FormatSlack Format = "slack"
)

// ErrBadEvent reports an event list that is empty, repeats an event or
// names an unknown one.
var ErrBadEvent = errors.New("webhook: unknown, repeated or no event")

// ErrBadFormat reports a format other than standard or slack.
var ErrBadFormat = errors.New(`webhook: format must be "standard" or "slack"`)

// ParseEvents checks a subscription's event list.
func ParseEvents(names []string) ([]Event, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: events must name at least one of %v", ErrBadEvent, Events)
	}
	out := make([]Event, 0, len(names))
	for _, n := range names {
		e := Event(n)
		if !slices.Contains(Events, e) {
			return nil, fmt.Errorf("%w: %q is not one of %v", ErrBadEvent, n, Events)
		}
		if slices.Contains(out, e) {
			return nil, fmt.Errorf("%w: %q is repeated", ErrBadEvent, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// ParseFormat checks a format; "" is the default, standard.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatStandard:
		return FormatStandard, nil
	case FormatSlack:
		return FormatSlack, nil
	}
	return "", fmt.Errorf("%w: got %q", ErrBadFormat, s)
}

// Retry schedule: the first retry after FirstRetry, each later one four
// times further, at most MaxRetryInterval apart, each with up to a fifth of
// jitter so that a receiver coming back is not hit by every instance at
// once; nothing is retried once GiveUpAfter has passed since the event.
const (
	FirstRetry       = 5 * time.Second
	MaxRetryInterval = 4 * time.Hour
	GiveUpAfter      = 24 * time.Hour
)

// NextAttempt returns when to try again after failed attempt number
// attempts (1 for the first) of an event created at created, or false when
// the event is given up: the next attempt would fall after
// created+GiveUpAfter.
func NextAttempt(created, now time.Time, attempts int) (time.Time, bool) {
	d := FirstRetry
	for i := 1; i < attempts && d < MaxRetryInterval; i++ {
		d *= 4
	}
	d = min(d, MaxRetryInterval)
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	next := now.Add(d)
	if next.After(created.Add(GiveUpAfter)) {
		return time.Time{}, false
	}
	return next, true
}
