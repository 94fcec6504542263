package leaseapi

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Alert policies: a job's own rule for when it is alerting, decided by the
// store from the outcomes and durations it already holds. A job with a
// policy is ok or alerting; each change between the two is an event
// (job.alerting, job.ok), and an alerting job repeats job.alerting every
// RealertAfter. The rule is decide.EvaluatePolicy.

// AlertReason is a condition of a policy that holds.
type AlertReason string

// The reasons a job is alerting.
const (
	// ReasonFailures: the newest ConsecutiveFailures finished runs with a
	// holder failed or expired (missed ticks neither count nor break it).
	ReasonFailures AlertReason = "failures"
	// ReasonFailureRate: of the newest FailureRate.Runs finished runs with
	// a holder, at least the threshold's share failed or expired.
	ReasonFailureRate AlertReason = "failure_rate"
	// ReasonRuntimeExceeded: the newest run lasted longer than MaxRuntime,
	// or is still held past it.
	ReasonRuntimeExceeded AlertReason = "runtime_exceeded"
	// ReasonRuntimeTooShort: the newest finished run succeeded in less
	// than MinRuntime.
	ReasonRuntimeTooShort AlertReason = "runtime_too_short"
	// ReasonMissed: the newest MissedTicks decided ticks were missed.
	ReasonMissed AlertReason = "missed"
)

// AlertReasons lists every reason, in the order a job's reasons are kept.
var AlertReasons = []AlertReason{ReasonFailures, ReasonFailureRate, ReasonRuntimeExceeded, ReasonRuntimeTooShort, ReasonMissed}

// AlertStatus is whether a job with a policy is alerting.
type AlertStatus string

// The statuses of a job with a policy.
const (
	AlertOK       AlertStatus = "ok"
	AlertAlerting AlertStatus = "alerting"
)

// The bounds of a policy.
const (
	// MaxPolicyCount bounds ConsecutiveFailures, MissedTicks and
	// RecoveryThreshold: a policy is decided from at most a few hundred
	// runs of history.
	MaxPolicyCount = 100
	// MaxFailureRateRuns bounds FailureRate.Runs.
	MaxFailureRateRuns = 64
	// MaxPolicyRuntime bounds MaxRuntime and MinRuntime.
	MaxPolicyRuntime = 7 * 24 * time.Hour
	// MinRealertAfter and MaxRealertAfter bound RealertAfter: a repeat
	// at most once a minute per job.
	MinRealertAfter = time.Minute
	MaxRealertAfter = 30 * 24 * time.Hour
)

// AlertPolicy is when a job is alerting. A zero field is a condition not
// set; at least one of ConsecutiveFailures, FailureRate, MaxRuntime,
// MinRuntime and MissedTicks is set.
type AlertPolicy struct {
	// ConsecutiveFailures alerts after that many failed or expired runs
	// in a row.
	ConsecutiveFailures int
	// FailureRate alerts on the share of failed runs among the newest ones.
	FailureRate *FailureRate
	// MaxRuntime alerts on a run held longer, while it is still held.
	MaxRuntime time.Duration
	// MinRuntime alerts on a run that succeeded sooner.
	MinRuntime time.Duration
	// MissedTicks alerts after that many missed ticks in a row.
	MissedTicks int
	// RecoveryThreshold is how many successes in a row, with no condition
	// holding, bring an alerting job back to ok (1 when not given).
	RecoveryThreshold int
	// RealertAfter repeats job.alerting while the job stays alerting;
	// zero for never.
	RealertAfter time.Duration
}

// FailureRate is a failure-rate condition: alerting when at least
// Threshold (0 < Threshold <= 1) of the newest Runs finished runs with a
// holder failed or expired. Fewer than Runs runs decide nothing.
type FailureRate struct {
	Threshold float64
	Runs      int
}

// Window is how many runs of the newest history the policy is decided
// from: enough for its largest count to be read past revoked runs.
func (p *AlertPolicy) Window() int {
	n := max(p.ConsecutiveFailures, p.MissedTicks, p.recoveryThreshold())
	if p.FailureRate != nil {
		n = max(n, p.FailureRate.Runs)
	}
	return 2*n + 2
}

func (p *AlertPolicy) recoveryThreshold() int {
	if p.RecoveryThreshold == 0 {
		return 1
	}
	return p.RecoveryThreshold
}

// Recovery is RecoveryThreshold, or its default 1.
func (p *AlertPolicy) Recovery() int { return p.recoveryThreshold() }

// Validate returns an *InvalidError for the first rule p breaks.
func (p *AlertPolicy) Validate() error {
	count := func(field string, n int) error {
		if n < 0 || n > MaxPolicyCount {
			return &InvalidError{Field: field, Rule: fmt.Sprintf("must be an integer from 1 to %d", MaxPolicyCount)}
		}
		return nil
	}
	runtime := func(field string, d time.Duration) error {
		if d < 0 || d > MaxPolicyRuntime || d%time.Millisecond != 0 {
			return &InvalidError{Field: field, Rule: fmt.Sprintf("must be a whole number of milliseconds from 1 to %d", MaxPolicyRuntime.Milliseconds())}
		}
		return nil
	}
	if err := count("consecutiveFailures", p.ConsecutiveFailures); err != nil {
		return err
	}
	if r := p.FailureRate; r != nil {
		if math.IsNaN(r.Threshold) || r.Threshold <= 0 || r.Threshold > 1 {
			return &InvalidError{Field: "failureRate.threshold", Rule: "must be a number greater than 0 and at most 1"}
		}
		if r.Runs < 1 || r.Runs > MaxFailureRateRuns {
			return &InvalidError{Field: "failureRate.runs", Rule: fmt.Sprintf("must be an integer from 1 to %d", MaxFailureRateRuns)}
		}
	}
	if err := runtime("maxRuntimeMs", p.MaxRuntime); err != nil {
		return err
	}
	if err := runtime("minRuntimeMs", p.MinRuntime); err != nil {
		return err
	}
	if p.MaxRuntime > 0 && p.MinRuntime >= p.MaxRuntime {
		return &InvalidError{Field: "minRuntimeMs", Rule: "must be less than maxRuntimeMs"}
	}
	if err := count("missedTicks", p.MissedTicks); err != nil {
		return err
	}
	if err := count("recoveryThreshold", p.RecoveryThreshold); err != nil {
		return err
	}
	if p.RealertAfter != 0 && (p.RealertAfter < MinRealertAfter || p.RealertAfter > MaxRealertAfter || p.RealertAfter%time.Millisecond != 0) {
		return &InvalidError{Field: "realertAfterMs", Rule: fmt.Sprintf("must be a whole number of milliseconds from %d to %d",
			MinRealertAfter.Milliseconds(), MaxRealertAfter.Milliseconds())}
	}
	if p.ConsecutiveFailures == 0 && p.FailureRate == nil && p.MaxRuntime == 0 && p.MinRuntime == 0 && p.MissedTicks == 0 {
		return &InvalidError{Field: "policy", Rule: "must set at least one of consecutiveFailures, failureRate, maxRuntimeMs, minRuntimeMs, missedTicks"}
	}
	return nil
}

// PolicyState is where a job with a policy stands.
type PolicyState struct {
	Status AlertStatus
	// Reasons are the conditions that held during the current alerting
	// episode, in the order of AlertReasons; none while ok.
	Reasons []AlertReason
	// Since is when Status last changed (when the policy was set, at first).
	Since time.Time
	// AlertedAt is when job.alerting was last told (nil while ok); a
	// repeat is due at AlertedAt + RealertAfter.
	AlertedAt *time.Time
}

// JobPolicy is a job's policy and its state, as read at one instant.
type JobPolicy struct {
	JobID  string
	Policy AlertPolicy
	State  PolicyState
	// UpdatedBy names who set the policy ("" in open mode); UpdatedAt when.
	UpdatedBy string
	UpdatedAt time.Time
	// Now is the store's clock when it was read.
	Now time.Time
}

// PutPolicyParams set a job's policy, replacing the one it had.
type PutPolicyParams struct {
	JobID  string
	Policy AlertPolicy
	// By is who set it (set by the service).
	By string
}

// Validate checks p: a valid job id and policy.
func (p *PutPolicyParams) Validate() error {
	if err := ValidateJobID(p.JobID); err != nil {
		return err
	}
	return p.Policy.Validate()
}

// ErrPolicyNotFound: the job has no policy. It wraps ErrNotFound.
var ErrPolicyNotFound = fmt.Errorf("policy %w", ErrNotFound)

// FormatAlertReasons writes reasons as a store keeps them: comma-separated.
func FormatAlertReasons(reasons []AlertReason) string {
	s := make([]string, len(reasons))
	for i, r := range reasons {
		s[i] = string(r)
	}
	return strings.Join(s, ",")
}

// ParseAlertReasons reads what FormatAlertReasons wrote, keeping the known
// reasons in the order of AlertReasons.
func ParseAlertReasons(s string) []AlertReason {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	var out []AlertReason
	for _, r := range AlertReasons {
		if slices.Contains(parts, string(r)) {
			out = append(out, r)
		}
	}
	return out
}

// Alerting is the part of a Store that keeps alert policies. A release of
// a job with a policy decides it in the store before the release answers;
// the sweep decides it after a tick is missed, a grant expires, a held run
// passes MaxRuntime or a repeat is due, and for any job whose decision a
// crash interrupted. Each change of status is written to the webhook
// outbox with the state, in one transaction.
type Alerting interface {
	// PutPolicy sets the job's policy and decides it at once (which may
	// change its status). ErrNotFound for an unknown job.
	PutPolicy(ctx context.Context, p *PutPolicyParams) (JobPolicy, error)
	// Policy returns the job's policy, or ErrPolicyNotFound (ErrNotFound
	// for an unknown job).
	Policy(ctx context.Context, jobID string) (JobPolicy, error)
	// DeletePolicy removes the job's policy and its state, telling
	// nothing; ErrPolicyNotFound when it has none.
	DeletePolicy(ctx context.Context, jobID string) error
}
