package decide

import (
	"cmp"
	"time"

	"github.com/leaseapi/leaseapi"
)

// How an acquire is decided and what it writes. A store reads the job's
// lease and its clock (Facts), PlanAcquire decides on them and returns the
// refusal or the complete write (AcquirePlan), and the store writes it only
// while the row is the one it read and the clock is before ValidUntil;
// when nothing was written it reads again and decides again.

// MaxToken is the largest fencing token: the largest integer a JSON number
// keeps exactly (2^53 - 1). A store refuses to write a larger one.
const MaxToken = 1<<53 - 1

// timelineTokens are the tokens of one WAL timeline: 2^40 a job.
const timelineTokens = 1 << 40

// TokenAfter is the token that follows prev on WAL timeline: prev + 1, or
// the first token of the timeline, (timeline - 1) × 2^40, when that is
// larger. After a promotion every new token is thus larger than any token
// of an older timeline, even one the old primary acknowledged and the new
// one never received. A store without replication is on timeline 1.
func TokenAfter(prev, timeline int64) int64 {
	return max(prev+1, (timeline-1)*timelineTokens)
}

// Facts are what a store read of a job for a decision, in one read: its
// lease as the domain sees it at Now (nil when the job has no row), the
// stored columns the lease does not show, the store's clock and its WAL
// timeline (1 without replication).
type Facts struct {
	Lease    *leaseapi.Lease
	Now      time.Time
	Timeline int64
	// Revoked reports whether the grant was revoked; OwedUntil and OwedBy
	// are what the job owes as stored (the lease shows the owed tick only
	// while it is claimable); GrantTrigger and GrantTriggeredBy what
	// started the current grant.
	Revoked          bool
	OwedUntil        *time.Time
	OwedBy           string
	GrantTrigger     leaseapi.Trigger
	GrantTriggeredBy string
	// The schedule's registration as stored: when the spec was
	// registered, its oldest undecided tick and when the sweep is due.
	ScheduleSince, NextTick, DecideAt *time.Time
	// Group is the job's concurrency group as read for a grant in it,
	// under its lock (nil until the plan NeedsGroup).
	Group *GroupFacts
}

// Registration is a job's schedule and catch-up policy as the write leaves
// them.
type Registration struct {
	Schedule                          string // "" for none
	Grace                             time.Duration
	ScheduleSince, NextTick, DecideAt *time.Time
	CatchUp                           leaseapi.CatchUp
	CatchUpWindow                     time.Duration
}

// AcquirePlan is the write of a granted acquire: the lease's new columns,
// the run to start and the run to close. Times of the grant itself
// (acquired_at, renewed_at, expires_at) are the write's clock, not in it.
type AcquirePlan struct {
	// Insert: the job has no row; Renew: the holder's renewal (token,
	// tick, acquired_at and trigger stay; no run starts).
	Insert, Renew bool
	JobID, Owner  string
	Token         int64
	Timeline      int64
	Tick          *time.Time
	TTL           time.Duration
	// LastOutcome is the lease's last outcome after the write ("" for
	// none): OutcomeExpired when the previous grant was neither released
	// nor revoked.
	LastOutcome leaseapi.Outcome
	// Trigger and TriggeredBy are what started the grant (its run's).
	Trigger     leaseapi.Trigger
	TriggeredBy string
	// SettlesOwed: the grant settles what the job owes (its owed columns
	// are cleared).
	SettlesOwed bool
	Registration
	// CloseExpired: the previous grant ended by expiry; its run
	// (PrevToken) is closed as expired at PrevExpiresAt.
	CloseExpired  bool
	PrevToken     int64
	PrevExpiresAt time.Time
	// Group is the job's group after the write ("" for none); Slot and
	// SlotToken the slot a grant in it takes (a renewal keeps its grant's).
	Group     string
	Slot      int
	SlotToken int64
	// ValidUntil is when the decision stops holding as the clock passes
	// it (a renewal's grant expires, an owed tick stops being claimable,
	// a NearestTick's tick stops being the nearest); zero when no passing
	// of time changes it. The write re-checks it with its own clock.
	ValidUntil time.Time
}

// PlanAcquire decides an acquire p on f with maxAhead, the lead the store
// allows a tick: the refusal (as Acquire names it), or the write. p's tick
// is resolved (ResolveTick) with the stored schedule and the clock of f.
func PlanAcquire(p *leaseapi.AcquireParams, f *Facts, maxAhead time.Duration) (AcquirePlan, error) {
	var stored string
	if f.Lease != nil {
		stored = f.Lease.Schedule
	}
	r, err := ResolveTick(p, stored, f.Now)
	if err != nil {
		return AcquirePlan{}, err
	}
	plan := AcquirePlan{JobID: p.JobID, Owner: p.Owner, TTL: p.TTL, ValidUntil: r.ClockUntil, Trigger: leaseapi.TriggerSchedule}
	plan.Registration = register(p, f)
	if f.Lease == nil {
		if err := Ahead(r.Params.Tick, f.Now, maxAhead, nil); err != nil {
			return AcquirePlan{}, err
		}
		plan.Insert, plan.Token, plan.Timeline, plan.Tick = true, TokenAfter(0, f.Timeline), f.Timeline, r.Params.Tick
		if err := joinGroup(&plan, p, f); err != nil {
			return AcquirePlan{}, err
		}
		return plan, nil
	}
	cur := *f.Lease
	at := r.Params
	at.Tick = ClaimedTick(&r, cur)
	renew, refused := Acquire(&at, cur, f.Now, maxAhead)
	if refused != nil {
		return AcquirePlan{}, refused
	}
	if cur.OwedTick != nil && f.OwedUntil != nil {
		// Whether the tick is owed decided the claim and whether it is
		// done: it holds while the tick is claimable.
		plan.ValidUntil = earliest(plan.ValidUntil, *f.OwedUntil)
	}
	if renew {
		plan.Renew, plan.Token, plan.Timeline, plan.Tick = true, cur.Token, cur.Timeline, cur.Tick
		plan.LastOutcome, plan.Trigger, plan.TriggeredBy = cur.LastOutcome, f.GrantTrigger, f.GrantTriggeredBy
		plan.ValidUntil = earliest(plan.ValidUntil, cur.ExpiresAt)
		plan.Group, plan.Slot, plan.SlotToken = cur.Group, cur.Slot, cur.SlotToken
		return plan, nil
	}
	plan.Token, plan.Timeline, plan.Tick = TokenAfter(cur.Token, f.Timeline), f.Timeline, at.Tick
	plan.LastOutcome = cur.LastOutcome
	if cur.ReleasedAt == nil && !f.Revoked {
		// Neither released nor revoked: the grant ended by expiry.
		plan.LastOutcome, plan.CloseExpired, plan.PrevToken, plan.PrevExpiresAt = leaseapi.OutcomeExpired, true, cur.Token, cur.ExpiresAt
	}
	var settles bool
	plan.Trigger, settles = Claim(at.Tick, cur.OwedTick, cur.OwedReason)
	if plan.Trigger != leaseapi.TriggerSchedule {
		plan.TriggeredBy = f.OwedBy
	}
	plan.SettlesOwed = settles
	if err := joinGroup(&plan, p, f); err != nil {
		return AcquirePlan{}, err
	}
	return plan, nil
}

// register is the schedule and catch-up policy a granted acquire p leaves
// on the job read as f. A schedule sent registers it: a new spec (or the
// first) is due at once, and the sweep then computes its first tick after
// ScheduleSince; the same spec with another grace keeps its undecided tick
// and is due when that tick's new grace ends. A catch-up policy sent is
// registered; none sent keeps the stored one.
func register(p *leaseapi.AcquireParams, f *Facts) Registration {
	g := Registration{CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow}
	if l := f.Lease; l != nil {
		g = Registration{Schedule: l.Schedule, Grace: l.Grace, ScheduleSince: f.ScheduleSince, NextTick: f.NextTick,
			DecideAt: f.DecideAt, CatchUp: l.CatchUp, CatchUpWindow: l.CatchUpWindow}
	}
	if p.Schedule != "" {
		now := f.Now
		switch {
		case f.Lease == nil || p.Schedule != g.Schedule:
			g.ScheduleSince, g.NextTick, g.DecideAt = &now, nil, &now
		case g.NextTick != nil:
			due := g.NextTick.Add(p.Grace)
			g.DecideAt = &due
		}
		g.Schedule, g.Grace = p.Schedule, p.Grace
	}
	if p.CatchUp != "" {
		g.CatchUp, g.CatchUpWindow = p.CatchUp, cmp.Or(p.CatchUpWindow, leaseapi.DefaultCatchUpWindow)
	}
	return g
}

// earliest is the earlier of a bound (zero: none) and t.
func earliest(bound, t time.Time) time.Time {
	if bound.IsZero() || t.Before(bound) {
		return t
	}
	return bound
}
