-- +goose Up
-- The changes of migrations/postgres/0013_teams.sql, times in Unix
-- milliseconds. SQLite cannot drop a column's UNIQUE constraint: the
-- credentials table is rebuilt with (name, scopes) unique instead.
CREATE TABLE credentials_0013 (
    id              TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 15 AND id GLOB 'lk_[a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9][a-z0-9]'),
    name            TEXT    NOT NULL,
    role            TEXT    NOT NULL CHECK (role IN ('read', 'lease', 'admin')),
    scopes          TEXT    NOT NULL,
    rate_per_second REAL    CHECK (rate_per_second >= 0),
    secret_sha256   BLOB    NOT NULL CHECK (length(secret_sha256) = 32),
    created_at      INTEGER NOT NULL
) STRICT;
INSERT INTO credentials_0013 (id, name, role, scopes, rate_per_second, secret_sha256, created_at)
SELECT id, name, role, scopes, rate_per_second, secret_sha256, created_at FROM credentials;
DROP TABLE credentials;
ALTER TABLE credentials_0013 RENAME TO credentials;
CREATE UNIQUE INDEX credentials_name_scopes_key ON credentials (name, scopes);

CREATE TABLE idempotency_keys (
    credential   TEXT    NOT NULL,
    key          TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
    fingerprint  BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    created_at   INTEGER NOT NULL,
    locked_until INTEGER,
    status       INTEGER,
    body         BLOB,
    PRIMARY KEY (credential, key),
    CHECK ((status IS NULL) = (body IS NULL))
) STRICT;
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
