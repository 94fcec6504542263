package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// The embedded store's webhooks: as the Postgres store's (postgres
// webhooks.go), with the outbox written by the triggers of
// migrations/sqlite/0008 (their one insert: 0010). Writes are serialized,
// so a claim is plainly a read and an update in one write transaction.

var _ leaseapi.WebhookStore = (*Store)(nil)

const (
	insertWebhookQuery = `
INSERT INTO webhooks (id, url, url_redacted, secret, events, scopes, format, created_by, created_at, name, digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

	// dueEventsQuery reads the oldest event due at $1 that no live claim
	// holds of up to $2 webhooks, oldest head first, passing over the
	// webhooks of $3 (a JSON array: the caller's attempts in flight) and
	// a webhook whose last attempt timed out while its claim is live, as
	// the Postgres store's claim does.
	dueEventsQuery = `
SELECT o.id, o.webhook_id, o.type, o.job_id, o.run, o.lease, o.detail, o.created_at, o.attempts + 1 AS attempts,
	w.url, w.secret, w.format
FROM webhooks AS w JOIN webhook_outbox AS o ON o.id = (
	SELECT h.id FROM webhook_outbox AS h
	WHERE h.webhook_id = w.id AND h.next_attempt <= $1 AND (h.claimed_until IS NULL OR h.claimed_until <= $1)
	ORDER BY h.next_attempt, h.id
	LIMIT 1)
WHERE w.id NOT IN (SELECT value FROM json_each($3))
	AND (w.timed_out = 0 OR ((w.claimed_until IS NULL OR w.claimed_until <= $1)
		AND NOT EXISTS (SELECT 1 FROM webhook_outbox AS c WHERE c.webhook_id = w.id AND c.claimed_until > $1)))
ORDER BY o.next_attempt, w.id
LIMIT $2`
	claimEventQuery   = `UPDATE webhook_outbox SET claimed_until = $2, attempts = $3 WHERE id = $1`
	claimWebhookQuery = `
UPDATE webhooks SET claimed_until = $2, claim_event = $3
WHERE id = $1 AND (claimed_until IS NULL OR claimed_until <= $2)`
	retryEventQuery = `
UPDATE webhook_outbox SET next_attempt = $3, claimed_until = NULL WHERE id = $1 AND attempts = $2`
)

// CreateWebhook stores a webhook. See leaseapi.WebhookStore.
func (s *Store) CreateWebhook(ctx context.Context, w *leaseapi.Webhook) error {
	if err := w.Validate(); err != nil {
		return err
	}
	events, scopes, err := stores.WebhookArrays(w)
	if err != nil {
		return err
	}
	_, err = transact(ctx, s, "create webhook", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		if _, err := tx.ExecContext(ctx, insertWebhookQuery, w.ID, w.URL, w.URLRedacted, w.Secret,
			events, scopes, w.Format, w.CreatedBy, now, stores.NullString(w.Name), stores.NullString(w.Digest)); err != nil {
			if driverErr, ok := errors.AsType[*sqlitedrv.Error](err); ok && driverErr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
				return struct{}{}, fmt.Errorf("create webhook %q: %w", w.Name, leaseapi.ErrWebhookExists)
			}
			return struct{}{}, err
		}
		w.CreatedAt = fromMs(now)
		return struct{}{}, nil
	})
	return err
}

// DeleteWebhook deletes a webhook. See leaseapi.WebhookStore.
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	if !leaseapi.ValidWebhookID(id) {
		return leaseapi.ErrWebhookNotFound
	}
	_, err := transact(ctx, s, "delete webhook", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (struct{}, error) {
		res, err := tx.ExecContext(ctx, stores.DeleteWebhookQuery, id)
		if err != nil {
			return struct{}{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return struct{}{}, err
		} else if n == 0 {
			return struct{}{}, leaseapi.ErrWebhookNotFound
		}
		return struct{}{}, nil
	})
	return err
}

// Webhooks returns every webhook. See leaseapi.WebhookStore.
func (s *Store) Webhooks(ctx context.Context) ([]leaseapi.Webhook, error) {
	return transact(ctx, s, "read webhooks", s.readTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) ([]leaseapi.Webhook, error) {
		var rows []stores.WebhookRow
		if err := tx.SelectContext(ctx, &rows, stores.WebhooksQuery); err != nil {
			return nil, err
		}
		return stores.WebhooksOf(rows)
	})
}

// WebhookDeliveries returns a webhook's log. See leaseapi.WebhookStore.
func (s *Store) WebhookDeliveries(ctx context.Context, id string) ([]leaseapi.WebhookDelivery, error) {
	if !leaseapi.ValidWebhookID(id) {
		return nil, leaseapi.ErrWebhookNotFound
	}
	return transact(ctx, s, "read webhook deliveries", s.readTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) ([]leaseapi.WebhookDelivery, error) {
		return stores.ReadWebhookDeliveries(ctx, tx, id)
	})
}

// ClaimWebhookEvents claims due events. See leaseapi.WebhookStore.
func (s *Store) ClaimWebhookEvents(ctx context.Context, c *leaseapi.ClaimWebhookParams) ([]leaseapi.WebhookEvent, error) {
	if err := stores.ValidateClaim(c); err != nil {
		return nil, err
	}
	busy := c.Busy
	if busy == nil {
		busy = []string{}
	}
	busyJSON, err := json.Marshal(busy)
	if err != nil {
		return nil, fmt.Errorf("claim webhook events: %w", err)
	}
	return transact(ctx, s, "claim webhook events", s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) ([]leaseapi.WebhookEvent, error) {
		var rows []stores.OutboxRow
		if err := tx.SelectContext(ctx, &rows, dueEventsQuery, now, c.Limit, string(busyJSON)); err != nil {
			return nil, err
		}
		until := now + c.Claim.Milliseconds()
		for i := range rows {
			if _, err := tx.ExecContext(ctx, claimEventQuery, rows[i].ID, until, rows[i].Attempts); err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, claimWebhookQuery, rows[i].WebhookID, until, rows[i].ID); err != nil {
				return nil, err
			}
		}
		return stores.EventsOf(rows)
	})
}

// FinishWebhookAttempt records an attempt. See leaseapi.WebhookStore.
func (s *Store) FinishWebhookAttempt(ctx context.Context, a *leaseapi.WebhookAttempt) error {
	op := fmt.Sprintf("finish webhook event %s", a.Event.ID)
	_, err := transact(ctx, s, op, s.writeTx, func(ctx context.Context, tx *sqlx.Tx, now int64) (struct{}, error) {
		return struct{}{}, stores.RecordWebhookAttempt(ctx, tx, a, retryEventQuery, now+a.RetryIn.Milliseconds(), a.At.UnixMilli())
	})
	return err
}

// WebhookOutbox counts the waiting events. See leaseapi.WebhookStore.
func (s *Store) WebhookOutbox(ctx context.Context) (int64, error) {
	return transact(ctx, s, "count the webhook outbox", s.readTx, func(ctx context.Context, tx *sqlx.Tx, _ int64) (int64, error) {
		var n int64
		err := tx.GetContext(ctx, &n, stores.WebhookOutboxQuery)
		return n, err
	})
}
