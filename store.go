package leaseapi

import (
	"context"
	"time"
)

// Store keeps leases and their run history. The Postgres store (postgres.Store)
// and the embedded store (sqlite.Store) implement it, and one conformance suite
// (repo/repotest) holds both to the same behaviour.
//
// Every implementation guarantees, with its clock as the only clock:
//
//  1. Mutual exclusion: at any instant at most one grant of a job is held.
//  2. Fencing: tokens of one job strictly increase with every grant and
//     revocation; an operation carrying an older token never succeeds.
//  3. Per tick: a tick, once released succeeded, is never granted again,
//     unless Repair discarded that run (its tick lay ahead of the clock).
//  4. Liveness: a lease whose holder vanished is grantable once expiresAt passes.
//  5. Durability: a restart loses no lease, no token and no completed tick.
//
// Parameters are validated by their Validate methods (AcquireParams.Validate
// and so on; ValidateJobID for a bare job id). Callers should validate
// before calling, to answer with the precise rule; every implementation
// validates again at its entry and refuses invalid input with an
// *InvalidError (wrapping ErrInvalid) before touching its database, so
// that both stores answer bad input alike and nothing invalid is stored.
//
// Each method returns by the deadline of its context. When it cannot reach
// the database or the deadline passes, it returns an error wrapping
// ErrUnavailable; the outcome of a write is then unknown, and retrying it is
// safe because Acquire (same owner, same tick), Heartbeat and Release (same
// owner and token) are idempotent.
type Store interface {
	// Acquire grants the lease of p.JobID to p.Owner when it is not held,
	// renews it when p.Owner already holds it for the same tick (or p.Tick is
	// nil, or p.NearestTick is set), and otherwise returns a *ConflictError wrapping ErrJobPaused
	// while the job is paused, a *TickAheadError when the tick (after
	// snapping) lies later than the store's clock plus the lead it allows
	// (its MaxTickAhead), a *ConflictError wrapping ErrTickDone when p.Tick
	// is at or before the last completed tick, or ErrLeaseHeld, in that
	// order. The holder's renewal is answered even while the job is paused
	// (but not for a tick ahead of the clock). No refusal writes anything. A successful acquire with p.Schedule
	// registers that schedule and grace; a new spec applies to the ticks
	// after the acquire, and the ticks of the old one that were still
	// undecided are dropped. With a schedule (p.Schedule, else the stored
	// one) p.Tick is snapped to the schedule's newest tick at or before it,
	// and p.NearestTick picks the tick with the store's clock (see
	// AcquireParams); the lease says which tick was taken. p.NearestTick
	// without a schedule sent or stored is an *InvalidError.
	Acquire(ctx context.Context, p *AcquireParams) (Lease, error)
	// Heartbeat extends a held lease whose owner and token match. Otherwise it
	// returns a *ConflictError wrapping ErrLeaseLost, or ErrNotFound.
	Heartbeat(ctx context.Context, p *HeartbeatParams) (Lease, error)
	// Release ends the grant whose owner and token match, even when it has
	// expired and nobody took it over, and records its outcome. Releasing
	// again with the same owner and token changes nothing. Otherwise it
	// returns a *ConflictError wrapping ErrLeaseLost, or ErrNotFound.
	Release(ctx context.Context, p *ReleaseParams) (Lease, error)
	// Revoke force-releases a held lease and increments its token, so the old
	// holder's heartbeat and release fail. A lease that is not held is
	// returned unchanged. p.By is recorded as the lease's and the run's
	// RevokedBy. ErrNotFound for an unknown job.
	Revoke(ctx context.Context, p *RevokeParams) (Lease, error)
	// Pause pauses the job so that acquires are refused with ErrJobPaused
	// and its ticks are neither missed nor skipped; a grant in flight is
	// not touched. Pausing a paused job changes nothing. ErrNotFound for an
	// unknown job.
	Pause(ctx context.Context, p *PauseParams) (Lease, error)
	// Repair undoes what a tick later than the store's clock plus p.Window
	// did to the job (a replica whose clock was fast), under the job's row
	// lock: it revokes an open grant whose tick is ahead (token + 1, the
	// run revoked by p.By), marks every run whose tick is ahead
	// OutcomeDiscarded (the lease no longer names such a tick, and the
	// tick sweep ignores discarded grants), clears an owed tick that is
	// ahead, and sets the
	// last completed tick to the later of the newest succeeded run's tick
	// at or before now + p.Window and min(its value, now - p.Retention), so
	// that no tick older than the kept history becomes grantable again.
	// Tokens never go back. Repairing a sound job, or again, changes
	// nothing. ErrNotFound for an unknown job.
	Repair(ctx context.Context, p *RepairParams) (Lease, error)
	// Resume ends a pause; ticks that fell during it stay uncounted.
	// Resuming a job that is not paused changes nothing. ErrNotFound for an
	// unknown job.
	Resume(ctx context.Context, jobID string) (Lease, error)
	// ForgetSchedule removes the job's schedule: its ticks are no longer
	// decided until a granted acquire registers one again. The counters
	// stay. ErrNotFound for an unknown job.
	ForgetSchedule(ctx context.Context, jobID string) (Lease, error)
	// SweepTicks decides, once across every store over the same database,
	// the fate of each tick whose grace has passed, for up to batch
	// scheduled jobs: ran (a grant was made for it), paused (the job was
	// paused when its grace ended), skipped (an earlier grant was held at
	// the tick) or missed (recorded as a run with outcome missed, at most
	// MaxMissedRunsPerSweep per job per pass; the counters count all). It also
	// counts, once, every grant that passed its expiresAt unreleased. Its
	// cost grows with the jobs that are due, not with all jobs.
	SweepTicks(ctx context.Context, batch int) (SweepResult, error)
	// Stats counts the leases by state, the paused and the overdue jobs,
	// and the runs that ended in the last 24 hours by outcome, of the jobs
	// whose id starts with prefix ("" for every job).
	Stats(ctx context.Context, prefix string) (Stats, error)
	// JobsAhead counts the jobs whose stored marks lie later than the
	// store's clock plus window: the last completed tick, the tick of a
	// grant neither released nor revoked, or an owed tick (what Repair
	// undoes). It returns the first limit (1 to MaxJobsAheadLimit) of
	// their ids in job id order, all read by one set-based query.
	JobsAhead(ctx context.Context, window time.Duration, limit int) (JobsAhead, error)
	// JobHealth returns the health of the first limit jobs in job id order
	// (1 to MaxJobHealthLimit) and how many jobs it left out, all read at
	// one instant by one set-based query: its cost grows with the jobs and
	// their runs since their last success, never with a query per job.
	JobHealth(ctx context.Context, limit int) (JobHealthPage, error)
	// Get returns the lease of jobID, or ErrNotFound.
	Get(ctx context.Context, jobID string) (Lease, error)
	// List returns one page of leases sorted by job id.
	List(ctx context.Context, p *ListParams) (LeasePage, error)
	// Runs returns up to limit runs of jobID, newest first, or ErrNotFound;
	// its parameters are those of RunsParams.
	Runs(ctx context.Context, jobID string, limit int) ([]Run, error)
	// RecentRuns returns one page of the runs of every job under
	// p.Prefix, newest first in the order of RunKey, each with its job id.
	// Its cost grows with the page, not with the run history.
	RecentRuns(ctx context.Context, p *RecentRunsParams) (RunPage, error)
	// PruneRuns deletes up to batch finished runs that ended before
	// now-retention and returns how many it deleted.
	PruneRuns(ctx context.Context, retention time.Duration, batch int) (int64, error)
	// Ready returns nil when the database answers and its schema is current.
	Ready(ctx context.Context) error
	// Close releases the store's resources.
	Close() error

	Batching
	Owing
	Grouping
	Alerting
}

// Owing is the part of a Store that keeps owed ticks (owed.go): what a job
// owes after a missed tick under CatchUpLatest, or after a trigger.
type Owing interface {
	// Trigger makes p.JobID owe one manual tick (see TriggerParams and
	// ManualTick) and returns its lease with OwedTick and OwedReason set. A
	// manual tick replaces a catch-up debt. While a manual tick is owed,
	// a second trigger answers that tick; a trigger whose p.Key is the key
	// of the job's last manual tick answers that tick whatever became of
	// it. ErrNotFound for an unknown job; a *ConflictError wrapping
	// ErrJobPaused while the job is paused; a *TickAheadError, writing
	// nothing, when the manual tick would lie later than the store's clock
	// plus the lead it allows (a last completed tick of the future).
	Trigger(ctx context.Context, p *TriggerParams) (Lease, error)
	// CancelOwed cancels what the job owes, a manual tick or a catch-up
	// tick: it is then not owed again. A job that owes nothing is returned
	// unchanged. ErrNotFound for an unknown job.
	CancelOwed(ctx context.Context, jobID string) (Lease, error)
	// Owed returns the ticks owed by the jobs of p, one per job at most, in
	// job id order; jobs that owe nothing or are unknown are absent. Its
	// cost grows with the ids, not with all jobs.
	Owed(ctx context.Context, p *OwedParams) ([]Owed, error)
}

// JobsAhead is the answer of Store.JobsAhead.
type JobsAhead struct {
	// Count is how many jobs have a mark ahead.
	Count int64
	// JobIDs are the first of them in job id order.
	JobIDs []string
}

// MaxJobsAheadLimit bounds the job ids one Store.JobsAhead returns.
const MaxJobsAheadLimit = 1000

// MaxMissedRunsPerSweep bounds the missed runs one pass of SweepTicks
// records per job: a job whose replicas were gone for a day must not write
// a day of per-second runs at once. The counters count every missed tick.
const MaxMissedRunsPerSweep = 100

// Observer is told of the events the metrics count, once per event across
// every instance: by the store whose transaction committed it.
type Observer interface {
	// RunFinished: a run ended with outcome (succeeded or failed at
	// release, revoked at revocation, expired when a takeover closed it,
	// missed by the sweep) after d (zero for a missed run).
	RunFinished(outcome Outcome, d time.Duration)
	// TicksSkipped: the sweep decided n ticks skipped.
	TicksSkipped(n int64)
	// LeasesExpired: n grants passed their expiresAt unreleased.
	LeasesExpired(n int64)
	// RunStarted: a grant started a run, for a tick of the schedule or
	// the owed tick it claimed (trigger).
	RunStarted(trigger Trigger)
}
