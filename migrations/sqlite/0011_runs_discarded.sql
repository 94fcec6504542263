-- +goose Up
-- A repair (POST /leases/{jobId}/repair) sets aside the runs whose tick lay
-- ahead of the store's clock: their outcome becomes 'discarded', whatever
-- it was, so a discarded run may have no holder (a missed run's). SQLite
-- cannot change a CHECK in place: the run history moves to a new table, and
-- the views and triggers that name runs are made again as they were
-- (0008, 0010).
DROP TRIGGER leases_webhook_overdue;
DROP TRIGGER webhook_enqueue_insert;
DROP VIEW webhook_runs;

CREATE TABLE runs_v3 (
    id             INTEGER NOT NULL PRIMARY KEY,
    job_id         TEXT    NOT NULL REFERENCES leases (job_id),
    token          INTEGER,
    owner          TEXT,
    tick           INTEGER,
    started_at     INTEGER,
    ended_at       INTEGER,
    outcome        TEXT    NOT NULL DEFAULT 'running'
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked', 'missed', 'discarded')),
    expiry_counted INTEGER NOT NULL DEFAULT 0,
    revoked_by     TEXT,
    timeline       INTEGER,
    trigger        TEXT    NOT NULL DEFAULT 'schedule'
        CHECK (trigger IN ('schedule', 'catch-up', 'manual')),
    triggered_by   TEXT,
    CHECK ((outcome = 'discarded' OR (outcome = 'missed') = (token IS NULL))
           AND (token IS NULL) = (owner IS NULL) AND (token IS NULL) = (started_at IS NULL)),
    UNIQUE (job_id, token)
) STRICT;
INSERT INTO runs_v3 (id, job_id, token, owner, tick, started_at, ended_at, outcome, expiry_counted,
                     revoked_by, timeline, trigger, triggered_by)
    SELECT id, job_id, token, owner, tick, started_at, ended_at, outcome, expiry_counted,
           revoked_by, timeline, trigger, triggered_by FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;

CREATE INDEX runs_job_at_idx ON runs (job_id, COALESCE(started_at, tick));
CREATE INDEX runs_running_idx ON runs (job_id) WHERE outcome = 'running' AND expiry_counted = 0;
CREATE INDEX runs_outcome_at_idx ON runs (outcome, COALESCE(started_at, tick), id, job_id);
CREATE INDEX runs_ended_idx ON runs (ended_at, outcome, job_id) WHERE ended_at IS NOT NULL;

CREATE VIEW webhook_runs AS
SELECT id, job_id, json_object(
    'job_id', job_id, 'token', token, 'owner', owner, 'tick', tick, 'started_at', started_at,
    'ended_at', ended_at, 'outcome', outcome, 'revoked_by', revoked_by,
    'trigger', trigger, 'triggered_by', triggered_by) AS run
FROM runs;

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

-- +goose StatementBegin
CREATE TRIGGER runs_webhook_missed AFTER INSERT ON runs
WHEN NEW.outcome = 'missed' AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.missed', NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER runs_webhook_finished AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND NEW.outcome IN ('succeeded', 'failed') AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.' || NEW.outcome, NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

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

-- +goose StatementBegin
CREATE TRIGGER runs_webhook_expired AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND OLD.expiry_counted = 0
    AND (NEW.outcome = 'expired' OR NEW.expiry_counted = 1) AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_enqueue (type, job_id, run_id)
    VALUES ('run.expired', NEW.job_id, NEW.id);
END;
-- +goose StatementEnd

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
