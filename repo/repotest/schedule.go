package repotest

import (
	"errors"
	"fmt"
	"sync"
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

// register gives job its schedule through a grant that is released at
// once, and returns the released lease (its acquiredAt and releasedAt).
func (b *bundle) register(t *testing.T, job, spec string, grace time.Duration) leaseapi.Lease {
	t.Helper()
	owner := b.owner("registrar")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Schedule: spec, Grace: grace})
	return b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
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
// from the first tick after the schedule was registered (a tick that falls
// while the registering grant is held is skipped); missed runs have a tick
// and an end but no holder, and leave lastOutcome alone.
func testSweepMissed(t *testing.T, b *bundle) {
	job := b.job("missed")
	reg := b.register(t, job, everySecond, shortGrace)
	s := mustSchedule(t, everySecond)
	// The registering grant was held from acquiredAt to releasedAt: a tick
	// in between (a registration across a second boundary) is skipped.
	var heldTicks int64
	want := s.Next(reg.AcquiredAt) // the sweep's first tick: the first after registration
	for ; want.Before(*reg.ReleasedAt); want = s.Next(want) {
		heldTicks++
	}
	b.sweepUntil(t, job, "three missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 3 })
	l, err := b.store.ForgetSchedule(t.Context(), job) // no more accounting: the counts stand still
	if err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	if l.LastOutcome != leaseapi.OutcomeSucceeded || l.SkippedTicks != heldTicks {
		t.Errorf("after missed ticks: got lastOutcome %q skipped %d, want succeeded (missed runs do not change it) and %d", l.LastOutcome, l.SkippedTicks, heldTicks)
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
	for i := len(missed) - 1; i >= 0; i-- { // oldest first
		r := missed[i]
		if r.Token != 0 || r.Owner != "" || r.StartedAt != nil {
			t.Errorf("missed run %d: got token %d owner %q start %s, want none", i, r.Token, r.Owner, fmtTime(r.StartedAt))
		}
		if r.Tick == nil || !r.Tick.Equal(want) {
			t.Errorf("missed run %d: got tick %s, want %s (consecutive ticks from the first after registration at %s, released at %s)",
				i, fmtTime(r.Tick), fmtTime(&want), fmtTime(&reg.AcquiredAt), fmtTime(reg.ReleasedAt))
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
// that falls while an earlier grant is held is skipped (not missed). The
// grant for a tick just ahead of the clock registers the schedule with a
// grace of an hour and is held past the next tick, so no
// pass decides a tick meanwhile however slow the machine; registering the
// same spec again with a short grace then makes both ticks due at once.
func testSweepRanAndSkipped(t *testing.T, b *bundle) {
	job, a := b.job("skipped"), b.owner("a")
	s := mustSchedule(t, everySecond)
	tick := s.Next(b.dbClock(t))
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &tick, Schedule: everySecond, Grace: time.Hour})
	// The tick after both the grant's tick and its start (the schedule's
	// registration): a tick of the schedule that the grant holds.
	from := tick
	if held.AcquiredAt.After(from) {
		from = held.AcquiredAt
	}
	within := s.Next(from)
	b.waitClockPast(t, within.Add(shortGrace))
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	b.register(t, job, everySecond, shortGrace)
	l := b.sweepUntil(t, job, "a tick skipped while the grant was held", func(l leaseapi.Lease) bool { return l.SkippedTicks >= 1 })
	if _, err := b.store.ForgetSchedule(t.Context(), job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	for _, r := range b.runs(t, job, 1000) {
		if r.Outcome == leaseapi.OutcomeMissed && r.Tick != nil && (r.Tick.Equal(tick) || r.Tick.Equal(within)) {
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

// dbClock returns a reading of the store's clock: the renewal time of a
// lease of the subtest's own.
func (b *bundle) dbClock(t *testing.T) time.Time {
	t.Helper()
	return b.acquire(t, leaseapi.AcquireParams{JobID: b.job("clock"), Owner: b.owner("clock"), TTL: longTTL}).RenewedAt
}

// waitClockPast waits until the store's clock is past at.
func (b *bundle) waitClockPast(t *testing.T, at time.Time) {
	t.Helper()
	for !b.dbClock(t).After(at) {
		time.Sleep(pollInterval)
	}
}

// checkNearest checks that tick is the tick a NearestTick acquire picks
// with s and margin at some store clock reading in [from, to]: a tick of
// s, at or before to+margin, whose next tick is after from+margin.
func checkNearest(t *testing.T, op string, s *schedule.Schedule, margin time.Duration, from, to time.Time, tick *time.Time) {
	t.Helper()
	if tick == nil {
		t.Fatalf("%s: got no tick, want the nearest tick of %q", op, s)
	}
	if !s.Latest(*tick).Equal(*tick) || tick.After(to.Add(margin)) || !s.Next(*tick).After(from.Add(margin)) {
		t.Errorf("%s: got tick %s, want the newest tick of %q at or before the store's clock + %s, read between %s and %s (%s or %s)",
			op, fmtTime(tick), s, margin, fmtTime(&from), fmtTime(&to),
			s.Latest(from.Add(margin)).UTC().Format(time.RFC3339Nano), s.Latest(to.Add(margin)).UTC().Format(time.RFC3339Nano))
	}
}

// testNearestTick: a NearestTick acquire takes the tick of the sent
// schedule, else of the stored one, nearest to the store's clock (the
// newest at or before it plus the shorter of a minute and half the
// shortest gap); without a schedule, or with a tick, it is invalid and
// writes nothing.
func testNearestTick(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	for i, tc := range []struct {
		spec   string
		margin time.Duration
	}{
		{"@every 1h", time.Minute},
		{"@every 2s", time.Second},
		{"*/5 * * * * *", 2500 * time.Millisecond},
		{"CRON_TZ=Asia/Kolkata 30 9 * * *", time.Minute},
	} {
		s := mustSchedule(t, tc.spec)
		job := b.job(fmt.Sprintf("nearest-sent-%d", i))
		from := b.dbClock(t)
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, NearestTick: true, Schedule: tc.spec, Grace: shortGrace})
		checkNearest(t, fmt.Sprintf("NearestTick with schedule %q sent", tc.spec), s, tc.margin, from, l.AcquiredAt, l.Tick)
		if l.Schedule != tc.spec {
			t.Errorf("NearestTick with schedule %q sent: got schedule %q, want it registered", tc.spec, l.Schedule)
		}
	}

	// The stored schedule, unless the acquire sends one.
	stored := b.job("nearest-stored")
	b.register(t, stored, "@every 1h", time.Minute)
	from := b.dbClock(t)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: stored, Owner: a, TTL: longTTL, NearestTick: true})
	checkNearest(t, "NearestTick with the stored schedule", mustSchedule(t, "@every 1h"), time.Minute, from, l.AcquiredAt, l.Tick)
	b.release(t, leaseapi.ReleaseParams{JobID: stored, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
	from = b.dbClock(t)
	l = b.acquire(t, leaseapi.AcquireParams{JobID: stored, Owner: a, TTL: longTTL, NearestTick: true, Schedule: "@every 2s", Grace: shortGrace})
	checkNearest(t, "NearestTick with a schedule sent over the stored one", mustSchedule(t, "@every 2s"), time.Second, from, l.AcquiredAt, l.Tick)

	// Without a schedule, or with a tick: invalid, nothing written.
	invalid := func(op string, p leaseapi.AcquireParams) {
		t.Helper()
		_, err := b.store.Acquire(ctx, &p)
		var inv *leaseapi.InvalidError
		if !errors.As(err, &inv) || inv.Field != "nearestTick" {
			t.Errorf("%s: got error %v, want an *leaseapi.InvalidError for nearestTick", op, err)
		}
	}
	fresh := b.job("nearest-fresh")
	invalid("NearestTick of a new job without a schedule", leaseapi.AcquireParams{JobID: fresh, Owner: a, TTL: longTTL, NearestTick: true})
	if _, err := b.store.Get(ctx, fresh); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get after a refused NearestTick acquire of a new job: got error %v, want ErrNotFound", err)
	}
	plain := b.job("nearest-plain")
	first := b.acquire(t, leaseapi.AcquireParams{JobID: plain, Owner: a, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: plain, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	invalid("NearestTick of a job without a schedule", leaseapi.AcquireParams{JobID: plain, Owner: b.owner("b"), TTL: longTTL, NearestTick: true})
	invalid("NearestTick with a tick", leaseapi.AcquireParams{JobID: stored, Owner: a, TTL: longTTL, NearestTick: true, Tick: tickAt(0)})
	if got := b.get(t, plain); got.Token != first.Token || got.State != leaseapi.StateReleased {
		t.Errorf("after refused NearestTick acquires: got token %d state %s, want token %d released", got.Token, got.State, first.Token)
	}
}

// testNearestTickRetry: the holder's repeated NearestTick acquire renews
// its grant, even after the nearest tick has moved on; other owners are
// refused; once the tick succeeded it is done.
func testNearestTickRetry(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("nearest-retry"), b.owner("a"), b.owner("b")
	const spec, margin = "@every 1s", 500 * time.Millisecond // no schedule ticks faster than a second
	s := mustSchedule(t, spec)
	params := func(owner string) *leaseapi.AcquireParams {
		return &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, NearestTick: true, Schedule: spec, Grace: shortGrace}
	}
	granted := b.acquire(t, *params(a))
	if granted.Tick == nil {
		t.Fatal("NearestTick acquire: got no tick")
	}
	_, err := b.store.Acquire(ctx, params(other))
	if held := wantConflict(t, "another owner's NearestTick acquire", err, leaseapi.ErrLeaseHeld); held.Token != granted.Token {
		t.Errorf("another owner's NearestTick acquire: got the lease with token %d, want %d", held.Token, granted.Token)
	}
	moved := false
	for range pollAttempts {
		r := b.acquire(t, *params(a))
		if r.Token != granted.Token || !equalTimePtr(r.Tick, granted.Tick) || r.State != leaseapi.StateHeld {
			t.Fatalf("the holder's NearestTick retry: got token %d tick %s state %s, want token %d tick %s held",
				r.Token, fmtTime(r.Tick), r.State, granted.Token, fmtTime(granted.Tick))
		}
		if s.Latest(r.RenewedAt.Add(margin)).After(*granted.Tick) {
			moved = true // renewed when another tick was the nearest
			break
		}
		time.Sleep(pollInterval)
	}
	if !moved {
		t.Fatalf("the nearest tick never moved past %s in %d polls", fmtTime(granted.Tick), pollAttempts)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: granted.Token, Outcome: leaseapi.OutcomeSucceeded})
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: granted.Tick})
	wantConflict(t, "the completed tick, named", err, leaseapi.ErrTickDone)
}

// testNearestTickContention: of many contenders asking for the nearest
// tick at once, exactly one per job wins; the rest get lease_held with the
// winner's lease.
func testNearestTickContention(t *testing.T, b *bundle) {
	const jobs, contenders, spec = 4, 32, "@every 1h"
	s := mustSchedule(t, spec)
	type result struct {
		lease leaseapi.Lease
		err   error
	}
	results := make([][]result, jobs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	from := b.dbClock(t)
	for j := range jobs {
		results[j] = make([]result, contenders)
		for c := range contenders {
			wg.Go(func() {
				<-start
				l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: b.job(fmt.Sprintf("nearest-race-%d", j)),
					Owner: b.owner(fmt.Sprint(c)), TTL: longTTL, NearestTick: true, Schedule: spec, Grace: time.Minute})
				results[j][c] = result{l, err}
			})
		}
	}
	close(start)
	wg.Wait()
	to := b.dbClock(t)
	for j, rs := range results {
		var won []leaseapi.Lease
		for _, r := range rs {
			if r.err == nil {
				won = append(won, r.lease)
			}
		}
		if len(won) != 1 {
			t.Errorf("job %d: got %d winners, want exactly 1", j, len(won))
			continue
		}
		w := won[0]
		checkNearest(t, fmt.Sprintf("job %d: the winner's tick", j), s, time.Minute, from, to, w.Tick)
		for _, r := range rs {
			var ce *leaseapi.ConflictError
			if r.err != nil && (!errors.Is(r.err, leaseapi.ErrLeaseHeld) || !errors.As(r.err, &ce) || ce.Lease.Token != w.Token || ce.Lease.Owner != w.Owner) {
				t.Errorf("job %d: a loser got error %v, want lease_held with the winner's lease (owner %s, token %d)", j, r.err, w.Owner, w.Token)
				break
			}
		}
	}
}

// testTickSnapping: an acquire's tick is snapped to the newest tick at or
// before it of the schedule it sends, else of the stored one, so another
// name of a completed tick is tick_done; without a schedule a tick is
// taken as it is.
func testTickSnapping(t *testing.T, b *bundle) {
	ctx, job := t.Context(), b.job("snap")
	owner := func(n int) string { return b.owner(fmt.Sprint("snap", n)) }
	const hourly = "@every 1h"
	b.register(t, job, hourly, time.Minute)
	at := func(d time.Duration) *time.Time { v := baseTick.Add(d); return &v }

	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(1), TTL: longTTL, Tick: at(30 * time.Minute)})
	if !equalTimePtr(l.Tick, at(0)) {
		t.Errorf("a tick between two ticks of the stored schedule: got tick %s, want %s", fmtTime(l.Tick), fmtTime(at(0)))
	}
	again := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(1), TTL: longTTL, Tick: at(59 * time.Minute)})
	if again.Token != l.Token || !equalTimePtr(again.Tick, at(0)) {
		t.Errorf("the holder's retry naming its tick otherwise: got token %d tick %s, want token %d tick %s",
			again.Token, fmtTime(again.Tick), l.Token, fmtTime(at(0)))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner(1), Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner(2), TTL: longTTL, Tick: at(time.Hour - time.Millisecond)})
	wantConflict(t, "another name of the completed tick, stored schedule", err, leaseapi.ErrTickDone)
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner(2), TTL: longTTL, Tick: at(10 * time.Minute),
		Schedule: hourly, Grace: time.Minute})
	wantConflict(t, "another name of the completed tick, schedule sent", err, leaseapi.ErrTickDone)
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner(2), TTL: longTTL, Tick: at(70 * time.Minute),
		Schedule: "0 7 * * *", Grace: time.Minute})
	wantConflict(t, "a tick the sent schedule snaps to the completed one", err, leaseapi.ErrTickDone)
	if got := b.get(t, job); got.Schedule != hourly {
		t.Errorf("after refused acquires: got schedule %q, want %q", got.Schedule, hourly)
	}

	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(3), TTL: longTTL, Tick: at(time.Hour + 20*time.Minute)})
	if !equalTimePtr(next.Tick, at(time.Hour)) {
		t.Errorf("the next tick: got %s, want %s", fmtTime(next.Tick), fmtTime(at(time.Hour)))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner(3), Token: next.Token, Outcome: leaseapi.OutcomeSucceeded})

	// A grant that registers another schedule: the next tick snaps to it.
	reg := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(4), TTL: longTTL, Schedule: "@every 15m", Grace: time.Minute})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner(4), Token: reg.Token, Outcome: leaseapi.OutcomeSucceeded})
	quarter := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(5), TTL: longTTL, Tick: at(2*time.Hour + 20*time.Minute)})
	if !equalTimePtr(quarter.Tick, at(2*time.Hour+15*time.Minute)) {
		t.Errorf("after a new schedule: got tick %s, want %s", fmtTime(quarter.Tick), fmtTime(at(2*time.Hour+15*time.Minute)))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner(5), Token: quarter.Token, Outcome: leaseapi.OutcomeSucceeded})

	// Without a schedule a tick is what it says.
	if _, err := b.store.ForgetSchedule(ctx, job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	plain := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner(6), TTL: longTTL, Tick: at(3*time.Hour + 7*time.Minute)})
	if !equalTimePtr(plain.Tick, at(3*time.Hour+7*time.Minute)) {
		t.Errorf("without a schedule: got tick %s, want %s", fmtTime(plain.Tick), fmtTime(at(3*time.Hour+7*time.Minute)))
	}
}
