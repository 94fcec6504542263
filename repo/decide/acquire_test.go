package decide

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TestAcquireTickAhead: a tick later than the clock plus the window is
// refused to everyone with tick_ahead, after job_paused and before
// tick_done and lease_held; the window's edge and the past are not.
func TestAcquireTickAhead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	const window = 5 * time.Minute
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	paused := now.Add(-time.Hour)
	held := leaseapi.Lease{JobID: "j", Owner: "a", Token: 2, State: leaseapi.StateHeld, Tick: at(window + time.Hour),
		LastCompletedTick: at(2 * time.Hour)}
	released := leaseapi.Lease{JobID: "j", Owner: "a", Token: 2, State: leaseapi.StateReleased, LastCompletedTick: at(-time.Minute)}
	pausedLease := released
	pausedLease.PausedAt = &paused
	for _, tc := range []struct {
		name string
		tick *time.Time
		cur  leaseapi.Lease
		want error // nil: granted or renewed
	}{
		{"Edge", at(window), released, nil},
		{"PastTheEdge", at(window + time.Millisecond), released, leaseapi.ErrTickAhead},
		{"TwoDaysAhead", at(48 * time.Hour), released, leaseapi.ErrTickAhead},
		{"YearAgo", at(-365 * 24 * time.Hour), leaseapi.Lease{JobID: "j", State: leaseapi.StateReleased}, nil},
		{"NoTick", nil, released, nil},
		{"PausedFirst", at(48 * time.Hour), pausedLease, leaseapi.ErrJobPaused},
		{"BeforeTickDone", at(time.Hour), held, leaseapi.ErrTickAhead},
		{"TheHolderToo", held.Tick, held, leaseapi.ErrTickAhead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Minute, Tick: tc.tick}
			if tc.name == "BeforeTickDone" {
				p.Owner = "b"
			}
			_, err := Acquire(p, tc.cur, now, window)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Acquire: got %v, want %v", err, tc.want)
			}
			if ahead, ok := errors.AsType[*leaseapi.TickAheadError](err); ok &&
				(!ahead.Now.Equal(now) || !ahead.Tick.Equal(*tc.tick) || ahead.MaxAhead != window || ahead.Lease == nil) {
				t.Errorf("tick_ahead: got %+v, want tick %s now %s window %s and the lease", ahead, tc.tick, now, window)
			}
		})
	}
}

// TestNearestTickNeverAhead: a NearestTick acquire picks at most a minute
// ahead of the clock, so its pick passes the narrowest window (a minute),
// also when the clock is a minute before a tick.
func TestNearestTickNeverAhead(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"@every 2m", "@every 1h", "0 7 * * *", "* * * * * *"} {
		s, err := ParseSchedule(spec)
		if err != nil {
			t.Fatalf("ParseSchedule(%q): %v", spec, err)
		}
		tick := s.Next(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
		margin := min(MaxNearestTickMargin, s.MinGap()/2)
		for _, now := range []time.Time{tick.Add(-margin), tick.Add(-margin).Add(-time.Millisecond), tick} {
			r, err := ResolveTick(&leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Minute, NearestTick: true, Schedule: spec, Grace: time.Second}, "", now)
			if err != nil {
				t.Fatalf("ResolveTick(%q at %s): %v", spec, now, err)
			}
			if err := Ahead(r.Params.Tick, now, time.Minute, nil); err != nil {
				t.Errorf("%q at %s: the pick %s is refused: %v", spec, now, r.Params.Tick, err)
			}
		}
	}
}

// TestResolveTickBeforeYear1: a named tick whose schedule's newest tick at
// or before it would lie before year 0001 is never wrapped or moved out of
// the calendar.
func TestResolveTickBeforeYear1(t *testing.T) {
	t.Parallel()
	// The schedule finds no tick there, so the tick stays as sent.
	early := time.Date(1, time.January, 1, 0, 0, 30, 0, time.UTC)
	r, err := ResolveTick(&leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Minute, Tick: &early, Schedule: "0 12 * * *", Grace: time.Second}, "", early)
	if err != nil {
		t.Fatalf("a tick of 0001-01-01 with a daily noon schedule: got %v, want no error", err)
	}
	if r.Params.Tick == nil || !r.Params.Tick.Equal(early) || !leaseapi.ValidTick(*r.Params.Tick) {
		t.Errorf("a tick of 0001-01-01 with a daily noon schedule: resolved to %v, want %s as sent", r.Params.Tick, early)
	}
}

// TestAcquireTooSoon: a grant sooner than the acquire's minimum interval
// after the previous grant started is refused with too_soon, after
// job_paused, tick_ahead, tick_done, the holder's renewal and lease_held;
// a grant at the interval's end, or without one, is made.
func TestAcquireTooSoon(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	const interval = time.Minute
	lease := func(state leaseapi.State) leaseapi.Lease {
		l := leaseapi.Lease{JobID: "j", Owner: "a", Token: 3, State: state, AcquiredAt: now.Add(-20 * time.Second),
			ExpiresAt: now.Add(10 * time.Second), LastCompletedTick: at(-time.Hour)}
		switch state {
		case leaseapi.StateReleased:
			l.ReleasedAt, l.ExpiresAt = at(-10*time.Second), now.Add(-10*time.Second)
		case leaseapi.StateExpired:
			l.ExpiresAt = now.Add(-time.Second)
		}
		return l
	}
	paused := lease(leaseapi.StateReleased)
	paused.PausedAt = at(-time.Minute)
	atEdge := lease(leaseapi.StateReleased)
	atEdge.AcquiredAt = now.Add(-interval)
	for _, tc := range []struct {
		name     string
		owner    string
		tick     *time.Time
		interval time.Duration
		cur      leaseapi.Lease
		want     error // nil: granted or renewed
		renew    bool
	}{
		{"AfterRelease", "b", nil, interval, lease(leaseapi.StateReleased), leaseapi.ErrTooSoon, false},
		{"AfterExpiry", "b", nil, interval, lease(leaseapi.StateExpired), leaseapi.ErrTooSoon, false},
		{"AfterRevoke", "b", nil, interval, lease(leaseapi.StateRevoked), leaseapi.ErrTooSoon, false},
		{"TheLastOwnerToo", "a", nil, interval, lease(leaseapi.StateReleased), leaseapi.ErrTooSoon, false},
		{"AnotherTick", "b", at(-time.Minute), interval, lease(leaseapi.StateReleased), leaseapi.ErrTooSoon, false},
		{"AtTheEnd", "b", nil, interval, atEdge, nil, false},
		{"ShorterInterval", "b", nil, 20 * time.Second, lease(leaseapi.StateReleased), nil, false},
		{"NoInterval", "b", nil, 0, lease(leaseapi.StateReleased), nil, false},
		{"PausedFirst", "b", nil, interval, paused, leaseapi.ErrJobPaused, false},
		{"TickAheadFirst", "b", at(time.Hour), interval, lease(leaseapi.StateReleased), leaseapi.ErrTickAhead, false},
		{"TickDoneFirst", "b", at(-2 * time.Hour), interval, lease(leaseapi.StateReleased), leaseapi.ErrTickDone, false},
		{"HolderRenews", "a", nil, interval, lease(leaseapi.StateHeld), nil, true},
		{"LeaseHeldFirst", "b", nil, interval, lease(leaseapi.StateHeld), leaseapi.ErrLeaseHeld, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &leaseapi.AcquireParams{JobID: "j", Owner: tc.owner, TTL: time.Minute, Tick: tc.tick, MinInterval: tc.interval}
			renew, err := Acquire(p, tc.cur, now, 5*time.Minute)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) || renew != tc.renew {
				t.Fatalf("Acquire: got renew %v, %v; want renew %v, %v", renew, err, tc.renew, tc.want)
			}
			if tc.want != leaseapi.ErrTooSoon {
				return
			}
			c, _ := errors.AsType[*leaseapi.ConflictError](err)
			soon, _ := errors.AsType[*leaseapi.TooSoonError](err)
			if c == nil || c.Lease.Token != tc.cur.Token || soon == nil || soon.MinInterval != interval ||
				!soon.Until.Equal(tc.cur.AcquiredAt.Add(interval)) || !soon.Now.Equal(now) || soon.RetryAfter() != 40*time.Second {
				t.Errorf("too_soon: got %+v (%+v), want the lease, until acquiredAt + %s, now, 40s to wait", c, soon, interval)
			}
		})
	}
}
