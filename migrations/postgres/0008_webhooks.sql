-- +goose Up
-- Webhooks: a team's subscription to the events of the jobs in its scopes.
-- url and secret are stored sealed (AES-GCM, "aesgcm1:" prefix) when the
-- server has a key (LEASEAPI_WEBHOOK_KEY), else as given; url_redacted is
-- what a list shows. events and scopes are JSON arrays of strings.
CREATE TABLE webhooks (
    id           text        NOT NULL PRIMARY KEY CHECK (id ~ '^wh_[a-z0-9]{12}$'),
    url          text        NOT NULL,
    url_redacted text        NOT NULL,
    secret       text        NOT NULL,
    events       jsonb       NOT NULL CHECK (jsonb_typeof(events) = 'array'),
    scopes       jsonb       NOT NULL CHECK (jsonb_typeof(scopes) = 'array'),
    format       text        NOT NULL CHECK (format IN ('standard', 'slack')),
    created_by   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- The outbox: one row per event and subscribed webhook, written by the
-- triggers below in the transaction that decides the event, deleted once
-- delivered or given up. run and lease are the rows (to_jsonb) as the
-- deciding statement left them. A delivery loop claims due rows by setting
-- claimed_until (FOR UPDATE SKIP LOCKED, so that of several instances one
-- takes each row) in a short transaction of its own, delivers with no
-- transaction open, and reports the attempt; attempts names the claim, so
-- that the report of a claim that lapsed and was taken again is refused.
CREATE TABLE webhook_outbox (
    id            text        NOT NULL PRIMARY KEY,
    webhook_id    text        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    type          text        NOT NULL,
    job_id        text COLLATE "C" NOT NULL,
    run           jsonb,
    lease         jsonb,
    created_at    timestamptz NOT NULL,
    next_attempt  timestamptz NOT NULL,
    attempts      integer     NOT NULL DEFAULT 0,
    claimed_until timestamptz
);
CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt);
CREATE INDEX webhook_outbox_webhook_idx ON webhook_outbox (webhook_id);

-- The last attempts of each webhook (the store keeps 100 per webhook).
-- Response bodies are never stored.
CREATE TABLE webhook_deliveries (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   text        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id     text        NOT NULL,
    type         text        NOT NULL,
    job_id       text        NOT NULL,
    attempt      integer     NOT NULL,
    attempted_at timestamptz NOT NULL,
    status       integer,
    error        text,
    delivered    boolean     NOT NULL
);
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id);

-- webhook_enqueue writes event ev of job (about the run r, NULL for none)
-- to the outbox of every webhook subscribed to ev whose scopes hold the
-- job, with the job's lease as the deciding statement left it (an AFTER
-- trigger sees all of that statement's changes).
-- +goose StatementBegin
CREATE FUNCTION webhook_enqueue(ev text, job text, r jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (id, webhook_id, type, job_id, run, lease, created_at, next_attempt)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), w.id, ev, job, r,
        (SELECT to_jsonb(l) FROM leases AS l WHERE l.job_id = job), c.at, c.at
    FROM webhooks AS w, (SELECT clock_timestamp() AS at) AS c
    WHERE w.events ? ev
      AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.scopes) AS s(scope)
                  WHERE s.scope = '*' OR starts_with(job, s.scope));
END;
$$;
-- +goose StatementEnd

-- The events of a run, told where the run's row changes, whatever
-- statement changes it: a release (run.succeeded, run.failed, and
-- job.recovered when the job's previous finished run, revocations aside,
-- failed, expired or was missed), the sweep (run.missed for each missed
-- run it records; run.expired when it counts a grant's expiry, so that it
-- fires with every replica dead) and a takeover (run.expired when it
-- closes a grant whose expiry the sweep has not counted yet, so that an
-- expiry is told once, by whichever decides it first). Triggers rather than
-- the statements: every writer (both kinds of sweep pass, the batched and
-- single statements, a session of an older version during an upgrade) is
-- covered by one definition. The WHEN clauses keep grants, heartbeats,
-- renewals and revocations out of it altogether.
-- +goose StatementBegin
CREATE FUNCTION runs_webhook_events() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    prev text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhooks) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM webhook_enqueue('run.missed', NEW.job_id, to_jsonb(NEW));
    ELSIF NEW.outcome IN ('succeeded', 'failed') THEN
        PERFORM webhook_enqueue('run.' || NEW.outcome, NEW.job_id, to_jsonb(NEW));
        IF NEW.outcome = 'succeeded' THEN
            SELECT outcome INTO prev FROM runs
            WHERE job_id = NEW.job_id AND id <> NEW.id AND outcome NOT IN ('running', 'revoked')
              AND COALESCE(started_at, tick) <= NEW.started_at
            ORDER BY COALESCE(started_at, tick) DESC, id DESC LIMIT 1;
            IF prev IN ('failed', 'expired', 'missed') THEN
                PERFORM webhook_enqueue('job.recovered', NEW.job_id, to_jsonb(NEW));
            END IF;
        END IF;
    ELSE
        PERFORM webhook_enqueue('run.expired', NEW.job_id, to_jsonb(NEW));
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_webhook_insert AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.outcome = 'missed')
    EXECUTE FUNCTION runs_webhook_events();

CREATE TRIGGER runs_webhook_update AFTER UPDATE ON runs
    FOR EACH ROW
    WHEN (OLD.outcome = 'running'
          AND (NEW.outcome IN ('succeeded', 'failed')
               OR (NOT OLD.expiry_counted AND (NEW.outcome = 'expired' OR NEW.expiry_counted))))
    EXECUTE FUNCTION runs_webhook_events();

-- job.overdue: a sweep's decision (missed_at changes) makes the job
-- overdue (stores.OverdueCondition: scheduled, not paused, its newest
-- decided tick missed, no grant since) when it was not: once per episode.
-- The run is the job's newest, the missed run the same statement recorded.
-- The WHEN is false at its first term for every statement that does not
-- move missed_at, the lease calls among them.
-- +goose StatementBegin
CREATE FUNCTION leases_webhook_overdue() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhooks) THEN
        RETURN NULL;
    END IF;
    PERFORM webhook_enqueue('job.overdue', NEW.job_id,
        (SELECT to_jsonb(r) FROM runs AS r WHERE r.job_id = NEW.job_id
         ORDER BY COALESCE(r.started_at, r.tick) DESC, r.id DESC LIMIT 1));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leases_webhook_overdue AFTER UPDATE ON leases
    FOR EACH ROW
    WHEN (NEW.missed_at IS DISTINCT FROM OLD.missed_at
          AND NEW.schedule IS NOT NULL AND NEW.paused_at IS NULL AND NEW.missed_at IS NOT NULL
          AND NEW.acquired_at < NEW.missed_at
          AND NOT COALESCE(OLD.schedule IS NOT NULL AND OLD.paused_at IS NULL AND OLD.missed_at IS NOT NULL
                           AND OLD.acquired_at < OLD.missed_at, false))
    EXECUTE FUNCTION leases_webhook_overdue();

-- The three triggers are disabled while no webhook exists, so that the
-- lease calls do not pay for them: an enabled trigger costs every release
-- a call of runs_webhook_events (an AFTER trigger event, a plpgsql call and
-- its look at webhooks), tens of microseconds of a cycle of about two
-- hundred. The store enables them in the transaction that creates the
-- first webhook and disables them in the one that deletes the last, both
-- under a lock on webhooks that serializes the two (repo/postgres,
-- webhooks.go). Enabled with no webhook (a hand-run ENABLE TRIGGER ALL),
-- they only cost: each function looks for a webhook first.
ALTER TABLE runs DISABLE TRIGGER runs_webhook_insert, DISABLE TRIGGER runs_webhook_update;
ALTER TABLE leases DISABLE TRIGGER leases_webhook_overdue;
