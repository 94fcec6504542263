-- +goose Up
-- Scoped credentials: the same tables as
-- migrations/postgres/0003_credentials.sql, times in Unix milliseconds.
CREATE TABLE credentials (
    id              TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 15 AND id GLOB 'lk_[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]'),
    name            TEXT    NOT NULL UNIQUE,
    role            TEXT    NOT NULL CHECK (role IN ('read', 'lease', 'admin')),
    scopes          TEXT    NOT NULL,
    rate_per_second REAL    CHECK (rate_per_second >= 0),
    secret_sha256   BLOB    NOT NULL CHECK (length(secret_sha256) = 32),
    created_at      INTEGER NOT NULL
) STRICT;

CREATE TABLE settings (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

ALTER TABLE leases ADD COLUMN revoked_by TEXT;
ALTER TABLE runs ADD COLUMN revoked_by TEXT;
