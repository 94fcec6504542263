-- +goose Up
-- Concurrency groups. A group is a limit and the slot token it issued
-- last; a slot row records the grant that took that slot last (job id,
-- the job's token, the slot token) and, once that grant was revoked, the
-- expiry it had then (revoked_until). Whether a slot is in use is decided
-- in Go from the slot row and its job's lease (decide.SlotInUse). Grants
-- take slots under the group row's lock; a revocation writes the slot row
-- after the lease row, so lock order is group, lease, slot.
CREATE TABLE groups (
    name        text        NOT NULL PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    "limit"     integer     NOT NULL CHECK ("limit" BETWEEN 1 AND 10000),
    slot_token  bigint      NOT NULL DEFAULT 0 CHECK (slot_token >= 0),
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE group_slots (
    group_name    text        NOT NULL REFERENCES groups (name) ON DELETE CASCADE,
    slot          integer     NOT NULL CHECK (slot >= 1),
    job_id        text        NOT NULL,
    job_token     bigint      NOT NULL,
    slot_token    bigint      NOT NULL,
    revoked_until timestamptz,
    PRIMARY KEY (group_name, slot)
);
CREATE INDEX group_slots_job_idx ON group_slots (job_id, job_token);

-- The job's group, and the slot its current grant took (NULL: none).
ALTER TABLE leases
    ADD COLUMN group_name text REFERENCES groups (name),
    ADD COLUMN slot       integer,
    ADD COLUMN slot_token bigint;
CREATE INDEX leases_group_idx ON leases (group_name) WHERE group_name IS NOT NULL;

-- The group and slot of a grant's run; group_full marks a missed tick
-- whose group had every slot in use when its grace ended.
ALTER TABLE runs
    ADD COLUMN group_name text,
    ADD COLUMN slot       integer,
    ADD COLUMN slot_token bigint,
    ADD COLUMN group_full boolean NOT NULL DEFAULT false;
-- The sweep's question of a missed tick: which grants of the group were
-- held when its grace ended.
CREATE INDEX runs_group_idx ON runs (group_name, ended_at) WHERE group_name IS NOT NULL;
