-- +goose Up
-- The timeline a grant was written on, as in migrations/postgres/0006: the
-- embedded store has no replication and no promotions, so every grant is
-- on timeline 1 and its tokens are previous + 1.
ALTER TABLE leases ADD COLUMN timeline INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN timeline INTEGER;
UPDATE runs SET timeline = 1 WHERE token IS NOT NULL;
