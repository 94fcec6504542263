package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// Alert policies: a job's rule for when it is alerting, set, read and
// removed by the job's id like its pause, and decided by the store.

// policyRequest is api.PolicyBody as the handler decodes it: failureRate
// is kept raw and decoded as strictly as the body itself (decodeJSON
// leaves a nested object to encoding/json, which would take unknown and
// repeated fields).
type policyRequest struct {
	ConsecutiveFailures *int64          `json:"consecutiveFailures"`
	FailureRate         json.RawMessage `json:"failureRate"`
	MaxRuntimeMs        *int64          `json:"maxRuntimeMs"`
	MinRuntimeMs        *int64          `json:"minRuntimeMs"`
	MissedTicks         *int64          `json:"missedTicks"`
	RecoveryThreshold   *int64          `json:"recoveryThreshold"`
	RealertAfterMs      *int64          `json:"realertAfterMs"`
}

// policy is the domain policy of req. AlertPolicy.Validate refuses what
// is out of range, naming the field (clampGiven keeps it refusable).
func (req *policyRequest) policy() (leaseapi.AlertPolicy, error) {
	count := func(n *int64) int { return int(clampGiven(n, leaseapi.MaxPolicyCount)) }
	ms := func(n *int64, upper time.Duration) time.Duration {
		return time.Duration(clampGiven(n, upper.Milliseconds())) * time.Millisecond
	}
	p := leaseapi.AlertPolicy{
		ConsecutiveFailures: count(req.ConsecutiveFailures),
		MaxRuntime:          ms(req.MaxRuntimeMs, leaseapi.MaxPolicyRuntime),
		MinRuntime:          ms(req.MinRuntimeMs, leaseapi.MaxPolicyRuntime),
		MissedTicks:         count(req.MissedTicks),
		RecoveryThreshold:   count(req.RecoveryThreshold),
		RealertAfter:        ms(req.RealertAfterMs, leaseapi.MaxRealertAfter),
	}
	if req.FailureRate != nil {
		rate, err := decodeFailureRate(req.FailureRate)
		if err != nil {
			return p, err
		}
		p.FailureRate = &rate
	}
	return p, nil
}

// clampGiven is 0 for a value not given (the domain's "not set"), else n
// clamped to -1..upper+1, and 0 made -1: a value the client sent that is
// out of range stays out of range, never wraps into a valid one, and a 0
// it sent is refused rather than read as not set.
func clampGiven(n *int64, upper int64) int64 {
	if n == nil {
		return 0
	}
	v := min(max(*n, -1), upper+1)
	if v == 0 {
		v = -1
	}
	return v
}

// decodeFailureRate decodes the failureRate object with decodeJSON's
// rules, naming the field in what it refuses.
func decodeFailureRate(raw json.RawMessage) (leaseapi.FailureRate, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return leaseapi.FailureRate{}, invalidf(`field "failureRate" must be an object {"threshold": number, "runs": integer}`)
	}
	var req api.FailureRate
	if err := decodeJSON(raw, &req); err != nil {
		if e, ok := errors.AsType[*requestError](err); ok {
			return leaseapi.FailureRate{}, invalidf("failureRate: %s", e.detail)
		}
		return leaseapi.FailureRate{}, err
	}
	runs := min(max(req.Runs, 0), leaseapi.MaxFailureRateRuns+1)
	return leaseapi.FailureRate{Threshold: req.Threshold, Runs: int(runs)}, nil
}

func putPolicyParams(w http.ResponseWriter, r *http.Request) (*leaseapi.PutPolicyParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req policyRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	policy, err := req.policy()
	if err != nil {
		return nil, err
	}
	p := &leaseapi.PutPolicyParams{JobID: id, Policy: policy, By: principalFrom(r.Context()).audit()}
	return p, p.Validate()
}

func policyBody(_ *http.Request, jp leaseapi.JobPolicy) any { return api.FromJobPolicy(jp) }

func (h *handler) putPolicy(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "put_policy", putPolicyParams, func(ctx context.Context, p *leaseapi.PutPolicyParams) (leaseapi.JobPolicy, error) {
		jp, err := h.store.PutPolicy(ctx, p)
		if err == nil {
			loggerFrom(ctx).Info("policy put", "job_id", jp.JobID, "by", p.By, "status", jp.State.Status)
		}
		return jp, err
	}, policyBody)
}

func (h *handler) getPolicy(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "get_policy", pathAndNoQuery, h.store.Policy, policyBody)
}

func (h *handler) deletePolicy(w http.ResponseWriter, r *http.Request) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	_, err = call(r.Context(), h.metrics, "delete_policy", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, h.store.DeletePolicy(ctx, id)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	loggerFrom(r.Context()).Info("policy deleted", "job_id", id, "by", principalFrom(r.Context()).audit())
	w.WriteHeader(http.StatusNoContent)
}
