-- +goose Up
-- The instances that serve this database, and the feature level it is
-- finalized at (features.go in the root package, docs/upgrading.md). Every
-- instance records itself every few seconds and deletes its row when it
-- shuts down cleanly; `leaseapi upgrade finalize` raises the level once
-- every live instance runs a build of that level. A database that already
-- held leases was served by v1.0.0 (feature level 0), so it starts at 0; a
-- database this migration creates from nothing is raised to the migrating
-- build's level right after (postgres.Store.Migrate).
SET LOCAL lock_timeout = '5s';
CREATE TABLE instances (
    id            text        NOT NULL PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
    host          text        NOT NULL CHECK (length(host) <= 255),
    version       text        NOT NULL CHECK (length(version) <= 255),
    feature_level integer     NOT NULL CHECK (feature_level >= 0),
    started_at    timestamptz NOT NULL DEFAULT now(),
    seen_at       timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE feature_level (
    only_row      boolean     NOT NULL PRIMARY KEY DEFAULT true CHECK (only_row),
    level         integer     NOT NULL CHECK (level >= 0),
    finalized_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO feature_level (level) VALUES (0);
