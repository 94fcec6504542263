package decide_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/decide"
)

// history builds runs newest first from outcomes oldest first, one a
// minute, each lasting ten seconds, ending before now; the lease is the
// newest grant's, released.
func history(now time.Time, outcomes ...leaseapi.Outcome) ([]leaseapi.Run, leaseapi.Lease) {
	runs := make([]leaseapi.Run, len(outcomes))
	var lease leaseapi.Lease
	for i, o := range outcomes {
		start := now.Add(-time.Duration(len(outcomes)-i) * time.Minute)
		end := start.Add(10 * time.Second)
		r := leaseapi.Run{JobID: "j", Outcome: o, EndedAt: &end}
		if o == leaseapi.OutcomeMissed {
			r.Tick = &start
		} else {
			r.Token, r.StartedAt = int64(i+1), &start
			lease = leaseapi.Lease{JobID: "j", Token: r.Token, AcquiredAt: start, ExpiresAt: end, ReleasedAt: &end, State: leaseapi.StateReleased}
		}
		runs[len(outcomes)-1-i] = r
	}
	return runs, lease
}

const (
	ok     = leaseapi.OutcomeSucceeded
	failed = leaseapi.OutcomeFailed
	exp    = leaseapi.OutcomeExpired
	missed = leaseapi.OutcomeMissed
	revokd = leaseapi.OutcomeRevoked
)

func TestEvaluatePolicy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Hour)
	okState := leaseapi.PolicyState{Status: leaseapi.AlertOK, Since: earlier}
	alerting := func(reasons ...leaseapi.AlertReason) leaseapi.PolicyState {
		return leaseapi.PolicyState{Status: leaseapi.AlertAlerting, Reasons: reasons, Since: earlier, AlertedAt: &earlier}
	}
	for _, tc := range []struct {
		name     string
		policy   leaseapi.AlertPolicy
		state    leaseapi.PolicyState
		outcomes []leaseapi.Outcome
		want     leaseapi.AlertStatus
		reasons  []leaseapi.AlertReason
		event    string // "" for none
	}{
		{"FailuresBelowThreshold", leaseapi.AlertPolicy{ConsecutiveFailures: 3}, okState,
			[]leaseapi.Outcome{ok, failed, failed}, leaseapi.AlertOK, nil, ""},
		{"FailuresReachThreshold", leaseapi.AlertPolicy{ConsecutiveFailures: 3}, okState,
			[]leaseapi.Outcome{ok, failed, exp, failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, decide.EventJobAlerting},
		{"MissedTicksNeitherCountNorBreakFailures", leaseapi.AlertPolicy{ConsecutiveFailures: 2}, okState,
			[]leaseapi.Outcome{failed, missed, failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, decide.EventJobAlerting},
		{"RevokedRunsPassedOver", leaseapi.AlertPolicy{ConsecutiveFailures: 2}, okState,
			[]leaseapi.Outcome{failed, revokd, failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, decide.EventJobAlerting},
		{"FailureRateNeedsAFullWindow", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 4}}, okState,
			[]leaseapi.Outcome{failed, failed, failed}, leaseapi.AlertOK, nil, ""},
		{"FailureRateExactlyAtThreshold", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.28, Runs: 25}}, okState,
			append(slices.Repeat([]leaseapi.Outcome{failed}, 7), slices.Repeat([]leaseapi.Outcome{ok}, 18)...),
			leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailureRate}, decide.EventJobAlerting},
		{"FailureRateHolds", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 4}}, okState,
			[]leaseapi.Outcome{ok, ok, failed, ok, failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailureRate}, decide.EventJobAlerting},
		{"FailureRateBelow", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 4}}, okState,
			[]leaseapi.Outcome{failed, failed, ok, ok, failed, ok}, leaseapi.AlertOK, nil, ""},
		{"MissedTicks", leaseapi.AlertPolicy{MissedTicks: 2}, okState,
			[]leaseapi.Outcome{ok, missed, missed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonMissed}, decide.EventJobAlerting},
		{"MissedBrokenByARun", leaseapi.AlertPolicy{MissedTicks: 2}, okState,
			[]leaseapi.Outcome{missed, ok, missed}, leaseapi.AlertOK, nil, ""},
		{"RecoveryAfterOneSuccess", leaseapi.AlertPolicy{ConsecutiveFailures: 2}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, failed, ok}, leaseapi.AlertOK, nil, decide.EventJobOK},
		{"RecoveryNeedsThreshold", leaseapi.AlertPolicy{ConsecutiveFailures: 2, RecoveryThreshold: 2}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, failed, ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, ""},
		{"RecoveryReached", leaseapi.AlertPolicy{ConsecutiveFailures: 2, RecoveryThreshold: 2}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, failed, ok, ok}, leaseapi.AlertOK, nil, decide.EventJobOK},
		{"MissedTickBreaksRecovery", leaseapi.AlertPolicy{ConsecutiveFailures: 2, RecoveryThreshold: 2}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, failed, ok, missed, ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, ""},
		{"NoRecoveryWhileARateHolds", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 4}}, alerting(leaseapi.ReasonFailureRate),
			[]leaseapi.Outcome{failed, failed, failed, ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailureRate}, ""},
		{"ReasonsAccumulate", leaseapi.AlertPolicy{ConsecutiveFailures: 1, MissedTicks: 1}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, missed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonMissed}, ""},
		{"RuntimeTooShort", leaseapi.AlertPolicy{MinRuntime: 20 * time.Second}, okState,
			[]leaseapi.Outcome{ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonRuntimeTooShort}, decide.EventJobAlerting},
		{"RuntimeExceeded", leaseapi.AlertPolicy{MaxRuntime: 5 * time.Second}, okState,
			[]leaseapi.Outcome{ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonRuntimeExceeded}, decide.EventJobAlerting},
		{"RuntimeWithinBounds", leaseapi.AlertPolicy{MinRuntime: 5 * time.Second, MaxRuntime: 20 * time.Second}, okState,
			[]leaseapi.Outcome{ok}, leaseapi.AlertOK, nil, ""},
		{"ShortSuccessDoesNotRecover", leaseapi.AlertPolicy{ConsecutiveFailures: 1, MinRuntime: 20 * time.Second}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed, ok}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures, leaseapi.ReasonRuntimeTooShort}, ""},
		{"Realert", leaseapi.AlertPolicy{ConsecutiveFailures: 1, RealertAfter: time.Hour}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, decide.EventJobAlerting},
		{"RealertNotYet", leaseapi.AlertPolicy{ConsecutiveFailures: 1, RealertAfter: 2 * time.Hour}, alerting(leaseapi.ReasonFailures),
			[]leaseapi.Outcome{failed}, leaseapi.AlertAlerting, []leaseapi.AlertReason{leaseapi.ReasonFailures}, ""},
		{"EmptyHistory", leaseapi.AlertPolicy{ConsecutiveFailures: 1}, leaseapi.PolicyState{Status: leaseapi.AlertOK, Since: now},
			nil, leaseapi.AlertOK, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, lease := history(now, tc.outcomes...)
			f := &decide.PolicyFacts{Runs: runs, Lease: lease, Now: now}
			d := decide.EvaluatePolicy(&tc.policy, tc.state, f)
			if d.State.Status != tc.want || !slices.Equal(d.State.Reasons, tc.reasons) {
				t.Errorf("state %s %v, want %s %v", d.State.Status, d.State.Reasons, tc.want, tc.reasons)
			}
			switch {
			case tc.event == "" && d.Event != nil:
				t.Errorf("event %+v, want none", d.Event)
			case tc.event != "" && (d.Event == nil || d.Event.Type != tc.event):
				t.Errorf("event %+v, want %s", d.Event, tc.event)
			case d.Event != nil && (d.Event.Run != 0 || len(runs) == 0):
				t.Errorf("event run %d, want 0 (the newest)", d.Event.Run)
			}
			// Deciding again on the same facts tells nothing more.
			again := decide.EvaluatePolicy(&tc.policy, d.State, f)
			if again.Event != nil || again.State.Status != d.State.Status || !slices.Equal(again.State.Reasons, d.State.Reasons) {
				t.Errorf("again: %+v, event %+v; want the state unchanged and no event", again.State, again.Event)
			}
		})
	}
}

func TestEvaluatePolicyHeldRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	p := &leaseapi.AlertPolicy{MaxRuntime: time.Minute, ConsecutiveFailures: 1}
	state := leaseapi.PolicyState{Status: leaseapi.AlertOK, Since: now.Add(-time.Hour)}
	start := now.Add(-90 * time.Second)
	running := []leaseapi.Run{{JobID: "j", Token: 7, StartedAt: &start, Outcome: leaseapi.OutcomeRunning}}
	held := leaseapi.Lease{JobID: "j", Token: 7, AcquiredAt: start, ExpiresAt: now.Add(time.Minute), State: leaseapi.StateHeld}

	// Held past MaxRuntime: alerting now, while it runs; the grant is
	// named so that a store decides it once.
	d := decide.EvaluatePolicy(p, state, &decide.PolicyFacts{Runs: running, Lease: held, Now: now})
	if d.State.Status != leaseapi.AlertAlerting || !slices.Equal(d.State.Reasons, []leaseapi.AlertReason{leaseapi.ReasonRuntimeExceeded}) ||
		d.Event == nil || d.ExceededToken != 7 {
		t.Errorf("held past max: %+v, event %+v, exceeded %d", d.State, d.Event, d.ExceededToken)
	}
	// Within MaxRuntime: nothing holds, and no failure is counted for a
	// run still going on.
	d = decide.EvaluatePolicy(p, state, &decide.PolicyFacts{Runs: running, Lease: held, Now: start.Add(30 * time.Second)})
	if d.State.Status != leaseapi.AlertOK || d.Event != nil || d.ExceededToken != 0 {
		t.Errorf("held within max: %+v, event %+v, exceeded %d", d.State, d.Event, d.ExceededToken)
	}
	// The grant expired (the lease shows it) within MaxRuntime: a failure.
	expired := held
	expired.ExpiresAt, expired.State = start.Add(30*time.Second), leaseapi.StateExpired
	d = decide.EvaluatePolicy(p, state, &decide.PolicyFacts{Runs: running, Lease: expired, Now: now})
	if d.State.Status != leaseapi.AlertAlerting || !slices.Equal(d.State.Reasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) {
		t.Errorf("expired: %+v", d.State)
	}
}

func TestAlertPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		p     leaseapi.AlertPolicy
		field string // "" when valid
	}{
		{"Valid", leaseapi.AlertPolicy{ConsecutiveFailures: 3, RecoveryThreshold: 2, RealertAfter: time.Hour}, ""},
		{"NoCondition", leaseapi.AlertPolicy{RecoveryThreshold: 2}, "policy"},
		{"TooManyFailures", leaseapi.AlertPolicy{ConsecutiveFailures: 101}, "consecutiveFailures"},
		{"RateThresholdZero", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Runs: 10}}, "failureRate.threshold"},
		{"RateRunsTooMany", leaseapi.AlertPolicy{FailureRate: &leaseapi.FailureRate{Threshold: 0.5, Runs: 65}}, "failureRate.runs"},
		{"MinNotBelowMax", leaseapi.AlertPolicy{MinRuntime: time.Minute, MaxRuntime: time.Minute}, "minRuntimeMs"},
		{"RuntimeTooLong", leaseapi.AlertPolicy{MaxRuntime: 8 * 24 * time.Hour}, "maxRuntimeMs"},
		{"RealertTooOften", leaseapi.AlertPolicy{MissedTicks: 1, RealertAfter: time.Second}, "realertAfterMs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			var inv *leaseapi.InvalidError
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.field != "" && (err == nil || !errors.As(err, &inv) || inv.Field != tc.field):
				t.Errorf("Validate() = %v, want an *InvalidError of %s", err, tc.field)
			}
		})
	}
}
