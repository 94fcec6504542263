package leaseapi

import (
	"testing"
	"time"
)

// TestSetState: revoked wins, then released, then held strictly before
// expiresAt; at or after it the lease is expired and shows outcome expired.
func TestSetState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	released := now.Add(-time.Second)
	tests := []struct {
		name        string
		revoked     bool
		releasedAt  *time.Time
		expiresAt   time.Time
		want        State
		wantOutcome Outcome
	}{
		{"Revoked", true, nil, now.Add(time.Minute), StateRevoked, OutcomeSucceeded},
		{"Released", false, &released, released, StateReleased, OutcomeSucceeded},
		{"Held", false, nil, now.Add(time.Millisecond), StateHeld, OutcomeSucceeded},
		{"ExpiredAtExpiresAt", false, nil, now, StateExpired, OutcomeExpired},
		{"Expired", false, nil, now.Add(-time.Minute), StateExpired, OutcomeExpired},
	}
	for _, tt := range tests {
		l := Lease{ReleasedAt: tt.releasedAt, ExpiresAt: tt.expiresAt, LastOutcome: OutcomeSucceeded}
		l.SetState(tt.revoked, now)
		if l.State != tt.want || l.LastOutcome != tt.wantOutcome {
			t.Errorf("%s: state %s, outcome %s; want %s, %s", tt.name, l.State, l.LastOutcome, tt.want, tt.wantOutcome)
		}
	}
}
