package repotest

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// RepairHarness is what the repair suite needs of a store.
type RepairHarness struct {
	// Open returns a new store over the harness's data, as RunStoreSuite's
	// open does.
	Open func(t *testing.T) leaseapi.Store
	// OpenAlone returns a store over data of its own, which no other test
	// writes: JobsAhead counts every job of the store.
	OpenAlone func(t *testing.T) leaseapi.Store
	// SetTicks writes marks ahead of the clock into job's rows, with the
	// store s that Open returned, as a replica whose clock was fast left
	// them before the service refused such ticks: when grant is not nil,
	// the current grant's tick (the lease's and its run's) becomes grant;
	// when owed is not nil, the job owes the manual tick owed.
	SetTicks func(t *testing.T, s leaseapi.Store, jobID string, grant, owed *time.Time)
}

// The repair suite's window and retention, as the service's defaults.
const (
	repairWindow    = 5 * time.Minute
	repairRetention = 168 * time.Hour
	// farAhead is how far the fast replica's clock was: two days.
	farAhead = 48 * time.Hour
)

// RunRepairSuite holds a store's Repair to its contract (leaseapi.Store):
// each rule, the finding it cures end to end (a tick two days ahead
// released succeeded made every later tick tick_done), and a second repair
// changing nothing.
func RunRepairSuite(t *testing.T, h *RepairHarness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b *bundle, h *RepairHarness)
	}{
		{"PoisonedJob", testRepairPoisonedJob},
		{"HeldGrantAhead", testRepairHeldGrantAhead},
		{"ExpiredGrantAhead", testRepairExpiredGrantAhead},
		{"RetentionFloor", testRepairRetentionFloor},
		{"OwedTickAhead", testRepairOwedTickAhead},
		{"SoundJob", testRepairSoundJob},
		{"UnknownAndInvalid", testRepairUnknownAndInvalid},
		{"DiscardedTickMissed", testRepairDiscardedTickMissed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, setup(t, h.open), h)
		})
	}
	t.Run("JobsAhead", func(t *testing.T) {
		t.Parallel()
		testJobsAhead(t, setup(t, h.openAlone), h)
	})
}

// open and openAlone are Open and OpenAlone as the suite's setup takes
// them: the repair suite runs with the store's default settings.
func (h *RepairHarness) open(t *testing.T, _ StoreOptions) leaseapi.Store { return h.Open(t) }

func (h *RepairHarness) openAlone(t *testing.T, _ StoreOptions) leaseapi.Store {
	return h.OpenAlone(t)
}

func (b *bundle) repair(t *testing.T, jobID string, retention time.Duration) leaseapi.Lease {
	t.Helper()
	l, err := b.store.Repair(t.Context(), &leaseapi.RepairParams{
		JobID: jobID, Window: repairWindow, Retention: retention, By: "ops-" + b.prefix, Reason: "clock was fast",
	})
	if err != nil {
		t.Fatalf("Repair(%s): got error %v, want nil", jobID, err)
	}
	return l
}

// clockTick is a tick d after the store's clock as lease l read it, in
// whole seconds (a tick of any schedule of a second or more).
func clockTick(l leaseapi.Lease, d time.Duration) *time.Time {
	v := l.RenewedAt.Add(d).Truncate(time.Second)
	return &v
}

// runsByOutcome counts a job's runs by outcome.
func runsByOutcome(runs []leaseapi.Run) map[leaseapi.Outcome]int {
	m := map[leaseapi.Outcome]int{}
	for _, r := range runs {
		m[r.Outcome]++
	}
	return m
}

// testRepairPoisonedJob is the finding end to end: a grant whose tick lay
// two days ahead, released succeeded, made every later tick tick_done;
// after a repair the next real tick is granted, the ahead run is
// discarded and the ticks done before stay done.
func testRepairPoisonedJob(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job, owner := t.Context(), b.job("poisoned"), b.owner("a")

	// A sound run a minute ago.
	probe := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: probe.Token, Outcome: leaseapi.OutcomeSucceeded})
	done := clockTick(probe, -time.Minute)
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: done})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})

	// The fast replica: a grant for a tick two days ahead, released succeeded.
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("fast"), TTL: longTTL, Tick: clockTick(probe, 0)})
	ahead := clockTick(probe, farAhead)
	h.SetTicks(t, b.store, job, ahead, nil)
	poisoned := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("fast"), Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	if !equalTimePtr(poisoned.LastCompletedTick, ahead) {
		t.Fatalf("LastCompletedTick after the release ahead: got %s, want %s", fmtTime(poisoned.LastCompletedTick), fmtTime(ahead))
	}
	next := clockTick(poisoned, time.Second)
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: next})
	wantConflict(t, "Acquire of the next tick before the repair", err, leaseapi.ErrTickDone)

	repaired := b.repair(t, job, repairRetention)
	if !equalTimePtr(repaired.LastCompletedTick, done) {
		t.Errorf("LastCompletedTick after Repair: got %s, want the newest succeeded tick before, %s",
			fmtTime(repaired.LastCompletedTick), fmtTime(done))
	}
	if repaired.Token != poisoned.Token || repaired.State != leaseapi.StateReleased {
		t.Errorf("Repair of a released job: got token %d, state %s; want %d, released (nothing to revoke)",
			repaired.Token, repaired.State, poisoned.Token)
	}
	runs := b.runs(t, job, 10)
	if got := runsByOutcome(runs); got[leaseapi.OutcomeDiscarded] != 1 || got[leaseapi.OutcomeSucceeded] != 2 {
		t.Errorf("Runs after Repair: got %v, want 1 discarded and 2 succeeded: %+v", got, runs)
	}
	for _, r := range runs {
		if r.Outcome == leaseapi.OutcomeDiscarded && !equalTimePtr(r.Tick, ahead) {
			t.Errorf("discarded run: got tick %s, want %s", fmtTime(r.Tick), fmtTime(ahead))
		}
	}

	// The ticks done before stay done; the next real tick is granted.
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: done})
	wantConflict(t, "Acquire of the tick done before the repair", err, leaseapi.ErrTickDone)
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: next})
	if g.Token <= repaired.Token {
		t.Errorf("grant after Repair: got token %d, want above %d", g.Token, repaired.Token)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})

	// A second repair changes nothing.
	before := b.get(t, job)
	again := b.repair(t, job, repairRetention)
	if again.Token != before.Token || !equalTimePtr(again.LastCompletedTick, before.LastCompletedTick) || again.State != before.State {
		t.Errorf("second Repair: got token %d, last completed %s, state %s; want %d, %s, %s", again.Token,
			fmtTime(again.LastCompletedTick), again.State, before.Token, fmtTime(before.LastCompletedTick), before.State)
	}
	if got := runsByOutcome(b.runs(t, job, 10)); got[leaseapi.OutcomeDiscarded] != 1 || got[leaseapi.OutcomeSucceeded] != 3 {
		t.Errorf("Runs after the second Repair: got %v, want 1 discarded and 3 succeeded", got)
	}
}

// testRepairHeldGrantAhead: a held grant whose tick is ahead is revoked
// (token + 1, revokedBy the repairer), its run discarded, and its holder
// can no longer release it succeeded; a second repair changes nothing.
func testRepairHeldGrantAhead(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job, fast := t.Context(), b.job("held"), b.owner("fast")
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: fast, TTL: longTTL})
	ahead := clockTick(g, farAhead)
	h.SetTicks(t, b.store, job, ahead, nil)

	repaired := b.repair(t, job, repairRetention)
	if repaired.Token != g.Token+1 || repaired.State != leaseapi.StateRevoked || repaired.RevokedBy != "ops-"+b.prefix {
		t.Errorf("Repair of a held grant ahead: got token %d, state %s, revokedBy %q; want %d, revoked, %q",
			repaired.Token, repaired.State, repaired.RevokedBy, g.Token+1, "ops-"+b.prefix)
	}
	if repaired.LastCompletedTick != nil {
		t.Errorf("LastCompletedTick: got %s, want none", fmtTime(repaired.LastCompletedTick))
	}
	runs := b.runs(t, job, 10)
	if len(runs) != 1 || runs[0].Outcome != leaseapi.OutcomeDiscarded || runs[0].RevokedBy != "ops-"+b.prefix || runs[0].EndedAt == nil {
		t.Errorf("Runs after Repair: got %+v, want one discarded run, ended, revoked by %q", runs, "ops-"+b.prefix)
	}
	_, err := b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: fast, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantConflict(t, "Release by the fast holder after Repair", err, leaseapi.ErrLeaseLost)

	again := b.repair(t, job, repairRetention)
	if again.Token != repaired.Token || len(b.runs(t, job, 10)) != 1 {
		t.Errorf("second Repair: got token %d, want %d unchanged", again.Token, repaired.Token)
	}
	// The tick now is granted.
	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, Tick: clockTick(again, 0)})
	if next.Token <= again.Token {
		t.Errorf("grant after Repair: got token %d, want above %d", next.Token, again.Token)
	}
}

// testRepairExpiredGrantAhead: a grant ahead that expired with nobody
// taking over is revoked too, since its holder could still release it
// succeeded and poison the job again.
func testRepairExpiredGrantAhead(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job, fast := t.Context(), b.job("expired"), b.owner("fast")
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: fast, TTL: shortTTL})
	h.SetTicks(t, b.store, job, clockTick(g, farAhead), nil)
	b.waitForState(t, job, leaseapi.StateExpired)

	repaired := b.repair(t, job, repairRetention)
	if repaired.Token != g.Token+1 || repaired.State != leaseapi.StateRevoked {
		t.Errorf("Repair of an expired grant ahead: got token %d, state %s; want %d, revoked", repaired.Token, repaired.State, g.Token+1)
	}
	_, err := b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: fast, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantConflict(t, "Release by the fast holder after Repair", err, leaseapi.ErrLeaseLost)
	if l := b.get(t, job); l.LastCompletedTick != nil {
		t.Errorf("LastCompletedTick: got %s, want none", fmtTime(l.LastCompletedTick))
	}
}

// testRepairRetentionFloor: with no succeeded run kept at or before now +
// window, the last completed tick goes back only to now - retention, so a
// tick older than the kept history never becomes grantable again; one
// after it is.
func testRepairRetentionFloor(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job, owner := t.Context(), b.job("floor"), b.owner("a")
	const retention = time.Hour
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("fast"), TTL: longTTL})
	h.SetTicks(t, b.store, job, clockTick(g, farAhead), nil)
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("fast"), Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})

	repaired := b.repair(t, job, retention)
	lct := repaired.LastCompletedTick
	if lct == nil || lct.After(repaired.RenewedAt.Add(-retention+time.Minute)) || lct.Before(g.AcquiredAt.Add(-retention)) {
		t.Fatalf("LastCompletedTick after Repair: got %s, want now - retention (about %s)", fmtTime(lct), g.AcquiredAt.Add(-retention))
	}
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: clockTick(g, -2*retention)})
	wantConflict(t, "Acquire of a tick older than the retention", err, leaseapi.ErrTickDone)
	b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: clockTick(g, -retention/2)})

	// A second repair, with the grant held within the window, changes nothing.
	before := b.get(t, job)
	again := b.repair(t, job, retention)
	if again.Token != before.Token || !equalTimePtr(again.LastCompletedTick, before.LastCompletedTick) {
		t.Errorf("second Repair: got token %d, last completed %s; want %d, %s",
			again.Token, fmtTime(again.LastCompletedTick), before.Token, fmtTime(before.LastCompletedTick))
	}
}

// testRepairOwedTickAhead: an owed tick ahead is cleared; one within the
// window is kept.
func testRepairOwedTickAhead(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job := t.Context(), b.job("owed")
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	h.SetTicks(t, b.store, job, nil, clockTick(g, farAhead))
	if l := b.get(t, job); l.OwedTick == nil {
		t.Fatalf("Get after SetTicks: owes nothing, want the tick ahead")
	}
	if l := b.repair(t, job, repairRetention); l.OwedTick != nil || l.Token != g.Token {
		t.Errorf("Repair: got owed %s, token %d; want none, %d", fmtTime(l.OwedTick), l.Token, g.Token)
	}

	owed, err := b.store.Trigger(ctx, &leaseapi.TriggerParams{JobID: job, Grace: triggerGrace})
	if err != nil {
		t.Fatalf("Trigger: %v", err)
	}
	if l := b.repair(t, job, repairRetention); !equalTimePtr(l.OwedTick, owed.OwedTick) {
		t.Errorf("Repair of a job that owes a tick now: got owed %s, want %s kept", fmtTime(l.OwedTick), fmtTime(owed.OwedTick))
	}
}

// testRepairSoundJob: a job with nothing ahead is left as it is, its held
// grant too.
func testRepairSoundJob(t *testing.T, b *bundle, _ *RepairHarness) {
	job, owner := b.job("sound"), b.owner("a")
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	tick := clockTick(g, -time.Minute)
	g2 := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: g2.Token, Outcome: leaseapi.OutcomeSucceeded})
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: tick})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	// A held grant of a tick within the window.
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: clockTick(g, repairWindow/2)})

	l := b.repair(t, job, repairRetention)
	if l.Token != held.Token || l.State != leaseapi.StateHeld || !equalTimePtr(l.LastCompletedTick, tick) {
		t.Errorf("Repair of a sound job: got token %d, state %s, last completed %s; want %d, held, %s",
			l.Token, l.State, fmtTime(l.LastCompletedTick), held.Token, fmtTime(tick))
	}
	if got := runsByOutcome(b.runs(t, job, 10)); got[leaseapi.OutcomeDiscarded] != 0 || got[leaseapi.OutcomeRunning] != 1 {
		t.Errorf("Runs after Repair of a sound job: got %v, want none discarded, one running", got)
	}
}

// testRepairUnknownAndInvalid: an unknown job is ErrNotFound, bad
// parameters an *InvalidError, and neither creates the job.
func testRepairUnknownAndInvalid(t *testing.T, b *bundle, _ *RepairHarness) {
	ctx, job := t.Context(), b.job("unknown")
	_, err := b.store.Repair(ctx, &leaseapi.RepairParams{JobID: job, Window: repairWindow, Retention: repairRetention})
	wantError(t, "Repair of an unknown job", err, leaseapi.ErrNotFound)
	for _, p := range []leaseapi.RepairParams{
		{JobID: job, Retention: repairRetention},
		{JobID: job, Window: repairWindow},
		{JobID: "", Window: repairWindow, Retention: repairRetention},
	} {
		_, err := b.store.Repair(ctx, &p)
		var invalid *leaseapi.InvalidError
		if !errors.As(err, &invalid) {
			t.Errorf("Repair(%+v): got error %v, want an *InvalidError", p, err)
		}
	}
	_, err = b.store.Get(ctx, job)
	wantError(t, "Get after the failed repairs", err, leaseapi.ErrNotFound)
}

// testJobsAhead: JobsAhead counts the jobs with a mark ahead (the last
// completed tick, an open grant's tick, an owed tick), lists the first in
// job id order, and no longer counts a repaired job.
func testJobsAhead(t *testing.T, b *bundle, h *RepairHarness) {
	ctx := t.Context()
	ahead := func(limit int) leaseapi.JobsAhead {
		t.Helper()
		got, err := b.store.JobsAhead(ctx, repairWindow, limit)
		if err != nil {
			t.Fatalf("JobsAhead: %v", err)
		}
		return got
	}
	sound, done, held, owed := b.job("a-sound"), b.job("b-done"), b.job("c-held"), b.job("d-owed")
	var g leaseapi.Lease
	for _, job := range []string{sound, done, held, owed} {
		g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: "o", TTL: longTTL})
		if job != held {
			b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: "o", Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
		}
	}
	if got := ahead(10); got.Count != 0 || len(got.JobIDs) != 0 {
		t.Fatalf("JobsAhead of sound jobs: got %+v, want none", got)
	}
	// A tick within the window is no mark ahead.
	h.SetTicks(t, b.store, sound, nil, clockTick(g, repairWindow/2))
	// done: a grant ahead released succeeded; held: a held grant ahead;
	// owed: an owed tick ahead.
	g = b.acquire(t, leaseapi.AcquireParams{JobID: done, Owner: "o", TTL: longTTL})
	h.SetTicks(t, b.store, done, clockTick(g, farAhead), nil)
	b.release(t, leaseapi.ReleaseParams{JobID: done, Owner: "o", Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	h.SetTicks(t, b.store, held, clockTick(g, farAhead), nil)
	h.SetTicks(t, b.store, owed, nil, clockTick(g, farAhead))

	if got := ahead(10); got.Count != 3 || len(got.JobIDs) != 3 || got.JobIDs[0] != done || got.JobIDs[1] != held || got.JobIDs[2] != owed {
		t.Errorf("JobsAhead(10): got %+v, want 3: %s, %s, %s", got, done, held, owed)
	}
	if got := ahead(1); got.Count != 3 || len(got.JobIDs) != 1 || got.JobIDs[0] != done {
		t.Errorf("JobsAhead(1): got %+v, want count 3 and %s", got, done)
	}
	b.repair(t, held, repairRetention)
	if got := ahead(10); got.Count != 2 || len(got.JobIDs) != 2 || got.JobIDs[0] != done || got.JobIDs[1] != owed {
		t.Errorf("JobsAhead after a repair: got %+v, want 2: %s, %s", got, done, owed)
	}
	for _, limit := range []int{0, leaseapi.MaxJobsAheadLimit + 1} {
		var invalid *leaseapi.InvalidError
		if _, err := b.store.JobsAhead(ctx, repairWindow, limit); !errors.As(err, &invalid) {
			t.Errorf("JobsAhead(limit %d): got error %v, want an *InvalidError", limit, err)
		}
	}
}

// testRepairDiscardedTickMissed: the tick of a discarded grant, when it
// comes and nobody runs it, is decided missed, not ran: the sweep no
// longer takes the discarded grant for its run. (A window of a second, so
// that the tick comes within the test.)
func testRepairDiscardedTickMissed(t *testing.T, b *bundle, h *RepairHarness) {
	ctx, job, fast := t.Context(), b.job("sweep"), b.owner("fast")
	reg := b.register(t, job, everySecond, shortGrace)
	s := mustSchedule(t, everySecond)
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: fast, TTL: longTTL})
	tick := s.Next(g.AcquiredAt.Add(4 * time.Second))
	h.SetTicks(t, b.store, job, &tick, nil)
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: fast, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})

	l, err := b.store.Repair(ctx, &leaseapi.RepairParams{JobID: job, Window: time.Second, Retention: repairRetention})
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if l.Tick != nil || l.LastCompletedTick == nil || !l.LastCompletedTick.Before(reg.AcquiredAt) {
		t.Fatalf("Repair: tick %s, last completed %s; want no tick, and now - retention", fmtTime(l.Tick), fmtTime(l.LastCompletedTick))
	}
	if got := runsByOutcome(b.runs(t, job, 10)); got[leaseapi.OutcomeDiscarded] != 1 {
		t.Fatalf("runs after Repair: %v, want the grant discarded (the test took over 3 s to get here?)", got)
	}
	// Sweep until the tick after it is decided: ticks are decided in order.
	after := s.Next(tick)
	decided := func(at time.Time) *leaseapi.Run {
		for _, r := range b.runs(t, job, 1000) {
			if r.Outcome == leaseapi.OutcomeMissed && r.Tick != nil && r.Tick.Equal(at) {
				return &r
			}
		}
		return nil
	}
	b.sweepUntil(t, job, "the tick after the discarded one decided missed", func(leaseapi.Lease) bool { return decided(after) != nil })
	if decided(tick) == nil {
		t.Errorf("tick %s of the discarded grant: not recorded missed (taken for run?)", fmtTime(&tick))
	}
}
