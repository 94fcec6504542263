package main

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func lockRows() []LockRow {
	pg := func(f float64) *float64 { return &f }
	return []LockRow{
		{Round: 1, System: "leaseapi", Cycles: 1000, CyclesPerSec: 1000, P50Ms: 10, P99Ms: 40, ServerCPUSeconds: 0.5, PostgresCPUSeconds: pg(1), PostgresClusterCPUSeconds: pg(1.1)},
		{Round: 1, System: "etcd", Cycles: 2000, CyclesPerSec: 2000, P50Ms: 5, P99Ms: 20, ServerCPUSeconds: 0.4},
		{Round: 2, System: "leaseapi", Cycles: 3000, CyclesPerSec: 3000, P50Ms: 12, P99Ms: 50, ServerCPUSeconds: 1.5, PostgresCPUSeconds: pg(3), PostgresClusterCPUSeconds: pg(3)},
		{Round: 2, System: "etcd", Cycles: 2000, CyclesPerSec: 2000, P50Ms: 7, P99Ms: 30, ServerCPUSeconds: 0.4},
	}
}

func TestSummarizeLock(t *testing.T) {
	t.Parallel()
	s := summarizeLock(lockRows())
	if len(s) != 2 || s[0].System != "leaseapi" || s[1].System != "etcd" {
		t.Fatalf("summary %+v, want leaseapi then etcd (no redis rows)", s)
	}
	l, e := s[0], s[1]
	if l.CyclesPerSecMedian != 2000 || l.CyclesPerSecMin != 1000 || l.CyclesPerSecMax != 3000 || l.P50Ms != 11 || l.P99Ms != 45 {
		t.Errorf("leaseapi %+v: want median 2000 (1000–3000), p50 11, p99 45", l)
	}
	// CPU per cycle sums the rounds: (0.5+1.5) s / 4000 cycles, (1+3) s / 4000.
	if l.ServerMsPerCycle != 0.5 || l.PostgresMsPerCycle == nil || *l.PostgresMsPerCycle != 1 {
		t.Errorf("leaseapi CPU per cycle %v ms + Postgres %v ms, want 0.5 + 1", l.ServerMsPerCycle, l.PostgresMsPerCycle)
	}
	if e.PostgresMsPerCycle != nil || e.ServerMsPerCycle != 0.2 || e.LeaseapiRatio != 1 || l.LeaseapiRatio != 1 {
		t.Errorf("etcd %+v: want 0.2 ms per cycle, no Postgres, leaseapi ÷ etcd = 1", e)
	}
}

func TestLockTarget(t *testing.T) {
	t.Parallel()
	rows := lockRows()
	rows[0].CyclesPerSec, rows[2].CyclesPerSec = 3000, 3200 // median 3100 against etcd's 2000
	rep := &Report{Lock: &LockReport{Rounds: 2, Rows: rows}}
	rep.Lock.Summary = summarizeLock(rows)
	got := lockTarget(rep)
	if got.Met == nil || !*got.Met || !strings.Contains(got.Detail, "1.55×") || !strings.Contains(got.Detail, "stretch 1.5× met") {
		t.Errorf("target %+v: want met at 1.55×, stretch met", got)
	}
	rows[0].CyclesPerSec, rows[2].CyclesPerSec = 1000, 1000
	rep.Lock.Summary = summarizeLock(rows)
	if got := lockTarget(rep); got.Met == nil || *got.Met || !strings.Contains(got.Detail, "0.50×") {
		t.Errorf("target %+v: want missed at 0.50×", got)
	}
	if got := lockTarget(&Report{}); got.Met != nil {
		t.Errorf("target without a lock run: %+v, want not measured", got)
	}
	var md strings.Builder
	writeLockMarkdown(&md, rep)
	if !strings.Contains(md.String(), "| leaseapi | 1000 | 1000–1000 |") || !strings.Contains(md.String(), "leaseapi 0.500 + Postgres 1.000 = 1.500") {
		t.Errorf("markdown:\n%s\nwant the comparison row with leaseapi's and Postgres's CPU per cycle", md.String())
	}
}
