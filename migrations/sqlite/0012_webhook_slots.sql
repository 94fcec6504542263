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

-- job.missed, as in migrations/postgres/0012_webhook_slots.sql: one event
-- per job per sweep pass that decided ticks missed, with its detail
-- {"count", "missed"}. The view webhook_enqueue of 0010 gains the detail
-- (NULL for the other events); its INSTEAD OF trigger goes with it.
ALTER TABLE webhook_outbox ADD COLUMN detail TEXT;

DROP VIEW webhook_enqueue;
CREATE VIEW webhook_enqueue AS SELECT NULL AS type, NULL AS job_id, NULL AS run_id, NULL AS detail WHERE 0;

-- +goose StatementBegin
CREATE TRIGGER webhook_enqueue_insert INSTEAD OF INSERT ON webhook_enqueue
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt, detail)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, NEW.type, NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.run_id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER), NEW.detail
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = NEW.type AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd

-- The sweep inserts a pass's missed runs before it updates the job's row,
-- so they are there when this trigger runs.
-- +goose StatementBegin
CREATE TRIGGER leases_webhook_missed AFTER UPDATE ON leases
WHEN NEW.missed_ticks > OLD.missed_ticks
    AND EXISTS (SELECT 1 FROM webhook_subscriptions WHERE event = 'job.missed')
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id, detail)
    VALUES ('job.missed', NEW.job_id, NULL, json_object(
        'count', NEW.missed_ticks - OLD.missed_ticks,
        'missed', json((SELECT json_group_array(json(m.run)) FROM (
            SELECT w.run FROM runs AS r JOIN webhook_runs AS w ON w.id = r.id
            WHERE r.job_id = NEW.job_id AND r.outcome = 'missed'
              AND COALESCE(r.started_at, r.tick) >= COALESCE(OLD.next_tick, -9223372036854775808)
              AND COALESCE(r.started_at, r.tick) < COALESCE(NEW.next_tick, 9223372036854775807)
            ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
            LIMIT 100) AS m))));
END;
-- +goose StatementEnd
