-- +goose Up
-- The webhook events' one insert into the outbox, said once: the triggers
-- of 0008 each wrote it out in full (SQLite has no functions of SQL).
-- Inserting (type, job_id, run_id) into the view webhook_enqueue writes
-- one event of that type for every webhook subscribed to it whose scopes
-- hold the job, carrying run run_id and the job's lease as they are now,
-- as webhook_enqueue() does in Postgres (migrations/postgres/0008).
CREATE VIEW webhook_enqueue AS SELECT NULL AS type, NULL AS job_id, NULL AS run_id WHERE 0;

-- +goose StatementBegin
CREATE TRIGGER webhook_enqueue_insert INSTEAD OF INSERT ON webhook_enqueue
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, NEW.type, NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.run_id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = NEW.type AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd

-- The events' triggers of 0008, each now naming its event and its run.
DROP TRIGGER runs_webhook_missed;
-- +goose StatementBegin
CREATE TRIGGER runs_webhook_missed AFTER INSERT ON runs
WHEN NEW.outcome = 'missed' AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.missed', NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

DROP TRIGGER runs_webhook_finished;
-- +goose StatementBegin
CREATE TRIGGER runs_webhook_finished AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND NEW.outcome IN ('succeeded', 'failed') AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.' || NEW.outcome, NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

DROP TRIGGER runs_webhook_recovered;
-- +goose StatementBegin
CREATE TRIGGER runs_webhook_recovered AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND NEW.outcome = 'succeeded' AND EXISTS (SELECT 1 FROM webhooks)
    AND (SELECT outcome FROM runs
         WHERE job_id = NEW.job_id AND id <> NEW.id AND outcome NOT IN ('running', 'revoked')
           AND COALESCE(started_at, tick) <= NEW.started_at
         ORDER BY COALESCE(started_at, tick) DESC, id DESC LIMIT 1) IN ('failed', 'expired', 'missed')
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('job.recovered', NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

DROP TRIGGER runs_webhook_expired;
-- +goose StatementBegin
CREATE TRIGGER runs_webhook_expired AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND OLD.expiry_counted = 0
    AND (NEW.outcome = 'expired' OR NEW.expiry_counted = 1) AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.expired', NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

DROP TRIGGER leases_webhook_overdue;
-- +goose StatementBegin
CREATE TRIGGER leases_webhook_overdue AFTER UPDATE ON leases
WHEN NEW.missed_at IS NOT OLD.missed_at
    AND NEW.schedule IS NOT NULL AND NEW.paused_at IS NULL AND NEW.missed_at IS NOT NULL
    AND NEW.acquired_at < NEW.missed_at
    AND NOT COALESCE(OLD.schedule IS NOT NULL AND OLD.paused_at IS NULL AND OLD.missed_at IS NOT NULL
                     AND OLD.acquired_at < OLD.missed_at, 0)
    AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('job.overdue', NEW.job_id, (SELECT id FROM runs WHERE job_id = NEW.job_id
                                        ORDER BY COALESCE(started_at, tick) DESC, id DESC LIMIT 1));
END;
-- +goose StatementEnd
