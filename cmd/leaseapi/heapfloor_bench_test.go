//go:build unix

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/repo/repotest"
)

// BenchmarkHeapFloor measures what the heap floor buys: serve over the
// Postgres store, 32 keep-alive clients in this process acquiring jobs
// that another owner holds (the tick herd's losing acquire, answered 409),
// with the floor (GOGC unset, as in production) and without it (GOGC=100
// in the environment, which turns it off). gc/op is collections per
// request; cpu-ns/op the process's CPU time per request, the clients'
// included. Run its two cases alternately: -count.
func BenchmarkHeapFloor(b *testing.B) {
	for _, tc := range []struct {
		name string
		gogc string // "" unsets GOGC
	}{{"GOGC=100", "100"}, {"floor", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			b.Setenv("GOGC", tc.gogc) // restores the old value afterwards
			if tc.gogc == "" {
				if err := os.Unsetenv("GOGC"); err != nil {
					b.Fatal(err)
				}
			}
			before := debug.SetGCPercent(100)
			b.Cleanup(func() { debug.SetGCPercent(before) })
			cfg := serveConfig(b)
			cfg.DatabaseURL = repotest.PostgresURL(b)
			cfg.LogLevel = "info" // production's: no access log line for a 409
			srv := startServe(b, cfg)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			const jobs = 100
			post := func(job int, owner string) int {
				req, err := http.NewRequestWithContext(b.Context(), http.MethodPost,
					fmt.Sprintf("%s/leases/job-%d/acquire", srv.url, job),
					strings.NewReader(`{"owner":"`+owner+`","ttlMs":3600000}`))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			for job := range jobs {
				if status := post(job, "winner"); status != http.StatusOK {
					b.Fatalf("acquire job-%d: status %d, want 200", job, status)
				}
			}

			var stats [2]runtime.MemStats
			runtime.ReadMemStats(&stats[0])
			cpu := processCPU(b)
			var next atomic.Int64
			b.SetParallelism(16) // 32 clients on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if status := post(int(next.Add(1)%jobs), "replica"); status != http.StatusConflict {
						b.Errorf("acquire of a held job: status %d, want 409", status)
						return
					}
				}
			})
			b.StopTimer()
			cpu = processCPU(b) - cpu
			runtime.ReadMemStats(&stats[1])
			b.ReportMetric(float64(stats[1].NumGC-stats[0].NumGC)/float64(b.N), "gc/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(gogc(b)), "gogc")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
