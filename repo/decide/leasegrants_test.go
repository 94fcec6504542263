package decide

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// grantsAround is what a store reads of a job's run history for a plan
// (its grantsAroundQuery): the grants that started at or after from, and
// the newest one that started before it. history is in token order.
func grantsAround(history []Grant, from time.Time) []Grant {
	var out []Grant
	before := -1
	for i, g := range history {
		if g.StartedAt.Before(from) {
			if before < 0 || g.StartedAt.After(history[before].StartedAt) {
				before = i
			}
			continue
		}
		out = append(out, g)
	}
	if before >= 0 {
		out = append(out, history[before])
	}
	return out
}

// leaseOf is the job whose lease row holds the newest grant of history
// (token order): a revoked one has its token bumped past its run's, and a
// running one holds until expiresAt.
func leaseOf(history []Grant, revoked bool, expiresAt time.Time) Job {
	g := history[len(history)-1]
	j := Job{Token: g.Token, Tick: g.Tick, AcquiredAt: g.StartedAt, EndedAt: g.EndedAt, GrantTrigger: g.Trigger, ExpiresAt: expiresAt}
	if revoked {
		j.Token++
	}
	if g.EndedAt != nil {
		j.ExpiresAt = *g.EndedAt
	}
	return j
}

// TestLeaseGrantsDecideAsTheRunHistory: whenever the lease row decides a
// job's due ticks (Plan.LeaseGrants), the decision is the one the run
// history gives (the grants a store would read, grantsAround), case by
// case: ran, skipped by a held, expired, released or revoked grant,
// missed, an owed grant in the window, several due ticks.
func TestLeaseGrantsDecideAsTheRunHistory(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ptr := func(v time.Time) *time.Time { return &v }
	const grace = 2 * time.Second
	one := []time.Time{at(0)}
	three := []time.Time{at(0), at(10), at(20)}
	registered := Grant{Token: 1, Tick: ptr(at(-3600)), StartedAt: at(-3600), EndedAt: ptr(at(-3599))}
	tests := []struct {
		name      string
		due       []time.Time
		history   []Grant // token order; the last is the lease's grant
		revoked   bool
		expiresAt time.Time // of a running last grant
		pausedAt  *time.Time
		// decides: whether the lease row decides; want: the decision.
		decides                      bool
		ran, paused, skipped, missed int64
	}{
		{
			name: "RanItsOnlyDueTick", due: one, decides: true, ran: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(0)), StartedAt: at(0.5), EndedAt: ptr(at(1))}},
		},
		{
			name: "RanItsOnlyDueTickAndStillRunning", due: one, decides: true, ran: 1, expiresAt: at(30),
			history: []Grant{registered, {Token: 2, Tick: ptr(at(0)), StartedAt: at(1.5)}},
		},
		{
			name: "RanItsOnlyDueTickAskedEarly", due: one, decides: true, ran: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(0)), StartedAt: at(-90), EndedAt: ptr(at(-89))}},
		},
		{
			name: "MissedAfterAReleasedGrant", due: one, decides: true, missed: 1,
			history: []Grant{registered},
		},
		{
			name: "SkippedByAGrantReleasedAfterTheTick", due: one, decides: true, skipped: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120), EndedAt: ptr(at(5))}},
		},
		{
			name: "SkippedByAGrantHeldAtTheTick", due: one, decides: true, skipped: 1, expiresAt: at(30),
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120)}},
		},
		{
			name: "MissedAfterAGrantThatExpired", due: one, decides: true, missed: 1, expiresAt: at(-30),
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120)}},
		},
		{
			name: "SkippedByAGrantRevokedAfterTheTick", due: one, decides: true, skipped: 1, revoked: true,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120), EndedAt: ptr(at(1))}},
		},
		{
			name: "MissedAfterAGrantRevokedBeforeTheTick", due: one, decides: true, missed: 1, revoked: true,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120), EndedAt: ptr(at(-10))}},
		},
		{
			name: "PausedBeforeTheGraceEnded", due: one, decides: true, paused: 1, pausedAt: ptr(at(1)),
			history: []Grant{registered},
		},
		{
			// A catch-up grant started within the tick's grace: skipped,
			// which only the run history can tell.
			name: "OwedGrantInTheWindow", due: one, skipped: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-3600)), StartedAt: at(1), EndedAt: ptr(at(1.5)), Trigger: leaseapi.TriggerCatchUp}},
		},
		{
			// The next tick was granted already: whether the due one ran
			// is in the grant before it.
			name: "NextTickGrantedAlready", due: one, ran: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(0)), StartedAt: at(0), EndedAt: ptr(at(1))},
				{Token: 3, Tick: ptr(at(10)), StartedAt: at(10), EndedAt: ptr(at(11))}},
		},
		{
			name: "SeveralDueTicksAfterAGrantBeforeThem", due: three, decides: true, skipped: 2, missed: 1,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(-120)), StartedAt: at(-120), EndedAt: ptr(at(15))}},
		},
		{
			name: "SeveralDueTicksTheLastRan", due: three, ran: 1, missed: 2,
			history: []Grant{registered, {Token: 2, Tick: ptr(at(20)), StartedAt: at(20), EndedAt: ptr(at(21))}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := leaseOf(tt.history, tt.revoked, tt.expiresAt)
			j.Grace, j.PausedAt = grace, tt.pausedAt
			plan := Plan{Due: tt.due, Next: tt.due[len(tt.due)-1].Add(10 * time.Second)}
			want := Decide(&j, plan, grantsAround(tt.history, plan.GrantsFrom()))
			if want.Ran != tt.ran || want.Paused != tt.paused || want.Skipped != tt.skipped || want.Missed != tt.missed {
				t.Fatalf("from the run history: got ran %d paused %d skipped %d missed %d, want %d %d %d %d",
					want.Ran, want.Paused, want.Skipped, want.Missed, tt.ran, tt.paused, tt.skipped, tt.missed)
			}
			grants, ok := plan.LeaseGrants(&j)
			if ok != tt.decides {
				t.Fatalf("LeaseGrants: got decides %v, want %v", ok, tt.decides)
			}
			if !ok {
				return
			}
			if got := Decide(&j, plan, grants); !reflect.DeepEqual(got, want) {
				t.Errorf("from the lease: got %+v, want %+v (from the run history)", got, want)
			}
		})
	}
}

// TestLeaseGrantsNeedALease: a job read without its lease's grant (token
// 0) or with nothing due is never decided from the lease.
func TestLeaseGrantsNeedALease(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	if _, ok := (Plan{Due: []time.Time{t0}}).LeaseGrants(&Job{}); ok {
		t.Error("a job without its lease's grant: got decided from the lease")
	}
	if _, ok := (Plan{}).LeaseGrants(&Job{Token: 1, AcquiredAt: t0.Add(-time.Hour)}); ok {
		t.Error("nothing due: got decided from the lease")
	}
}

// TestLeaseGrantsRandomHistories: over many random run histories (grants
// in token order that never overlap, each ended by release, revocation or
// expiry, the newest maybe running, for due or other ticks, started by the
// schedule or an owed tick) and one to three due ticks, the lease decides
// as the run history whenever it decides, and both of its rules are used.
func TestLeaseGrantsRandomHistories(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	triggers := []leaseapi.Trigger{leaseapi.TriggerSchedule, leaseapi.TriggerCatchUp, leaseapi.TriggerManual}
	rng := rand.New(rand.NewPCG(20261204, 7))
	var before, ranOnly, decided int
	for i := range 50_000 {
		const grace = 2 * time.Second
		due := []time.Time{t0}
		for k := 1 + rng.IntN(3); len(due) < k; {
			due = append(due, due[len(due)-1].Add(10*time.Second))
		}
		// Grants from 3 minutes before the first due tick to 40 s after.
		var history []Grant
		start := -180_000 + rng.IntN(60_000)
		for tok := int64(1); start < 40_000 && (tok == 1 || rng.IntN(4) > 0); tok++ {
			g := Grant{Token: tok, StartedAt: ms(start), Trigger: triggers[rng.IntN(len(triggers))]}
			switch rng.IntN(3) {
			case 0:
				tick := due[rng.IntN(len(due))]
				g.Tick = &tick
			case 1:
				tick := ms(start - start%10_000)
				g.Tick = &tick
			}
			end := ms(start + 1 + rng.IntN(30_000))
			g.EndedAt = &end
			history = append(history, g)
			start += 1 + rng.IntN(30_000) + int(end.Sub(g.StartedAt)/time.Millisecond)
		}
		last := &history[len(history)-1]
		expiresAt := *last.EndedAt
		revoked := false
		switch rng.IntN(3) {
		case 0: // running, or expired and not taken over
			last.EndedAt = nil
		case 1:
			revoked = true
		}
		j := leaseOf(history, revoked, expiresAt)
		j.Grace = grace
		if rng.IntN(5) == 0 {
			p := ms(rng.IntN(30_000))
			j.PausedAt = &p
		}
		plan := Plan{Due: due, Next: due[len(due)-1].Add(10 * time.Second)}
		grants, ok := plan.LeaseGrants(&j)
		if !ok {
			continue
		}
		decided++
		if j.AcquiredAt.Before(plan.GrantsFrom()) {
			before++
		} else {
			ranOnly++
		}
		want := Decide(&j, plan, grantsAround(history, plan.GrantsFrom()))
		if got := Decide(&j, plan, grants); !reflect.DeepEqual(got, want) {
			t.Fatalf("history %d %+v, lease %+v, due %v: from the lease %+v, from the run history %+v", i, history, j, due, got, want)
		}
	}
	if before == 0 || ranOnly == 0 {
		t.Errorf("decided %d from the lease: %d by a grant before the window, %d by a grant for the only due tick; want both rules used", decided, before, ranOnly)
	}
}
