package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/handlers"
)

// heldStore refuses every acquire: the lease is held by someone else.
type heldStore struct{ leaseapi.Store }

func (heldStore) Acquire(_ context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	now := time.Now()
	return leaseapi.Lease{}, &leaseapi.ConflictError{Err: leaseapi.ErrLeaseHeld, Lease: leaseapi.Lease{
		JobID: p.JobID, Owner: "winner", Token: 3, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Minute), TTL: time.Minute,
	}}
}

// BenchmarkLosingAcquire measures the handlers' own cost of the herd's
// typical request, a losing acquire answered 409 with the lease, in
// process: the middleware, decoding, the problem and the access log at the
// production level (info), without the network or the database.
func BenchmarkLosingAcquire(b *testing.B) {
	h := handlers.New(heldStore{}, handlers.Options{Logger: slog.New(slog.NewJSONHandler(discard{}, nil))})
	const body = `{"owner":"replica-17","ttlMs":600000,"tick":"2026-11-30T07:00:00.000Z"}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/leases/job-1/acquire", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusConflict {
			b.Fatalf("status %d, want 409", rec.Code)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
