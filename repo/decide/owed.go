package decide

import (
	"time"

	"github.com/leaseapi/leaseapi"
)

// Claim decides what a new grant of tick (nil for none) does to what the
// job owes (owed, reason; nil and "" when nothing): a grant of the owed
// tick is that tick's run (trigger TriggerCatchUp or TriggerManual) and
// settles the debt; a grant of a later tick settles a catch-up debt (the
// job ran since), not a manual one; anything else is a tick of the
// schedule and settles nothing.
func Claim(tick, owed *time.Time, reason leaseapi.Trigger) (trigger leaseapi.Trigger, settles bool) {
	switch {
	case tick == nil || owed == nil:
		return leaseapi.TriggerSchedule, false
	case tick.Equal(*owed):
		return reason, true
	case reason == leaseapi.TriggerCatchUp && tick.After(*owed):
		return leaseapi.TriggerSchedule, true
	}
	return leaseapi.TriggerSchedule, false
}

// ClaimedTick is the tick an acquire resolved as r takes on the job's
// lease cur: the tick it sent (r.Sent), as it is, when that is the manual
// tick cur owes or the tick of cur's grant (the claimant's retry after its
// claim settled the debt), else its resolved tick. A manual tick is no tick
// of the schedule: resolving it would snap it to an earlier tick.
func ClaimedTick(r *Resolution, cur leaseapi.Lease) *time.Time {
	s := r.Sent
	if s != nil && ((cur.Tick != nil && cur.Tick.Equal(*s)) ||
		(cur.OwedReason == leaseapi.TriggerManual && cur.OwedTick != nil && cur.OwedTick.Equal(*s))) {
		return s
	}
	return r.Params.Tick
}
