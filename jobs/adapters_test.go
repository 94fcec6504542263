package jobs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/robfig/cron/v3"

	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// The adapter tests run the real schedulers, which fire on the wall clock
// every second, so they take a few seconds of real time. They wait for events
// (bounded), never for a fixed time, and their assertions do not depend on
// how fast anything runs.

// adapterTTL is short, so that a lock can be held past it in a few seconds,
// yet long enough for a busy machine (make test runs every package at once)
// to answer a heartbeat in time.
const adapterTTL = 3 * time.Second

func realTimeConfig(c *jobs.Config) {
	c.Clock = clockwork.NewRealClock()
	c.TTL = adapterTTL
	c.HeartbeatInterval = 300 * time.Millisecond
	c.Margin = 300 * time.Millisecond
	c.RequestTimeout = 2 * time.Second
}

// poll calls cond every 20ms until it is true, failing the test after waitTimeout.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := waitCtx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// checkRuns fails when a tick of jobID succeeded twice or a run overlapped
// the next one; it returns the runs, oldest first. (A tick that failed may
// be granted again: another replica retries it.)
func checkRuns(t *testing.T, b *testBundle, jobID string) []client.Run {
	t.Helper()
	runs := b.runs(t, jobID)
	slices.Reverse(runs)
	succeeded := make(map[time.Time]int64)
	for i, run := range runs {
		if run.Tick == nil {
			t.Fatalf("run %d of %s has no tick", *run.Token, jobID)
		}
		if run.Outcome == client.RunOutcomeSucceeded {
			if prev, ok := succeeded[*run.Tick]; ok {
				t.Fatalf("tick %s of %s succeeded twice: tokens %d and %d", run.Tick, jobID, prev, *run.Token)
			}
			succeeded[*run.Tick] = *run.Token
		}
		if i+1 < len(runs) && (run.EndedAt == nil || run.EndedAt.After(*runs[i+1].StartedAt)) {
			t.Fatalf("runs %d and %d of %s overlap", *run.Token, *runs[i+1].Token, jobID)
		}
	}
	return runs
}

func TestGocronLocker(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var mu sync.Mutex
	starts := 0
	firstStart := make(chan string, 1)
	proceed := make(chan struct{})
	var schedulers []gocron.Scheduler
	for _, owner := range []string{"replica-a", "replica-b"} {
		r := b.runner(t, owner, nil, realTimeConfig)
		locker := r.Locker()
		s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
		if err != nil {
			t.Fatal(err)
		}
		schedulers = append(schedulers, s)
		_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
			mu.Lock()
			starts++
			first := starts == 1
			mu.Unlock()
			if first {
				firstStart <- owner
				<-proceed // held past the TTL: only heartbeats keep the lease
			}
		}), gocron.WithName("gocron-report"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() error {
			return errors.New("boom")
		}), gocron.WithName("gocron-fails"),
			gocron.WithEventListeners(gocron.AfterJobRunsWithError(locker.JobFailed)))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
	}
	t.Cleanup(func() {
		for _, s := range schedulers {
			_ = s.Shutdown()
		}
	})

	holder := receive(t, firstStart, "the first run")
	poll(t, "heartbeats past the TTL", func() bool {
		l := b.lease(t, "gocron-report")
		return l.RenewedAt.Sub(l.AcquiredAt) > adapterTTL
	})
	if l := b.lease(t, "gocron-report"); l.State != client.StateHeld || l.Token != 1 || l.Owner != holder {
		t.Fatalf("lease while the job runs: got %s token %d owner %s; want held, token 1, %s", l.State, l.Token, l.Owner, holder)
	}
	close(proceed)
	poll(t, "two more runs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return starts >= 3
	})
	for _, s := range schedulers {
		if err := s.Shutdown(); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}

	runs := checkRuns(t, b, "gocron-report")
	mu.Lock()
	if len(runs) != starts {
		t.Errorf("runs: the service recorded %d, the job ran %d times", len(runs), starts)
	}
	mu.Unlock()
	if first := runs[0]; first.Outcome != client.RunOutcomeSucceeded || first.DurationMs == nil || *first.DurationMs <= adapterTTL.Milliseconds() {
		t.Fatalf("first run: got %s after %v ms; want succeeded after more than the %s TTL", first.Outcome, first.DurationMs, adapterTTL)
	}
	checkFailedRuns(t, b, "gocron-fails")
}

// checkFailedRuns: a job that always fails never completes a tick, and its
// runs are released failed. (On a very busy machine a release may come too
// late, and the run is recorded expired when the next one starts.)
func checkFailedRuns(t *testing.T, b *testBundle, jobID string) {
	t.Helper()
	failed := 0
	for _, run := range checkRuns(t, b, jobID) {
		switch run.Outcome {
		case client.RunOutcomeSucceeded:
			t.Fatalf("%s run %d: succeeded, want failed", jobID, run.Token)
		case client.RunOutcomeFailed:
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("%s: no run released failed", jobID)
	}
	if l := b.lease(t, jobID); l.LastCompletedTick != nil {
		t.Fatalf("%s: last completed tick %s, want none", jobID, l.LastCompletedTick)
	}
}

// leaseJob is a robfig/cron job that wants the run's context.
type leaseJob struct {
	runs chan<- jobs.Report
}

func (j leaseJob) Run() { panic("CronJobWrapper calls RunContext") }

func (j leaseJob) RunContext(ctx context.Context) error {
	l, ok := jobs.LeaseFromContext(ctx)
	if !ok {
		return errors.New("no lease in the context")
	}
	j.runs <- jobs.Report{JobID: l.JobID, Owner: l.Owner, Token: l.Token, Tick: *l.Tick}
	return nil
}

func TestCronJobWrapper(t *testing.T) {
	t.Parallel()
	b := setup(t)

	ran := make(chan jobs.Report, 100)
	var crons []*cron.Cron
	for _, owner := range []string{"replica-a", "replica-b"} {
		r := b.runner(t, owner, nil, realTimeConfig)
		c := cron.New(cron.WithSeconds())
		if _, err := c.AddJob("* * * * * *", cron.NewChain(r.CronJobWrapper("robfig-report")).Then(leaseJob{runs: ran})); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AddJob("* * * * * *", cron.NewChain(r.CronJobWrapper("robfig-panics")).Then(cron.FuncJob(func() {
			panic("kaputt")
		}))); err != nil {
			t.Fatal(err)
		}
		c.Start()
		crons = append(crons, c)
	}
	stop := func() {
		for _, c := range crons {
			<-c.Stop().Done()
		}
	}
	t.Cleanup(stop)

	seen := make(map[time.Time]jobs.Report)
	for len(seen) < 3 {
		rep := receive(t, ran, "a run")
		if prev, ok := seen[rep.Tick]; ok {
			t.Fatalf("tick %s ran twice: %+v and %+v", rep.Tick, prev, rep)
		}
		if rep.Tick.Truncate(time.Second) != rep.Tick {
			t.Fatalf("tick %s: want a whole second", rep.Tick)
		}
		seen[rep.Tick] = rep
	}
	stop() // waits for running jobs: every report is in ran now
	for drained := false; !drained; {
		select {
		case rep := <-ran:
			if _, ok := seen[rep.Tick]; ok {
				t.Fatalf("tick %s ran twice", rep.Tick)
			}
			seen[rep.Tick] = rep
		default:
			drained = true
		}
	}

	runs := checkRuns(t, b, "robfig-report")
	if len(runs) != len(seen) {
		t.Fatalf("runs: the service recorded %d, the job ran %d times", len(runs), len(seen))
	}
	for _, run := range runs {
		rep, ok := seen[*run.Tick]
		if !ok {
			t.Fatalf("run %+v: the job did not run for its tick", run)
		}
		if rep.Token != *run.Token || rep.Owner != *run.Owner {
			t.Fatalf("run %d by %s: the job saw token %d as %s", *run.Token, *run.Owner, rep.Token, rep.Owner)
		}
		if run.Outcome != client.RunOutcomeSucceeded {
			t.Fatalf("run %d: got %s, want succeeded", *run.Token, run.Outcome)
		}
	}
	checkFailedRuns(t, b, "robfig-panics")
}

// TestAdaptersTakeTicksFromSchedule: given the job's spec, the adapters take
// their ticks from package schedule. Berlin's clock goes back on 2026-10-25,
// and gocron and robfig/cron fire a daily 02:30 at 02:30 CEST and again at
// 02:30 CET; only the first is a tick of the schedule, so only it runs, and
// the spec goes with the acquire.
func TestAdaptersTakeTicksFromSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const spec = "CRON_TZ=Europe/Berlin 30 2 * * *"
	cest := time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC) // 02:30 CEST
	cet := cest.Add(time.Hour)                             // 02:30 CET
	clock := clockwork.NewFakeClockAt(cest.Add(200 * time.Millisecond))
	r := b.runner(t, "replica-a", clock, nil)

	ran := make(chan jobs.Report, 2)
	job := cron.NewChain(r.CronJobWrapper("dst-robfig", jobs.Schedule(spec))).Then(leaseJob{runs: ran})
	locker := r.Locker()
	if err := locker.Job("dst-gocron", jobs.Schedule(spec)); err != nil {
		t.Fatalf("Locker.Job: %v", err)
	}
	lockAt := func() error {
		lk, err := locker.Lock(context.Background(), "dst-gocron")
		if err != nil {
			return err
		}
		return lk.Unlock(context.Background())
	}

	job.Run()
	if rep := receive(t, ran, "the run of 02:30 CEST"); !rep.Tick.Equal(cest) {
		t.Fatalf("robfig/cron at 02:30 CEST: ran tick %s, want %s", rep.Tick, cest)
	}
	if err := lockAt(); err != nil {
		t.Fatalf("gocron at 02:30 CEST: %v", err)
	}

	clock.Advance(time.Hour) // 02:30 CET
	job.Run()
	if err := lockAt(); !errors.Is(err, jobs.ErrNotATick) || !jobs.Skipped(err) {
		t.Fatalf("gocron at 02:30 CET: got %v, want ErrNotATick", err)
	}
	for _, id := range []string{"dst-robfig", "dst-gocron"} {
		runs := checkRuns(t, b, id)
		if len(runs) != 1 || !runs[0].Tick.Equal(cest) {
			t.Fatalf("%s: got runs %+v, want one, of %s and not of %s", id, runs, cest, cet)
		}
		if l := b.lease(t, id); l.Schedule == nil || *l.Schedule != spec {
			t.Errorf("%s: schedule %v, want %q sent with the acquire", id, l.Schedule, spec)
		}
	}
	select {
	case rep := <-ran:
		t.Fatalf("robfig/cron at 02:30 CET ran tick %s", rep.Tick)
	default:
	}
}

func TestAdapterOptionsValidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	if err := r.Locker().Job("report", jobs.MaxRunTime(time.Minute)); err == nil {
		t.Error("Locker.Job with MaxRunTime: got no error")
	}
	if err := r.Locker().Job("report", jobs.Schedule("not a spec")); err == nil {
		t.Error("Locker.Job with an invalid schedule: got no error")
	}
	defer func() {
		if recover() == nil {
			t.Error("CronJobWrapper with an invalid schedule: did not panic")
		}
	}()
	r.CronJobWrapper("report", jobs.Schedule("not a spec"))
}
