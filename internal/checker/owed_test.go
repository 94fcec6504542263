package checker

import (
	"strings"
	"testing"
	"time"
)

// manualTick is the tick the trigger of owedHistory was answered with.
var manualTick = at(13505)

// owedHistory is the legal history followed by owed ticks: a's run of
// tick 3 ends, tick 5 is recorded missed at tick 5 + grace, b runs it as a
// catch-up (token 5), an operator triggers the job and c runs the manual
// tick (token 6).
func owedHistory() *History {
	h := legal()
	h.Runs[3].EndedAt, h.Runs[3].Outcome = at(7900), "succeeded"
	for i := range h.Runs {
		h.Runs[i].Trigger = TriggerSchedule
	}
	h.Runs = append(h.Runs,
		Run{ID: 5, Job: "j", Token: 5, Owner: "b", Tick: tick(5), StartedAt: at(12500), EndedAt: at(13000), Outcome: "succeeded", Trigger: TriggerCatchUp},
		Run{ID: 6, Job: "j", Token: 6, Owner: "c", Tick: manualTick, StartedAt: at(14000), EndedAt: at(14500), Outcome: "succeeded", Trigger: TriggerManual, TriggeredBy: "chaos-admin"},
	)
	h.Missed = []Run{{Job: "j", Tick: tick(5), EndedAt: tick(5).Add(period), Outcome: "missed"}}
	h.Triggers = []TriggerCall{{Job: "j", Call: at(13500), Return: at(13510), Status: 200, Tick: manualTick}}
	return h
}

func TestOwedTicksLegalHistoryPasses(t *testing.T) {
	t.Parallel()
	r := check(t, owedHistory())
	for _, v := range r.Violations {
		t.Errorf("violation in a legal history: %s", v)
	}
	want := map[string]int{TriggerSchedule: 4, TriggerCatchUp: 1, TriggerManual: 1}
	for k, n := range want {
		if r.Stats.RunsByTrigger[k] != n {
			t.Errorf("runs by trigger: got %v, want %v", r.Stats.RunsByTrigger, want)
			break
		}
	}
	if line := r.SummaryLine(); !strings.Contains(line, "owed ticks run: 1 catch-up, 1 manual") {
		t.Errorf("summary line %q lacks the owed ticks", line)
	}
}

// TestOwedTickViolationsAreFlagged: an owed tick run that nothing owed, or
// before it was owed, or a manual tick granted again after it succeeded,
// is I6's; the controls pass.
func TestOwedTickViolationsAreFlagged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(h *History)
		want   string // a part of the I6 violation, "" for a legal variant
	}{
		{"CatchUpOfATickNeverMissed", func(h *History) { h.Missed = nil }, "which was never recorded missed"},
		{"CatchUpBeforeTheMiss", func(h *History) { h.Runs[4].StartedAt = at(11000) }, "before its tick 07:00:10.000 was recorded missed"},
		{"ManualTickNoTriggerOwed", func(h *History) { h.Triggers[0].Tick = at(13600) }, "which no trigger was answered with"},
		{"ManualTickOfAFailedTrigger", func(h *History) { h.Triggers[0].Status = 503 }, "which no trigger was answered with"},
		{"ManualBeforeItsTrigger", func(h *History) { h.Runs[5].StartedAt, h.Triggers[0].Call = at(13800), at(13900) }, "before its trigger was sent"},
		{"ManualTickGrantedAgain", func(h *History) {
			h.Runs = append(h.Runs, Run{ID: 7, Job: "j", Token: 7, Owner: "a", Tick: manualTick, StartedAt: at(15000),
				EndedAt: at(15500), Outcome: "succeeded", Trigger: TriggerManual})
		}, "granted again (token 7"},
		{"CatchUpTickGrantedAgain", func(h *History) {
			h.Runs = append(h.Runs, Run{ID: 7, Job: "j", Token: 7, Owner: "a", Tick: tick(5), StartedAt: at(15000),
				EndedAt: at(15500), Outcome: "failed", Trigger: TriggerCatchUp})
		}, "tick 07:00:10.000 granted again (token 7"},
		// Controls: no trigger recorded (the manual run is not matched);
		// a failed manual run claimed again (not done, so allowed).
		{"TriggersNotRecorded", func(h *History) { h.Triggers = nil }, ""},
		{"FailedManualRunClaimedAgain", func(h *History) {
			h.Runs[5].Outcome = "failed"
			h.Runs = append(h.Runs, Run{ID: 7, Job: "j", Token: 7, Owner: "a", Tick: manualTick, StartedAt: at(15000),
				EndedAt: at(15500), Outcome: "succeeded", Trigger: TriggerManual})
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := owedHistory()
			tt.mutate(h)
			r := check(t, h)
			if tt.want == "" {
				for _, v := range r.Violations {
					t.Errorf("violation in a legal variant: %s", v)
				}
				return
			}
			found := false
			for _, v := range r.Violations {
				if v.Invariant != "I6" {
					t.Errorf("only I6 should be flagged, got %s", v)
				}
				found = found || strings.Contains(v.Detail, tt.want)
			}
			if !found {
				t.Errorf("no I6 violation says %q: %v", tt.want, r.Violations)
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
		Start: tick(0), End: tick(4),
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
	h.Runs[1].Trigger = TriggerSchedule
	r = Check(h, opts)
	if r.Stats.TicksBusy != 0 || r.Stats.TicksScheduled != 3 {
		t.Errorf("with a schedule grant: busy %d, scheduled %d; want 0, 3", r.Stats.TicksBusy, r.Stats.TicksScheduled)
	}
}

// lateClaims is a job whose manual tick M (between ticks 1 and 2) b runs
// and fails; c claims M late, when it is no longer owed, and the service
// snaps it to tick 1, which c is granted and completes; d claims M later
// still and is refused tick_done (tick 1 is done, M itself is not).
func lateClaims() *History {
	m := at(2600)
	l1 := lease("a", 1, 2, 2, 0, -1)
	l2 := &Lease{Owner: "b", Token: 2, State: "held", AcquiredAt: at(2702), RenewedAt: at(2702), ExpiresAt: at(2702).Add(ttl), TTL: ttl, Tick: m, LastCompletedTick: tick(0)}
	l3 := lease("c", 3, 3002, 3002, 1, 0)
	rel2 := releaseOp("b", 2, 2800, 2805, ResultOK, releasedLease(l2, 2802, 0))
	rel2.Outcome = "failed"
	claim := func(client string, call int, res Result, l *Lease) Op {
		o := acquireOp(client, -1, call, call+5, res, l)
		o.Tick = m
		return o
	}
	return &History{
		Jobs: []string{"j"}, Period: period, TTL: ttl, HeartbeatInterval: time.Second, MaxTTL: time.Hour,
		Ops: []Op{
			acquireOp("a", 0, 0, 5, ResultOK, l1),
			releaseOp("a", 1, 1000, 1005, ResultOK, releasedLease(l1, 1002, 0)),
			claim("b", 2700, ResultOK, l2),
			rel2,
			claim("c", 3000, ResultOK, l3),
			releaseOp("c", 3, 3200, 3205, ResultOK, releasedLease(l3, 3202, 1)),
			claim("d", 3500, ResultTickDone, releasedLease(l3, 3202, 1)),
		},
		Runs: []Run{
			{ID: 1, Job: "j", Token: 1, Owner: "a", Tick: tick(0), StartedAt: at(2), EndedAt: at(1002), Outcome: "succeeded", Trigger: TriggerSchedule},
			{ID: 2, Job: "j", Token: 2, Owner: "b", Tick: m, StartedAt: at(2702), EndedAt: at(2802), Outcome: "failed", Trigger: TriggerManual},
			{ID: 3, Job: "j", Token: 3, Owner: "c", Tick: tick(1), StartedAt: at(3002), EndedAt: at(3202), Outcome: "succeeded", Trigger: TriggerSchedule},
		},
		Leases: []LeaseRow{{Job: "j", Owner: "c", Token: 3, ExpiresAt: at(3202)}},
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
