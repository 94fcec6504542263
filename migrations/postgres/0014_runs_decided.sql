-- +goose Up
-- The store now closes the runs a takeover or a revocation ends in the
-- statement that writes the lease (repo/postgres: the acquire's and the
-- revocation's conditional writes, which write only the row version they
-- read, so the run they close is in their snapshot). Its sessions say so
-- with leaseapi.run_rows = 'decided', and the trigger does nothing for
-- them.
--
-- Sessions of the previous version ('statement') still rely on the
-- trigger to close the run of a takeover or a revocation, and sessions of
-- older versions (no setting) on its full history: while versions mix,
-- both keep what they had. For a 'decided' session the run is closed
-- before the trigger would run, so a mixed deployment never closes a run
-- twice either way (the function updates only a running run).
DROP TRIGGER leases_record_run_insert ON leases;
DROP TRIGGER leases_record_run_update ON leases;

CREATE TRIGGER leases_record_run_insert AFTER INSERT ON leases
    FOR EACH ROW
    WHEN (current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'statement'
          AND current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'decided')
    EXECUTE FUNCTION leases_record_run();

CREATE TRIGGER leases_record_run_update AFTER UPDATE ON leases
    FOR EACH ROW
    WHEN (current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'decided'
          AND ((NEW.token > OLD.token AND OLD.released_at IS NULL AND OLD.revoked_at IS NULL)
               OR (current_setting('leaseapi.run_rows', true) IS DISTINCT FROM 'statement'
                   AND (OLD.token IS DISTINCT FROM NEW.token
                        OR OLD.released_at IS DISTINCT FROM NEW.released_at
                        OR OLD.revoked_at IS DISTINCT FROM NEW.revoked_at))))
    EXECUTE FUNCTION leases_record_run();
