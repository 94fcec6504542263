-- +goose Up
-- The tables and columns of migrations/postgres/0016_policies.sql, times in
-- Unix milliseconds.
CREATE TABLE job_policies (
    job_id                 TEXT    NOT NULL PRIMARY KEY REFERENCES leases (job_id) ON DELETE CASCADE,
    consecutive_failures   INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_failures BETWEEN 0 AND 100),
    failure_rate_threshold REAL    CHECK (failure_rate_threshold > 0 AND failure_rate_threshold <= 1),
    failure_rate_runs      INTEGER CHECK (failure_rate_runs BETWEEN 1 AND 64),
    max_runtime_ms         INTEGER NOT NULL DEFAULT 0 CHECK (max_runtime_ms >= 0),
    min_runtime_ms         INTEGER NOT NULL DEFAULT 0 CHECK (min_runtime_ms >= 0),
    missed_ticks           INTEGER NOT NULL DEFAULT 0 CHECK (missed_ticks BETWEEN 0 AND 100),
    recovery_threshold     INTEGER NOT NULL DEFAULT 0 CHECK (recovery_threshold BETWEEN 0 AND 100),
    realert_after_ms       INTEGER NOT NULL DEFAULT 0 CHECK (realert_after_ms >= 0),
    status                 TEXT    NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'alerting')),
    reasons                TEXT    NOT NULL DEFAULT '',
    since                  INTEGER NOT NULL,
    alerted_at             INTEGER,
    exceeded_token         INTEGER NOT NULL DEFAULT 0,
    updated_by             TEXT    NOT NULL DEFAULT '',
    updated_at             INTEGER NOT NULL
) STRICT;
CREATE INDEX job_policies_runtime_idx ON job_policies (job_id) WHERE max_runtime_ms > 0;

ALTER TABLE leases ADD COLUMN alert_status TEXT CHECK (alert_status IN ('ok', 'alerting'));
ALTER TABLE leases ADD COLUMN alert_reasons TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN policy_due_at INTEGER;
CREATE INDEX leases_policy_due_idx ON leases (policy_due_at) WHERE policy_due_at IS NOT NULL;

-- An event's lease shows where the job's policy stands.
DROP VIEW webhook_leases;
CREATE VIEW webhook_leases AS
SELECT job_id, json_object(
    'job_id', job_id, 'owner', owner, 'token', token, 'timeline', timeline, 'tick', tick, 'ttl_ms', ttl_ms,
    'acquired_at', acquired_at, 'renewed_at', renewed_at, 'expires_at', expires_at,
    'released_at', released_at, 'revoked_at', revoked_at, 'last_completed_tick', last_completed_tick,
    'last_outcome', last_outcome, 'schedule', schedule, 'grace_ms', grace_ms,
    'paused_at', paused_at, 'paused_by', paused_by, 'paused_reason', paused_reason,
    'missed_ticks', missed_ticks, 'skipped_ticks', skipped_ticks, 'revoked_by', revoked_by,
    'catch_up', catch_up, 'catch_up_window_ms', catch_up_window_ms,
    'owed_tick', owed_tick, 'owed_reason', owed_reason, 'owed_until', owed_until,
    'alert_status', alert_status, 'alert_reasons', alert_reasons) AS lease
FROM leases;
