-- +goose Up
-- The embedded store's schema: the same tables as migrations/postgres, with
-- every time stored as INTEGER Unix milliseconds (UTC). Milliseconds are the
-- wire's precision, and integers compare exactly, so the store never
-- rounds a value between deciding and answering. STRICT makes SQLite
-- enforce the column types.

-- One row per job: the current grant when held, else the last one. job_id
-- uses SQLite's default BINARY collation, so it sorts bytewise like the
-- Postgres column (COLLATE "C").
CREATE TABLE leases (
    job_id              TEXT    NOT NULL PRIMARY KEY,
    owner               TEXT    NOT NULL,
    -- Fencing token: strictly increasing per job, bumped by every grant and revocation.
    token               INTEGER NOT NULL CHECK (token > 0),
    tick                INTEGER,
    ttl_ms              INTEGER NOT NULL CHECK (ttl_ms > 0),
    acquired_at         INTEGER NOT NULL,
    renewed_at          INTEGER NOT NULL,
    expires_at          INTEGER NOT NULL,
    released_at         INTEGER,
    revoked_at          INTEGER,
    last_completed_tick INTEGER,
    last_outcome        TEXT CHECK (last_outcome IN ('succeeded', 'failed', 'expired', 'revoked'))
) STRICT, WITHOUT ROWID;

-- Run history: one row per grant, written by the store in the same
-- transaction as the lease change that causes it (see repo/sqlite.go).
CREATE TABLE runs (
    id         INTEGER NOT NULL PRIMARY KEY,
    job_id     TEXT    NOT NULL REFERENCES leases (job_id),
    token      INTEGER NOT NULL,
    owner      TEXT    NOT NULL,
    tick       INTEGER,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    outcome    TEXT    NOT NULL DEFAULT 'running'
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked')),
    UNIQUE (job_id, token)
) STRICT;

-- Pruning deletes finished runs by age; running ones have no ended_at.
CREATE INDEX runs_ended_at_idx ON runs (ended_at) WHERE ended_at IS NOT NULL;
