-- +goose Up
-- Alert policies. A job's policy and where it stands: ok or alerting, with
-- the reasons of the episode, since when, when job.alerting was last told
-- (a repeat is due realert_after_ms later) and the grant last decided past
-- max_runtime_ms (exceeded_token, so that each is decided once). Whether a
-- job is alerting is decided in Go from the job's newest runs
-- (decide.EvaluatePolicy), under this row's lock; lock order is policy,
-- then lease.
CREATE TABLE job_policies (
    job_id                 text COLLATE "C" NOT NULL PRIMARY KEY REFERENCES leases (job_id) ON DELETE CASCADE,
    consecutive_failures   integer          NOT NULL DEFAULT 0 CHECK (consecutive_failures BETWEEN 0 AND 100),
    failure_rate_threshold double precision CHECK (failure_rate_threshold > 0 AND failure_rate_threshold <= 1),
    failure_rate_runs      integer          CHECK (failure_rate_runs BETWEEN 1 AND 64),
    max_runtime_ms         bigint           NOT NULL DEFAULT 0 CHECK (max_runtime_ms >= 0),
    min_runtime_ms         bigint           NOT NULL DEFAULT 0 CHECK (min_runtime_ms >= 0),
    missed_ticks           integer          NOT NULL DEFAULT 0 CHECK (missed_ticks BETWEEN 0 AND 100),
    recovery_threshold     integer          NOT NULL DEFAULT 0 CHECK (recovery_threshold BETWEEN 0 AND 100),
    realert_after_ms       bigint           NOT NULL DEFAULT 0 CHECK (realert_after_ms >= 0),
    status                 text             NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'alerting')),
    reasons                text             NOT NULL DEFAULT '',
    since                  timestamptz      NOT NULL,
    alerted_at             timestamptz,
    exceeded_token         bigint           NOT NULL DEFAULT 0,
    updated_by             text             NOT NULL DEFAULT '',
    updated_at             timestamptz      NOT NULL
);
-- The sweep's look for held runs past their job's max_runtime_ms: its
-- cost grows with the jobs whose policy sets one.
CREATE INDEX job_policies_runtime_idx ON job_policies (job_id) WHERE max_runtime_ms > 0;

-- What the lease shows of its policy: alert_status is NULL without one.
-- policy_due_at is when the policy is next to be decided by the sweep: set
-- by the statements that end a run of a job with a policy (a release, a
-- missed tick), in the row they write anyway, and by a decision to its
-- next repeat; the release decides at once and clears it, and the sweep
-- decides what a crash left due. Without a policy it stays NULL, so the
-- index below costs the other jobs nothing.
ALTER TABLE leases
    ADD COLUMN alert_status  text CHECK (alert_status IN ('ok', 'alerting')),
    ADD COLUMN alert_reasons text NOT NULL DEFAULT '',
    ADD COLUMN policy_due_at timestamptz;
CREATE INDEX leases_policy_due_idx ON leases (policy_due_at) WHERE policy_due_at IS NOT NULL;
