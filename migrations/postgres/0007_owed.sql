-- +goose Up
-- Owed ticks: catch-up and run now (issue 25).
--
-- The job's catch-up policy and window, registered by the granted acquire
-- that sends them: with 'latest' a job whose latest decided tick was missed
-- owes that tick once while it is within the window.
ALTER TABLE leases ADD COLUMN catch_up text NOT NULL DEFAULT 'none'
    CHECK (catch_up IN ('none', 'latest'));
ALTER TABLE leases ADD COLUMN catch_up_window_ms bigint NOT NULL DEFAULT 86400000
    CHECK (catch_up_window_ms BETWEEN 60000 AND 604800000);

-- What the job owes, at most one tick: owed_tick and owed_reason, and for a
-- manual tick who triggered it and why, and until when it is claimable
-- (owed_until; the sweep records it missed after that). NULL when nothing
-- is owed.
ALTER TABLE leases ADD COLUMN owed_tick timestamptz;
ALTER TABLE leases ADD COLUMN owed_reason text CHECK (owed_reason IN ('catch-up', 'manual'));
ALTER TABLE leases ADD COLUMN owed_by text;
ALTER TABLE leases ADD COLUMN owed_trigger_reason text;
ALTER TABLE leases ADD COLUMN owed_until timestamptz;
ALTER TABLE leases ADD CONSTRAINT leases_owed_whole CHECK ((owed_tick IS NULL) = (owed_reason IS NULL));

-- The job's last manual tick and the Idempotency-Key of the trigger that
-- made it: a trigger with that key answers that tick whatever became of it.
ALTER TABLE leases ADD COLUMN manual_tick timestamptz;
ALTER TABLE leases ADD COLUMN manual_key text;

-- What started the current grant, copied to its run: a tick of the
-- schedule, or the owed tick it claimed.
ALTER TABLE leases ADD COLUMN grant_trigger text NOT NULL DEFAULT 'schedule'
    CHECK (grant_trigger IN ('schedule', 'catch-up', 'manual'));
ALTER TABLE leases ADD COLUMN grant_triggered_by text;

ALTER TABLE runs ADD COLUMN trigger text NOT NULL DEFAULT 'schedule'
    CHECK (trigger IN ('schedule', 'catch-up', 'manual'));
ALTER TABLE runs ADD COLUMN triggered_by text;

-- The jobs that owe something, for the gauges and the sweep of unclaimed
-- manual ticks; a read of owed ticks by id uses the primary key.
CREATE INDEX leases_owed_idx ON leases (owed_until) WHERE owed_tick IS NOT NULL;
