//go:build unix

package handlers_test

import (
	"context"
	"fmt"
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
	"github.com/leaseapi/leaseapi/repo"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
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
		var rec statusRecorder
		h.ServeHTTP(&rec, req)
		if rec.code != want {
			b.Fatalf("status %d, want %d", rec.code, want)
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

// statusRecorder is a ResponseWriter that keeps the status and drops the
// body, so that the benchmarks measure the handler, not a recorder's
// buffer.
type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header {
	if r.header == nil {
		r.header = make(http.Header)
	}
	return r.header
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(p), nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (s heldStore) AcquireBatch(ctx context.Context, ps []*leaseapi.AcquireParams) []leaseapi.Answer {
	answers := make([]leaseapi.Answer, len(ps))
	for i, p := range ps {
		answers[i].Lease, answers[i].Err = s.Acquire(ctx, p)
	}
	return answers
}

// BenchmarkLosingAcquireBatch measures the batch herd's typical request:
// 1,000 acquires of jobs another replica holds, each answered 409 with the
// lease. ops are items.
func BenchmarkLosingAcquireBatch(b *testing.B) {
	benchLeaseCall(b, heldStore{}, "/acquire", herdBatchBody("herd"), http.StatusOK)
}

// BenchmarkLosingAcquireBatchPostgres is BenchmarkLosingAcquireBatch on
// the Postgres store as leaseapi serves it (behind the coalescer), every
// job held by another owner: the handlers, the coalescer and the read of
// 1,000 leases.
func BenchmarkLosingAcquireBatchPostgres(b *testing.B) {
	ctx := context.Background()
	p, err := postgres.Open(ctx, postgres.Config{DSN: repotest.PostgresURL(b), MaxOpenConns: 20})
	if err != nil {
		b.Fatalf("open postgres: %v", err)
	}
	b.Cleanup(func() { _ = p.Close() })
	prefix := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	store := repo.CoalesceAcquires(repo.LimitCalls(p, 256), 5*time.Minute)
	tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	ps := make([]*leaseapi.AcquireParams, 1000)
	for i := range ps {
		ps[i] = &leaseapi.AcquireParams{JobID: fmt.Sprintf("%s-%04d", prefix, i), Owner: "holder", TTL: time.Hour, Tick: &tick}
	}
	for i, a := range store.AcquireBatch(ctx, ps) {
		if a.Err != nil {
			b.Fatalf("hold %s: %v", ps[i].JobID, a.Err)
		}
	}
	benchLeaseCall(b, store, "/acquire", herdBatchBody(prefix), http.StatusOK)
}

// herdBatchBody is a replica's batch of the acquires of the 1,000 jobs of
// prefix at one tick.
func herdBatchBody(prefix string) string {
	var body strings.Builder
	body.WriteString(`{"owner":"replica-17","ttlMs":600000,"tick":"2026-11-30T07:00:00.000Z","items":[`)
	for i := range 1000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"jobId":"%s-%04d"}`, prefix, i)
	}
	body.WriteString(`]}`)
	return body.String()
}
