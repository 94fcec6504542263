package decide_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

func TestSlotInUse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	holder := func(token int64, state leaseapi.State, expires time.Duration) *leaseapi.Lease {
		l := &leaseapi.Lease{JobID: "j", Token: token, State: state, ExpiresAt: now.Add(expires)}
		if state == leaseapi.StateReleased {
			l.ReleasedAt = at(-time.Second)
		}
		return l
	}
	for _, tc := range []struct {
		name string
		slot decide.SlotFacts
		want bool
	}{
		{"HeldGrant", decide.SlotFacts{JobToken: 3, Holder: holder(3, leaseapi.StateHeld, time.Minute)}, true},
		{"ExpiresNow", decide.SlotFacts{JobToken: 3, Holder: holder(3, leaseapi.StateHeld, 0)}, false},
		{"Expired", decide.SlotFacts{JobToken: 3, Holder: holder(3, leaseapi.StateExpired, -time.Second)}, false},
		{"Released", decide.SlotFacts{JobToken: 3, Holder: holder(3, leaseapi.StateReleased, time.Minute)}, false},
		{"NewerGrantOfTheJob", decide.SlotFacts{JobToken: 3, Holder: holder(4, leaseapi.StateHeld, time.Minute)}, false},
		{"NoLease", decide.SlotFacts{JobToken: 3}, false},
		{"RevokedBeforeItsExpiry", decide.SlotFacts{JobToken: 3, RevokedUntil: at(time.Second),
			Holder: holder(4, leaseapi.StateRevoked, 0)}, true},
		{"RevokedAtItsExpiry", decide.SlotFacts{JobToken: 3, RevokedUntil: at(0), Holder: holder(4, leaseapi.StateRevoked, 0)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide.SlotInUse(&tc.slot, now); got != tc.want {
				t.Errorf("SlotInUse(%+v) = %v, want %v", tc.slot, got, tc.want)
			}
		})
	}
}

func TestPlanAcquireInGroup(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	group := "reports"
	slot := func(n int, job string, token int64, expires time.Duration) decide.SlotFacts {
		return decide.SlotFacts{Slot: n, JobID: job, JobToken: token, SlotToken: int64(n) * 10,
			Holder: &leaseapi.Lease{JobID: job, Owner: "o-" + job, Token: token, State: leaseapi.StateHeld, ExpiresAt: now.Add(expires)}}
	}
	facts := func(limit int, slots ...decide.SlotFacts) *decide.GroupFacts {
		return &decide.GroupFacts{Name: group, Limit: limit, SlotToken: 40, Slots: slots, Now: now}
	}
	p := &leaseapi.AcquireParams{JobID: "j", Owner: "a", TTL: time.Minute, Group: &group}

	// Without the group's facts the plan asks for them.
	plan, err := decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1}, time.Minute)
	if err != nil || !plan.NeedsGroup() || plan.Group != group {
		t.Fatalf("without group facts: got %+v, %v; want a plan that needs the group", plan, err)
	}
	// The lowest free slot, the next slot token.
	plan, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1,
		Group: facts(3, slot(1, "x", 1, time.Minute), slot(2, "y", 1, -time.Second), slot(3, "z", 1, time.Minute))}, time.Minute)
	if err != nil || plan.NeedsGroup() || plan.Slot != 2 || plan.SlotToken != 41 {
		t.Fatalf("with slot 2 free: got %+v, %v; want slot 2, slot token 41", plan, err)
	}
	// A new timeline's slot tokens are above every older one.
	plan, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 3, Group: facts(1)}, time.Minute)
	if err != nil || plan.Slot != 1 || plan.SlotToken != decide.TokenAfter(40, 3) {
		t.Fatalf("on timeline 3: got slot %d token %d, %v; want slot 1, token %d", plan.Slot, plan.SlotToken, err, decide.TokenAfter(40, 3))
	}
	// Full: group_full with the holders and the first expiry.
	_, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1,
		Group: facts(2, slot(1, "x", 1, 90*time.Second+time.Millisecond), slot(2, "y", 1, 3*time.Minute))}, time.Minute)
	var full *leaseapi.GroupFullError
	if !errors.As(err, &full) || full.RetryAfter != 91*time.Second || full.Group.Held != 2 || full.Group.Holders[0].JobID != "x" ||
		full.Group.Holders[0].Owner != "o-x" || full.Lease != nil {
		t.Fatalf("full: got %v (%+v), want group_full retrying after 91s with x and y holding", err, full)
	}
	// A lowered limit counts the slots above it.
	_, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1, Group: facts(1, slot(2, "y", 1, time.Minute))}, time.Minute)
	if !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Fatalf("slot 2 in use under a limit of 1: got %v, want group_full", err)
	}

	// A grant of the job itself, newer than the lease read, in the group:
	// the lease read is stale; a revoked grant of the job is not.
	if _, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1, Group: facts(1, slot(1, "j", 1, time.Minute))}, time.Minute); !errors.Is(err, decide.ErrFactsChanged) {
		t.Fatalf("the job's own newer grant in the group: got %v, want ErrFactsChanged", err)
	}
	revoked := slot(1, "j", 1, 0)
	revoked.RevokedUntil = new(now.Add(time.Second))
	if _, err = decide.PlanAcquire(p, &decide.Facts{Now: now, Timeline: 1, Group: facts(1, revoked)}, time.Minute); !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Fatalf("the job's own revoked grant holding the only slot: got %v, want group_full", err)
	}

	// The refusals before group_full, and the holder's renewal.
	fullGroup := facts(1, slot(1, "x", 1, time.Minute))
	cur := &leaseapi.Lease{JobID: "j", Owner: "a", Token: 5, State: leaseapi.StateHeld, ExpiresAt: now.Add(time.Minute),
		Group: group, Slot: 1, SlotToken: 7}
	plan, err = decide.PlanAcquire(p, &decide.Facts{Lease: cur, Now: now, Timeline: 1, Group: fullGroup}, time.Minute)
	if err != nil || !plan.Renew || plan.Slot != 1 || plan.SlotToken != 7 {
		t.Fatalf("the holder's renewal in a full group: got %+v, %v; want the renewal keeping slot 1 token 7", plan, err)
	}
	other := &leaseapi.AcquireParams{JobID: "j", Owner: "b", TTL: time.Minute, Group: &group}
	if _, err = decide.PlanAcquire(other, &decide.Facts{Lease: cur, Now: now, Timeline: 1, Group: fullGroup}, time.Minute); !errors.Is(err, leaseapi.ErrLeaseHeld) {
		t.Fatalf("another owner of a held job in a full group: got %v, want lease_held", err)
	}
	paused := *cur
	paused.State, paused.ExpiresAt, paused.PausedAt = leaseapi.StateExpired, now.Add(-time.Second), &now
	if _, err = decide.PlanAcquire(other, &decide.Facts{Lease: &paused, Now: now, Timeline: 1, Group: fullGroup}, time.Minute); !errors.Is(err, leaseapi.ErrJobPaused) {
		t.Fatalf("a paused job in a full group: got %v, want job_paused", err)
	}
	// Leaving the group takes no slot.
	none := ""
	leave := &leaseapi.AcquireParams{JobID: "j", Owner: "b", TTL: time.Minute, Group: &none}
	expired := paused
	expired.PausedAt = nil
	plan, err = decide.PlanAcquire(leave, &decide.Facts{Lease: &expired, Now: now, Timeline: 1}, time.Minute)
	if err != nil || plan.Group != "" || plan.Slot != 0 || plan.NeedsGroup() {
		t.Fatalf("leaving the group: got %+v, %v; want a grant in no group", plan, err)
	}
}

func TestGroupFullAt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ptr := func(d time.Duration) *time.Time { v := at.Add(d); return &v }
	run := func(start time.Duration, outcome leaseapi.Outcome, end, heldUntil *time.Time) decide.GroupRun {
		return decide.GroupRun{StartedAt: at.Add(start), Outcome: outcome, EndedAt: end, HeldUntil: heldUntil}
	}
	for _, tc := range []struct {
		name string
		runs []decide.GroupRun
		want bool
	}{
		{"EndedAfter", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeSucceeded, ptr(time.Second), nil)}, true},
		{"EndedAt", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeSucceeded, ptr(0), nil)}, false},
		{"StartedAt", []decide.GroupRun{run(0, leaseapi.OutcomeSucceeded, ptr(time.Second), nil)}, true},
		{"StartedAfter", []decide.GroupRun{run(time.Millisecond, leaseapi.OutcomeRunning, nil, ptr(time.Minute))}, false},
		{"RunningUnexpired", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeRunning, nil, ptr(time.Second))}, true},
		{"RunningExpired", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeRunning, nil, ptr(-time.Second))}, false},
		{"RevokedHeldOn", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeRevoked, ptr(-time.Second), ptr(time.Second))}, true},
		{"RevokedHeldUntilBefore", []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeRevoked, ptr(-2*time.Second), ptr(-time.Second))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide.GroupFullAt(1, tc.runs, at); got != tc.want {
				t.Errorf("GroupFullAt(1, %+v) = %v, want %v", tc.runs, got, tc.want)
			}
		})
	}
	two := []decide.GroupRun{run(-time.Minute, leaseapi.OutcomeRunning, nil, ptr(time.Second))}
	if decide.GroupFullAt(2, two, at) {
		t.Errorf("GroupFullAt(2) with one held: got true, want false")
	}
}
