package handlers

import (
	"context"
	"net/http"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// Owed ticks: run now (trigger, cancel) and what jobs owe.

// trigger makes the job owe a manual tick (admin). A retry with the same
// Idempotency-Key is answered as the first call was (idempotent).
func (h *handler) trigger(w http.ResponseWriter, r *http.Request) {
	p, err := h.triggerParams(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	fp := leaseapi.IdempotencyFingerprint("POST /leases/{jobId}/trigger", p.JobID, p.Reason)
	h.idempotent(w, r, p.Key, fp, func(ctx context.Context) (api.Lease, error) {
		l, err := call(ctx, h.metrics, "trigger", func(ctx context.Context) (leaseapi.Lease, error) { return h.store.Trigger(ctx, p) })
		if err != nil {
			return api.Lease{}, err
		}
		loggerFrom(ctx).Info("job triggered", "job_id", l.JobID, "by", principalFrom(ctx).audit(),
			"owed_tick", l.OwedTick, "owed_reason", l.OwedReason)
		return api.FromLease(l), nil
	})
}

func (h *handler) triggerParams(w http.ResponseWriter, r *http.Request) (*leaseapi.TriggerParams, error) {
	id, err := pathAndNoQuery(w, r)
	if err != nil {
		return nil, err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return nil, err
	}
	var req api.TriggerRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	p := &leaseapi.TriggerParams{JobID: id, By: principalFrom(r.Context()).audit(), Key: key, Grace: h.triggerGrace}
	if req.Reason != nil {
		p.Reason = *req.Reason
	}
	return p, p.Validate()
}

// cancelTrigger cancels what the job owes (admin): a manual tick or a
// catch-up debt. A job that owes nothing answers its lease as it is.
func (h *handler) cancelTrigger(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "cancel_owed", pathAndNoQuery, h.store.CancelOwed, func(r *http.Request, l leaseapi.Lease) any {
		loggerFrom(r.Context()).Info("owed tick cancelled", "job_id", l.JobID, "by", principalFrom(r.Context()).audit())
		return api.FromLease(l)
	})
}

// owed answers what the named jobs owe (read). An id out of the caller's
// scopes is 403, as on the routes that name one job.
func (h *handler) owed(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "owed", owedParams, func(ctx context.Context, p *leaseapi.OwedParams) ([]leaseapi.Owed, error) {
		return h.store.Owed(ctx, p)
	}, func(_ *http.Request, os []leaseapi.Owed) any {
		return api.OwedList{Owed: api.FromOwed(os)}
	})
}

func owedParams(w http.ResponseWriter, r *http.Request) (*leaseapi.OwedParams, error) {
	if _, err := query(r); err != nil {
		return nil, err
	}
	var req api.OwedRequest
	if err := decodeBodyUpTo(w, r, &req, api.MaxOwedBodyBytes); err != nil {
		return nil, err
	}
	p := &leaseapi.OwedParams{JobIDs: req.Jobs}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	caller := principalFrom(r.Context())
	for _, id := range p.JobIDs {
		if !caller.inScope(id) {
			return nil, outOfScope(caller, "job", id)
		}
	}
	return p, nil
}
