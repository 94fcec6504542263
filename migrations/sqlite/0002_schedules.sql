-- +goose Up
-- Schedules, missed ticks and pause: the same columns as
-- migrations/postgres/0002_schedules.sql, times in Unix milliseconds.
ALTER TABLE leases ADD COLUMN schedule TEXT;
ALTER TABLE leases ADD COLUMN grace_ms INTEGER CHECK (grace_ms > 0);
ALTER TABLE leases ADD COLUMN schedule_since INTEGER;
ALTER TABLE leases ADD COLUMN next_tick INTEGER;
ALTER TABLE leases ADD COLUMN decide_at INTEGER;
ALTER TABLE leases ADD COLUMN paused_at INTEGER;
ALTER TABLE leases ADD COLUMN paused_by TEXT;
ALTER TABLE leases ADD COLUMN paused_reason TEXT;
ALTER TABLE leases ADD COLUMN missed_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN skipped_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN missed_at INTEGER;

CREATE INDEX leases_decide_at_idx ON leases (decide_at) WHERE decide_at IS NOT NULL;

-- SQLite cannot change a column's constraints in place: the run history
-- moves to a table whose token, owner and start may be NULL (a missed run).
CREATE TABLE runs_v2 (
    id             INTEGER NOT NULL PRIMARY KEY,
    job_id         TEXT    NOT NULL REFERENCES leases (job_id),
    token          INTEGER,
    owner          TEXT,
    tick           INTEGER,
    started_at     INTEGER,
    ended_at       INTEGER,
    outcome        TEXT    NOT NULL DEFAULT 'running'
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked', 'missed')),
    expiry_counted INTEGER NOT NULL DEFAULT 0,
    CHECK ((outcome = 'missed') = (token IS NULL) AND (token IS NULL) = (owner IS NULL)
           AND (token IS NULL) = (started_at IS NULL)),
    UNIQUE (job_id, token)
) STRICT;
INSERT INTO runs_v2 (id, job_id, token, owner, tick, started_at, ended_at, outcome)
    SELECT id, job_id, token, owner, tick, started_at, ended_at, outcome FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;

CREATE INDEX runs_ended_at_idx ON runs (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX runs_job_at_idx ON runs (job_id, COALESCE(started_at, tick));
CREATE INDEX runs_running_idx ON runs (job_id) WHERE outcome = 'running' AND expiry_counted = 0;
