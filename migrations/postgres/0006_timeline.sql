-- +goose Up
-- The WAL timeline in the fencing token. Every grant's and revocation's
-- token is max(previous + 1, (timeline - 1) * 2^40), where timeline is the
-- primary's current WAL timeline, read in the statement that writes the
-- token (repo/postgres/statements.go, tokenAfter). A promotion (or a
-- point-in-time restore) starts a new timeline, so every token handed out
-- after it is larger than any token of an older timeline, even one that was
-- acknowledged and then lost with the old primary.
--
-- leases.timeline and runs.timeline are the timeline a grant (or a
-- revocation) was written on. Rows written before this migration have
-- none (NULL), unless the database is still on its first timeline: then
-- there was never a promotion, and every grant was made on timeline 1.
-- Missed runs have no grant and no timeline.
ALTER TABLE leases ADD COLUMN timeline bigint CHECK (timeline > 0);
ALTER TABLE runs ADD COLUMN timeline bigint CHECK (timeline > 0);
UPDATE leases SET timeline = 1
WHERE ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint = 1;

-- A token is a JSON number in the API, exact only up to 2^53 - 1: a
-- timeline above 8,192 would pass it. The store answers a write this
-- constraint refuses as unavailable (503), and nothing is written.
ALTER TABLE leases ADD CONSTRAINT leases_token_exact CHECK (token <= 9007199254740991);

-- The trigger's inserts (a session of an older version, during a rolling
-- upgrade) record the row's timeline too; the rest is as in 0005.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leases_record_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO runs (job_id, token, owner, tick, started_at, timeline)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at, NEW.timeline)
        ON CONFLICT (job_id, token) DO NOTHING;
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
        INSERT INTO runs (job_id, token, owner, tick, started_at, timeline)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at, NEW.timeline)
        ON CONFLICT (job_id, token) DO NOTHING;
    ELSIF NEW.released_at IS NOT NULL AND OLD.released_at IS NULL THEN
        UPDATE runs SET outcome = NEW.last_outcome, ended_at = NEW.released_at
        WHERE job_id = NEW.job_id AND token = NEW.token AND outcome = 'running';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
