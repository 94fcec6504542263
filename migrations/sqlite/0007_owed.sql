-- +goose Up
-- Owed ticks: the same columns as migrations/postgres/0007_owed.sql, times
-- in Unix milliseconds.
ALTER TABLE leases ADD COLUMN catch_up TEXT NOT NULL DEFAULT 'none'
    CHECK (catch_up IN ('none', 'latest'));
ALTER TABLE leases ADD COLUMN catch_up_window_ms INTEGER NOT NULL DEFAULT 86400000
    CHECK (catch_up_window_ms BETWEEN 60000 AND 604800000);
ALTER TABLE leases ADD COLUMN owed_tick INTEGER;
ALTER TABLE leases ADD COLUMN owed_reason TEXT CHECK (owed_reason IN ('catch-up', 'manual'));
ALTER TABLE leases ADD COLUMN owed_by TEXT;
ALTER TABLE leases ADD COLUMN owed_trigger_reason TEXT;
ALTER TABLE leases ADD COLUMN owed_until INTEGER;
ALTER TABLE leases ADD COLUMN manual_tick INTEGER;
ALTER TABLE leases ADD COLUMN manual_key TEXT;
ALTER TABLE leases ADD COLUMN grant_trigger TEXT NOT NULL DEFAULT 'schedule'
    CHECK (grant_trigger IN ('schedule', 'catch-up', 'manual'));
ALTER TABLE leases ADD COLUMN grant_triggered_by TEXT;

ALTER TABLE runs ADD COLUMN trigger TEXT NOT NULL DEFAULT 'schedule'
    CHECK (trigger IN ('schedule', 'catch-up', 'manual'));
ALTER TABLE runs ADD COLUMN triggered_by TEXT;

CREATE INDEX leases_owed_idx ON leases (owed_until) WHERE owed_tick IS NOT NULL;
