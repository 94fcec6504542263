package leaseapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Webhook is a team's subscription to the events of the jobs in its
// scopes: each event is written to an outbox in the transaction that
// decides it, and delivered to URL by a background loop (repo).
type Webhook struct {
	// ID is public: "wh_" and 12 characters of [a-z0-9].
	ID string
	// Name is optional ("" for none): 1 to MaxWebhookNameLen characters of
	// [a-z0-9_.-], unique among the webhooks of the same scopes (as a
	// credential's name), so that two teams may each have an "oncall" and
	// a declarative tool can find its webhook again.
	Name string
	// Digest is the hex HMAC-SHA256 of the plain URL keyed by the plain
	// secret (package webhook's Digest), computed at creation: whoever
	// holds the URL and the secret can tell whether this webhook has
	// them, and nobody learns either from it. "" for a webhook created
	// before digests were kept.
	Digest string
	// URL and Secret are as the store keeps them: encrypted by the caller
	// when a key is configured (package webhook's Sealer), else as given.
	// A store never reads them. URLRedacted is the form a list shows.
	URL         string
	URLRedacted string
	Secret      string
	// Events are the event names (WebhookEvents) it receives.
	Events []string
	// Scopes are the jobs it hears of, as a credential's scopes.
	Scopes []string
	// Format is WebhookFormatStandard or WebhookFormatSlack.
	Format string
	// CreatedBy names the credential that created it ("" in open mode).
	CreatedBy string
	CreatedAt time.Time
	// LastDelivery is its newest recorded attempt, nil before the first.
	LastDelivery *WebhookDelivery
}

// WebhookEvents are the events a webhook can subscribe to; package webhook
// names the same, and its tests hold the two lists equal.
var WebhookEvents = []string{"run.failed", "run.expired", "run.missed", "job.overdue", "run.succeeded", "job.recovered", "job.missed", "job.alerting", "job.ok"}

// MaxMissedPerEvent bounds the missed runs a job.missed event lists.
const MaxMissedPerEvent = 100

// The formats of a webhook's deliveries.
const (
	WebhookFormatStandard = "standard"
	WebhookFormatSlack    = "slack"
)

// The limits of a webhook.
const (
	// MaxWebhookURLLen bounds the URL as given.
	MaxWebhookURLLen = 2048
	// maxWebhookStoredLen bounds the URL and the secret as stored: an
	// encrypted value is longer than the plain one.
	maxWebhookStoredLen = 4096
	// MaxWebhookDeliveries is how many attempts a webhook's log keeps.
	MaxWebhookDeliveries = 100
	// MaxWebhookErrorLen bounds the error text an attempt records.
	MaxWebhookErrorLen = 256
	// MaxWebhookNameLen bounds a webhook's name.
	MaxWebhookNameLen = 64
)

// WebhookNameRule is the rule of a webhook's name, as a problem says it.
const WebhookNameRule = "must be 1 to 64 characters of a-z 0-9 _ . -"

// ValidWebhookName reports whether name is 1 to MaxWebhookNameLen
// characters of [a-z0-9_.-].
func ValidWebhookName(name string) bool {
	if name == "" || len(name) > MaxWebhookNameLen {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// WebhookEvent is one event waiting for delivery to one webhook, as a
// delivery loop claims it: the job's run and lease as they were when the
// event was decided, and the webhook's URL, secret and format as stored.
type WebhookEvent struct {
	// ID is the webhook-id of every attempt of this event.
	ID        string
	WebhookID string
	Type      string
	JobID     string
	// Run is the run the event is about (for job.overdue the job's newest
	// run); nil when there is none. Lease is the job's lease; nil only
	// when the job has none.
	Run   *Run
	Lease *Lease
	// Missed and MissedCount are a job.missed event's: the missed runs
	// one sweep pass recorded for the job, newest first, at most
	// MaxMissedPerEvent, and the count of all the ticks it decided missed.
	Missed      []Run
	MissedCount int64
	// AlertReasons and Repeat are a policy event's (job.alerting,
	// job.ok): the job's reasons, and whether a job.alerting repeats an
	// earlier one (its RealertAfter passed).
	AlertReasons []AlertReason
	Repeat       bool
	CreatedAt    time.Time
	// Attempt is the number of this attempt, 1 for the first.
	Attempt int
	URL     string
	Secret  string
	Format  string
}

// WebhookDelivery is one recorded attempt: its HTTP status, or 0 and the
// error when no answer came.
type WebhookDelivery struct {
	EventID   string
	Type      string
	JobID     string
	Attempt   int
	At        time.Time
	Status    int
	Error     string
	Delivered bool
}

// WebhookAttempt is what a delivery loop reports of an attempt at the
// event it claimed.
type WebhookAttempt struct {
	Event     *WebhookEvent
	At        time.Time
	Status    int
	Error     string
	Delivered bool
	// RetryIn is how long after now (the store's clock) to try again; zero
	// when the event is done: delivered, or given up.
	RetryIn time.Duration
	// TimedOut: the attempt ran out of time. Until an attempt of the
	// webhook ends in time, it holds at most one delivery slot across all
	// instances.
	TimedOut bool
}

// ClaimWebhookParams are the parameters of a claim.
type ClaimWebhookParams struct {
	// Limit bounds the events claimed, one per webhook at most.
	Limit int
	// Claim is how long the claimed events are the caller's.
	Claim time.Duration
	// Busy are the webhooks the caller has an attempt in flight for: none
	// of their events is claimed.
	Busy []string
}

// WebhookResult is what became of a delivery attempt, the label of the
// deliveries metric.
type WebhookResult string

// The results of an attempt.
const (
	// WebhookDelivered: the receiver answered 2xx.
	WebhookDelivered WebhookResult = "delivered"
	// WebhookFailed: no 2xx; the event is tried again later.
	WebhookFailed WebhookResult = "failed"
	// WebhookGaveUp: no 2xx, and the event is too old to be tried again.
	WebhookGaveUp WebhookResult = "gave_up"
)

// WebhookResults lists every result.
var WebhookResults = []WebhookResult{WebhookDelivered, WebhookFailed, WebhookGaveUp}

// WebhookObserver is told what became of each delivery attempt.
type WebhookObserver interface {
	WebhookAttempted(WebhookResult)
}

// ErrWebhookNotFound: no webhook has that id. It wraps ErrNotFound.
var ErrWebhookNotFound = fmt.Errorf("webhook %w", ErrNotFound)

// ErrWebhookExists: a webhook of that name and the same scopes exists.
var ErrWebhookExists = errors.New("webhook exists")

// ErrClaimLost: an attempt was reported after its claim had passed and the
// event was claimed again (or its webhook deleted); nothing was written.
var ErrClaimLost = errors.New("webhook event claim lost")

// WebhookStore keeps webhooks, their outbox and their delivery logs. Both
// stores implement it. The outbox rows are written by the store itself,
// in the transaction that decides each event (a release, the sweep, a
// takeover), one for every webhook subscribed to the event whose scopes
// hold the job; with no webhook nothing is written.
type WebhookStore interface {
	// CreateWebhook stores w (validated first, its scopes normalized) and
	// sets its CreatedAt; ErrWebhookExists when a webhook of w's name and
	// the same scopes exists.
	CreateWebhook(ctx context.Context, w *Webhook) error
	// DeleteWebhook deletes a webhook with its outbox and log;
	// ErrWebhookNotFound when there is none.
	DeleteWebhook(ctx context.Context, id string) error
	// Webhooks returns every webhook, ordered by id, each with its newest
	// attempt.
	Webhooks(ctx context.Context) ([]Webhook, error)
	// WebhookDeliveries returns the recorded attempts of a webhook, newest
	// first, at most MaxWebhookDeliveries; ErrWebhookNotFound when there
	// is none.
	WebhookDeliveries(ctx context.Context, id string) ([]WebhookDelivery, error)
	// ClaimWebhookEvents claims up to p.Limit due events, each the oldest
	// due event of its webhook and at most one per webhook, for p.Claim:
	// no other claim takes them until it passes or the attempt is
	// reported. Each webhook is its own queue: the webhooks of p.Busy are
	// passed over, and so is a webhook whose last attempt timed out while
	// a claim of it is live (anyone's), so that it holds at most one slot
	// across instances. The webhooks are taken oldest head first. Of
	// several stores over one database claiming at once, each event goes
	// to one. It counts the attempt (WebhookEvent.Attempt).
	ClaimWebhookEvents(ctx context.Context, p *ClaimWebhookParams) ([]WebhookEvent, error)
	// FinishWebhookAttempt records an attempt in the webhook's log
	// (keeping the last MaxWebhookDeliveries) and removes the event when
	// it is done, else makes it due again after a.RetryIn; ErrClaimLost
	// when the event was claimed again meanwhile. It records whether the
	// attempt timed out on the webhook, and ends the claim the webhook
	// holds if it was this event's.
	FinishWebhookAttempt(ctx context.Context, a *WebhookAttempt) error
	// WebhookOutbox counts the events waiting for delivery.
	WebhookOutbox(ctx context.Context) (int64, error)
}

// ValidWebhookID reports whether id is "wh_" and 12 characters of [a-z0-9].
func ValidWebhookID(id string) bool {
	rest, ok := strings.CutPrefix(id, "wh_")
	if !ok || len(rest) != 12 {
		return false
	}
	for _, c := range []byte(rest) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// scopesRule is the rule of a credential's and a webhook's scopes.
const scopesRule = "must be 1 to 32 scopes, each * or a job id prefix ending in : or ."

// Validate returns an *InvalidError for the first rule w breaks. The
// events must be distinct names of WebhookEvents.
func (w *Webhook) Validate() error {
	switch {
	case !ValidWebhookID(w.ID):
		return &InvalidError{Field: "id", Rule: "must be wh_ and 12 characters of a-z 0-9"}
	case w.Name != "" && !ValidWebhookName(w.Name):
		return &InvalidError{Field: "name", Rule: WebhookNameRule}
	case w.Digest != "" && !validDigest(w.Digest):
		return &InvalidError{Field: "digest", Rule: "must be 64 hex digits (a SHA-256 HMAC)"}
	case w.URL == "" || len(w.URL) > maxWebhookStoredLen || w.URLRedacted == "" || len(w.URLRedacted) > maxWebhookStoredLen:
		return &InvalidError{Field: "url", Rule: fmt.Sprintf("must be an absolute http or https URL of at most %d characters", MaxWebhookURLLen)}
	case w.Secret == "" || len(w.Secret) > maxWebhookStoredLen:
		return &InvalidError{Field: "secret", Rule: "must be given"}
	case len(w.Events) == 0 || len(w.Events) > len(WebhookEvents):
		return &InvalidError{Field: "events", Rule: fmt.Sprintf("must list 1 to %d distinct events of %s", len(WebhookEvents), strings.Join(WebhookEvents, ", "))}
	case len(w.Scopes) == 0 || len(w.Scopes) > MaxScopes:
		return &InvalidError{Field: "scopes", Rule: scopesRule}
	case w.Format != WebhookFormatStandard && w.Format != WebhookFormatSlack:
		return &InvalidError{Field: "format", Rule: `must be "standard" or "slack"`}
	}
	for i, e := range w.Events {
		switch {
		case !slices.Contains(WebhookEvents, e):
			return &InvalidError{Field: fmt.Sprintf("events[%d]", i),
				Rule: fmt.Sprintf("must be one of %s, not %q", strings.Join(WebhookEvents, ", "), clipRule(e))}
		case slices.Index(w.Events, e) < i:
			return &InvalidError{Field: fmt.Sprintf("events[%d]", i), Rule: fmt.Sprintf("repeats %q; list each event once", e)}
		}
	}
	for i, s := range w.Scopes {
		if !ValidScope(s) {
			return &InvalidError{Field: fmt.Sprintf("scopes[%d]", i), Rule: "must be * or a job id prefix of 2 to 128 characters ending in : or ."}
		}
	}
	return nil
}

// validDigest reports whether d is 64 lower-case hex digits.
func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for _, c := range []byte(d) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clipRule shortens a value echoed in a rule, so that a problem stays
// small whatever was sent.
func clipRule(s string) string {
	const maxLen = 40
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}
