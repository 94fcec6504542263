package api

import (
	"encoding/json"
	"fmt"

	"github.com/leaseapi/leaseapi"
)

// CreateWebhookRequest is the body of POST /webhooks.
type CreateWebhookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Scopes []string `json:"scopes"`
	// Format is "standard" (absent) or "slack".
	Format *string `json:"format,omitempty"`
}

// Webhook is a webhook as listed: its URL redacted, never its secret.
type Webhook struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Scopes []string `json:"scopes"`
	Format string   `json:"format"`
	// CreatedBy names the credential that created it, nil in open mode.
	CreatedBy *string `json:"createdBy"`
	CreatedAt Time    `json:"createdAt"`
	// LastDelivery is its newest attempt, absent before the first.
	LastDelivery *WebhookDelivery `json:"lastDelivery,omitempty"`
}

// CreatedWebhook is the answer of POST /webhooks: the webhook and its
// signing secret, shown this once and never again.
type CreatedWebhook struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookList is the answer of GET /webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookDelivery is one attempt at delivering an event.
type WebhookDelivery struct {
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	JobID     string `json:"jobId"`
	Attempt   int    `json:"attempt"`
	At        Time   `json:"at"`
	// Status is the receiver's HTTP status, nil when no answer came;
	// Error says why not (or, for a 3xx, that redirects are not followed).
	Status    *int    `json:"status"`
	Error     *string `json:"error"`
	Delivered bool    `json:"delivered"`
}

// WebhookDeliveryList is the answer of GET /webhooks/{id}/deliveries,
// newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}

// FromWebhook converts a webhook to its wire form.
func FromWebhook(w leaseapi.Webhook) Webhook {
	out := Webhook{ID: w.ID, URL: w.URLRedacted, Events: w.Events, Scopes: w.Scopes, Format: w.Format,
		CreatedBy: stringPtr(w.CreatedBy), CreatedAt: NewTime(w.CreatedAt)}
	if w.LastDelivery != nil {
		d := FromWebhookDelivery(*w.LastDelivery)
		out.LastDelivery = &d
	}
	return out
}

// FromWebhookDelivery converts an attempt to its wire form.
func FromWebhookDelivery(d leaseapi.WebhookDelivery) WebhookDelivery {
	out := WebhookDelivery{EventID: d.EventID, EventType: d.Type, JobID: d.JobID, Attempt: d.Attempt,
		At: NewTime(d.At), Error: stringPtr(d.Error), Delivered: d.Delivered}
	if d.Status != 0 {
		s := d.Status
		out.Status = &s
	}
	return out
}

// WebhookData is the data of a webhook event (the body's "data"): the
// job, the run the event is about and the job's lease, in the schemas of
// the API, as they were when the event was decided.
type WebhookData struct {
	JobID string `json:"jobId"`
	Run   *Run   `json:"run"`
	Lease *Lease `json:"lease"`
}

// JobMissedData is the data of a job.missed event: the job, its lease,
// the missed runs one sweep pass recorded (newest first, at most
// leaseapi.MaxMissedPerEvent) and the count of every tick it decided
// missed.
type JobMissedData struct {
	JobID  string      `json:"jobId"`
	Lease  *Lease      `json:"lease"`
	Missed []MissedRun `json:"missed"`
	Count  int64       `json:"count"`
}

// PolicyEventData is the data of a job.alerting or job.ok event: the job,
// the newest run its policy counted (nil for none), its lease, the job's
// alert reasons (for job.ok, those it recovered from) and, for
// job.alerting, whether it repeats an earlier one.
type PolicyEventData struct {
	JobID   string                 `json:"jobId"`
	Run     *Run                   `json:"run,omitempty"`
	Lease   *Lease                 `json:"lease"`
	Reasons []leaseapi.AlertReason `json:"reasons"`
	Repeat  *bool                  `json:"repeat,omitempty"`
}

// MissedRun is a missed run as a job.missed event lists it.
type MissedRun struct {
	Tick    *Time            `json:"tick"`
	Trigger leaseapi.Trigger `json:"trigger"`
	EndedAt *Time            `json:"endedAt"`
}

// MarshalWebhookData writes the data of e.
func MarshalWebhookData(e *leaseapi.WebhookEvent) ([]byte, error) {
	if e.Type == "job.missed" {
		d := JobMissedData{JobID: e.JobID, Missed: make([]MissedRun, len(e.Missed)), Count: e.MissedCount}
		if e.Lease != nil {
			l := FromLease(*e.Lease)
			d.Lease = &l
		}
		for i, r := range e.Missed {
			d.Missed[i] = MissedRun{Tick: timePtr(r.Tick), Trigger: r.Trigger, EndedAt: timePtr(r.EndedAt)}
		}
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("webhook data of %s: %w", e.ID, err)
		}
		return b, nil
	}
	if e.Type == "job.alerting" || e.Type == "job.ok" {
		return marshalPolicyEventData(e)
	}
	d := WebhookData{JobID: e.JobID}
	if e.Run != nil {
		r := FromRun(*e.Run)
		d.Run = &r
	}
	if e.Lease != nil {
		l := FromLease(*e.Lease)
		d.Lease = &l
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("webhook data of %s: %w", e.ID, err)
	}
	return b, nil
}

func marshalPolicyEventData(e *leaseapi.WebhookEvent) ([]byte, error) {
	d := PolicyEventData{JobID: e.JobID, Reasons: append([]leaseapi.AlertReason{}, e.AlertReasons...)}
	if e.Run != nil {
		r := FromRun(*e.Run)
		d.Run = &r
	}
	if e.Lease != nil {
		l := FromLease(*e.Lease)
		d.Lease = &l
	}
	if e.Type == "job.alerting" {
		repeat := e.Repeat
		d.Repeat = &repeat
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("webhook data of %s: %w", e.ID, err)
	}
	return b, nil
}
