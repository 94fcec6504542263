package decide

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// TestDecideTicks: the fate of each due tick, in the order of the rules:
// ran, then paused, then skipped, then missed.
func TestDecideTicks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(v time.Time) *time.Time { return &v }
	due := []time.Time{at(0), at(10), at(20), at(30)}
	const grace = 2 * time.Second
	tests := []struct {
		name                         string
		job                          Job
		runs                         []Grant
		ran, paused, skipped, missed int64
		lastMissedAt                 *time.Time
	}{
		{
			name:   "NoGrantsAllMissed",
			missed: 4, lastMissedAt: ptr(at(32)),
		},
		{
			name: "GrantedTicksRan",
			runs: []Grant{
				{Token: 1, Tick: ptr(at(0)), StartedAt: at(0), EndedAt: ptr(at(1))},
				{Token: 2, Tick: ptr(at(30)), StartedAt: at(31), EndedAt: ptr(at(32))}, // late but granted
			},
			ran: 2, missed: 2,
		},
		{
			name: "HeldAcrossTicksSkipped",
			runs: []Grant{{Token: 1, Tick: ptr(at(0)), StartedAt: at(0), EndedAt: ptr(at(25))}},
			ran:  1, skipped: 2, missed: 1, lastMissedAt: ptr(at(32)),
		},
		{
			name: "RunningGrantHeldUntilItsExpiry",
			job:  Job{Token: 1, ExpiresAt: at(15)},
			runs: []Grant{{Token: 1, Tick: ptr(at(0)), StartedAt: at(0)}},
			ran:  1, skipped: 1, missed: 2, lastMissedAt: ptr(at(32)),
		},
		{
			name:    "GrantStartedBeforeTheWindowHeldAtTheFirstTick",
			runs:    []Grant{{Token: 7, Tick: ptr(at(-60)), StartedAt: at(-60), EndedAt: ptr(at(5))}},
			skipped: 1, missed: 3, lastMissedAt: ptr(at(32)),
		},
		{
			name:   "PausedAfterTwoGracesEnded",
			job:    Job{PausedAt: ptr(at(15))},
			missed: 2, paused: 2,
		},
		{
			name:   "PausedAtTheEndOfTheGrace",
			job:    Job{PausedAt: ptr(at(12))},
			missed: 1, paused: 3,
		},
		{
			name: "RanWinsOverPaused",
			job:  Job{PausedAt: ptr(at(-1))},
			runs: []Grant{{Token: 1, Tick: ptr(at(20)), StartedAt: at(20), EndedAt: ptr(at(21))}},
			ran:  1, paused: 3,
		},
		{
			// A grant of an owed tick started within a tick's grace: the
			// job ran, so the tick is skipped; one of a scheduled tick, or
			// one started after the grace, does not count.
			name: "OwedGrantWithinTheGraceSkipped",
			runs: []Grant{
				{Token: 1, Tick: ptr(at(-50)), StartedAt: at(1), EndedAt: ptr(at(1).Add(time.Millisecond)), Trigger: leaseapi.TriggerCatchUp},
				{Token: 2, Tick: ptr(at(12)), StartedAt: at(12), EndedAt: ptr(at(12).Add(time.Millisecond)), Trigger: leaseapi.TriggerManual},
				{Token: 3, Tick: ptr(at(-40)), StartedAt: at(21), EndedAt: ptr(at(21).Add(time.Millisecond)), Trigger: leaseapi.TriggerSchedule},
				{Token: 4, Tick: ptr(at(33)), StartedAt: at(33), EndedAt: ptr(at(34)), Trigger: leaseapi.TriggerManual},
			},
			skipped: 2, missed: 2, lastMissedAt: ptr(at(32)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := tt.job
			job.Grace = grace
			d := Ticks(&job, due, tt.runs)
			if d.Ran != tt.ran || d.Paused != tt.paused || d.Skipped != tt.skipped || d.Missed != tt.missed {
				t.Errorf("got ran %d paused %d skipped %d missed %d, want %d %d %d %d",
					d.Ran, d.Paused, d.Skipped, d.Missed, tt.ran, tt.paused, tt.skipped, tt.missed)
			}
			if int64(len(d.MissedTicks)) != tt.missed {
				t.Errorf("MissedTicks: got %d, want %d", len(d.MissedTicks), tt.missed)
			}
			if !equalTimes(d.LastMissedAt, tt.lastMissedAt) {
				t.Errorf("LastMissedAt: got %v, want %v", d.LastMissedAt, tt.lastMissedAt)
			}
			if want := tt.lastMissedAt; want != nil && !equalTimes(d.LastMissedTick(), ptr(want.Add(-grace))) {
				t.Errorf("LastMissedTick: got %v, want %v", d.LastMissedTick(), want.Add(-grace))
			} else if want == nil && d.LastMissedTick() != nil {
				t.Errorf("LastMissedTick: got %v, want nil", d.LastMissedTick())
			}
		})
	}
}

func equalTimes(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// TestDecideTicksRecordsAtMostAHundred: a job whose replicas were gone for
// long has every missed tick counted, and the newest
// MaxMissedRunsPerSweep of them recorded as runs.
func TestDecideTicksRecordsAtMostAHundred(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	var due []time.Time
	for i := range 250 {
		due = append(due, t0.Add(time.Duration(i)*time.Second))
	}
	d := Ticks(&Job{Grace: time.Second}, due, nil)
	if d.Missed != 250 || len(d.MissedTicks) != leaseapi.MaxMissedRunsPerSweep {
		t.Fatalf("got missed %d and %d recorded, want 250 and %d", d.Missed, len(d.MissedTicks), leaseapi.MaxMissedRunsPerSweep)
	}
	if first, last := d.MissedTicks[0], d.MissedTicks[len(d.MissedTicks)-1]; !first.Equal(due[150]) || !last.Equal(due[249]) {
		t.Errorf("recorded ticks %s … %s, want the newest: %s … %s", first, last, due[150], due[249])
	}
}

// TestPlanTicks: the due ticks start at the stored next tick, or at the
// first tick after registration; a tick is due once its grace has ended;
// one pass decides at most MaxTicksPerPass.
func TestPlanTicks(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	since := t0.Add(-500 * time.Millisecond)
	j := &Job{Since: since, Grace: 200 * time.Millisecond}

	p := PlanTicks(j, s, t0.Add(2100*time.Millisecond))
	if len(p.Due) != 2 || !p.Due[0].Equal(t0) || !p.Due[1].Equal(t0.Add(time.Second)) || !p.Next.Equal(t0.Add(2*time.Second)) {
		t.Errorf("from registration: got %v, next %s; want %s and %s due, next %s", p.Due, p.Next, t0, t0.Add(time.Second), t0.Add(2*time.Second))
	}
	next := t0.Add(2 * time.Second)
	j.NextTick = &next
	if p := PlanTicks(j, s, t0.Add(2199*time.Millisecond)); len(p.Due) != 0 || !p.Next.Equal(next) {
		t.Errorf("before the grace ended: got %v due, next %s; want none, next %s", p.Due, p.Next, next)
	}
	if p := PlanTicks(j, s, t0.Add(100*24*time.Hour)); len(p.Due) != MaxTicksPerPass || !p.Next.Equal(next.Add(MaxTicksPerPass*time.Second)) {
		t.Errorf("after a long outage: got %d due, next %s; want %d, the rest for the next pass", len(p.Due), p.Next, MaxTicksPerPass)
	}
}

// TestPassDecide: what a pass writes for a job: its decision with each
// missed run's end (tick + grace), the next undecided tick and when it is
// due, and whether it decided a tick at all; a spec that does not parse
// is an error, and a pass parses each spec once.
func TestPassDecide(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	const grace = 200 * time.Millisecond
	pass := NewPass(t0.Add(2100 * time.Millisecond))
	j := &Job{Schedule: "@every 1s", Since: t0.Add(-500 * time.Millisecond), Grace: grace}

	plan, err := pass.Plan(j)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if !plan.GrantsFrom().Equal(t0.Add(-TickSkew)) {
		t.Errorf("GrantsFrom: got %s, want %s (TickSkew before the oldest due tick)", plan.GrantsFrom(), t0.Add(-TickSkew))
	}
	ran := t0.Add(time.Second)
	o := Decide(j, plan, []Grant{{Token: 2, Tick: &ran, StartedAt: ran, EndedAt: ptrTime(ran.Add(time.Millisecond))}})
	wantNext, wantAt := t0.Add(2*time.Second), t0.Add(2*time.Second+grace)
	if !o.Decided || o.Ran != 1 || o.Missed != 1 || !equalTimes(o.Next, &wantNext) || !equalTimes(o.DecideAt, &wantAt) {
		t.Errorf("Decide: got decided %v, ran %d, missed %d, next %v due %v; want true, 1, 1, %s due %s",
			o.Decided, o.Ran, o.Missed, o.Next, o.DecideAt, wantNext, wantAt)
	}
	if want := []MissedRun{{Tick: t0, EndedAt: t0.Add(grace)}}; len(o.MissedRuns) != 1 || o.MissedRuns[0] != want[0] {
		t.Errorf("MissedRuns: got %v, want %v", o.MissedRuns, want)
	}
	if o.LastMissedAt != nil {
		t.Errorf("LastMissedAt: got %v, want nil (the newest decided tick ran)", o.LastMissedAt)
	}

	// Nothing due yet: nothing decided, the next tick stays.
	j.NextTick = &wantNext
	plan, err = pass.Plan(j)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if o := Decide(j, plan, nil); o.Decided || o.Missed != 0 || len(o.MissedRuns) != 0 || !equalTimes(o.Next, &wantNext) {
		t.Errorf("Decide with nothing due: got %+v, want nothing decided, next %s", o, wantNext)
	}

	if _, err := pass.Plan(&Job{Schedule: "not a spec"}); err == nil {
		t.Error("Plan of a spec that does not parse: got nil error")
	}
	if len(pass.schedules) != 1 {
		t.Errorf("the pass parsed %d specs, want 1 (the valid one, once)", len(pass.schedules))
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
