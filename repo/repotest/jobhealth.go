package repotest

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// testJobHealth: each field of JobHealth for jobs in every condition (an
// alerting policy and an ok one among them), the job id order and the
// limit with its truncation count. It reads every job of the database, so
// it runs while no other subtest writes.
func testJobHealth(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	run := func(job string, outcome leaseapi.Outcome) leaseapi.Lease {
		t.Helper()
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL})
		return b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: outcome})
	}
	healthy, failing, recovered, never := b.job("healthy"), b.job("failing"), b.job("recovered"), b.job("never")
	expired, takenOver, paused, overdue := b.job("expired"), b.job("taken-over"), b.job("paused"), b.job("overdue")

	healthyOK := run(healthy, leaseapi.OutcomeSucceeded)
	failingOK := run(failing, leaseapi.OutcomeSucceeded)
	run(failing, leaseapi.OutcomeFailed)
	failingLast := run(failing, leaseapi.OutcomeFailed)
	run(recovered, leaseapi.OutcomeFailed)
	run(recovered, leaseapi.OutcomeFailed)
	recoveredOK := run(recovered, leaseapi.OutcomeSucceeded)
	run(never, leaseapi.OutcomeFailed)
	// An expired grant nobody took over ends at its expiresAt, as one taken
	// over does; the grant that took over is still running.
	exp := b.acquire(t, leaseapi.AcquireParams{JobID: expired, Owner: a, TTL: shortTTL})
	first := b.acquire(t, leaseapi.AcquireParams{JobID: takenOver, Owner: a, TTL: shortTTL})
	b.waitForState(t, expired, leaseapi.StateExpired)
	b.waitForState(t, takenOver, leaseapi.StateExpired)
	b.acquire(t, leaseapi.AcquireParams{JobID: takenOver, Owner: b.owner("b"), TTL: longTTL})
	pausedOK := run(paused, leaseapi.OutcomeSucceeded)
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: paused}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	reg := b.acquire(t, leaseapi.AcquireParams{JobID: overdue, Owner: a, TTL: longTTL, Schedule: everySecond, Grace: shortGrace})
	registered := b.release(t, leaseapi.ReleaseParams{JobID: overdue, Owner: a, Token: reg.Token, Outcome: leaseapi.OutcomeSucceeded})
	b.sweepUntil(t, overdue, "a missed tick", func(l leaseapi.Lease) bool { return l.MissedTicks >= 1 })
	// A job whose policy alerts, for two reasons, and one whose policy is
	// ok: the policy is decided as it is set.
	alerting, policyOK := b.job("alerting"), b.job("policy-ok")
	run(alerting, leaseapi.OutcomeFailed)
	alertingLast := run(alerting, leaseapi.OutcomeFailed)
	policyOKLast := run(policyOK, leaseapi.OutcomeSucceeded)
	for job, p := range map[string]leaseapi.AlertPolicy{
		alerting: {ConsecutiveFailures: 2, FailureRate: &leaseapi.FailureRate{Threshold: 1, Runs: 2}},
		policyOK: {ConsecutiveFailures: 2},
	} {
		if _, err := b.store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: p}); err != nil {
			t.Fatalf("PutPolicy %s: %v", job, err)
		}
	}

	page, err := b.store.JobHealth(ctx, leaseapi.MaxJobHealthLimit)
	if err != nil {
		t.Fatalf("JobHealth: %v", err)
	}
	overdueLease := b.get(t, overdue) // nothing sweeps while this subtest runs
	if page.Truncated != 0 {
		t.Errorf("JobHealth(max): Truncated %d, want 0", page.Truncated)
	}
	if !slices.IsSortedFunc(page.Jobs, func(x, y leaseapi.JobHealth) int { return strings.Compare(x.JobID, y.JobID) }) {
		t.Error("JobHealth: jobs not in job id order")
	}
	got := make(map[string]leaseapi.JobHealth)
	for _, h := range page.Jobs {
		if strings.HasPrefix(h.JobID, b.prefix+"-") {
			got[h.JobID] = h
		}
	}
	ms := func(tm time.Time) time.Time { return tm.Truncate(time.Millisecond).UTC() }
	ended := func(l leaseapi.Lease) time.Time { return ms(*l.ReleasedAt) }
	lasted := func(start, end time.Time) time.Duration { return ms(end).Sub(ms(start)) }
	want := map[string]leaseapi.JobHealth{
		healthy: {JobID: healthy, LastSuccess: ended(healthyOK), LastFinish: ended(healthyOK),
			LastDuration: lasted(healthyOK.AcquiredAt, *healthyOK.ReleasedAt)},
		failing: {JobID: failing, LastSuccess: ended(failingOK), LastFinish: ended(failingLast),
			LastDuration: lasted(failingLast.AcquiredAt, *failingLast.ReleasedAt), ConsecutiveFailures: 2},
		recovered: {JobID: recovered, LastSuccess: ended(recoveredOK), LastFinish: ended(recoveredOK),
			LastDuration: lasted(recoveredOK.AcquiredAt, *recoveredOK.ReleasedAt)},
		never: {JobID: never, LastFinish: got[never].LastFinish, LastDuration: got[never].LastDuration, ConsecutiveFailures: 1},
		expired: {JobID: expired, LastFinish: ms(exp.ExpiresAt), LastDuration: lasted(exp.AcquiredAt, exp.ExpiresAt),
			ConsecutiveFailures: 1},
		takenOver: {JobID: takenOver, LastFinish: ms(first.ExpiresAt), LastDuration: lasted(first.AcquiredAt, first.ExpiresAt),
			ConsecutiveFailures: 1},
		paused: {JobID: paused, LastSuccess: ended(pausedOK), LastFinish: ended(pausedOK),
			LastDuration: lasted(pausedOK.AcquiredAt, *pausedOK.ReleasedAt), Paused: true},
		overdue: {JobID: overdue, LastSuccess: ms(*registered.ReleasedAt), LastFinish: ms(*registered.ReleasedAt),
			LastDuration: lasted(registered.AcquiredAt, *registered.ReleasedAt), Overdue: true, MissedTicks: overdueLease.MissedTicks},
		alerting: {JobID: alerting, LastFinish: ended(alertingLast), LastDuration: lasted(alertingLast.AcquiredAt, *alertingLast.ReleasedAt),
			ConsecutiveFailures: 2, AlertStatus: leaseapi.AlertAlerting,
			AlertReasons: []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonFailureRate}},
		policyOK: {JobID: policyOK, LastSuccess: ended(policyOKLast), LastFinish: ended(policyOKLast),
			LastDuration: lasted(policyOKLast.AcquiredAt, *policyOKLast.ReleasedAt), AlertStatus: leaseapi.AlertOK},
	}
	if got[never].LastFinish.IsZero() {
		t.Errorf("JobHealth %s: LastFinish zero after a failed run", never)
	}
	if len(got) != len(want) {
		t.Errorf("JobHealth: %d jobs of this subtest, want %d", len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; !reflect.DeepEqual(g, w) {
			t.Errorf("JobHealth %s:\n got %+v\nwant %+v", id, g, w)
		}
	}
	if page.Now.IsZero() {
		t.Error("JobHealth: Now is zero")
	}

	// The limit keeps the first jobs in order and counts the others.
	total := int64(len(page.Jobs))
	for _, limit := range []int{1, len(page.Jobs) - 1} {
		p, err := b.store.JobHealth(ctx, limit)
		if err != nil {
			t.Fatalf("JobHealth(%d): %v", limit, err)
		}
		if !reflect.DeepEqual(p.Jobs, page.Jobs[:limit]) || p.Truncated != total-int64(limit) {
			t.Errorf("JobHealth(%d): %d jobs, truncated %d; want the first %d of %d, truncated %d",
				limit, len(p.Jobs), p.Truncated, limit, total, total-int64(limit))
		}
	}
	for _, limit := range []int{0, -1, leaseapi.MaxJobHealthLimit + 1} {
		if _, err := b.store.JobHealth(ctx, limit); !errors.Is(err, leaseapi.ErrInvalid) {
			t.Errorf("JobHealth(%d): got %v, want ErrInvalid", limit, err)
		}
	}
}
