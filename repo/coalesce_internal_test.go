package repo

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// gatedStore holds every Acquire until the test lets it through, so that
// the test controls which acquires queue behind a call.
type gatedStore struct {
	leaseapi.Store
	entered chan struct{}
	gate    chan struct{}
	// batches: AcquireBatch is held too (set before the store is used).
	batches bool
}

func (g *gatedStore) Acquire(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.Store.Acquire(ctx, p)
}

// AcquireBatch, when batches is set, holds a batch as it holds as many
// single acquires: each item enters, and the batch goes on once the test
// has let each through.
func (g *gatedStore) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	if !g.batches {
		return g.Store.AcquireBatch(ctx, ps)
	}
	for range ps {
		g.entered <- struct{}{}
	}
	for range ps {
		<-g.gate
	}
	return g.Store.AcquireBatch(ctx, ps)
}

type coalesceBundle struct {
	gated     *gatedStore
	coalescer *coalescer
}

func setupCoalescer(t *testing.T) *coalesceBundle {
	t.Helper()
	ctx := context.Background()
	sqlite, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "leases.db")})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	if err := sqlite.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Cleanup(func() { _ = sqlite.Close() })
	gated := &gatedStore{Store: sqlite, entered: make(chan struct{}, 16), gate: make(chan struct{})}
	return &coalesceBundle{gated: gated, coalescer: CoalesceAcquires(gated, 0).(*coalescer)}
}

// waitQueued polls until n acquires of job wait behind the call in flight.
func (b *coalesceBundle) waitQueued(t *testing.T, job string, n int) {
	t.Helper()
	for range 5000 {
		b.coalescer.mu.Lock()
		q := b.coalescer.queues[job]
		got := 0
		if q != nil {
			got = len(q.waiting)
		}
		b.coalescer.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d acquires of %s never queued", n, job)
}

type acquireResult struct {
	lease leaseapi.Lease
	err   error
}

func (b *coalesceBundle) acquire(ctx context.Context, owner string) chan acquireResult {
	done := make(chan acquireResult, 1)
	go func() {
		l, err := b.coalescer.Acquire(ctx, &leaseapi.AcquireParams{JobID: "job", Owner: owner, TTL: time.Minute})
		done <- acquireResult{l, err}
	}()
	return done
}

func TestCoalescerFollowersShareOneCall(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()

	first := b.acquire(ctx, "a")
	<-b.gated.entered // a's call is at the store
	second, third := b.acquire(ctx, "b"), b.acquire(ctx, "c")
	b.waitQueued(t, "job", 2)
	b.gated.gate <- struct{}{} // a's call goes through: a wins
	if r := <-first; r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	<-b.gated.entered // b leads the next call, with c following
	b.gated.gate <- struct{}{}
	for name, ch := range map[string]chan acquireResult{"b": second, "c": third} {
		r := <-ch
		var conflict *leaseapi.ConflictError
		if !errors.As(r.err, &conflict) || !errors.Is(r.err, leaseapi.ErrLeaseHeld) || conflict.Lease.Owner != "a" {
			t.Errorf("%s: got %v, want lease_held naming a", name, r.err)
		}
	}
	select {
	case <-b.gated.entered:
		t.Errorf("c made a call of its own; want it decided by b's call")
	default:
	}
}

func TestCoalescerFollowerWithdrawsAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)

	first := b.acquire(context.Background(), "a")
	<-b.gated.entered
	ctx, cancel := context.WithCancel(context.Background())
	withdrawn := b.acquire(ctx, "b")
	b.waitQueued(t, "job", 1)
	cancel()
	if r := <-withdrawn; !errors.Is(r.err, leaseapi.ErrUnavailable) {
		t.Errorf("withdrawn follower: got %v, want ErrUnavailable", r.err)
	}
	b.gated.gate <- struct{}{}
	if r := <-first; r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	// Nobody waits any more: the job's queue is gone.
	b.coalescer.mu.Lock()
	defer b.coalescer.mu.Unlock()
	if n := len(b.coalescer.queues); n != 0 {
		t.Errorf("queues left: %d, want 0", n)
	}
}

func TestCoalescerHolderRenewsWithItsOwnCall(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()

	first := b.acquire(ctx, "a")
	<-b.gated.entered
	retry := b.acquire(ctx, "a") // the holder's retry must renew, not be refused
	b.waitQueued(t, "job", 1)
	b.gated.gate <- struct{}{}
	granted := <-first
	if granted.err != nil {
		t.Fatalf("a: %v", granted.err)
	}
	<-b.gated.entered
	b.gated.gate <- struct{}{}
	r := <-retry
	if r.err != nil || r.lease.Token != granted.lease.Token {
		t.Errorf("holder's retry: got token %d, err %v; want token %d", r.lease.Token, r.err, granted.lease.Token)
	}
}

// TestDecideFollowerLeavesTickResolutionToTheStore: the coalescer decides
// a follower with its tick resolved as the store would resolve it: the
// holder's acquire naming its tick otherwise (here while the job is
// paused, when only the holder's renewal passes) renews, so it makes its
// own call, and so does a nearestTick acquire with no schedule sent or
// stored (the store answers it 400). Another owner is refused.
func TestDecideFollowerLeavesTickResolutionToTheStore(t *testing.T) {
	tick := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	paused, otherName := tick.Add(time.Hour), tick.Add(30*time.Minute)
	held := leaseapi.Lease{JobID: "job", Owner: "a", Token: 3, State: leaseapi.StateHeld, Tick: &tick,
		Schedule: "@every 1h", PausedAt: &paused, RenewedAt: tick}
	for _, tc := range []struct {
		name      string
		f         leaseapi.AcquireParams
		lease     leaseapi.Lease
		decided   bool
		wantError error
	}{
		{"HolderNamesItsTickOtherwise", leaseapi.AcquireParams{JobID: "job", Owner: "a", TTL: time.Minute, Tick: &otherName}, held, false, nil},
		{"HolderAsksForTheNearestTick", leaseapi.AcquireParams{JobID: "job", Owner: "a", TTL: time.Minute, NearestTick: true}, held, false, nil},
		{"NearestTickWithoutSchedule", leaseapi.AcquireParams{JobID: "job", Owner: "b", TTL: time.Minute, NearestTick: true},
			leaseapi.Lease{JobID: "job", Owner: "a", Token: 3, State: leaseapi.StateHeld}, false, nil},
		{"AnotherOwnerWhilePaused", leaseapi.AcquireParams{JobID: "job", Owner: "b", TTL: time.Minute, Tick: &otherName}, held, true, leaseapi.ErrJobPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, decided := decideFollower(&tc.f, tc.lease, nil, leaseapi.DefaultMaxTickAhead)
			if decided != tc.decided || (tc.wantError != nil && !errors.Is(o.err, tc.wantError)) {
				t.Errorf("decided %t with error %v; want decided %t with %v", decided, o.err, tc.decided, tc.wantError)
			}
		})
	}
}

// TestCoalescerFollowerTickSnapped: a follower naming a completed tick of
// the job's schedule otherwise is refused with tick_done by the leader's
// result, as its own call would be, without a call of its own.
func TestCoalescerFollowerTickSnapped(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()
	tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := tick.Add(d); return &v }
	done := make(chan acquireResult, 1)
	go func() {
		l, err := b.coalescer.Acquire(ctx, &leaseapi.AcquireParams{JobID: "job", Owner: "registrar", TTL: time.Minute,
			Tick: at(0), Schedule: "@every 1h", Grace: time.Minute})
		done <- acquireResult{l, err}
	}()
	<-b.gated.entered
	b.gated.gate <- struct{}{}
	reg := <-done
	if reg.err != nil {
		t.Fatalf("registrar: %v", reg.err)
	}
	if _, err := b.coalescer.Release(ctx, &leaseapi.ReleaseParams{JobID: "job", Owner: "registrar", Token: reg.lease.Token,
		Outcome: leaseapi.OutcomeSucceeded}); err != nil {
		t.Fatalf("Release: %v", err)
	}

	acquireTick := func(owner string, tick *time.Time) chan acquireResult {
		done := make(chan acquireResult, 1)
		go func() {
			l, err := b.coalescer.Acquire(ctx, &leaseapi.AcquireParams{JobID: "job", Owner: owner, TTL: time.Minute, Tick: tick})
			done <- acquireResult{l, err}
		}()
		return done
	}
	first := acquireTick("a", at(10*time.Minute))
	<-b.gated.entered // a's call is at the store
	leader, follower := acquireTick("b", at(20*time.Minute)), acquireTick("c", at(59*time.Minute))
	b.waitQueued(t, "job", 2)
	b.gated.gate <- struct{}{}
	if r := <-first; !errors.Is(r.err, leaseapi.ErrTickDone) {
		t.Errorf("a: got %v, want tick_done", r.err)
	}
	<-b.gated.entered // b leads the next call, with c following
	b.gated.gate <- struct{}{}
	if r := <-leader; !errors.Is(r.err, leaseapi.ErrTickDone) {
		t.Errorf("b: got %v, want tick_done", r.err)
	}
	var r acquireResult
	select {
	case r = <-follower:
	case <-b.gated.entered:
		t.Error("c made a call of its own; want it decided by b's call")
		b.gated.gate <- struct{}{}
		r = <-follower
	}
	if !errors.Is(r.err, leaseapi.ErrTickDone) {
		t.Errorf("c: got %v, want tick_done", r.err)
	}
}

// TestDecideFollowerTickAhead: a follower's tick ahead of the clock is
// refused with tick_ahead when the leader's result names the clock (a
// grant's renewedAt, a tick_ahead refusal's now); a refusal of another
// kind names only a lower bound of it, so such a follower makes its own
// call, while one whose tick is within the bound is decided as before.
func TestDecideFollowerTickAhead(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	held := leaseapi.Lease{JobID: "job", Owner: "a", Token: 3, State: leaseapi.StateHeld, Tick: at(0), RenewedAt: t0, AcquiredAt: t0}
	for _, tc := range []struct {
		name    string
		tick    *time.Time
		lease   leaseapi.Lease
		err     error
		decided bool
		want    error
	}{
		{"AfterAGrant", at(48 * time.Hour), held, nil, true, leaseapi.ErrTickAhead},
		{"WithinAfterAGrant", at(time.Minute), held, nil, true, leaseapi.ErrLeaseHeld},
		{"AfterLeaseHeld", at(48 * time.Hour), leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseHeld, Lease: held}, false, nil},
		{"WithinAfterLeaseHeld", at(time.Minute), leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseHeld, Lease: held}, true, leaseapi.ErrLeaseHeld},
		{"AfterTickAheadOfANewJob", at(48 * time.Hour), leaseapi.Lease{},
			&leaseapi.TickAheadError{Tick: *at(time.Hour), Now: t0, MaxAhead: leaseapi.DefaultMaxTickAhead}, true, leaseapi.ErrTickAhead},
		{"WithinAfterTickAheadOfANewJob", at(time.Minute), leaseapi.Lease{},
			&leaseapi.TickAheadError{Tick: *at(time.Hour), Now: t0, MaxAhead: leaseapi.DefaultMaxTickAhead}, false, nil},
		{"WithinAfterTickAheadOfAHeldJob", at(time.Minute), leaseapi.Lease{},
			&leaseapi.TickAheadError{Tick: *at(time.Hour), Now: t0, MaxAhead: leaseapi.DefaultMaxTickAhead, Lease: &held}, true, leaseapi.ErrLeaseHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &leaseapi.AcquireParams{JobID: "job", Owner: "b", TTL: time.Minute, Tick: tc.tick}
			o, decided := decideFollower(f, tc.lease, tc.err, leaseapi.DefaultMaxTickAhead)
			if decided != tc.decided || (tc.want != nil && !errors.Is(o.err, tc.want)) {
				t.Errorf("decided %t with error %v; want decided %t with %v", decided, o.err, tc.decided, tc.want)
			}
		})
	}
}

// TestDecideFollowerGroupFull: a leader refused group_full decides for a
// follower only what the lease it carries refuses; a follower that lease
// would not refuse makes its own call (a slot may have freed since), and
// so does every follower of a job without a lease.
func TestDecideFollowerGroupFull(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	group := leaseapi.Group{Name: "g", Limit: 1, Held: 1, Now: t0}
	full := func(l *leaseapi.Lease) error {
		return &leaseapi.GroupFullError{Group: group, RetryAfter: time.Second, Lease: l}
	}
	released := leaseapi.Lease{JobID: "job", Owner: "a", Token: 3, State: leaseapi.StateReleased, Tick: at(-time.Hour),
		LastCompletedTick: at(-time.Hour), AcquiredAt: t0, RenewedAt: t0, ReleasedAt: at(0), Group: "g"}
	paused := released
	paused.PausedAt = at(0)
	for _, tc := range []struct {
		name    string
		tick    *time.Time
		err     error
		decided bool
		want    error
	}{
		{"NoLease", at(0), full(nil), false, nil},
		{"NoLeaseNoTick", nil, full(nil), false, nil},
		{"NewTick", at(0), full(&released), false, nil},
		{"NoTick", nil, full(&released), false, nil},
		{"DoneTick", at(-time.Hour), full(&released), true, leaseapi.ErrTickDone},
		{"Paused", at(0), full(&paused), true, leaseapi.ErrJobPaused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &leaseapi.AcquireParams{JobID: "job", Owner: "b", TTL: time.Minute, Tick: tc.tick}
			o, decided := decideFollower(f, leaseapi.Lease{}, tc.err, leaseapi.DefaultMaxTickAhead)
			if decided != tc.decided || (tc.want != nil && !errors.Is(o.err, tc.want)) {
				t.Errorf("decided %t with error %v; want decided %t with %v", decided, o.err, tc.decided, tc.want)
			}
			if decided && errors.Is(o.err, leaseapi.ErrUnavailable) {
				t.Errorf("a group_full leader answered its follower unavailable: %v", o.err)
			}
		})
	}
}

// TestDecideFollowerTooSoon: a follower is refused too_soon by its own
// minimum interval only with the clock of the leader's decision (a
// too_soon refusal's now); after a refusal that names only a lower bound
// of the clock, and whenever its own interval lets it be granted, it makes
// its own call. A lease held by the leader refuses it lease_held first.
func TestDecideFollowerTooSoon(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	released := leaseapi.Lease{JobID: "job", Owner: "a", Token: 3, State: leaseapi.StateReleased, Tick: at(-time.Hour),
		LastCompletedTick: at(-time.Hour), AcquiredAt: t0.Add(-20 * time.Second), RenewedAt: t0.Add(-20 * time.Second), ReleasedAt: at(-10 * time.Second)}
	held := leaseapi.Lease{JobID: "job", Owner: "a", Token: 4, State: leaseapi.StateHeld, AcquiredAt: t0, RenewedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	tooSoon := &leaseapi.ConflictError{Err: &leaseapi.TooSoonError{MinInterval: time.Minute, Until: released.AcquiredAt.Add(time.Minute), Now: t0}, Lease: released}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		tick     *time.Time
		lease    leaseapi.Lease
		err      error
		decided  bool
		want     error
		until    time.Duration // after released.AcquiredAt, for a too_soon
	}{
		{"SameInterval", time.Minute, nil, leaseapi.Lease{}, tooSoon, true, leaseapi.ErrTooSoon, time.Minute},
		{"LongerInterval", 2 * time.Minute, nil, leaseapi.Lease{}, tooSoon, true, leaseapi.ErrTooSoon, 2 * time.Minute},
		{"ShorterInterval", 10 * time.Second, nil, leaseapi.Lease{}, tooSoon, false, nil, 0},
		{"NoInterval", 0, nil, leaseapi.Lease{}, tooSoon, false, nil, 0},
		{"DoneTickFirst", time.Minute, at(-time.Hour), leaseapi.Lease{}, tooSoon, true, leaseapi.ErrTickDone, 0},
		{"AfterTickDone", time.Minute, at(0), leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrTickDone, Lease: released}, false, nil, 0},
		{"AfterAGrant", time.Minute, nil, held, nil, true, leaseapi.ErrLeaseHeld, 0},
		{"AfterGroupFull", time.Minute, nil, leaseapi.Lease{},
			&leaseapi.GroupFullError{Group: leaseapi.Group{Name: "g", Limit: 1, Held: 1, Now: t0}, RetryAfter: time.Second, Lease: &released}, false, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &leaseapi.AcquireParams{JobID: "job", Owner: "b", TTL: time.Minute, Tick: tc.tick, MinInterval: tc.interval}
			o, decided := decideFollower(f, tc.lease, tc.err, leaseapi.DefaultMaxTickAhead)
			if decided != tc.decided || (tc.want != nil && !errors.Is(o.err, tc.want)) {
				t.Fatalf("decided %t with error %v; want decided %t with %v", decided, o.err, tc.decided, tc.want)
			}
			if soon, ok := errors.AsType[*leaseapi.TooSoonError](o.err); ok &&
				(!soon.Now.Equal(t0) || !soon.Until.Equal(released.AcquiredAt.Add(tc.until)) || soon.MinInterval != tc.interval) {
				t.Errorf("too_soon %+v: want now %s, its own interval %s and its end", soon, t0, tc.interval)
			}
		})
	}
}

// acquireBatch sends owner's acquires of jobs as one batch.
func (b *coalesceBundle) acquireBatch(ctx context.Context, owner string, jobs ...string) chan []leaseapi.Answer {
	ps := make([]*leaseapi.AcquireParams, len(jobs))
	for i, job := range jobs {
		ps[i] = &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute}
	}
	done := make(chan []leaseapi.Answer, 1)
	go func() { done <- b.coalescer.AcquireBatch(ctx, ps) }()
	return done
}

// waitForgotten polls until no call of job is at the store and nobody
// waits for one.
func (b *coalesceBundle) waitForgotten(t *testing.T, job string) {
	t.Helper()
	for range 5000 {
		b.coalescer.mu.Lock()
		_, busy := b.coalescer.queues[job]
		b.coalescer.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the queue of %s was never forgotten", job)
}

// TestCoalescerBatchFollowerSharesTheCall: a batch's item whose job has a
// call at the store waits with the single acquires of that job and is
// answered by the result of the next call, which one of them makes, while
// the batch's other items go to the store.
func TestCoalescerBatchFollowerSharesTheCall(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()

	first := b.acquire(ctx, "a")
	<-b.gated.entered // a's call of job is at the store
	second := b.acquire(ctx, "b")
	b.waitQueued(t, "job", 1)
	batch := b.acquireBatch(ctx, "c", "job", "other")
	b.waitQueued(t, "job", 2)
	b.gated.gate <- struct{}{} // a wins
	if r := <-first; r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	<-b.gated.entered // b leads the next call, with c's item following
	b.gated.gate <- struct{}{}
	var conflict *leaseapi.ConflictError
	if r := <-second; !errors.As(r.err, &conflict) || !errors.Is(r.err, leaseapi.ErrLeaseHeld) || conflict.Lease.Owner != "a" {
		t.Errorf("b: got %v, want lease_held naming a", r.err)
	}
	answers := <-batch
	if err := answers[0].Err; !errors.As(err, &conflict) || !errors.Is(err, leaseapi.ErrLeaseHeld) || conflict.Lease.Owner != "a" {
		t.Errorf("c's item of job: got %v, want lease_held naming a", err)
	}
	if a := answers[1]; a.Err != nil || a.Lease.Owner != "c" {
		t.Errorf("c's item of other: got owner %q, error %v; want granted to c", a.Lease.Owner, a.Err)
	}
	select {
	case <-b.gated.entered:
		t.Errorf("c's item of job made a call of its own; want it decided by b's call")
	default:
	}
}

// TestCoalescerBatchFollowerWithdrawsAtItsDeadline: when the batch's
// context ends while an item waits as a follower, that item answers
// unavailable, the items already decided keep their answers, and the
// call it followed goes on.
func TestCoalescerBatchFollowerWithdrawsAtItsDeadline(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)

	first := b.acquire(context.Background(), "a")
	<-b.gated.entered
	ctx, cancel := context.WithCancel(context.Background())
	batch := b.acquireBatch(ctx, "b", "job", "other")
	b.waitQueued(t, "job", 1)
	b.waitForgotten(t, "other") // the batch's own call decided other
	cancel()
	answers := <-batch
	if err := answers[0].Err; !errors.Is(err, leaseapi.ErrUnavailable) {
		t.Errorf("withdrawn item of job: got %v, want ErrUnavailable", err)
	}
	if a := answers[1]; a.Err != nil || a.Lease.Owner != "b" {
		t.Errorf("b's item of other: got owner %q, error %v; want granted to b", a.Lease.Owner, a.Err)
	}
	b.gated.gate <- struct{}{}
	if r := <-first; r.err != nil {
		t.Fatalf("a: %v", r.err)
	}
	b.coalescer.mu.Lock()
	defer b.coalescer.mu.Unlock()
	if n := len(b.coalescer.queues); n != 0 {
		t.Errorf("queues left: %d, want 0", n)
	}
}

// TestCoalescerBatchHolderRenewsWithItsOwnCall: the holder's retry in a
// batch, which the call it follows cannot decide, makes a call of its own
// and renews.
func TestCoalescerBatchHolderRenewsWithItsOwnCall(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()

	first := b.acquire(ctx, "a")
	<-b.gated.entered
	second := b.acquire(ctx, "b")
	b.waitQueued(t, "job", 1)
	batch := b.acquireBatch(ctx, "a", "job", "other")
	b.waitQueued(t, "job", 2)
	b.gated.gate <- struct{}{}
	granted := <-first
	if granted.err != nil {
		t.Fatalf("a: %v", granted.err)
	}
	<-b.gated.entered // b leads the next call, with a's item following
	b.gated.gate <- struct{}{}
	if r := <-second; !errors.Is(r.err, leaseapi.ErrLeaseHeld) {
		t.Errorf("b: got %v, want lease_held", r.err)
	}
	<-b.gated.entered // a's item of job makes its own call
	b.gated.gate <- struct{}{}
	answers := <-batch
	if a := answers[0]; a.Err != nil || a.Lease.Token != granted.lease.Token {
		t.Errorf("holder's retry in a batch: got token %d, err %v; want token %d", a.Lease.Token, a.Err, granted.lease.Token)
	}
	if a := answers[1]; a.Err != nil || a.Lease.Owner != "a" {
		t.Errorf("a's item of other: got owner %q, error %v; want granted to a", a.Lease.Owner, a.Err)
	}
}

// TestCoalescerFollowerOfAnInvalidCall: a call the store answers as invalid
// (here: it names a group that does not exist) decided nothing for its
// followers, whose params are their own: each makes a call of its own and
// is answered as that call would be (here: granted), not unavailable.
func TestCoalescerFollowerOfAnInvalidCall(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	ctx := context.Background()

	first := b.acquire(ctx, "x")
	<-b.gated.entered // x's call of job is at the store
	invalid := make(chan acquireResult, 1)
	go func() {
		l, err := b.coalescer.Acquire(ctx, &leaseapi.AcquireParams{JobID: "job", Owner: "a", TTL: time.Minute, Group: new("nogroup")})
		invalid <- acquireResult{l, err}
	}()
	b.waitQueued(t, "job", 1)
	batch := b.acquireBatch(ctx, "b", "job")
	b.waitQueued(t, "job", 2)
	b.gated.gate <- struct{}{}
	granted := <-first
	if granted.err != nil {
		t.Fatalf("x: %v", granted.err)
	}
	<-b.gated.entered // a leads the next call, with b's item following
	if _, err := b.gated.Store.Release(ctx, &leaseapi.ReleaseParams{JobID: "job", Owner: "x", Token: granted.lease.Token,
		Outcome: leaseapi.OutcomeSucceeded}); err != nil {
		t.Fatalf("release by x: %v", err)
	}
	b.gated.gate <- struct{}{}
	var inv *leaseapi.InvalidError
	if r := <-invalid; !errors.As(r.err, &inv) || inv.Field != "group" {
		t.Fatalf("a, naming no group: got %v, want invalid group", r.err)
	}
	select {
	case <-b.gated.entered: // b's item makes its own call
		b.gated.gate <- struct{}{}
	case answers := <-batch:
		t.Fatalf("b's item was answered by a's invalid call: %v; want a call of its own", answers[0].Err)
	}
	if a := (<-batch)[0]; a.Err != nil || a.Lease.Owner != "b" {
		t.Errorf("b's item: got owner %q, error %v; want granted to b", a.Lease.Owner, a.Err)
	}
}

// TestCoalescerBatchFollowersLeadTogether has a batch's items follow single
// calls of two jobs; when those return, both followers are ordered to lead,
// and both calls must be at the store at once (as one batch or two): made
// one after the other, as they were, a batch of 1,000 followers took 1,000
// round trips.
func TestCoalescerBatchFollowersLeadTogether(t *testing.T) {
	t.Parallel()
	b := setupCoalescer(t)
	b.gated.batches = true
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Minute)
	jobs := []string{"x", "y"}
	firsts := make(chan error, len(jobs))
	for _, job := range jobs {
		go func() {
			_, err := b.coalescer.Acquire(ctx, &leaseapi.AcquireParams{JobID: job, Owner: "a", TTL: time.Minute, Tick: &tick})
			firsts <- err
		}()
		<-b.gated.entered // a's call of job is at the store
	}
	batch := make(chan []leaseapi.Answer, 1)
	go func() {
		ps := make([]*leaseapi.AcquireParams, len(jobs))
		for i, job := range jobs {
			ps[i] = &leaseapi.AcquireParams{JobID: job, Owner: "b", TTL: time.Minute, Tick: &tick}
		}
		batch <- b.coalescer.AcquireBatch(ctx, ps)
	}()
	for _, job := range jobs {
		b.waitQueued(t, job, 1)
	}
	for range jobs {
		b.gated.gate <- struct{}{}
		if err := <-firsts; err != nil {
			t.Fatalf("a: %v", err)
		}
	}
	for range jobs { // b's two calls, both at the store before either goes through
		select {
		case <-b.gated.entered:
		case <-time.After(10 * time.Second): // a guard against a hang, not a measure
			t.Fatal("b's followers did not lead together: the second waits for the first call's answer")
		}
	}
	for range jobs {
		b.gated.gate <- struct{}{}
	}
	for i, a := range <-batch {
		var conflict *leaseapi.ConflictError
		if !errors.As(a.Err, &conflict) || !errors.Is(a.Err, leaseapi.ErrLeaseHeld) || conflict.Lease.Owner != "a" {
			t.Errorf("b's %s: got %v, want lease_held naming a", jobs[i], a.Err)
		}
	}
}
