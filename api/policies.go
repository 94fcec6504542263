package api

import "github.com/leaseapi/leaseapi"

// PolicyBody is the body of PUT /leases/{jobId}/policy: a job's alert
// policy. A nil field is a condition (or setting) not given.
type PolicyBody struct {
	ConsecutiveFailures *int64       `json:"consecutiveFailures,omitempty"`
	FailureRate         *FailureRate `json:"failureRate,omitempty"`
	MaxRuntimeMs        *int64       `json:"maxRuntimeMs,omitempty"`
	MinRuntimeMs        *int64       `json:"minRuntimeMs,omitempty"`
	MissedTicks         *int64       `json:"missedTicks,omitempty"`
	RecoveryThreshold   *int64       `json:"recoveryThreshold,omitempty"`
	RealertAfterMs      *int64       `json:"realertAfterMs,omitempty"`
}

// FailureRate is a failure-rate condition: alerting when at least
// Threshold of the newest Runs finished runs with a holder failed.
type FailureRate struct {
	Threshold float64 `json:"threshold"`
	Runs      int64   `json:"runs"`
}

// JobPolicy is a job's alert policy and where it stands: the JobPolicy
// schema of api/openapi.yaml. The conditions not set are absent.
type JobPolicy struct {
	JobID               string       `json:"jobId"`
	ConsecutiveFailures *int64       `json:"consecutiveFailures,omitempty"`
	FailureRate         *FailureRate `json:"failureRate,omitempty"`
	MaxRuntimeMs        *int64       `json:"maxRuntimeMs,omitempty"`
	MinRuntimeMs        *int64       `json:"minRuntimeMs,omitempty"`
	MissedTicks         *int64       `json:"missedTicks,omitempty"`
	// RecoveryThreshold is always given: 1 when the policy did not set it.
	RecoveryThreshold int64                `json:"recoveryThreshold"`
	RealertAfterMs    *int64               `json:"realertAfterMs,omitempty"`
	Status            leaseapi.AlertStatus `json:"status"`
	// AlertReasons are the reasons of an alerting job; empty, never nil,
	// while it is ok.
	AlertReasons []leaseapi.AlertReason `json:"alertReasons"`
	StatusSince  Time                   `json:"statusSince"`
	// LastAlertAt is when job.alerting was last told; nil while ok.
	LastAlertAt *Time   `json:"lastAlertAt,omitempty"`
	UpdatedAt   Time    `json:"updatedAt"`
	UpdatedBy   *string `json:"updatedBy,omitempty"`
}

// FromJobPolicy converts a job's policy to its wire form.
func FromJobPolicy(jp leaseapi.JobPolicy) JobPolicy {
	p := &jp.Policy
	out := JobPolicy{
		JobID:               jp.JobID,
		ConsecutiveFailures: int64Ptr(int64(p.ConsecutiveFailures)),
		MaxRuntimeMs:        int64Ptr(p.MaxRuntime.Milliseconds()),
		MinRuntimeMs:        int64Ptr(p.MinRuntime.Milliseconds()),
		MissedTicks:         int64Ptr(int64(p.MissedTicks)),
		RecoveryThreshold:   int64(p.Recovery()),
		RealertAfterMs:      int64Ptr(p.RealertAfter.Milliseconds()),
		Status:              jp.State.Status,
		AlertReasons:        append([]leaseapi.AlertReason{}, jp.State.Reasons...),
		StatusSince:         NewTime(jp.State.Since),
		LastAlertAt:         timePtr(jp.State.AlertedAt),
		UpdatedAt:           NewTime(jp.UpdatedAt),
		UpdatedBy:           stringPtr(jp.UpdatedBy),
	}
	if r := p.FailureRate; r != nil {
		out.FailureRate = &FailureRate{Threshold: r.Threshold, Runs: int64(r.Runs)}
	}
	return out
}
