package repotest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// Ticks ahead of the clock: a replica whose clock runs fast asks for a tick
// of the future. Granted and released succeeded, it would make every
// earlier tick tick_done for good; so a tick later than the store's clock
// plus its MaxTickAhead is refused (tick_ahead), writing nothing, and a
// tick in the past stays allowed (a late replica).

// wantAhead checks that err is a *leaseapi.TickAheadError for tick whose
// clock lies at or after notBefore and more than maxAhead before the tick,
// and returns it.
func wantAhead(t *testing.T, op string, err error, tick, notBefore time.Time, maxAhead time.Duration) *leaseapi.TickAheadError {
	t.Helper()
	ahead, ok := errors.AsType[*leaseapi.TickAheadError](err)
	if !ok || !errors.Is(err, leaseapi.ErrTickAhead) {
		t.Fatalf("%s: got error %v, want a *leaseapi.TickAheadError", op, err)
	}
	if !ahead.Tick.Equal(tick) || ahead.Now.Before(notBefore) || !ahead.Tick.After(ahead.Now.Add(maxAhead)) || ahead.MaxAhead != maxAhead {
		t.Errorf("%s: got tick %s now %s maxAhead %s; want tick %s, now at or after %s and more than %s before the tick",
			op, fmtTime(&ahead.Tick), fmtTime(&ahead.Now), ahead.MaxAhead, fmtTime(&tick), fmtTime(&notBefore), maxAhead)
	}
	return ahead
}

// testTickAheadRefused: a tick two days ahead of the clock is refused with
// tick_ahead and nothing is written: no row for a new job; for a known job
// (released, or held by the same owner, whose renewal it would be
// otherwise) the lease and its runs stay as they were.
func testTickAheadRefused(t *testing.T, b *bundle) {
	ctx, a, other := t.Context(), b.owner("a"), b.owner("b")
	now := b.dbClock(t)
	future := now.Add(48 * time.Hour).Truncate(time.Millisecond)

	fresh := b.job("ahead-new")
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: fresh, Owner: a, TTL: longTTL, Tick: &future})
	if ahead := wantAhead(t, "Acquire of a new job's tick 2 days ahead", err, future, now, leaseapi.DefaultMaxTickAhead); ahead.Lease != nil {
		t.Errorf("tick_ahead of a new job: got lease %+v, want none", *ahead.Lease)
	}
	if _, err := b.store.Get(ctx, fresh); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Errorf("Get after a refused tick ahead: got error %v, want not_found (nothing written)", err)
	}

	job := b.job("ahead-known")
	past := now.Add(-time.Hour).Truncate(time.Millisecond)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &past})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	before, runsBefore := b.get(t, job), b.runs(t, job, 10)
	for _, owner := range []string{a, other} {
		_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: &future})
		ahead := wantAhead(t, "Acquire of a known job's tick 2 days ahead", err, future, now, leaseapi.DefaultMaxTickAhead)
		if ahead.Lease == nil || ahead.Lease.Token != before.Token || !equalTimePtr(ahead.Lease.LastCompletedTick, &past) {
			t.Errorf("tick_ahead's lease: got %+v, want the job's lease (token %d, last completed tick %s)", ahead.Lease, before.Token, fmtTime(&past))
		}
	}
	if got := b.get(t, job); got.Token != before.Token || !got.RenewedAt.Equal(before.RenewedAt) ||
		!equalTimePtr(got.Tick, before.Tick) || !equalTimePtr(got.LastCompletedTick, before.LastCompletedTick) || got.State != before.State {
		t.Errorf("after refused ticks ahead: got %+v, want the lease unchanged: %+v", got, before)
	}
	if got := b.runs(t, job, 10); !reflect.DeepEqual(got, runsBefore) {
		t.Errorf("runs after refused ticks ahead: got %+v, want %+v", got, runsBefore)
	}

	// The holder's acquire of a tick ahead: tick_ahead (before lease_held).
	now2 := b.dbClock(t)
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &now2})
	heldRuns := b.runs(t, job, 10)
	_, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &future})
	wantAhead(t, "the holder's Acquire of a tick 2 days ahead", err, future, now2, leaseapi.DefaultMaxTickAhead)
	if got := b.get(t, job); got.Token != held.Token || !equalTimePtr(got.Tick, &now2) || !got.RenewedAt.Equal(held.RenewedAt) {
		t.Errorf("after the holder's refused tick ahead: got token %d tick %s renewedAt %s; want the grant unchanged (token %d tick %s renewedAt %s)",
			got.Token, fmtTime(got.Tick), got.RenewedAt, held.Token, fmtTime(&now2), held.RenewedAt)
	}
	if got := b.runs(t, job, 10); !reflect.DeepEqual(got, heldRuns) || len(got) != 2 {
		t.Errorf("runs after refused ticks ahead: got %+v, want %+v (one run per grant, none for a refusal)", got, heldRuns)
	}
}

// testTickAheadWindow: a tick at the edge of the window (the store's clock
// plus MaxTickAhead, read before the acquire) is granted, and so are ticks
// of the past, however old: a late replica.
func testTickAheadWindow(t *testing.T, b *bundle) {
	a := b.owner("a")
	edge := b.dbClock(t).Truncate(time.Millisecond).Add(leaseapi.DefaultMaxTickAhead)
	if l := b.acquire(t, leaseapi.AcquireParams{JobID: b.job("edge"), Owner: a, TTL: longTTL, Tick: &edge}); !equalTimePtr(l.Tick, &edge) {
		t.Errorf("a tick at the window's edge: got tick %s, want %s", fmtTime(l.Tick), fmtTime(&edge))
	}
	for _, back := range []time.Duration{48 * time.Hour, 400 * 24 * time.Hour} {
		past := b.dbClock(t).Add(-back).Truncate(time.Millisecond)
		if l := b.acquire(t, leaseapi.AcquireParams{JobID: b.job("late"), Owner: a, TTL: longTTL, Tick: &past}); !equalTimePtr(l.Tick, &past) {
			t.Errorf("a tick %s in the past: got tick %s, want %s", back, fmtTime(l.Tick), fmtTime(&past))
		}
		b.release(t, leaseapi.ReleaseParams{JobID: b.job("late"), Owner: a, Token: b.get(t, b.job("late")).Token, Outcome: leaseapi.OutcomeFailed})
	}
	// A store with a wider window grants further ahead.
	b.reopenWith(t, StoreOptions{MaxTickAhead: 24 * time.Hour})
	further := b.dbClock(t).Add(23 * time.Hour).Truncate(time.Millisecond)
	b.acquire(t, leaseapi.AcquireParams{JobID: b.job("wide"), Owner: a, TTL: longTTL, Tick: &further})
}

// testTickAheadNoPoison is the finding that made the rule: a replica whose
// clock is two days fast asks for "its" tick, then the others for the
// real one. The fast one is refused; the real tick is granted, and the
// next one after it, never tick_done.
func testTickAheadNoPoison(t *testing.T, b *bundle) {
	ctx, job := t.Context(), b.job("poison")
	const every = "@every 1m"
	now := b.dbClock(t)
	fast := now.Add(48 * time.Hour)
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("fast"), TTL: longTTL, Tick: &fast,
		Schedule: every, Grace: time.Minute})
	wantAhead(t, "the fast replica's Acquire", err, fast.Truncate(time.Minute), now, leaseapi.DefaultMaxTickAhead)

	tick := now.Truncate(time.Minute)
	for i, owner := range []string{b.owner("a"), b.owner("b")} {
		tick := tick.Add(time.Duration(i-1) * time.Minute) // the previous tick, then the current one
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: &tick, Schedule: every, Grace: time.Minute})
		done := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
		if !equalTimePtr(done.LastCompletedTick, &tick) {
			t.Errorf("after tick %s succeeded: last completed tick %s, want %s", fmtTime(&tick), fmtTime(done.LastCompletedTick), fmtTime(&tick))
		}
	}
}

// testTickAheadNearest: a NearestTick acquire's own pick, at most a minute
// ahead of the store's clock, is never refused, even by the narrowest
// window (a minute).
func testTickAheadNearest(t *testing.T, b *bundle) {
	b.reopenWith(t, StoreOptions{MaxTickAhead: time.Minute})
	for i, spec := range []string{"@every 2m", "@every 1h", "* * * * * *"} {
		job := b.job("nearest-" + string(rune('a'+i)))
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("a"), TTL: longTTL, NearestTick: true, Schedule: spec, Grace: time.Second})
		if l.Tick == nil {
			t.Errorf("NearestTick with %q: got no tick", spec)
		}
	}
}

// testTriggerAhead: a job whose last completed tick lies ahead of the
// clock (completed under a wider window, or before this rule) cannot be
// triggered: its manual tick would lie ahead too, and could never be
// claimed. Nothing is owed; its own ticks ahead are refused as well.
func testTriggerAhead(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("trigger-ahead"), b.owner("a")
	b.reopenWith(t, StoreOptions{MaxTickAhead: 24 * time.Hour})
	future := b.dbClock(t).Add(2 * time.Hour).Truncate(time.Millisecond)
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &future})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	b.reopenWith(t, StoreOptions{})
	now := b.dbClock(t)
	_, err := b.store.Trigger(ctx, &leaseapi.TriggerParams{JobID: job, Key: "k1", Grace: triggerGrace})
	m := future.Add(time.Millisecond)
	ahead := wantAhead(t, "Trigger of a job whose last completed tick is 2 hours ahead", err, m, now, leaseapi.DefaultMaxTickAhead)
	if !ahead.Manual || ahead.Lease == nil || !equalTimePtr(ahead.Lease.LastCompletedTick, &future) {
		t.Errorf("the trigger's tick_ahead: got manual %t lease %+v, want manual, with the lease (last completed tick %s)", ahead.Manual, ahead.Lease, fmtTime(&future))
	}
	if got := b.get(t, job); got.OwedTick != nil {
		t.Errorf("after a refused trigger: got owed tick %s, want none", fmtTime(got.OwedTick))
	}
	if o := b.owed(t, job); len(o) != 0 {
		t.Errorf("Owed after a refused trigger: got %+v, want nothing", o)
	}
	// The key of the refused trigger made no tick: refused again.
	_, err = b.store.Trigger(ctx, &leaseapi.TriggerParams{JobID: job, Key: "k1", Grace: triggerGrace})
	wantAhead(t, "the refused trigger's retry", err, m, now, leaseapi.DefaultMaxTickAhead)
}
