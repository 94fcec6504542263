package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	c, err := client.NewClientWithResponses("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     jobs.Config
		wantErr string
	}{
		{"Defaults", jobs.Config{Client: c, Owner: "replica-1"}, ""},
		{"NoClient", jobs.Config{Owner: "replica-1"}, "client is required"},
		{"EmptyOwner", jobs.Config{Client: c}, "owner"},
		{"OwnerWithSpace", jobs.Config{Client: c, Owner: "a b"}, "owner"},
		{"SubMillisecondTTL", jobs.Config{Client: c, Owner: "a", TTL: 1500 * time.Microsecond}, "ttl"},
		{"NegativeTTL", jobs.Config{Client: c, Owner: "a", TTL: -time.Second}, "ttl"},
		{"HeartbeatAtHalfTTL", jobs.Config{Client: c, Owner: "a", TTL: 10 * time.Second, HeartbeatInterval: 5 * time.Second}, ""},
		{"HeartbeatAboveHalfTTL", jobs.Config{Client: c, Owner: "a", TTL: 10 * time.Second, HeartbeatInterval: 5*time.Second + time.Millisecond}, "at most ttl/2"},
		{"NegativeMargin", jobs.Config{Client: c, Owner: "a", Margin: -time.Second}, "margin"},
		{"MarginAboveQuarterTTL", jobs.Config{Client: c, Owner: "a", TTL: 8 * time.Second, Margin: 2*time.Second + time.Millisecond}, "margin"},
		{"TinyTickPrecision", jobs.Config{Client: c, Owner: "a", TickPrecision: time.Microsecond}, "tick precision"},
		{"OwedPollingOff", jobs.Config{Client: c, Owner: "a", OwedPollInterval: -1}, ""},
		{"OwedPollEverySecond", jobs.Config{Client: c, Owner: "a", OwedPollInterval: time.Second}, ""},
		{"TinyOwedPollInterval", jobs.Config{Client: c, Owner: "a", OwedPollInterval: time.Millisecond}, "owed poll interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := jobs.New(tt.cfg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New: got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New: got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunSucceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	tick := epoch.Truncate(time.Minute)

	var inJob leaseapi.Lease
	rep, err := r.Run(context.Background(), "report", tick, func(ctx context.Context) error {
		inJob, _ = jobs.LeaseFromContext(ctx)
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Result != jobs.ResultSucceeded || rep.Token != 1 || !rep.Tick.Equal(tick) || rep.Owner != "replica-a" {
		t.Fatalf("report: got %+v, want succeeded, token 1, tick %s, owner replica-a", rep, tick)
	}
	if inJob.Token != rep.Token || inJob.JobID != "report" || inJob.Owner != "replica-a" {
		t.Fatalf("LeaseFromContext in the job: got %+v, want token %d of report for replica-a", inJob, rep.Token)
	}

	l := b.lease(t, "report")
	if l.State != client.StateReleased || l.LastOutcome == nil || *l.LastOutcome != client.LeaseLastOutcomeSucceeded {
		t.Fatalf("lease after the run: got state %s, last outcome %v; want released, succeeded", l.State, l.LastOutcome)
	}
	if l.LastCompletedTick == nil || !l.LastCompletedTick.Equal(tick) {
		t.Fatalf("lastCompletedTick: got %v, want %s", l.LastCompletedTick, tick)
	}
	if _, ok := jobs.LeaseFromContext(context.Background()); ok {
		t.Fatal("LeaseFromContext outside a run: got ok, want false")
	}
}

func TestRunFailed(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		fn   jobs.Func
		want string
	}{
		{"ReturnsError", func(context.Context) error { return errBoom }, "boom"},
		{"Panics", func(context.Context) error { panic("kaputt") }, "panicked: kaputt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)

			rep, err := r.Run(context.Background(), "report", epoch, tt.fn)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: got %v, want an error containing %q", err, tt.want)
			}
			if rep.Result != jobs.ResultFailed {
				t.Fatalf("outcome: got %q, want failed", rep.Result)
			}
			l := b.lease(t, "report")
			if l.LastOutcome == nil || *l.LastOutcome != client.LeaseLastOutcomeFailed || l.LastCompletedTick != nil {
				t.Fatalf("lease: got last outcome %v, last completed tick %v; want failed, none", l.LastOutcome, l.LastCompletedTick)
			}
		})
	}
}

func TestRunSkips(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, b *testBundle, tick time.Time)
		want    error
	}{
		{"HeldByAnotherOwner", func(t *testing.T, b *testBundle, tick time.Time) {
			b.acquire(t, "report", "replica-b", tick)
		}, leaseapi.ErrLeaseHeld},
		{"TickDone", func(t *testing.T, b *testBundle, tick time.Time) {
			l := b.acquire(t, "report", "replica-b", tick)
			b.release(t, "report", "replica-b", l.Token)
		}, leaseapi.ErrTickDone},
		{"JobPaused", func(t *testing.T, b *testBundle, tick time.Time) {
			l := b.acquire(t, "report", "replica-b", tick.Add(-time.Minute))
			b.release(t, "report", "replica-b", l.Token)
			resp, err := b.client.PauseJobWithResponse(context.Background(), "report", client.PauseRequest{})
			if err != nil || resp.JSON200 == nil {
				t.Fatalf("pause: %v %v", err, resp)
			}
		}, leaseapi.ErrJobPaused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
			tt.prepare(t, b, epoch)

			called := false
			rep, err := r.Run(context.Background(), "report", epoch, func(context.Context) error {
				called = true
				return nil
			})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run: got %v, want %v", err, tt.want)
			}
			var conflict *leaseapi.ConflictError
			if !errors.As(err, &conflict) || conflict.Lease.Owner != "replica-b" {
				t.Fatalf("Run: got %v, want a *leaseapi.ConflictError with the lease of replica-b", err)
			}
			if called || rep.Token != 0 {
				t.Fatalf("skipped tick: job called %v, report %+v; want not called, empty report", called, rep)
			}
		})
	}
}

// TestRunSkipsTickAhead: a replica whose clock runs two days fast asks for
// a tick of the future: the service refuses it (tick_ahead) and writes
// nothing; the runner skips the tick (Skipped), without calling the job,
// and logs by how much its clock is fast.
func TestRunSkipsTickAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	fast := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	r := b.runner(t, "replica-fast", clockwork.NewFakeClockAt(fast), func(c *jobs.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	called := false
	rep, err := r.Run(context.Background(), "report", fast, func(context.Context) error {
		called = true
		return nil
	})
	ahead, ok := errors.AsType[*leaseapi.TickAheadError](err)
	if !ok || !errors.Is(err, leaseapi.ErrTickAhead) || !jobs.Skipped(err) || !ahead.Tick.Equal(fast) || ahead.Now.After(time.Now()) {
		t.Fatalf("Run: got %v, want a skipped *leaseapi.TickAheadError for tick %s with the service's clock", err, fast)
	}
	if called || rep.Token != 0 {
		t.Fatalf("tick ahead: job called %v, report %+v; want not called, empty report", called, rep)
	}
	if _, ok := b.tryLease("report"); ok {
		t.Errorf("the job has a lease after a refused tick ahead; want nothing written")
	}
	var line struct {
		Level string  `json:"level"`
		Msg   string  `json:"msg"`
		Fast  float64 `json:"clock_fast_seconds"`
		Now   string  `json:"server_now"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line.Level != "WARN" ||
		!strings.Contains(line.Msg, "clock is fast") || line.Fast < 47*3600 || line.Fast > 48*3600 || line.Now != api.FormatTime(ahead.Now) {
		t.Errorf("log: got %q (%v), want one warning with clock_fast_seconds about 172800 and server_now", logs.String(), err)
	}
}

// TestRunMinInterval: a job run without a tick by replicas whose clocks
// differ runs once: the late replica's Run with MinInterval is refused
// too_soon (by the service's clock), skipped without calling the job, with
// the lease of the run it follows and the end of the interval; without the
// option it runs again.
func TestRunMinInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	early := b.runner(t, "replica-early", clockwork.NewFakeClockAt(epoch), nil)
	late := b.runner(t, "replica-late", clockwork.NewFakeClockAt(epoch.Add(-10*time.Minute)), nil)
	ran := 0
	job := func(context.Context) error { ran++; return nil }
	first, err := early.Run(context.Background(), "backup", time.Time{}, job, jobs.MinInterval(time.Hour))
	if err != nil {
		t.Fatalf("the first run: %v", err)
	}
	_, err = late.Run(context.Background(), "backup", time.Time{}, job, jobs.MinInterval(time.Hour))
	conflict, isConflict := errors.AsType[*leaseapi.ConflictError](err)
	soon, isSoon := errors.AsType[*leaseapi.TooSoonError](err)
	if !errors.Is(err, leaseapi.ErrTooSoon) || !jobs.Skipped(err) || !isConflict || !isSoon || ran != 1 {
		t.Fatalf("the late run: got %v (job ran %d times), want a skipped too_soon conflict", err, ran)
	}
	if l := b.lease(t, "backup"); conflict.Lease.Owner != "replica-early" || conflict.Lease.Token != first.Token ||
		soon.MinInterval != time.Hour || !soon.Until.Equal(l.AcquiredAt.Add(time.Hour)) {
		t.Errorf("the late run's refusal: lease %+v, %+v; want replica-early's run and the end of its hour", conflict.Lease, soon)
	}
	if rep, err := late.Run(context.Background(), "backup", time.Time{}, job); err != nil || rep.Token != first.Token+1 || ran != 2 {
		t.Errorf("without MinInterval: got %+v, %v; want the next grant run", rep, err)
	}
}

// TestRunSendsSchedule: the runner sends its job's schedule with every
// acquire, with the zone it reads the spec in, so that leaseapi holds the
// job's ticks to account; Run's callers send one with jobs.Schedule.
func TestRunSendsSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, func(c *jobs.Config) { c.Location = berlin })
	if _, err := r.Run(context.Background(), "run-report", epoch, func(context.Context) error { return nil },
		jobs.Schedule("*/5 * * * *"), jobs.Grace(20*time.Second)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if l := b.lease(t, "run-report"); l.Schedule == nil || *l.Schedule != "*/5 * * * *" || l.GraceMs == nil || *l.GraceMs != 20_000 {
		t.Errorf("lease after Run with a schedule: schedule %v grace %v, want */5 * * * * and 20000", l.Schedule, l.GraceMs)
	}

	if err := r.Add("daily-report", "0 7 * * *", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Add: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	// Advance to the next 07:00 in Berlin: the job's first tick.
	for i := 0; ; i++ {
		_ = clock.BlockUntilContext(ctx, 1) // the schedule loop waits on its timer
		next := time.Date(2026, 12, 1, 7, 0, 0, 0, berlin)
		clock.Advance(next.Sub(clock.Now()))
		if l, ok := b.tryLease("daily-report"); ok && l.Schedule != nil {
			if *l.Schedule != "CRON_TZ=Europe/Berlin 0 7 * * *" {
				t.Errorf("lease after Add's tick: schedule %q, want the runner's zone named", *l.Schedule)
			}
			break
		}
		if i == 1000 {
			t.Fatal("the job never acquired its lease")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestGraceAndScheduleOptionsValidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	for _, opt := range []jobs.JobOption{jobs.Schedule("every day"), jobs.Grace(0), jobs.Grace(25 * time.Hour), jobs.Grace(time.Microsecond),
		jobs.MinInterval(0), jobs.MinInterval(time.Microsecond), jobs.MinInterval(32 * 24 * time.Hour),
		jobs.CatchUp(time.Second), jobs.CatchUp(8 * 24 * time.Hour), jobs.CatchUp(time.Hour)} { // the last: no schedule
		if _, err := r.Run(context.Background(), "report", epoch, func(context.Context) error { return nil }, opt); err == nil {
			t.Errorf("Run with an invalid option: got no error")
		}
	}
}

func TestRunRetriesUnavailableAcquire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.failAcquires.Store(2)

	res := goRun(context.Background(), r, "report", epoch, func(context.Context) error { return nil })
	for range 2 {
		blockUntil(t, clock, 1) // the backoff timer
		clock.Advance(time.Minute)
	}
	got := receive(t, res, "the run")
	if got.err != nil || got.report.Result != jobs.ResultSucceeded {
		t.Fatalf("Run: got %+v, %v; want succeeded", got.report, got.err)
	}
	if n := b.faults.answered("acquire", http.StatusServiceUnavailable); n != 2 {
		t.Fatalf("acquires answered 503: got %d, want 2", n)
	}
}

// TestRunWaitsRetryAfter: an acquire answered 503 with Retry-After is not
// sent again before that many seconds, even though the runner's own first
// backoff is far shorter.
func TestRunWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		rateLimited bool
		status      int
	}{
		{"Unavailable", false, http.StatusServiceUnavailable},
		{"RateLimited", true, http.StatusTooManyRequests},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testRunWaitsRetryAfter(t, tt.rateLimited, tt.status)
		})
	}
}

// testRunWaitsRetryAfter: an acquire answered status (503 or 429) with
// Retry-After: 3 is retried no sooner than 3 s later, and then succeeds.
func testRunWaitsRetryAfter(t *testing.T, rateLimited bool, status int) {
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.failAcquires.Store(1)
	b.faults.retryAfter.Store(3)
	b.faults.rateLimited.Store(rateLimited)

	res := goRun(context.Background(), r, "retry-after", epoch, func(context.Context) error { return nil })
	blockUntil(t, clock, 1) // the wait before the retry
	clock.Advance(2 * time.Second)
	blockUntil(t, clock, 1) // still the same wait: 3 s were asked for
	select {
	case got := <-res:
		t.Fatalf("the run ended 2 s after a %d with Retry-After: 3: %+v", status, got)
	default:
	}
	if n := b.faults.answered("acquire", http.StatusOK); n != 0 {
		t.Fatalf("acquires answered 200 within Retry-After: %d, want 0", n)
	}
	clock.Advance(2 * time.Second)
	got := receive(t, res, "the run")
	if got.err != nil || got.report.Result != jobs.ResultSucceeded {
		t.Fatalf("Run: got %+v, %v; want succeeded", got.report, got.err)
	}
	if n := b.faults.answered("acquire", status); n != 1 {
		t.Fatalf("acquires answered %d: got %d, want 1", status, n)
	}
}

func TestRunHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)

	proceed := make(chan struct{})
	res := goRun(context.Background(), r, "report", epoch, func(ctx context.Context) error {
		select {
		case <-proceed:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	// Ten heartbeat intervals: far past the TTL by the runner's clock.
	for range 10 {
		blockUntil(t, clock, 1)
		clock.Advance(testHeartbeat)
	}
	blockUntil(t, clock, 1)
	if n := b.faults.answered("heartbeat", http.StatusOK); n != 10 {
		t.Fatalf("heartbeats: got %d, want 10", n)
	}
	close(proceed)
	got := receive(t, res, "the run")
	if got.err != nil || got.report.Result != jobs.ResultSucceeded || got.report.Token != 1 {
		t.Fatalf("Run: got %+v, %v; want succeeded with token 1", got.report, got.err)
	}
}

func TestRunCancelsJobOnLeaseLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)

	started := make(chan struct{})
	cause := make(chan error, 1)
	res := goRun(context.Background(), r, "report", epoch, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	receive(t, started, "the job to start")
	b.revoke(t, "report")
	blockUntil(t, clock, 1)
	clock.Advance(testHeartbeat)

	if err := receive(t, cause, "the job's cancellation"); !errors.Is(err, leaseapi.ErrLeaseLost) {
		t.Fatalf("cause: got %v, want lease lost", err)
	}
	got := receive(t, res, "the run")
	if got.report.Result != jobs.ResultLost || !errors.Is(got.err, leaseapi.ErrLeaseLost) {
		t.Fatalf("Run: got %+v, %v; want lost", got.report, got.err)
	}
	if runs := b.runs(t, "report"); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeRevoked {
		t.Fatalf("runs: got %+v, want one revoked run", runs)
	}
	if n := b.faults.answered("release", http.StatusOK) + b.faults.answered("release", http.StatusConflict); n != 0 {
		t.Fatalf("releases after lease_lost: got %d, want none", n)
	}
}

func TestRunCancelsJobAtDeadlineWithoutHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.failHeartbeats.Store(true)

	cause := make(chan error, 1)
	res := goRun(context.Background(), r, "report", epoch, func(ctx context.Context) error {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	blockUntil(t, clock, 1)
	clock.Advance(testHeartbeat) // the heartbeat fails
	blockUntil(t, clock, 1)      // waiting for the retry
	select {
	case err := <-cause:
		t.Fatalf("job cancelled before the deadline: %v", err)
	default:
	}
	// The deadline is the acquire's send time + TTL - margin.
	clock.Advance(testTTL - testMargin - testHeartbeat)

	if err := receive(t, cause, "the job's cancellation"); !errors.Is(err, jobs.ErrDeadline) {
		t.Fatalf("cause: got %v, want %v", err, jobs.ErrDeadline)
	}
	got := receive(t, res, "the run")
	if got.report.Result != jobs.ResultLost || !errors.Is(got.err, jobs.ErrDeadline) {
		t.Fatalf("Run: got %+v, %v; want lost at the deadline", got.report, got.err)
	}
	if n := b.faults.answered("heartbeat", http.StatusServiceUnavailable); n < 1 {
		t.Fatalf("failed heartbeats: got %d, want at least 1", n)
	}
	// Nobody took the lease over, so the release (failed) still went through.
	if runs := b.runs(t, "report"); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeFailed {
		t.Fatalf("runs: got %+v, want one failed run", runs)
	}
}

// TestRunLateGrantDoesNotStart pauses the replica (its clock jumps past
// the TTL) while its acquire is on its way: the grant it gets back may
// already belong to another replica by then, so the job must not start.
func TestRunLateGrantDoesNotStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	pause := func() { clock.Advance(testTTL) }
	b.faults.beforeAcquire.Store(&pause)

	started := make(chan struct{}, 1)
	got := receive(t, goRun(context.Background(), r, "late", epoch, func(ctx context.Context) error {
		started <- struct{}{}
		return nil
	}), "the run")
	select {
	case <-started:
		t.Fatalf("the job started after its lease's local deadline")
	default:
	}
	if got.report.Result != jobs.ResultLost || !errors.Is(got.err, jobs.ErrDeadline) {
		t.Fatalf("Run: got %+v, %v; want lost with ErrDeadline", got.report, got.err)
	}
}

func TestRunMaxRunTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	forever := blockForever(t)

	jobCtx := make(chan context.Context, 1)
	res := goRun(context.Background(), r, "stuck", epoch, func(ctx context.Context) error {
		jobCtx <- ctx
		<-forever // ignores its context
		return nil
	}, jobs.MaxRunTime(15*time.Second))
	ctx := receive(t, jobCtx, "the job to start")

	blockUntil(t, clock, 1)
	clock.Advance(testHeartbeat) // t=10s: heartbeat, valid until 37s
	blockUntil(t, clock, 1)
	clock.Advance(5 * time.Second) // t=15s: max run time
	blockUntil(t, clock, 1)
	if err := context.Cause(ctx); !errors.Is(err, jobs.ErrMaxRunTime) {
		t.Fatalf("job context cause at its max run time: got %v, want %v", err, jobs.ErrMaxRunTime)
	}
	// No heartbeat any more; at the deadline the runner gives the job up
	// and releases the lease failed.
	clock.Advance(testHeartbeat + testTTL - testMargin - 15*time.Second)

	got := receive(t, res, "the run")
	if got.report.Result != jobs.ResultFailed || !errors.Is(got.err, jobs.ErrMaxRunTime) || !errors.Is(got.err, jobs.ErrAbandoned) {
		t.Fatalf("Run: got %+v, %v; want failed, max run time, abandoned", got.report, got.err)
	}
	if n := b.faults.answered("heartbeat", http.StatusOK); n != 1 {
		t.Fatalf("heartbeats: got %d, want 1 (none after the max run time)", n)
	}
	if runs := b.runs(t, "stuck"); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeFailed {
		t.Fatalf("runs: got %+v, want one failed run", runs)
	}
	// The abandoned job still runs here, so this replica does not start it again.
	if _, err := r.Run(context.Background(), "stuck", epoch.Add(time.Hour), func(context.Context) error { return nil }); !errors.Is(err, leaseapi.ErrLeaseHeld) {
		t.Fatalf("Run while the abandoned job still runs: got %v, want lease held", err)
	}
}

func TestRunProgressWatchdog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	forever := blockForever(t)

	progress := make(chan struct{})
	reported := make(chan struct{})
	jobCtx := make(chan context.Context, 1)
	res := goRun(context.Background(), r, "stuck", epoch, func(ctx context.Context) error {
		jobCtx <- ctx
		for {
			select {
			case <-progress:
				jobs.Progress(ctx)
				reported <- struct{}{}
			case <-forever: // hangs, ignoring its context
				return nil
			}
		}
	}, jobs.ProgressWindow(12*time.Second))
	ctx := receive(t, jobCtx, "the job to start")

	blockUntil(t, clock, 1)
	clock.Advance(5 * time.Second) // t=5s
	progress <- struct{}{}
	receive(t, reported, "the progress report")
	clock.Advance(5 * time.Second) // t=10s: progress 5s ago, heartbeat
	blockUntil(t, clock, 1)
	if n := b.faults.answered("heartbeat", http.StatusOK); n != 1 {
		t.Fatalf("heartbeats while making progress: got %d, want 1", n)
	}
	clock.Advance(7 * time.Second) // t=17s: no progress for 12s
	blockUntil(t, clock, 1)
	if err := context.Cause(ctx); !errors.Is(err, jobs.ErrStalled) {
		t.Fatalf("job context cause: got %v, want %v", err, jobs.ErrStalled)
	}
	clock.Advance(20 * time.Second) // t=37s: the deadline of the heartbeat at 10s

	got := receive(t, res, "the run")
	if got.report.Result != jobs.ResultFailed || !errors.Is(got.err, jobs.ErrStalled) {
		t.Fatalf("Run: got %+v, %v; want failed, stalled", got.report, got.err)
	}
	if n := b.faults.answered("heartbeat", http.StatusOK); n != 1 {
		t.Fatalf("heartbeats: got %d, want 1 (none after the job stalled)", n)
	}
	if runs := b.runs(t, "stuck"); len(runs) != 1 || runs[0].Outcome != client.RunOutcomeFailed {
		t.Fatalf("runs: got %+v, want one failed run", runs)
	}
}

func TestRunShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)

	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	cause := make(chan error, 1)
	res := goRun(ctx, r, "report", epoch, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	receive(t, started, "the job to start")
	cancel()

	if err := receive(t, cause, "the job's cancellation"); !errors.Is(err, jobs.ErrShutdown) {
		t.Fatalf("cause: got %v, want %v", err, jobs.ErrShutdown)
	}
	got := receive(t, res, "the run")
	if got.report.Result != jobs.ResultFailed || !errors.Is(got.err, jobs.ErrShutdown) {
		t.Fatalf("Run: got %+v, %v; want failed by shutdown", got.report, got.err)
	}
	if l := b.lease(t, "report"); l.State != client.StateReleased || *l.LastOutcome != client.LeaseLastOutcomeFailed {
		t.Fatalf("lease: got %s / %v, want released failed", l.State, l.LastOutcome)
	}
}

func TestRunRefusesSecondConcurrentRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)

	started := make(chan struct{})
	proceed := make(chan struct{})
	res := goRun(context.Background(), r, "report", epoch, func(context.Context) error {
		close(started)
		<-proceed
		return nil
	})
	receive(t, started, "the job to start")
	// The same owner and tick would be granted again as an idempotent retry.
	_, err := r.Run(context.Background(), "report", epoch, func(context.Context) error {
		t.Error("second run started")
		return nil
	})
	if !errors.Is(err, leaseapi.ErrLeaseHeld) {
		t.Fatalf("second Run: got %v, want lease held", err)
	}
	close(proceed)
	if got := receive(t, res, "the first run"); got.err != nil {
		t.Fatalf("first Run: %v", got.err)
	}
}
