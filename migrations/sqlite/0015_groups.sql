-- +goose Up
-- The tables and columns of migrations/postgres/0015_groups.sql, times in
-- Unix milliseconds.
CREATE TABLE groups (
    name        TEXT    NOT NULL PRIMARY KEY,
    "limit"     INTEGER NOT NULL CHECK ("limit" BETWEEN 1 AND 10000),
    slot_token  INTEGER NOT NULL DEFAULT 0 CHECK (slot_token >= 0),
    created_by  TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE group_slots (
    group_name    TEXT    NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    slot          INTEGER NOT NULL CHECK (slot >= 1),
    job_id        TEXT    NOT NULL,
    job_token     INTEGER NOT NULL,
    slot_token    INTEGER NOT NULL,
    revoked_until INTEGER,
    PRIMARY KEY (group_name, slot)
) STRICT;
CREATE INDEX group_slots_job_idx ON group_slots (job_id, job_token);

ALTER TABLE leases ADD COLUMN group_name TEXT REFERENCES groups (name);
ALTER TABLE leases ADD COLUMN slot INTEGER;
ALTER TABLE leases ADD COLUMN slot_token INTEGER;
CREATE INDEX leases_group_idx ON leases (group_name) WHERE group_name IS NOT NULL;

ALTER TABLE runs ADD COLUMN group_name TEXT;
ALTER TABLE runs ADD COLUMN slot INTEGER;
ALTER TABLE runs ADD COLUMN slot_token INTEGER;
ALTER TABLE runs ADD COLUMN group_full INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_group_idx ON runs (group_name, ended_at) WHERE group_name IS NOT NULL;
