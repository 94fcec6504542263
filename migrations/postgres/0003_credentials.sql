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

-- A revocation records who revoked on the run too.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leases_record_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO runs (job_id, token, owner, tick, started_at)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at);
        RETURN NULL;
    END IF;

    IF NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL THEN
        UPDATE runs SET outcome = 'revoked', ended_at = NEW.revoked_at, revoked_by = NEW.revoked_by
        WHERE job_id = OLD.job_id AND token = OLD.token AND outcome = 'running';
    ELSIF NEW.token > OLD.token THEN
        -- A new grant. A previous grant that was neither released nor
        -- revoked ended by expiry.
        IF OLD.released_at IS NULL AND OLD.revoked_at IS NULL THEN
            UPDATE runs SET outcome = 'expired', ended_at = OLD.expires_at
            WHERE job_id = OLD.job_id AND token = OLD.token AND outcome = 'running';
        END IF;
        INSERT INTO runs (job_id, token, owner, tick, started_at)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at);
    ELSIF NEW.released_at IS NOT NULL AND OLD.released_at IS NULL THEN
        UPDATE runs SET outcome = NEW.last_outcome, ended_at = NEW.released_at
        WHERE job_id = NEW.job_id AND token = NEW.token AND outcome = 'running';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
