package stores

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/leaseapi/leaseapi"
)

// What both stores share of the webhooks: the rows, the statements they
// run as written, and the reading of the run and lease an event carries.

// WebhookRow is a webhooks row of either store, with its newest attempt
// (the d_ columns, NULL before the first): events and scopes are JSON
// arrays; times are timestamptz in Postgres, Unix milliseconds in SQLite.
type WebhookRow struct {
	ID          string  `db:"id"`
	Name        *string `db:"name"`
	Digest      *string `db:"digest"`
	URLRedacted string  `db:"url_redacted"`
	Events      []byte  `db:"events"`
	Scopes      []byte  `db:"scopes"`
	Format      string  `db:"format"`
	CreatedBy   string  `db:"created_by"`
	CreatedAt   any     `db:"created_at"`

	DEventID   *string `db:"d_event_id"`
	DType      *string `db:"d_type"`
	DJobID     *string `db:"d_job_id"`
	DAttempt   *int    `db:"d_attempt"`
	DAt        any     `db:"d_attempted_at"`
	DStatus    *int    `db:"d_status"`
	DError     *string `db:"d_error"`
	DDelivered *bool   `db:"d_delivered"`
}

// NullString is s as a nullable column: nil for "".
func NullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// WebhookArrays are the JSON arrays of w's events and scopes, as stored:
// it normalizes w.Scopes first (leaseapi.NormalizeScopes), so that the
// unique index of (name, scopes) sees one spelling of a set of scopes.
func WebhookArrays(w *leaseapi.Webhook) (events, scopes string, err error) {
	w.Scopes = leaseapi.NormalizeScopes(w.Scopes)
	e, err := json.Marshal(w.Events)
	if err != nil {
		return "", "", fmt.Errorf("webhook events: %w", err)
	}
	s, err := json.Marshal(w.Scopes)
	if err != nil {
		return "", "", fmt.Errorf("webhook scopes: %w", err)
	}
	return string(e), string(s), nil
}

// Webhook is the webhook of r, without its URL and secret (a list never
// reads them).
func (r *WebhookRow) Webhook() (leaseapi.Webhook, error) {
	w := leaseapi.Webhook{ID: r.ID, Name: deref(r.Name), Digest: deref(r.Digest), URLRedacted: r.URLRedacted,
		Format: r.Format, CreatedBy: r.CreatedBy, CreatedAt: AnyTime(r.CreatedAt)}
	if err := json.Unmarshal(r.Events, &w.Events); err != nil {
		return w, fmt.Errorf("webhook %s events: %w", r.ID, err)
	}
	if err := json.Unmarshal(r.Scopes, &w.Scopes); err != nil {
		return w, fmt.Errorf("webhook %s scopes: %w", r.ID, err)
	}
	if r.DEventID != nil {
		d := DeliveryRow{EventID: *r.DEventID, Type: deref(r.DType), JobID: deref(r.DJobID), AttemptedAt: r.DAt,
			Status: r.DStatus, Error: r.DError}
		if r.DAttempt != nil {
			d.Attempt = *r.DAttempt
		}
		if r.DDelivered != nil {
			d.Delivered = *r.DDelivered
		}
		last := d.Delivery()
		w.LastDelivery = &last
	}
	return w, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// AnyTime reads a time column of either store: a time.Time (Postgres) or
// Unix milliseconds (SQLite).
func AnyTime(v any) time.Time {
	switch at := v.(type) {
	case time.Time:
		return at.UTC()
	case int64:
		return time.UnixMilli(at).UTC()
	}
	return time.Time{}
}

// OutboxRow is a claimed outbox row with its webhook's URL, secret and
// format; run and lease are JSON (to_jsonb of the rows in Postgres, the
// views of migrations/sqlite/0008 in SQLite).
type OutboxRow struct {
	ID        string `db:"id"`
	WebhookID string `db:"webhook_id"`
	Type      string `db:"type"`
	JobID     string `db:"job_id"`
	Run       []byte `db:"run"`
	Lease     []byte `db:"lease"`
	Detail    []byte `db:"detail"`
	CreatedAt any    `db:"created_at"`
	Attempts  int    `db:"attempts"`
	URL       string `db:"url"`
	Secret    string `db:"secret"`
	Format    string `db:"format"`
}

// Event is the event of r: its run and lease as the domain sees them at
// the event's instant.
func (r *OutboxRow) Event() (leaseapi.WebhookEvent, error) {
	e := leaseapi.WebhookEvent{ID: r.ID, WebhookID: r.WebhookID, Type: r.Type, JobID: r.JobID,
		CreatedAt: AnyTime(r.CreatedAt), Attempt: r.Attempts, URL: r.URL, Secret: r.Secret, Format: r.Format}
	if notNull(r.Lease) {
		var s leaseSnapshot
		if err := json.Unmarshal(r.Lease, &s); err != nil {
			return e, fmt.Errorf("webhook event %s lease: %w", r.ID, err)
		}
		l := s.lease(e.CreatedAt)
		e.Lease = &l
	}
	if notNull(r.Run) {
		var s runSnapshot
		if err := json.Unmarshal(r.Run, &s); err != nil {
			return e, fmt.Errorf("webhook event %s run: %w", r.ID, err)
		}
		run := s.run(e.JobID, e.Lease, e.CreatedAt)
		e.Run = &run
	}
	if notNull(r.Detail) {
		var d struct {
			Count   int64         `json:"count"`
			Missed  []runSnapshot `json:"missed"`
			Reasons []string      `json:"reasons"`
			Repeat  bool          `json:"repeat"`
		}
		if err := json.Unmarshal(r.Detail, &d); err != nil {
			return e, fmt.Errorf("webhook event %s detail: %w", r.ID, err)
		}
		if d.Missed != nil {
			e.MissedCount = d.Count
			e.Missed = make([]leaseapi.Run, len(d.Missed))
			for i := range d.Missed {
				e.Missed[i] = d.Missed[i].run(e.JobID, nil, e.CreatedAt)
			}
		}
		for _, reason := range d.Reasons {
			e.AlertReasons = append(e.AlertReasons, leaseapi.AlertReason(reason))
		}
		e.Repeat = d.Repeat
	}
	return e, nil
}

func notNull(b []byte) bool { return len(b) > 0 && !bytes.Equal(b, []byte("null")) }

// snapTime is a time of a row snapshot: an RFC 3339 string (Postgres's
// to_jsonb), Unix milliseconds (the SQLite views) or null.
type snapTime struct{ t *time.Time }

func (s *snapTime) UnmarshalJSON(b []byte) error {
	switch {
	case bytes.Equal(b, []byte("null")):
		s.t = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var t time.Time
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		t = t.UTC()
		s.t = &t
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	t := time.UnixMilli(ms).UTC()
	s.t = &t
	return nil
}

// or is the time, or the zero time for null.
func (s snapTime) or() time.Time {
	if s.t == nil {
		return time.Time{}
	}
	return *s.t
}

// leaseSnapshot is what an event carries of a leases row, under its
// column names.
type leaseSnapshot struct {
	JobID             string   `json:"job_id"`
	Owner             string   `json:"owner"`
	Token             int64    `json:"token"`
	Timeline          *int64   `json:"timeline"`
	Tick              snapTime `json:"tick"`
	TTLMs             int64    `json:"ttl_ms"`
	AcquiredAt        snapTime `json:"acquired_at"`
	RenewedAt         snapTime `json:"renewed_at"`
	ExpiresAt         snapTime `json:"expires_at"`
	ReleasedAt        snapTime `json:"released_at"`
	RevokedAt         snapTime `json:"revoked_at"`
	LastCompletedTick snapTime `json:"last_completed_tick"`
	LastOutcome       *string  `json:"last_outcome"`
	Schedule          *string  `json:"schedule"`
	GraceMs           *int64   `json:"grace_ms"`
	PausedAt          snapTime `json:"paused_at"`
	PausedBy          *string  `json:"paused_by"`
	PausedReason      *string  `json:"paused_reason"`
	MissedTicks       int64    `json:"missed_ticks"`
	SkippedTicks      int64    `json:"skipped_ticks"`
	RevokedBy         *string  `json:"revoked_by"`
	CatchUp           *string  `json:"catch_up"`
	CatchUpWindowMs   int64    `json:"catch_up_window_ms"`
	OwedTick          snapTime `json:"owed_tick"`
	OwedReason        *string  `json:"owed_reason"`
	OwedUntil         snapTime `json:"owed_until"`
	AlertStatus       *string  `json:"alert_status"`
	AlertReasons      *string  `json:"alert_reasons"`
}

// lease is the snapshot as the domain sees it at now, as the stores read a
// row (state, what it owes, its next tick).
func (s *leaseSnapshot) lease(now time.Time) leaseapi.Lease {
	l := leaseapi.Lease{
		JobID:             s.JobID,
		Owner:             s.Owner,
		Token:             s.Token,
		AcquiredAt:        s.AcquiredAt.or(),
		RenewedAt:         s.RenewedAt.or(),
		ExpiresAt:         s.ExpiresAt.or(),
		ReleasedAt:        s.ReleasedAt.t,
		TTL:               time.Duration(s.TTLMs) * time.Millisecond,
		Tick:              s.Tick.t,
		LastCompletedTick: s.LastCompletedTick.t,
		LastOutcome:       leaseapi.Outcome(deref(s.LastOutcome)),
		Schedule:          deref(s.Schedule),
		PausedAt:          s.PausedAt.t,
		PausedBy:          deref(s.PausedBy),
		PausedReason:      deref(s.PausedReason),
		MissedTicks:       s.MissedTicks,
		SkippedTicks:      s.SkippedTicks,
		CatchUp:           leaseapi.CatchUp(deref(s.CatchUp)),
		CatchUpWindow:     time.Duration(s.CatchUpWindowMs) * time.Millisecond,
		AlertStatus:       leaseapi.AlertStatus(deref(s.AlertStatus)),
		AlertReasons:      leaseapi.ParseAlertReasons(deref(s.AlertReasons)),
	}
	if s.Timeline != nil {
		l.Timeline = *s.Timeline
	}
	if s.GraceMs != nil {
		l.Grace = time.Duration(*s.GraceMs) * time.Millisecond
	}
	SetOwed(&l, s.OwedTick.t, deref(s.OwedReason), s.OwedUntil.t, now)
	if s.RevokedAt.t != nil {
		l.RevokedBy = deref(s.RevokedBy)
	}
	l.SetState(s.RevokedAt.t != nil, now)
	SetNextTick(&l, now)
	return l
}

// runSnapshot is what an event carries of a runs row.
type runSnapshot struct {
	Token       *int64   `json:"token"`
	Owner       *string  `json:"owner"`
	Tick        snapTime `json:"tick"`
	StartedAt   snapTime `json:"started_at"`
	EndedAt     snapTime `json:"ended_at"`
	Outcome     string   `json:"outcome"`
	RevokedBy   *string  `json:"revoked_by"`
	Trigger     string   `json:"trigger"`
	TriggeredBy *string  `json:"triggered_by"`
}

// run is the snapshot as the run history shows it at now: a run still
// marked running whose grant (l's) has expired is expired, ending at its
// expiry.
func (s *runSnapshot) run(jobID string, l *leaseapi.Lease, now time.Time) leaseapi.Run {
	r := leaseapi.Run{
		JobID:       jobID,
		Owner:       deref(s.Owner),
		Tick:        s.Tick.t,
		StartedAt:   s.StartedAt.t,
		EndedAt:     s.EndedAt.t,
		Outcome:     leaseapi.Outcome(s.Outcome),
		RevokedBy:   deref(s.RevokedBy),
		Trigger:     leaseapi.Trigger(s.Trigger),
		TriggeredBy: deref(s.TriggeredBy),
	}
	if s.Token != nil {
		r.Token = *s.Token
	}
	if r.Outcome == leaseapi.OutcomeRunning && l != nil && l.Token == r.Token &&
		l.ReleasedAt == nil && l.State != leaseapi.StateRevoked && !l.ExpiresAt.After(now) {
		end := l.ExpiresAt
		r.Outcome, r.EndedAt = leaseapi.OutcomeExpired, &end
	}
	return r
}

// DeliveryRow is a webhook_deliveries row.
type DeliveryRow struct {
	EventID     string  `db:"event_id"`
	Type        string  `db:"type"`
	JobID       string  `db:"job_id"`
	Attempt     int     `db:"attempt"`
	AttemptedAt any     `db:"attempted_at"`
	Status      *int    `db:"status"`
	Error       *string `db:"error"`
	Delivered   bool    `db:"delivered"`
}

// Delivery is the attempt of r.
func (r *DeliveryRow) Delivery() leaseapi.WebhookDelivery {
	d := leaseapi.WebhookDelivery{EventID: r.EventID, Type: r.Type, JobID: r.JobID, Attempt: r.Attempt,
		At: AnyTime(r.AttemptedAt), Delivered: r.Delivered, Error: deref(r.Error)}
	if r.Status != nil {
		d.Status = *r.Status
	}
	return d
}

// The statements of the webhooks that both stores run as written ($n
// placeholders, no clock).
const (
	DeleteWebhookQuery = `DELETE FROM webhooks WHERE id = $1`
	// WebhooksQuery reads every webhook with its newest attempt
	// (webhook_deliveries_webhook_idx), never its URL or secret.
	WebhooksQuery = `
SELECT w.id, w.name, w.digest, w.url_redacted, w.events, w.scopes, w.format, w.created_by, w.created_at,
	d.event_id AS d_event_id, d.type AS d_type, d.job_id AS d_job_id, d.attempt AS d_attempt,
	d.attempted_at AS d_attempted_at, d.status AS d_status, d.error AS d_error, d.delivered AS d_delivered
FROM webhooks AS w
LEFT JOIN webhook_deliveries AS d ON d.id = (SELECT max(id) FROM webhook_deliveries WHERE webhook_id = w.id)
ORDER BY w.id`
	webhookExistsQuery     = `SELECT count(*) FROM webhooks WHERE id = $1`
	webhookDeliveriesQuery = `
SELECT event_id, type, job_id, attempt, attempted_at, status, error, delivered FROM webhook_deliveries
WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2`
	WebhookOutboxQuery = `SELECT count(*) FROM webhook_outbox`
	// doneEventQuery removes a delivered or given-up event if the claim
	// reported is still the event's last ($2, its attempts).
	doneEventQuery = `DELETE FROM webhook_outbox WHERE id = $1 AND attempts = $2`
	// trimDeliveriesQuery keeps the newest $2 attempts of webhook $1.
	trimDeliveriesQuery = `
DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND id <= (
	SELECT id FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`
	// endWebhookClaimQuery records on webhook $1 whether the attempt at
	// event $2 timed out ($3), and ends the webhook's claim if it was that
	// event's.
	endWebhookClaimQuery = `
UPDATE webhooks SET timed_out = $3,
	claimed_until = CASE WHEN claim_event = $2 THEN NULL ELSE claimed_until END,
	claim_event = CASE WHEN claim_event = $2 THEN NULL ELSE claim_event END
WHERE id = $1`
	insertDeliveryQuery = `
INSERT INTO webhook_deliveries (webhook_id, event_id, type, job_id, attempt, attempted_at, status, error, delivered)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
)

// ReadWebhookDeliveries reads the log of webhook id, newest first, or
// ErrWebhookNotFound, in tx so that the two agree.
func ReadWebhookDeliveries(ctx context.Context, tx *sqlx.Tx, id string) ([]leaseapi.WebhookDelivery, error) {
	var n int
	if err := tx.GetContext(ctx, &n, webhookExistsQuery, id); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, leaseapi.ErrWebhookNotFound
	}
	var rows []DeliveryRow
	if err := tx.SelectContext(ctx, &rows, webhookDeliveriesQuery, id, leaseapi.MaxWebhookDeliveries); err != nil {
		return nil, err
	}
	return deliveriesOf(rows), nil
}

// RecordWebhookAttempt records attempt a in tx: first the webhook's row
// (whether the attempt timed out; its claim ended if it was this event's),
// so that a report locks the webhook before its event as a claim does; then
// its event is removed (done or given up) or, with a RetryIn, made due
// again by the store's retry statement ($1 event, $2 attempts, $3
// retryArg), in either case only if the claim reported is still the
// event's last (else ErrClaimLost, and the caller rolls tx back); then the
// attempt is logged at attemptedAt (the store's form of a.At) and the
// webhook's log trimmed to its newest MaxWebhookDeliveries.
func RecordWebhookAttempt(ctx context.Context, tx *sqlx.Tx, a *leaseapi.WebhookAttempt, retry string, retryArg, attemptedAt any) error {
	e := a.Event
	var (
		res interface{ RowsAffected() (int64, error) }
		err error
	)
	if _, err := tx.ExecContext(ctx, endWebhookClaimQuery, e.WebhookID, e.ID, a.TimedOut); err != nil {
		return err
	}
	if a.RetryIn <= 0 {
		res, err = tx.ExecContext(ctx, doneEventQuery, e.ID, e.Attempt)
	} else {
		res, err = tx.ExecContext(ctx, retry, e.ID, e.Attempt, retryArg)
	}
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return leaseapi.ErrClaimLost // claimed again, or its webhook deleted
	}
	if _, err := tx.ExecContext(ctx, insertDeliveryQuery, e.WebhookID, e.ID, e.Type, e.JobID, e.Attempt, attemptedAt,
		attemptStatus(a), attemptError(a), a.Delivered); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, trimDeliveriesQuery, e.WebhookID, leaseapi.MaxWebhookDeliveries)
	return err
}

// ValidateClaim checks the parameters of ClaimWebhookEvents.
func ValidateClaim(p *leaseapi.ClaimWebhookParams) error {
	if p.Limit < 1 {
		return &leaseapi.InvalidError{Field: "limit", Rule: "must be at least 1"}
	}
	if p.Claim < time.Millisecond {
		return &leaseapi.InvalidError{Field: "claim", Rule: "must be at least 1ms"}
	}
	return nil
}

// WebhooksOf are the webhooks of rows.
func WebhooksOf(rows []WebhookRow) ([]leaseapi.Webhook, error) {
	out := make([]leaseapi.Webhook, 0, len(rows))
	for i := range rows {
		w, err := rows[i].Webhook()
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// EventsOf are the events of claimed rows.
func EventsOf(rows []OutboxRow) ([]leaseapi.WebhookEvent, error) {
	out := make([]leaseapi.WebhookEvent, len(rows))
	for i := range rows {
		e, err := rows[i].Event()
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// deliveriesOf are the attempts of rows.
func deliveriesOf(rows []DeliveryRow) []leaseapi.WebhookDelivery {
	out := make([]leaseapi.WebhookDelivery, len(rows))
	for i := range rows {
		out[i] = rows[i].Delivery()
	}
	return out
}

// attemptStatus and attemptError are the stored forms of an attempt's
// answer: NULL for none, the error clipped to MaxWebhookErrorLen.
func attemptStatus(a *leaseapi.WebhookAttempt) *int {
	if a.Status == 0 {
		return nil
	}
	return &a.Status
}

// attemptError is the stored error of an attempt, nil when it had none.
func attemptError(a *leaseapi.WebhookAttempt) *string {
	if a.Error == "" {
		return nil
	}
	// Valid UTF-8 without NUL, as a Postgres text must be, cut at a
	// character's boundary.
	e := strings.ReplaceAll(strings.ToValidUTF8(a.Error, "?"), "\x00", "")
	if len(e) > leaseapi.MaxWebhookErrorLen {
		cut := leaseapi.MaxWebhookErrorLen
		for cut > 0 && !utf8.RuneStart(e[cut]) {
			cut--
		}
		e = e[:cut]
	}
	return &e
}
