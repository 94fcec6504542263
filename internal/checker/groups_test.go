package checker

import (
	"strings"
	"testing"
	"time"
)

// grant is a run of job (a member of group "g") granted to owner
// "o-"+job at start (ms from base), with slot and slot token, ending
// with outcome at end (-1: still running).
func grant(id int64, job string, slot int, slotToken int64, start int, outcome string, end int) Run {
	r := Run{ID: id, Job: job, Token: id, Owner: "o-" + job, StartedAt: at(start), Outcome: outcome,
		Group: "g", Slot: slot, SlotToken: slotToken}
	if end >= 0 {
		r.EndedAt = at(end)
	}
	return r
}

// acquireOf is the acquire that made run, sent 2 ms before its start and
// answered with result res (ttl: ttl).
func acquireOf(run Run, res Result) Op {
	o := Op{Client: run.Owner, Job: run.Job, Kind: Acquire, Owner: run.Owner, TTL: ttl,
		Call: run.StartedAt.Add(-2 * time.Millisecond), Result: res}
	if res == ResultOK {
		o.Return = run.StartedAt.Add(3 * time.Millisecond)
		o.Lease = &Lease{Owner: run.Owner, Token: run.Token, State: "held", AcquiredAt: run.StartedAt,
			RenewedAt: run.StartedAt, ExpiresAt: run.StartedAt.Add(ttl), TTL: ttl}
	}
	return o
}

// groupHistory is a history of group "g" of limit over jobs a, b and c
// with runs, each granted by an answered acquire.
func groupHistory(limit int, runs ...Run) *History {
	h := &History{
		TTL: ttl, HeartbeatInterval: time.Second,
		Groups: []Group{{Name: "g", Limit: limit, Jobs: []string{"a", "b", "c"}}},
		Runs:   runs,
	}
	for _, r := range runs {
		h.Ops = append(h.Ops, acquireOf(r, ResultOK))
	}
	return h
}

func checkGroupsOf(h *History) *Report {
	r := &Report{Counts: make(map[string]int)}
	checkGroups(h, newIndex(h), r)
	return r
}

func TestGroupLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		h    *History
		// caught: I13 must flag it, with a message containing want.
		caught bool
		want   string
	}{
		{
			// Limit 2: a and b hold at once; c takes a's slot the instant
			// a released it, and a takes b's the instant b's expiry
			// passed.
			name: "WithinTheLimit",
			h: groupHistory(2,
				grant(1, "a", 1, 1, 0, "succeeded", 1000),
				grant(2, "b", 2, 2, 100, "expired", 3100),
				grant(3, "c", 1, 3, 1000, "succeeded", 2000),
				grant(4, "a", 2, 4, 3100, "running", -1),
			),
		},
		{
			// Limit 2: c is granted while a and b hold both slots.
			name: "LimitPlusOne",
			h: groupHistory(2,
				grant(1, "a", 1, 1, 0, "succeeded", 1000),
				grant(2, "b", 2, 2, 100, "succeeded", 1200),
				grant(3, "c", 3, 3, 500, "succeeded", 900),
			),
			caught: true, want: "while 2 slots were in use",
		},
		{
			// Limit 1: a is revoked at 500 ms; its holder may run until its
			// expiry at 3 s, so b's grant at 1 s breaks the limit.
			name: "RevokedHoldsUntilItsExpiry",
			h: groupHistory(1,
				grant(1, "a", 1, 1, 0, "revoked", 500),
				grant(2, "b", 1, 2, 1000, "succeeded", 1500),
			),
			caught: true, want: "while 1 slots were in use",
		},
		{
			// The same, with b granted the instant a's expiry passed.
			name: "RevokedFreesAtItsExpiry",
			h: groupHistory(1,
				grant(1, "a", 1, 1, 0, "revoked", 500),
				grant(2, "b", 1, 2, 3000, "succeeded", 3500),
			),
		},
		{
			// Limit 1: b is granted a millisecond before a's expiry.
			name: "GrantBeforeTheExpiry",
			h: groupHistory(1,
				grant(1, "a", 1, 1, 0, "expired", 3000),
				grant(2, "b", 1, 2, 2999, "succeeded", 3500),
			),
			caught: true, want: "while 1 slots were in use",
		},
		{
			// A release after the expiry (nobody had taken the job over)
			// does not hold the slot back: it freed at the expiry.
			name: "LateReleaseFreedAtTheExpiry",
			h: groupHistory(1,
				grant(1, "a", 1, 1, 0, "succeeded", 4000),
				grant(2, "b", 1, 2, 3500, "succeeded", 4500),
			),
		},
		{
			// Two grants at one instant: the one inserted second saw the
			// first in use.
			name: "TwoGrantsAtOneInstant",
			h: groupHistory(1,
				grant(1, "a", 1, 1, 0, "succeeded", 100),
				grant(2, "b", 1, 2, 0, "succeeded", 100),
			),
			caught: true, want: "token 2 (o-b) was granted",
		},
		{
			// Limit 2: the slot count is respected, but b took the slot a
			// still held.
			name: "SameSlotTwice",
			h: groupHistory(2,
				grant(1, "a", 1, 1, 0, "succeeded", 1000),
				grant(2, "b", 1, 2, 500, "succeeded", 1200),
			),
			caught: true, want: "slot 1: token 2 (o-b) took it",
		},
		{
			name: "SlotTokenNotIncreasing",
			h: groupHistory(2,
				grant(1, "a", 1, 5, 0, "succeeded", 100),
				grant(2, "b", 1, 5, 200, "succeeded", 300),
			),
			caught: true, want: "slot token 5 (token 2",
		},
		{
			name: "SlotAboveTheLimit",
			h: groupHistory(2,
				grant(1, "a", 3, 1, 0, "succeeded", 100),
			),
			caught: true, want: "took slot 3",
		},
		{
			// A member's grant made without its group took no slot.
			name: "GrantOutsideTheGroup",
			h: groupHistory(1, func() Run {
				r := grant(1, "a", 0, 0, 0, "succeeded", 100)
				r.Group = ""
				return r
			}()),
			caught: true, want: "outside the job's group",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := checkGroupsOf(tt.h)
			if !tt.caught {
				for _, v := range r.Violations {
					t.Errorf("violation in a legal history: %s", v)
				}
				return
			}
			if !r.Caught("I13") {
				t.Fatalf("I13 not caught")
			}
			var found bool
			for _, v := range r.Violations {
				found = found || strings.Contains(v.Detail, tt.want)
			}
			if !found {
				t.Errorf("no violation says %q: %v", tt.want, r.Violations)
			}
		})
	}
}

// TestGroupHeartbeatsAndUnansweredGrants: a heartbeat that succeeded
// extends the slot's hold, and a grant whose answer was lost holds its
// slot like any other.
func TestGroupHeartbeatsAndUnansweredGrants(t *testing.T) {
	t.Parallel()
	a := grant(1, "a", 1, 1, 0, "running", -1)
	b := grant(2, "b", 1, 2, 4000, "succeeded", 4500)
	h := groupHistory(1, a, b)
	if r := checkGroupsOf(h); r.Failed() {
		t.Fatalf("b granted after a's first expiry: %v", r.Violations)
	}
	// a heartbeats at 2 s: its expiry moves to 5 s at least.
	hl := *h.Ops[0].Lease
	hl.RenewedAt, hl.ExpiresAt = at(2001), at(5001)
	h.Ops = append(h.Ops, Op{Client: a.Owner, Job: "a", Kind: Heartbeat, Owner: a.Owner, Token: 1, TTL: ttl,
		Call: at(2000), Return: at(2003), Result: ResultOK, Lease: &hl})
	if r := checkGroupsOf(h); !r.Caught("I13") {
		t.Errorf("b granted before a's heartbeat ran out is not flagged")
	}

	// a's grant was never answered (503): it held the slot all the same.
	c := grant(3, "c", 1, 3, 1000, "succeeded", 1500)
	h = &History{TTL: ttl, Groups: []Group{{Name: "g", Limit: 1, Jobs: []string{"a", "b", "c"}}}, Runs: []Run{a, c}}
	h.Ops = []Op{acquireOf(a, ResultUnavailable), acquireOf(c, ResultOK)}
	if r := checkGroupsOf(h); !r.Caught("I13") {
		t.Errorf("c granted while a's unanswered grant held the slot is not flagged")
	}
}

// TestGroupFullTicksAreNotCounted: a tick the sweep recorded missed with
// the group full is not a tick I10 wants run; one missed otherwise is.
func TestGroupFullTicksAreNotCounted(t *testing.T) {
	t.Parallel()
	h := &History{
		Jobs: []string{"a"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second,
		Start: base, End: base.Add(3 * period),
		// Ticks 1 and 2 are scheduled: 1 ran, 2 was refused.
		Witness: []WitnessRun{{Job: "a", Tick: tick(1), Token: 1, Owner: "x", StartedAt: tick(1), EndedAt: tick(1).Add(time.Second)}},
		Missed:  []Run{{ID: 9, Job: "a", Tick: tick(2), EndedAt: tick(2).Add(500 * time.Millisecond), Outcome: "missed", GroupFull: true}},
	}
	opts := Options{MinExecutedOutsideFaults: 1}
	r := &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if r.Failed() || r.Stats.TicksGroupFull != 1 || r.Stats.TicksScheduled != 1 {
		t.Errorf("got %v, %d ticks group full, %d scheduled; want none, 1 and 1", r.Violations, r.Stats.TicksGroupFull, r.Stats.TicksScheduled)
	}
	h.Missed[0].GroupFull = false
	r = &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if !r.Caught("I10") {
		t.Errorf("a tick missed without the group full is not flagged")
	}

	// Not recorded, but the run history shows the group full at the end
	// of the tick's grace (500 ms): b held the only slot from the tick
	// for a second.
	h.Missed = nil
	h.Grace = 500 * time.Millisecond
	h.Groups = []Group{{Name: "g", Limit: 1, Jobs: []string{"a", "b"}}}
	b := Run{ID: 1, Job: "b", Token: 1, Owner: "o-b", StartedAt: tick(2), EndedAt: tick(2).Add(time.Second), Outcome: "succeeded", Group: "g", Slot: 1, SlotToken: 1}
	h.Runs = []Run{b}
	h.Ops = []Op{acquireOf(b, ResultOK)}
	r = &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if r.Failed() || r.Stats.TicksGroupFull != 1 {
		t.Errorf("got %v and %d ticks group full; want none and 1", r.Violations, r.Stats.TicksGroupFull)
	}
	// b released 400 ms after the tick: the slot was free at its grace's end.
	h.Runs[0].EndedAt = tick(2).Add(400 * time.Millisecond)
	r = &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if !r.Caught("I10") {
		t.Errorf("a tick missed while a slot was free is not flagged")
	}
}

// TestGroupSchedules: a job with its own schedule (every 4 s from 1 s)
// is judged on its ticks, not the run's period.
func TestGroupSchedules(t *testing.T) {
	t.Parallel()
	sched := Schedule{Period: 4 * time.Second, Offset: time.Second}
	h := &History{
		Jobs: []string{"a"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second,
		Start: base, End: base.Add(14 * time.Second),
		Schedules: map[string]Schedule{"a": sched},
	}
	// Its ticks from Start + 4 s to End - 4 s: 5 s and 9 s.
	for _, s := range []int{5000, 9000} {
		h.Witness = append(h.Witness, WitnessRun{Job: "a", Tick: at(s), Token: int64(s), Owner: "x", StartedAt: at(s), EndedAt: at(s + 100)})
	}
	r := &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, Options{MinExecutedOutsideFaults: 1})
	if r.Failed() || r.Stats.TicksScheduled != 2 {
		t.Errorf("got %v and %d ticks scheduled; want none and 2", r.Violations, r.Stats.TicksScheduled)
	}
}

// TestGroupFullInTheModel: an acquire refused group_full is legal while
// the job's lease is free, and not while another owner surely holds it
// (lease_held comes first).
func TestGroupFullInTheModel(t *testing.T) {
	t.Parallel()
	l1 := lease("a", 1, 2, 2, 0, -1)
	rel := releasedLease(l1, 500, 0)
	h := &History{
		Jobs: []string{"j"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second,
		Ops: []Op{
			acquireOp("a", 0, 0, 5, ResultOK, l1),
			releaseOp("a", 1, 500, 505, ResultOK, rel),
			{Client: "b", Job: "j", Kind: Acquire, Owner: "b", TTL: ttl, Tick: tick(1), Call: at(2000), Return: at(2005), Result: ResultGroupFull, Status: 409, Lease: rel},
		},
	}
	r := &Report{Counts: make(map[string]int)}
	checkLinearizable(h, r, 10*time.Second)
	if r.Failed() {
		t.Errorf("group_full on a released lease: %v", r.Violations)
	}
	h.Ops = []Op{
		acquireOp("a", 0, 0, 5, ResultOK, l1),
		{Client: "b", Job: "j", Kind: Acquire, Owner: "b", TTL: ttl, Tick: tick(0), Call: at(1000), Return: at(1005), Result: ResultGroupFull, Status: 409},
	}
	r = &Report{Counts: make(map[string]int)}
	checkLinearizable(h, r, 10*time.Second)
	if !r.Caught("I4") {
		t.Errorf("group_full while a holds the lease is not flagged")
	}
}

// TestGroupReplicaFault: a replica paused while it held one job of a
// group puts every job of the group in the fault's window (the slot it
// held is theirs too), and only then.
func TestGroupReplicaFault(t *testing.T) {
	t.Parallel()
	b := Run{ID: 1, Job: "b", Token: 1, Owner: "x", Tick: tick(1), StartedAt: tick(1), EndedAt: tick(1).Add(time.Second), Outcome: "succeeded", Group: "g", Slot: 1, SlotToken: 1}
	h := &History{
		Jobs: []string{"a", "b"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second, MaxRun: time.Second,
		Start: base, End: base.Add(3 * period),
		Runs:   []Run{b},
		Ops:    []Op{acquireOf(b, ResultOK)},
		Faults: []Fault{{Kind: ReplicaPause, Target: "x", Instance: -1, Start: tick(1).Add(500 * time.Millisecond), End: tick(2).Add(-time.Second)}},
		// b's tick 2 ran; a ran neither tick.
		Witness: []WitnessRun{
			{Job: "b", Tick: tick(1), Token: 1, Owner: "x", StartedAt: tick(1), EndedAt: tick(1).Add(time.Second)},
			{Job: "b", Tick: tick(2), Token: 2, Owner: "y", StartedAt: tick(2), EndedAt: tick(2).Add(time.Second)},
		},
	}
	opts := Options{MinExecutedOutsideFaults: 1}
	r := &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if !r.Caught("I10") {
		t.Fatalf("without groups, a's ticks are not in the window of x's pause, and must have run")
	}
	h.Groups = []Group{{Name: "g", Limit: 1, Jobs: []string{"a", "b"}}}
	r = &Report{Counts: make(map[string]int)}
	checkProgress(h, newIndex(h), r, opts)
	if r.Failed() {
		t.Errorf("a's ticks in the window of x's pause, which held b's slot: %v", r.Violations)
	}
}
