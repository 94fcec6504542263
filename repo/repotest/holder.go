package repotest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// testHolderRules: a heartbeat and a release are answered as repo/decide
// decides them (decide.PlanHeartbeat, decide.Release) on the lease as read
// just before the call: the store keeps no rule of its own. Each case
// leaves a job's lease in one state (held, expired with nobody taking
// over, released, revoked, taken over after expiry), reads it, and makes
// one call of the grant's holder, of another owner or with the next token;
// the answer must be the decision's (renewed, released, the retry's echo,
// or lease_lost with the lease read), and a refused call changes nothing.
func testHolderRules(t *testing.T, b *bundle) {
	ctx, a, other := t.Context(), b.owner("a"), b.owner("b")
	states := []struct {
		name string
		// setup leaves job in the state; it returns a's grant.
		setup func(job string) leaseapi.Lease
		// expires: the grant's TTL is short, and the case waits until the
		// lease shows expired before the read.
		expires bool
	}{
		{"Held", func(job string) leaseapi.Lease {
			return b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
		}, false},
		{"Expired", func(job string) leaseapi.Lease {
			return b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL, Tick: tickAt(0)})
		}, true},
		{"Released", func(job string) leaseapi.Lease {
			g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
			b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
			return g
		}, false},
		{"Revoked", func(job string) leaseapi.Lease {
			g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
			b.revoke(t, job)
			return g
		}, false},
		{"TakenOver", func(job string) leaseapi.Lease {
			g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL, Tick: tickAt(0)})
			b.waitForState(t, job, leaseapi.StateExpired)
			b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)})
			return g
		}, false},
	}
	callers := []struct {
		name  string
		owner func(g leaseapi.Lease) string
		token func(g leaseapi.Lease) int64
	}{
		{"Holder", func(leaseapi.Lease) string { return a }, func(g leaseapi.Lease) int64 { return g.Token }},
		{"OtherOwner", func(leaseapi.Lease) string { return other }, func(g leaseapi.Lease) int64 { return g.Token }},
		{"NextToken", func(leaseapi.Lease) string { return a }, func(g leaseapi.Lease) int64 { return g.Token + 1 }},
	}
	type call struct {
		name, job string
		grant     leaseapi.Lease
		owner     string
		token     int64
		beat      bool // a heartbeat, else a release
	}
	var calls []call
	var expiring []string
	for _, s := range states {
		for _, c := range callers {
			for _, beat := range []bool{true, false} {
				op := "Release"
				if beat {
					op = "Heartbeat"
				}
				name := s.name + "/" + c.name + "/" + op
				job := b.job(fmt.Sprintf("holder-%s-%s-%s", s.name, c.name, op))
				g := s.setup(job)
				if s.expires {
					expiring = append(expiring, job)
				}
				calls = append(calls, call{name: name, job: job, grant: g, owner: c.owner(g), token: c.token(g), beat: beat})
			}
		}
	}
	for _, job := range expiring {
		b.waitForState(t, job, leaseapi.StateExpired)
	}
	for _, c := range calls {
		read := b.get(t, c.job)
		if c.beat {
			p := &leaseapi.HeartbeatParams{JobID: c.job, Owner: c.owner, Token: c.token}
			plan, want := decide.PlanHeartbeat(p, read)
			got, err := b.store.Heartbeat(ctx, p)
			checkHolderAnswer(t, b, c.name, read, got, err, want)
			if want == nil && err == nil && (got.State != leaseapi.StateHeld || got.Token != read.Token || got.TTL != plan.TTL ||
				!got.ExpiresAt.Equal(got.RenewedAt.Add(plan.TTL)) || got.RenewedAt.Before(read.RenewedAt)) {
				t.Errorf("%s: got state %s token %d ttl %v renewed %s expires %s; want held, token %d, ttl %v, expiring ttl after its renewal",
					c.name, got.State, got.Token, got.TTL, fmtTime(&got.RenewedAt), fmtTime(&got.ExpiresAt), read.Token, plan.TTL)
			}
			continue
		}
		p := &leaseapi.ReleaseParams{JobID: c.job, Owner: c.owner, Token: c.token, Outcome: leaseapi.OutcomeSucceeded}
		echo, completed, want := decide.Release(p, read)
		got, err := b.store.Release(ctx, p)
		checkHolderAnswer(t, b, c.name, read, got, err, want)
		switch {
		case want != nil || err != nil:
		case echo:
			checkLease(t, c.name+": the retry's echo", got, read)
		case got.State != leaseapi.StateReleased || got.Token != read.Token || got.LastOutcome != p.Outcome ||
			!equalTimePtr(got.LastCompletedTick, completed):
			t.Errorf("%s: got state %s token %d outcome %s lastCompletedTick %s; want released, token %d, %s, %s",
				c.name, got.State, got.Token, got.LastOutcome, fmtTime(got.LastCompletedTick), read.Token, p.Outcome, fmtTime(completed))
		}
	}
}

// checkHolderAnswer checks the store's answer got, err to a call decided
// want (nil: answered with a lease) on the lease read: a refusal is the
// same lease_lost, with the lease as read, which the call left as it was.
func checkHolderAnswer(t *testing.T, b *bundle, name string, read, got leaseapi.Lease, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: got error %v, want the lease (decide answers it)", name, err)
		}
		return
	}
	if !errors.Is(want, leaseapi.ErrLeaseLost) {
		t.Fatalf("%s: decide refused with %v; the suite knows lease_lost only", name, want)
	}
	var ce *leaseapi.ConflictError
	if !errors.Is(err, leaseapi.ErrLeaseLost) || !errors.As(err, &ce) {
		t.Errorf("%s: got %+v, %v; want lease_lost (decide refuses it)", name, got, err)
		return
	}
	checkLease(t, name+": the refusal's lease", ce.Lease, read)
	checkLease(t, name+": Get after the refusal", b.get(t, read.JobID), read)
}
