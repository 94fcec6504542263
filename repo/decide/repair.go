package decide

import (
	"time"

	"github.com/leaseapi/leaseapi"
)

// RepairPlan is what a repair (leaseapi.Store.Repair) writes to one job.
type RepairPlan struct {
	// Ahead is now + window: a mark later than it is ahead, and every run
	// whose tick is later is discarded.
	Ahead time.Time
	// Revoke: the job's grant is open (neither released nor revoked, held
	// or expired) and its tick is ahead. An expired one is revoked too: its
	// holder could still release it succeeded and poison the job again.
	Revoke bool
	// LastCompletedTick is the job's new last completed tick (nil: none).
	LastCompletedTick *time.Time
	// ClearOwed: the tick the job owes is ahead.
	ClearOwed bool
	// ClearTick: the tick of the lease's grant is ahead. Its run is
	// discarded, and the lease no longer names it, so that the tick sweep
	// does not take the grant for the run of that tick when it comes.
	ClearTick bool
}

// Repair decides the repair of lease cur, read under its row lock at the
// store's clock now, with newestSucceeded the tick of the job's newest
// succeeded run at or before now + window (nil for none). The last
// completed tick becomes the later of newestSucceeded and min(cur's,
// now - retention): never back past the history kept, since a tick older
// than that may have run and its run be pruned. It never moves forward
// (newestSucceeded is at most cur's, which is the newest succeeded tick).
func Repair(cur leaseapi.Lease, now time.Time, window, retention time.Duration, newestSucceeded *time.Time) RepairPlan {
	ahead := now.Add(window)
	p := RepairPlan{Ahead: ahead}
	open := cur.State == leaseapi.StateHeld || cur.State == leaseapi.StateExpired
	p.Revoke = open && cur.Tick != nil && cur.Tick.After(ahead)
	p.ClearOwed = cur.OwedTick != nil && cur.OwedTick.After(ahead)
	p.ClearTick = cur.Tick != nil && cur.Tick.After(ahead)
	var kept *time.Time
	if cur.LastCompletedTick != nil {
		t := now.Add(-retention)
		if cur.LastCompletedTick.Before(t) {
			t = *cur.LastCompletedTick
		}
		kept = &t
	}
	p.LastCompletedTick = later(newestSucceeded, kept)
	return p
}

// Changes reports whether the plan changes lease cur (it was decided
// from): a repair whose plan does not, and that discarded no run, writes
// nothing.
func (p RepairPlan) Changes(cur leaseapi.Lease) bool {
	same := (p.LastCompletedTick == nil) == (cur.LastCompletedTick == nil) &&
		(p.LastCompletedTick == nil || p.LastCompletedTick.Equal(*cur.LastCompletedTick))
	return p.Revoke || p.ClearOwed || p.ClearTick || !same
}

// later is the later of a and b, nil when both are.
func later(a, b *time.Time) *time.Time {
	switch {
	case a == nil:
		return b
	case b == nil || a.After(*b):
		return a
	}
	return b
}
