-- +goose Up
-- Fair delivery: each webhook is its own queue. A delivery loop claims at
-- most one due event per webhook at a time (the head of its queue, found
-- through webhook_outbox_queue_idx). timed_out says that the webhook's last
-- attempt ran out of time; such a webhook holds at most one delivery slot
-- across all instances: it is claimed only while no claim of it is live,
-- neither claimed_until, the newest claim (of claim_event), nor any of its
-- events' (webhook_outbox_claimed_idx).
-- The claim sets both under the webhook's row lock (repo/postgres,
-- webhooks.go), and the report of claim_event clears them.
ALTER TABLE webhooks
    ADD COLUMN timed_out     boolean     NOT NULL DEFAULT false,
    ADD COLUMN claimed_until timestamptz,
    ADD COLUMN claim_event   text;

CREATE INDEX webhook_outbox_queue_idx ON webhook_outbox (webhook_id, next_attempt);
DROP INDEX webhook_outbox_webhook_idx;
-- The live claims of a webhook's events, for the check of a timed-out one.
CREATE INDEX webhook_outbox_claimed_idx ON webhook_outbox (webhook_id, claimed_until) WHERE claimed_until IS NOT NULL;

-- job.missed: one event per job per sweep pass that decided ticks missed
-- (missed_ticks grows), whose detail is {"count": the ticks decided missed
-- in the pass, "missed": the missed runs the pass recorded, newest first,
-- at most 100}. run.missed stays one event per missed run. The pass's
-- ticks are those from the job's old next_tick to its new one; its missed
-- runs were inserted by the same statement (Postgres) or before it
-- (SQLite), so the AFTER trigger sees them.
ALTER TABLE webhook_outbox ADD COLUMN detail jsonb;

-- +goose StatementBegin
CREATE FUNCTION webhook_enqueue(ev text, job text, r jsonb, detail jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt, detail)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, ev, job, r,
        (SELECT to_jsonb(l) FROM leases AS l WHERE l.job_id = job), c.at, c.at, detail
    FROM webhooks AS w, (SELECT clock_timestamp() AS at) AS c
    WHERE w.events ? ev
      AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.scopes) AS s(scope)
                  WHERE s.scope = '*' OR starts_with(job, s.scope));
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION leases_webhook_missed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhooks WHERE events ? 'job.missed') THEN
        RETURN NULL;
    END IF;
    PERFORM webhook_enqueue('job.missed', NEW.job_id, NULL, jsonb_build_object(
        'count', NEW.missed_ticks - OLD.missed_ticks,
        'missed', COALESCE((
            SELECT jsonb_agg(to_jsonb(m) ORDER BY COALESCE(m.started_at, m.tick) DESC, m.id DESC)
            FROM (SELECT r.* FROM runs AS r
                  WHERE r.job_id = NEW.job_id AND r.outcome = 'missed'
                    AND COALESCE(r.started_at, r.tick) >= COALESCE(OLD.next_tick, '-infinity')
                    AND COALESCE(r.started_at, r.tick) < COALESCE(NEW.next_tick, 'infinity')
                  ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC
                  LIMIT 100) AS m), '[]'::jsonb)));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leases_webhook_missed AFTER UPDATE ON leases
    FOR EACH ROW WHEN (NEW.missed_ticks > OLD.missed_ticks)
    EXECUTE FUNCTION leases_webhook_missed();

-- Enabled only while a webhook exists, as the triggers of 0008.
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhooks) THEN
        ALTER TABLE leases DISABLE TRIGGER leases_webhook_missed;
    END IF;
END;
$$;
-- +goose StatementEnd
