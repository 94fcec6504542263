package decide_test

import (
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

func TestRepair(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	const window, retention = 5 * time.Minute, 168 * time.Hour
	tests := []struct {
		name       string
		cur        leaseapi.Lease
		succeeded  *time.Time
		wantRevoke bool
		wantLast   *time.Time
		wantClear  bool
	}{
		{name: "SoundJobUnchanged", cur: leaseapi.Lease{State: leaseapi.StateHeld, Tick: at(0), LastCompletedTick: at(-time.Minute)},
			succeeded: at(-time.Minute), wantLast: at(-time.Minute)},
		{name: "HeldAheadRevoked", cur: leaseapi.Lease{State: leaseapi.StateHeld, Tick: at(48 * time.Hour)},
			wantRevoke: true},
		{name: "ExpiredAheadRevoked", cur: leaseapi.Lease{State: leaseapi.StateExpired, Tick: at(48 * time.Hour)},
			wantRevoke: true},
		{name: "ReleasedAheadNotRevoked", cur: leaseapi.Lease{State: leaseapi.StateReleased, Tick: at(48 * time.Hour), LastCompletedTick: at(48 * time.Hour)},
			succeeded: at(-time.Hour), wantLast: at(-time.Hour)},
		{name: "WithinWindowKept", cur: leaseapi.Lease{State: leaseapi.StateHeld, Tick: at(window), LastCompletedTick: at(window)},
			succeeded: at(window), wantLast: at(window)},
		{name: "NoSucceededRunKeepsRetentionFloor", cur: leaseapi.Lease{State: leaseapi.StateReleased, LastCompletedTick: at(48 * time.Hour)},
			wantLast: at(-retention)},
		{name: "OldMarkNeverMovesForward", cur: leaseapi.Lease{State: leaseapi.StateReleased, LastCompletedTick: at(-2 * retention)},
			wantLast: at(-2 * retention)},
		{name: "NoneStaysNone", cur: leaseapi.Lease{State: leaseapi.StateReleased}},
		{name: "OwedAheadCleared", cur: leaseapi.Lease{State: leaseapi.StateReleased, OwedTick: at(time.Hour)}, wantClear: true},
		{name: "OwedNowKept", cur: leaseapi.Lease{State: leaseapi.StateReleased, OwedTick: at(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide.Repair(tt.cur, now, window, retention, tt.succeeded)
			if got.Revoke != tt.wantRevoke || got.ClearOwed != tt.wantClear {
				t.Errorf("Revoke, ClearOwed = %v, %v; want %v, %v", got.Revoke, got.ClearOwed, tt.wantRevoke, tt.wantClear)
			}
			if (got.LastCompletedTick == nil) != (tt.wantLast == nil) ||
				(got.LastCompletedTick != nil && !got.LastCompletedTick.Equal(*tt.wantLast)) {
				t.Errorf("LastCompletedTick = %v, want %v", got.LastCompletedTick, tt.wantLast)
			}
			clearTick := tt.cur.Tick != nil && tt.cur.Tick.After(now.Add(window))
			if got.ClearTick != clearTick {
				t.Errorf("ClearTick = %v, want %v", got.ClearTick, clearTick)
			}
			sound := !tt.wantRevoke && !tt.wantClear && !clearTick && ((tt.wantLast == nil && tt.cur.LastCompletedTick == nil) ||
				(tt.wantLast != nil && tt.cur.LastCompletedTick != nil && tt.wantLast.Equal(*tt.cur.LastCompletedTick)))
			if got.Changes(tt.cur) == sound {
				t.Errorf("Changes = %v, want %v", got.Changes(tt.cur), !sound)
			}
			if !got.Ahead.Equal(now.Add(window)) {
				t.Errorf("Ahead = %v, want %v", got.Ahead, now.Add(window))
			}
		})
	}
}
