package repotest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The minimum interval between two grants of a job
// (leaseapi.AcquireParams.MinInterval, too_soon).

// wantTooSoon checks that err is a too_soon refusal of an acquire with
// interval, after the grant prev started, and returns the lease it carries.
func wantTooSoon(t *testing.T, op string, err error, prev leaseapi.Lease, interval time.Duration) leaseapi.Lease {
	t.Helper()
	l := wantConflict(t, op, err, leaseapi.ErrTooSoon)
	soon, ok := errors.AsType[*leaseapi.TooSoonError](err)
	if !ok {
		t.Fatalf("%s: got %T (%v), want a *leaseapi.TooSoonError in the conflict", op, err, err)
	}
	if until := prev.AcquiredAt.Add(interval); soon.MinInterval != interval || !soon.Until.Equal(until) ||
		soon.Now.Before(prev.AcquiredAt) || soon.RetryAfter() <= 0 || soon.RetryAfter() > interval {
		t.Errorf("%s: got %+v; want interval %s until %s, the store's clock after the grant, and at most the interval to wait",
			op, soon, interval, fmtTime(&until))
	}
	if l.Token != prev.Token || !l.AcquiredAt.Equal(prev.AcquiredAt) {
		t.Errorf("%s: the refusal carries token %d acquired %s, want the previous grant's (token %d acquired %s)",
			op, l.Token, fmtTime(&l.AcquiredAt), prev.Token, fmtTime(&prev.AcquiredAt))
	}
	return l
}

// testMinInterval: a new grant sooner than the acquire's interval after the
// previous grant started is refused with too_soon after a release, an
// expiry or a revocation, and writes nothing; the job's first grant, the
// holder's renewal and an acquire whose own interval has passed (or that
// sends none) are granted; lease_held comes first.
func testMinInterval(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("interval"), b.owner("a"), b.owner("b")
	const interval = longTTL
	acquire := func(job, owner string, ttl, d time.Duration) (leaseapi.Lease, error) {
		return b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl, MinInterval: d})
	}

	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, MinInterval: interval})
	if first.Token != 1 {
		t.Fatalf("the first grant with an interval: got token %d, want 1", first.Token)
	}
	if l, err := acquire(job, a, longTTL, interval); err != nil || l.Token != first.Token || !l.AcquiredAt.Equal(first.AcquiredAt) {
		t.Errorf("the holder's renewal with an interval: got token %d, %v; want its grant renewed", l.Token, err)
	}
	_, err := acquire(job, other, longTTL, interval)
	wantConflict(t, "another owner while held", err, leaseapi.ErrLeaseHeld)

	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	for _, owner := range []string{a, other} {
		_, err := acquire(job, owner, longTTL, interval)
		if l := wantTooSoon(t, "after the release, by "+owner, err, first, interval); l.State != leaseapi.StateReleased {
			t.Errorf("after the release: the refusal's lease is %s, want released", l.State)
		}
	}
	if l := b.get(t, job); l.Token != first.Token || l.State != leaseapi.StateReleased || len(b.runs(t, job, 10)) != 1 {
		t.Errorf("after the refusals: got token %d state %s; want the released grant, no new run", l.Token, l.State)
	}
	// Each acquire's own interval decides: none grants.
	if l, err := acquire(job, other, longTTL, 0); err != nil || l.Token != first.Token+1 {
		t.Errorf("without an interval after the release: got token %d, %v; want token %d", l.Token, err, first.Token+1)
	}

	// After an expiry the interval counts from the expired grant's start:
	// an interval as long as its TTL has ended when it expired.
	expiring := b.job("interval-expired")
	prev := b.acquire(t, leaseapi.AcquireParams{JobID: expiring, Owner: a, TTL: shortTTL})
	b.waitForState(t, expiring, leaseapi.StateExpired)
	_, err = acquire(expiring, other, longTTL, interval)
	wantTooSoon(t, "after the expiry", err, prev, interval)
	if l, err := acquire(expiring, other, longTTL, shortTTL); err != nil || l.Token != prev.Token+1 {
		t.Errorf("an interval as long as the expired grant's TTL: got token %d, %v; want token %d", l.Token, err, prev.Token+1)
	}
	if runs := b.runs(t, expiring, 10); len(runs) != 2 || runs[1].Outcome != leaseapi.OutcomeExpired {
		t.Errorf("runs after the takeover: got %+v, want the expired run closed", runs)
	}

	// After a revocation, from the revoked grant's start.
	revoked := b.job("interval-revoked")
	prev = b.acquire(t, leaseapi.AcquireParams{JobID: revoked, Owner: a, TTL: longTTL})
	r := b.revoke(t, revoked)
	_, err = acquire(revoked, other, longTTL, interval)
	if l := wantConflict(t, "after the revocation", err, leaseapi.ErrTooSoon); l.Token != r.Token || !l.AcquiredAt.Equal(prev.AcquiredAt) {
		t.Errorf("after the revocation: the refusal carries token %d acquired %s, want the revoked lease (token %d acquired %s)",
			l.Token, fmtTime(&l.AcquiredAt), r.Token, fmtTime(&prev.AcquiredAt))
	}
}

// testMinIntervalOrder: job_paused, tick_ahead and tick_done come before
// too_soon; a completed tick is tick_done, a new one too_soon.
func testMinIntervalOrder(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("interval-order"), b.owner("a")
	const interval = longTTL
	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	acquire := func(tick *time.Time) error {
		_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: tick, MinInterval: interval})
		return err
	}
	wantConflict(t, "the completed tick", acquire(tickAt(0)), leaseapi.ErrTickDone)
	wantTooSoon(t, "the next tick", acquire(tickAt(1)), first, interval)
	wantError(t, "a tick ahead of the clock", acquire(ptr(time.Now().Add(48*time.Hour))), leaseapi.ErrTickAhead)
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job, By: "ops"}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	wantConflict(t, "the next tick of the paused job", acquire(tickAt(1)), leaseapi.ErrJobPaused)
}

// testMinIntervalClaim: the claim of an owed tick is a grant like any
// other: too soon after the previous grant, it is refused and the tick
// stays owed; claimed without the interval it is settled.
func testMinIntervalClaim(t *testing.T, b *bundle) {
	ctx, job, a := t.Context(), b.job("interval-claim"), b.owner("a")
	hour := b.dbClock(t).Truncate(time.Hour)
	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: &hour, Schedule: "@every 1h", Grace: time.Minute})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops"}))
	_, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: &m, MinInterval: longTTL})
	wantTooSoon(t, "the claim of the manual tick", err, first, longTTL)
	if o := b.owed(t, job); len(o) != 1 || !o[0].Tick.Equal(m) {
		t.Errorf("Owed after the refused claim: got %+v, want the manual tick %s", o, fmtTime(&m))
	}
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: b.owner("b"), TTL: longTTL, Tick: &m})
	if !equalTimePtr(l.Tick, &m) || l.OwedTick != nil {
		t.Errorf("the claim without an interval: got tick %s owing %s, want the manual tick claimed", fmtTime(l.Tick), fmtTime(l.OwedTick))
	}
}

// testMinIntervalGroup: in a full group a grant too soon is refused
// too_soon, not group_full: the interval comes before the group's slots.
func testMinIntervalGroup(t *testing.T, b *bundle) {
	ctx, group, job, a := t.Context(), b.job("interval-group"), b.job("interval-grouped"), b.owner("a")
	b.putGroup(t, group, 1)
	first := b.acquire(t, inGroup(job, a, group, longTTL))
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	b.acquire(t, inGroup(b.job("interval-holder"), a, group, longTTL))
	p := inGroup(job, b.owner("b"), group, longTTL)
	p.MinInterval = longTTL
	_, err := b.store.Acquire(ctx, &p)
	wantTooSoon(t, "the full group's job too soon", err, first, longTTL)
	p.MinInterval = 0
	_, err = b.store.Acquire(ctx, &p)
	wantGroupFull(t, "the full group's job without an interval", err, group, 1)
}

// testMinIntervalContention: after an expiry, contenders with an interval
// that has not ended and contenders whose interval has ended acquire at
// once: exactly one grant, to a contender whose own interval allows it;
// the others hear lease_held (the winner's lease) or, those whose
// interval has not ended, too_soon. Through the coalescer the contenders
// of one job share calls, and none may take a grant its own rule refuses.
func testMinIntervalContention(t *testing.T, b *bundle) {
	const jobs, contenders = 4, 16
	type result struct {
		owner string
		long  bool
		lease leaseapi.Lease
		err   error
	}
	prev := make([]leaseapi.Lease, jobs)
	for j := range jobs {
		prev[j] = b.acquire(t, leaseapi.AcquireParams{JobID: b.job(fmt.Sprint(j)), Owner: b.owner("first"), TTL: shortTTL})
	}
	for j := range jobs {
		b.waitForState(t, b.job(fmt.Sprint(j)), leaseapi.StateExpired)
	}
	results := make([][]result, jobs)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for j := range jobs {
		results[j] = make([]result, contenders)
		for c := range contenders {
			long := c%2 == 0
			interval := shortTTL // ended when the grant expired
			if long {
				interval = longTTL
			}
			owner := b.owner(fmt.Sprint(c))
			wg.Go(func() {
				<-start
				l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: b.job(fmt.Sprint(j)), Owner: owner, TTL: longTTL, MinInterval: interval})
				results[j][c] = result{owner, long, l, err}
			})
		}
	}
	close(start)
	wg.Wait()
	for j, rs := range results {
		var winner *result
		for i := range rs {
			if rs[i].err != nil {
				continue
			}
			if winner != nil {
				t.Fatalf("job %d granted to %s and %s", j, winner.owner, rs[i].owner)
			}
			winner = &rs[i]
		}
		if winner == nil || winner.long || winner.lease.Token != prev[j].Token+1 {
			t.Fatalf("job %d: got winner %+v, want one contender whose interval had ended, with token %d", j, winner, prev[j].Token+1)
		}
		for _, r := range rs {
			var c *leaseapi.ConflictError
			switch {
			case r.err == nil:
			case errors.Is(r.err, leaseapi.ErrLeaseHeld) && errors.As(r.err, &c) && c.Lease.Owner == winner.owner:
			case r.long && errors.Is(r.err, leaseapi.ErrTooSoon):
			default:
				t.Errorf("job %d, owner %s (long interval %t): got %v, want lease_held naming %s or, with the long interval, too_soon",
					j, r.owner, r.long, r.err, winner.owner)
			}
		}
	}
}
