package repotest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The concurrency group cases of the store suite (RunStoreSuite).

// putGroup creates group name with limit, or changes its limit.
func (b *bundle) putGroup(t *testing.T, name string, limit int) leaseapi.Group {
	t.Helper()
	g, err := b.store.PutGroup(t.Context(), &leaseapi.PutGroupParams{Name: name, Limit: limit, By: "ops"})
	if err != nil {
		t.Fatalf("PutGroup(%s, %d): %v", name, limit, err)
	}
	return g
}

// inGroup is an acquire of job by owner in group.
func inGroup(job, owner, group string, ttl time.Duration) leaseapi.AcquireParams {
	return leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: ttl, Group: &group}
}

// wantGroupFull checks that err is a *leaseapi.GroupFullError of group
// with held slots in use and returns it.
func wantGroupFull(t *testing.T, op string, err error, group string, held int) *leaseapi.GroupFullError {
	t.Helper()
	var full *leaseapi.GroupFullError
	if !errors.As(err, &full) || !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Fatalf("%s: got error %v, want group_full", op, err)
	}
	if full.Group.Name != group || full.Group.Held != held || len(full.Group.Holders) != held || full.RetryAfter < time.Second {
		t.Fatalf("%s: got group %+v retry after %v, want group %s with %d holders, retry after >= 1s",
			op, full.Group, full.RetryAfter, group, held)
	}
	return full
}

// testGroupCRUD: a group is created, read, listed, changed and deleted;
// a group a job is in cannot be deleted until the job leaves it.
func testGroupCRUD(t *testing.T, b *bundle) {
	name := b.job("crud")
	g := b.putGroup(t, name, 2)
	if g.Name != name || g.Limit != 2 || g.Held != 0 || len(g.Holders) != 0 || g.CreatedBy != "ops" || g.CreatedAt.IsZero() {
		t.Fatalf("PutGroup: got %+v, want %s with limit 2, no holder, created by ops", g, name)
	}
	if g = b.putGroup(t, name, 5); g.Limit != 5 || g.CreatedBy != "ops" {
		t.Fatalf("PutGroup again: got %+v, want limit 5", g)
	}
	if got, err := b.store.Group(t.Context(), name); err != nil || got.Limit != 5 {
		t.Fatalf("Group(%s): got %+v, %v; want limit 5", name, got, err)
	}
	if _, err := b.store.Group(t.Context(), b.job("none")); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Fatalf("Group(unknown): got %v, want ErrNotFound", err)
	}
	other := b.job("crud2")
	b.putGroup(t, other, 1)
	page, err := b.store.Groups(t.Context(), &leaseapi.GroupListParams{Prefix: b.job("crud"), Limit: 1})
	if err != nil || len(page.Groups) != 1 || page.Groups[0].Name != name || !page.More {
		t.Fatalf("Groups(prefix, limit 1): got %+v, %v; want %s and more", page, err, name)
	}
	page, err = b.store.Groups(t.Context(), &leaseapi.GroupListParams{Prefix: b.job("crud"), After: name, Limit: 10})
	if err != nil || len(page.Groups) != 1 || page.Groups[0].Name != other || page.More {
		t.Fatalf("Groups(after %s): got %+v, %v; want %s alone", name, page, err, other)
	}

	job := b.job("crud-member")
	l := b.acquire(t, inGroup(job, b.owner("a"), name, longTTL))
	if l.Group != name || l.Slot != 1 || l.SlotToken < 1 {
		t.Fatalf("Acquire in %s: got group %q slot %d slot token %d, want the group, slot 1", name, l.Group, l.Slot, l.SlotToken)
	}
	var inUse *leaseapi.GroupInUseError
	if err := b.store.DeleteGroup(t.Context(), name); !errors.As(err, &inUse) || !errors.Is(err, leaseapi.ErrGroupInUse) || inUse.JobID != job {
		t.Fatalf("DeleteGroup while %s is in it: got %v, want group_in_use naming it", job, err)
	}
	if l, err := b.store.LeaveGroup(t.Context(), job); err != nil || l.Group != "" {
		t.Fatalf("LeaveGroup(%s): got %+v, %v; want no group", job, l, err)
	}
	if err := b.store.DeleteGroup(t.Context(), name); err != nil {
		t.Fatalf("DeleteGroup after the job left: %v", err)
	}
	if err := b.store.DeleteGroup(t.Context(), name); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Fatalf("DeleteGroup again: got %v, want ErrNotFound", err)
	}
	if _, err := b.store.LeaveGroup(t.Context(), b.job("crud-none")); !errors.Is(err, leaseapi.ErrNotFound) {
		t.Fatalf("LeaveGroup(unknown job): got %v, want ErrNotFound", err)
	}
	for _, bad := range []leaseapi.PutGroupParams{{Name: name, Limit: 0}, {Name: name, Limit: 10001}, {Name: "-x", Limit: 1}} {
		if _, err := b.store.PutGroup(t.Context(), &bad); !errors.Is(err, leaseapi.ErrInvalid) {
			t.Errorf("PutGroup(%+v): got %v, want ErrInvalid", bad, err)
		}
	}
	unknown := b.job("crud-unknown")
	_, err = b.store.Acquire(t.Context(), new(inGroup(b.job("crud-x"), b.owner("a"), unknown, longTTL)))
	var invalid *leaseapi.InvalidError
	if !errors.As(err, &invalid) || invalid.Field != "group" {
		t.Fatalf("Acquire in an unknown group: got %v, want an invalid group", err)
	}
}

// testGroupLimit: many jobs' contenders at once get exactly limit grants,
// in distinct slots 1..limit with distinct slot tokens; every other
// contender is refused (group_full or lease_held) and nothing more is
// granted while the holders hold.
func testGroupLimit(t *testing.T, b *bundle) {
	const limit, jobs, contenders = 3, 10, 6
	group := b.job("limit")
	b.putGroup(t, group, limit)
	type result struct {
		lease leaseapi.Lease
		err   error
	}
	results := make([]result, jobs*contenders)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			p := inGroup(b.job(fmt.Sprint("limit-", i%jobs)), b.owner(fmt.Sprint(i)), group, longTTL)
			l, err := b.store.Acquire(t.Context(), &p)
			results[i] = result{l, err}
		})
	}
	close(start)
	wg.Wait()
	slots, slotTokens := map[int]string{}, map[int64]bool{}
	for _, r := range results {
		switch {
		case r.err == nil:
			if prev, dup := slots[r.lease.Slot]; dup || r.lease.Slot < 1 || r.lease.Slot > limit {
				t.Fatalf("grant of %s in slot %d (held by %q already): want a free slot 1..%d", r.lease.JobID, r.lease.Slot, prev, limit)
			}
			if slotTokens[r.lease.SlotToken] {
				t.Fatalf("grant of %s: slot token %d issued twice", r.lease.JobID, r.lease.SlotToken)
			}
			slots[r.lease.Slot], slotTokens[r.lease.SlotToken] = r.lease.JobID, true
		case errors.Is(r.err, leaseapi.ErrGroupFull), errors.Is(r.err, leaseapi.ErrLeaseHeld):
		default:
			t.Fatalf("Acquire: got %v, want a grant, group_full or lease_held", r.err)
		}
	}
	if len(slots) != limit {
		t.Fatalf("got %d grants %v, want exactly %d", len(slots), slots, limit)
	}
	g, err := b.store.Group(t.Context(), group)
	if err != nil || g.Held != limit || len(g.Holders) != limit {
		t.Fatalf("Group: got %+v, %v; want %d holders", g, err, limit)
	}
	for i, h := range g.Holders {
		if h.Slot != i+1 || slots[h.Slot] != h.JobID || h.Owner == "" || h.ExpiresAt.IsZero() {
			t.Errorf("holder %d: got %+v, want slot %d held by %s", i, h, i+1, slots[i+1])
		}
	}
	var free string
	for j := range jobs {
		if job := b.job(fmt.Sprint("limit-", j)); !holds(slots, job) {
			free = job
			break
		}
	}
	_, err = b.store.Acquire(t.Context(), new(inGroup(free, b.owner("late"), group, longTTL)))
	wantGroupFull(t, "a later acquire of a free job", err, group, limit)
}

func holds(slots map[int]string, job string) bool {
	for _, j := range slots {
		if j == job {
			return true
		}
	}
	return false
}

// testGroupSlotFreed: a slot frees when its grant is released, when it
// expires by the store's clock, and, when revoked, only once the revoked
// grant's expiry has passed; slot tokens increase with every grant.
func testGroupSlotFreed(t *testing.T, b *bundle) {
	group := b.job("freed")
	b.putGroup(t, group, 1)
	a, c := b.job("freed-a"), b.job("freed-c")
	first := b.acquire(t, inGroup(a, b.owner("a"), group, longTTL))
	_, err := b.store.Acquire(t.Context(), new(inGroup(c, b.owner("c"), group, longTTL)))
	full := wantGroupFull(t, "while a holds", err, group, 1)
	if h := full.Group.Holders[0]; h.JobID != a || h.Token != first.Token || h.Slot != 1 || h.SlotToken != first.SlotToken {
		t.Fatalf("group_full holder: got %+v, want %s's grant", h, a)
	}
	if full.Lease != nil {
		t.Fatalf("group_full of a job with no lease: got lease %+v, want none", full.Lease)
	}

	// Released.
	b.release(t, leaseapi.ReleaseParams{JobID: a, Owner: b.owner("a"), Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	second := b.acquire(t, inGroup(c, b.owner("c"), group, shortTTL))
	if second.Slot != 1 || second.SlotToken <= first.SlotToken {
		t.Fatalf("after the release: got slot %d token %d, want slot 1 and a slot token above %d", second.Slot, second.SlotToken, first.SlotToken)
	}
	// Expired (the store's clock decides).
	b.waitForState(t, c, leaseapi.StateExpired)
	third := b.acquire(t, inGroup(a, b.owner("a"), group, time.Second))
	if third.SlotToken <= second.SlotToken {
		t.Fatalf("after the expiry: got slot token %d, want above %d", third.SlotToken, second.SlotToken)
	}
	// Revoked: in use until the revoked grant's expiry.
	b.revoke(t, a)
	_, err = b.store.Acquire(t.Context(), new(inGroup(c, b.owner("c"), group, longTTL)))
	full = wantGroupFull(t, "after the revocation, before the revoked grant's expiry", err, group, 1)
	if h := full.Group.Holders[0]; h.JobID != a || !h.ExpiresAt.Equal(third.ExpiresAt) {
		t.Fatalf("group_full holder after the revocation: got %+v, want %s until %s", h, a, third.ExpiresAt)
	}
	if full.Lease == nil || full.Lease.JobID != c {
		t.Fatalf("group_full of a job with a lease: got lease %+v, want %s's", full.Lease, c)
	}
	b.waitClockPast(t, third.ExpiresAt)
	fourth := b.acquire(t, inGroup(c, b.owner("c"), group, longTTL))
	if fourth.SlotToken <= third.SlotToken {
		t.Fatalf("after the revoked grant's expiry: got slot token %d, want above %d", fourth.SlotToken, third.SlotToken)
	}
	runs := b.runs(t, c, 1)
	if len(runs) != 1 || runs[0].Group != group || runs[0].Slot != 1 || runs[0].SlotToken != fourth.SlotToken {
		t.Fatalf("the grant's run: got %+v, want group %s slot 1 slot token %d", runs, group, fourth.SlotToken)
	}
}

// testGroupHolderNeverRefused: the holder's renewal and its retried
// acquire of the same tick are granted while the group is full, and a
// renewal never moves the job to another group.
func testGroupHolderNeverRefused(t *testing.T, b *bundle) {
	group, other := b.job("holder"), b.job("holder-other")
	b.putGroup(t, group, 1)
	b.putGroup(t, other, 1)
	job, owner, tick := b.job("holder-a"), b.owner("a"), tickAt(0)
	p := inGroup(job, owner, group, longTTL)
	p.Tick = tick
	first := b.acquire(t, p)
	again := b.acquire(t, p)
	if again.Token != first.Token || again.Slot != first.Slot || again.SlotToken != first.SlotToken {
		t.Fatalf("the holder's retry: got token %d slot %d/%d, want its grant's %d slot %d/%d",
			again.Token, again.Slot, again.SlotToken, first.Token, first.Slot, first.SlotToken)
	}
	moved := p
	moved.Group = &other
	if l := b.acquire(t, moved); l.Group != group || l.SlotToken != first.SlotToken {
		t.Fatalf("a renewal naming another group: got group %q slot token %d, want %s unchanged", l.Group, l.SlotToken, group)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	// A new grant moves it.
	l := b.acquire(t, inGroup(job, owner, other, longTTL))
	if l.Group != other || l.Slot != 1 {
		t.Fatalf("a new grant naming another group: got group %q slot %d, want %s slot 1", l.Group, l.Slot, other)
	}
	if g, err := b.store.Group(t.Context(), group); err != nil || g.Held != 0 {
		t.Fatalf("the old group after the move: got %+v, %v; want no holder", g, err)
	}
	// Omitting the group keeps it; "" leaves it.
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	if l = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL}); l.Group != other || l.Slot != 1 {
		t.Fatalf("an acquire without group: got group %q slot %d, want %s kept", l.Group, l.Slot, other)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	if l = b.acquire(t, inGroup(job, owner, "", longTTL)); l.Group != "" || l.Slot != 0 || l.SlotToken != 0 {
		t.Fatalf("an acquire with group \"\": got group %q slot %d, want none", l.Group, l.Slot)
	}
}

// testGroupLowerLimit: lowering the limit retires the slots above it as
// they free; no grant is made while the slots in use reach the new limit.
func testGroupLowerLimit(t *testing.T, b *bundle) {
	group := b.job("lower")
	b.putGroup(t, group, 2)
	a, c, d := b.job("lower-a"), b.job("lower-c"), b.job("lower-d")
	la := b.acquire(t, inGroup(a, b.owner("a"), group, longTTL))
	lc := b.acquire(t, inGroup(c, b.owner("c"), group, longTTL))
	if g := b.putGroup(t, group, 1); g.Held != 2 || g.Limit != 1 {
		t.Fatalf("PutGroup lowering the limit: got %+v, want limit 1 with 2 held", g)
	}
	b.release(t, leaseapi.ReleaseParams{JobID: a, Owner: b.owner("a"), Token: la.Token, Outcome: leaseapi.OutcomeSucceeded})
	_, err := b.store.Acquire(t.Context(), new(inGroup(d, b.owner("d"), group, longTTL)))
	wantGroupFull(t, "with slot 2 in use over the new limit of 1", err, group, 1)
	b.release(t, leaseapi.ReleaseParams{JobID: c, Owner: b.owner("c"), Token: lc.Token, Outcome: leaseapi.OutcomeFailed})
	if l := b.acquire(t, inGroup(d, b.owner("d"), group, longTTL)); l.Slot != 1 {
		t.Fatalf("after every slot freed: got slot %d, want 1", l.Slot)
	}
	_, err = b.store.Acquire(t.Context(), new(inGroup(a, b.owner("a"), group, longTTL)))
	wantGroupFull(t, "a second grant under the limit of 1", err, group, 1)
}

// testGroupOwedTick: an owed (manual) tick refused for the group stays
// owed, and is claimed once a slot frees.
func testGroupOwedTick(t *testing.T, b *bundle) {
	group := b.job("owed")
	b.putGroup(t, group, 1)
	job, blocker := b.job("owed-job"), b.job("owed-blocker")
	const hourly = "@every 1h"
	hour := b.dbClock(t).Truncate(time.Hour)
	p := inGroup(job, b.owner("sched"), group, longTTL)
	p.Tick, p.Schedule, p.Grace = &hour, hourly, time.Minute
	first := b.acquire(t, p)
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: b.owner("sched"), Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	held := b.acquire(t, inGroup(blocker, b.owner("b"), group, longTTL))
	m := wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: job, By: "ops"}))
	claim := leaseapi.AcquireParams{JobID: job, Owner: b.owner("claim"), TTL: longTTL, Tick: &m}
	_, err := b.store.Acquire(t.Context(), &claim)
	wantGroupFull(t, "the claim of the manual tick while the group is full", err, group, 1)
	if o := b.owed(t, job); len(o) != 1 || !o[0].Tick.Equal(m) {
		t.Fatalf("Owed after the refused claim: got %+v, want the manual tick %s", o, fmtTime(&m))
	}
	b.release(t, leaseapi.ReleaseParams{JobID: blocker, Owner: b.owner("b"), Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	l := b.acquire(t, claim)
	if !equalTimePtr(l.Tick, &m) || l.Group != group || l.OwedTick != nil {
		t.Fatalf("the claim after the slot freed: got tick %s group %q owed %s, want the manual tick in %s, owing nothing",
			fmtTime(l.Tick), l.Group, fmtTime(l.OwedTick), group)
	}
}

// testGroupFullMissed: a missed tick of a job whose group had every slot
// in use when the tick's grace ended is recorded with GroupFull; one of a
// job whose group had a free slot is not.
func testGroupFullMissed(t *testing.T, b *bundle) {
	full, free := b.job("gfm-full"), b.job("gfm-free")
	b.putGroup(t, full, 1)
	b.putGroup(t, free, 1)
	inFull, inFree := b.job("gfm-a"), b.job("gfm-b")
	for job, group := range map[string]string{inFull: full, inFree: free} {
		p := inGroup(job, b.owner("registrar"), group, longTTL)
		p.Schedule, p.Grace = everySecond, shortGrace
		l := b.acquire(t, p)
		b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: p.Owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	}
	blocker := b.acquire(t, inGroup(b.job("gfm-blocker"), b.owner("b"), full, longTTL))
	for _, job := range []string{inFull, inFree} {
		b.sweepUntil(t, job, "three missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 3 })
		if _, err := b.store.ForgetSchedule(t.Context(), job); err != nil {
			t.Fatalf("ForgetSchedule(%s): %v", job, err)
		}
	}
	var fullMissed int
	for _, job := range []string{inFull, inFree} {
		for _, r := range b.runs(t, job, 1000) {
			if r.Outcome != leaseapi.OutcomeMissed {
				continue
			}
			want := job == inFull && !r.EndedAt.Before(blocker.AcquiredAt)
			if r.GroupFull != want {
				t.Errorf("%s: missed run of tick %s ending %s: got groupFull %v, want %v (the blocker held %s's only slot from %s)",
					job, fmtTime(r.Tick), fmtTime(r.EndedAt), r.GroupFull, want, full, fmtTime(&blocker.AcquiredAt))
			}
			if want {
				fullMissed++
			}
		}
	}
	if fullMissed == 0 {
		t.Fatalf("no missed run of %s ended after the blocker's grant at %s", inFull, fmtTime(&blocker.AcquiredAt))
	}
}
