//go:build unix

package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
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
//
// Besides ns/op (wall time, which on a shared machine includes the time
// other processes hold the cores) it reports cpu-ns/op, the process's
// user and system CPU time per call (the garbage collector's included),
// and gc/op, collections per call.
func benchLeaseCall(b *testing.B, store leaseapi.Store, path, body string, want int) {
	b.Helper()
	h := handlers.New(store, handlers.Options{Logger: slog.New(slog.NewJSONHandler(discard{}, nil)),
		Open: true}) // httptest's requests come from 192.0.2.1 to example.com
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := processCPU(b)
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d, want %d", rec.Code, want)
		}
	}
	cpu = processCPU(b) - cpu
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(after.NumGC-before.NumGC)/float64(b.N), "gc/op")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
