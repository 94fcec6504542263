package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/jobs"
)

func TestParseRun(t *testing.T) {
	t.Parallel()
	env := environment{stderr: io.Discard}
	tests := []struct {
		name  string
		args  []string
		want  string // a substring of the error; empty: valid
		check func(t *testing.T, c runConfig)
	}{
		{name: "Defaults", args: []string{"job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.owner != "host-1/42" || c.ttl != 30*time.Second || c.killGrace != 10*time.Second ||
				c.wait != 10*time.Second || c.apiURL != defaultAPI || c.skipped != 0 || !c.tickAt(time.Now()).IsZero() {
				t.Fatalf("defaults: %+v", c)
			}
		}},
		{name: "KillGraceHalfTTL", args: []string{"--ttl", "4s", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.killGrace != 2*time.Second {
				t.Fatalf("kill grace %s, want ttl/2", c.killGrace)
			}
		}},
		{name: "KillGraceUpToTTL", args: []string{"--ttl", "4s", "--kill-grace", "4s", "job", "--", "true"}},
		{name: "Command", args: []string{"job", "--", "sh", "-c", "exit 3"}, check: func(t *testing.T, c runConfig) {
			if c.job != "job" || strings.Join(c.command, " ") != "sh -c exit 3" {
				t.Fatalf("job %q command %q", c.job, c.command)
			}
		}},
		{name: "Tick", args: []string{"--tick", "2026-11-30T08:00:00+01:00", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if want := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC); !c.tickAt(time.Now()).Equal(want) {
				t.Fatalf("tick %s, want %s", c.tickAt(time.Now()), want)
			}
		}},
		{name: "CatchUp", args: []string{"--schedule", "@hourly", "--catch-up", "6h", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if !c.catchUp || c.catchUpWindow != 6*time.Hour {
				t.Errorf("catch-up: got %v %s, want on with a 6h window", c.catchUp, c.catchUpWindow)
			}
		}},
		{name: "Schedule", args: []string{"--schedule", "CRON_TZ=UTC */5 * * * *", "--grace", "1m", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			now := time.Date(2026, 11, 30, 7, 8, 9, 0, time.UTC)
			if got, want := c.tickAt(now), time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC); !got.Equal(want) || c.grace != time.Minute {
				t.Fatalf("tick %s grace %s, want %s and 1m", got, c.grace, want)
			}
		}},
		{name: "ScheduleSundaySeven", args: []string{"--schedule", "CRON_TZ=UTC 0 7 * * 7", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if next := c.schedule.Next(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)); next.Weekday() != time.Sunday {
				t.Fatalf("next tick %s is a %s, want a Sunday", next, next.Weekday())
			}
		}},
		{name: "Owed", args: []string{"--owed", "--schedule", "@hourly", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if !c.owed || c.sent == "" {
				t.Fatalf("owed %v schedule sent %q, want owed with the schedule sent", c.owed, c.sent)
			}
		}},
		{name: "OwedAndTick", args: []string{"--owed", "--tick", "2026-11-30T07:00:00Z", "job", "--", "true"}, want: "exclude"},
		{name: "APIFromEnvironment", args: []string{"job", "--", "true"}, check: func(t *testing.T, c runConfig) {}},
		{name: "Group", args: []string{"--group", "reports", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.group == nil || *c.group != "reports" {
				t.Fatalf("group %v, want reports", c.group)
			}
		}},
		{name: "LeaveGroup", args: []string{"--group", "", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.group == nil || *c.group != "" {
				t.Fatalf("group %v, want \"\" (leave)", c.group)
			}
		}},
		{name: "NoGroup", args: []string{"job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.group != nil {
				t.Fatalf("group %q without --group, want none", *c.group)
			}
		}},
		{name: "InvalidGroup", args: []string{"--group", "a/b", "job", "--", "true"}, want: "--group"},
		{name: "MinInterval", args: []string{"--min-interval", "50m", "job", "--", "true"}, check: func(t *testing.T, c runConfig) {
			if c.minInterval != 50*time.Minute {
				t.Fatalf("min interval %s, want 50m", c.minInterval)
			}
		}},
		{name: "MinIntervalTooLong", args: []string{"--min-interval", "745h", "job", "--", "true"}, want: "--min-interval 745h0m0s: want whole milliseconds from 1ms to 744h"},
		{name: "MinIntervalNegative", args: []string{"--min-interval", "-1s", "job", "--", "true"}, want: "--min-interval"},
		{name: "MinIntervalSubMillisecond", args: []string{"--min-interval", "1500us", "job", "--", "true"}, want: "--min-interval"},
		{name: "NoJob", args: nil, want: "missing JOB"},
		{name: "NoSeparator", args: []string{"job", "true"}, want: "JOB -- COMMAND"},
		{name: "NoCommand", args: []string{"job", "--"}, want: "JOB -- COMMAND"},
		{name: "FlagAfterJob", args: []string{"job", "--ttl", "5s", "--", "true"}, want: "JOB -- COMMAND"},
		{name: "BadJob", args: []string{"-job", "--", "true"}, want: "not defined"},
		{name: "InvalidJob", args: []string{"a/b", "--", "true"}, want: "invalid JOB"},
		{name: "BadOwner", args: []string{"--owner", "a b", "job", "--", "true"}, want: "--owner"},
		{name: "SubMillisecondTTL", args: []string{"--ttl", "1500us", "job", "--", "true"}, want: "--ttl"},
		{name: "ScheduleAndTick", args: []string{"--schedule", "@hourly", "--tick", "2026-11-30T07:00:00Z", "job", "--", "true"}, want: "exclude"},
		{name: "BadSchedule", args: []string{"--schedule", "every minute", "job", "--", "true"}, want: "--schedule"},
		// robfig/cron panicked on a zone alone: leasectl crashed.
		{name: "ScheduleZoneAlone", args: []string{"--schedule", "CRON_TZ=Europe/Berlin", "job", "--", "true"}, want: "names a zone (CRON_TZ=Europe/Berlin) but no fields"},
		{name: "ScheduleTZAlone", args: []string{"--schedule", "TZ=UTC", "job", "--", "true"}, want: "names a zone (TZ=UTC) but no fields"},
		{name: "ScheduleFasterThanALease", args: []string{"--schedule", "@every 1ms", "job", "--", "true"}, want: "shorter than 1s"},
		{name: "BadTick", args: []string{"--tick", "tomorrow", "job", "--", "true"}, want: "--tick"},
		{name: "SubMillisecondTick", args: []string{"--tick", "2026-11-30T07:00:00.0001Z", "job", "--", "true"}, want: "milliseconds"},
		{name: "GraceWithoutSchedule", args: []string{"--grace", "1m", "job", "--", "true"}, want: "needs --schedule"},
		{name: "CatchUpWithoutSchedule", args: []string{"--catch-up", "24h", "job", "--", "true"}, want: "--catch-up needs --schedule"},
		{name: "CatchUpTooShort", args: []string{"--schedule", "@hourly", "--catch-up", "30s", "job", "--", "true"}, want: "--catch-up 30s"},
		{name: "CatchUpTooLong", args: []string{"--schedule", "@hourly", "--catch-up", "169h", "job", "--", "true"}, want: "--catch-up 169h"},
		{name: "GraceTooLong", args: []string{"--schedule", "@hourly", "--grace", "25h", "job", "--", "true"}, want: "--grace"},
		{name: "NegativeGrace", args: []string{"--schedule", "@hourly", "--grace", "-1s", "job", "--", "true"}, want: "--grace"},
		{name: "NegativeMaxRunTime", args: []string{"--max-run-time", "-1s", "job", "--", "true"}, want: "--max-run-time"},
		{name: "KillGraceAboveTTL", args: []string{"--ttl", "4s", "--kill-grace", "5s", "job", "--", "true"}, want: "at most the TTL"},
		{name: "NegativeKillGrace", args: []string{"--kill-grace", "-1s", "job", "--", "true"}, want: "--kill-grace"},
		{name: "ZeroWait", args: []string{"--wait", "0s", "job", "--", "true"}, want: "--wait"},
		{name: "SkippedCodeRange", args: []string{"--skipped-exit-code", "256", "job", "--", "true"}, want: "--skipped-exit-code"},
		{name: "UnknownFlag", args: []string{"--token", "x", "job", "--", "true"}, want: "not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseRun(tt.args, env, "host-1", 42)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("parseRun(%q): %v", tt.args, err)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseRun(%q): got %v, want an error containing %q", tt.args, err, tt.want)
			}
			if errorExit(err) != exitUsage {
				t.Fatalf("parseRun(%q): exit %d, want 64", tt.args, errorExit(err))
			}
		})
	}
}

// TestTriggerUsage: a bad trigger command line is exit 64 with a line
// that names what to change, and nothing is sent (the --api is a port
// nobody listens on, which would be exit 75).
func TestTriggerUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoJob", nil, "exactly one JOB"},
		{"TwoJobs", []string{"a", "b"}, "exactly one JOB"},
		{"InvalidJob", []string{"a/b"}, "invalid JOB"},
		{"FlagAfterJob", []string{"job", "--reason", "x"}, "exactly one JOB"},
		{"ReasonTooLong", []string{"--reason", strings.Repeat("r", 257), "job"}, "--reason"},
		{"KeyTooLong", []string{"--key", strings.Repeat("k", 257), "job"}, "--key"},
		{"KeyWithNewline", []string{"--key", "a\nb", "job"}, "--key"},
		{"BadOutput", []string{"-o", "yaml", "job"}, "-o"},
		{"ZeroWait", []string{"--wait", "0s", "job"}, "--wait"},
		{"UnknownFlag", []string{"--token", "x", "job"}, "not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			env := environment{apiURL: "http://127.0.0.1:1", stdout: io.Discard, stderr: &stderr}
			if got := dispatch(append([]string{"trigger"}, tt.args...), env); got != exitUsage {
				t.Fatalf("exit: got %d, want %d; stderr %q", got, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr: got %q, want it to name %q", stderr.String(), tt.want)
			}
			if strings.Contains(stderr.String(), "Idempotency-Key leasectl-") {
				t.Fatalf("stderr: got %q: a trigger was attempted", stderr.String())
			}
		})
	}
}

// TestAcquireWait: with --group and --schedule the acquire may take until
// the next tick (the runner ends group_full retries at the tick's grace);
// otherwise --wait.
func TestAcquireWait(t *testing.T) {
	t.Parallel()
	env := environment{stderr: io.Discard}
	now := time.Date(2026, 11, 30, 7, 0, 2, 0, time.UTC)
	tests := []struct {
		name string
		args []string
		want time.Duration
	}{
		{"Wait", []string{"--schedule", "CRON_TZ=UTC * * * * *", "job", "--", "true"}, 10 * time.Second},
		{"GroupUntilNextTick", []string{"--schedule", "CRON_TZ=UTC * * * * *", "--group", "g", "job", "--", "true"}, 58 * time.Second},
		{"GroupWaitLonger", []string{"--schedule", "CRON_TZ=UTC * * * * *", "--group", "g", "--wait", "2m", "job", "--", "true"}, 2 * time.Minute},
		{"GroupWithoutSchedule", []string{"--group", "g", "job", "--", "true"}, 10 * time.Second},
		{"LeaveGroup", []string{"--schedule", "CRON_TZ=UTC * * * * *", "--group", "", "job", "--", "true"}, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseRun(tt.args, env, "host-1", 42)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.acquireWait(now); got != tt.want {
				t.Errorf("acquireWait: got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestGroupsUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoAction", nil, "leasectl groups list"},
		{"UnknownAction", []string{"create", "g"}, "unknown action"},
		{"GetNoName", []string{"get"}, "exactly one group NAME"},
		{"DeleteTwoNames", []string{"delete", "a", "b"}, "exactly one group NAME"},
		{"InvalidName", []string{"get", "a/b"}, "invalid group NAME"},
		{"PutNoLimit", []string{"put", "g"}, "--limit 0"},
		{"PutLimitTooHigh", []string{"put", "--limit", "10001", "g"}, "--limit 10001"},
		{"ListWithName", []string{"list", "g"}, "unexpected arguments"},
		{"ListBadPrefix", []string{"list", "--prefix", "a b"}, "--prefix"},
		{"BadOutput", []string{"get", "-o", "yaml", "g"}, "-o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			env := environment{apiURL: "http://127.0.0.1:1", stdout: io.Discard, stderr: &stderr}
			if got := dispatch(append([]string{"groups"}, tt.args...), env); got != exitUsage {
				t.Fatalf("exit: got %d, want %d; stderr %q", got, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("stderr: got %q, want it to name %q", stderr.String(), tt.want)
			}
		})
	}
}

func TestIdempotencyKeysDiffer(t *testing.T) {
	t.Parallel()
	a, b := newIdempotencyKey(), newIdempotencyKey()
	if a == b || len(a) > leaseapi.MaxIdempotencyKeyLength || !strings.HasPrefix(a, "leasectl-") {
		t.Fatalf("keys %q and %q: want two different leasectl- keys of at most 256 bytes", a, b)
	}
}

func TestParseRunHelpPrintsExitTable(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	_, err := parseRun([]string{"-h"}, environment{stderr: &out}, "h", 1)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "EX_TEMPFAIL") || !strings.Contains(out.String(), "--kill-grace") {
		t.Fatalf("run -h: %v\n%s", err, out.String())
	}
}

// TestRetryableErr: a trigger retries what another attempt may succeed
// at, an earlier attempt of its own key still in flight included, and
// never a key reused with another request.
func TestRetryableErr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		code   string
		want   bool
	}{
		{http.StatusServiceUnavailable, "unavailable", true},
		{http.StatusTooManyRequests, "rate_limited", true},
		{http.StatusConflict, "idempotency_key_in_flight", true},
		{http.StatusConflict, "job_paused", false},
		{http.StatusUnprocessableEntity, "idempotency_key_reused", false},
		{http.StatusForbidden, "forbidden", false},
	} {
		if got := retryableErr(&jobs.APIError{StatusCode: tt.status, Code: tt.code}); got != tt.want {
			t.Errorf("retryableErr(%d %s) = %v, want %v", tt.status, tt.code, got, tt.want)
		}
	}
}

func TestErrorExit(t *testing.T) {
	t.Parallel()
	api := func(status int, code string) error {
		return fmt.Errorf("acquire %q: %w", "job", &jobs.APIError{StatusCode: status, Code: code})
	}
	tests := []struct {
		name    string
		err     error
		want    int
		skipped bool
	}{
		{"Usage", usagef("bad"), exitUsage, false},
		{"InvalidRequest", api(http.StatusBadRequest, "invalid_request"), exitUsage, false},
		{"FeatureDisabled", api(http.StatusBadRequest, "feature_disabled"), exitUsage, false},
		{"Unauthorized", api(http.StatusUnauthorized, "unauthorized"), exitNoPerm, false},
		{"Forbidden", api(http.StatusForbidden, "forbidden"), exitNoPerm, false},
		{"RateLimited", api(http.StatusTooManyRequests, "rate_limited"), exitTempFail, false},
		{"Unavailable", api(http.StatusServiceUnavailable, "unavailable"), exitTempFail, false},
		{"Internal", api(http.StatusInternalServerError, "internal"), exitTempFail, false},
		{"Network", fmt.Errorf("acquire: %w: connection refused", leaseapi.ErrUnavailable), exitTempFail, false},
		{"WaitExpired", errWaitExpired, exitTempFail, false},
		{"SIGTERM", signalError{syscall.SIGTERM}, 128 + 15, false},
		{"SIGINT", signalError{syscall.SIGINT}, 128 + 2, false},
		{"NotFound", api(http.StatusNotFound, "not_found"), exitFailure, false},
		{"Other", errors.New("boom"), exitFailure, false},
		{"LeaseHeld", &leaseapi.ConflictError{Err: leaseapi.ErrLeaseHeld}, exitFailure, true},
		{"TickDone", &leaseapi.ConflictError{Err: leaseapi.ErrTickDone}, exitFailure, true},
		{"JobPaused", &leaseapi.ConflictError{Err: leaseapi.ErrJobPaused}, exitFailure, true},
		{"TooSoon", &leaseapi.ConflictError{Err: &leaseapi.TooSoonError{}}, exitFailure, true},
		{"OtherConflict", api(http.StatusConflict, "lease_lost"), exitFailure, false},
		// Codes of a later leaseapi, read by their status.
		{"NewRefusal", api(http.StatusConflict, "some_new_refusal"), exitFailure, false},
		{"NewBadRequest", api(http.StatusBadRequest, "some_new_invalid"), exitUsage, false},
		{"NewUnavailable", api(http.StatusServiceUnavailable, "some_new_outage"), exitTempFail, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := errorExit(tt.err); got != tt.want {
				t.Errorf("errorExit(%v) = %d, want %d", tt.err, got, tt.want)
			}
			if got := jobs.Skipped(tt.err); got != tt.skipped {
				t.Errorf("jobs.Skipped(%v) = %v, want %v", tt.err, got, tt.skipped)
			}
		})
	}
}

func TestRunExit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		child   childExit
		stopped bool
		want    int
	}{
		{"ExitedZero", childExit{}, false, 0},
		{"ExitedThree", childExit{code: 3}, false, 3},
		{"KilledBySignal", childExit{signal: syscall.SIGSEGV}, false, 128 + 11},
		{"StoppedExitedZero", childExit{}, true, 1},
		{"StoppedExitedNonZero", childExit{code: 9}, true, 9},
		{"StoppedByTERM", childExit{signal: syscall.SIGTERM}, true, 143},
		{"StoppedByKILL", childExit{signal: syscall.SIGKILL}, true, 137},
	}
	for _, tt := range tests {
		if got := runExit(tt.child, tt.stopped); got != tt.want {
			t.Errorf("%s: runExit(%+v, %v) = %d, want %d", tt.name, tt.child, tt.stopped, got, tt.want)
		}
	}
}

func TestChildEnv(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	got := childEnv([]string{"PATH=/bin", "LEASEAPI_TOKEN=s3cret", "LEASE_TOKEN=99", "LEASEAPI_URL=http://x"}, "job", "h/1", 7, tick, 0, 0)
	want := []string{"PATH=/bin", "LEASEAPI_URL=http://x", "LEASE_JOB=job", "LEASE_TOKEN=7", "LEASE_TICK=2026-11-30T07:00:00.000Z", "LEASE_OWNER=h/1", "LEASE_SLOT=", "LEASE_SLOT_TOKEN="}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("childEnv = %q, want %q", got, want)
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{25 * time.Second, "in 25s"},
		{-90 * time.Second, "90s ago"},
		{-3 * time.Minute, "3m ago"},
		{5 * time.Hour, "in 5h"},
		{-72 * time.Hour, "3d ago"},
	}
	for _, tt := range tests {
		if got := relative(now.Add(tt.d), now); got != tt.want {
			t.Errorf("relative(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestSkipReasonGroupFull(t *testing.T) {
	t.Parallel()
	full := &leaseapi.GroupFullError{Group: leaseapi.Group{Name: "warehouse", Limit: 2, Held: 2, Holders: []leaseapi.GroupHolder{
		{JobID: "sales", Slot: 1}, {JobID: "stock", Slot: 2},
	}}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"Holders", fmt.Errorf("acquire %q: %w", "job", full), `group_full: group "warehouse" has 2 of 2 slots in use: sales (slot 1), stock (slot 2)`},
		{"UnreadableGroup", &leaseapi.GroupFullError{}, "group_full: every slot of the job's group is in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := skipReason(tt.err); got != tt.want {
				t.Errorf("skipReason: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSkipReasonTooSoon(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	lease := leaseapi.Lease{Owner: "host-2/77", Token: 4, AcquiredAt: at}
	soon := &leaseapi.TooSoonError{MinInterval: time.Hour, Until: at.Add(time.Hour)}
	err := fmt.Errorf("acquire %q: %w", "backup", &leaseapi.ConflictError{Err: soon, Lease: lease})
	want := "too_soon: the previous run (host-2/77, token 4) started at 2026-12-07T03:00:00.000Z, less than --min-interval 1h0m0s ago; " +
		"the next may start at 2026-12-07T04:00:00.000Z"
	if got := skipReason(err); got != want {
		t.Errorf("skipReason: got %q, want %q", got, want)
	}
}
