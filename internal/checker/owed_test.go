package checker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The owed-tick histories continue the legal history (job "j", ticks every
// 2 s) with a grace of 500 ms, a catch-up and a run now.

// grace is the jobs' grace in the owed-tick histories.
const grace = 500 * time.Millisecond

// manualTick and cancelledTick are the manual ticks of owedHistory's two
// run-now calls.
var (
	manualTick    = at(10502)
	cancelledTick = at(12702)
)

// leaseOf builds an answered lease for an arbitrary tick: held by owner
// with token tok, acquired at acq, renewed at ren, completed tick done.
func leaseOf(owner string, tok int64, acq, ren int, tk, done time.Time) *Lease {
	return &Lease{Owner: owner, Token: tok, State: "held", AcquiredAt: at(acq), RenewedAt: at(ren),
		ExpiresAt: at(ren).Add(ttl), TTL: ttl, Tick: tk, LastCompletedTick: done}
}

// releasedAt is l released at rel, its completed tick then done.
func releasedAt(l *Lease, rel int, done time.Time) *Lease {
	c := *l
	c.State, c.ReleasedAt, c.ExpiresAt, c.LastCompletedTick = "released", at(rel), at(rel), done
	return &c
}

// claimOp is an acquire of tick tk by client.
func claimOp(client string, tk time.Time, call, ret int, res Result, l *Lease) Op {
	o := acquireOp(client, -1, call, call+ret, res, l)
	o.Tick = tk
	return o
}

// runNow is a run-now call on j with key; owed is the manual tick its
// answer names (zero for none).
func runNow(key string, call, ret int, res Result, owed time.Time) TriggerCall {
	c := TriggerCall{Kind: RunNow, Client: "operator", Job: "j", Key: key, Call: at(call), Return: at(ret),
		Status: status(res), Result: res}
	if res == ResultOK && !owed.IsZero() {
		c.OwedTick, c.OwedReason = owed, TriggerManual
	}
	return c
}

// owedHistory is legal() continued, keeping every promise:
//
//	a releases tick 3 succeeded at 7.902 s; nobody asks for tick 4 (8 s),
//	which the sweep records missed when its grace ends (8.5 s); b claims
//	it as a catch-up (token 5) and releases it succeeded. The operator
//	triggers the job (key k1) and is answered manual tick 10.502 s, and
//	again with k1: the same tick. c claims it (token 6, a manual run) and
//	releases it succeeded; a's late claim of it is refused tick_done. A
//	third k1 call answers that tick, claimed: nothing owed. a runs tick 6
//	(token 7). The operator triggers again (k2, tick 12.702 s) and cancels
//	it at once; nobody claims it.
func owedHistory() *History {
	h := legal()
	h.Grace = grace
	h.CatchUpJobs = []string{"j"}
	l4 := lease("a", 4, 7102, 7102, 3, 1)
	l5 := leaseOf("b", 5, 9002, 9002, tick(4), tick(3))
	l6 := leaseOf("c", 6, 11002, 11002, manualTick, tick(4))
	l7 := leaseOf("a", 7, 12052, 12052, tick(6), manualTick)
	h.Ops = append(h.Ops,
		releaseOp("a", 4, 7900, 7905, ResultOK, releasedLease(l4, 7902, 3)),
		claimOp("b", tick(4), 9000, 5, ResultOK, l5),
		releaseOp("b", 5, 9500, 9505, ResultOK, releasedAt(l5, 9502, tick(4))),
		claimOp("c", manualTick, 11000, 5, ResultOK, l6),
		releaseOp("c", 6, 11500, 11505, ResultOK, releasedAt(l6, 11502, manualTick)),
		claimOp("a", manualTick, 11600, 5, ResultTickDone, releasedAt(l6, 11502, manualTick)),
		claimOp("a", tick(6), 12050, 5, ResultOK, l7),
		releaseOp("a", 7, 12500, 12505, ResultOK, releasedAt(l7, 12502, tick(6))),
	)
	h.Runs[3].EndedAt, h.Runs[3].Outcome = at(7902), "succeeded"
	for i := range h.Runs {
		h.Runs[i].Trigger = TriggerSchedule
	}
	h.Missed = []Run{{ID: 5, Job: "j", Tick: tick(4), EndedAt: tick(4).Add(grace), Outcome: "missed", Trigger: TriggerSchedule}}
	h.Runs = append(h.Runs,
		Run{ID: 6, Job: "j", Token: 5, Owner: "b", Tick: tick(4), StartedAt: at(9002), EndedAt: at(9502), Outcome: "succeeded", Trigger: TriggerCatchUp},
		Run{ID: 7, Job: "j", Token: 6, Owner: "c", Tick: manualTick, StartedAt: at(11002), EndedAt: at(11502), Outcome: "succeeded", Trigger: TriggerManual, TriggeredBy: "chaos-admin"},
		Run{ID: 8, Job: "j", Token: 7, Owner: "a", Tick: tick(6), StartedAt: at(12052), EndedAt: at(12502), Outcome: "succeeded", Trigger: TriggerSchedule},
	)
	h.Leases = []LeaseRow{{Job: "j", Owner: "a", Token: 7, ExpiresAt: at(12502)}}
	h.Witness = append(h.Witness,
		WitnessRun{Job: "j", Tick: tick(4), Token: 5, Owner: "b", StartedAt: at(9010), EndedAt: at(9400)},
		WitnessRun{Job: "j", Tick: manualTick, Token: 6, Owner: "c", StartedAt: at(11010), EndedAt: at(11400)},
		WitnessRun{Job: "j", Tick: tick(6), Token: 7, Owner: "a", StartedAt: at(12060), EndedAt: at(12400)},
	)
	h.Triggers = []TriggerCall{
		runNow("k1", 10500, 10505, ResultOK, manualTick),
		runNow("k1", 10600, 10605, ResultOK, manualTick),
		runNow("k1", 11700, 11705, ResultOK, time.Time{}),
		runNow("k2", 12700, 12705, ResultOK, cancelledTick),
		{Kind: CancelOwed, Client: "operator", Job: "j", Call: at(12800), Return: at(12805), Status: 200, Result: ResultOK},
	}
	return h
}

func TestOwedTicksLegalHistoryPasses(t *testing.T) {
	t.Parallel()
	r := check(t, owedHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	if got := r.Stats.Linearizability["j"]; got != "Ok" {
		t.Errorf("porcupine: got %s, want Ok", got)
	}
	want := map[string]int{TriggerSchedule: 5, TriggerCatchUp: 1, TriggerManual: 1}
	for k, n := range want {
		if r.Stats.RunsByTrigger[k] != n {
			t.Errorf("runs by trigger: got %v, want %v", r.Stats.RunsByTrigger, want)
			break
		}
	}
	s := r.Stats
	if s.Triggers != 4 || s.TriggersAnswered != 3 || s.TriggerRetries != 2 || s.Cancels != 1 {
		t.Errorf("operator's calls: got %d run-now (%d answered, %d retried), %d cancelled; want 4 (3, 2), 1",
			s.Triggers, s.TriggersAnswered, s.TriggerRetries, s.Cancels)
	}
	if s.ManualUnclaimed != 0 {
		t.Errorf("manual ticks never claimed nor cancelled: got %d, want 0 (the second one was cancelled)", s.ManualUnclaimed)
	}
	h := owedHistory()
	h.Triggers = h.Triggers[:4] // no cancellation: the second manual tick is never claimed
	if r := check(t, h); r.Stats.ManualUnclaimed != 1 || r.Failed() {
		t.Errorf("without the cancellation: %d manual ticks never claimed nor cancelled, violations %v; want 1, none (reported, not judged)",
			r.Stats.ManualUnclaimed, r.Violations)
	}
	want1 := "owed ticks: 1 catch-up claims granted; 4 run-now triggers (3 answered with a manual tick, 2 retried with their key), 1 cancelled, 1 manual claims granted, 0 manual ticks never claimed nor cancelled"
	if line := r.SummaryLine(); !strings.Contains(line, want1) {
		t.Errorf("summary line %q lacks %q", line, want1)
	}
}

// TestOwedTickViolationsAreFlagged changes owedHistory in one way each and
// wants the named invariants, and no others, to catch it; a variant
// without a want is legal and must pass.
func TestOwedTickViolationsAreFlagged(t *testing.T) {
	t.Parallel()
	// retoken gives c's claim of the manual tick (token 6) token tok.
	retoken := func(h *History, tok int64) {
		h.Ops[15].Lease.Token, h.Ops[16].Token, h.Ops[16].Lease.Token, h.Ops[17].Lease.Token = tok, tok, tok, tok
		h.Runs[5].Token, h.Witness[5].Token = tok, tok
	}
	tests := []struct {
		name   string
		mutate func(h *History)
		want   []string // the invariants that must catch it; nil for a legal variant
		detail string   // a part of one violation's text
	}{
		{
			// d is granted the manual tick after c released it succeeded.
			name: "ManualTickGrantedTwiceAfterSuccess",
			mutate: func(h *History) {
				l8 := leaseOf("d", 8, 13002, 13002, manualTick, tick(6))
				h.Ops = append(h.Ops, claimOp("d", manualTick, 13000, 5, ResultOK, l8))
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: manualTick, StartedAt: at(13002), Outcome: "running", Trigger: TriggerManual})
				h.Leases[0].Owner, h.Leases[0].Token = "d", 8
			},
			want: []string{"I4", "I6"}, detail: "granted again (token 8",
		},
		{
			// The same, seen only in the run history: a's claim of the done
			// manual tick is granted (the service ignored lastCompletedTick).
			name: "ManualTickClaimedTwice",
			mutate: func(h *History) {
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: manualTick, StartedAt: at(13002), EndedAt: at(13502), Outcome: "failed", Trigger: TriggerManual})
			},
			want: []string{"I6"}, detail: "owed once but claimed twice",
		},
		{
			// A tick of the schedule before the succeeded manual tick is
			// granted afterwards, though it was done (lastCompletedTick).
			name: "EarlierTickGrantedAfterAManualTickSucceeded",
			mutate: func(h *History) {
				h.Runs[6].Outcome = "failed" // tick 6: M is the newest done
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: tick(5), StartedAt: at(13002), EndedAt: at(13502), Outcome: "failed", Trigger: TriggerSchedule})
			},
			want: []string{"I6"}, detail: "tick 07:00:10.000 granted (token 8 at 07:00:13.002) after the later tick 07:00:10.502 was released succeeded",
		},
		{
			name:   "CatchUpOfATickNeverMissed",
			mutate: func(h *History) { h.Missed = nil },
			want:   []string{"I6"}, detail: "which was never recorded missed",
		},
		{
			// The manual tick is recorded missed, not the tick of the schedule.
			name:   "CatchUpOfAnUnclaimedManualTick",
			mutate: func(h *History) { h.Missed[0].Trigger = TriggerManual },
			want:   []string{"I6"}, detail: "which was never recorded missed",
		},
		{
			name:   "CatchUpBeforeTheMiss",
			mutate: func(h *History) { h.Missed[0].ID = 9 },
			want:   []string{"I6"}, detail: "before its tick 07:00:08.000 was recorded missed",
		},
		{
			name:   "CatchUpOfAJobWithoutCatchUp",
			mutate: func(h *History) { h.CatchUpJobs = []string{"other"} },
			want:   []string{"I6"}, detail: "never registered with catch-up",
		},
		{
			// a's tick 3 grant started after tick 4's grace: the job had run
			// since, so the sweep's decision owed nothing.
			name: "CatchUpThoughTheJobRanSince",
			mutate: func(h *History) {
				h.Missed[0].EndedAt = at(7000)
			},
			want: []string{"I6"}, detail: "nothing was owed",
		},
		{
			// b's run of tick 4 was an ordinary late grant (it failed), and
			// a's tick 6 then settled the debt; yet d claims tick 4 as a
			// catch-up afterwards.
			name: "CatchUpAfterALaterTickRan",
			mutate: func(h *History) {
				h.Runs[4].Trigger, h.Runs[4].Outcome = TriggerSchedule, "failed"
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: tick(4), StartedAt: at(13002), EndedAt: at(13502), Outcome: "failed", Trigger: TriggerCatchUp})
			},
			want: []string{"I6"}, detail: "which settled the debt",
		},
		{
			// c's claim of the manual tick carries token 5, b's.
			name:   "TokenBackwardsOnAClaim",
			mutate: func(h *History) { retoken(h, 5) },
			want:   []string{"I1", "I4", "I5"},
		},
		{
			name:   "ManualTickNoTriggerAnswered",
			mutate: func(h *History) { h.Triggers[0].OwedTick, h.Triggers[1].OwedTick = at(10503), at(10503) },
			want:   []string{"I6"}, detail: "which no run now sent before it was answered with or could have made",
		},
		{
			// The answers were lost, but they came after the tick.
			name: "ManualTickBeforeItsTrigger",
			mutate: func(h *History) {
				for i := range 2 {
					h.Triggers[i].Result, h.Triggers[i].Status, h.Triggers[i].OwedTick = ResultUnavailable, 503, time.Time{}
					h.Triggers[i].Call = at(10600 + 100*i)
				}
			},
			want: []string{"I6"}, detail: "which no run now sent before it was answered with or could have made",
		},
		{
			name: "ManualRunAfterItsCancellation",
			mutate: func(h *History) {
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: cancelledTick, StartedAt: at(13002), Outcome: "running", Trigger: TriggerManual})
			},
			want: []string{"I6"}, detail: "after its cancellation was acknowledged",
		},
		{
			// The third k1 call (after the claim) owes a new manual tick.
			name:   "RetryWithTheKeyOwesASecondRun",
			mutate: func(h *History) { h.Triggers[2].OwedTick, h.Triggers[2].OwedReason = at(11702), TriggerManual },
			want:   []string{"I6"}, detail: "a second run owed",
		},
		{
			name:   "TriggerAnswered500",
			mutate: func(h *History) { h.Triggers[3].Result, h.Triggers[3].Status = ResultError, 500 },
			want:   []string{"I9"},
		},
		// Legal variants.
		{
			// The run-now answers were lost (503): the calls may have made
			// the manual tick, which c's run is then of.
			name: "TriggerAnswersLost",
			mutate: func(h *History) {
				for i := range 2 {
					h.Triggers[i].Result, h.Triggers[i].Status, h.Triggers[i].OwedTick, h.Triggers[i].OwedReason = ResultUnavailable, 503, time.Time{}, ""
				}
			},
		},
		{
			// k1 was answered the manual tick an earlier k0 call had made,
			// so k1 made none: a k1 retry after c claimed it makes a new one.
			name: "RetryOfAKeyThatMadeNoTick",
			mutate: func(h *History) {
				h.Triggers = slices.Insert(h.Triggers, 0, runNow("k0", 10400, 10405, ResultOK, manualTick))
				h.Triggers[3].OwedTick, h.Triggers[3].OwedReason = at(11702), TriggerManual
			},
		},
		{
			// The history does not record the operator's calls.
			name:   "TriggersNotRecorded",
			mutate: func(h *History) { h.Triggers = nil },
		},
		{
			// c's manual run failed, and a's late claim of the manual tick
			// is then granted as it is (the lease's tick): no longer owed,
			// a run of trigger schedule.
			name: "FailedManualRunClaimedAgain",
			mutate: func(h *History) {
				h.Ops[16].Outcome = "failed"
				h.Ops[16].Lease = releasedAt(h.Ops[15].Lease, 11502, tick(4))
				l := leaseOf("a", 7, 11602, 11602, manualTick, tick(4))
				h.Ops[17] = claimOp("a", manualTick, 11600, 5, ResultOK, l)
				h.Ops[18] = releaseOp("a", 7, 11800, 11805, ResultOK, releasedAt(l, 11802, manualTick))
				h.Ops[19] = claimOp("a", tick(6), 12050, 5, ResultOK, leaseOf("a", 8, 12052, 12052, tick(6), manualTick))
				h.Ops = h.Ops[:20]
				h.Runs[5].Outcome = "failed"
				h.Runs[6] = Run{ID: 8, Job: "j", Token: 7, Owner: "a", Tick: manualTick, StartedAt: at(11602), EndedAt: at(11802), Outcome: "succeeded", Trigger: TriggerSchedule}
				h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "a", Tick: tick(6), StartedAt: at(12052), Outcome: "running", Trigger: TriggerSchedule})
				h.Leases[0].Token, h.Leases[0].ExpiresAt = 8, at(15052)
				h.Witness[6].Token = 8
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := owedHistory()
			tt.mutate(h)
			r := check(t, h)
			if tt.want == nil {
				for _, v := range r.Violations {
					t.Errorf("violation in a legal variant: %s", v)
				}
				return
			}
			found := tt.detail == ""
			for _, v := range r.Violations {
				if !slices.Contains(tt.want, v.Invariant) {
					t.Errorf("only %v should be flagged, got %s", tt.want, v)
				}
				found = found || strings.Contains(v.Detail, tt.detail)
			}
			for _, inv := range tt.want {
				if !r.Caught(inv) {
					t.Errorf("%s not flagged; violations: %v", inv, r.Violations)
				}
			}
			if !found {
				t.Errorf("no violation says %q: %v", tt.detail, r.Violations)
			}
		})
	}
}

// TestOwedGrantSkipsTheScheduledTick is I10's accounting: a scheduled
// tick whose lease an owed tick's grant took within the tick's grace is
// skipped (the job ran), not a tick that did not run; a schedule grant in
// the same place does not excuse the tick.
func TestOwedGrantSkipsTheScheduledTick(t *testing.T) {
	t.Parallel()
	h := &History{
		Jobs: []string{"j"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second,
		Start: tick(0), End: tick(4), Grace: grace,
		Runs: []Run{
			{ID: 1, Job: "j", Token: 1, Owner: "a", Tick: tick(1), StartedAt: tick(1).Add(5 * time.Millisecond), EndedAt: tick(1).Add(500 * time.Millisecond), Outcome: "succeeded", Trigger: TriggerSchedule},
			// A manual tick granted 300 ms after tick 2, running past tick 3's start.
			{ID: 2, Job: "j", Token: 2, Owner: "b", Tick: tick(2).Add(-time.Millisecond), StartedAt: tick(2).Add(300 * time.Millisecond), EndedAt: tick(2).Add(900 * time.Millisecond), Outcome: "succeeded", Trigger: TriggerManual},
		},
		Witness: []WitnessRun{
			{Job: "j", Tick: tick(1), Token: 1, Owner: "a", StartedAt: tick(1).Add(10 * time.Millisecond), EndedAt: tick(1).Add(400 * time.Millisecond)},
			{Job: "j", Tick: tick(2).Add(-time.Millisecond), Token: 2, Owner: "b", StartedAt: tick(2).Add(310 * time.Millisecond), EndedAt: tick(2).Add(800 * time.Millisecond)},
		},
	}
	opts := DefaultOptions()
	opts.LinearizabilityTimeout = 0
	opts.MinExecutedOutsideFaults = 0
	r := Check(h, opts)
	// Ticks 1, 2 and 3 are counted: 1 ran, 2 was skipped for the manual run,
	// 3 did not run.
	if r.Stats.TicksBusy != 1 || r.Stats.TicksScheduled != 2 || r.Stats.TicksExecuted != 1 {
		t.Errorf("busy %d, scheduled %d, executed %d; want 1, 2, 1", r.Stats.TicksBusy, r.Stats.TicksScheduled, r.Stats.TicksExecuted)
	}
	// Granted after tick 2's grace: tick 2 counts as not run.
	late := *h
	late.Runs = slices.Clone(h.Runs)
	late.Runs[1].StartedAt = tick(2).Add(grace + time.Millisecond)
	if r := Check(&late, opts); r.Stats.TicksBusy != 0 || r.Stats.TicksScheduled != 3 {
		t.Errorf("an owed grant after the grace: busy %d, scheduled %d; want 0, 3", r.Stats.TicksBusy, r.Stats.TicksScheduled)
	}
	h.Runs[1].Trigger = TriggerSchedule
	r = Check(h, opts)
	if r.Stats.TicksBusy != 0 || r.Stats.TicksScheduled != 3 {
		t.Errorf("with a schedule grant: busy %d, scheduled %d; want 0, 3", r.Stats.TicksBusy, r.Stats.TicksScheduled)
	}
}

// lateClaims is a job whose manual tick M (between ticks 1 and 2) b runs
// and fails. c claims M late, when it is no longer owed: the lease's tick
// is M, so the service takes M as it is (c's run fails too). x runs tick 1
// late and fails. d claims M: the lease's tick is now tick 1, so the
// service snaps M to tick 1, which d is granted and completes; e claims M
// later still and is refused tick_done (tick 1 is done, M itself is not).
func lateClaims() *History {
	m := at(2600)
	l1 := lease("a", 1, 2, 2, 0, -1)
	l2 := leaseOf("b", 2, 2702, 2702, m, tick(0))
	l3 := leaseOf("c", 3, 2902, 2902, m, tick(0))
	l4 := leaseOf("x", 4, 3002, 3002, tick(1), tick(0))
	l5 := leaseOf("d", 5, 3202, 3202, tick(1), tick(0))
	failed := func(o Op) Op {
		o.Outcome = "failed"
		return o
	}
	return &History{
		Jobs: []string{"j"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second, MaxTTL: time.Hour,
		Ops: []Op{
			acquireOp("a", 0, 0, 5, ResultOK, l1),
			releaseOp("a", 1, 1000, 1005, ResultOK, releasedLease(l1, 1002, 0)),
			claimOp("b", m, 2700, 5, ResultOK, l2),
			failed(releaseOp("b", 2, 2800, 2805, ResultOK, releasedAt(l2, 2802, tick(0)))),
			claimOp("c", m, 2900, 5, ResultOK, l3),
			failed(releaseOp("c", 3, 2950, 2955, ResultOK, releasedAt(l3, 2952, tick(0)))),
			acquireOp("x", 1, 3000, 3005, ResultOK, l4),
			failed(releaseOp("x", 4, 3100, 3105, ResultOK, releasedAt(l4, 3102, tick(0)))),
			claimOp("d", m, 3200, 5, ResultOK, l5),
			releaseOp("d", 5, 3300, 3305, ResultOK, releasedAt(l5, 3302, tick(1))),
			claimOp("e", m, 3500, 5, ResultTickDone, releasedAt(l5, 3302, tick(1))),
		},
		Runs: []Run{
			{ID: 1, Job: "j", Token: 1, Owner: "a", Tick: tick(0), StartedAt: at(2), EndedAt: at(1002), Outcome: "succeeded", Trigger: TriggerSchedule},
			{ID: 2, Job: "j", Token: 2, Owner: "b", Tick: m, StartedAt: at(2702), EndedAt: at(2802), Outcome: "failed", Trigger: TriggerManual},
			{ID: 3, Job: "j", Token: 3, Owner: "c", Tick: m, StartedAt: at(2902), EndedAt: at(2952), Outcome: "failed", Trigger: TriggerSchedule},
			{ID: 4, Job: "j", Token: 4, Owner: "x", Tick: tick(1), StartedAt: at(3002), EndedAt: at(3102), Outcome: "failed", Trigger: TriggerSchedule},
			{ID: 5, Job: "j", Token: 5, Owner: "d", Tick: tick(1), StartedAt: at(3202), EndedAt: at(3302), Outcome: "succeeded", Trigger: TriggerSchedule},
		},
		Leases: []LeaseRow{{Job: "j", Owner: "d", Token: 5, ExpiresAt: at(3302)}},
	}
}

// TestLateClaimOfAManualTickIsSnapped: I4's model knows that an acquire of
// a tick off the schedule may be answered for the schedule's tick before
// it; without the schedule's period it could not explain the history.
func TestLateClaimOfAManualTickIsSnapped(t *testing.T) {
	t.Parallel()
	r := check(t, lateClaims())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	if got := r.Stats.Linearizability["j"]; got != "Ok" {
		t.Errorf("porcupine: got %s, want Ok", got)
	}
	h := lateClaims()
	h.Period = 0
	if r := check(t, h); r.Stats.Linearizability["j"] != "Illegal" {
		t.Errorf("without the schedule: porcupine %s, want Illegal", r.Stats.Linearizability["j"])
	}
}

// overtakenHistory is owedHistory with the manual tick claimed late: a runs
// tick 6 (token 6) before anyone claims the manual tick 10.502 s, so the
// tick is before lastCompletedTick when c claims it (token 7, 13 s). It was
// owed and has not run, so the claim is granted; c's retry (its answer was
// lost, say) renews its grant; c releases it succeeded; a's late claim is
// then refused tick_done.
func overtakenHistory() *History {
	h := owedHistory()
	h.Ops, h.Runs, h.Witness = h.Ops[:len(h.Ops)-5], h.Runs[:len(h.Runs)-2], h.Witness[:len(h.Witness)-2]
	l6 := leaseOf("a", 6, 12052, 12052, tick(6), tick(4))
	l7 := leaseOf("c", 7, 13002, 13002, manualTick, tick(6))
	l7retry := leaseOf("c", 7, 13002, 13102, manualTick, tick(6))
	h.Ops = append(h.Ops,
		claimOp("a", tick(6), 12050, 5, ResultOK, l6),
		releaseOp("a", 6, 12500, 12505, ResultOK, releasedAt(l6, 12502, tick(6))),
		claimOp("c", manualTick, 13000, 5, ResultOK, l7),
		claimOp("c", manualTick, 13100, 5, ResultOK, l7retry),
		releaseOp("c", 7, 13500, 13505, ResultOK, releasedAt(l7retry, 13502, tick(6))),
		claimOp("a", manualTick, 13600, 5, ResultTickDone, releasedAt(l7retry, 13502, tick(6))),
	)
	h.Runs = append(h.Runs,
		Run{ID: 7, Job: "j", Token: 6, Owner: "a", Tick: tick(6), StartedAt: at(12052), EndedAt: at(12502), Outcome: "succeeded", Trigger: TriggerSchedule},
		Run{ID: 8, Job: "j", Token: 7, Owner: "c", Tick: manualTick, StartedAt: at(13002), EndedAt: at(13502), Outcome: "succeeded", Trigger: TriggerManual, TriggeredBy: "chaos-admin"},
	)
	h.Leases = []LeaseRow{{Job: "j", Owner: "c", Token: 7, ExpiresAt: at(13502)}}
	h.Witness = append(h.Witness,
		WitnessRun{Job: "j", Tick: tick(6), Token: 6, Owner: "a", StartedAt: at(12060), EndedAt: at(12400)},
		WitnessRun{Job: "j", Tick: manualTick, Token: 7, Owner: "c", StartedAt: at(13010), EndedAt: at(13400)},
	)
	h.Triggers = []TriggerCall{
		runNow("k1", 10500, 10505, ResultOK, manualTick),
		runNow("k1", 10600, 10605, ResultOK, manualTick),
		runNow("k1", 13700, 13705, ResultOK, time.Time{}),
	}
	return h
}

// TestOvertakenManualTickIsLegal: a manual tick claimed after a later tick
// of the schedule completed is granted (it was owed and had not run), and
// neither I4's model nor I6 calls that a done tick granted again; granted
// once more after it succeeded, it is caught by both.
func TestOvertakenManualTickIsLegal(t *testing.T) {
	t.Parallel()
	r := check(t, overtakenHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	if got := r.Stats.Linearizability["j"]; got != "Ok" {
		t.Errorf("porcupine: got %s, want Ok", got)
	}
	h := overtakenHistory()
	l8 := leaseOf("d", 8, 14002, 14002, manualTick, tick(6))
	h.Ops = append(h.Ops, claimOp("d", manualTick, 14000, 5, ResultOK, l8))
	h.Runs = append(h.Runs, Run{ID: 9, Job: "j", Token: 8, Owner: "d", Tick: manualTick, StartedAt: at(14002), Outcome: "running", Trigger: TriggerManual})
	h.Leases[0].Owner, h.Leases[0].Token = "d", 8
	r = check(t, h)
	for _, inv := range []string{"I4", "I6"} {
		if !r.Caught(inv) {
			t.Errorf("the overtaken manual tick granted again after it succeeded: %s not flagged; violations %v", inv, r.Violations)
		}
	}
}
