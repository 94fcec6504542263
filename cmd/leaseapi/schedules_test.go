package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// TestWarnFastSchedules: at start one warn line names the jobs whose
// stored schedule ticks more often than LEASEAPI_MIN_TTL; none when no job
// does.
func TestWarnFastSchedules(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "leaseapi.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for job, spec := range map[string]string{"fast-a": "@every 2s", "fast-b": "*/3 * * * * *", "slow": "@every 1h", "plain": ""} {
		p := &leaseapi.AcquireParams{JobID: job, Owner: "o", TTL: time.Minute, Schedule: spec}
		if spec != "" {
			p.Grace = time.Second
		}
		if _, err := s.Acquire(ctx, p); err != nil {
			t.Fatalf("acquire %s: %v", job, err)
		}
	}
	logLines := func(minTTL time.Duration) []map[string]any {
		var buf bytes.Buffer
		warnFastSchedules(ctx, s, minTTL, slog.New(slog.NewJSONHandler(&buf, nil)))
		var lines []map[string]any
		for line := range strings.Lines(buf.String()) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			lines = append(lines, m)
		}
		return lines
	}
	lines := logLines(5 * time.Second)
	if len(lines) != 1 {
		t.Fatalf("got %d log lines, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	var ids []string
	for _, id := range l["job_ids"].([]any) {
		ids = append(ids, id.(string))
	}
	slices.Sort(ids)
	if l["level"] != "WARN" || l["count"] != float64(2) || !slices.Equal(ids, []string{"fast-a", "fast-b"}) ||
		l["min_ttl"] != "5s" || l["all_jobs_read"] != true {
		t.Errorf("log line %v, want a warning naming fast-a and fast-b", l)
	}
	if lines := logLines(time.Second); len(lines) != 0 {
		t.Errorf("with MIN_TTL 1s: got %v, want no line", lines)
	}
}
