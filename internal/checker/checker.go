package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Invariants are the names of the checks, in the order of the plan.
var Invariants = []string{"I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9", "I10", "I11", "I12", "I12b", "I13", "I14"}

// What each invariant promises, for messages and docs/reliability.md.
var invariantTitles = map[string]string{
	"I1":   "tokens strictly increase, are never reused; no acknowledged grant or release is lost",
	"I2":   "no two valid holders at once",
	"I3":   "only the current holder heartbeats or releases",
	"I4":   "every job's history is linearizable (porcupine)",
	"I5":   "fenced side effects never overlap",
	"I6":   "a tick released succeeded is never run again (unless a repair discarded its run); an owed tick is owed once, and only as owed",
	"I7":   "no lost or stuck lease rows; every job grantable at the end",
	"I8":   "overlapping unfenced beliefs only after a pause of the holder",
	"I9":   "503 within the deadline during database faults, no 500s, recovery",
	"I10":  "ticks executed",
	"I11":  "a retried acquire renews its own grant; never a second token for the same owner and tick",
	"I12":  "every failed, expired and missed run is delivered to the webhook at least once, signed",
	"I12b": "a webhook whose receiver hangs holds at most one delivery slot across the instances, and another webhook's due events start within one delivery timeout",
	"I13":  "no grant of a group's job is made while the group's slots in use reach its limit; slot tokens increase per group; a slot has one holder at a time",
	"I14":  "each webhook-id of a policy event is one transition with one payload; a job's transitions alternate alerting, ok, ... from alerting; the last one told agrees with the job's final status",
}

// Title returns what invariant inv promises.
func Title(inv string) string { return invariantTitles[inv] }

// clockTolerance absorbs the clock granularity between the clients'
// time.Now and the database's clock_timestamp() on one host.
const clockTolerance = time.Millisecond

// Violation is one broken promise.
type Violation struct {
	Invariant string `json:"invariant"`
	Job       string `json:"job,omitempty"`
	Detail    string `json:"detail"`
}

func (v Violation) String() string {
	if v.Job == "" {
		return v.Invariant + ": " + v.Detail
	}
	return fmt.Sprintf("%s: job %s: %s", v.Invariant, v.Job, v.Detail)
}

// Options tune Check.
type Options struct {
	// LinearizabilityTimeout bounds the porcupine search of one job; zero
	// skips I4 (unit tests of the other checks).
	LinearizabilityTimeout time.Duration
	// MinExecutedOutsideFaults is the share of ticks away from fault
	// windows that must run (I10); the chaos tiers ask for all of them.
	MinExecutedOutsideFaults float64
	// Recovery is how soon after a database outage ends the service must
	// answer again (I9).
	Recovery time.Duration
	// Max503 is the clients' timeout: no call may wait longer for an
	// answer, 503s of database faults included (I9). RequestDeadline is
	// the service's deadline for every call, shorter than that: a client
	// that gave up on a call before it had passed (its own lease ran out)
	// says nothing about the service.
	Max503, RequestDeadline time.Duration
	// AllowedStatuses, when set, are the only HTTP statuses an answer may
	// have (I9; a failover run allows 200, 409, 503 and 429).
	AllowedStatuses []int
}

// DefaultOptions are the goals of the PR chaos tier (docs/reliability.md,
// I9 and I10): 3 s leases, 1 s heartbeats, a 1 s request deadline and a
// 2 s client timeout (RecoveryOptions).
func DefaultOptions() Options {
	return RecoveryOptions(3*time.Second, time.Second, time.Second, 2*time.Second)
}

// RecoveryOptions are the I9 and I10 goals of a run whose leases last ttl,
// whose holders heartbeat every heartbeat, whose service answers every
// call by requestDeadline and whose clients wait at most clientTimeout.
//
//   - Every call gets an answer, a 503 at the latest at the request
//     deadline, before its client gives up (Max503): the slack between the
//     two (1 s in the tiers) covers the scheduling of the instance and of
//     the client.
//   - After a database outage ends, the service answers again within
//     ttl + 2·heartbeat (Recovery): the allowance a fresh owner has to
//     acquire a job after its holder stopped (I7).
//   - Away from fault windows every tick runs: five replicas ask for each
//     one and any of them runs it, so only a fault near the tick can lose it.
func RecoveryOptions(ttl, heartbeat, requestDeadline, clientTimeout time.Duration) Options {
	return Options{
		LinearizabilityTimeout:   30 * time.Second,
		MinExecutedOutsideFaults: 1,
		Recovery:                 ttl + 2*heartbeat,
		Max503:                   clientTimeout,
		RequestDeadline:          requestDeadline,
	}
}

// Stats are the numbers a run is summarized with.
type Stats struct {
	Ops       int `json:"ops"`
	Grants    int `json:"grants"`
	Uncertain int `json:"uncertain"`
	// UncertainAcquires are acquires whose answer was lost (503, timeout);
	// UncertainAcquiresGranted those the run history shows took effect,
	// and UncertainAcquiresRetried those of them their owner retried
	// while the grant they made was live (I11).
	UncertainAcquires        int `json:"uncertainAcquires"`
	UncertainAcquiresGranted int `json:"uncertainAcquiresGranted"`
	UncertainAcquiresRetried int `json:"uncertainAcquiresRetried"`

	// 503s answered during database faults, and their latency; Other503
	// counts the 503s away from database faults (an overloaded service).
	Other503    int           `json:"other503"`
	Fault503    int           `json:"fault503"`
	Fault503P99 time.Duration `json:"fault503P99"`
	Fault503Max time.Duration `json:"fault503Max"`
	// FaultTimeouts are calls during database faults that got no answer
	// within the client's timeout.
	FaultTimeouts int `json:"faultTimeouts"`
	// RecoveryFirstOK is the longest wait, over the database faults, from
	// the end of the fault to the first answered call; RecoveryRate the
	// lowest share of answered calls sent from Recovery after a fault on.
	RecoveryFirstOK time.Duration `json:"recoveryFirstOK"`
	RecoveryRate    float64       `json:"recoveryRate"`
	DBFaults        int           `json:"dbFaults"`

	TicksScheduled int `json:"ticksScheduled"`
	TicksExecuted  int `json:"ticksExecuted"`
	// TicksBusy were skipped by design: an earlier tick's run still held
	// the lease (a run longer than the period).
	TicksBusy int `json:"ticksBusy"`
	// TicksGroupFull were refused by design: the sweep recorded them
	// missed with every slot of their job's group in use (I10 skips them).
	TicksGroupFull   int     `json:"ticksGroupFull"`
	ExecutedPct      float64 `json:"executedPct"`
	OutsideFaultsPct float64 `json:"outsideFaultsPct"`
	FaultFreePct     float64 `json:"faultFreePct"`
	FaultFreeTicks   int     `json:"faultFreeTicks"`

	DuplicateTickRuns int `json:"duplicateTickRuns"`
	// RunsByTrigger counts the grants in the run history by what started
	// them (schedule, catch-up, manual): the catch-up and manual ones are
	// the owed ticks claimed.
	RunsByTrigger map[string]int `json:"runsByTrigger,omitempty"`
	// The operator's calls, when the history records them
	// (TriggersRecorded): run-now calls (Triggers), those answered with a
	// manual tick (TriggersAnswered), those that repeated an earlier
	// call's Idempotency-Key (TriggerRetries), and cancellations (Cancels).
	TriggersRecorded bool `json:"triggersRecorded,omitempty"`
	Triggers         int  `json:"triggers"`
	TriggersAnswered int  `json:"triggersAnswered"`
	TriggerRetries   int  `json:"triggerRetries"`
	Cancels          int  `json:"cancels"`
	// ManualUnclaimed are the manual ticks run-now calls were answered
	// with that no run claimed and no cancellation followed: reported,
	// not judged.
	ManualUnclaimed int `json:"manualUnclaimed"`

	FencedRejections int           `json:"fencedRejections"`
	BeliefOverlaps   int           `json:"beliefOverlaps"`
	MaxBeliefOverlap time.Duration `json:"maxBeliefOverlap"`

	// The webhook (I12), when the history records one (WebhookRecorded):
	// the events the failed, expired and missed runs owed when the wait
	// for delivery began, by type (AlertsDue); the messages the receiver
	// got, retries included (Deliveries), and the distinct events among
	// them (DeliveryEvents: the rest are duplicates, which at least once
	// allows); the first attempts the receiver refused on purpose
	// (WebhookRefused); how long the harness waited (WebhookWaited), and
	// how many of the outbox's events of the wait's start were still
	// there when it ended without having reached the receiver
	// (WebhookLeft; one that did is only waiting for its report).
	WebhookRecorded bool           `json:"webhookRecorded,omitempty"`
	AlertsDue       map[string]int `json:"alertsDue,omitempty"`
	Deliveries      int            `json:"deliveries"`
	DeliveryEvents  int            `json:"deliveryEvents"`
	WebhookRefused  int            `json:"webhookRefused"`
	WebhookWaited   time.Duration  `json:"webhookWaited"`
	WebhookLeft     int            `json:"webhookLeft"`

	// Fair delivery (I12b), when the history records a hung webhook
	// (FairnessRecorded): the attempts its receiver got (HungAttempts) and
	// the most in flight at once (HungMaxInFlight); the other webhook's
	// events due while it hung whose first attempt was judged
	// (FairnessJudged) against the bound (FairnessBound), the longest
	// wait among them (FairnessMaxDelay), and those not judged because a
	// fault of the service or the database overlapped (FairnessFaulted).
	FairnessRecorded bool          `json:"fairnessRecorded,omitempty"`
	HungAttempts     int           `json:"hungAttempts"`
	HungMaxInFlight  int           `json:"hungMaxInFlight"`
	FairnessJudged   int           `json:"fairnessJudged"`
	FairnessFaulted  int           `json:"fairnessFaulted"`
	FairnessBound    time.Duration `json:"fairnessBound"`
	FairnessMaxDelay time.Duration `json:"fairnessMaxDelay"`

	// Concurrency groups (I13), when the history has some: the grants made
	// in them (GroupGrants), the acquires refused group_full
	// (GroupFullRefusals), and per group the most grants that certainly
	// held a slot at once (GroupPeak: the limit when the workload reached
	// it).
	GroupGrants       int            `json:"groupGrants,omitempty"`
	GroupFullRefusals int            `json:"groupFullRefusals,omitempty"`
	GroupPeak         map[string]int `json:"groupPeak,omitempty"`

	// Alert policies (I14), when the history records them
	// (PoliciesRecorded): the jobs with a policy (and those whose PUT
	// policy the harness saw answered), the transitions told by
	// type (each webhook-id once) and the repeats, the messages the
	// receiver got (PolicyDeliveries) and the distinct events among them
	// (PolicyEvents), the first attempts it refused on purpose, how long
	// the outbox took to drain, and how many jobs' final status was judged.
	PoliciesRecorded  bool           `json:"policiesRecorded,omitempty"`
	PolicyJobs        int            `json:"policyJobs,omitempty"`
	PolicyJobsSet     int            `json:"policyJobsSet,omitempty"`
	PolicyTransitions map[string]int `json:"policyTransitions,omitempty"`
	PolicyRepeats     int            `json:"policyRepeats,omitempty"`
	PolicyDeliveries  int            `json:"policyDeliveries,omitempty"`
	PolicyEvents      int            `json:"policyEvents,omitempty"`
	PolicyRefused     int            `json:"policyRefused,omitempty"`
	PolicyWaited      time.Duration  `json:"policyWaited,omitempty"`
	PolicyFinalJudged int            `json:"policyFinalJudged,omitempty"`

	// Linearizability is porcupine's verdict per job (Ok, Illegal, Unknown).
	Linearizability map[string]string `json:"linearizability,omitempty"`
}

// Report is the verdict on one history.
type Report struct {
	Violations []Violation    `json:"violations"`
	Counts     map[string]int `json:"counts"`
	Stats      Stats          `json:"stats"`

	lin *linearizability
}

// Failed reports whether any invariant was violated.
func (r *Report) Failed() bool { return len(r.Violations) > 0 }

// Caught reports whether invariant inv was violated.
func (r *Report) Caught(inv string) bool { return r.Counts[inv] > 0 }

func (r *Report) add(inv, job, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Invariant: inv, Job: job, Detail: fmt.Sprintf(format, args...)})
	r.Counts[inv]++
}

// Check runs every checker over h.
func Check(h *History, opts Options) *Report {
	r := &Report{Counts: make(map[string]int)}
	idx := newIndex(h)
	r.Stats.Ops = len(h.Ops)
	for i := range h.Ops {
		if h.Ops[i].Result.Uncertain() {
			r.Stats.Uncertain++
		}
	}
	checkTokens(h, idx, r)     // I1
	checkExclusion(h, idx, r)  // I2
	checkHolderOnly(h, idx, r) // I3
	if opts.LinearizabilityTimeout > 0 {
		checkLinearizable(h, r, opts.LinearizabilityTimeout) // I4
	}
	checkFencedEffects(h, r)                  // I5
	checkTicks(h, idx, r)                     // I6
	checkRows(h, r)                           // I7
	checkBeliefs(h, r)                        // I8
	checkAvailability(h, r, opts)             // I9
	checkProgress(h, idx, r, opts)            // I10
	checkRetries(h, idx, r)                   // I11
	checkDeliveries(h, r)                     // I12
	checkFairness(h, r)                       // I12b
	checkGroups(h, idx, r)                    // I13
	checkPolicies(h, r)                       // I14
	checkStatuses(h, r, opts.AllowedStatuses) // I9, not a timing goal
	sort.SliceStable(r.Violations, func(i, j int) bool {
		return invOrder(r.Violations[i].Invariant) < invOrder(r.Violations[j].Invariant)
	})
	return r
}

func invOrder(inv string) int {
	for i, v := range Invariants {
		if v == inv {
			return i
		}
	}
	return len(Invariants)
}

// SummaryLine is the one line a run is reported with: the 503 latency of
// database faults, recovery after them, ticks executed, and the safety
// violations per invariant.
func (r *Report) SummaryLine() string {
	s := r.Stats
	var b strings.Builder
	fmt.Fprintf(&b, "503 during DB faults: p99 %s, max %s (n=%d; %d other 503s; %d calls unanswered past 2s)",
		fmtDur(s.Fault503P99), fmtDur(s.Fault503Max), s.Fault503, s.Other503, s.FaultTimeouts)
	fmt.Fprintf(&b, " | recovery after %d DB outages: first answer within %s, %.1f%% answered from 5s on",
		s.DBFaults, fmtDur(s.RecoveryFirstOK), 100*s.RecoveryRate)
	fmt.Fprintf(&b, " | ticks executed %.1f%% (%.1f%% away from faults, %.1f%% of %d fault-free)",
		s.ExecutedPct, s.OutsideFaultsPct, s.FaultFreePct, s.FaultFreeTicks)
	fmt.Fprintf(&b, " | %d calls, %d uncertain (%d acquires, %d of them granted, %d retried while granted), %d fenced writes rejected, %d belief overlaps (max %s)",
		s.Ops, s.Uncertain, s.UncertainAcquires, s.UncertainAcquiresGranted, s.UncertainAcquiresRetried, s.FencedRejections, s.BeliefOverlaps, fmtDur(s.MaxBeliefOverlap))
	if s.TriggersRecorded || s.RunsByTrigger[TriggerCatchUp]+s.RunsByTrigger[TriggerManual] > 0 {
		fmt.Fprintf(&b, " | owed ticks: %d catch-up claims granted; %d run-now triggers (%d answered with a manual tick, %d retried with their key), %d cancelled, %d manual claims granted, %d manual ticks never claimed nor cancelled",
			s.RunsByTrigger[TriggerCatchUp], s.Triggers, s.TriggersAnswered, s.TriggerRetries, s.Cancels, s.RunsByTrigger[TriggerManual], s.ManualUnclaimed)
	}
	if s.WebhookRecorded {
		fmt.Fprintf(&b, " | webhook: events due %d %s, %d %s, %d %s; %d deliveries of %d events (%d duplicates), %d first attempts refused; waited %s, %d events of its start left undelivered in the outbox",
			s.AlertsDue[EventRunFailed], EventRunFailed, s.AlertsDue[EventRunExpired], EventRunExpired, s.AlertsDue[EventRunMissed], EventRunMissed,
			s.Deliveries, s.DeliveryEvents, s.Deliveries-s.DeliveryEvents, s.WebhookRefused, fmtDur(s.WebhookWaited), s.WebhookLeft)
	}
	b.WriteString(describeFairness(s))
	if len(s.GroupPeak) > 0 {
		names := make([]string, 0, len(s.GroupPeak))
		for g := range s.GroupPeak {
			names = append(names, g)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, " | groups: %d grants, %d acquires refused group_full, %d ticks missed with the group full; most holders at once:", s.GroupGrants, s.GroupFullRefusals, s.TicksGroupFull)
		for _, g := range names {
			fmt.Fprintf(&b, " %s %d", g, s.GroupPeak[g])
		}
	}
	b.WriteString(describePolicies(s))
	b.WriteString(" | violations")
	for _, inv := range Invariants {
		fmt.Fprintf(&b, " %s=%d", inv, r.Counts[inv])
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// index holds lookups several checkers share.
type index struct {
	// ops per job, sorted by call time.
	byJob map[string][]*Op
	// firstSeen[job][token] is the earliest time a token is known to
	// exist: the return of a call whose answer showed it, or the start
	// of its run in the database.
	firstSeen map[string]map[int64]time.Time
	// runs per job, sorted by token (a reused one in insertion order).
	runs map[string][]Run
}

func newIndex(h *History) *index {
	idx := &index{
		byJob:     make(map[string][]*Op),
		firstSeen: make(map[string]map[int64]time.Time),
		runs:      make(map[string][]Run),
	}
	seen := func(job string, tok int64, at time.Time) {
		m := idx.firstSeen[job]
		if m == nil {
			m = make(map[int64]time.Time)
			idx.firstSeen[job] = m
		}
		if t, ok := m[tok]; !ok || at.Before(t) {
			m[tok] = at
		}
	}
	for i := range h.Ops {
		o := &h.Ops[i]
		idx.byJob[o.Job] = append(idx.byJob[o.Job], o)
		if o.Lease != nil && !o.Return.IsZero() && o.Lease.Token > 0 && !readDuringFailover(h, o) {
			seen(o.Job, o.Lease.Token, o.Return)
		}
	}
	for _, ops := range idx.byJob {
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call.Before(ops[j].Call) })
	}
	for _, run := range h.Runs {
		idx.runs[run.Job] = append(idx.runs[run.Job], run)
		seen(run.Job, run.Token, run.StartedAt)
	}
	for _, runs := range idx.runs {
		sort.Slice(runs, func(i, j int) bool {
			if runs[i].Token != runs[j].Token {
				return runs[i].Token < runs[j].Token
			}
			return runs[i].ID < runs[j].ID
		})
	}
	return idx
}

// supersededAt returns, per token of job, the earliest time any greater
// token is known to exist (or the zero time).
func (idx *index) supersededAt(job string) func(tok int64) time.Time {
	m := idx.firstSeen[job]
	toks := make([]int64, 0, len(m))
	for t := range m {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	// suffix minimum of first-seen times
	suffix := make([]time.Time, len(toks)+1)
	for i := len(toks) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1]
		if t := m[toks[i]]; suffix[i].IsZero() || t.Before(suffix[i]) {
			suffix[i] = t
		}
	}
	return func(tok int64) time.Time {
		i := sort.Search(len(toks), func(i int) bool { return toks[i] > tok })
		return suffix[i]
	}
}

// isGrant reports whether o is a successful acquire.
func isGrant(o *Op) bool {
	return o.Kind == Acquire && o.Result == ResultOK && o.Lease != nil
}

func sameMilli(a, b time.Time) bool {
	return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}
