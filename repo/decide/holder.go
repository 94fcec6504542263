package decide

import (
	"time"

	"github.com/leaseapi/leaseapi"
)

// Heartbeat decides a heartbeat p on cur, the lease at the store's clock:
// nil when p's owner holds cur's grant with p's token, else lease_lost.
func Heartbeat(p *leaseapi.HeartbeatParams, cur leaseapi.Lease) error {
	if cur.State != leaseapi.StateHeld || cur.Owner != p.Owner || cur.Token != p.Token {
		return &leaseapi.ConflictError{Err: leaseapi.ErrLeaseLost, Lease: cur}
	}
	return nil
}

// Release decides a release p on cur: echo when it is the holder's retry
// of a release already made (nothing changes, cur is the answer); else,
// when p's owner and token name cur's grant, neither released nor revoked
// (held, or expired with nobody taking over: the run did finish), the
// grant ends and completed is the last completed tick after it; anything
// else is lease_lost.
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
