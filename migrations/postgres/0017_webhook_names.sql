-- +goose Up
-- A webhook's name and digest. name is optional and unique among the
-- webhooks of the same scopes (stored normalized: sorted and disjoint, so
-- that one set of scopes has one spelling), as a credential's name is;
-- webhooks without a name (NULL) never collide. digest is the hex
-- HMAC-SHA256 of the plain URL keyed by the plain secret, computed at
-- creation (NULL for the webhooks created before it was kept): it lets a
-- client holding both tell whether the stored webhook has them.
ALTER TABLE webhooks
    ADD COLUMN name   text CHECK (name ~ '^[a-z0-9_.-]{1,64}$'),
    ADD COLUMN digest text CHECK (digest ~ '^[0-9a-f]{64}$');
CREATE UNIQUE INDEX webhooks_name_scopes_key ON webhooks (name, scopes) WHERE name IS NOT NULL;
