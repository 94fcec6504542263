-- +goose Up
-- Fair delivery: each webhook is its own queue. A delivery loop claims at
-- most one due event per webhook at a time (the head of its queue, found
-- through webhook_outbox_queue_idx). timed_out says that the webhook's last
-- attempt ran out of time; such a webhook holds at most one delivery slot
-- across all instances: it is claimed only while no claim of it is live,
-- neither claimed_until, the newest claim (of claim_event), nor any of its
-- events' (webhook_outbox_claimed_idx).
-- The claim sets both under the webhook's row lock (repo/postgres,
-- webhooks.go), and the report of claim_event clears them.
ALTER TABLE webhooks
    ADD COLUMN timed_out     boolean     NOT NULL DEFAULT false,
    ADD COLUMN claimed_until timestamptz,
    ADD COLUMN claim_event   text;

CREATE INDEX webhook_outbox_queue_idx ON webhook_outbox (webhook_id, next_attempt);
DROP INDEX webhook_outbox_webhook_idx;
-- The live claims of a webhook's events, for the check of a timed-out one.
CREATE INDEX webhook_outbox_claimed_idx ON webhook_outbox (webhook_id, claimed_until) WHERE claimed_until IS NOT NULL;
