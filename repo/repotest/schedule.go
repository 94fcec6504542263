package repotest

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/schedule"
)

// The schedules of the suite: one tick a second, so that a subtest sees a
// few ticks decided in a few seconds.
const (
	everySecond = "@every 1s"
	shortGrace  = 100 * time.Millisecond
)

func mustSchedule(t *testing.T, spec string) *schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(spec)
	if err != nil {
		t.Fatalf("schedule.Parse(%q): %v", spec, err)
	}
	return s
}

// sweep runs SweepTicks until it reports no more due work.
func (b *bundle) sweep(t *testing.T) {
	t.Helper()
	for range pollAttempts {
		res, err := b.store.SweepTicks(t.Context(), 1000)
		if err != nil {
			t.Fatalf("SweepTicks: %v", err)
		}
		if !res.More {
			return
		}
	}
	t.Fatalf("SweepTicks: still more due work after %d passes", pollAttempts)
}

// sweepUntil sweeps and reads the lease until done says it is as wanted.
func (b *bundle) sweepUntil(t *testing.T, jobID, what string, done func(leaseapi.Lease) bool) leaseapi.Lease {
	t.Helper()
	var l leaseapi.Lease
	for range pollAttempts {
		b.sweep(t)
		if l = b.get(t, jobID); done(l) {
			return l
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("%s: never happened after %d sweeps; lease %+v", what, pollAttempts, l)
	return l
}

// register gives job its schedule through a grant that is released at once.
func (b *bundle) register(t *testing.T, job, spec string, grace time.Duration) leaseapi.Lease {
	t.Helper()
	owner := b.owner("registrar")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Schedule: spec, Grace: grace})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	return l
}

// testScheduleRegistration: only granted acquires store the schedule and
// grace; the lease shows them with the next tick; ForgetSchedule clears
// them and keeps the counters.
func testScheduleRegistration(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("schedule"), b.owner("a"), b.owner("b")
	const daily = "@every 24h"
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Schedule: daily, Grace: 5 * time.Minute})
	if l.Schedule != daily || l.Grace != 5*time.Minute || l.Paused() || l.MissedTicks != 0 || l.SkippedTicks != 0 {
		t.Fatalf("Acquire with a schedule: got schedule %q grace %s paused %v counters %d %d, want %q 5m unpaused 0 0",
			l.Schedule, l.Grace, l.Paused(), l.MissedTicks, l.SkippedTicks, daily)
	}
	s := mustSchedule(t, daily)
	if l.NextTick == nil || (!l.NextTick.Equal(s.Next(l.AcquiredAt)) && !l.NextTick.Equal(s.Next(s.Next(l.AcquiredAt)))) {
		t.Errorf("NextTick: got %s, want the first tick of %q after %s", fmtTime(l.NextTick), daily, fmtTime(&l.AcquiredAt))
	}

	// A renewal without a schedule keeps it; a refused acquire writes nothing.
	renewed := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL})
	if renewed.Schedule != daily || renewed.Grace != 5*time.Minute {
		t.Errorf("renewal without a schedule: got %q %s, want %q 5m", renewed.Schedule, renewed.Grace, daily)
	}
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Schedule: "@every 1h", Grace: time.Minute})
	wantConflict(t, "another owner's acquire with another schedule", err, leaseapi.ErrLeaseHeld)
	if got := b.get(t, job); got.Schedule != daily || got.Grace != 5*time.Minute {
		t.Errorf("after a refused acquire: got %q %s, want %q 5m", got.Schedule, got.Grace, daily)
	}

	// A grant with another spec and grace replaces both.
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	hourly := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Schedule: "@every 1h", Grace: time.Minute})
	if hourly.Schedule != "@every 1h" || hourly.Grace != time.Minute {
		t.Errorf("a grant with a new schedule: got %q %s, want @every 1h 1m", hourly.Schedule, hourly.Grace)
	}

	forgot, err := b.store.ForgetSchedule(ctx, job)
	if err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	want := hourly
	want.Schedule, want.Grace, want.NextTick = "", 0, nil
	checkLease(t, "ForgetSchedule", forgot, want)
	checkLease(t, "Get after ForgetSchedule", b.get(t, job), want)

	unknown := b.job("schedule-unknown")
	_, err = b.store.ForgetSchedule(ctx, unknown)
	wantError(t, "ForgetSchedule of an unknown job", err, leaseapi.ErrNotFound)
	_, err = b.store.Pause(ctx, &leaseapi.PauseParams{JobID: unknown})
	wantError(t, "Pause of an unknown job", err, leaseapi.ErrNotFound)
	_, err = b.store.Resume(ctx, unknown)
	wantError(t, "Resume of an unknown job", err, leaseapi.ErrNotFound)
}

// testPause: a paused job refuses every acquire with job_paused except its
// holder's retry of its own grant; the grant in flight is not touched; both
// pause and resume are idempotent.
func testPause(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("pause"), b.owner("a"), b.owner("b")
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})

	paused, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, By: "ops", Reason: "database maintenance"})
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if !paused.Paused() || paused.PausedBy != "ops" || paused.PausedReason != "database maintenance" {
		t.Fatalf("Pause: got paused %v by %q reason %q, want paused by ops for database maintenance",
			paused.Paused(), paused.PausedBy, paused.PausedReason)
	}
	want := held
	want.PausedAt, want.PausedBy, want.PausedReason = paused.PausedAt, "ops", "database maintenance"
	checkLease(t, "Pause of a held lease (the grant is not touched)", paused, want)

	again, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, By: "someone else", Reason: "another reason"})
	if err != nil {
		t.Fatalf("Pause again: %v", err)
	}
	checkLease(t, "Pause of a paused job changes nothing", again, want)

	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(0)})
	if l := wantConflict(t, "another owner's acquire while paused", err, leaseapi.ErrJobPaused); !l.Paused() {
		t.Errorf("job_paused conflict: the lease it carries is not paused")
	}
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(1)})
	wantConflict(t, "the holder's acquire for another tick while paused", err, leaseapi.ErrJobPaused)

	retry := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	if retry.Token != held.Token || !retry.Paused() {
		t.Errorf("the holder's retry while paused: got token %d paused %v, want token %d, still paused", retry.Token, retry.Paused(), held.Token)
	}
	b.heartbeat(t, leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: held.Token})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(1)})
	wantConflict(t, "an acquire of the released, paused job", err, leaseapi.ErrJobPaused)

	resumed, err := b.store.Resume(ctx, job)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if resumed.Paused() || resumed.PausedBy != "" || resumed.PausedReason != "" {
		t.Errorf("Resume: got paused %v by %q reason %q, want not paused", resumed.Paused(), resumed.PausedBy, resumed.PausedReason)
	}
	again, err = b.store.Resume(ctx, job)
	if err != nil {
		t.Fatalf("Resume again: %v", err)
	}
	checkLease(t, "Resume of a job that is not paused changes nothing", again, resumed)
	if l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)}); l.Token != held.Token+1 {
		t.Errorf("acquire after Resume: got token %d, want %d", l.Token, held.Token+1)
	}
}

// testSweepMissed: ticks that no replica starts are recorded missed, once,
// from the first tick after the schedule was registered; missed runs have
// a tick and an end but no holder, and leave lastOutcome alone.
func testSweepMissed(t *testing.T, b *bundle) {
	job := b.job("missed")
	reg := b.register(t, job, everySecond, shortGrace)
	b.sweepUntil(t, job, "three missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 3 })
	l, err := b.store.ForgetSchedule(t.Context(), job) // no more accounting: the counts stand still
	if err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	if l.LastOutcome != leaseapi.OutcomeSucceeded || l.SkippedTicks != 0 {
		t.Errorf("after missed ticks: got lastOutcome %q skipped %d, want succeeded (missed runs do not change it) and 0", l.LastOutcome, l.SkippedTicks)
	}

	var missed []leaseapi.Run
	for _, r := range b.runs(t, job, 1000) {
		if r.Outcome == leaseapi.OutcomeMissed {
			missed = append(missed, r)
		}
	}
	if int64(len(missed)) != l.MissedTicks {
		t.Fatalf("missed runs: got %d, want MissedTicks %d", len(missed), l.MissedTicks)
	}
	s := mustSchedule(t, everySecond)
	want := s.Next(reg.AcquiredAt)
	for i := len(missed) - 1; i >= 0; i-- { // oldest first
		r := missed[i]
		if r.Token != 0 || r.Owner != "" || r.StartedAt != nil {
			t.Errorf("missed run %d: got token %d owner %q start %s, want none", i, r.Token, r.Owner, fmtTime(r.StartedAt))
		}
		if r.Tick == nil || !r.Tick.Equal(want) {
			t.Errorf("missed run %d: got tick %s, want %s (consecutive ticks from the first after registration at %s)",
				i, fmtTime(r.Tick), fmtTime(&want), fmtTime(&reg.AcquiredAt))
		} else if end := r.Tick.Add(shortGrace); !equalTimePtr(r.EndedAt, &end) {
			t.Errorf("missed run %d: got end %s, want tick + grace %s", i, fmtTime(r.EndedAt), fmtTime(&end))
		}
		if _, ok := r.Duration(); ok {
			t.Errorf("missed run %d has a duration", i)
		}
		want = s.Next(want)
	}
}

// testSweepRanAndSkipped: a tick that was granted ran (not missed); a tick
// that falls while an earlier grant is held is skipped (not missed).
func testSweepRanAndSkipped(t *testing.T, b *bundle) {
	job, a := b.job("skipped"), b.owner("a")
	s := mustSchedule(t, everySecond)
	b.register(t, job, everySecond, 300*time.Millisecond)

	tick := s.Next(time.Now().Add(time.Second))
	for time.Now().Before(tick) {
		time.Sleep(pollInterval)
	}
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: 2500 * time.Millisecond, Tick: &tick})
	l := b.sweepUntil(t, job, "a tick skipped while the grant is held", func(l leaseapi.Lease) bool { return l.SkippedTicks >= 1 })
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	if _, err := b.store.ForgetSchedule(t.Context(), job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	for _, r := range b.runs(t, job, 1000) {
		if r.Outcome == leaseapi.OutcomeMissed && r.Tick != nil && (r.Tick.Equal(tick) || r.Tick.Equal(s.Next(tick))) {
			t.Errorf("tick %s was recorded missed, want it ran (granted) or skipped (held by the grant for %s)", fmtTime(r.Tick), fmtTime(&tick))
		}
	}
	if l.SkippedTicks < 1 {
		t.Errorf("SkippedTicks: got %d, want at least 1", l.SkippedTicks)
	}
}

// testSweepPaused: ticks that fall while the job is paused are neither
// missed nor skipped, and are not back-filled after the resume; the ticks
// after it are decided again.
func testSweepPaused(t *testing.T, b *bundle) {
	ctx, job := t.Context(), b.job("paused-ticks")
	reg := b.register(t, job, everySecond, shortGrace)
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	// Let a few ticks fall while paused, sweeping meanwhile.
	until := reg.AcquiredAt.Add(2500 * time.Millisecond)
	for time.Now().Before(until) {
		b.sweep(t)
		time.Sleep(20 * pollInterval)
	}
	resumed, err := b.store.Resume(ctx, job)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if resumed.MissedTicks != 0 || resumed.SkippedTicks != 0 {
		t.Fatalf("after a pause: got missed %d skipped %d, want 0 0", resumed.MissedTicks, resumed.SkippedTicks)
	}
	resumedAt := time.Now()
	b.sweepUntil(t, job, "a tick after the resume missed", func(l leaseapi.Lease) bool { return l.MissedTicks >= 1 })
	if _, err := b.store.ForgetSchedule(ctx, job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	for _, r := range b.runs(t, job, 1000) {
		// A tick whose grace ended before the resume fell in the pause.
		if r.Outcome == leaseapi.OutcomeMissed && r.EndedAt.Before(resumedAt.Add(-time.Second)) {
			t.Errorf("tick %s, decided at %s during the pause, was recorded missed", fmtTime(r.Tick), fmtTime(r.EndedAt))
		}
	}
}

// testStats: the counts by state, paused and overdue, of one prefix.
func testStats(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	for _, name := range []string{"held-1", "held-2"} {
		b.acquire(t, leaseapi.AcquireParams{JobID: b.job(name), Owner: a, TTL: longTTL})
	}
	rel := b.acquire(t, leaseapi.AcquireParams{JobID: b.job("released"), Owner: a, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: rel.JobID, Owner: a, Token: rel.Token, Outcome: leaseapi.OutcomeFailed})
	b.acquire(t, leaseapi.AcquireParams{JobID: b.job("revoked"), Owner: a, TTL: longTTL})
	b.revoke(t, b.job("revoked"))
	b.acquire(t, leaseapi.AcquireParams{JobID: b.job("expired"), Owner: a, TTL: shortTTL})
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: b.job("held-2")}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	// Overdue: a schedule whose newest decided tick was missed, no grant
	// since (no replica runs it: every tick after the first is missed too).
	overdue := b.job("overdue")
	b.register(t, overdue, everySecond, shortGrace)
	b.sweepUntil(t, overdue, "a missed tick", func(l leaseapi.Lease) bool { return l.MissedTicks >= 1 })
	b.waitForState(t, b.job("expired"), leaseapi.StateExpired)

	countMissed := func() int64 {
		var n int64
		for _, r := range b.runs(t, overdue, 1000) {
			if r.Outcome == leaseapi.OutcomeMissed {
				n++
			}
		}
		return n
	}
	missedBefore := countMissed()
	st, err := b.store.Stats(ctx, b.prefix)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	missedAfter := countMissed() // the sweeps of other subtests go on deciding its ticks
	// The runs that ended in the last 24 hours: the registrar's release
	// (succeeded), the released (failed) and the revoked grants, the
	// expired grant that nobody took over, the missed ticks.
	for outcome, n := range map[leaseapi.Outcome]int64{
		leaseapi.OutcomeSucceeded: 1, leaseapi.OutcomeFailed: 1, leaseapi.OutcomeRevoked: 1, leaseapi.OutcomeExpired: 1,
	} {
		if st.Runs24h[outcome] != n {
			t.Errorf("Stats.Runs24h[%s]: got %d, want %d", outcome, st.Runs24h[outcome], n)
		}
	}
	if m := st.Runs24h[leaseapi.OutcomeMissed]; m < missedBefore || m > missedAfter || m == 0 {
		t.Errorf("Stats.Runs24h[missed]: got %d, want %d to %d (not 0)", m, missedBefore, missedAfter)
	}
	if _, ok := st.Runs24h[leaseapi.OutcomeRunning]; ok {
		t.Error("Stats.Runs24h counts running runs; want only the runs that ended")
	}
	// Taken over, the expired grant's run is closed as expired: still one.
	b.acquire(t, leaseapi.AcquireParams{JobID: b.job("expired"), Owner: b.owner("b"), TTL: longTTL})
	if st2, err := b.store.Stats(ctx, b.prefix); err != nil {
		t.Fatalf("Stats: %v", err)
	} else if st2.Runs24h[leaseapi.OutcomeExpired] != 1 || st2.Leases[leaseapi.StateHeld] != 3 {
		t.Errorf("Stats after the takeover: runs24h expired %d, held %d; want 1, 3", st2.Runs24h[leaseapi.OutcomeExpired], st2.Leases[leaseapi.StateHeld])
	}
	b.revoke(t, b.job("expired"))
	wantLeases := map[leaseapi.State]int64{
		leaseapi.StateHeld: 2, leaseapi.StateReleased: 2, leaseapi.StateExpired: 1, leaseapi.StateRevoked: 1,
	}
	for state, n := range wantLeases {
		if st.Leases[state] != n {
			t.Errorf("Stats.Leases[%s]: got %d, want %d", state, st.Leases[state], n)
		}
	}
	if st.Paused != 1 || st.Overdue != 1 {
		t.Errorf("Stats: got paused %d overdue %d, want 1 1", st.Paused, st.Overdue)
	}
	// A paused job is not overdue; one without a schedule neither.
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: overdue}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if st, err = b.store.Stats(ctx, b.prefix); err != nil {
		t.Fatalf("Stats: %v", err)
	} else if st.Paused != 2 || st.Overdue != 0 {
		t.Errorf("Stats with the overdue job paused: got paused %d overdue %d, want 2 0", st.Paused, st.Overdue)
	}
	if _, err := b.store.Resume(ctx, overdue); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if _, err := b.store.ForgetSchedule(ctx, overdue); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	if st, err = b.store.Stats(ctx, b.prefix); err != nil {
		t.Fatalf("Stats: %v", err)
	} else if st.Paused != 1 || st.Overdue != 0 {
		t.Errorf("Stats after the schedule was forgotten: got paused %d overdue %d, want 1 0", st.Paused, st.Overdue)
	}
	none, err := b.store.Stats(ctx, b.prefix+"-nothing")
	if err != nil {
		t.Fatalf("Stats of an unused prefix: %v", err)
	}
	for _, state := range []leaseapi.State{leaseapi.StateHeld, leaseapi.StateReleased, leaseapi.StateExpired, leaseapi.StateRevoked} {
		if n, ok := none.Leases[state]; !ok || n != 0 {
			t.Errorf("Stats of an unused prefix: Leases[%s] got %d (present %v), want 0", state, n, ok)
		}
	}
}
