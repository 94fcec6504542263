-- +goose Up
-- A repair (POST /leases/{jobId}/repair) sets aside the runs whose tick lay
-- ahead of the database clock: their outcome becomes 'discarded', whatever
-- it was, so a discarded run may have no holder (a missed run's).
ALTER TABLE runs
    DROP CONSTRAINT runs_outcome_check,
    ADD CONSTRAINT runs_outcome_check
        CHECK (outcome IN ('running', 'succeeded', 'failed', 'expired', 'revoked', 'missed', 'discarded')),
    DROP CONSTRAINT runs_missed_has_no_holder,
    ADD CONSTRAINT runs_missed_has_no_holder
        CHECK ((outcome = 'discarded' OR (outcome = 'missed') = (token IS NULL))
               AND (token IS NULL) = (owner IS NULL) AND (token IS NULL) = (started_at IS NULL));
