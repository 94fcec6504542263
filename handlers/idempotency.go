package handlers

import (
	"context"
	"crypto/sha256"
	"net/http"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// idempotencyKey returns the request's Idempotency-Key, "" when it has
// none: one header, bare or a structured-field string.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values("Idempotency-Key")
	switch len(values) {
	case 0:
		return "", nil
	case 1:
		return leaseapi.ParseIdempotencyKey(values[0])
	}
	return "", invalidf("send one Idempotency-Key header, not %d", len(values))
}

// idempotent answers r with do's result, at most once per (caller, key):
// without a key (or a store of keys) it just runs do; with one it claims
// the key with the request's fingerprint first, and then answers as the
// first request of the key was answered (its recorded answer), or 422
// (another request) or 409 (the first still in flight). A request that
// fails releases its claim, so that a retry runs again; a success whose
// answer cannot be recorded stays claimed until its hold passes, after
// which a retry runs again too (the operation must tolerate that, as the
// trigger does by its key on the job).
func (h *handler) idempotent(w http.ResponseWriter, r *http.Request, key string, fp [sha256.Size]byte,
	do func(context.Context) (api.Lease, error),
) {
	ctx := r.Context()
	if key == "" || h.idempotency == nil {
		l, err := do(ctx)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		writeJSON(w, r, l)
		return
	}
	p := &leaseapi.IdempotencyParams{Credential: principalFrom(ctx).key(), Key: key, Fingerprint: fp, Hold: h.requestTimeout}
	answer, err := call(ctx, h.metrics, "claim_idempotency_key", func(ctx context.Context) (*leaseapi.IdempotentAnswer, error) {
		return h.idempotency.ClaimIdempotencyKey(ctx, p)
	})
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if answer != nil {
		writeBodyStatus(w, answer.Status, answer.Body)
		return
	}
	l, err := do(ctx)
	if err != nil {
		if _, rerr := call(ctx, h.metrics, "release_idempotency_key", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, h.idempotency.ReleaseIdempotencyKey(ctx, p)
		}); rerr != nil {
			loggerFrom(ctx).Warn("idempotency key not released; a retry waits until its hold passes", "error", rerr)
		}
		writeProblem(w, r, err)
		return
	}
	body := l.AppendJSON(nil)
	if _, err := call(ctx, h.metrics, "finish_idempotency_key", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, h.idempotency.FinishIdempotencyKey(ctx, p, leaseapi.IdempotentAnswer{Status: http.StatusOK, Body: body})
	}); err != nil {
		loggerFrom(ctx).Warn("idempotency key answer not recorded; a retry runs again once its hold passes", "error", err)
	}
	writeBody(w, body)
}
