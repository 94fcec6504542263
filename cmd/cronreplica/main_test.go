package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/internal/version"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoJobs", nil, "no jobs"},
		{"JobWithoutSpec", []string{"-job", "report"}, "NAME=SPEC"},
		{"BadSpec", []string{"-job", "report=every minute"}, `schedule "every minute"`},
		{"BadJobID", []string{"-job", "-report=@every 1s"}, "invalid job id"},
		{"DuplicateJob", []string{"-job", "a=@every 1s", "-job", "a=@every 2s"}, "already added"},
		{"BadOwner", []string{"-owner", "a b", "-job", "a=@every 1s"}, "owner"},
		{"HeartbeatAboveHalfTTL", []string{"-ttl", "2s", "-heartbeat", "1500ms", "-job", "a=@every 1s"}, "ttl/2"},
		{"NegativeWork", []string{"-work", "-1s", "-job", "a=@every 1s"}, "-work"},
		{"BadLogLevel", []string{"-log-level", "loud", "-job", "a=@every 1s"}, "-log-level"},
		{"ExtraArgs", []string{"-job", "a=@every 1s", "extra"}, "unexpected"},
		{"UnknownFlag", []string{"-jobs", "a=@every 1s"}, "not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), tt.args, "", io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q): got %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, "", io.Discard, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: got %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"-api", "-owner", "-job", "-ttl", "-work", "-record", "-token"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("usage lacks %s:\n%s", name, out.String())
		}
	}
}

// TestRunVersion: -version prints the build's version, commit, commit time
// and Go, and needs no job.
func TestRunVersion(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, "", &stdout, &stderr); err != nil {
		t.Fatalf("run -version: %v", err)
	}
	if want := version.Get().String(); stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("run -version wrote %q and %q, want %q and nothing", stdout.String(), stderr.String(), want)
	}
}

// TestRunRecordsRuns runs the replica against the real service until it has
// recorded two runs, then stops it as SIGTERM would. It waits for the runs on
// the wall clock (the schedule fires every second), bounded.
func TestRunRecordsRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "leases.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handlers.New(store, handlers.Options{APITokens: []string{"s3cret"}}))
	t.Cleanup(srv.Close)

	recordFile := filepath.Join(dir, "runs.jsonl")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-api", srv.URL, "-owner", "replica-1", "-job", "tick=@every 1s",
			"-ttl", "3s", "-request-timeout", "3s", "-work", "10ms", "-record", recordFile}, "s3cret", io.Discard, io.Discard)
	}()

	var lines []record
	deadline := time.Now().Add(20 * time.Second)
	for len(lines) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for two records, have %d", len(lines))
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		lines = readRecords(t, recordFile)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run after shutdown: %v", err)
	}

	for _, l := range lines {
		tick, err := api.ParseTime(l.Tick)
		if err != nil || !tick.Equal(tick.Truncate(time.Second)) {
			t.Fatalf("record %+v: want a tick on a whole second", l)
		}
		if l.Job != "tick" || l.Owner != "replica-1" || l.Token < 1 || l.Outcome != "succeeded" || l.Start > l.End {
			t.Fatalf("record %+v: want job tick, owner replica-1, a token, succeeded, start <= end", l)
		}
	}
	if lines[0].Token >= lines[1].Token || lines[0].Tick >= lines[1].Tick {
		t.Fatalf("records %+v: want increasing tokens and ticks", lines)
	}
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}
