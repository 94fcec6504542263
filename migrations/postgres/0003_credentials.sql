-- +goose Up
-- Scoped credentials: every instance on the database sees the same set.
-- A token is "<id>.<secret>"; only the SHA-256 of the secret is stored.
CREATE TABLE credentials (
    id              text        NOT NULL PRIMARY KEY CHECK (id ~ '^lk_[a-z0-9]{12}$'),
    name            text        NOT NULL UNIQUE,
    role            text        NOT NULL CHECK (role IN ('read', 'lease', 'admin')),
    -- The job id prefixes it may touch, separated by spaces, or '*'.
    scopes          text        NOT NULL,
    -- NULL: the server's default rate limit; 0: none.
    rate_per_second double precision CHECK (rate_per_second >= 0),
    secret_sha256   bytea       NOT NULL CHECK (length(secret_sha256) = 32),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Settings of the service. 'closed': a credential was created once, so the
-- API never falls back to open mode, even after every credential is revoked.
CREATE TABLE settings (
    key   text NOT NULL PRIMARY KEY,
    value text NOT NULL
);

-- Audit: the name of the credential that revoked the lease or the run.
ALTER TABLE leases ADD COLUMN revoked_by text;
ALTER TABLE runs ADD COLUMN revoked_by text;
