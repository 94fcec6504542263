package decide

import (
	"cmp"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The holder's calls, decided as the acquire is: a store reads the job's
// lease at its clock, decides here, and writes the plan only while the row
// is the one it read (and, for a heartbeat, the clock is before
// ValidUntil); when nothing was written it reads and decides again.

// HeartbeatPlan is the write of a heartbeat: the grant's TTL after it
// (the one sent, or the grant's own when none was), counted from the
// write's clock, and the instant until which the decision holds, the
// grant's expiry as read: past it the grant has expired, and a heartbeat
// never revives an expired grant.
type HeartbeatPlan struct {
	TTL        time.Duration
	ValidUntil time.Time
}

// PlanHeartbeat decides a heartbeat p on cur, the lease at the store's
// clock: the plan when p's owner holds cur's grant with p's token, else
// lease_lost holding cur.
func PlanHeartbeat(p *leaseapi.HeartbeatParams, cur leaseapi.Lease) (HeartbeatPlan, error) {
	if cur.State != leaseapi.StateHeld || cur.Owner != p.Owner || cur.Token != p.Token {
		return HeartbeatPlan{}, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseLost, Lease: cur}
	}
	return HeartbeatPlan{TTL: cmp.Or(p.TTL, cur.TTL), ValidUntil: cur.ExpiresAt}, nil
}

// Release decides a release p on cur: echo when it is the holder's retry
// of a release already made (nothing changes, cur is the answer); else,
// when p's owner and token name cur's grant, neither released nor revoked
// (held, or expired with nobody taking over: the run did finish), the
// grant ends and completed is the last completed tick after it; anything
// else is lease_lost. The passing of time changes none of this (held or
// expired, the grant is released), only a write of the row does (a
// takeover, a revocation, a release).
func Release(p *leaseapi.ReleaseParams, cur leaseapi.Lease) (echo bool, completed *time.Time, err error) {
	if cur.Owner != p.Owner || cur.Token != p.Token || cur.State == leaseapi.StateRevoked {
		return false, nil, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseLost, Lease: cur}
	}
	if cur.State == leaseapi.StateReleased {
		return true, nil, nil
	}
	completed = cur.LastCompletedTick
	if p.Outcome == leaseapi.OutcomeSucceeded && cur.Tick != nil && (completed == nil || cur.Tick.After(*completed)) {
		completed = cur.Tick
	}
	return false, completed, nil
}
