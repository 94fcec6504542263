-- +goose Up
-- A webhook's name and digest: as migrations/postgres/0017_webhook_names.sql
-- (name unique among the webhooks of the same normalized scopes, NULL for
-- none; digest the hex HMAC-SHA256 of the URL keyed by the secret).
ALTER TABLE webhooks ADD COLUMN name TEXT
    CHECK (length(name) BETWEEN 1 AND 64 AND name NOT GLOB '*[^a-z0-9_.-]*');
ALTER TABLE webhooks ADD COLUMN digest TEXT
    CHECK (length(digest) = 64 AND digest NOT GLOB '*[^0-9a-f]*');
CREATE UNIQUE INDEX webhooks_name_scopes_key ON webhooks (name, scopes) WHERE name IS NOT NULL;
