-- +goose Up
-- One row per job: the current grant when held, else the last one. job_id
-- sorts bytewise (COLLATE "C") so keyset pages and prefix ranges are plain
-- index range scans.
CREATE TABLE leases (
    job_id              text COLLATE "C" PRIMARY KEY,
    owner               text        NOT NULL,
    -- Fencing token: strictly increasing per job, bumped by every grant and revocation.
    token               bigint      NOT NULL CHECK (token > 0),
    tick                timestamptz,
    ttl_ms              bigint      NOT NULL CHECK (ttl_ms > 0),
    acquired_at         timestamptz NOT NULL,
    renewed_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL,
    released_at         timestamptz,
    revoked_at          timestamptz,
    last_completed_tick timestamptz,
    last_outcome        text CHECK (last_outcome IN ('succeeded', 'failed', 'expired', 'revoked'))
);

-- Run history: one row per grant, written by the trigger below in the same
-- statement as the lease change that causes it.
CREATE TABLE runs (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     text COLLATE "C" NOT NULL,
    token      bigint      NOT NULL,
    owner      text        NOT NULL,
    tick       timestamptz,
    started_at timestamptz NOT NULL,
    ended_at   timestamptz,
    outcome    text        NOT NULL DEFAULT 'running'
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked')),
    UNIQUE (job_id, token)
);

-- Pruning deletes finished runs by age; running ones have no ended_at.
CREATE INDEX runs_ended_at_idx ON runs (ended_at) WHERE ended_at IS NOT NULL;

-- Why a trigger: a grant that takes over an expired lease must close the
-- previous run with the previous expires_at, which RETURNING cannot give
-- (it sees only the new row), and a data-modifying CTE reads runs with the
-- statement's snapshot, taken before the lease row lock was granted, so it
-- could miss a run inserted by the transaction it waited for. A row trigger
-- sees OLD and NEW after the lock, and its statements take fresh snapshots.
-- +goose StatementBegin
CREATE FUNCTION leases_record_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO runs (job_id, token, owner, tick, started_at)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at);
        RETURN NULL;
    END IF;

    IF NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL THEN
        UPDATE runs SET outcome = 'revoked', ended_at = NEW.revoked_at
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

CREATE TRIGGER leases_record_run_insert AFTER INSERT ON leases
    FOR EACH ROW EXECUTE FUNCTION leases_record_run();

-- Heartbeats and idempotent re-acquires change neither token, release nor
-- revocation, so they never enter the function.
CREATE TRIGGER leases_record_run_update AFTER UPDATE ON leases
    FOR EACH ROW
    WHEN (OLD.token IS DISTINCT FROM NEW.token
          OR OLD.released_at IS DISTINCT FROM NEW.released_at
          OR OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)
    EXECUTE FUNCTION leases_record_run();
