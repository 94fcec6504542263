package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The canned histories are of one job, "j", served by two instances, with
// TTL 3 s and ticks every 2 s. base is the time every offset counts from.
var base = time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)

const (
	ttl    = 3 * time.Second
	period = 2 * time.Second
)

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func tick(k int) time.Time { return base.Add(time.Duration(k) * period) }

// lease builds an answered lease: acquired at acq, renewed at ren, expiring
// ren+TTL, for tick k (-1 for none), with completed tick done (-1 for none).
func lease(owner string, tok int64, acq, ren, k, done int) *Lease {
	l := &Lease{
		Owner: owner, Token: tok, State: "held",
		AcquiredAt: at(acq), RenewedAt: at(ren), ExpiresAt: at(ren).Add(ttl), TTL: ttl,
	}
	if k >= 0 {
		l.Tick = tick(k)
	}
	if done >= 0 {
		l.LastCompletedTick = tick(done)
	}
	return l
}

func expired(l *Lease) *Lease {
	c := *l
	c.State = "expired"
	return &c
}

func releasedLease(l *Lease, rel int, done int) *Lease {
	c := *l
	c.State = "released"
	c.ReleasedAt = at(rel)
	c.ExpiresAt = at(rel)
	if done >= 0 {
		c.LastCompletedTick = tick(done)
	}
	return &c
}

func acquireOp(client string, k, call, ret int, res Result, l *Lease) Op {
	o := Op{Client: client, Job: "j", Kind: Acquire, Owner: client, TTL: ttl, Call: at(call), Return: at(ret), Result: res, Lease: l, Status: status(res)}
	if k >= 0 {
		o.Tick = tick(k)
	}
	return o
}

func heartbeatOp(client string, tok int64, call, ret int, res Result, l *Lease) Op {
	return Op{Client: client, Job: "j", Kind: Heartbeat, Owner: client, Token: tok, TTL: ttl, Call: at(call), Return: at(ret), Result: res, Lease: l, Status: status(res)}
}

func releaseOp(client string, tok int64, call, ret int, res Result, l *Lease) Op {
	return Op{Client: client, Job: "j", Kind: Release, Owner: client, Token: tok, Outcome: "succeeded", Call: at(call), Return: at(ret), Result: res, Lease: l, Status: status(res)}
}

func status(r Result) int {
	switch r {
	case ResultOK:
		return 200
	case ResultHeld, ResultTickDone, ResultLost:
		return 409
	case ResultNotFound:
		return 404
	case ResultUnavailable:
		return 503
	case ResultError:
		return 500
	}
	return 0
}

// legal is a history that keeps every promise:
//
//	a holds token 1 for tick 0 (b is refused), heartbeats and releases it
//	succeeded; b holds token 2 for tick 1 (c is refused tick 0: done),
//	its heartbeat gets a 503, it releases; a zombie heartbeat with a's old
//	token is refused; c holds token 3 for tick 2 and vanishes; a is refused
//	until c's lease expires, then holds token 4 for tick 3.
func legal() *History {
	l1 := lease("a", 1, 2, 2, 0, -1)
	l1hb := lease("a", 1, 2, 1002, 0, -1)
	l1rel := releasedLease(l1hb, 1502, 0)
	l2 := lease("b", 2, 2002, 2002, 1, 0)
	l2rel := releasedLease(l2, 3502, 1)
	l3 := lease("c", 3, 4002, 4002, 2, 1)
	l4 := lease("a", 4, 7102, 7102, 3, 1)
	ops := []Op{
		acquireOp("a", 0, 0, 5, ResultOK, l1),
		acquireOp("b", 0, 1, 6, ResultHeld, l1),
		heartbeatOp("a", 1, 1000, 1005, ResultOK, l1hb),
		releaseOp("a", 1, 1500, 1505, ResultOK, l1rel),
		acquireOp("b", 1, 2000, 2005, ResultOK, l2),
		acquireOp("c", 0, 2001, 2006, ResultTickDone, l2),
		heartbeatOp("b", 2, 3000, 4000, ResultUnavailable, nil),
		releaseOp("b", 2, 3500, 3505, ResultOK, l2rel),
		{Client: "zombie", Job: "j", Kind: Heartbeat, Owner: "a", Token: 1, TTL: ttl, Call: at(3600), Return: at(3604), Result: ResultLost, Status: 409, Lease: l2rel},
		acquireOp("c", 2, 4000, 4005, ResultOK, l3),
		acquireOp("a", 2, 5000, 5005, ResultHeld, l3),
		acquireOp("a", 3, 7100, 7105, ResultOK, l4),
	}
	return &History{
		Jobs:   []string{"j"},
		Period: period, TTL: ttl, HeartbeatInterval: time.Second, MaxTTL: time.Hour,
		Ops: ops,
		Runs: []Run{
			{ID: 1, Job: "j", Token: 1, Owner: "a", Tick: tick(0), StartedAt: at(2), EndedAt: at(1502), Outcome: "succeeded"},
			{ID: 2, Job: "j", Token: 2, Owner: "b", Tick: tick(1), StartedAt: at(2002), EndedAt: at(3502), Outcome: "succeeded"},
			{ID: 3, Job: "j", Token: 3, Owner: "c", Tick: tick(2), StartedAt: at(4002), EndedAt: at(7002), Outcome: "expired"},
			{ID: 4, Job: "j", Token: 4, Owner: "a", Tick: tick(3), StartedAt: at(7102), Outcome: "running"},
		},
		Leases: []LeaseRow{{Job: "j", Owner: "a", Token: 4, ExpiresAt: at(10102)}},
		Witness: []WitnessRun{
			{Job: "j", Tick: tick(0), Token: 1, Owner: "a", StartedAt: at(10), EndedAt: at(1400)},
			{Job: "j", Tick: tick(1), Token: 2, Owner: "b", StartedAt: at(2010), EndedAt: at(3400)},
			{Job: "j", Tick: tick(2), Token: 3, Owner: "c", StartedAt: at(4010)},
			{Job: "j", Tick: tick(3), Token: 4, Owner: "a", StartedAt: at(7110), EndedAt: at(7500)},
		},
		Rejected: []Rejection{{Job: "j", Tick: tick(2), Token: 3, Owner: "c", Phase: "end", At: at(7600)}},
		Beliefs: []Belief{
			{Job: "j", Token: 1, Owner: "a", At: at(8)}, {Job: "j", Token: 1, Owner: "a", At: at(1400)},
			{Job: "j", Token: 2, Owner: "b", At: at(2008)}, {Job: "j", Token: 2, Owner: "b", At: at(3400)},
			{Job: "j", Token: 3, Owner: "c", At: at(4008)},
			{Job: "j", Token: 4, Owner: "a", At: at(7108)}, {Job: "j", Token: 4, Owner: "a", At: at(7500)},
		},
		Samples: []Sample{{At: at(100), Leases: 1}, {At: at(5000), Leases: 1}},
	}
}

func check(t *testing.T, h *History) *Report {
	t.Helper()
	opts := DefaultOptions()
	opts.LinearizabilityTimeout = 10 * time.Second
	opts.MinExecutedOutsideFaults = 0
	return Check(h, opts)
}

func TestLegalHistoryPasses(t *testing.T) {
	t.Parallel()
	r := check(t, legal())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	if got := r.Stats.Linearizability["j"]; got != "Ok" {
		t.Errorf("porcupine: got %s, want Ok", got)
	}
	if r.Stats.Grants != 4 {
		t.Errorf("grants: got %d, want 4", r.Stats.Grants)
	}
	line := r.SummaryLine()
	for _, want := range []string{"violations I1=0 I2=0", "I10=0", "503 during DB faults", "ticks executed"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
}

// TestIllegalHistoriesAreFlagged changes the legal history in one way each
// and wants the named invariants to catch it.
func TestIllegalHistoriesAreFlagged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(h *History)
		want   []string
	}{
		{
			// b is granted while a holds the lease (what M1 does).
			name: "TwoHolders",
			mutate: func(h *History) {
				h.Ops[1] = acquireOp("b", 0, 1, 6, ResultOK, lease("b", 2, 3, 3, 0, -1))
			},
			want: []string{"I2", "I4"},
		},
		{
			// a is granted token 3 again after c had it (what M3 and M4 do).
			name: "ReusedToken",
			mutate: func(h *History) {
				h.Ops[11] = acquireOp("a", 3, 7100, 7105, ResultOK, lease("a", 3, 7102, 7102, 3, 1))
			},
			want: []string{"I1", "I4"},
		},
		{
			// The zombie's heartbeat with a's old token is accepted (M2).
			name: "AcceptedStaleHeartbeat",
			mutate: func(h *History) {
				l := lease("b", 2, 2002, 3602, 1, 0)
				h.Ops[8].Result, h.Ops[8].Status, h.Ops[8].Lease = ResultOK, 200, l
			},
			want: []string{"I3", "I4"},
		},
		{
			// A retried acquire by the holder bumps the token (M7).
			name: "NonIdempotentRetry",
			mutate: func(h *History) {
				h.Ops = append(h.Ops,
					acquireOp("a", 3, 7200, 8300, ResultUnavailable, nil),
					acquireOp("a", 3, 8400, 8405, ResultOK, lease("a", 5, 7102, 8402, 3, 1)))
			},
			want: []string{"I4"},
		},
		{
			// The database lost a grant a client saw (M4): the run history
			// gives token 3 to someone else.
			name: "LostGrant",
			mutate: func(h *History) {
				h.Runs[2].Owner = "d"
			},
			want: []string{"I1"},
		},
		{
			// A crash lost an acknowledged release (M4): the run expired.
			name: "AcknowledgedReleaseLost",
			mutate: func(h *History) {
				h.Runs[1].Outcome = "expired"
			},
			want: []string{"I1"},
		},
		{
			name: "RunHistoryOverlap",
			mutate: func(h *History) {
				h.Runs[2].EndedAt = at(7500)
			},
			want: []string{"I2"},
		},
		{
			name: "FencedEffectsOverlap",
			mutate: func(h *History) {
				h.Witness[0].EndedAt = at(2500)
			},
			want: []string{"I5"},
		},
		{
			name: "TickRunAgainAfterSuccess",
			mutate: func(h *History) {
				h.Runs[3].Tick = tick(0)
				h.Witness[3].Tick = tick(0)
			},
			want: []string{"I6"},
		},
		{
			name: "LostLeaseRow",
			mutate: func(h *History) {
				h.Samples = append(h.Samples, Sample{At: at(6000), Leases: 0})
			},
			want: []string{"I7"},
		},
		{
			name: "OverlappingBeliefsWithoutPause",
			mutate: func(h *History) {
				h.Beliefs = append(h.Beliefs, Belief{Job: "j", Token: 1, Owner: "a", At: at(2500)})
			},
			want: []string{"I8"},
		},
		{
			name: "InternalError",
			mutate: func(h *History) {
				h.Ops[6].Result, h.Ops[6].Status = ResultError, 500
			},
			want: []string{"I9"},
		},
		{
			name: "Slow503",
			mutate: func(h *History) {
				h.Faults = []Fault{{Kind: PGRestart, Instance: -1, Start: at(2900), End: at(3400)}}
				h.Ops[6].Return = at(6000)
			},
			want: []string{"I9"},
		},
		{
			name: "MissedTickWithoutFaults",
			mutate: func(h *History) {
				h.Start, h.End, h.FaultFreeUntil = at(-2000), at(10000), at(10000)
				h.Witness[3].EndedAt = time.Time{} // tick 3 never finished
				h.Runs[2].Outcome = "succeeded"    // tick 2: not an expiry here
			},
			want: []string{"I10"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := legal()
			tt.mutate(h)
			r := check(t, h)
			for _, inv := range tt.want {
				if !r.Caught(inv) {
					t.Errorf("%s not flagged; violations: %v", inv, r.Violations)
				}
			}
		})
	}
}

// TestDiscardedRunIsNotDone: a run a repair discarded (its tick lay ahead
// of the clock) does not make its tick done; the tick may be granted and
// run again without an I6 violation, in the run history and in what the
// clients saw. (The repair is no call of the history, so the lease model,
// I4, and the durability of the releases, I1, still object: the chaos
// runs never repair.)
func TestDiscardedRunIsNotDone(t *testing.T) {
	t.Parallel()
	h := legal()
	// Ticks 0 and 1 lay ahead; a repair discarded their runs.
	h.Runs[0].Outcome = "discarded"
	h.Runs[1].Outcome = "discarded"
	h.Runs[3].Tick = tick(0)
	h.Witness[3].Tick = tick(0)
	l := *h.Ops[11].Lease
	l.Tick = tick(0)
	h.Ops[11].Lease = &l
	h.Ops[11].Tick = tick(0)
	if r := check(t, h); r.Caught("I6") {
		t.Errorf("I6 flagged a tick whose succeeded run was discarded: %v", r.Violations)
	}
}

func TestPausedHolderExplainsOverlap(t *testing.T) {
	t.Parallel()
	h := legal()
	h.Beliefs = append(h.Beliefs, Belief{Job: "j", Token: 1, Owner: "a", At: at(2500)})
	h.Faults = []Fault{{Kind: ReplicaPause, Target: "a", Instance: -1, Start: at(1300), End: at(2450)}}
	r := check(t, h)
	if r.Caught("I8") {
		t.Errorf("a paused holder's overlap was flagged: %v", r.Violations)
	}
	if r.Stats.BeliefOverlaps != 1 || r.Stats.MaxBeliefOverlap != 492*time.Millisecond {
		t.Errorf("overlaps: got %d (max %s), want 1 (max 492ms)", r.Stats.BeliefOverlaps, r.Stats.MaxBeliefOverlap)
	}
}

// TestPauseDuringTheAcquireExplainsOverlap: c was paused while its
// acquire was in flight; when it woke up, its lease had passed to a, and
// its job still wrote its first belief.
func TestPauseDuringTheAcquireExplainsOverlap(t *testing.T) {
	t.Parallel()
	h := legal()
	h.Beliefs = append(h.Beliefs, Belief{Job: "j", Token: 3, Owner: "c", At: at(8100)})
	r := check(t, h)
	if !r.Caught("I8") {
		t.Fatalf("an unexplained overlap was not flagged")
	}
	h.Faults = []Fault{{Kind: ReplicaPause, Target: "c", Instance: -1, Start: at(4001), End: at(8000)}}
	r = check(t, h)
	if r.Caught("I8") {
		t.Errorf("a holder paused during its acquire was flagged: %v", r.Violations)
	}
}

func TestUnknownOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		ops   []Op
		legal bool
	}{
		{
			// The first acquire's answer was lost, yet it granted the
			// lease; the retry renews it.
			name: "RetryRenewsAGrantWhoseAnswerWasLost",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnavailable, nil),
				acquireOp("a", 0, 1100, 1105, ResultOK, lease("a", 1, 500, 1102, 0, -1)),
			},
			legal: true,
		},
		{
			// A 503 whose write never happened.
			name: "UnavailableWithoutEffect",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnavailable, nil),
				acquireOp("b", 0, 1100, 1105, ResultOK, lease("b", 1, 1102, 1102, 0, -1)),
			},
			legal: true,
		},
		{
			// The lost grant to a expired before b was granted token 2.
			name: "UnknownGrantExpiresBeforeTheNext",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnknown, nil),
				acquireOp("b", 1, 3100, 3105, ResultOK, lease("b", 2, 3102, 3102, 1, -1)),
			},
			legal: true,
		},
		{
			// Token 2 before the lost grant to a could have expired.
			name: "UnknownGrantStillHeld",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnknown, nil),
				acquireOp("b", 1, 2000, 2005, ResultOK, lease("b", 2, 2002, 2002, 1, -1)),
			},
			legal: false,
		},
		{
			// A heartbeat refused while the caller's grant was certainly held.
			name: "LostWhileHeld",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				heartbeatOp("a", 1, 1000, 1005, ResultLost, lease("a", 1, 2, 2, 0, -1)),
			},
			legal: false,
		},
		{
			// A heartbeat refused after the grant expired.
			name: "LostAfterExpiry",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				heartbeatOp("a", 1, 3100, 3105, ResultLost, expired(lease("a", 1, 2, 2, 0, -1))),
			},
			legal: true,
		},
		{
			// A heartbeat refused while the lease it read was still its own.
			name: "LostWhileTheBodyShowsItHeld",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				heartbeatOp("a", 1, 3100, 3105, ResultLost, lease("a", 1, 2, 2, 0, -1)),
			},
			legal: false,
		},
		{
			// Neither answer reached a, but the refusal b got shows what
			// happened: a's retry got token 2 while its token 1 was held,
			// the non-idempotent acquire of M7.
			name: "BumpedTokenSeenInARefusal",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnavailable, nil),
				acquireOp("a", 0, 1100, 2100, ResultUnavailable, nil),
				acquireOp("b", 1, 2500, 2505, ResultHeld, lease("a", 2, 500, 1600, 0, -1)),
			},
			legal: false,
		},
		{
			// The same, legal: the retry renewed token 1.
			name: "RenewalSeenInARefusal",
			ops: []Op{
				acquireOp("a", 0, 0, 1000, ResultUnavailable, nil),
				acquireOp("a", 0, 1100, 2100, ResultUnavailable, nil),
				acquireOp("b", 1, 2500, 2505, ResultHeld, lease("a", 1, 500, 1600, 0, -1)),
			},
			legal: true,
		},
		{
			// The release executed (and stamped its time) before b's
			// refusal read the lease, but committed after it: b still saw
			// the lease held. Reads follow commits, not stamps.
			name: "RefusalBeforeTheReleaseCommits",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				releaseOp("a", 1, 931, 1252, ResultOK, releasedLease(lease("a", 1, 2, 2, 0, -1), 995, 0)),
				acquireOp("b", 1, 1003, 1125, ResultHeld, lease("a", 1, 2, 2, 0, -1)),
			},
			legal: true,
		},
		{
			// A refusal whose lease shows a token nobody was granted.
			name: "RefusalShowsAnUnknownToken",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				acquireOp("b", 0, 100, 105, ResultHeld, lease("a", 3, 2, 2, 0, -1)),
			},
			legal: false,
		},
		{
			// Refused as held although the lease had been released.
			name: "HeldAfterRelease",
			ops: []Op{
				acquireOp("a", 0, 0, 5, ResultOK, lease("a", 1, 2, 2, 0, -1)),
				releaseOp("a", 1, 100, 105, ResultOK, releasedLease(lease("a", 1, 2, 2, 0, -1), 102, 0)),
				acquireOp("b", 1, 200, 205, ResultHeld, nil),
			},
			legal: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &History{Jobs: []string{"j"}, Ops: tt.ops}
			r := &Report{Counts: make(map[string]int)}
			checkLinearizable(h, r, 10*time.Second)
			if got := !r.Caught("I4"); got != tt.legal {
				t.Errorf("linearizable: got %t, want %t (%v)", got, tt.legal, r.Violations)
			}
		})
	}
}

// TestRunHistoryResolvesUnknownCalls: with a run history, a call of
// unknown outcome that has no run of its owner is left out of the search.
// TestRetriedReleaseReadBeforeTheNextGrantCommits: a's release committed
// at 1502; its retry, sent after b's grant was stamped (2002) but answered
// from the row before that grant committed, is the idempotent no-op, not a
// mutation by a superseded holder (seen in a chaos run).
func TestRetriedReleaseReadBeforeTheNextGrantCommits(t *testing.T) {
	t.Parallel()
	h := legal()
	l1rel := releasedLease(lease("a", 1, 2, 1002, 0, -1), 1502, 0)
	h.Ops = append(h.Ops, releaseOp("a", 1, 2300, 2305, ResultOK, l1rel))
	if r := check(t, h); r.Caught("I3") {
		t.Errorf("retried release flagged: %v", r.Violations)
	}
	// The control: a release applied after the greater grant is caught.
	late := releasedLease(lease("a", 1, 2, 1002, 0, -1), 2301, 0)
	h = legal()
	h.Ops = append(h.Ops, releaseOp("a", 1, 2300, 2305, ResultOK, late))
	if r := check(t, h); !r.Caught("I3") {
		t.Errorf("release applied after the next grant not flagged")
	}
}

func TestRunHistoryResolvesUnknownCalls(t *testing.T) {
	t.Parallel()
	h := legal()
	// x's acquire would explain nothing and could only slow the search.
	h.Ops = append(h.Ops, acquireOp("x", 3, 7000, 8000, ResultUnavailable, nil))
	r := check(t, h)
	if r.Caught("I4") {
		t.Fatalf("violations: %v", r.Violations)
	}
	// Without runs, the same call is kept, and the history is still legal.
	h.Runs = nil
	r = &Report{Counts: make(map[string]int)}
	checkLinearizable(h, r, 10*time.Second)
	if r.Caught("I4") {
		t.Fatalf("violations: %v", r.Violations)
	}
}

func TestWriteVisualizations(t *testing.T) {
	t.Parallel()
	h := legal()
	h.Ops[1] = acquireOp("b", 0, 1, 6, ResultOK, lease("b", 2, 3, 3, 0, -1))
	r := check(t, h)
	dir := t.TempDir()
	paths, err := r.WriteVisualizations(dir, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != filepath.Join(dir, "history-j.html") {
		t.Fatalf("paths: got %v, want [history-j.html]", paths)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "acquire(b, tick") {
		t.Errorf("visualization does not describe the operations")
	}
}

// retried is the legal history with a's acquire of tick 3 answered 503
// after it took effect (token 4 at 7102, live until 10102), and retried at
// retry: the retry's grant is token 5 at retry+2 when bump, else a renewal
// of token 4.
func retried(retry int, bump bool) *History {
	h := legal()
	h.Ops[11] = acquireOp("a", 3, 7100, 8100, ResultUnavailable, nil)
	l := lease("a", 4, 7102, retry+2, 3, 1)
	if bump {
		l = lease("a", 5, retry+2, retry+2, 3, 1)
		end := at(10102) // the replaced grant's expiry, as the trigger records it
		if end.After(at(retry + 2)) {
			end = at(retry + 2)
		}
		h.Runs[3].EndedAt, h.Runs[3].Outcome = end, "expired"
		h.Runs = append(h.Runs, Run{ID: 5, Job: "j", Token: 5, Owner: "a", Tick: tick(3), StartedAt: at(retry + 2), Outcome: "running"})
		h.Leases[0] = LeaseRow{Job: "j", Owner: "a", Token: 5, ExpiresAt: l.ExpiresAt}
		h.Witness[3].Token = 5
		h.Witness[3].StartedAt, h.Witness[3].EndedAt = at(retry+10), at(retry+400)
		h.Beliefs = append(h.Beliefs[:5], Belief{Job: "j", Token: 5, Owner: "a", At: at(retry + 8)})
	}
	h.Ops = append(h.Ops, acquireOp("a", 3, retry, retry+5, ResultOK, l))
	return h
}

// TestRetriedAcquireThatBumpsTheTokenIsCaught is I11 on a canned history
// of M7: the first attempt's answer was lost, so the client history can
// explain the retry's new token (the first attempt never happened), but the
// run history shows the first grant, live when the second was made.
func TestRetriedAcquireThatBumpsTheTokenIsCaught(t *testing.T) {
	t.Parallel()
	r := check(t, retried(8200, true))
	if !r.Caught("I11") {
		t.Errorf("I11 not flagged; violations: %v", r.Violations)
	}
	if s := r.Stats; s.UncertainAcquires != 1 || s.UncertainAcquiresGranted != 1 || s.UncertainAcquiresRetried != 1 {
		t.Errorf("uncertain acquires %d, granted %d, retried %d; want 1, 1, 1", s.UncertainAcquires, s.UncertainAcquiresGranted, s.UncertainAcquiresRetried)
	}
	// The controls: the correct retry renews token 4; a retry after token
	// 4 expired is a new grant.
	for name, h := range map[string]*History{"Renewal": retried(8200, false), "AfterExpiry": retried(10200, true)} {
		if r := check(t, h); r.Caught("I11") || r.Failed() {
			t.Errorf("%s: violations %v", name, r.Violations)
		}
	}
}

// TestClientDeadlineIsNoAnswer: a call whose client stopped waiting at its
// own deadline got no answer in time (I9) even when the deadline, started
// before the call was recorded, ends it a little short of Max503; a call
// that failed otherwise in the same time is not such a wait, and neither
// is one its client gave up on before the request deadline had passed.
func TestClientDeadlineIsNoAnswer(t *testing.T) {
	t.Parallel()
	const deadlineErr = `Post "http://127.0.0.1:1/leases/j/heartbeat": context deadline exceeded`
	for _, tt := range []struct {
		err  string
		ms   int
		want bool
	}{
		{deadlineErr, 1990, true}, // 1.99 s, short of Max503
		{`Post "http://127.0.0.1:1/leases/j/heartbeat": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`, 1990, true},
		{`Post "http://127.0.0.1:1/leases/j/heartbeat": dial tcp 127.0.0.1:1: connect: connection refused`, 1990, false},
		{deadlineErr, 1000, true}, // the request deadline had passed
		{deadlineErr, 350, false}, // its client's lease ran out first
	} {
		h := legal()
		o := heartbeatOp("z", 9, 3000, 3000+tt.ms, ResultUnknown, nil)
		o.Err = tt.err
		h.Ops = append(h.Ops, o)
		r := check(t, h)
		if got := r.Caught("I9"); got != tt.want {
			t.Errorf("%s after %d ms: I9 caught %v, want %v; violations %v", tt.err, tt.ms, got, tt.want, r.Violations)
		}
	}
}

// TestRecoveryWindowEndsAtTheNextFault: after a database outage I9 wants
// an answer from the instance within Recovery, but not once another fault
// that fails calls (latency past the deadline) has begun; without that
// fault the same 503s are flagged.
func TestRecoveryWindowEndsAtTheNextFault(t *testing.T) {
	t.Parallel()
	h := legal()
	h.Faults = []Fault{{Kind: DBReset, Instance: 1, Start: at(-3000), End: at(-2000)}}
	for i := range 10 {
		call := -1900 + 500*i
		h.Ops = append(h.Ops, Op{Client: "x", Job: "j", Kind: Heartbeat, Owner: "x", Token: 9, TTL: ttl, Instance: 1,
			Call: at(call), Return: at(call + 1000), Result: ResultUnavailable, Status: 503})
	}
	first := Op{Client: "x", Job: "j", Kind: Acquire, Owner: "x", TTL: ttl, Instance: 1,
		Call: at(3900), Return: at(4000), Result: ResultHeld, Status: 409, Lease: h.Ops[9].Lease}
	h.Ops = append(h.Ops, first) // 6 s after the reset ended
	opts := DefaultOptions()
	opts.LinearizabilityTimeout, opts.MinExecutedOutsideFaults = 0, 0
	if r := Check(h, opts); !r.Caught("I9") {
		t.Errorf("a first answer 6 s after an outage was not flagged: %s", r.SummaryLine())
	}
	h.Faults = append(h.Faults, Fault{Kind: DBLatency, Instance: 1, Start: at(0), End: at(9000)})
	if r := Check(h, opts); r.Caught("I9") {
		t.Errorf("503s during a latency fault that followed the outage were flagged: %v", r.Violations)
	}
}

// TestTickLostToLatencyIsInAFaultWindow: a tick that did not run is a
// violation of I10 away from faults, and not near a latency fault, which
// can make its calls miss the deadline.
func TestTickLostToLatencyIsInAFaultWindow(t *testing.T) {
	t.Parallel()
	h := legal()
	h.Start, h.End = at(-2000), at(10000)
	h.Witness[3].EndedAt = time.Time{} // tick 3 never finished
	h.Runs[2].Outcome = "succeeded"    // tick 2: not an expiry here
	opts := DefaultOptions()
	opts.LinearizabilityTimeout = 0
	if r := Check(h, opts); !r.Caught("I10") {
		t.Errorf("a tick away from faults that did not run was not flagged: %s", r.SummaryLine())
	}
	h.Faults = []Fault{{Kind: DBLatency, Instance: 1, Start: at(5500), End: at(5600)}}
	if r := Check(h, opts); r.Caught("I10") {
		t.Errorf("a tick lost near a latency fault was flagged: %v", r.Violations)
	}
}
