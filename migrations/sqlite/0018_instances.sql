-- +goose Up
-- The instances and the finalized feature level: as
-- migrations/postgres/0018_instances.sql. The embedded store is served by
-- one process, so it finalizes itself when it starts (sqlite.Store.Migrate).
-- Times are Unix milliseconds.
CREATE TABLE instances (
    id            TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 16 AND id NOT GLOB '*[^0-9a-f]*'),
    host          TEXT    NOT NULL CHECK (length(host) <= 255),
    version       TEXT    NOT NULL CHECK (length(version) <= 255),
    feature_level INTEGER NOT NULL CHECK (feature_level >= 0),
    started_at    INTEGER NOT NULL,
    seen_at       INTEGER NOT NULL
) STRICT;
CREATE TABLE feature_level (
    only_row      INTEGER NOT NULL PRIMARY KEY DEFAULT 1 CHECK (only_row = 1),
    level         INTEGER NOT NULL CHECK (level >= 0),
    finalized_at  INTEGER NOT NULL
) STRICT;
INSERT INTO feature_level (level, finalized_at) VALUES (0, CAST(unixepoch('subsec') * 1000 AS INTEGER));
