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

// TestShowExpiry: only a run still marked running shows its grant's
// expiry, and only when its grant is the lease's (the same token) and the
// lease, read with it, is expired; it then ends at the lease's expiry.
func TestShowExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	expires, ended := now.Add(-time.Second), now.Add(-time.Minute)
	lease := func(token int64, state State) *Lease {
		return &Lease{Token: token, State: state, ExpiresAt: expires}
	}
	for _, tc := range []struct {
		name    string
		run     Run
		lease   *Lease
		want    Outcome
		wantEnd *time.Time
	}{
		{"RunningExpired", Run{Token: 3, Outcome: OutcomeRunning}, lease(3, StateExpired), OutcomeExpired, &expires},
		{"RunningHeld", Run{Token: 3, Outcome: OutcomeRunning}, lease(3, StateHeld), OutcomeRunning, nil},
		{"RunningOfAnotherGrant", Run{Token: 2, Outcome: OutcomeRunning}, lease(3, StateExpired), OutcomeRunning, nil},
		{"RunningReleased", Run{Token: 3, Outcome: OutcomeRunning}, lease(3, StateReleased), OutcomeRunning, nil},
		{"RunningRevoked", Run{Token: 3, Outcome: OutcomeRunning}, lease(3, StateRevoked), OutcomeRunning, nil},
		{"RunningWithoutLease", Run{Token: 3, Outcome: OutcomeRunning}, nil, OutcomeRunning, nil},
		{"Finished", Run{Token: 3, Outcome: OutcomeSucceeded, EndedAt: &ended}, lease(3, StateExpired), OutcomeSucceeded, &ended},
		{"Missed", Run{Outcome: OutcomeMissed, EndedAt: &ended}, lease(0, StateExpired), OutcomeMissed, &ended},
	} {
		r := tc.run
		r.ShowExpiry(tc.lease)
		if r.Outcome != tc.want || (r.EndedAt == nil) != (tc.wantEnd == nil) || r.EndedAt != nil && !r.EndedAt.Equal(*tc.wantEnd) {
			t.Errorf("%s: outcome %s ended %v; want %s ended %v", tc.name, r.Outcome, r.EndedAt, tc.want, tc.wantEnd)
		}
	}
}
