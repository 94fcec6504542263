package jobs_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/robfig/cron/v3"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// TestRunRetriesGroupFull: an acquire refused group_full is sent again no
// sooner than its Retry-After, while the tick may still start; the run
// then goes ahead as usual.
func TestRunRetriesGroupFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.groupFull.Store(2)
	b.faults.retryAfter.Store(5)
	tick := epoch.Truncate(time.Minute)

	res := goRun(context.Background(), r, "group-retry", tick, func(context.Context) error { return nil },
		jobs.Schedule("* * * * *"), jobs.Grace(30*time.Second))
	for range 2 {
		blockUntil(t, clock, 1) // the wait before the retry
		clock.Advance(4 * time.Second)
		blockUntil(t, clock, 1) // still the same wait: 5 s were asked for
		if n := b.faults.answered("acquire", http.StatusOK); n != 0 {
			t.Fatalf("acquires answered 200 within Retry-After: %d, want 0", n)
		}
		clock.Advance(3 * time.Second) // past 5 s and its jitter
	}
	got := receive(t, res, "the run")
	if got.err != nil || got.report.Result != jobs.ResultSucceeded {
		t.Fatalf("Run: got %+v, %v; want succeeded", got.report, got.err)
	}
	if n := b.faults.answered("acquire", http.StatusConflict); n != 2 {
		t.Fatalf("acquires answered group_full: got %d, want 2", n)
	}
}

// TestRunSkipsGroupFullAfterGrace: while the group stays full the acquire
// is retried until the tick's grace is over; then the tick is skipped
// quietly, the job never called, with the group the refusal named.
func TestRunSkipsGroupFullAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch) // 07:00:02
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.groupFull.Store(100)
	b.faults.retryAfter.Store(3)
	tick := epoch.Truncate(time.Minute) // 07:00:00, grace until 07:00:10

	called := false
	res := goRun(context.Background(), r, "group-skip", tick, func(context.Context) error {
		called = true
		return nil
	}, jobs.Schedule("* * * * *"), jobs.Grace(10*time.Second), jobs.Group("reports"))
	// Refused at 07:00:02, 07:00:06 and 07:00:10: the third refusal's
	// retry would come after the grace.
	for range 2 {
		blockUntil(t, clock, 1)
		clock.Advance(4 * time.Second)
	}
	got := receive(t, res, "the run")
	full, ok := errors.AsType[*leaseapi.GroupFullError](got.err)
	if !ok || !errors.Is(got.err, leaseapi.ErrGroupFull) || !jobs.Skipped(got.err) {
		t.Fatalf("Run: got %v, want a skipped *leaseapi.GroupFullError", got.err)
	}
	if full.Group.Name != "reports" || full.Group.Limit != 1 || full.Group.Held != 1 || full.RetryAfter != 3*time.Second ||
		len(full.Group.Holders) != 1 || full.Group.Holders[0].JobID != "other" || full.Group.Holders[0].SlotToken != 9 {
		t.Errorf("refusal: got %+v, want group reports 1 of 1 held by other (slot token 9), retry after 3s", full)
	}
	if called || got.report.Token != 0 {
		t.Fatalf("group full: job called %v, report %+v; want not called, empty report", called, got.report)
	}
	if n := b.faults.answered("acquire", http.StatusConflict); n != 3 {
		t.Fatalf("acquires answered group_full: got %d, want 3", n)
	}
	if g, ok := b.faults.sentGroup(t); !ok || g != "reports" {
		t.Errorf("acquire sent group %q (%v), want reports", g, ok)
	}
}

// TestGroupOptionValidates: a group name is a job id; "" (leave the group)
// is sent as such, and no option sends no group.
func TestGroupOptionValidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	noop := func(context.Context) error { return nil }
	for _, name := range []string{"two words", strings.Repeat("g", 129), "-lead"} {
		if _, err := r.Run(context.Background(), "report", epoch, noop, jobs.Group(name)); err == nil || !strings.Contains(err.Error(), "group") {
			t.Errorf("Run with group %q: got %v, want an error naming the group", name, err)
		}
	}
	// Refused group_full past the tick's grace: not retried.
	b.faults.groupFull.Store(2)
	tick := epoch.Truncate(time.Minute)
	past := []jobs.JobOption{jobs.Schedule("* * * * *"), jobs.Grace(time.Millisecond)}
	if _, err := r.Run(context.Background(), "report", tick, noop, append(past, jobs.Group(""))...); !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Fatalf("Run: got %v, want group_full", err)
	}
	if g, ok := b.faults.sentGroup(t); !ok || g != "" {
		t.Errorf("acquire with Group(\"\") sent group %q (%v), want \"\"", g, ok)
	}
	if _, err := r.Run(context.Background(), "report", tick, noop, past...); !errors.Is(err, leaseapi.ErrGroupFull) {
		t.Fatalf("Run: got %v, want group_full", err)
	}
	if g, ok := b.faults.sentGroup(t); ok {
		t.Errorf("acquire without Group sent group %q, want none", g)
	}
}

// TestRunInGroup: against the service, a job of a full group is refused
// group_full naming the holder, retried after Retry-After, and granted
// the slot its holder released; each grant carries the group's slot and a
// larger slot token, in the job's lease and its report.
func TestRunInGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, err := b.client.PutGroupWithResponse(context.Background(), "reports", client.PutGroupRequest{Limit: 1})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("put group: %v %v", err, resp)
	}
	tick := epoch.Truncate(time.Minute)
	opts := []jobs.JobOption{jobs.Schedule("* * * * *"), jobs.Grace(59 * time.Second), jobs.Group("reports")}

	a := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	running, finish := make(chan leaseapi.Lease, 1), make(chan struct{})
	resA := goRun(context.Background(), a, "report-a", tick, func(ctx context.Context) error {
		l, _ := jobs.LeaseFromContext(ctx)
		running <- l
		<-finish
		return nil
	}, opts...)
	inA := receive(t, running, "the run of report-a")
	if inA.Group != "reports" || inA.Slot != 1 || inA.SlotToken < 1 {
		t.Fatalf("lease of report-a: group %q slot %d slot token %d, want reports, 1, a token", inA.Group, inA.Slot, inA.SlotToken)
	}

	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-b", clock, nil)
	var inB leaseapi.Lease
	resB := goRun(context.Background(), r, "report-b", tick, func(ctx context.Context) error {
		inB, _ = jobs.LeaseFromContext(ctx)
		return nil
	}, opts...)
	blockUntil(t, clock, 1) // the wait after group_full
	if n := b.faults.answered("acquire", http.StatusConflict); n != 1 {
		t.Fatalf("acquires of report-b answered 409: %d, want 1", n)
	}
	close(finish)
	if got := receive(t, resA, "the run of report-a"); got.err != nil || got.report.Slot != 1 || got.report.SlotToken != inA.SlotToken {
		t.Fatalf("report-a: %+v, %v; want succeeded in slot 1 with slot token %d", got.report, got.err, inA.SlotToken)
	}
	clock.Advance(40 * time.Second) // past the Retry-After (the slot's expiry, 30 s) and its jitter
	got := receive(t, resB, "the run of report-b")
	if got.err != nil || got.report.Group != "reports" || got.report.Slot != 1 || got.report.SlotToken <= inA.SlotToken {
		t.Fatalf("report-b: %+v, %v; want succeeded in slot 1 with a slot token above %d", got.report, got.err, inA.SlotToken)
	}
	if inB.SlotToken != got.report.SlotToken {
		t.Errorf("slot token in the job %d, in the report %d", inB.SlotToken, got.report.SlotToken)
	}
}

// TestRunGroupFullFromService: the service's group_full names the group
// and its holder, and a tick whose grace ends before its Retry-After is
// skipped at once.
func TestRunGroupFullFromService(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, err := b.client.PutGroupWithResponse(context.Background(), "batch", client.PutGroupRequest{Limit: 1})
	if err != nil || resp.JSON200 == nil {
		t.Fatalf("put group: %v %v", err, resp)
	}
	tick := epoch.Truncate(time.Minute)
	opts := []jobs.JobOption{jobs.Schedule("* * * * *"), jobs.Grace(10 * time.Second), jobs.Group("batch")}
	a := b.runner(t, "replica-a", clockwork.NewFakeClockAt(epoch), nil)
	running, finish := make(chan struct{}), make(chan struct{})
	resA := goRun(context.Background(), a, "batch-a", tick, func(context.Context) error {
		close(running)
		<-finish
		return nil
	}, opts...)
	receive(t, running, "the run of batch-a")
	defer func() {
		close(finish)
		receive(t, resA, "the run of batch-a")
	}()

	r := b.runner(t, "replica-b", clockwork.NewFakeClockAt(epoch), nil)
	_, err = r.Run(context.Background(), "batch-b", tick, func(context.Context) error { return nil }, opts...)
	full, ok := errors.AsType[*leaseapi.GroupFullError](err)
	if !ok || !jobs.Skipped(err) {
		t.Fatalf("Run: got %v, want a skipped *leaseapi.GroupFullError", err)
	}
	if full.Group.Name != "batch" || full.Group.Limit != 1 || full.Group.Held != 1 || len(full.Group.Holders) != 1 ||
		full.Group.Holders[0].JobID != "batch-a" || full.Group.Holders[0].Owner != "replica-a" || full.RetryAfter < time.Second {
		t.Errorf("refusal: got %+v, want batch 1 of 1 held by batch-a of replica-a, Retry-After at least 1s", full)
	}
}

// TestCronJobWrapperRetriesGroupFull: an adapter's firing refused
// group_full is retried within the grace of the tick its schedule names,
// although its other retries end half a tick precision after the tick.
func TestCronJobWrapperRetriesGroupFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tick := epoch.Truncate(time.Minute)
	clock := clockwork.NewFakeClockAt(tick)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.groupFull.Store(1)
	b.faults.retryAfter.Store(2)

	ran := make(chan jobs.Report, 1)
	job := cron.NewChain(r.CronJobWrapper("robfig-grouped", jobs.Schedule("* * * * *"), jobs.Grace(30*time.Second))).Then(leaseJob{runs: ran})
	done := make(chan struct{})
	go func() {
		defer close(done)
		job.Run()
	}()
	blockUntil(t, clock, 1) // the wait after group_full
	clock.Advance(3 * time.Second)
	if rep := receive(t, ran, "the run"); !rep.Tick.Equal(tick) {
		t.Fatalf("ran tick %s, want %s", rep.Tick, tick)
	}
	receive(t, done, "the firing to end")
	if n := b.faults.answered("acquire", http.StatusConflict); n != 1 {
		t.Fatalf("acquires answered group_full: got %d, want 1", n)
	}
}

// TestRunGroupFullWithoutRetryAfter: a group_full answer that lost its
// Retry-After is retried after a second, never at once.
func TestRunGroupFullWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.runner(t, "replica-a", clock, nil)
	b.faults.groupFull.Store(1)
	b.faults.groupFullBare.Store(true)
	tick := epoch.Truncate(time.Minute)

	res := goRun(context.Background(), r, "group-bare", tick, func(context.Context) error { return nil },
		jobs.Schedule("* * * * *"), jobs.Grace(30*time.Second))
	blockUntil(t, clock, 1)
	clock.Advance(999 * time.Millisecond)
	blockUntil(t, clock, 1) // still the same wait
	if n := b.faults.answered("acquire", http.StatusOK); n != 0 {
		t.Fatalf("acquires answered 200 within a second of group_full: %d, want 0", n)
	}
	clock.Advance(time.Second)
	if got := receive(t, res, "the run"); got.err != nil || got.report.Result != jobs.ResultSucceeded {
		t.Fatalf("Run: got %+v, %v; want succeeded", got.report, got.err)
	}
}
