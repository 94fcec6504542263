package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// serve is the one shape of every /leases handler: parse validates all of
// the request before the store is called, so bad input never reaches it;
// do calls the store within the request's deadline; respond makes the 200
// body of its result. Any error is answered as a problem.
func serve[P, T any](h *handler, w http.ResponseWriter, r *http.Request, op string,
	parse func(http.ResponseWriter, *http.Request) (P, error),
	do func(context.Context, P) (T, error),
	respond func(*http.Request, T) any,
) {
	p, err := parse(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	v, err := call(r.Context(), h.metrics, op, func(ctx context.Context) (T, error) {
		return do(ctx, p)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, r, respond(r, v))
}

// leaseBody is the answer of the calls on one lease: the lease.
func leaseBody(_ *http.Request, l leaseapi.Lease) any { return api.FromLease(l) }

func (h *handler) acquire(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "acquire", h.acquireParams, func(ctx context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
		l, err := h.store.Acquire(ctx, p)
		h.metrics.acquires.WithLabelValues(acquireResult(l, err)).Inc()
		h.metrics.countGroupFull(err)
		if err == nil {
			h.observeTickStart(l)
		}
		return l, err
	}, leaseBody)
}

func (h *handler) acquireParams(w http.ResponseWriter, r *http.Request) (*leaseapi.AcquireParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req api.AcquireRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	return h.acquireRequestParams(r, id, &req)
}

// acquireRequestParams are the params of the acquire req of job id, all
// validated.
func (h *handler) acquireRequestParams(r *http.Request, id string, req *api.AcquireRequest) (*leaseapi.AcquireParams, error) {
	ttl, err := h.ttl(req.TTLMs, h.defaultTTL)
	if err != nil {
		return nil, err
	}
	tick, err := parseTick(req.Tick)
	if err != nil {
		return nil, err
	}
	p := &leaseapi.AcquireParams{JobID: id, Owner: req.Owner, TTL: ttl, Tick: tick, NearestTick: req.NearestTick, Group: req.Group}
	if req.Schedule != nil {
		if *req.Schedule == "" {
			return nil, leaseapi.InvalidSchedule(errors.New("the spec is empty"))
		}
		p.Schedule, p.Grace = *req.Schedule, h.missedGrace
	}
	if req.GraceMs != nil {
		if req.Schedule == nil {
			return nil, leaseapi.ErrGraceWithoutSchedule
		}
		// Clamped to just outside the domain's range first, so that no
		// out-of-range integer overflows into a valid duration.
		ms := min(max(*req.GraceMs, 0), leaseapi.MaxGrace.Milliseconds()+1)
		p.Grace = time.Duration(ms) * time.Millisecond
	}
	if req.CatchUp != nil {
		p.CatchUp = leaseapi.CatchUp(*req.CatchUp)
		if p.CatchUp == "" {
			return nil, &leaseapi.InvalidError{Field: "catchUp", Rule: `must be "none" or "latest"`}
		}
	}
	if req.CatchUpWindowMs != nil {
		// Clamped to just outside the domain's range first, as graceMs.
		ms := min(max(*req.CatchUpWindowMs, 0), leaseapi.MaxCatchUpWindow.Milliseconds()+1)
		if ms == 0 {
			ms = -1 // zero is no window the domain takes from the wire
		}
		p.CatchUpWindow = time.Duration(ms) * time.Millisecond
	}
	if req.MinIntervalMs != nil {
		// Clamped to just outside the domain's range first, as graceMs.
		ms := min(max(*req.MinIntervalMs, -1), leaseapi.MaxMinInterval.Milliseconds()+1)
		p.MinInterval = time.Duration(ms) * time.Millisecond
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := h.checkFeatures(p); err != nil {
		return nil, err
	}
	if err := acquireGroup(r, req.Group); err != nil {
		return nil, err
	}
	return p, h.checkSchedule(r.Context(), p)
}

// checkFeatures refuses an acquire p that asks for a gated rule the
// database is not finalized for (a *leaseapi.FeatureDisabledError, 400
// feature_disabled): an instance of an older release serving the same
// database would not enforce it.
func (h *handler) checkFeatures(p *leaseapi.AcquireParams) error {
	if h.gate == nil || p.MinInterval == 0 {
		return nil
	}
	return h.gate.Check(leaseapi.FeatureMinInterval)
}

// acquireResult classifies an acquire for the metrics. A fresh grant sets
// acquiredAt and renewedAt to the same instant; an idempotent retry by the
// holder moves only renewedAt.
func acquireResult(l leaseapi.Lease, err error) string {
	switch {
	case err == nil && l.RenewedAt.Equal(l.AcquiredAt):
		return resultGranted
	case err == nil:
		return resultRenewed
	case errors.Is(err, leaseapi.ErrLeaseHeld):
		return resultHeld
	case errors.Is(err, leaseapi.ErrTickDone):
		return resultTickDone
	case errors.Is(err, leaseapi.ErrJobPaused):
		return resultPaused
	case errors.Is(err, leaseapi.ErrTickAhead):
		return resultAhead
	case errors.Is(err, leaseapi.ErrGroupFull):
		return resultGroupFull
	case errors.Is(err, leaseapi.ErrTooSoon):
		return resultTooSoon
	}
	return resultError
}

// observeTickStart measures a fresh grant for a tick: how long after its
// tick it started, and whether it started after the tick's grace had
// passed (the sweep may have recorded the tick missed: it still runs).
func (h *handler) observeTickStart(l leaseapi.Lease) {
	if l.Tick == nil || !l.RenewedAt.Equal(l.AcquiredAt) {
		return
	}
	delay := l.AcquiredAt.Sub(*l.Tick)
	h.metrics.tickStartDelay.Observe(max(delay, 0).Seconds())
	if l.Grace > 0 && delay > l.Grace {
		h.metrics.ticksLate.Inc()
	}
}

func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "heartbeat", h.heartbeatParams, func(ctx context.Context, p *leaseapi.HeartbeatParams) (leaseapi.Lease, error) {
		l, err := h.store.Heartbeat(ctx, p)
		h.metrics.heartbeats.WithLabelValues(holderResult(err)).Inc()
		return l, err
	}, leaseBody)
}

func (h *handler) heartbeatParams(w http.ResponseWriter, r *http.Request) (*leaseapi.HeartbeatParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req api.HeartbeatRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	return h.heartbeatRequestParams(id, &req)
}

// heartbeatRequestParams are the params of the heartbeat req of job id,
// validated.
func (h *handler) heartbeatRequestParams(id string, req *api.HeartbeatRequest) (*leaseapi.HeartbeatParams, error) {
	ttl, err := h.ttl(req.TTLMs, 0) // 0: the store keeps the grant's TTL
	if err != nil {
		return nil, err
	}
	p := &leaseapi.HeartbeatParams{JobID: id, Owner: req.Owner, Token: req.Token, TTL: ttl}
	return p, p.Validate()
}

func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "release", h.releaseParams, func(ctx context.Context, p *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
		l, err := h.store.Release(ctx, p)
		h.metrics.releases.WithLabelValues(holderResult(err)).Inc()
		return l, err
	}, leaseBody)
}

func (h *handler) releaseParams(w http.ResponseWriter, r *http.Request) (*leaseapi.ReleaseParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req api.ReleaseRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	p := &leaseapi.ReleaseParams{JobID: id, Owner: req.Owner, Token: req.Token, Outcome: outcomeOrDefault(req.Outcome)}
	return p, p.Validate()
}

// holderResult classifies a heartbeat or release for the metrics.
func holderResult(err error) string {
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, leaseapi.ErrLeaseLost):
		return resultLost
	case errors.Is(err, leaseapi.ErrNotFound):
		return resultNotFound
	}
	return resultError
}

func (h *handler) revokeLease(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "revoke", revokeParams, h.store.Revoke, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("lease revoked", "job_id", l.JobID, "owner", l.Owner, "token", l.Token, "by", l.RevokedBy)
		return api.FromLease(l)
	})
}

// revokeParams names the acting credential, recorded as revokedBy.
func revokeParams(w http.ResponseWriter, r *http.Request) (*leaseapi.RevokeParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	p := &leaseapi.RevokeParams{JobID: id, By: principalFrom(r.Context()).audit()}
	return p, p.Validate()
}

func (h *handler) pause(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "pause", pauseParams, h.store.Pause, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("job paused", "job_id", l.JobID, "by", l.PausedBy, "reason", l.PausedReason)
		return api.FromLease(l)
	})
}

func pauseParams(w http.ResponseWriter, r *http.Request) (*leaseapi.PauseParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req api.PauseRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	p := &leaseapi.PauseParams{JobID: id, By: principalFrom(r.Context()).audit()}
	if req.Reason != nil {
		p.Reason = *req.Reason
	}
	return p, p.Validate()
}

// repair undoes the marks of ticks ahead of the clock; the log line is its
// audit record, with who repaired, why, and what the job became.
func (h *handler) repair(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "repair", h.repairParams, func(ctx context.Context, p *leaseapi.RepairParams) (leaseapi.Lease, error) {
		l, err := h.store.Repair(ctx, p)
		if err == nil {
			loggerFrom(ctx).Info("job repaired", "job_id", l.JobID, "by", p.By, "reason", p.Reason,
				"token", l.Token, "state", l.State, "revoked_by", l.RevokedBy, "last_completed_tick", l.LastCompletedTick)
		}
		return l, err
	}, leaseBody)
}

func (h *handler) repairParams(w http.ResponseWriter, r *http.Request) (*leaseapi.RepairParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	var req api.RepairRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	p := &leaseapi.RepairParams{JobID: id, Window: h.repairWindow, Retention: h.retention, By: principalFrom(r.Context()).name}
	if req.Reason != nil {
		p.Reason = *req.Reason
	}
	return p, p.Validate()
}

func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "resume", func(w http.ResponseWriter, r *http.Request) (string, error) {
		id, err := pathAndNoQuery(w, r)
		if err != nil {
			return "", err
		}
		return id, decodeBody(w, r, &api.ResumeRequest{})
	}, h.store.Resume, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("job resumed", "job_id", l.JobID)
		return api.FromLease(l)
	})
}

func (h *handler) forgetSchedule(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "forget_schedule", pathAndNoQuery, h.store.ForgetSchedule, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("schedule forgotten", "job_id", l.JobID)
		return api.FromLease(l)
	})
}

func (h *handler) getLease(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "get", pathAndNoQuery, h.store.Get, leaseBody)
}

func (h *handler) listLeases(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "list", listParams, h.listInScope, func(_ *http.Request, page leaseapi.LeasePage) any {
		out := api.LeaseList{Leases: api.FromLeases(page.Leases), ServerTime: api.NewTime(page.Now)}
		if page.More && len(page.Leases) > 0 {
			c := encodeCursor(page.Leases[len(page.Leases)-1].JobID)
			out.NextCursor = &c
		}
		return out
	})
}

func (h *handler) listRuns(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "runs", runsParams, func(ctx context.Context, p runsQuery) ([]leaseapi.Run, error) {
		return h.store.Runs(ctx, p.jobID, p.limit)
	}, func(_ *http.Request, runs []leaseapi.Run) any {
		return api.RunList{Runs: api.FromRuns(runs)}
	})
}

// pathAndNoQuery returns the jobId of an operation that takes no query
// parameters and nothing but the job id, validated (ValidateJobID).
func pathAndNoQuery(_ http.ResponseWriter, r *http.Request) (string, error) {
	if _, err := query(r); err != nil {
		return "", err
	}
	id := jobID(r)
	return id, leaseapi.ValidateJobID(id)
}
