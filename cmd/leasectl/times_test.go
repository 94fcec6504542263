package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// unreadableLease is a lease whose times are fine but for the ones given.
func unreadableLease(job, times string) string {
	return `{"jobId":"` + job + `","owner":"a","token":1,"timeline":1,"state":"released",` +
		`"acquiredAt":"2026-12-01T00:16:03.603Z","renewedAt":"2026-12-01T00:16:03.603Z","expiresAt":"2026-12-01T00:16:33.603Z",` +
		`"releasedAt":null,"ttlMs":30000,"tick":"2026-12-01T07:00:00.000Z","lastCompletedTick":null,"lastOutcome":null,` +
		`"schedule":null,"graceMs":null,"nextTick":null,"paused":false,"pausedAt":null,"pausedBy":null,"pausedReason":null,` +
		`"missedTicks":0,"skippedTicks":0,"revokedBy":null,"catchUp":"none","catchUpWindowMs":86400000,"owedTick":null,` +
		`"owedReason":null` + times + `}`
}

// TestUnreadableTimes: a time leasectl cannot represent (year 10000, text
// that is not a time) fails only its field; ls, get and runs print every
// lease and run, the unreadable times as sent.
func TestUnreadableTimes(t *testing.T) {
	t.Parallel()
	list := `{"leases":[` + strings.Join([]string{
		unreadableLease("fine", ""),
		unreadableLease("year-0000", `,"lastCompletedTick":"0000-01-01T00:00:00.000Z"`),
		unreadableLease("year-10000", `,"tick":"10000-01-01T00:00:00.000Z","expiresAt":"10000-01-01T00:00:00.000Z"`),
		unreadableLease("garbage", `,"releasedAt":"yesterday","nextTick":"2026-01-01T00:00:00+99:00"`),
	}, ",") + `],"nextCursor":null,"serverTime":"2026-12-01T00:16:04.000Z"}`
	runs := `{"runs":[{"jobId":"year-10000","token":1,"owner":"a","tick":"10000-01-01T00:00:00.000Z",` +
		`"startedAt":"2026-12-01T00:16:03.603Z","endedAt":null,"outcome":"running","durationMs":null,"revokedBy":null,` +
		`"trigger":"schedule","triggeredBy":null},{"jobId":"year-10000","token":null,"owner":null,"tick":"2026-12-01T07:00:00.000Z",` +
		`"startedAt":null,"endedAt":"2026-12-01T07:01:00.000Z","outcome":"missed","durationMs":null,"revokedBy":null,` +
		`"trigger":"schedule","triggeredBy":null}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/trigger"):
			_, _ = w.Write([]byte(unreadableLease("year-10000", `,"tick":"10000-01-01T00:00:00.000Z","owedTick":"10000-01-01T00:05:00.000Z","owedReason":"manual"`)))
		case r.URL.Path == "/leases":
			_, _ = w.Write([]byte(list))
		case strings.HasSuffix(r.URL.Path, "/runs"):
			_, _ = w.Write([]byte(runs))
		default:
			_, _ = w.Write([]byte(unreadableLease("year-10000", `,"tick":"10000-01-01T00:00:00.000Z","nextTick":"garbage","schedule":"@hourly","graceMs":1000`)))
		}
	}))
	t.Cleanup(srv.Close)

	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		env := environment{apiURL: srv.URL, stdout: &stdout, stderr: &stderr}
		command := readCommand
		if args[0] == "trigger" {
			command = func(ctx context.Context, _ string, args []string, env environment) int {
				return triggerCommand(ctx, args, env)
			}
		}
		if code := command(t.Context(), args[0], args[1:], env); code != 0 {
			t.Fatalf("leasectl %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	out := run("ls")
	for _, want := range []string{"fine ", "year-0000 ", "0000-01-01T00:00:00.000Z", "year-10000 ",
		"10000-01-01T00:00:00.000Z (unreadable", "garbage "} {
		if !strings.Contains(out, want) {
			t.Errorf("leasectl ls does not show %q:\n%s", want, out)
		}
	}
	out = run("get", "year-10000")
	for _, want := range []string{"TICK", "10000-01-01T00:00:00.000Z (unreadable", "NEXT TICK", "garbage (unreadable", "ACQUIRED"} {
		if !strings.Contains(out, want) {
			t.Errorf("leasectl get does not show %q:\n%s", want, out)
		}
	}
	if out = run("trigger", "year-10000"); !strings.Contains(out, "owes tick 10000-01-01T00:05:00.000Z (manual)") {
		t.Errorf("leasectl trigger:\n%s", out)
	}
	out = run("runs", "year-10000")
	if !strings.Contains(out, "10000-01-01T00:00:00.000Z (unreadable") || !strings.Contains(out, "missed") {
		t.Errorf("leasectl runs:\n%s", out)
	}
}
