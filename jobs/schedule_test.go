package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin and America/New_York without a system zone database

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

func TestAddRejects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	noop := func(context.Context) error { return nil }
	if err := r.Add("report", "@every 5s", noop); err != nil {
		t.Fatalf("Add: %v", err)
	}
	tests := []struct {
		name  string
		jobID string
		spec  string
		fn    jobs.Func
		opts  []jobs.JobOption
	}{
		{"Duplicate", "report", "@every 5s", noop, nil},
		{"BadJobID", "-report", "@every 5s", noop, nil},
		{"BadSpec", "other", "every five seconds", noop, nil},
		{"NeverFires", "other", "0 0 30 2 *", noop, nil},
		{"ZoneAlone", "other", "CRON_TZ=Europe/Berlin", noop, nil}, // robfig/cron panicked
		{"TZAlone", "other", "TZ=UTC", noop, nil},
		{"FasterThanALease", "other", "@every 1ms", noop, nil},
		{"ScheduleOptionZoneAlone", "other", "@every 5s", noop, []jobs.JobOption{jobs.Schedule("TZ=UTC")}},
		{"ScheduleOptionFasterThanALease", "other", "@every 5s", noop, []jobs.JobOption{jobs.Schedule("@every 999ms")}},
		{"NilFunc", "other", "@every 5s", nil, nil},
		{"BadMaxRunTime", "other", "@every 5s", noop, []jobs.JobOption{jobs.MaxRunTime(0)}},
		{"BadProgressWindow", "other", "@every 5s", noop, []jobs.JobOption{jobs.ProgressWindow(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := r.Add(tt.jobID, tt.spec, tt.fn, tt.opts...); err == nil {
				t.Fatalf("Add(%q, %q): got no error", tt.jobID, tt.spec)
			}
		})
	}
}

// TestServeRunsEachTickOnce runs three replicas whose clocks disagree by up
// to 700ms against one service: every tick runs exactly once.
func TestServeRunsEachTickOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reports := make(chan jobs.Report, 16)
	offsets := []time.Duration{0, 300 * time.Millisecond, -400 * time.Millisecond}
	clocks := make([]*clockwork.FakeClock, len(offsets))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, len(offsets))
	for i, offset := range offsets {
		clocks[i] = clockwork.NewFakeClockAt(epoch.Add(offset))
		r := b.runner(t, "replica-"+string(rune('a'+i)), clocks[i], func(c *jobs.Config) {
			c.ReportFunc = func(rep jobs.Report) { reports <- rep }
		})
		if err := r.Add("report", "@every 5s", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		go func() { served <- r.Serve(ctx) }()
	}

	const ticks = 4
	seen := make(map[time.Time]string)
	for i := range ticks {
		for _, c := range clocks {
			blockUntil(t, c, 1)
			c.Advance(5 * time.Second)
		}
		rep := receive(t, reports, "a run")
		if rep.Result != jobs.ResultSucceeded {
			t.Fatalf("run %d: got %+v, want succeeded", i, rep)
		}
		if prev, ok := seen[rep.Tick]; ok {
			t.Fatalf("tick %s ran twice: by %s and %s", rep.Tick, prev, rep.Owner)
		}
		seen[rep.Tick] = rep.Owner
	}
	cancel()
	for range offsets {
		if err := receive(t, served, "Serve to return"); err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
	select {
	case rep := <-reports:
		t.Fatalf("extra run: %+v", rep)
	default:
	}

	// The ticks are the multiples of 5s after the epoch, whatever each
	// replica's offset; the service recorded each once.
	for i := range ticks {
		want := epoch.Truncate(5 * time.Second).Add(time.Duration(i+1) * 5 * time.Second)
		if _, ok := seen[want]; !ok {
			t.Fatalf("tick %s did not run; ran %v", want, seen)
		}
	}
	runs := b.runs(t, "report")
	if len(runs) != ticks {
		t.Fatalf("runs: got %d, want %d", len(runs), ticks)
	}
	for _, run := range runs {
		if run.Outcome != client.RunOutcomeSucceeded {
			t.Fatalf("run %+v: want succeeded", run)
		}
	}
}

func TestServeShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	reports := make(chan jobs.Report, 4)
	r := b.runner(t, "replica-a", clock, func(c *jobs.Config) {
		c.ReportFunc = func(rep jobs.Report) { reports <- rep }
	})
	started := make(chan struct{}, 1)
	err := r.Add("report", "@every 5s", func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()

	blockUntil(t, clock, 1)
	clock.Advance(5 * time.Second)
	receive(t, started, "the job to start")
	cancel()

	if err := receive(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	rep := receive(t, reports, "the run")
	if rep.Result != jobs.ResultFailed || !errors.Is(rep.Err, jobs.ErrShutdown) {
		t.Fatalf("report: got %+v, want failed by shutdown", rep)
	}
	if l := b.lease(t, "report"); l.State != client.StateReleased || *l.LastOutcome != client.LeaseLastOutcomeFailed {
		t.Fatalf("lease: got %s / %v, want released failed", l.State, l.LastOutcome)
	}
	if err := r.Serve(context.Background()); err == nil {
		t.Fatal("second Serve: got no error")
	}
}

func TestServeShutdownDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := &timerWatch{FakeClock: clockwork.NewFakeClockAt(epoch), created: make(chan time.Duration, 100)}
	reports := make(chan jobs.Report, 4)
	r := b.runner(t, "replica-a", clock, func(c *jobs.Config) {
		c.ShutdownTimeout = 5 * time.Second
		c.ReportFunc = func(rep jobs.Report) { reports <- rep }
	})
	forever := blockForever(t)
	started := make(chan struct{}, 1)
	err := r.Add("stuck", "@every 5s", func(context.Context) error {
		started <- struct{}{}
		<-forever
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()

	blockUntil(t, clock.FakeClock, 1)
	clock.Advance(5 * time.Second)
	receive(t, started, "the job to start")
	cancel()
	// Wait for Serve's shutdown timer (5s) and for the run to wait for the
	// job until its deadline (the only timer above 20s).
	for shutdownTimer, runTimer := false, false; !shutdownTimer || !runTimer; {
		switch d := receive(t, clock.created, "the shutdown timers"); {
		case d == 5*time.Second:
			shutdownTimer = true
		case d > 20*time.Second:
			runTimer = true
		}
	}
	clock.Advance(5 * time.Second)
	if err := receive(t, served, "Serve to return"); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("Serve: got %v, want jobs still running", err)
	}
	// At its deadline the run gives the job up and releases it failed.
	clock.Advance(testTTL)
	if rep := receive(t, reports, "the run"); rep.Result != jobs.ResultFailed || !errors.Is(rep.Err, jobs.ErrAbandoned) {
		t.Fatalf("report: got %+v, want failed, abandoned", rep)
	}
}

// TestServeClaimsRunNow: three replicas serving a yearly job poll what it
// owes; after a run now (POST /leases/{jobId}/trigger) exactly one of them
// runs the manual tick, once, and its run says manual.
func TestServeClaimsRunNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const job = "year-end"
	var ran atomic.Int32
	ticks := make(chan time.Time, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const replicas = 3
	served := make(chan error, replicas)
	for i := range replicas {
		r := b.runner(t, "replica-"+string(rune('a'+i)), clockwork.NewRealClock(), func(c *jobs.Config) {
			c.OwedPollInterval = 20 * time.Millisecond
		})
		if err := r.Add(job, "0 0 1 1 *", func(ctx context.Context) error {
			ran.Add(1)
			if l, ok := jobs.LeaseFromContext(ctx); ok && l.Tick != nil {
				ticks <- *l.Tick
			}
			return nil
		}, jobs.CatchUp(0)); err != nil {
			t.Fatal(err)
		}
		go func() { served <- r.Serve(ctx) }()
	}
	// The job needs a lease row to be triggered: one ordinary run.
	b.release(t, job, "setup", b.acquire(t, job, "setup", epoch).Token)
	resp, err := b.client.TriggerJobWithResponse(ctx, job, nil, client.TriggerRequest{})
	if err != nil || resp.JSON200 == nil || resp.JSON200.OwedTick == nil {
		t.Fatalf("trigger: %v %s", err, resp.Body)
	}
	manual := *resp.JSON200.OwedTick
	if got := receive(t, ticks, "the manual tick's run"); !got.Equal(manual) {
		t.Fatalf("ran tick %s, want the manual tick %s", got, manual)
	}
	// Once it ran nothing is owed; a replica whose poll answered before
	// the claim is refused by the service.
	for i := 0; ; i++ {
		if l := b.lease(t, job); l.OwedTick == nil && l.State == client.StateReleased {
			break
		}
		if i == 1000 {
			t.Fatal("the manual tick's run was never released")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	for range replicas {
		if err := receive(t, served, "Serve to return"); err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the manual tick ran %d times, want once", n)
	}
	runs := b.runs(t, job)
	if len(runs) != 2 || runs[0].Trigger != client.RunTriggerManual || runs[0].Outcome != client.RunOutcomeSucceeded {
		t.Fatalf("runs: got %+v, want the manual run, succeeded, after the setup run", runs)
	}
}
