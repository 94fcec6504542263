package repotest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The alert policy cases of the store suite (RunStoreSuite).

// putPolicy sets job's policy.
func (b *bundle) putPolicy(t *testing.T, job string, p leaseapi.AlertPolicy) leaseapi.JobPolicy {
	t.Helper()
	jp, err := b.store.PutPolicy(t.Context(), &leaseapi.PutPolicyParams{JobID: job, Policy: p, By: "ops"})
	if err != nil {
		t.Fatalf("PutPolicy(%s, %+v): %v", job, p, err)
	}
	return jp
}

// wantPolicy checks that job's policy and its lease both stand at status
// with reasons.
func (b *bundle) wantPolicy(t *testing.T, op, job string, status leaseapi.AlertStatus, reasons ...leaseapi.AlertReason) leaseapi.JobPolicy {
	t.Helper()
	jp, err := b.store.Policy(t.Context(), job)
	if err != nil {
		t.Fatalf("%s: Policy(%s): %v", op, job, err)
	}
	if jp.State.Status != status || !slices.Equal(jp.State.Reasons, reasons) {
		t.Fatalf("%s: policy of %s is %s %v, want %s %v", op, job, jp.State.Status, jp.State.Reasons, status, reasons)
	}
	if l := b.get(t, job); l.AlertStatus != status || !slices.Equal(l.AlertReasons, reasons) {
		t.Fatalf("%s: lease of %s shows %q %v, want %s %v", op, job, l.AlertStatus, l.AlertReasons, status, reasons)
	}
	return jp
}

// run makes one grant of job by owner and releases it with outcome,
// returning the released lease.
func (b *bundle) run(t *testing.T, job, owner string, outcome leaseapi.Outcome) leaseapi.Lease {
	t.Helper()
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	return b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: outcome})
}

// testPolicyCRUD: a policy is set on a known job only, read, replaced and
// deleted; a job without one answers ErrPolicyNotFound, an unknown job
// ErrNotFound; invalid policies are refused before anything is written.
func testPolicyCRUD(t *testing.T, b *bundle) {
	ctx, job, owner := t.Context(), b.job("policy"), b.owner("a")
	unknown := b.job("policy-none")
	_, err := b.store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: unknown, Policy: leaseapi.AlertPolicy{ConsecutiveFailures: 1}})
	if !errors.Is(err, leaseapi.ErrNotFound) {
		t.Fatalf("PutPolicy(unknown job): got %v, want ErrNotFound", err)
	}
	if _, err := b.store.Policy(ctx, unknown); !errors.Is(err, leaseapi.ErrNotFound) || errors.Is(err, leaseapi.ErrPolicyNotFound) {
		t.Fatalf("Policy(unknown job): got %v, want ErrNotFound, not ErrPolicyNotFound", err)
	}
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	if _, err := b.store.Policy(ctx, job); !errors.Is(err, leaseapi.ErrPolicyNotFound) {
		t.Fatalf("Policy(job without one): got %v, want ErrPolicyNotFound", err)
	}
	if l := b.get(t, job); l.AlertStatus != "" || l.AlertReasons != nil {
		t.Fatalf("lease without a policy shows %q %v, want nothing", l.AlertStatus, l.AlertReasons)
	}
	for name, p := range map[string]leaseapi.AlertPolicy{
		"no condition":      {RecoveryThreshold: 2},
		"negative count":    {ConsecutiveFailures: -1},
		"rate without runs": {FailureRate: &leaseapi.FailureRate{Threshold: 0.5}},
		"realert too often": {MissedTicks: 1, RealertAfter: time.Second},
	} {
		var inv *leaseapi.InvalidError
		if _, err := b.store.PutPolicy(ctx, &leaseapi.PutPolicyParams{JobID: job, Policy: p}); !errors.As(err, &inv) {
			t.Errorf("PutPolicy(%s): got %v, want an *InvalidError", name, err)
		}
	}
	if _, err := b.store.Policy(ctx, job); !errors.Is(err, leaseapi.ErrPolicyNotFound) {
		t.Fatalf("Policy after invalid puts: got %v, want ErrPolicyNotFound", err)
	}

	want := leaseapi.AlertPolicy{ConsecutiveFailures: 3, FailureRate: &leaseapi.FailureRate{Threshold: 0.25, Runs: 8},
		MaxRuntime: time.Hour, MinRuntime: time.Millisecond, MissedTicks: 2, RecoveryThreshold: 2, RealertAfter: time.Hour}
	jp := b.putPolicy(t, job, want)
	if jp.JobID != job || !equalPolicy(jp.Policy, want) || jp.State.Status != leaseapi.AlertOK || jp.UpdatedBy != "ops" ||
		jp.UpdatedAt.IsZero() || jp.State.Since.IsZero() {
		t.Fatalf("PutPolicy: got %+v, want %+v, ok, by ops", jp, want)
	}
	got := b.wantPolicy(t, "after PutPolicy", job, leaseapi.AlertOK)
	if !equalPolicy(got.Policy, want) {
		t.Fatalf("Policy: got %+v, want %+v", got.Policy, want)
	}
	replaced := leaseapi.AlertPolicy{MissedTicks: 5}
	if jp = b.putPolicy(t, job, replaced); !equalPolicy(jp.Policy, replaced) || !jp.State.Since.Equal(got.State.Since) {
		t.Fatalf("PutPolicy again: got %+v since %s, want %+v since %s (the status unchanged)", jp.Policy, jp.State.Since, replaced, got.State.Since)
	}
	if err := b.store.DeletePolicy(ctx, job); err != nil {
		t.Fatalf("DeletePolicy: %v", err)
	}
	if _, err := b.store.Policy(ctx, job); !errors.Is(err, leaseapi.ErrPolicyNotFound) {
		t.Fatalf("Policy after delete: got %v, want ErrPolicyNotFound", err)
	}
	if l := b.get(t, job); l.AlertStatus != "" {
		t.Fatalf("lease after delete shows %q, want nothing", l.AlertStatus)
	}
	if err := b.store.DeletePolicy(ctx, job); !errors.Is(err, leaseapi.ErrPolicyNotFound) {
		t.Fatalf("DeletePolicy again: got %v, want ErrPolicyNotFound", err)
	}
}

func equalPolicy(a, b leaseapi.AlertPolicy) bool {
	ar, br := a.FailureRate, b.FailureRate
	a.FailureRate, b.FailureRate = nil, nil
	return a == b && (ar == nil) == (br == nil) && (ar == nil || *ar == *br)
}

// testPolicyFailures: consecutive failures make the job alerting at the
// release that reaches the threshold, which answers the lease as it then
// stands; recovery takes RecoveryThreshold successes; revoked runs count
// for neither.
func testPolicyFailures(t *testing.T, b *bundle) {
	job, owner := b.job("failures"), b.owner("a")
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, job, leaseapi.AlertPolicy{ConsecutiveFailures: 2, RecoveryThreshold: 2})

	if l := b.run(t, job, owner, leaseapi.OutcomeFailed); l.AlertStatus != leaseapi.AlertOK {
		t.Fatalf("one failure: release answered %q, want ok", l.AlertStatus)
	}
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	b.revoke(t, job) // passed over
	if l = b.run(t, job, owner, leaseapi.OutcomeFailed); l.AlertStatus != leaseapi.AlertAlerting ||
		!slices.Equal(l.AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) {
		t.Fatalf("two failures: release answered %q %v, want alerting [failures]", l.AlertStatus, l.AlertReasons)
	}
	jp := b.wantPolicy(t, "two failures", job, leaseapi.AlertAlerting, leaseapi.ReasonFailures)
	if jp.State.AlertedAt == nil {
		t.Fatalf("alerting without AlertedAt: %+v", jp.State)
	}
	quiet := b.job("failures-quiet")
	b.run(t, quiet, owner, leaseapi.OutcomeFailed)
	for _, tc := range []struct {
		alerting bool
		want     []string
	}{{true, []string{job}}, {false, []string{quiet}}} {
		got := leaseIDs(b.listAll(t, leaseapi.ListParams{Prefix: b.job("failures"), Alerting: &tc.alerting, Limit: 1}))
		if !slices.Equal(got, tc.want) {
			t.Errorf("List alerting=%v: got %q, want %q", tc.alerting, got, tc.want)
		}
	}
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "one success of two", job, leaseapi.AlertAlerting, leaseapi.ReasonFailures)
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "two successes", job, leaseapi.AlertOK)
}

// testPolicyRateAndRuntime: the failure rate over a full window, and a
// success shorter than MinRuntime; both hold off recovery while they hold.
func testPolicyRateAndRuntime(t *testing.T, b *bundle) {
	job, owner := b.job("rate"), b.owner("a")
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, job, leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 4}})
	for _, o := range []leaseapi.Outcome{leaseapi.OutcomeFailed, leaseapi.OutcomeSucceeded} {
		b.run(t, job, owner, o)
	}
	b.wantPolicy(t, "1 failure of 3 runs", job, leaseapi.AlertOK)
	b.run(t, job, owner, leaseapi.OutcomeFailed)
	b.wantPolicy(t, "2 failures of 4 runs", job, leaseapi.AlertAlerting, leaseapi.ReasonFailureRate)
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "2 failures of the last 4", job, leaseapi.AlertAlerting, leaseapi.ReasonFailureRate)
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "1 failure of the last 4", job, leaseapi.AlertOK)

	short := b.job("short")
	b.run(t, short, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, short, leaseapi.AlertPolicy{MinRuntime: time.Hour})
	b.run(t, short, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "a success under MinRuntime", short, leaseapi.AlertAlerting, leaseapi.ReasonRuntimeTooShort)
	b.run(t, short, owner, leaseapi.OutcomeFailed)
	b.wantPolicy(t, "a failure after it", short, leaseapi.AlertAlerting, leaseapi.ReasonRuntimeTooShort)
}

// testPolicyHeldAndExpired: the sweep makes a job alerting while its run
// is still held past MaxRuntime, and when a grant expires unreleased.
func testPolicyHeldAndExpired(t *testing.T, b *bundle) {
	job, owner := b.job("held"), b.owner("a")
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, job, leaseapi.AlertPolicy{MaxRuntime: time.Millisecond})
	b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
	l := b.sweepUntil(t, job, "runtime_exceeded while held", func(l leaseapi.Lease) bool { return l.AlertStatus == leaseapi.AlertAlerting })
	if l.State != leaseapi.StateHeld || !slices.Equal(l.AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonRuntimeExceeded}) {
		t.Fatalf("held past MaxRuntime: lease %s %v, want held, alerting [runtime_exceeded]", l.State, l.AlertReasons)
	}

	expiring := b.job("expiring")
	b.run(t, expiring, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, expiring, leaseapi.AlertPolicy{ConsecutiveFailures: 1})
	b.acquire(t, leaseapi.AcquireParams{JobID: expiring, Owner: owner, TTL: shortTTL})
	b.sweepUntil(t, expiring, "failures after an expiry", func(l leaseapi.Lease) bool { return l.AlertStatus == leaseapi.AlertAlerting })
	b.wantPolicy(t, "expired grant", expiring, leaseapi.AlertAlerting, leaseapi.ReasonFailures)
	b.run(t, expiring, owner, leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "success after the expiry", expiring, leaseapi.AlertOK)
}

// testPolicyMissed: missed ticks, decided by the sweep, make the job
// alerting; a clean run recovers it.
func testPolicyMissed(t *testing.T, b *bundle) {
	job := b.job("missed")
	b.register(t, job, everySecond, shortGrace)
	b.putPolicy(t, job, leaseapi.AlertPolicy{MissedTicks: 2})
	b.sweepUntil(t, job, "two missed ticks alerting", func(l leaseapi.Lease) bool { return l.AlertStatus == leaseapi.AlertAlerting })
	b.wantPolicy(t, "missed ticks", job, leaseapi.AlertAlerting, leaseapi.ReasonMissed)
	if _, err := b.store.ForgetSchedule(t.Context(), job); err != nil {
		t.Fatalf("ForgetSchedule: %v", err)
	}
	b.run(t, job, b.owner("a"), leaseapi.OutcomeSucceeded)
	b.wantPolicy(t, "a run after the misses", job, leaseapi.AlertOK)
}

// testPolicyEvents: each change of status is one event for every webhook
// subscribed to it whose scopes hold the job, with the reasons, the run
// that caused it and the lease as the change left it; deciding again
// (the sweep after the release) tells nothing more. It claims every due
// webhook event of the store.
func testPolicyEvents(t *testing.T, b *bundle) {
	ws := webhookStore(t, b)
	ctx := t.Context()
	scope := b.prefix + ":"
	job, owner := scope+"alerting", b.owner("a")
	w := newWebhook(t, []string{scope}, "job.alerting", "job.ok")
	if err := ws.CreateWebhook(ctx, &w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	t.Cleanup(func() { _ = ws.DeleteWebhook(ctx, w.ID) })
	claimAll(t, ws) // whatever earlier tests left

	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, job, leaseapi.AlertPolicy{ConsecutiveFailures: 2})
	b.run(t, job, owner, leaseapi.OutcomeFailed)
	failed := b.run(t, job, owner, leaseapi.OutcomeFailed)
	b.sweep(t)
	events := claimAll(t, ws)
	if len(events) != 1 || events[0].Type != "job.alerting" || events[0].JobID != job {
		t.Fatalf("after two failures: claimed %s, want one job.alerting of %s", fmtEvents(events), job)
	}
	e := events[0]
	if !slices.Equal(e.AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) || e.Repeat ||
		e.Run == nil || e.Run.Token != failed.Token || e.Run.Outcome != leaseapi.OutcomeFailed ||
		e.Lease == nil || e.Lease.AlertStatus != leaseapi.AlertAlerting {
		t.Fatalf("job.alerting: reasons %v repeat %v run %+v lease %+v; want [failures], the failed run of token %d, the lease alerting",
			e.AlertReasons, e.Repeat, e.Run, e.Lease, failed.Token)
	}
	finish(t, ws, e, 200, 0)

	recovered := b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.sweep(t)
	events = claimAll(t, ws)
	if len(events) != 1 || events[0].Type != "job.ok" {
		t.Fatalf("after a success: claimed %s, want one job.ok", fmtEvents(events))
	}
	if e = events[0]; !slices.Equal(e.AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) ||
		e.Run == nil || e.Run.Token != recovered.Token || e.Lease == nil || e.Lease.AlertStatus != leaseapi.AlertOK {
		t.Fatalf("job.ok: reasons %v run %+v lease %+v; want the reasons recovered from, the run of token %d, the lease ok",
			e.AlertReasons, e.Run, e.Lease, recovered.Token)
	}
	finish(t, ws, e, 200, 0)
}
