-- +goose Up
-- Webhooks: the same tables as migrations/postgres/0008_webhooks.sql,
-- times in Unix milliseconds, events, scopes, run and lease as JSON text.
-- The outbox rows are written by the triggers below, in the transaction
-- of the statement that decides the event.
CREATE TABLE webhooks (
    id           TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 15 AND id GLOB 'wh_[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]'),
    url          TEXT    NOT NULL,
    url_redacted TEXT    NOT NULL,
    secret       TEXT    NOT NULL,
    events       TEXT    NOT NULL CHECK (json_type(events) = 'array'),
    scopes       TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
    format       TEXT    NOT NULL CHECK (format IN ('standard', 'slack')),
    created_by   TEXT    NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE webhook_outbox (
    id            TEXT    NOT NULL PRIMARY KEY,
    webhook_id    TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    type          TEXT    NOT NULL,
    job_id        TEXT    NOT NULL,
    run           TEXT,
    lease         TEXT,
    created_at    INTEGER NOT NULL,
    next_attempt  INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    claimed_until INTEGER
) STRICT;
CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt);
CREATE INDEX webhook_outbox_webhook_idx ON webhook_outbox (webhook_id);

CREATE TABLE webhook_deliveries (
    id           INTEGER NOT NULL PRIMARY KEY,
    webhook_id   TEXT    NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id     TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    job_id       TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    attempted_at INTEGER NOT NULL,
    status       INTEGER,
    error        TEXT,
    delivered    INTEGER NOT NULL
) STRICT;
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id);

-- What an event carries of a lease and of a run: the columns the store
-- reads back (repo/internal/stores, webhooks.go), under the names of the
-- Postgres rows' to_jsonb, times in Unix milliseconds.
CREATE VIEW webhook_leases AS
SELECT job_id, json_object(
    'job_id', job_id, 'owner', owner, 'token', token, 'timeline', timeline, 'tick', tick, 'ttl_ms', ttl_ms,
    'acquired_at', acquired_at, 'renewed_at', renewed_at, 'expires_at', expires_at,
    'released_at', released_at, 'revoked_at', revoked_at, 'last_completed_tick', last_completed_tick,
    'last_outcome', last_outcome, 'schedule', schedule, 'grace_ms', grace_ms,
    'paused_at', paused_at, 'paused_by', paused_by, 'paused_reason', paused_reason,
    'missed_ticks', missed_ticks, 'skipped_ticks', skipped_ticks, 'revoked_by', revoked_by,
    'catch_up', catch_up, 'catch_up_window_ms', catch_up_window_ms,
    'owed_tick', owed_tick, 'owed_reason', owed_reason, 'owed_until', owed_until) AS lease
FROM leases;

CREATE VIEW webhook_runs AS
SELECT id, job_id, json_object(
    'job_id', job_id, 'token', token, 'owner', owner, 'tick', tick, 'started_at', started_at,
    'ended_at', ended_at, 'outcome', outcome, 'revoked_by', revoked_by,
    'trigger', trigger, 'triggered_by', triggered_by) AS run
FROM runs;

-- The webhooks subscribed to each event, with the scopes they hear of.
CREATE VIEW webhook_subscriptions AS
SELECT w.id AS webhook_id, e.value AS event, s.value AS scope
FROM webhooks AS w, json_each(w.events) AS e, json_each(w.scopes) AS s;

-- The events, decided as in Postgres (its migration 0008 says why each is
-- told where it is): a release, the sweep (a missed run, a grant's expiry
-- counted) and a takeover that closes a grant whose expiry was not
-- counted yet. With no webhook, a WHEN ends at its EXISTS.
-- +goose StatementBegin
CREATE TRIGGER runs_webhook_missed AFTER INSERT ON runs
WHEN NEW.outcome = 'missed' AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, 'run.missed', NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = 'run.missed' AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER runs_webhook_finished AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND NEW.outcome IN ('succeeded', 'failed') AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, 'run.' || NEW.outcome, NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = 'run.' || NEW.outcome AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
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
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, 'job.recovered', NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = 'job.recovered' AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER runs_webhook_expired AFTER UPDATE ON runs
WHEN OLD.outcome = 'running' AND OLD.expiry_counted = 0
    AND (NEW.outcome = 'expired' OR NEW.expiry_counted = 1) AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, 'run.expired', NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = NEW.id),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = 'run.expired' AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd

-- job.overdue, once per episode: the sweep's decision (missed_at moves)
-- makes the job overdue (stores.OverdueCondition) when it was not. The
-- sweep records the missed runs before it updates the lease, so the
-- newest run is the missed one.
-- +goose StatementBegin
CREATE TRIGGER leases_webhook_overdue AFTER UPDATE ON leases
WHEN NEW.missed_at IS NOT OLD.missed_at
    AND NEW.schedule IS NOT NULL AND NEW.paused_at IS NULL AND NEW.missed_at IS NOT NULL
    AND NEW.acquired_at < NEW.missed_at
    AND NOT COALESCE(OLD.schedule IS NOT NULL AND OLD.paused_at IS NULL AND OLD.missed_at IS NOT NULL
                     AND OLD.acquired_at < OLD.missed_at, 0)
    AND EXISTS (SELECT 1 FROM webhooks)
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || lower(hex(randomblob(16))), s.webhook_id, 'job.overdue', NEW.job_id,
        (SELECT run FROM webhook_runs WHERE id = (SELECT id FROM runs WHERE job_id = NEW.job_id
                                                  ORDER BY COALESCE(started_at, tick) DESC, id DESC LIMIT 1)),
        (SELECT lease FROM webhook_leases WHERE job_id = NEW.job_id),
        CAST(unixepoch('subsec') * 1000 AS INTEGER), CAST(unixepoch('subsec') * 1000 AS INTEGER)
    FROM (SELECT DISTINCT webhook_id FROM webhook_subscriptions
          WHERE event = 'job.overdue' AND (scope = '*' OR substr(NEW.job_id, 1, length(scope)) = scope)) AS s;
END;
-- +goose StatementEnd
