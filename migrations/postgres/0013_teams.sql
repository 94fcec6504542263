-- +goose Up
-- A credential's name is unique within its scopes only: two teams may
-- both name a credential "ci". Scopes are stored normalized (sorted,
-- disjoint), so (name, scopes) names one credential among those its
-- creator can see, and a 409 never tells of another team's. The audit
-- fields record "name (id)".
ALTER TABLE credentials DROP CONSTRAINT credentials_name_key;
CREATE UNIQUE INDEX credentials_name_scopes_key ON credentials (name, scopes);

-- Idempotency-Key: one row per (credential, key), kept 24 hours (the run
-- pruner deletes older ones). fingerprint is the SHA-256 of the route,
-- the job id and the decoded request; a request with the key and another
-- fingerprint is refused. While locked_until is set the first request is
-- in flight (until then at most: its deadline); status and body are its
-- answer once it succeeded.
CREATE TABLE idempotency_keys (
    -- A credential's id, a configured token's name, or '' in open mode.
    credential   text        NOT NULL,
    key          text        NOT NULL CHECK (length(key) BETWEEN 1 AND 256),
    fingerprint  bytea       NOT NULL CHECK (length(fingerprint) = 32),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    locked_until timestamptz,
    status       integer,
    body         bytea,
    PRIMARY KEY (credential, key),
    CHECK ((status IS NULL) = (body IS NULL))
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
