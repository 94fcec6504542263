package decide

import (
	"time"

	"github.com/leaseapi/leaseapi"
)

// Renews reports whether an acquire p is its holder's renewal of cur: cur
// is held, by p's owner, and p names no tick or cur's tick, or asks for the
// nearest tick (whatever tick is nearest by then: the holder's repeated
// NearestTick acquire renews its grant).
func Renews(p *leaseapi.AcquireParams, cur leaseapi.Lease) bool {
	return cur.State == leaseapi.StateHeld && cur.Owner == p.Owner &&
		(p.Tick == nil || p.NearestTick || (cur.Tick != nil && p.Tick.Equal(*cur.Tick)))
}

// TickDone reports whether p's tick is at or before cur's last completed
// tick: it ran already, and is never granted again. The tick cur owes
// (shown only while it is claimable) is not done whatever later tick
// completed: it has not run (a manual tick a later tick of the schedule
// overtook before any replica claimed it).
func TickDone(p *leaseapi.AcquireParams, cur leaseapi.Lease) bool {
	return p.Tick != nil && cur.LastCompletedTick != nil && !p.Tick.After(*cur.LastCompletedTick) &&
		(cur.OwedTick == nil || !p.Tick.Equal(*cur.OwedTick))
}

// Ahead is the refusal of tick when it lies later than the store's clock
// now plus maxAhead (the lead the store allows a tick), or nil; cur is the
// job's lease, nil when it has none. Such a tick was asked for by a
// replica whose clock is fast: granted and released succeeded, it would
// mark every tick before it done. A tick in the past is never refused for
// its time (a late replica).
func Ahead(tick *time.Time, now time.Time, maxAhead time.Duration, cur *leaseapi.Lease) error {
	if tick == nil || !tick.After(now.Add(maxAhead)) {
		return nil
	}
	// The refusal holds a copy: cur is often a caller's local, which would
	// otherwise move to the heap on every call.
	var lease *leaseapi.Lease
	if cur != nil {
		l := *cur
		lease = &l
	}
	return &leaseapi.TickAheadError{Tick: *tick, Now: now, MaxAhead: maxAhead, Lease: lease}
}

// TooSoon is the refusal of a new grant to p when cur's grant started
// less than p.MinInterval before now, by the store's clock, or nil (always
// without a minimum interval). A grant it allows at now it allows at every
// later instant: the clock only grows, and a new grant of the job (the
// only write of acquiredAt) changes the row the decision was made on.
func TooSoon(p *leaseapi.AcquireParams, cur leaseapi.Lease, now time.Time) error {
	if p.MinInterval <= 0 {
		return nil
	}
	until := cur.AcquiredAt.Add(p.MinInterval)
	if !now.Before(until) {
		return nil
	}
	return &leaseapi.ConflictError{Err: &leaseapi.TooSoonError{MinInterval: p.MinInterval, Until: until, Now: now}, Lease: cur}
}

// Acquire decides an acquire p against the lease cur as it is at the
// instant of the decision, now by the store's clock, with maxAhead the
// lead the store allows a tick. The rules, in order: a paused job refuses
// everyone but the holder's renewal (job_paused); a tick later than now +
// maxAhead is refused to everyone (tick_ahead, a *leaseapi.TickAheadError:
// no grant of such a tick exists to renew); a done tick is refused
// to everyone but the holder's renewal (tick_done); the holder's renewal
// renews (renew true); a held lease refuses everyone else (lease_held);
// a grant sooner than p's minimum interval after cur's grant started is
// refused (too_soon, TooSoon); anything else is granted (a new token;
// renew false). Any other refusal is a *leaseapi.ConflictError holding
// cur. (A grant's tick is done while it is held only when it was owed and
// a later tick completed before its claim: the claimant's retry after a
// lost answer must still find its grant.) A job without a lease is granted
// by PlanAcquire without these rules: its first grant is never too soon.
func Acquire(p *leaseapi.AcquireParams, cur leaseapi.Lease, now time.Time, maxAhead time.Duration) (renew bool, refused error) {
	renew = Renews(p, cur)
	if cur.Paused() && !renew {
		return false, &leaseapi.ConflictError{Err: leaseapi.ErrJobPaused, Lease: cur}
	}
	if err := Ahead(p.Tick, now, maxAhead, &cur); err != nil {
		return false, err
	}
	switch {
	case TickDone(p, cur) && !renew:
		return false, &leaseapi.ConflictError{Err: leaseapi.ErrTickDone, Lease: cur}
	case renew:
		return true, nil
	case cur.State == leaseapi.StateHeld:
		return false, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseHeld, Lease: cur}
	}
	return false, TooSoon(p, cur, now)
}
