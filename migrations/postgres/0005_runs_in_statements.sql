-- +goose Up
-- The hot statements write their own run rows: a grant inserts its run and
-- a release closes it, in the statement that grants or releases
-- (repo/postgres.go, grantedRun and releasedRun), so that a batch of grants or
-- releases writes all its runs with one executor instead of one trigger
-- call, and its statements, per row. The trigger keeps the two cases that
-- must read the previous grant's run after the lease row lock (a statement
-- reads runs with a snapshot taken before it): a grant that takes over an
-- expired grant closes that run as expired, and a revocation closes the run
-- as revoked. Both bump the token of a grant that was neither released nor
-- revoked, and nothing else does: a grant after a release or a revocation
-- finds released_at or revoked_at set, a release and a renewal keep the
-- token. The sweep writes its missed runs itself, as before.
DROP TRIGGER leases_record_run_insert ON leases;
DROP TRIGGER leases_record_run_update ON leases;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leases_record_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revoked_at IS NOT NULL THEN
        UPDATE runs SET outcome = 'revoked', ended_at = NEW.revoked_at, revoked_by = NEW.revoked_by
        WHERE job_id = OLD.job_id AND token = OLD.token AND outcome = 'running';
    ELSE
        UPDATE runs SET outcome = 'expired', ended_at = OLD.expires_at
        WHERE job_id = OLD.job_id AND token = OLD.token AND outcome = 'running';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leases_record_run_update AFTER UPDATE ON leases
    FOR EACH ROW
    WHEN (NEW.token > OLD.token AND OLD.released_at IS NULL AND OLD.revoked_at IS NULL)
    EXECUTE FUNCTION leases_record_run();
