package checker

import (
	"fmt"
	"sort"
	"time"
)

// slotHold is a grant of a group's job and the part of the database
// clock's timeline during which it certainly held its slot.
type slotHold struct {
	run Run
	// from is the grant (the run's start); until is a lower bound of when
	// the slot freed: the release, the expiry (the grant's ttl, extended
	// by every heartbeat known to have succeeded), or for a revoked grant
	// the expiry it had when it was revoked.
	from, until time.Time
}

// holds reports whether h held its slot at t: from its start, up to but
// not including until (a slot whose grant expires at t is free at t).
func (h *slotHold) holds(t time.Time) bool {
	return !t.Before(h.from) && t.Before(h.until)
}

// checkGroups is I13: no grant of a group's job, acknowledged or not, is
// made while the group's slots in use reach its limit at that instant of
// the database clock. The run history has every grant with its start
// (the database clock) and its group, slot and slot token; a grant holds
// its slot at least until the earliest of its release and the expiry the
// clients can prove (see holdUntil), so a grant made while Limit others
// certainly held slots broke the limit. Besides: every grant of a
// member job took a slot of its group numbered from 1 to the limit; slot
// tokens strictly increase per group in grant (insertion) order; and two
// grants that took the same slot never held it at once.
func checkGroups(h *History, idx *index, r *Report) {
	if len(h.Groups) == 0 {
		return
	}
	r.Stats.GroupPeak = make(map[string]int, len(h.Groups))
	for i := range h.Ops {
		if o := &h.Ops[i]; o.Kind == Acquire && o.Result == ResultGroupFull {
			r.Stats.GroupFullRefusals++
		}
	}
	groupOf := make(map[string]*Group)
	for i := range h.Groups {
		for _, job := range h.Groups[i].Jobs {
			groupOf[job] = &h.Groups[i]
		}
	}
	holds := make(map[string][]*slotHold)
	for _, run := range h.Runs {
		g := groupOf[run.Job]
		if g == nil {
			if run.Group != "" {
				r.add("I13", run.Job, "token %d was granted in group %q, which the job is not a member of", run.Token, run.Group)
			}
			continue
		}
		if run.Group != g.Name {
			r.add("I13", run.Job, "token %d (%s at %s) was granted outside the job's group %q (run group %q)",
				run.Token, run.Owner, fmtTime(run.StartedAt), g.Name, run.Group)
			continue
		}
		r.Stats.GroupGrants++
		if run.Slot < 1 || run.Slot > g.Limit || run.SlotToken <= 0 {
			r.add("I13", run.Job, "token %d (%s at %s) took slot %d with slot token %d of group %q, whose limit is %d",
				run.Token, run.Owner, fmtTime(run.StartedAt), run.Slot, run.SlotToken, g.Name, g.Limit)
		}
		holds[g.Name] = append(holds[g.Name], &slotHold{run: run, from: run.StartedAt, until: holdUntil(h, idx, run)})
	}
	for i := range h.Groups {
		g := &h.Groups[i]
		hs := holds[g.Name]
		checkGroupLimit(g, hs, r)
		checkSlotTokens(g, hs, r)
		checkSlots(g, hs, r)
	}
}

// groupFullAt returns whether the group of a member job had every slot
// held at an instant, by the slot holds of its grants in the run history
// (lower bounds: a group they show full was full).
func groupFullAt(h *History, idx *index) func(job string, t time.Time) bool {
	groupOf := make(map[string]*Group)
	for i := range h.Groups {
		for _, job := range h.Groups[i].Jobs {
			groupOf[job] = &h.Groups[i]
		}
	}
	holds := make(map[string][]*slotHold)
	for _, run := range h.Runs {
		if g := groupOf[run.Job]; g != nil && run.Group == g.Name {
			holds[g.Name] = append(holds[g.Name], &slotHold{run: run, from: run.StartedAt, until: holdUntil(h, idx, run)})
		}
	}
	return func(job string, t time.Time) bool {
		g := groupOf[job]
		if g == nil {
			return false
		}
		n := 0
		for _, hd := range holds[g.Name] {
			if hd.holds(t) {
				n++
			}
		}
		return n >= g.Limit
	}
}

// grantedBefore orders the grants of one group as they were made: by
// start, and at one instant by insertion (the run's id).
func grantedBefore(a, b *slotHold) bool {
	if !a.from.Equal(b.from) {
		return a.from.Before(b.from)
	}
	return a.run.ID < b.run.ID
}

// checkGroupLimit: at each grant of g, fewer than g.Limit other grants
// held a slot. Only grants made earlier count: one made at the same
// instant but inserted later did not exist yet.
func checkGroupLimit(g *Group, hs []*slotHold, r *Report) {
	sorted := append([]*slotHold(nil), hs...)
	sort.Slice(sorted, func(i, j int) bool { return grantedBefore(sorted[i], sorted[j]) })
	for i, cur := range sorted {
		var in []*slotHold
		for _, prev := range sorted[:i] {
			if prev.holds(cur.from) {
				in = append(in, prev)
			}
		}
		if len(in)+1 > r.Stats.GroupPeak[g.Name] {
			r.Stats.GroupPeak[g.Name] = len(in) + 1
		}
		if len(in) < g.Limit {
			continue
		}
		var names []string
		for _, p := range in {
			names = append(names, fmt.Sprintf("%s token %d slot %d (%s to at least %s)",
				p.run.Job, p.run.Token, p.run.Slot, fmtTime(p.from), fmtTime(p.until)))
		}
		r.add("I13", cur.run.Job, "token %d (%s) was granted at %s in group %q (limit %d) while %d slots were in use: %s",
			cur.run.Token, cur.run.Owner, fmtTime(cur.from), g.Name, g.Limit, len(in), listed(names))
	}
}

// checkSlotTokens: the slot tokens of g strictly increase in grant order
// (the run history's insertion order).
func checkSlotTokens(g *Group, hs []*slotHold, r *Report) {
	sorted := append([]*slotHold(nil), hs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].run.ID < sorted[j].run.ID })
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1].run, sorted[i].run
		if cur.SlotToken <= prev.SlotToken {
			r.add("I13", cur.Job, "group %q: slot token %d (token %d at %s) was issued after slot token %d (%s token %d at %s)",
				g.Name, cur.SlotToken, cur.Token, fmtTime(cur.StartedAt), prev.SlotToken, prev.Job, prev.Token, fmtTime(prev.StartedAt))
		}
	}
}

// checkSlots: two grants that took the same slot of g never held it at
// once.
func checkSlots(g *Group, hs []*slotHold, r *Report) {
	bySlot := make(map[int][]*slotHold)
	for _, h := range hs {
		bySlot[h.run.Slot] = append(bySlot[h.run.Slot], h)
	}
	for slot, list := range bySlot {
		sort.Slice(list, func(i, j int) bool { return grantedBefore(list[i], list[j]) })
		for i := 1; i < len(list); i++ {
			prev, cur := list[i-1], list[i]
			if prev.holds(cur.from) {
				r.add("I13", cur.run.Job, "group %q slot %d: token %d (%s) took it at %s while %s token %d held it until at least %s",
					g.Name, slot, cur.run.Token, cur.run.Owner, fmtTime(cur.from), prev.run.Job, prev.run.Token, fmtTime(prev.until))
			}
		}
	}
}

// holdUntil is a lower bound of when the grant of run freed its slot, on
// the database clock.
//
//   - The grant expired at its start plus its ttl at the earliest: the ttl
//     of its owner's last acquire of the job sent before the grant (the
//     acquire that made it, answered or not; the server's default, TTL,
//     when it sent none). Each heartbeat or renewal of the grant that
//     succeeded moved the expiry to at least its send time plus its ttl:
//     the store added the ttl to its clock when the call reached it.
//   - A run that ended released freed the slot at its end, if that came
//     before the expiry (a late release, after the expiry, does not hold
//     the slot back: it had freed).
//   - A run that ended expired says when: its end is the expiry.
//   - A revoked run held the slot until the expiry it had when it was
//     revoked: the revocation itself does not free it.
//
// Times the clients took are on the same clock as the database's (one
// host), up to clockTolerance, which the bound gives away.
func holdUntil(h *History, idx *index, run Run) time.Time {
	if run.Outcome == "expired" && !run.EndedAt.IsZero() {
		return run.EndedAt
	}
	var ttl time.Duration
	var sent time.Time
	for _, o := range idx.byJob[run.Job] {
		if o.Kind == Acquire && o.Owner == run.Owner && !o.Call.After(run.StartedAt.Add(clockTolerance)) && !o.Call.Before(sent) {
			sent, ttl = o.Call, o.TTL
			if ttl <= 0 {
				ttl = h.TTL
			}
		}
	}
	until := run.StartedAt.Add(ttl)
	for _, o := range idx.byJob[run.Job] {
		if o.Result != ResultOK || o.Lease == nil || o.Lease.Token != run.Token || o.Lease.Owner != run.Owner || o.Owner != run.Owner {
			continue
		}
		if o.Kind != Acquire && (o.Kind != Heartbeat || o.Token != run.Token) {
			continue
		}
		d := o.TTL
		if d <= 0 {
			d = o.Lease.TTL
		}
		if e := o.Call.Add(d - clockTolerance); e.After(until) {
			until = e
		}
	}
	switch run.Outcome {
	case "succeeded", "failed", "discarded":
		if !run.EndedAt.IsZero() && run.EndedAt.Before(until) {
			until = run.EndedAt
		}
	}
	if until.Before(run.StartedAt) {
		return run.StartedAt
	}
	return until
}
