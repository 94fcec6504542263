package decide

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

func TestClaim(t *testing.T) {
	at := func(m int) *time.Time {
		v := time.Date(2026, 11, 30, 7, m, 0, 0, time.UTC)
		return &v
	}
	for _, tc := range []struct {
		name        string
		tick, owed  *time.Time
		reason      leaseapi.Trigger
		wantTrigger leaseapi.Trigger
		wantSettles bool
	}{
		{"no tick", nil, at(1), leaseapi.TriggerManual, leaseapi.TriggerSchedule, false},
		{"nothing owed", at(1), nil, "", leaseapi.TriggerSchedule, false},
		{"the manual tick", at(1), at(1), leaseapi.TriggerManual, leaseapi.TriggerManual, true},
		{"the catch-up tick", at(1), at(1), leaseapi.TriggerCatchUp, leaseapi.TriggerCatchUp, true},
		{"a later tick settles a catch-up debt", at(2), at(1), leaseapi.TriggerCatchUp, leaseapi.TriggerSchedule, true},
		{"a later tick leaves a manual tick owed", at(2), at(1), leaseapi.TriggerManual, leaseapi.TriggerSchedule, false},
		{"an earlier tick settles nothing", at(0), at(1), leaseapi.TriggerCatchUp, leaseapi.TriggerSchedule, false},
	} {
		trigger, settles := Claim(tc.tick, tc.owed, tc.reason)
		if trigger != tc.wantTrigger || settles != tc.wantSettles {
			t.Errorf("%s: Claim = %q, %v; want %q, %v", tc.name, trigger, settles, tc.wantTrigger, tc.wantSettles)
		}
	}
}

func TestClaimedTick(t *testing.T) {
	snapped := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	m := time.Date(2026, 11, 30, 7, 1, 2, 3_000_000, time.UTC)
	other := m.Add(time.Millisecond)
	for _, tc := range []struct {
		name string
		sent *time.Time
		cur  leaseapi.Lease
		want time.Time
	}{
		{"the owed manual tick", &m, leaseapi.Lease{OwedTick: &m, OwedReason: leaseapi.TriggerManual}, m},
		{"the tick of the current grant", &m, leaseapi.Lease{Tick: &m}, m},
		{"another tick", &other, leaseapi.Lease{OwedTick: &m, OwedReason: leaseapi.TriggerManual}, snapped},
		{"a catch-up tick is a tick of the schedule", &m, leaseapi.Lease{OwedTick: &m, OwedReason: leaseapi.TriggerCatchUp}, snapped},
		{"nothing owed", &m, leaseapi.Lease{}, snapped},
		{"no tick sent (nearest tick)", nil, leaseapi.Lease{OwedTick: &m, OwedReason: leaseapi.TriggerManual}, snapped},
	} {
		r := Resolution{Params: leaseapi.AcquireParams{Tick: &snapped}, Sent: tc.sent}
		if got := ClaimedTick(&r, tc.cur); got == nil || !got.Equal(tc.want) {
			t.Errorf("%s: ClaimedTick = %v, want %s", tc.name, got, tc.want)
		}
	}
}
