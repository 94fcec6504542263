-- +goose Up
-- Fair delivery, as migrations/postgres/0012_webhook_slots.sql: each
-- webhook is its own queue (webhook_outbox_queue_idx finds its head), and
-- a webhook whose last attempt timed out is claimed only while no claim of
-- it is live (claimed_until, the claim of claim_event).
ALTER TABLE webhooks ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN claimed_until INTEGER;
ALTER TABLE webhooks ADD COLUMN claim_event TEXT;

CREATE INDEX webhook_outbox_queue_idx ON webhook_outbox (webhook_id, next_attempt);
DROP INDEX webhook_outbox_webhook_idx;
-- The live claims of a webhook's events, for the check of a timed-out one.
CREATE INDEX webhook_outbox_claimed_idx ON webhook_outbox (webhook_id, claimed_until) WHERE claimed_until IS NOT NULL;
