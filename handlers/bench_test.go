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

// grantStore grants every acquire and accepts every release, without
// keeping anything: the answers of a winner.
type grantStore struct{ leaseapi.Store }

func (grantStore) Acquire(_ context.Context, p *leaseapi.AcquireParams) (leaseapi.Lease, error) {
	now := time.Now()
	return leaseapi.Lease{
		JobID: p.JobID, Owner: p.Owner, Token: 3, State: leaseapi.StateHeld,
		AcquiredAt: now, RenewedAt: now, ExpiresAt: now.Add(p.TTL), TTL: p.TTL, Tick: p.Tick,
	}, nil
}

func (grantStore) Release(_ context.Context, p *leaseapi.ReleaseParams) (leaseapi.Lease, error) {
	now := time.Now()
	return leaseapi.Lease{
		JobID: p.JobID, Owner: p.Owner, Token: p.Token, State: leaseapi.StateReleased,
		AcquiredAt: now.Add(-time.Second), RenewedAt: now.Add(-time.Second), ExpiresAt: now,
		ReleasedAt: &now, TTL: time.Minute, LastOutcome: p.Outcome,
	}, nil
}

// benchLeaseCall measures one lease call against h, in process: the
// middleware, decoding, the store's answer and the access log at the
// production level (info), without the network or the database.
func benchLeaseCall(b *testing.B, store leaseapi.Store, path, body string, want int) {
	b.Helper()
	h := handlers.New(store, handlers.Options{Logger: slog.New(slog.NewJSONHandler(discard{}, nil))})
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d, want %d", rec.Code, want)
		}
	}
}

// BenchmarkLosingAcquire measures the herd's typical request, a losing
// acquire answered 409 with the lease.
func BenchmarkLosingAcquire(b *testing.B) {
	benchLeaseCall(b, heldStore{}, "/leases/job-1/acquire",
		`{"owner":"replica-17","ttlMs":600000,"tick":"2026-11-30T07:00:00.000Z"}`, http.StatusConflict)
}

// BenchmarkWinningAcquire measures the winner's acquire, answered 200 with
// the lease.
func BenchmarkWinningAcquire(b *testing.B) {
	benchLeaseCall(b, grantStore{}, "/leases/job-1/acquire",
		`{"owner":"replica-17","ttlMs":600000,"tick":"2026-11-30T07:00:00.000Z"}`, http.StatusOK)
}

// BenchmarkRelease measures the winner's release, answered 200 with the
// released lease.
func BenchmarkRelease(b *testing.B) {
	benchLeaseCall(b, grantStore{}, "/leases/job-1/release",
		`{"owner":"replica-17","token":3,"outcome":"succeeded"}`, http.StatusOK)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
