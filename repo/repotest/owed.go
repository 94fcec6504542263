package repotest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The conformance tests of owed ticks (leaseapi.Owing): triggers, their
// cancellation, the read of what jobs owe, and the claim of an owed tick
// with an ordinary acquire.

// triggerGrace is the trigger grace the tests trigger with.
const triggerGrace = 5 * time.Minute

// trigger triggers job and fails the test on an error.
func (b *bundle) trigger(t *testing.T, p leaseapi.TriggerParams) leaseapi.Lease {
	t.Helper()
	if p.Grace == 0 {
		p.Grace = triggerGrace
	}
	l, err := b.store.Trigger(t.Context(), &p)
	if err != nil {
		t.Fatalf("Trigger(%+v): %v", p, err)
	}
	return l
}

// owed reads what jobs owe and fails the test on an error.
func (b *bundle) owed(t *testing.T, jobs ...string) []leaseapi.Owed {
	t.Helper()
	o, err := b.store.Owed(t.Context(), &leaseapi.OwedParams{JobIDs: jobs})
	if err != nil {
		t.Fatalf("Owed(%v): %v", jobs, err)
	}
	return o
}

// wantManual checks that l owes a manual tick and returns it.
func wantManual(t *testing.T, op string, l leaseapi.Lease) time.Time {
	t.Helper()
	if l.OwedTick == nil || l.OwedReason != leaseapi.TriggerManual {
		t.Fatalf("%s: got owed tick %s reason %q, want a manual tick", op, fmtTime(l.OwedTick), l.OwedReason)
	}
	if !l.OwedTick.Equal(l.OwedTick.Truncate(time.Millisecond)) {
		t.Errorf("%s: owed tick %s is not at millisecond precision", op, fmtTime(l.OwedTick))
	}
	return *l.OwedTick
}

// testTrigger: a trigger owes one manual tick, later than the clock before
// it, the last completed tick and the current tick; a second trigger, and
// a trigger with the last manual tick's key, answer that tick; a cancelled
// tick is not owed; unknown jobs are not found.
func testTrigger(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("trigger"), b.owner("a")
	_, err := b.store.Trigger(ctx, &leaseapi.TriggerParams{JobID: job, Grace: triggerGrace})
	wantError(t, "Trigger of an unknown job", err, leaseapi.ErrNotFound)
	_, err = b.store.CancelOwed(ctx, job)
	wantError(t, "CancelOwed of an unknown job", err, leaseapi.ErrNotFound)

	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	done := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	if done.OwedTick != nil || done.OwedReason != "" || done.CatchUp != leaseapi.CatchUpNone || done.CatchUpWindow != leaseapi.DefaultCatchUpWindow {
		t.Errorf("a new job: got owed %s %q, catch-up %q window %s, want nothing owed, catch-up none, window %s",
			fmtTime(done.OwedTick), done.OwedReason, done.CatchUp, done.CatchUpWindow, leaseapi.DefaultCatchUpWindow)
	}

	before := b.dbClock(t).Truncate(time.Millisecond)
	triggered := b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops", Reason: "rerun the report", Key: "k1"})
	m := wantManual(t, "Trigger", triggered)
	after := b.dbClock(t)
	if m.Before(before) || m.After(after) {
		t.Errorf("Trigger: manual tick %s, want the store's clock, within [%s, %s]", fmtTime(&m), fmtTime(&before), fmtTime(&after))
	}
	want := done
	want.OwedTick, want.OwedReason, want.State = &m, leaseapi.TriggerManual, triggered.State
	checkLease(t, "Trigger changes nothing but what the job owes", triggered, want)
	if got := b.get(t, job); !equalTimePtr(got.OwedTick, &m) || got.OwedReason != leaseapi.TriggerManual {
		t.Errorf("Get after Trigger: got owed %s %q, want %s manual", fmtTime(got.OwedTick), got.OwedReason, fmtTime(&m))
	}
	owed := b.owed(t, job, b.job("trigger-unknown"), job)
	wantOwed := leaseapi.Owed{JobID: job, Tick: m, Reason: leaseapi.TriggerManual, TriggeredBy: "ops", TriggerReason: "rerun the report"}
	if len(owed) != 1 || !owed[0].Tick.Equal(m) || owed[0].JobID != job || owed[0].Reason != wantOwed.Reason ||
		owed[0].TriggeredBy != wantOwed.TriggeredBy || owed[0].TriggerReason != wantOwed.TriggerReason {
		t.Errorf("Owed(job, unknown, job): got %+v, want exactly [%+v]", owed, wantOwed)
	}

	second := b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "someone", Key: "k2"})
	if got := wantManual(t, "a second Trigger", second); !got.Equal(m) {
		t.Errorf("a second Trigger while a manual tick is owed: got tick %s, want the owed %s", fmtTime(&got), fmtTime(&m))
	}
	if o := b.owed(t, job); len(o) != 1 || o[0].TriggeredBy != "ops" {
		t.Errorf("Owed after a second Trigger: got %+v, want the first trigger's tick, by ops", o)
	}

	cancelled, err := b.store.CancelOwed(ctx, job)
	if err != nil {
		t.Fatalf("CancelOwed: %v", err)
	}
	if cancelled.OwedTick != nil || cancelled.OwedReason != "" {
		t.Errorf("CancelOwed: got owed %s %q, want nothing", fmtTime(cancelled.OwedTick), cancelled.OwedReason)
	}
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed after CancelOwed: got %+v, want nothing", o)
	}
	again, err := b.store.CancelOwed(ctx, job)
	if err != nil {
		t.Fatalf("CancelOwed again: %v", err)
	}
	checkLease(t, "CancelOwed of a job that owes nothing changes nothing", again, cancelled)

	// k2 made no tick (it was answered by k1's), so it is no key of a
	// manual tick; k1 is the key of the last one, cancelled: answered.
	if l := b.trigger(t, leaseapi.TriggerParams{JobID: job, Key: "k1"}); l.OwedTick != nil {
		t.Errorf("a Trigger with the last manual tick's key: got owed %s, want that tick answered (cancelled: nothing owed)", fmtTime(l.OwedTick))
	}
	fresh := b.trigger(t, leaseapi.TriggerParams{JobID: job, Key: "k3"})
	if got := wantManual(t, "a Trigger with a new key", fresh); got.Before(m) {
		t.Errorf("a Trigger with a new key: got tick %s, want one at or after %s", fmtTime(&got), fmtTime(&m))
	}
}

// testTriggerAfterTicks: a manual tick is later than the job's current and
// last completed ticks, even when they lie ahead of the clock, so that no
// earlier grant or completed tick shadows it.
func testTriggerAfterTicks(t *testing.T, b *bundle) {
	job, a := b.job("trigger-ahead"), b.owner("a")
	ahead := b.dbClock(t).Add(time.Hour).Truncate(time.Millisecond)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &ahead})
	m := wantManual(t, "Trigger of a job holding a tick ahead of the clock", b.trigger(t, leaseapi.TriggerParams{JobID: job}))
	if want := ahead.Add(time.Millisecond); !m.Equal(want) {
		t.Errorf("Trigger while tick %s is held: got %s, want %s", fmtTime(&ahead), fmtTime(&m), fmtTime(&want))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	if _, err := b.store.CancelOwed(t.Context(), job); err != nil {
		t.Fatalf("CancelOwed: %v", err)
	}
	further := ahead.Add(time.Hour)
	l = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &further})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeFailed})
	m = wantManual(t, "Trigger after a tick ahead of the clock ran", b.trigger(t, leaseapi.TriggerParams{JobID: job}))
	if want := further.Add(time.Millisecond); !m.Equal(want) {
		t.Errorf("Trigger after tick %s: got %s, want %s", fmtTime(&further), fmtTime(&m), fmtTime(&want))
	}
}

// testTriggerPaused: a paused job cannot be triggered, and pausing cancels
// what a job owes.
func testTriggerPaused(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("trigger-paused"), b.owner("a")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, Key: "before-pause"}))

	paused, err := ctxPause(t, b, job)
	if err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if paused.OwedTick != nil || paused.OwedReason != "" {
		t.Errorf("Pause: got owed %s %q, want what the job owed cancelled", fmtTime(paused.OwedTick), paused.OwedReason)
	}
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed of a paused job: got %+v, want nothing", o)
	}
	_, err = b.store.Trigger(ctx, &leaseapi.TriggerParams{JobID: job, Grace: triggerGrace})
	if l := wantConflict(t, "Trigger of a paused job", err, leaseapi.ErrJobPaused); !l.Paused() || l.OwedTick != nil {
		t.Errorf("Trigger of a paused job: the conflict's lease is paused %v, owes %s; want paused, owing nothing", l.Paused(), fmtTime(l.OwedTick))
	}
	if _, err := b.store.Resume(ctx, job); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	wantManual(t, "Trigger after Resume", b.trigger(t, leaseapi.TriggerParams{JobID: job}))
}

// ctxPause pauses job.
func ctxPause(t *testing.T, b *bundle, job string) (leaseapi.Lease, error) {
	return b.store.Pause(t.Context(), &leaseapi.PauseParams{JobID: job, By: "ops"})
}

// testOwedMany: one read answers many jobs, in job id order, each at most
// once, without the jobs that owe nothing or are unknown.
func testOwedMany(t *testing.T, b *bundle) {
	var ids, want []string
	for i := range 5 {
		job := b.job(fmt.Sprintf("owed-many-%d", i))
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, Tick: tickAt(0)})
		b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
		if i%2 == 0 {
			b.trigger(t, leaseapi.TriggerParams{JobID: job})
			want = append(want, job)
		}
		ids = append([]string{job, b.job(fmt.Sprintf("owed-many-unknown-%d", i))}, ids...)
	}
	got := b.owed(t, append(ids, ids...)...)
	if len(got) != len(want) {
		t.Fatalf("Owed of %d ids: got %+v, want the %d jobs %v", len(ids), got, len(want), want)
	}
	for i, o := range got {
		if o.JobID != want[i] || o.Reason != leaseapi.TriggerManual {
			t.Errorf("Owed[%d]: got %+v, want job %s, manual", i, o, want[i])
		}
	}
}

// testClaimManual: a manual tick is claimed with an ordinary acquire of
// that tick, taken as it is (not snapped to the schedule's earlier tick,
// which ran), by exactly one of many contenders; its run says manual and
// who triggered it; the grant settles the debt; the claimant's retry
// renews its grant; once released succeeded the tick is never granted
// again, and the schedule's next tick is a tick of the schedule.
func testClaimManual(t *testing.T, b *bundle) {
	job := b.job("claim-manual")
	const hourly = "@every 1h"
	hour := b.dbClock(t).Truncate(time.Hour)
	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("sched"), TTL: longTTL, Tick: &hour,
		Schedule: hourly, Grace: time.Minute})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("sched"), Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops", Reason: "rerun the report"}))

	winner := b.claimOnce(t, job, m, "manual")
	if l := winner.l; !equalTimePtr(l.Tick, &m) || l.Token != first.Token+1 || l.OwedTick != nil || l.OwedReason != "" {
		t.Errorf("the claim: got tick %s token %d owed %s %q; want tick %s token %d, owing nothing",
			fmtTime(l.Tick), l.Token, fmtTime(l.OwedTick), l.OwedReason, fmtTime(&m), first.Token+1)
	}
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed after the claim: got %+v, want nothing", o)
	}
	if runs := b.runs(t, job, 2); len(runs) != 2 || runs[0].Trigger != leaseapi.TriggerManual || runs[0].TriggeredBy != "ops" ||
		!equalTimePtr(runs[0].Tick, &m) || runs[1].Trigger != leaseapi.TriggerSchedule || runs[1].TriggeredBy != "" {
		t.Errorf("Runs after the claim: got %+v, want the manual run (by ops, tick %s) after the scheduled one", runs, fmtTime(&m))
	}
	b.retryAndSucceed(t, job, winner, m, "the manual tick")
	next := hour.Add(time.Hour)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("sched"), TTL: longTTL, Tick: &next})
	if runs := b.runs(t, job, 1); !equalTimePtr(l.Tick, &next) || len(runs) != 1 || runs[0].Trigger != leaseapi.TriggerSchedule {
		t.Errorf("the next tick of the schedule: got tick %s, runs %+v; want tick %s with trigger schedule", fmtTime(l.Tick), runs, fmtTime(&next))
	}
}

// claim is one contender's acquire of an owed tick.
type claim struct {
	owner string
	l     leaseapi.Lease
	err   error
}

// claimOnce has eight contenders acquire tick of job at once, fails the
// test unless exactly one is granted it and the rest hear lease_held or
// tick_done, and returns the winner's claim.
func (b *bundle) claimOnce(t *testing.T, job string, tick time.Time, what string) claim {
	t.Helper()
	const contenders = 8
	results := make([]claim, contenders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range contenders {
		wg.Go(func() {
			owner := b.owner(fmt.Sprint("claimant-", i))
			<-start
			l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: &tick})
			results[i] = claim{owner, l, err}
		})
	}
	close(start)
	wg.Wait()
	var winner *claim
	for i, r := range results {
		switch {
		case r.err == nil:
			if winner != nil {
				t.Fatalf("%s tick %s granted twice: to %s (token %d) and %s (token %d)",
					what, fmtTime(&tick), winner.owner, winner.l.Token, r.owner, r.l.Token)
			}
			winner = &results[i]
		case errors.Is(r.err, leaseapi.ErrLeaseHeld) || errors.Is(r.err, leaseapi.ErrTickDone):
		default:
			t.Errorf("contender %s: got error %v, want a grant, lease_held or tick_done", r.owner, r.err)
		}
	}
	if winner == nil {
		t.Fatalf("%s tick %s granted to none of %d contenders (first error: %v)", what, fmtTime(&tick), contenders, results[0].err)
	}
	return *winner
}

// testClaimManualNotOwed: a tick that is not the manual tick the job owes
// is snapped to the schedule as ever, and a trigger owes nothing to a
// grant of another tick: the manual tick stays owed.
func testClaimManualNotOwed(t *testing.T, b *bundle) {
	ctx, job := t.Context(), b.job("claim-other")
	const hourly = "@every 1h"
	hour := b.dbClock(t).Truncate(time.Hour)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, Tick: &hour, Schedule: hourly, Grace: time.Minute})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job}))
	other := m.Add(time.Millisecond)
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: &other})
	if !equalTimePtr(wantConflict(t, "an acquire of a tick next to the manual one", err, leaseapi.ErrTickDone).OwedTick, &m) {
		t.Errorf("after an acquire of another tick: the manual tick %s is no longer owed", fmtTime(&m))
	}
	next := hour.Add(time.Hour)
	granted := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: &next})
	if !equalTimePtr(granted.OwedTick, &m) || granted.OwedReason != leaseapi.TriggerManual {
		t.Errorf("a grant of the schedule's next tick: got owed %s %q, want the manual tick %s still owed",
			fmtTime(granted.OwedTick), granted.OwedReason, fmtTime(&m))
	}
}

// testClaimManualAfterLaterTick: a manual tick stays owed across a grant of
// a later tick of the schedule (testClaimManualNotOwed), and stays
// claimable once that tick has completed: the job owes the run, which has
// not happened, so an acquire of the manual tick is granted (trigger
// manual), not refused tick_done because a later tick completed. (The
// chaos suite's run now during a pause of every replica found it: the
// replicas ran the schedule's tick first, and then every claim of the
// manual tick was refused tick_done until it expired.)
func testClaimManualAfterLaterTick(t *testing.T, b *bundle) {
	job := b.job("claim-after-later")
	const hourly = "@every 1h"
	hour := b.dbClock(t).Truncate(time.Hour)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, Tick: &hour, Schedule: hourly, Grace: time.Minute})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops"}))
	next := hour.Add(time.Hour)
	later := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: &next})
	done := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("b"), Token: later.Token, Outcome: leaseapi.OutcomeSucceeded})
	if !equalTimePtr(done.OwedTick, &m) || done.OwedReason != leaseapi.TriggerManual {
		t.Fatalf("after the schedule's later tick completed: got owed %s %q, want the manual tick %s still owed",
			fmtTime(done.OwedTick), done.OwedReason, fmtTime(&m))
	}
	winner := b.claimOnce(t, job, m, "manual")
	if runs := b.runs(t, job, 1); !equalTimePtr(winner.l.Tick, &m) || len(runs) != 1 || runs[0].Trigger != leaseapi.TriggerManual {
		t.Errorf("the claim: got tick %s, runs %+v; want the manual tick %s, run with trigger manual", fmtTime(winner.l.Tick), runs, fmtTime(&m))
	}
	// The claim settled the debt, and its tick is still before the last
	// completed one: the claimant's retry (its answer was lost) renews its
	// grant all the same, and nobody else gets the tick.
	b.retryAndSucceed(t, job, winner, m, "the overtaken manual tick")
}

// retryAndSucceed checks that the claimant of tick (what names it) renews
// its grant on a retry, releases it succeeded, and that then neither it
// nor a late replica is granted the tick again.
func (b *bundle) retryAndSucceed(t *testing.T, job string, winner claim, tick time.Time, what string) {
	t.Helper()
	retry := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: winner.owner, TTL: longTTL, Tick: &tick})
	if retry.Token != winner.l.Token || !equalTimePtr(retry.Tick, &tick) {
		t.Errorf("the claimant's retry: got token %d tick %s, want its grant (token %d, tick %s)",
			retry.Token, fmtTime(retry.Tick), winner.l.Token, fmtTime(&tick))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: winner.owner, Token: winner.l.Token, Outcome: leaseapi.OutcomeSucceeded})
	for _, owner := range []string{winner.owner, b.owner("late")} {
		_, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: &tick})
		wantConflict(t, "an acquire of "+what+" after it succeeded", err, leaseapi.ErrTickDone)
	}
}

// testCatchUpRegistration: a granted acquire with a schedule registers the
// catch-up policy and window it sends; one that sends none keeps them; a
// refused one changes nothing.
func testCatchUpRegistration(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("catch-up-policy"), b.owner("a")
	const hourly = "@every 1h"
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0), Schedule: hourly, Grace: time.Minute,
		CatchUp: leaseapi.CatchUpLatest, CatchUpWindow: 2 * time.Hour})
	if l.CatchUp != leaseapi.CatchUpLatest || l.CatchUpWindow != 2*time.Hour {
		t.Errorf("a grant sending catch-up latest, 2 h: got %q %s", l.CatchUp, l.CatchUpWindow)
	}
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: tickAt(0),
		Schedule: hourly, Grace: time.Minute, CatchUp: leaseapi.CatchUpNone})
	wantConflict(t, "a refused acquire sending catch-up none", err, leaseapi.ErrLeaseHeld)
	if got := b.get(t, job); got.CatchUp != leaseapi.CatchUpLatest || got.CatchUpWindow != 2*time.Hour {
		t.Errorf("after a refused acquire: got %q %s, want latest 2h0m0s", got.CatchUp, got.CatchUpWindow)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	l = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(60), Schedule: hourly, Grace: time.Minute})
	if l.CatchUp != leaseapi.CatchUpLatest || l.CatchUpWindow != 2*time.Hour {
		t.Errorf("a grant sending no catch-up: got %q %s, want the stored latest 2h0m0s", l.CatchUp, l.CatchUpWindow)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	l = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(120), Schedule: hourly, Grace: time.Minute,
		CatchUp: leaseapi.CatchUpNone})
	if l.CatchUp != leaseapi.CatchUpNone || l.CatchUpWindow != leaseapi.DefaultCatchUpWindow {
		t.Errorf("a grant sending catch-up none without a window: got %q %s, want none and the default window", l.CatchUp, l.CatchUpWindow)
	}
}

// registerCatchUp gives job a per-second schedule with catch-up latest
// (the shortest window) through a grant that is released at once.
func (b *bundle) registerCatchUp(t *testing.T, job string) {
	t.Helper()
	owner := b.owner("registrar")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Schedule: everySecond, Grace: shortGrace,
		CatchUp: leaseapi.CatchUpLatest, CatchUpWindow: leaseapi.MinCatchUpWindow})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
}

// newestMissed is the newest tick of job's runs that were missed.
func (b *bundle) newestMissed(t *testing.T, job string) *time.Time {
	t.Helper()
	var newest *time.Time
	for _, r := range b.runs(t, job, 1000) {
		if r.Outcome == leaseapi.OutcomeMissed && r.Tick != nil && (newest == nil || r.Tick.After(*newest)) {
			newest = r.Tick
		}
	}
	return newest
}

// wantCatchUp waits (sweeping) until job owes a catch-up tick after at
// least two missed ticks, checks that it is the newest missed tick, and
// that POST /owed's read says the same, and returns it.
func (b *bundle) wantCatchUp(t *testing.T, job string) time.Time {
	t.Helper()
	l := b.sweepUntil(t, job, "a catch-up tick owed after two missed ticks", func(l leaseapi.Lease) bool {
		return l.MissedTicks >= 2 && l.OwedTick != nil
	})
	if l.OwedReason != leaseapi.TriggerCatchUp || !equalTimePtr(l.OwedTick, b.newestMissed(t, job)) {
		t.Fatalf("after missed ticks: got owed %s %q, want the newest missed tick %s as catch-up",
			fmtTime(l.OwedTick), l.OwedReason, fmtTime(b.newestMissed(t, job)))
	}
	if o := b.owed(t, job); len(o) != 1 || !o[0].Tick.Equal(*l.OwedTick) || o[0].Reason != leaseapi.TriggerCatchUp ||
		o[0].TriggeredBy != "" {
		t.Errorf("Owed: got %+v, want the catch-up tick %s", o, fmtTime(l.OwedTick))
	}
	return *l.OwedTick
}

// testCatchUpOwed: with catch-up latest a job whose newest decided tick
// was missed owes that tick (the newest, once, not one per missed tick);
// exactly one of many contenders claims it, its run says catch-up, the
// claim settles it, and once released succeeded it is never granted
// again. A job without the policy owes nothing for its missed ticks.
func testCatchUpOwed(t *testing.T, b *bundle) {
	ctx, job, plain := t.Context(), b.job("catch-up"), b.job("no-catch-up")
	b.registerCatchUp(t, job)
	b.register(t, plain, everySecond, shortGrace)
	owed := b.wantCatchUp(t, job)
	if l := b.sweepUntil(t, plain, "a missed tick of the job without catch-up", func(l leaseapi.Lease) bool { return l.MissedTicks >= 1 }); l.OwedTick != nil {
		t.Errorf("a job without catch-up: got owed %s %q after a missed tick, want nothing", fmtTime(l.OwedTick), l.OwedReason)
	}
	if o := b.owed(t, plain); len(o) != 0 {
		t.Errorf("Owed of the job without catch-up: got %+v, want nothing", o)
	}

	winner := b.claimOnce(t, job, owed, "catch-up")
	if l := winner.l; !equalTimePtr(l.Tick, &owed) || l.OwedTick != nil {
		t.Errorf("the claim: got tick %s owed %s, want tick %s, owing nothing", fmtTime(l.Tick), fmtTime(l.OwedTick), fmtTime(&owed))
	}
	if runs := b.runs(t, job, 1); len(runs) != 1 || runs[0].Trigger != leaseapi.TriggerCatchUp || runs[0].TriggeredBy != "" {
		t.Errorf("the claimed run: got %+v, want trigger catch-up", runs)
	}
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed after the claim: got %+v, want nothing", o)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: winner.owner, Token: winner.l.Token, Outcome: leaseapi.OutcomeSucceeded})
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("late"), TTL: longTTL, Tick: &owed})
	wantConflict(t, "an acquire of the catch-up tick after it succeeded", err, leaseapi.ErrTickDone)
}

// testCatchUpSettledByLaterTick: a grant of a tick later than the
// catch-up tick settles it (the job ran since), and its run is a tick of
// the schedule; cancelling forgets a catch-up debt too.
func testCatchUpSettledByLaterTick(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("catch-up-later"), b.owner("a")
	b.registerCatchUp(t, job)
	owed := b.wantCatchUp(t, job)
	later := mustSchedule(t, everySecond).Next(owed)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &later})
	if l.OwedTick != nil {
		t.Errorf("a grant of the later tick %s: got owed %s %q, want the catch-up tick %s settled",
			fmtTime(&later), fmtTime(l.OwedTick), l.OwedReason, fmtTime(&owed))
	}
	if runs := b.runs(t, job, 1); len(runs) != 1 || runs[0].Trigger != leaseapi.TriggerSchedule {
		t.Errorf("the later tick's run: got %+v, want trigger schedule", runs)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	owed = b.wantCatchUp(t, job)
	c, err := b.store.CancelOwed(ctx, job)
	if err != nil {
		t.Fatalf("CancelOwed: %v", err)
	}
	if c.OwedTick != nil {
		t.Errorf("CancelOwed of the catch-up tick %s: got owed %s, want nothing", fmtTime(&owed), fmtTime(c.OwedTick))
	}
}

// testManualUnclaimed: a manual tick nobody claims within its grace is no
// longer owed (the lease and Owed say so at once, and an acquire of it
// claims nothing); a trigger then records it as a missed run with trigger
// manual before it owes a new tick, and the sweep records one likewise;
// neither counts as a missed tick of the schedule.
func testManualUnclaimed(t *testing.T, b *bundle) {
	const grace = 200 * time.Millisecond
	expire := func(job string) time.Time {
		t.Helper()
		m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops", Grace: grace}))
		for range pollAttempts {
			if b.get(t, job).OwedTick == nil {
				return m
			}
			time.Sleep(pollInterval)
		}
		t.Fatalf("manual tick %s still owed after its grace %s", fmtTime(&m), grace)
		return m
	}
	wantUnclaimedRun := func(job string, m time.Time) {
		t.Helper()
		for _, r := range b.runs(t, job, 10) {
			if r.Outcome == leaseapi.OutcomeMissed && equalTimePtr(r.Tick, &m) {
				if end := m.Add(grace); r.Trigger != leaseapi.TriggerManual || r.TriggeredBy != "ops" || r.Token != 0 || !equalTimePtr(r.EndedAt, &end) {
					t.Errorf("the unclaimed manual tick's run: got %+v, want missed, trigger manual by ops, no holder, ended %s", r, fmtTime(&end))
				}
				return
			}
		}
		t.Errorf("no missed run of the unclaimed manual tick %s: %+v", fmtTime(&m), b.runs(t, job, 10))
	}

	job := b.job("unclaimed")
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Outcome: leaseapi.OutcomeSucceeded,
		Token: b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL}).Token})
	m := expire(job)
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed after the manual tick's grace: got %+v, want nothing", o)
	}
	late := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("late"), TTL: longTTL, Tick: &m})
	if runs := b.runs(t, job, 1); len(runs) != 1 || runs[0].Trigger != leaseapi.TriggerSchedule {
		t.Errorf("an acquire of the expired manual tick: got runs %+v, want its run with trigger schedule (it claims nothing)", runs)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("late"), Token: late.Token, Outcome: leaseapi.OutcomeSucceeded})
	m = expire(job)
	m2 := wantManual(t, "a trigger after the manual tick expired", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops"}))
	if !m2.After(m) {
		t.Errorf("the new manual tick %s is not after the expired one %s", fmtTime(&m2), fmtTime(&m))
	}
	wantUnclaimedRun(job, m)

	swept := b.job("unclaimed-swept")
	b.register(t, swept, "@every 24h", shortGrace) // the trigger's grace, not the job's, bounds the tick
	m = expire(swept)
	// Other subtests sweep the same store at once: any of the passes may
	// be the one that records it.
	b.sweepUntil(t, swept, "the unclaimed manual tick recorded", func(leaseapi.Lease) bool {
		for _, r := range b.runs(t, swept, 10) {
			if r.Outcome == leaseapi.OutcomeMissed {
				return true
			}
		}
		return false
	})
	wantUnclaimedRun(swept, m)
	if l := b.get(t, swept); l.MissedTicks != 0 || l.OwedTick != nil {
		t.Errorf("after the sweep: got %d missed ticks, owed %s; want none", l.MissedTicks, fmtTime(l.OwedTick))
	}
}

// testOwedGrantSkipsTick: a tick of the schedule whose grace a grant of an
// owed tick started in is skipped (the job ran), not missed. The job is
// registered with a grace of an hour, so no pass decides the tick while the
// manual tick is triggered and claimed, however slowly; the same spec is
// then registered again with a grace that ends just after that grant
// started, which makes the tick due with the grant inside its grace.
func testOwedGrantSkipsTick(t *testing.T, b *bundle) {
	job := b.job("owed-skips")
	s := mustSchedule(t, everySecond)
	b.register(t, job, everySecond, time.Hour)
	tick := s.Next(b.dbClock(t))
	b.waitClockPast(t, tick.Add(time.Millisecond)) // the manual tick is not the tick itself
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job}))
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, Tick: &m})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("a"), Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	grace := l.AcquiredAt.Sub(tick).Truncate(time.Millisecond) + time.Millisecond
	// Every pass after the registration then decides the tick at once.
	b.waitClockPast(t, tick.Add(grace))
	b.register(t, job, everySecond, grace)
	missed := func() bool {
		for _, r := range b.runs(t, job, 1000) {
			if r.Outcome == leaseapi.OutcomeMissed && equalTimePtr(r.Tick, &tick) {
				return true
			}
		}
		return false
	}
	got := b.sweepUntil(t, job, "the tick decided", func(l leaseapi.Lease) bool { return l.SkippedTicks+l.MissedTicks >= 1 })
	if missed() || got.SkippedTicks < 1 {
		t.Errorf("tick %s: got missed %v, %d skipped ticks; want it skipped: the manual grant at %s started within its grace %s",
			fmtTime(&tick), missed(), got.SkippedTicks, fmtTime(&l.AcquiredAt), grace)
	}
}
