package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// Every handler validates all of its input before the first store call, so
// bad input never reaches the store.

func (h *handler) acquire(w http.ResponseWriter, r *http.Request) {
	serveLeaseWrite(h, w, r, "acquire", h.acquireParams, h.store.Acquire, func(l leaseapi.Lease, err error) {
		h.metrics.acquires.WithLabelValues(acquireResult(l, err)).Inc()
	})
}

// serveLeaseWrite serves a POST on a lease: parse validates all input
// before the store is called, the call runs within the request's deadline,
// count records its result, and the answer is the lease or a problem.
func serveLeaseWrite[P any](h *handler, w http.ResponseWriter, r *http.Request, op string,
	parse func(http.ResponseWriter, *http.Request) (P, error),
	do func(context.Context, P) (leaseapi.Lease, error),
	count func(leaseapi.Lease, error),
) {
	p, err := parse(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	lease, err := call(r.Context(), h.metrics, op, func(ctx context.Context) (leaseapi.Lease, error) {
		return do(ctx, p)
	})
	count(lease, err)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, r, api.FromLease(lease))
}

func (h *handler) acquireParams(w http.ResponseWriter, r *http.Request) (*leaseapi.AcquireParams, error) {
	id, err := pathAndNoQuery(r)
	if err != nil {
		return nil, err
	}
	var req api.AcquireRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if err := validateOwner(req.Owner); err != nil {
		return nil, err
	}
	ttl, err := h.ttl(req.TTLMs, h.defaultTTL)
	if err != nil {
		return nil, err
	}
	tick, err := parseTick(req.Tick)
	if err != nil {
		return nil, err
	}
	return &leaseapi.AcquireParams{JobID: id, Owner: req.Owner, TTL: ttl, Tick: tick}, nil
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
	}
	return resultError
}

func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	serveLeaseWrite(h, w, r, "heartbeat", h.heartbeatParams, h.store.Heartbeat, func(_ leaseapi.Lease, err error) {
		h.metrics.heartbeats.WithLabelValues(holderResult(err)).Inc()
	})
}

func (h *handler) heartbeatParams(w http.ResponseWriter, r *http.Request) (*leaseapi.HeartbeatParams, error) {
	id, err := pathAndNoQuery(r)
	if err != nil {
		return nil, err
	}
	var req api.HeartbeatRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if err := validateOwner(req.Owner); err != nil {
		return nil, err
	}
	if err := validateToken(req.Token); err != nil {
		return nil, err
	}
	ttl, err := h.ttl(req.TTLMs, 0) // 0: the store keeps the grant's TTL
	if err != nil {
		return nil, err
	}
	return &leaseapi.HeartbeatParams{JobID: id, Owner: req.Owner, Token: req.Token, TTL: ttl}, nil
}

func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	serveLeaseWrite(h, w, r, "release", h.releaseParams, h.store.Release, func(_ leaseapi.Lease, err error) {
		h.metrics.releases.WithLabelValues(holderResult(err)).Inc()
	})
}

func (h *handler) releaseParams(w http.ResponseWriter, r *http.Request) (*leaseapi.ReleaseParams, error) {
	id, err := pathAndNoQuery(r)
	if err != nil {
		return nil, err
	}
	var req api.ReleaseRequest
	if err := decodeBody(w, r, &req); err != nil {
		return nil, err
	}
	if err := validateOwner(req.Owner); err != nil {
		return nil, err
	}
	if err := validateToken(req.Token); err != nil {
		return nil, err
	}
	outcome, err := parseOutcome(req.Outcome)
	if err != nil {
		return nil, err
	}
	return &leaseapi.ReleaseParams{JobID: id, Owner: req.Owner, Token: req.Token, Outcome: outcome}, nil
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
	id, err := pathAndNoQuery(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	lease, err := call(r.Context(), h.metrics, "revoke", func(ctx context.Context) (leaseapi.Lease, error) {
		return h.store.Revoke(ctx, id)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	loggerFrom(r.Context()).Info("lease revoked", "job_id", id, "owner", lease.Owner, "token", lease.Token)
	writeJSON(w, r, api.FromLease(lease))
}

func (h *handler) getLease(w http.ResponseWriter, r *http.Request) {
	id, err := pathAndNoQuery(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	lease, err := call(r.Context(), h.metrics, "get", func(ctx context.Context) (leaseapi.Lease, error) {
		return h.store.Get(ctx, id)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, r, api.FromLease(lease))
}

func (h *handler) listLeases(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "state", "owner", "prefix", "limit", "cursor")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	p, err := parseListParams(q)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	page, err := call(r.Context(), h.metrics, "list", func(ctx context.Context) (leaseapi.LeasePage, error) {
		return h.store.List(ctx, p)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := api.LeaseList{Leases: api.FromLeases(page.Leases), ServerTime: api.NewTime(page.Now)}
	if page.More && len(page.Leases) > 0 {
		c := encodeCursor(page.Leases[len(page.Leases)-1].JobID)
		out.NextCursor = &c
	}
	writeJSON(w, r, out)
}

func (h *handler) listRuns(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	q, err := query(r, "limit")
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	limit, err := parseLimit(q, 50)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	runs, err := call(r.Context(), h.metrics, "runs", func(ctx context.Context) ([]leaseapi.Run, error) {
		return h.store.Runs(ctx, id, limit)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, r, api.RunList{Runs: api.FromRuns(runs)})
}

// pathAndNoQuery returns the validated jobId of an operation that takes no
// query parameters.
func pathAndNoQuery(r *http.Request) (string, error) {
	id, err := jobID(r)
	if err != nil {
		return "", err
	}
	if _, err := query(r); err != nil {
		return "", err
	}
	return id, nil
}
