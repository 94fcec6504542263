-- +goose Up
-- Reads across jobs for the operations console: the newest runs of every
-- job, the runs that ended in the last 24 hours, the paused and the overdue
-- jobs. Each is read through an index, so that its cost grows with what it
-- answers, not with the run history (kept 7 days by default) or the jobs.

-- The newest runs of one outcome, across jobs: an index range scan from a
-- page's cursor (COALESCE(started_at, tick), id), read backwards. job_id is
-- a key column so that a scope's prefix is checked in the index, without a
-- visit to the table for every run of another team.
CREATE INDEX runs_outcome_at_idx ON runs (outcome, (COALESCE(started_at, tick)), id, job_id);

-- The runs that ended since a given instant, counted by outcome under a
-- prefix from the index alone. It also serves the pruner (oldest ended
-- first), so it replaces runs_ended_at_idx.
CREATE INDEX runs_ended_idx ON runs (ended_at) INCLUDE (outcome, job_id) WHERE ended_at IS NOT NULL;
DROP INDEX runs_ended_at_idx;

-- The lease list filtered to the paused jobs, or to the overdue ones (an
-- overdue job has missed_at set), in job id order. Neither column changes
-- when a lease is granted, renewed or released, so these indexes cost the
-- hot path nothing.
CREATE INDEX leases_paused_idx ON leases (job_id) WHERE paused_at IS NOT NULL;
CREATE INDEX leases_missed_idx ON leases (job_id) WHERE missed_at IS NOT NULL;
