-- +goose Up
-- Reads across jobs for the operations console: the same indexes as
-- migrations/postgres/0004_console.sql.

-- The newest runs of one outcome, across jobs, from a page's cursor
-- (COALESCE(started_at, tick), id); job_id is in the index so that a
-- scope's prefix is checked without reading the table.
CREATE INDEX runs_outcome_at_idx ON runs (outcome, COALESCE(started_at, tick), id, job_id);

-- The runs that ended since a given instant, counted by outcome under a
-- prefix from the index alone; the pruner reads it too, so it replaces
-- runs_ended_at_idx.
CREATE INDEX runs_ended_idx ON runs (ended_at, outcome, job_id) WHERE ended_at IS NOT NULL;
DROP INDEX runs_ended_at_idx;

-- The lease list filtered to the paused or the overdue jobs.
CREATE INDEX leases_paused_idx ON leases (job_id) WHERE paused_at IS NOT NULL;
CREATE INDEX leases_missed_idx ON leases (job_id) WHERE missed_at IS NOT NULL;
