package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/internal/stores"
)

// The Postgres store's webhooks. The outbox is written by the triggers of
// migrations/postgres/0008 in the transaction of whatever statement decides
// an event; this file manages the webhooks and serves the delivery loops.

var _ leaseapi.WebhookStore = (*Store)(nil)

const (
	insertWebhookQuery = `
INSERT INTO webhooks (id, url, url_redacted, secret, events, scopes, format, created_by, name, digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING created_at`

	// The outbox triggers of migrations/postgres/0008 are enabled only
	// while a webhook exists: the lease calls pay nothing for them
	// otherwise. A create or a delete first locks webhooks against the
	// others (SHARE ROW EXCLUSIVE conflicts with itself, not with the
	// triggers' reads), so the count it reads holds until it commits, and
	// switches the triggers in its own transaction: a webhook is never
	// committed without its triggers. Switching takes a lock on runs and
	// leases that waits for the lease calls in flight and holds the next
	// ones until the commit, so it is done only when the state changes,
	// and waits at most webhookLockTimeout (then 503, nothing done).
	lockWebhooksQuery            = `LOCK TABLE webhooks IN SHARE ROW EXCLUSIVE MODE`
	webhookLockTimeoutQuery      = `SET LOCAL lock_timeout = '500ms'`
	disabledWebhookTriggersQuery = `
SELECT count(*) FROM pg_trigger
WHERE tgrelid IN ('runs'::regclass, 'leases'::regclass)
	AND tgname IN ('runs_webhook_insert', 'runs_webhook_update', 'leases_webhook_overdue', 'leases_webhook_missed')
	AND tgenabled = 'D'`
	enableWebhookTriggersQuery = `
ALTER TABLE runs ENABLE TRIGGER runs_webhook_insert, ENABLE TRIGGER runs_webhook_update;
ALTER TABLE leases ENABLE TRIGGER leases_webhook_overdue, ENABLE TRIGGER leases_webhook_missed`
	anyWebhookQuery             = `SELECT EXISTS (SELECT 1 FROM webhooks)`
	disableWebhookTriggersQuery = `
ALTER TABLE runs DISABLE TRIGGER runs_webhook_insert, DISABLE TRIGGER runs_webhook_update;
ALTER TABLE leases DISABLE TRIGGER leases_webhook_overdue, DISABLE TRIGGER leases_webhook_missed`

	// claimEventsQuery claims, for $2 milliseconds, the oldest due event
	// that no live claim holds of up to $1 webhooks, oldest head first,
	// and counts the attempt, in one short statement. Each webhook is its
	// own queue: its head is found through webhook_outbox_queue_idx; the
	// webhooks of $3 (the caller's attempts in flight) are passed over, and
	// so is one whose last attempt timed out while a claim of it is live:
	// the webhook's own (the newest claim, set under its row lock) or any
	// of its events' (claims taken before it timed out).
	// The webhook's row lock (FOR NO KEY UPDATE: the outbox inserts' key
	// share locks pass) serializes the claims of a webhook: SKIP LOCKED
	// passes over one another instance is claiming, and one claimed and
	// committed meanwhile is checked again on its new version (its
	// claimed_until), as is the event's row when it is updated, so that
	// each event, and a timed-out webhook's one slot, goes to one claim.
	// statement_timestamp() rather than clock_timestamp() keeps
	// next_attempt an index condition.
	claimEventsQuery = `
WITH heads AS (
	SELECT w.id AS webhook_id, h.id, h.next_attempt
	FROM webhooks AS w
	CROSS JOIN LATERAL (
		SELECT o.id, o.next_attempt FROM webhook_outbox AS o
		WHERE o.webhook_id = w.id AND o.next_attempt <= statement_timestamp()
			AND (o.claimed_until IS NULL OR o.claimed_until <= statement_timestamp())
		ORDER BY o.next_attempt, o.id
		LIMIT 1) AS h
	WHERE w.id <> ALL ($3::text[])
		AND (NOT w.timed_out OR ((w.claimed_until IS NULL OR w.claimed_until <= statement_timestamp())
			AND NOT EXISTS (SELECT 1 FROM webhook_outbox AS c
				WHERE c.webhook_id = w.id AND c.claimed_until > statement_timestamp())))
	ORDER BY h.next_attempt, w.id
	LIMIT $1
	FOR NO KEY UPDATE OF w SKIP LOCKED
), claimed AS (
	UPDATE webhook_outbox AS o
	SET claimed_until = statement_timestamp() + $2::bigint * interval '1 millisecond', attempts = o.attempts + 1
	FROM heads
	WHERE o.id = heads.id AND (o.claimed_until IS NULL OR o.claimed_until <= statement_timestamp())
	RETURNING o.id, o.webhook_id, o.type, o.job_id, o.run, o.lease, o.detail, o.created_at, o.attempts, o.claimed_until
), held AS (
	UPDATE webhooks AS w SET claimed_until = c.claimed_until, claim_event = c.id
	FROM claimed AS c
	WHERE w.id = c.webhook_id AND (w.claimed_until IS NULL OR w.claimed_until <= c.claimed_until)
)
SELECT c.id, c.webhook_id, c.type, c.job_id, c.run, c.lease, c.detail, c.created_at, c.attempts, w.url, w.secret, w.format
FROM claimed AS c JOIN webhooks AS w ON w.id = c.webhook_id
ORDER BY c.created_at, c.id`

	// retryEventQuery makes a claimed event due again after $3
	// milliseconds, if the claim reported is still its last ($2).
	retryEventQuery = `
UPDATE webhook_outbox SET next_attempt = clock_timestamp() + $3::bigint * interval '1 millisecond', claimed_until = NULL
WHERE id = $1 AND attempts = $2`
)

// CreateWebhook stores a webhook, and enables the outbox triggers if it is
// the first. See leaseapi.WebhookStore.
func (p *Store) CreateWebhook(ctx context.Context, w *leaseapi.Webhook) error {
	if err := w.Validate(); err != nil {
		return err
	}
	events, scopes, err := stores.WebhookArrays(w)
	if err != nil {
		return err
	}
	_, err = bounded(ctx, func(ctx context.Context) (struct{}, error) {
		var at time.Time
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			if err := lockWebhooks(ctx, tx); err != nil {
				return err
			}
			if err := tx.GetContext(ctx, &at, insertWebhookQuery, w.ID, w.URL, w.URLRedacted, w.Secret,
				events, scopes, w.Format, w.CreatedBy, stores.NullString(w.Name), stores.NullString(w.Digest)); err != nil {
				if pqErr, ok := errors.AsType[*pq.Error](err); ok && pqErr.Code == "23505" { // unique_violation
					return fmt.Errorf("create webhook %q: %w", w.Name, leaseapi.ErrWebhookExists)
				}
				return err
			}
			var disabled int
			if err := tx.GetContext(ctx, &disabled, disabledWebhookTriggersQuery); err != nil {
				return err
			}
			if disabled > 0 {
				_, err := tx.ExecContext(ctx, enableWebhookTriggersQuery)
				return err
			}
			return nil
		})
		if errors.Is(err, leaseapi.ErrWebhookExists) {
			return struct{}{}, err
		}
		if err != nil {
			return struct{}{}, interpretError("create webhook", err)
		}
		w.CreatedAt = at.UTC()
		return struct{}{}, nil
	})
	return err
}

// lockWebhooks serializes the creates and deletes of webhooks.
func lockWebhooks(ctx context.Context, tx *sqlx.Tx) error {
	if _, err := tx.ExecContext(ctx, webhookLockTimeoutQuery); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, lockWebhooksQuery)
	return err
}

// DeleteWebhook deletes a webhook, and disables the outbox triggers if it
// was the last. See leaseapi.WebhookStore.
func (p *Store) DeleteWebhook(ctx context.Context, id string) error {
	if !leaseapi.ValidWebhookID(id) {
		return leaseapi.ErrWebhookNotFound
	}
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			if err := lockWebhooks(ctx, tx); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, stores.DeleteWebhookQuery, id)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				return leaseapi.ErrWebhookNotFound
			}
			var remain bool
			if err := tx.GetContext(ctx, &remain, anyWebhookQuery); err != nil {
				return err
			}
			if !remain {
				_, err = tx.ExecContext(ctx, disableWebhookTriggersQuery)
			}
			return err
		})
		if errors.Is(err, leaseapi.ErrWebhookNotFound) {
			return struct{}{}, err
		}
		return struct{}{}, interpretError("delete webhook", err)
	})
	return err
}

// Webhooks returns every webhook. See leaseapi.WebhookStore.
func (p *Store) Webhooks(ctx context.Context) ([]leaseapi.Webhook, error) {
	return bounded(ctx, func(ctx context.Context) ([]leaseapi.Webhook, error) {
		var rows []stores.WebhookRow
		if err := p.db.SelectContext(ctx, &rows, stores.WebhooksQuery); err != nil {
			return nil, interpretError("read webhooks", err)
		}
		return stores.WebhooksOf(rows)
	})
}

// WebhookDeliveries returns a webhook's log. See leaseapi.WebhookStore.
func (p *Store) WebhookDeliveries(ctx context.Context, id string) ([]leaseapi.WebhookDelivery, error) {
	if !leaseapi.ValidWebhookID(id) {
		return nil, leaseapi.ErrWebhookNotFound
	}
	return bounded(ctx, func(ctx context.Context) ([]leaseapi.WebhookDelivery, error) {
		var out []leaseapi.WebhookDelivery
		err := p.inTx(ctx, func(tx *sqlx.Tx) (err error) {
			out, err = stores.ReadWebhookDeliveries(ctx, tx, id)
			return err
		})
		if errors.Is(err, leaseapi.ErrWebhookNotFound) {
			return nil, err
		}
		return out, interpretError("read webhook deliveries", err)
	})
}

// ClaimWebhookEvents claims due events. See leaseapi.WebhookStore.
func (p *Store) ClaimWebhookEvents(ctx context.Context, c *leaseapi.ClaimWebhookParams) ([]leaseapi.WebhookEvent, error) {
	if err := stores.ValidateClaim(c); err != nil {
		return nil, err
	}
	busy := c.Busy
	if busy == nil {
		busy = []string{}
	}
	return bounded(ctx, func(ctx context.Context) ([]leaseapi.WebhookEvent, error) {
		var rows []stores.OutboxRow
		if err := p.db.SelectContext(ctx, &rows, claimEventsQuery, c.Limit, c.Claim.Milliseconds(), pq.Array(busy)); err != nil {
			return nil, interpretError("claim webhook events", err)
		}
		return stores.EventsOf(rows)
	})
}

// FinishWebhookAttempt records an attempt. See leaseapi.WebhookStore.
func (p *Store) FinishWebhookAttempt(ctx context.Context, a *leaseapi.WebhookAttempt) error {
	op := fmt.Sprintf("finish webhook event %s", a.Event.ID)
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		err := p.inTx(ctx, func(tx *sqlx.Tx) error {
			return stores.RecordWebhookAttempt(ctx, tx, a, retryEventQuery, a.RetryIn.Milliseconds(), a.At)
		})
		if errors.Is(err, leaseapi.ErrClaimLost) {
			return struct{}{}, fmt.Errorf("%s: %w", op, err)
		}
		return struct{}{}, interpretError(op, err)
	})
	return err
}

// WebhookOutbox counts the waiting events. See leaseapi.WebhookStore.
func (p *Store) WebhookOutbox(ctx context.Context) (int64, error) {
	return bounded(ctx, func(ctx context.Context) (int64, error) {
		var n int64
		err := p.db.GetContext(ctx, &n, stores.WebhookOutboxQuery)
		return n, interpretError("count the webhook outbox", err)
	})
}
