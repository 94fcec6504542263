package decide_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

func TestTokenAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		prev, timeline int64
		want           int64
	}{
		{"FirstGrant", 0, 1, 1},
		{"NextOnTimeline1", 41, 1, 42},
		{"FirstOfTimeline2", 41, 2, 1 << 40},
		{"NextOnTimeline2", 1 << 40, 2, 1<<40 + 1},
		{"OlderTimelineNeverGoesBack", 3 << 40, 2, 3<<40 + 1},
		{"LastExactTimeline", 5, 8192, 8191 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide.TokenAfter(tc.prev, tc.timeline); got != tc.want {
				t.Errorf("TokenAfter(%d, %d) = %d, want %d", tc.prev, tc.timeline, got, tc.want)
			}
		})
	}
	if got := decide.TokenAfter(0, 8192); got > decide.MaxToken {
		t.Errorf("timeline 8192's first token %d passes MaxToken", got)
	}
	if got := decide.TokenAfter(0, 8193); got <= decide.MaxToken {
		t.Errorf("timeline 8193's first token %d does not pass MaxToken", got)
	}
}

func TestPlanAcquire(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 30, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	tick := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	held := func(owner string) *leaseapi.Lease {
		return &leaseapi.Lease{JobID: "j", Owner: owner, Token: 7, Timeline: 1, Tick: &tick, State: leaseapi.StateHeld,
			AcquiredAt: now.Add(-time.Second), ExpiresAt: now.Add(time.Minute), LastOutcome: leaseapi.OutcomeSucceeded,
			CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}
	}
	expired := func() *leaseapi.Lease {
		l := held("a")
		l.State, l.ExpiresAt, l.LastOutcome = leaseapi.StateExpired, now.Add(-time.Second), leaseapi.OutcomeExpired
		return l
	}
	released := func() *leaseapi.Lease {
		l := expired()
		l.State, l.ReleasedAt, l.LastOutcome = leaseapi.StateReleased, at(-time.Second), leaseapi.OutcomeFailed
		return l
	}
	acq := func(owner string, tick *time.Time) *leaseapi.AcquireParams {
		return &leaseapi.AcquireParams{JobID: "j", Owner: owner, TTL: time.Minute, Tick: tick}
	}
	manual := time.Date(2026, 12, 6, 11, 59, 1, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		p     *leaseapi.AcquireParams
		f     decide.Facts
		check func(t *testing.T, plan decide.AcquirePlan, err error)
	}{
		{"NewJob", acq("a", &tick), decide.Facts{Now: now, Timeline: 1}, func(t *testing.T, plan decide.AcquirePlan, err error) {
			if err != nil || !plan.Insert || plan.Token != 1 || plan.Trigger != leaseapi.TriggerSchedule || !plan.ValidUntil.IsZero() {
				t.Errorf("got %+v, %v; want an insert of token 1 with no time bound", plan, err)
			}
		}},
		{"NewJobTickAhead", acq("a", at(time.Hour)), decide.Facts{Now: now, Timeline: 1}, func(t *testing.T, _ decide.AcquirePlan, err error) {
			if !errors.Is(err, leaseapi.ErrTickAhead) {
				t.Errorf("got %v, want tick_ahead", err)
			}
		}},
		{"RenewKeepsTokenAndTick", acq("a", &tick), decide.Facts{Lease: held("a"), Now: now, Timeline: 2, GrantTrigger: leaseapi.TriggerManual},
			func(t *testing.T, plan decide.AcquirePlan, err error) {
				if err != nil || !plan.Renew || plan.Token != 7 || plan.Timeline != 1 || !plan.Tick.Equal(tick) ||
					plan.Trigger != leaseapi.TriggerManual || plan.CloseExpired || !plan.ValidUntil.Equal(now.Add(time.Minute)) {
					t.Errorf("got %+v, %v; want the renewal of token 7, valid until the grant expires", plan, err)
				}
			}},
		{"HeldRefuses", acq("b", &tick), decide.Facts{Lease: held("a"), Now: now, Timeline: 1}, func(t *testing.T, _ decide.AcquirePlan, err error) {
			if !errors.Is(err, leaseapi.ErrLeaseHeld) {
				t.Errorf("got %v, want lease_held", err)
			}
		}},
		{"GrantAfterExpiryClosesOldRun", acq("b", at(0)), decide.Facts{Lease: expired(), Now: now, Timeline: 1},
			func(t *testing.T, plan decide.AcquirePlan, err error) {
				if err != nil || plan.Renew || plan.Token != 8 || !plan.CloseExpired || plan.PrevToken != 7 ||
					!plan.PrevExpiresAt.Equal(now.Add(-time.Second)) || plan.LastOutcome != leaseapi.OutcomeExpired {
					t.Errorf("got %+v, %v; want token 8 closing run 7 as expired", plan, err)
				}
			}},
		{"GrantAfterReleaseKeepsOutcome", acq("b", at(0)), decide.Facts{Lease: released(), Now: now, Timeline: 3},
			func(t *testing.T, plan decide.AcquirePlan, err error) {
				if err != nil || plan.Token != 2<<40 || plan.Timeline != 3 || plan.CloseExpired || plan.LastOutcome != leaseapi.OutcomeFailed {
					t.Errorf("got %+v, %v; want the first token of timeline 3, nothing to close", plan, err)
				}
			}},
		{"ClaimsOwedManualTick", acq("b", &manual), func() decide.Facts {
			l := released()
			l.OwedTick, l.OwedReason = &manual, leaseapi.TriggerManual
			return decide.Facts{Lease: l, Now: now, Timeline: 1, OwedUntil: at(time.Minute), OwedBy: "ops"}
		}(), func(t *testing.T, plan decide.AcquirePlan, err error) {
			if err != nil || !plan.Tick.Equal(manual) || plan.Trigger != leaseapi.TriggerManual || plan.TriggeredBy != "ops" ||
				!plan.SettlesOwed || !plan.ValidUntil.Equal(now.Add(time.Minute)) {
				t.Errorf("got %+v, %v; want the manual tick claimed and settled, valid while claimable", plan, err)
			}
		}},
		{"LaterTickSettlesCatchUp", acq("b", at(0)), func() decide.Facts {
			l := released()
			l.OwedTick, l.OwedReason = at(-time.Hour), leaseapi.TriggerCatchUp
			return decide.Facts{Lease: l, Now: now, Timeline: 1, OwedUntil: at(time.Hour)}
		}(), func(t *testing.T, plan decide.AcquirePlan, err error) {
			if err != nil || plan.Trigger != leaseapi.TriggerSchedule || !plan.SettlesOwed {
				t.Errorf("got %+v, %v; want a schedule grant settling the catch-up debt", plan, err)
			}
		}},
		{"LaterTickKeepsManual", acq("b", at(0)), func() decide.Facts {
			l := released()
			l.OwedTick, l.OwedReason = &manual, leaseapi.TriggerManual
			return decide.Facts{Lease: l, Now: now, Timeline: 1, OwedUntil: at(time.Hour)}
		}(), func(t *testing.T, plan decide.AcquirePlan, err error) {
			if err != nil || plan.Trigger != leaseapi.TriggerSchedule || plan.SettlesOwed {
				t.Errorf("got %+v, %v; want a schedule grant keeping the manual debt", plan, err)
			}
		}},
		{"NearestTickValidUntilNextTick", &leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Minute, NearestTick: true,
			Schedule: "* * * * *", Grace: time.Second}, decide.Facts{Now: now, Timeline: 1},
			func(t *testing.T, plan decide.AcquirePlan, err error) {
				// The margin is half the minute's gap: at 12:00:30 the
				// nearest tick is 12:01, until 30 s before 12:02.
				next := tick.Add(time.Minute)
				if err != nil || !plan.Tick.Equal(next) || !plan.ValidUntil.Equal(next.Add(30*time.Second)) {
					t.Errorf("got %+v, %v; want tick %v valid until the next tick's margin", plan, err, next)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := decide.PlanAcquire(tc.p, &tc.f, leaseapi.DefaultMaxTickAhead)
			tc.check(t, plan, err)
		})
	}
}

func TestPlanAcquireRegistration(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 30, 0, time.UTC)
	since, next, due := now.Add(-time.Hour), now.Add(30*time.Second), now.Add(40*time.Second)
	stored := &leaseapi.Lease{JobID: "j", Owner: "a", Token: 1, State: leaseapi.StateReleased, ReleasedAt: &since,
		Schedule: "* * * * *", Grace: 10 * time.Second, CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}
	facts := decide.Facts{Lease: stored, Now: now, Timeline: 1, ScheduleSince: &since, NextTick: &next, DecideAt: &due}
	for _, tc := range []struct {
		name        string
		f           decide.Facts
		spec        string
		grace       time.Duration
		catchUp     leaseapi.CatchUp
		want        decide.Registration
		wantNoSince bool
	}{
		{"FirstSpecOfNewJob", decide.Facts{Now: now, Timeline: 1}, "*/5 * * * *", time.Second, "",
			decide.Registration{Schedule: "*/5 * * * *", Grace: time.Second, ScheduleSince: &now, DecideAt: &now,
				CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}, false},
		{"NoSpecKeepsStored", facts, "", 0, "",
			decide.Registration{Schedule: "* * * * *", Grace: 10 * time.Second, ScheduleSince: &since, NextTick: &next, DecideAt: &due,
				CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}, false},
		{"SameSpecNewGraceMovesDue", facts, "* * * * *", 20 * time.Second, "",
			decide.Registration{Schedule: "* * * * *", Grace: 20 * time.Second, ScheduleSince: &since, NextTick: &next,
				DecideAt: ptr(next.Add(20 * time.Second)), CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}, false},
		{"ChangedSpecDueNow", facts, "*/2 * * * *", 10 * time.Second, leaseapi.CatchUpLatest,
			decide.Registration{Schedule: "*/2 * * * *", Grace: 10 * time.Second, ScheduleSince: &now, DecideAt: &now,
				CatchUp: leaseapi.CatchUpLatest, CatchUpWindow: leaseapi.DefaultCatchUpWindow}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &leaseapi.AcquireParams{JobID: "j", Owner: "b", TTL: time.Minute, Schedule: tc.spec, Grace: tc.grace, CatchUp: tc.catchUp}
			plan, err := decide.PlanAcquire(p, &tc.f, leaseapi.DefaultMaxTickAhead)
			if err != nil {
				t.Fatalf("PlanAcquire: %v", err)
			}
			got := plan.Registration
			if got.Schedule != tc.want.Schedule || got.Grace != tc.want.Grace || got.CatchUp != tc.want.CatchUp ||
				got.CatchUpWindow != tc.want.CatchUpWindow || !sameTime(got.ScheduleSince, tc.want.ScheduleSince) ||
				!sameTime(got.NextTick, tc.want.NextTick) || !sameTime(got.DecideAt, tc.want.DecideAt) {
				t.Errorf("registration: got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func TestHeartbeatAndRelease(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	earlier := tick.Add(-time.Hour)
	lease := func(state leaseapi.State) leaseapi.Lease {
		return leaseapi.Lease{JobID: "j", Owner: "a", Token: 3, State: state, Tick: &tick, LastCompletedTick: &earlier,
			TTL: time.Minute, ExpiresAt: tick.Add(time.Minute)}
	}
	for _, tc := range []struct {
		name      string
		cur       leaseapi.Lease
		owner     string
		token     int64
		outcome   leaseapi.Outcome
		beatLost  bool
		echo      bool
		lost      bool
		completed time.Time
	}{
		{"HolderSucceeds", lease(leaseapi.StateHeld), "a", 3, leaseapi.OutcomeSucceeded, false, false, false, tick},
		{"HolderFails", lease(leaseapi.StateHeld), "a", 3, leaseapi.OutcomeFailed, false, false, false, earlier},
		{"ExpiredStillReleases", lease(leaseapi.StateExpired), "a", 3, leaseapi.OutcomeSucceeded, true, false, false, tick},
		{"RetriedRelease", lease(leaseapi.StateReleased), "a", 3, leaseapi.OutcomeSucceeded, true, true, false, time.Time{}},
		{"Revoked", lease(leaseapi.StateRevoked), "a", 3, leaseapi.OutcomeSucceeded, true, false, true, time.Time{}},
		{"StaleToken", lease(leaseapi.StateHeld), "a", 2, leaseapi.OutcomeSucceeded, true, false, true, time.Time{}},
		{"OtherOwner", lease(leaseapi.StateHeld), "b", 3, leaseapi.OutcomeSucceeded, true, false, true, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := decide.PlanHeartbeat(&leaseapi.HeartbeatParams{JobID: "j", Owner: tc.owner, Token: tc.token}, tc.cur)
			if got := errors.Is(err, leaseapi.ErrLeaseLost); got != tc.beatLost || (err != nil && !got) {
				t.Errorf("PlanHeartbeat: got %v, want lost %v", err, tc.beatLost)
			}
			if err == nil && (plan.TTL != tc.cur.TTL || !plan.ValidUntil.Equal(tc.cur.ExpiresAt)) {
				t.Errorf("PlanHeartbeat: got %+v, want the grant's TTL %v, valid until its expiry %v", plan, tc.cur.TTL, tc.cur.ExpiresAt)
			}
			echo, completed, err := decide.Release(&leaseapi.ReleaseParams{JobID: "j", Owner: tc.owner, Token: tc.token, Outcome: tc.outcome}, tc.cur)
			if echo != tc.echo || errors.Is(err, leaseapi.ErrLeaseLost) != tc.lost || (err != nil && !tc.lost) {
				t.Errorf("Release: got echo %v, %v; want echo %v, lost %v", echo, err, tc.echo, tc.lost)
			}
			if !tc.completed.IsZero() && (completed == nil || !completed.Equal(tc.completed)) {
				t.Errorf("Release: completed %v, want %v", completed, tc.completed)
			}
		})
	}
}

// TestPlanAcquireTooSoon: a job's first grant is never too soon; a claim of
// an owed tick is; the rule comes before the group's slots.
func TestPlanAcquireTooSoon(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 30, 0, time.UTC)
	manual := now.Add(-10 * time.Second)
	group := "reports"
	released := &leaseapi.Lease{JobID: "j", Owner: "a", Token: 7, Timeline: 1, State: leaseapi.StateReleased,
		AcquiredAt: now.Add(-20 * time.Second), ExpiresAt: now.Add(-5 * time.Second), ReleasedAt: ptr(now.Add(-5 * time.Second)),
		Group: group, OwedTick: &manual, OwedReason: leaseapi.TriggerManual}
	full := &decide.GroupFacts{Name: group, Limit: 1, SlotToken: 1, Now: now, Slots: []decide.SlotFacts{{Slot: 1, JobID: "other", JobToken: 1,
		SlotToken: 1, Holder: &leaseapi.Lease{JobID: "other", Token: 1, State: leaseapi.StateHeld, ExpiresAt: now.Add(time.Minute)}}}}
	p := func(tick *time.Time) *leaseapi.AcquireParams {
		return &leaseapi.AcquireParams{JobID: "j", Owner: "b", TTL: time.Minute, Tick: tick, MinInterval: time.Minute}
	}

	plan, err := decide.PlanAcquire(p(nil), &decide.Facts{Now: now, Timeline: 1}, time.Minute)
	if err != nil || !plan.Insert {
		t.Errorf("first grant with a minimum interval: got %+v, %v; want an insert", plan, err)
	}
	f := decide.Facts{Lease: released, Now: now, Timeline: 1, OwedUntil: ptr(now.Add(time.Minute)), Group: full}
	if _, err := decide.PlanAcquire(p(&manual), &f, time.Minute); !errors.Is(err, leaseapi.ErrTooSoon) {
		t.Errorf("claim of the owed tick in a full group: got %v, want too_soon", err)
	}
	f.Now = now.Add(40 * time.Second)
	full.Now = f.Now
	if _, err := decide.PlanAcquire(p(&manual), &f, time.Minute); !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Errorf("claim of the owed tick in a full group after the interval: got %v, want group_full", err)
	}
}

// TestPlanHeartbeatTTL: a heartbeat's TTL replaces the grant's; none sent
// keeps it; either way the decision holds until the grant's expiry as read.
func TestPlanHeartbeatTTL(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 12, 6, 12, 1, 0, 0, time.UTC)
	cur := leaseapi.Lease{JobID: "j", Owner: "a", Token: 3, State: leaseapi.StateHeld, TTL: time.Minute, ExpiresAt: expires}
	for _, tc := range []struct {
		sent, want time.Duration
	}{{0, time.Minute}, {3 * time.Minute, 3 * time.Minute}, {time.Millisecond, time.Millisecond}} {
		plan, err := decide.PlanHeartbeat(&leaseapi.HeartbeatParams{JobID: "j", Owner: "a", Token: 3, TTL: tc.sent}, cur)
		if err != nil || plan.TTL != tc.want || !plan.ValidUntil.Equal(expires) {
			t.Errorf("PlanHeartbeat(ttl %v): got %+v, %v; want ttl %v valid until %v", tc.sent, plan, err, tc.want, expires)
		}
	}
}
