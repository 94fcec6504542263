package leaseapi

import "time"

// State is the state of a lease, computed with the store's clock at read time.
type State string

// The states of a lease (doc.go, Overview).
const (
	// StateHeld: not released, not revoked and expiresAt > now.
	StateHeld State = "held"
	// StateReleased: released by its holder.
	StateReleased State = "released"
	// StateExpired: the holder stopped heartbeating (expiresAt <= now, never released).
	StateExpired State = "expired"
	// StateRevoked: an admin force-released it.
	StateRevoked State = "revoked"
)

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	switch s {
	case StateHeld, StateReleased, StateExpired, StateRevoked:
		return true
	}
	return false
}

// Outcome is how a run (one grant of a lease) ended.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeRunning is the outcome of a run whose grant is still held.
	OutcomeRunning Outcome = "running"
	// OutcomeSucceeded: released by its holder with outcome succeeded.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: released by its holder with outcome failed.
	OutcomeFailed Outcome = "failed"
	// OutcomeExpired: the holder stopped heartbeating and the lease expired.
	OutcomeExpired Outcome = "expired"
	// OutcomeRevoked: an admin force-released the lease.
	OutcomeRevoked Outcome = "revoked"
	// OutcomeMissed: no replica started a tick of the job's schedule
	// within its grace. A missed run has a tick and an end (tick + grace)
	// but no token, owner or start.
	OutcomeMissed Outcome = "missed"
	// OutcomeDiscarded: a repair (Store.Repair) set the run aside because
	// its tick lay ahead of the store's clock by more than the window; a
	// discarded run does not count as the run of its tick, which may be
	// granted when it comes.
	OutcomeDiscarded Outcome = "discarded"
)

// Valid reports whether o is one of the outcomes of a run.
func (o Outcome) Valid() bool {
	switch o {
	case OutcomeRunning, OutcomeSucceeded, OutcomeFailed, OutcomeExpired, OutcomeRevoked, OutcomeMissed, OutcomeDiscarded:
		return true
	}
	return false
}

// ValidRelease reports whether o is an outcome a holder may release with.
func (o Outcome) ValidRelease() bool {
	return o == OutcomeSucceeded || o == OutcomeFailed
}

// Lease is one job's lease: the current grant if it is held, else the last one.
type Lease struct {
	JobID string
	// Owner is the current holder, or the last one.
	Owner string
	// Token is the fencing token of the current or last grant, or of the
	// revocation that ended it. It strictly increases per job, and is at
	// least (Timeline - 1) × 2^40.
	Token int64
	// Timeline is the database's WAL timeline when Token was written: 1
	// until the first promotion of a standby (or point-in-time restore),
	// and always 1 for a store without replication. 0 when unknown (a
	// grant written before the store recorded timelines).
	Timeline int64
	// State is computed with the store's clock when the lease was read.
	State      State
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	// ReleasedAt is when the holder released the lease, or nil.
	ReleasedAt *time.Time
	// TTL is the TTL of the last grant or renewal.
	TTL time.Duration
	// Tick is the scheduled fire time the current or last grant was for, or nil.
	Tick *time.Time
	// LastCompletedTick is the newest tick released with outcome succeeded, or nil.
	LastCompletedTick *time.Time
	// LastOutcome is the outcome of the last finished run that had a
	// holder, or "" while the first run is going on; missed runs do not
	// change it.
	LastOutcome Outcome

	// Schedule is the job's cron spec as the last granted acquire that sent
	// one registered it (package schedule), or "" without one.
	Schedule string
	// Grace is the effective grace of Schedule: how long after a tick a
	// replica may still start it before the tick counts as missed. Zero
	// without a schedule.
	Grace time.Duration
	// NextTick is the first tick of Schedule after the store's clock read
	// the lease, or nil without a schedule.
	NextTick *time.Time
	// PausedAt is when an administrator paused the job, or nil while it is
	// not paused; PausedBy names who (empty when the API is open) and
	// PausedReason says why (may be empty).
	PausedAt     *time.Time
	PausedBy     string
	PausedReason string
	// RevokedBy names who revoked the lease (a credential's name) while it
	// is revoked, or "".
	RevokedBy string
	// MissedTicks and SkippedTicks count the ticks of Schedule, since it was
	// first registered, that no replica started within the grace (missed)
	// or that fell while an earlier run still held the lease (skipped).
	MissedTicks  int64
	SkippedTicks int64

	// CatchUp is the job's catch-up policy, as the last granted acquire
	// that sent one registered it (CatchUpNone by default), and
	// CatchUpWindow how old a missed tick may be and still be owed
	// (DefaultCatchUpWindow unless that acquire said otherwise).
	CatchUp       CatchUp
	CatchUpWindow time.Duration
	// OwedTick is the tick the job owes, claimed with an ordinary acquire
	// of that tick, or nil when it owes nothing; OwedReason says why
	// (TriggerCatchUp or TriggerManual; "" when nothing is owed).
	OwedTick   *time.Time
	OwedReason Trigger

	// Group is the concurrency group the job is in ("" for none). Slot
	// and SlotToken are the group's slot the current grant took and its
	// slot token (0 when the grant took none).
	Group     string
	Slot      int
	SlotToken int64

	// AlertStatus is where the job's alert policy stands (AlertOK or
	// AlertAlerting), or "" when it has none; AlertReasons are the
	// reasons of an alerting job (PolicyState.Reasons).
	AlertStatus  AlertStatus
	AlertReasons []AlertReason
}

// Paused reports whether the job is paused.
func (l Lease) Paused() bool { return l.PausedAt != nil }

// SetState sets l.State as the store's clock reads it at now: revoked,
// else released (ReleasedAt set), else held while ExpiresAt is after now,
// else expired. An expired run shows outcome expired at once, although a
// store records that only when a new grant takes over.
func (l *Lease) SetState(revoked bool, now time.Time) {
	switch {
	case revoked:
		l.State = StateRevoked
	case l.ReleasedAt != nil:
		l.State = StateReleased
	case l.ExpiresAt.After(now):
		l.State = StateHeld
	default:
		l.State = StateExpired
		l.LastOutcome = OutcomeExpired
	}
}

// Run is one grant of a lease, or one missed tick, as kept in the run
// history.
type Run struct {
	// JobID is the job the run belongs to.
	JobID string
	// Token and Owner are the grant's; 0 and "" for a missed run.
	Token int64
	Owner string
	Tick  *time.Time
	// StartedAt is when the grant was made; nil for a missed run.
	StartedAt *time.Time
	// EndedAt is nil while the run is going on; for a missed run it is
	// the tick plus the grace, when the tick was decided missed.
	EndedAt *time.Time
	Outcome Outcome
	// RevokedBy names who revoked the run, when it was revoked by a known
	// credential, or "".
	RevokedBy string
	// Trigger is what started the run: TriggerSchedule for a tick of the
	// schedule (or a job without one), TriggerCatchUp or TriggerManual for
	// an owed tick; TriggeredBy names who triggered a manual tick (a
	// credential's name), or "".
	Trigger     Trigger
	TriggeredBy string
	// Group, Slot and SlotToken are the concurrency group the grant was
	// made in and the slot it took ("", 0, 0 for none). GroupFull marks a
	// missed run of a tick its group's slots were all in use at the end
	// of the tick's grace.
	Group     string
	Slot      int
	SlotToken int64
	GroupFull bool
}

// ShowExpiry shows r as the run history shows it beside its job's lease l
// (nil when the job has none), read with it and with its State set at the
// same clock (SetState): a run still marked running whose grant is l's
// (the same token) and has expired, nobody having taken over, shows
// outcome expired, ended at l's expiry. A store closes the run's row only
// when a grant takes over or the holder releases late.
func (r *Run) ShowExpiry(l *Lease) {
	if r.Outcome == OutcomeRunning && l != nil && l.Token == r.Token && l.State == StateExpired {
		end := l.ExpiresAt
		r.Outcome, r.EndedAt = OutcomeExpired, &end
	}
}

// Duration is how long a finished run that had a holder took, and false
// while it is running or for a missed run.
func (r Run) Duration() (time.Duration, bool) {
	if r.EndedAt == nil || r.StartedAt == nil {
		return 0, false
	}
	return r.EndedAt.Sub(*r.StartedAt), true
}

// AcquireParams are the inputs of Store.Acquire.
type AcquireParams struct {
	JobID string
	Owner string
	// TTL is how long the grant lasts without a heartbeat; it must be positive.
	TTL time.Duration
	// Tick is the scheduled fire time this grant is for, or nil. With a
	// schedule (Schedule, else the stored one) the store snaps it to the
	// schedule's newest tick at or before it, and the lease it returns
	// says which tick it took.
	Tick *time.Time
	// NearestTick asks the store to pick the tick: the schedule's
	// (Schedule, else the stored one) newest tick at or before the store's
	// clock plus a margin, the shorter of a minute and half the shortest
	// gap between its ticks, so that replicas whose clocks are within the
	// margin of the store's pick the same tick. It excludes Tick, and needs a schedule
	// sent or stored. The holder's repeated NearestTick acquire while its
	// grant is held renews that grant, whatever tick is nearest by then.
	NearestTick bool
	// Schedule, when not empty, is the job's cron spec (package schedule),
	// registered if the acquire is granted; "" leaves the stored one as it
	// is. Grace is its effective grace (at least a millisecond, at most a
	// day), required with a schedule and zero without.
	Schedule string
	Grace    time.Duration
	// CatchUp, sent only with Schedule, is the catch-up policy to
	// register with it; "" keeps the stored policy. CatchUpWindow is its
	// window (MinCatchUpWindow to MaxCatchUpWindow), zero for
	// DefaultCatchUpWindow; it needs CatchUp.
	CatchUp       CatchUp
	CatchUpWindow time.Duration
	// Group, when not nil, puts the job in that concurrency group at a new
	// grant: a name joins it, "" leaves any; nil keeps the stored group.
	// A renewal never moves the job.
	Group *string
	// MinInterval, when not zero (1 ms to MaxMinInterval), refuses a new
	// grant sooner than MinInterval after the acquiredAt of the job's
	// previous grant, by the store's clock (ErrTooSoon): a job started
	// without ticks on replicas whose clocks differ runs once however late
	// a replica asks. The holder's renewal and the job's first grant are
	// never refused for it. A gated rule (FeatureMinInterval).
	MinInterval time.Duration
}

// HeartbeatParams are the inputs of Store.Heartbeat.
type HeartbeatParams struct {
	JobID string
	Owner string
	Token int64
	// TTL extends the lease to now+TTL; zero keeps the grant's TTL.
	TTL time.Duration
}

// ReleaseParams are the inputs of Store.Release.
type ReleaseParams struct {
	JobID   string
	Owner   string
	Token   int64
	Outcome Outcome
}

// ListParams select a page of leases, sorted by job id.
type ListParams struct {
	// State, Owner and Prefix filter when not empty.
	State  State
	Owner  string
	Prefix string
	// Paused, when not nil, keeps only the paused jobs (true) or only the
	// jobs that are not paused (false).
	Paused *bool
	// Overdue, when not nil, keeps only the overdue jobs (true) or only
	// the jobs that are not overdue (false); overdue means what
	// Stats.Overdue counts.
	Overdue *bool
	// Alerting, when not nil, keeps only the jobs whose alert policy is
	// alerting (true) or only the others (false).
	Alerting *bool
	// After is the job id the page starts after (exclusive), or "" for the first page.
	After string
	// Limit is the page size, at least 1.
	Limit int
}

// RunsParams select a job's newest runs.
type RunsParams struct {
	JobID string
	// Limit is how many runs at most, at least 1.
	Limit int
}

// RecentRunsParams select a page of the runs of every job, newest first
// (see RunKey).
type RecentRunsParams struct {
	// Outcomes keeps the runs with one of these outcomes; empty keeps all.
	// A run still marked running whose grant has expired has outcome
	// expired, as in Store.Runs.
	Outcomes []Outcome
	// Prefix keeps the runs of the jobs whose id starts with it ("" for
	// every job).
	Prefix string
	// After is the key of the last run of the previous page (exclusive),
	// or nil for the first page.
	After *RunKey
	// Limit is the page size, at least 1.
	Limit int
}

// RunKey is where a run sorts among the runs of every job: newest first by
// At (when the grant started, or the tick of a missed run), then by ID
// descending. ID is the store's own number of the run, unique across jobs,
// so the order is total and a page ends at one exact run.
type RunKey struct {
	At time.Time
	ID int64
}

// Before reports whether k sorts before o: newer, or as new with a higher ID.
func (k RunKey) Before(o RunKey) bool {
	if !k.At.Equal(o.At) {
		return k.At.After(o.At)
	}
	return k.ID > o.ID
}

// RecentRun is a run with its place in the order of RecentRunsParams.
type RecentRun struct {
	Run
	Key RunKey
}

// RunPage is one page of runs across jobs.
type RunPage struct {
	Runs []RecentRun
	// More reports whether runs follow the last one of this page.
	More bool
	// Now is the store's clock when the page was read.
	Now time.Time
}

// RevokeParams are the inputs of Store.Revoke.
type RevokeParams struct {
	JobID string
	// By names who revokes (a credential's name), or "".
	By string
}

// PauseParams are the inputs of Store.Pause.
type PauseParams struct {
	JobID string
	// By names who pauses (a credential's name), or "".
	By string
	// Reason says why, at most 256 bytes, or "".
	Reason string
}

// RepairParams are the inputs of Store.Repair.
type RepairParams struct {
	JobID string
	// Window is how far past the store's clock a tick may lie (the
	// service's MaxTickAhead): a mark later than now + Window is ahead.
	Window time.Duration
	// Retention is how long finished runs are kept: the last completed
	// tick is never moved back past now - Retention, since the runs that
	// would show a tick older than that as done may be pruned already.
	Retention time.Duration
	// By names who repairs (a credential's name), or "": it is recorded as
	// the revocation's RevokedBy when the repair revokes a grant.
	By string
	// Reason says why, at most 256 characters, or "".
	Reason string
}

// SweepResult is what one pass of Store.SweepTicks decided.
type SweepResult struct {
	// Jobs is how many scheduled jobs were due and decided.
	Jobs int
	// Ran, Paused, Skipped and Missed count the ticks decided each way.
	Ran, Paused, Skipped, Missed int64
	// Expirations counts grants found past their expiresAt unreleased for
	// the first time.
	Expirations int64
	// Unclaimed counts the owed ticks whose claimable time passed unclaimed
	// and that were forgotten; each manual one is recorded as a missed run
	// with trigger manual.
	Unclaimed int64
	// Policies counts the jobs whose alert policy the pass decided.
	Policies int
	// More reports whether due work remained beyond this pass's batch.
	More bool
}

// Add adds o's counts to r's, and its More.
func (r *SweepResult) Add(o SweepResult) {
	r.Jobs += o.Jobs
	r.Ran, r.Paused, r.Skipped, r.Missed = r.Ran+o.Ran, r.Paused+o.Paused, r.Skipped+o.Skipped, r.Missed+o.Missed
	r.Expirations += o.Expirations
	r.Unclaimed += o.Unclaimed
	r.Policies += o.Policies
	r.More = r.More || o.More
}

// Stats are the counts of the leases, at the store's clock.
type Stats struct {
	// Leases counts the leases by state (held, released, expired, revoked).
	Leases map[State]int64
	// Paused counts the paused jobs, Overdue the scheduled, unpaused jobs
	// whose latest decided tick was missed and that have not run since.
	Paused, Overdue int64
	// Runs24h counts the runs that ended in the 24 hours up to Now, by
	// outcome (succeeded, failed, expired, revoked, missed), by when each
	// ended: a release or revocation at that instant, an expired grant at
	// its expiresAt (also while no grant has taken it over yet), a missed
	// tick at its tick plus its grace, when it was decided missed.
	Runs24h map[Outcome]int64
	// Owed counts the jobs that owe a tick, by reason (TriggerCatchUp,
	// TriggerManual).
	Owed map[Trigger]int64
	Now  time.Time
}

// RunsWindow is the span of Stats.Runs24h.
const RunsWindow = 24 * time.Hour

// LeasePage is one page of leases.
type LeasePage struct {
	Leases []Lease
	// More reports whether leases follow the last one of this page.
	More bool
	// Now is the store's clock when the page was read; states are computed with it.
	Now time.Time
}
