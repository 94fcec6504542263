package decide

import (
	"errors"
	"slices"
	"time"

	"github.com/leaseapi/leaseapi"
)

// SlotFacts are a group's slot row as a store read it, with the lease of
// the job whose grant took it last.
type SlotFacts struct {
	Slot      int
	JobID     string
	JobToken  int64
	SlotToken int64
	// RevokedUntil is set when that grant was revoked: the expiry it had
	// then, until which its holder may still run.
	RevokedUntil *time.Time
	// Holder is the lease of JobID at the read (nil when the job has no
	// row any more).
	Holder *leaseapi.Lease
}

// GroupFacts are what a store read of a group for a grant: its row, every
// slot row it has, and the store's clock.
type GroupFacts struct {
	Name      string
	Limit     int
	CreatedBy string
	CreatedAt time.Time
	// SlotToken is the last slot token the group issued.
	SlotToken int64
	Slots     []SlotFacts
	Now       time.Time
}

// SlotInUse reports whether s is in use at now: its grant was revoked and
// now is before the expiry it had then, or the grant is still the holder's
// current one and held (neither released nor expired). A slot that frees
// stays free (a lease is never revived), so a decision that a slot is free
// holds for as long as nobody else takes it.
func SlotInUse(s *SlotFacts, now time.Time) bool {
	if s.RevokedUntil != nil {
		return now.Before(*s.RevokedUntil)
	}
	h := s.Holder
	return h != nil && h.Token == s.JobToken && h.State != leaseapi.StateRevoked && h.ReleasedAt == nil && h.ExpiresAt.After(now)
}

// slotExpiry is when the in-use slot s frees by itself.
func slotExpiry(s *SlotFacts) time.Time {
	if s.RevokedUntil != nil {
		return *s.RevokedUntil
	}
	return s.Holder.ExpiresAt
}

// Group is g as the API shows it: its slots in use as holders, by slot.
func (g *GroupFacts) Group() leaseapi.Group {
	out := leaseapi.Group{Name: g.Name, Limit: g.Limit, CreatedBy: g.CreatedBy, CreatedAt: g.CreatedAt, Now: g.Now}
	for i := range g.Slots {
		s := &g.Slots[i]
		if !SlotInUse(s, g.Now) {
			continue
		}
		out.Held++
		h := leaseapi.GroupHolder{JobID: s.JobID, Token: s.JobToken, Slot: s.Slot, SlotToken: s.SlotToken, ExpiresAt: slotExpiry(s)}
		if s.Holder != nil {
			h.Owner = s.Holder.Owner
		}
		out.Holders = append(out.Holders, h)
	}
	slices.SortFunc(out.Holders, func(a, b leaseapi.GroupHolder) int { return a.Slot - b.Slot })
	return out
}

// takeSlot decides whether a new grant in g may take a slot at g.Now: the
// lowest free slot numbered up to the limit, with the next slot token of
// timeline, while the slots in use (those above a lowered limit included)
// are fewer than the limit; else the group_full refusal, with lease the
// job's lease (nil when it has none).
func takeSlot(g *GroupFacts, timeline int64, lease *leaseapi.Lease) (slot int, slotToken int64, refused error) {
	group := g.Group()
	if group.Held >= g.Limit {
		first := group.Holders[0].ExpiresAt
		for _, h := range group.Holders[1:] {
			if h.ExpiresAt.Before(first) {
				first = h.ExpiresAt
			}
		}
		if len(group.Holders) > leaseapi.MaxGroupFullHolders {
			group.Holders = group.Holders[:leaseapi.MaxGroupFullHolders]
		}
		return 0, 0, &leaseapi.GroupFullError{Group: group, RetryAfter: retryAfter(first.Sub(g.Now)), Lease: lease}
	}
	slot = 1
	for _, h := range group.Holders { // by slot, each slot once
		if h.Slot == slot {
			slot++
		}
	}
	return slot, TokenAfter(g.SlotToken, timeline), nil
}

// retryAfter is d rounded up to whole seconds, at least one.
func retryAfter(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// joinGroup completes the grant plan of a job read as f (f.Lease nil: it
// has none) with its group: the group p names, else the stored one. A
// grant in a group takes a slot (takeSlot) with the group's facts; without
// them (f.Group nil, or another group's) the plan is returned with
// NeedsGroup true, for the store to read the group and decide again.
func joinGroup(plan *AcquirePlan, p *leaseapi.AcquireParams, f *Facts) error {
	if f.Lease != nil {
		plan.Group = f.Lease.Group
	}
	if p.Group != nil {
		plan.Group = *p.Group
	}
	if plan.Group == "" {
		return nil
	}
	if f.Group == nil || f.Group.Name != plan.Group {
		return nil
	}
	for i := range f.Group.Slots {
		s := &f.Group.Slots[i]
		if s.JobID == plan.JobID && s.RevokedUntil == nil && (f.Lease == nil || s.JobToken > f.Lease.Token) && SlotInUse(s, f.Group.Now) {
			// A grant of the job itself, newer than the lease read, holds
			// a slot: the lease was read before that grant committed.
			return ErrFactsChanged
		}
	}
	var err error
	plan.Slot, plan.SlotToken, err = takeSlot(f.Group, f.Timeline, f.Lease)
	return err
}

// ErrFactsChanged: the facts of one decision disagree (the group read
// shows a grant of the job newer than the lease read); the store reads
// again and decides again.
var ErrFactsChanged = errors.New("the job's lease changed after it was read")

// NeedsGroup reports whether the plan is a grant in a group whose slot is
// not decided yet: the store reads the group (GroupFacts) and decides
// again.
func (p *AcquirePlan) NeedsGroup() bool { return p.Group != "" && !p.Renew && p.Slot == 0 }

// GroupRun is a grant made in a group, as the run history keeps it, for
// deciding whether the group was full at an instant.
type GroupRun struct {
	StartedAt time.Time
	Outcome   leaseapi.Outcome
	// EndedAt is when the run ended (nil while running).
	EndedAt *time.Time
	// HeldUntil is, for a running run, its grant's expiry; for a revoked
	// one, the expiry it had when revoked (nil when no longer known).
	HeldUntil *time.Time
}

// GroupFullAt reports whether runs, a group's grants around at, held at
// least limit slots at that instant: a missed tick of a job in a group so
// full was missed because of the limit (Run.GroupFull). A grant holds its
// slot from its start until its end; a running one until its expiry; a
// revoked one until the expiry it had.
func GroupFullAt(limit int, runs []GroupRun, at time.Time) bool {
	held := 0
	for _, r := range runs {
		end := r.EndedAt
		switch {
		case r.Outcome == leaseapi.OutcomeRunning:
			end = r.HeldUntil
		case r.Outcome == leaseapi.OutcomeRevoked && r.HeldUntil != nil && (end == nil || r.HeldUntil.After(*end)):
			end = r.HeldUntil
		}
		if !r.StartedAt.After(at) && (end == nil || end.After(at)) {
			held++
		}
	}
	return held >= limit
}
