-- +goose Up
-- Schedules, missed ticks and pause. A job's schedule is registered by the
-- acquires that send one; a background sweep decides the fate of each of
-- its ticks once the tick's grace has passed (repo.(*Postgres).SweepTicks).
ALTER TABLE leases
    ADD COLUMN schedule       text,
    ADD COLUMN grace_ms       bigint CHECK (grace_ms > 0),
    -- When the current spec was registered: only its ticks after this count.
    ADD COLUMN schedule_since timestamptz,
    -- The oldest tick whose fate is undecided (NULL: the first tick after
    -- schedule_since), and when it is due to be decided: that tick + grace.
    ADD COLUMN next_tick      timestamptz,
    ADD COLUMN decide_at      timestamptz,
    ADD COLUMN paused_at      timestamptz,
    ADD COLUMN paused_by      text,
    ADD COLUMN paused_reason  text,
    ADD COLUMN missed_ticks   bigint NOT NULL DEFAULT 0,
    ADD COLUMN skipped_ticks  bigint NOT NULL DEFAULT 0,
    -- When the latest decided tick was decided missed (its tick + grace),
    -- NULL when it was not: a job with no grant since then is overdue.
    ADD COLUMN missed_at      timestamptz,
    ADD CONSTRAINT leases_schedule_has_grace CHECK ((schedule IS NULL) = (grace_ms IS NULL));

-- The sweep reads only the jobs that are due: a million scheduled jobs of
-- which a thousand are due cost a sweep of the thousand.
CREATE INDEX leases_decide_at_idx ON leases (decide_at) WHERE decide_at IS NOT NULL;

-- A missed run has a tick and an end but no token, owner or start.
-- expiry_counted: the sweep has counted this grant's passing its
-- expiresAt unreleased (leaseapi_lease_expirations_total), once.
ALTER TABLE runs
    ALTER COLUMN token DROP NOT NULL,
    ALTER COLUMN owner DROP NOT NULL,
    ALTER COLUMN started_at DROP NOT NULL,
    DROP CONSTRAINT runs_outcome_check,
    ADD CONSTRAINT runs_outcome_check
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked', 'missed')),
    ADD CONSTRAINT runs_missed_has_no_holder
        CHECK ((outcome = 'missed') = (token IS NULL) AND (token IS NULL) = (owner IS NULL)
               AND (token IS NULL) = (started_at IS NULL)),
    ADD COLUMN expiry_counted boolean NOT NULL DEFAULT false;

-- A job's runs are listed newest first by start, or by tick for a missed
-- run; the sweep reads the runs around the ticks it decides the same way.
CREATE INDEX runs_job_at_idx ON runs (job_id, (COALESCE(started_at, tick)));
-- The sweep looks for running grants that passed their expiresAt.
CREATE INDEX runs_running_idx ON runs (job_id) WHERE outcome = 'running' AND NOT expiry_counted;
