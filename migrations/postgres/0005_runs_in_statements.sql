-- +goose Up
-- The hot statements write their own run rows: a grant inserts its run and
-- a release closes it, in the statement that grants or releases
-- (repo/postgres.go, grantedRun and releasedRun), so that a batch of grants
-- or releases writes all its runs with one executor instead of one trigger
-- call, and its statements, per row.
--
-- The trigger keeps the two cases that must read the previous grant's run
-- after the lease row lock (a statement reads runs with a snapshot taken
-- before it): a grant that takes over an expired grant closes that run as
-- expired, and a revocation closes the run as revoked. Both bump the token
-- of a grant that was neither released nor revoked, and nothing else does:
-- a grant after a release or a revocation finds released_at or revoked_at
-- set, a release and a renewal keep the token. The sweep writes its missed
-- runs itself.
--
-- The store's sessions say that their statements write the run rows
-- (leaseapi.run_rows = 'statement', set when they connect). A session that
-- does not, an instance of an older version still serving during a rolling
-- upgrade, gets the trigger's full history writing as before, so no run is
-- lost while versions mix. The function's inserts skip a run that is
-- already there, so that a statement that writes its run in a session
-- without the setting gets it once, not an error.
DROP TRIGGER leases_record_run_insert ON leases;
DROP TRIGGER leases_record_run_update ON leases;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leases_record_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO runs (job_id, token, owner, tick, started_at)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at)
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
        INSERT INTO runs (job_id, token, owner, tick, started_at)
        VALUES (NEW.job_id, NEW.token, NEW.owner, NEW.tick, NEW.acquired_at)
        ON CONFLICT (job_id, token) DO NOTHING;
    ELSIF NEW.released_at IS NOT NULL AND OLD.released_at IS NULL THEN
        UPDATE runs SET outcome = NEW.last_outcome, ended_at = NEW.released_at
        WHERE job_id = NEW.job_id AND token = NEW.token AND outcome = 'running';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leases_record_run_insert AFTER INSERT ON leases
    FOR EACH ROW
    WHEN (current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'statement')
    EXECUTE FUNCTION leases_record_run();

CREATE TRIGGER leases_record_run_update AFTER UPDATE ON leases
    FOR EACH ROW
    WHEN ((NEW.token > OLD.token AND OLD.released_at IS NULL AND OLD.revoked_at IS NULL)
          OR (current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'statement'
              AND (OLD.token IS DISTINCT FROM NEW.token
                   OR OLD.released_at IS DISTINCT FROM NEW.released_at
                   OR OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)))
    EXECUTE FUNCTION leases_record_run();
