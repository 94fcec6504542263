// Package checker decides whether a recorded chaos run kept leaseapi's
// promises. It reads what the chaos harness (test/chaos) collected — every
// HTTP call of every client with its call and return times, the run history
// and lease rows of the database, the fenced side effects and the unfenced
// beliefs the jobs wrote to the witness schema, the injected faults — and
// checks the invariants I1–I14 of docs/reliability.md,
// including a porcupine model of one job's lease (I4).
//
// The checkers assume what the harness guarantees: the database, the
// services and the clients run on one host, so the database clock
// (clock_timestamp) and the clients' wall clocks are the same clock. That
// lets a check compare a client's send time with a time the database
// recorded without trusting any service's clock.
//
// Every checker is a pure function of a History, unit-tested with canned
// legal and illegal histories; a checker that never fails is not a checker.
package checker

import (
	"time"
)

// OpKind is the lease operation of a call.
type OpKind string

// The operations the checkers model.
const (
	Acquire   OpKind = "acquire"
	Heartbeat OpKind = "heartbeat"
	Release   OpKind = "release"
)

// Result is how a call ended, as the client saw it.
type Result string

// The results of a call. Unavailable, Unknown and Error leave the outcome
// of the operation unknown: it may or may not have taken effect.
const (
	ResultOK       Result = "ok"         // 200
	ResultHeld     Result = "lease_held" // 409 lease_held
	ResultTickDone Result = "tick_done"  // 409 tick_done
	// ResultGroupFull is a 409 group_full: every slot of the job's
	// concurrency group was in use; nothing was written.
	ResultGroupFull Result = "group_full"
	ResultLost      Result = "lease_lost" // 409 lease_lost
	ResultNotFound  Result = "not_found"  // 404
	// ResultUnavailable is a 503: the service answered, the outcome of the
	// write is unknown.
	ResultUnavailable Result = "unavailable"
	// ResultUnknown is no answer: a timeout, a reset connection, or a
	// client killed while the call was in flight.
	ResultUnknown Result = "unknown"
	// ResultNotSent is a call that never reached the service (the
	// connection was refused, nothing was written): it had no effect.
	ResultNotSent Result = "not_sent"
	// ResultRejected is another 4xx: bad input, no effect.
	ResultRejected Result = "rejected"
	// ResultError is a 5xx other than 503: a bug (I9), outcome unknown.
	ResultError Result = "error"
)

// Uncertain reports whether a call with result r may or may not have taken
// effect.
func (r Result) Uncertain() bool {
	return r == ResultUnavailable || r == ResultUnknown || r == ResultError
}

// Answered reports whether the service gave a definite answer: a 2xx, a
// 409 or a 404. These count as successes for availability (I9).
func (r Result) Answered() bool {
	switch r {
	case ResultOK, ResultHeld, ResultTickDone, ResultGroupFull, ResultLost, ResultNotFound:
		return true
	}
	return false
}

// Lease is a lease as a response carried it (the wire truncates times to
// milliseconds). Zero times stand for null.
type Lease struct {
	Owner             string
	Token             int64
	State             string
	AcquiredAt        time.Time
	RenewedAt         time.Time
	ExpiresAt         time.Time
	ReleasedAt        time.Time
	TTL               time.Duration
	Tick              time.Time
	LastCompletedTick time.Time
	// Timeline is the WAL timeline the answer said Token was written on
	// (0: the answer did not say).
	Timeline int64
}

// Op is one HTTP call of a lease client.
type Op struct {
	// Client is the process incarnation that made the call, e.g. "r2#1"
	// (replica 2, first restart), "zombie" or "probe". The calls of one
	// client on one job are sequential.
	Client string
	// Instance is the leaseapi instance the call was sent to.
	Instance int
	Job      string
	Kind     OpKind
	Owner    string
	// Token is the fencing token of a heartbeat or release.
	Token int64
	// TTL is the requested ttl (acquire, heartbeat).
	TTL time.Duration
	// Tick is the acquire's tick, zero for none.
	Tick time.Time
	// Outcome is a release's outcome, succeeded or failed.
	Outcome string
	// Call is when the client sent the call; Return when the answer came
	// back, or zero when the client died first.
	Call, Return time.Time
	Status       int
	Result       Result
	// Lease is the lease of a 200, or of a 409 problem.
	Lease *Lease
	// Err describes a transport error.
	Err string
	// Problem is the code and detail of the problem of an answer that is
	// neither a 200, a 409 nor a 503 ("invalid_request: ..."), to name
	// what an answer I9 refuses said.
	Problem string `json:",omitempty"`
}

// Latency is Return - Call, or zero for a call that never returned.
func (o *Op) Latency() time.Duration {
	if o.Return.IsZero() {
		return 0
	}
	return o.Return.Sub(o.Call)
}

// Run is one row of the database's run history (the runs table).
type Run struct {
	// ID is the identity column: the order the grants were inserted in.
	ID        int64
	Job       string
	Token     int64
	Owner     string
	Tick      time.Time
	StartedAt time.Time
	EndedAt   time.Time // zero while running
	Outcome   string
	// Trigger is what started the run: "schedule", "catch-up" (the tick
	// a job owed after a missed tick) or "manual" (an operator's
	// trigger); "" for a store that does not record it. TriggeredBy names
	// who triggered a manual run.
	Trigger     string
	TriggeredBy string
	// ExpiryCounted reports that the service counted the run's expiry (the
	// sweep, or a takeover) while it was running: it told the expiry then,
	// whatever the run's outcome became.
	ExpiryCounted bool
	// Group, Slot and SlotToken are the concurrency group the grant was
	// made in and the slot it took ("", 0, 0 for none). GroupFull marks a
	// missed run of a tick whose group had every slot in use when the
	// tick's grace ended.
	Group     string
	Slot      int
	SlotToken int64
	GroupFull bool
}

// Group is a concurrency group of the run: at most Limit of its Jobs hold
// a lease at once (I13). The harness creates it before the replicas start
// and never changes its limit.
type Group struct {
	Name  string
	Limit int
	Jobs  []string
}

// The triggers of a run.
const (
	TriggerSchedule = "schedule"
	TriggerCatchUp  = "catch-up"
	TriggerManual   = "manual"
)

// TriggerKind is an operator's call about what a job owes.
type TriggerKind string

// The operator's calls.
const (
	// RunNow is POST /leases/{jobId}/trigger: the job owes a manual tick.
	RunNow TriggerKind = "trigger"
	// CancelOwed is DELETE /leases/{jobId}/trigger: the job owes nothing.
	CancelOwed TriggerKind = "cancel_trigger"
)

// TriggerCall is one call of the harness acting as an operator: a run now
// (with its Idempotency-Key) or the cancellation of what a job owes. The
// lease of a 200 says what the job owes after it: for a run now, the
// manual tick the call made or answered (a retry with the key of the last
// manual tick answers it whatever became of it, so then possibly nothing).
type TriggerCall struct {
	Kind     TriggerKind
	Client   string
	Instance int
	Job      string
	// Key is a run now's Idempotency-Key.
	Key          string
	Call, Return time.Time // Return is zero for a call that never returned
	Status       int
	Result       Result
	// OwedTick and OwedReason are what the answered lease owes (zero and
	// "" when nothing, or no lease was answered).
	OwedTick   time.Time
	OwedReason string
	// Problem is as Op's.
	Problem string `json:",omitempty"`
}

// Call is an HTTP call of a client of the run that is neither a lease call
// (Op) nor an operator's (TriggerCall): a replica's POST /owed. Only its
// answer's status is judged (I9's AllowedStatuses).
type Call struct {
	Client   string
	Instance int
	// Route is the call's method and path: "POST /owed".
	Route        string
	Call, Return time.Time // Return is zero for a call that never returned
	Status       int
	Result       Result
	// Err and Problem are as Op's.
	Err     string `json:",omitempty"`
	Problem string `json:",omitempty"`
}

// ManualTick is the manual tick the answer of a run now named, or zero.
func (c *TriggerCall) ManualTick() time.Time {
	if c.Kind != RunNow || c.Result != ResultOK || c.OwedReason != TriggerManual {
		return time.Time{}
	}
	return c.OwedTick
}

// LeaseRow is one row of the leases table, read after the run.
type LeaseRow struct {
	Job       string
	Owner     string
	Token     int64
	ExpiresAt time.Time
}

// WitnessRun is one accepted fenced execution in witness.runs: its start
// was accepted by the fence, and its end too when EndedAt is set.
type WitnessRun struct {
	Job       string
	Tick      time.Time
	Token     int64
	Owner     string
	StartedAt time.Time
	EndedAt   time.Time
}

// Rejection is a fenced write the fence refused (witness.rejected).
type Rejection struct {
	Job   string
	Tick  time.Time
	Token int64
	Owner string
	// Phase is "start" or "end".
	Phase string
	At    time.Time
}

// Belief is an unfenced note of a job: "I hold Job with Token now"
// (witness.beliefs), written when the job starts its work and again when it
// finishes it while its context is still live.
type Belief struct {
	Job   string
	Token int64
	Owner string
	At    time.Time
}

// FaultKind names an injected fault.
type FaultKind string

// The faults of the nemesis.
const (
	ReplicaPause  FaultKind = "replica_pause"  // SIGSTOP ... SIGCONT of a replica
	ReplicaKill   FaultKind = "replica_kill"   // SIGKILL of a replica, restarted at End
	InstancePause FaultKind = "instance_pause" // SIGSTOP ... SIGCONT of a leaseapi instance
	InstanceKill  FaultKind = "instance_kill"  // SIGKILL of a leaseapi instance, restarted at End
	DBLatency     FaultKind = "db_latency"     // latency toxic on one instance's database proxy
	APILatency    FaultKind = "api_latency"    // latency toxic on the answers of one instance to the replicas
	DBReset       FaultKind = "db_reset"       // reset_peer toxic on one instance's database proxy
	DBBlackhole   FaultKind = "db_blackhole"   // timeout toxic (data dropped) on one instance's proxy
	PGRestart     FaultKind = "pg_restart"     // pg_ctl restart -m fast
	PGCrash       FaultKind = "pg_crash"       // pg_ctl stop -m immediate, then start
	PGFreeze      FaultKind = "pg_freeze"      // SIGSTOP of every Postgres process
)

// DB reports whether the fault is a database fault: one that makes the
// service answer 503 (I9 measures those answers).
func (k FaultKind) DB() bool {
	switch k {
	case DBLatency, DBReset, DBBlackhole, PGRestart, PGCrash, PGFreeze:
		return true
	}
	return k.failover()
}

// Fault is one injected fault.
type Fault struct {
	Kind FaultKind
	// Target is the client of a replica fault ("r2#1"), else empty.
	Target string
	// Instance is the leaseapi instance a fault affects, or -1 for all.
	Instance int
	// Start and End bound the fault; a kill's End is the restart.
	Start, End time.Time
}

// Affects reports whether the fault touches calls sent to instance i.
func (f *Fault) Affects(i int) bool {
	return f.Instance < 0 || f.Instance == i
}

// Sample is one periodic read of the leases table by the harness (I7).
type Sample struct {
	At time.Time
	// Leases is count(leases); OverMaxTTL counts rows whose expires_at is
	// more than the maximum TTL ahead of the database clock.
	Leases     int
	OverMaxTTL int
	// Err is set when the database could not be read (a fault window).
	Err string
}

// Probe is the final liveness probe of one job (I7): after the replicas
// stopped, a fresh owner must acquire every job within TTL + 2·heartbeat.
type Probe struct {
	Job     string
	OK      bool
	Elapsed time.Duration
	Err     string
}

// History is everything one chaos run recorded.
type History struct {
	Jobs              []string
	Period            time.Duration // the jobs' schedule: every Period
	TTL               time.Duration
	HeartbeatInterval time.Duration
	MaxTTL            time.Duration
	// Start is when the replicas were started, End when the chaos phase
	// ended (faults healed, replicas about to stop). Ticks in [Start+Period,
	// End-Period] are scheduled ticks (I10).
	Start, End time.Time
	// FaultFreeUntil ends the warm-up: ticks before it ran without faults
	// and must all be executed; zero when the run has no such phase.
	FaultFreeUntil time.Time
	// MaxRun is the longest a tick's run takes (acquire, job, release): a
	// fault that starts within MaxRun after a tick can still cost it.
	MaxRun time.Duration

	Ops  []Op
	Runs []Run
	// Missed are the runs without a holder the sweep recorded (outcome
	// missed): the ticks of the schedule nobody ran (Trigger schedule),
	// which a catch-up run must be of, and the manual ticks nobody claimed
	// (Trigger manual). The checks of grants do not see them.
	Missed []Run
	// Triggers are the calls of the harness acting as an operator; nil when
	// the history does not record them (then manual runs are not matched
	// with them).
	Triggers []TriggerCall
	// Calls are the clients' other calls (POST /owed); nil when the
	// history does not record them.
	Calls []Call
	// CatchUpJobs are the jobs the replicas registered with catch-up
	// latest; nil when the history does not say.
	CatchUpJobs []string
	// Grace is the jobs' effective grace (zero: Period): a scheduled tick
	// whose lease an owed tick's grant took within [tick, tick + grace]
	// is skipped, not missed.
	Grace time.Duration

	Leases    []LeaseRow
	Witness   []WitnessRun
	Rejected  []Rejection
	Beliefs   []Belief
	Faults    []Fault
	Samples   []Sample
	Probes    []Probe
	ProbeMax  time.Duration // the probe's allowance, TTL + 2·heartbeat + slack
	Incidents []string      // service processes that exited or panicked on their own (I9)
	// Webhook is what the webhook receiver got and the runs it had to get
	// (I12); nil when the run registered no webhook.
	Webhook *Webhook
	// Groups are the run's concurrency groups (I13); nil when it has none.
	Groups []Group
	// Policies are the run's jobs with an alert policy and what their
	// webhook told (I14); nil when the run set no policy.
	Policies *Policies
	// Schedules are the schedules of the jobs that do not tick every
	// Period since the epoch (I10).
	Schedules map[string]Schedule
}

// Schedule is a job's schedule: every Period since the epoch, shifted by
// Offset (less than Period), with a grace of Grace (zero: History.Grace).
type Schedule struct {
	Period, Offset time.Duration
	Grace          time.Duration
}

// schedule is job's schedule in h.
func (h *History) schedule(job string) Schedule {
	if s, ok := h.Schedules[job]; ok && s.Period > 0 {
		return s
	}
	return Schedule{Period: h.Period}
}
