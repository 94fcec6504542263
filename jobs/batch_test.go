package jobs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api/client"
	"github.com/leaseapi/leaseapi/jobs"
)

// The batch tests know which calls go together: the faultProxy holds a
// runner's first call at the service (hold), the test waits until the
// runner's other calls have queued behind it (jobs.QueuedAcquires), and
// lets it go; the queued calls then go as one batch.

// waitFor waits until cond holds, polling: what it waits for (calls
// queueing in a runner) shows no event a test could wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := waitCtx(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

// holdCalls makes the faultProxy hold single acquires and heartbeats until
// the returned function is called, or the test ends.
func (b *testBundle) holdCalls(t *testing.T) (release func()) {
	hold := make(chan struct{})
	b.faults.held.Store(0)
	b.faults.heldItems.Store(0)
	b.faults.hold.Store(&hold)
	release = sync.OnceFunc(func() {
		b.faults.hold.Store(nil)
		close(hold)
	})
	t.Cleanup(release)
	return release
}

// batchRunner is testBundle.runner with a request timeout that no wait of a
// test comes near: a call that queues must not time out while the test
// waits for the others to queue.
func (b *testBundle) batchRunner(t *testing.T, owner string, clock clockwork.Clock, mod func(*jobs.Config)) *jobs.Runner {
	t.Helper()
	return b.runner(t, owner, clock, func(c *jobs.Config) {
		c.RequestTimeout = 2 * waitTimeout
		if mod != nil {
			mod(c)
		}
	})
}

func jobIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%02d", i)
	}
	return ids
}

// TestServeBatchesAcquires: three replicas serving the same 40 jobs send
// the acquires of a tick as one single call and one batch each, not 40
// calls each, and every job runs exactly once per tick.
func TestServeBatchesAcquires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const replicas, ticks = 3, 2
	ids := jobIDs(40)
	reports := make(chan jobs.Report, replicas*len(ids)*ticks)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, replicas)
	clocks := make([]*clockwork.FakeClock, replicas)
	runners := make([]*jobs.Runner, replicas)
	for i := range replicas {
		clocks[i] = clockwork.NewFakeClockAt(epoch)
		runners[i] = b.batchRunner(t, fmt.Sprintf("replica-%d", i), clocks[i], func(c *jobs.Config) {
			c.ReportFunc = func(rep jobs.Report) { reports <- rep }
		})
		for _, id := range ids {
			if err := runners[i].Add(id, "@every 1h", func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		go func() { served <- runners[i].Serve(ctx) }()
	}

	for k := range ticks {
		tick := epoch.Truncate(time.Hour).Add(time.Duration(k+1) * time.Hour)
		var release func()
		if k == 0 {
			release = b.holdCalls(t)
		}
		for _, c := range clocks {
			blockUntil(t, c, len(ids))
			c.Advance(tick.Sub(c.Now()))
		}
		if k == 0 {
			// Each replica's first request is at the service (an acquire
			// alone, or a batch of those that met its sending); the rest
			// of its acquires wait for it, and then go as one batch.
			waitFor(t, "every replica's first request held and the rest queued", func() bool {
				queued := 0
				for _, r := range runners {
					queued += jobs.QueuedAcquires(r)
				}
				return b.faults.held.Load() == replicas && queued+int(b.faults.heldItems.Load()) == replicas*len(ids)
			})
			release()
		}
		ran := make(map[string]string)
		for range ids {
			rep := receive(t, reports, "a run")
			if rep.Result != jobs.ResultSucceeded || !rep.Tick.Equal(tick) {
				t.Fatalf("tick %s: got %+v, want a succeeded run of it", tick, rep)
			}
			if prev, ok := ran[rep.JobID]; ok {
				t.Fatalf("%s ran tick %s twice: by %s and %s", rep.JobID, tick, prev, rep.Owner)
			}
			ran[rep.JobID] = rep.Owner
		}
		if k == 0 {
			single := b.faults.answered("acquire", http.StatusOK) + b.faults.answered("acquire", http.StatusConflict)
			batches := b.faults.answered("acquire-batch", http.StatusOK)
			if single+batches > 2*replicas || single > replicas {
				t.Fatalf("tick %s: %d single acquires and %d batches for %d acquires; want at most two requests per replica, at most one single",
					tick, single, batches, replicas*len(ids))
			}
		}
	}
	cancel()
	for range replicas {
		if err := receive(t, served, "Serve to return"); err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
	select {
	case rep := <-reports:
		t.Fatalf("extra run: %+v", rep)
	default:
	}
	for _, id := range ids {
		if runs := b.runs(t, id); len(runs) != ticks {
			t.Fatalf("runs of %s: got %d, want %d", id, len(runs), ticks)
		}
	}
}

// TestServeBatchesHeartbeats: 20 long runs of one replica heartbeat in one
// single call and one batch per interval, for ten intervals (more than
// three TTLs by the runner's clock), and all of them succeed; a run whose
// lease was revoked learns it from its item of a batch.
func TestServeBatchesHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	reports := make(chan jobs.Report, 32)
	r := b.batchRunner(t, "replica-a", clock, func(c *jobs.Config) {
		c.ReportFunc = func(rep jobs.Report) { reports <- rep }
	})
	ids := jobIDs(20)
	started, finish := make(chan string, len(ids)), make(chan struct{})
	for _, id := range ids {
		err := r.Add(id, "@every 1h", func(ctx context.Context) error {
			started <- id
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx) }()
	blockUntil(t, clock, len(ids))
	clock.Advance(epoch.Truncate(time.Hour).Add(time.Hour).Sub(clock.Now()))
	for range ids {
		receive(t, started, "a run to start")
	}

	const rounds = 10
	var revoked string
	for k := range rounds {
		// The schedule loops and the runs wait on the clock.
		blockUntil(t, clock, 2*len(ids))
		release := b.holdCalls(t)
		clock.Advance(testHeartbeat)
		waitFor(t, "a heartbeat request held and the rest queued", func() bool {
			return b.faults.held.Load() == 1 && jobs.QueuedHeartbeats(r)+int(b.faults.heldItems.Load()) == len(ids)
		})
		if k == rounds-1 {
			// Revoke a job whose heartbeat is in the batch.
			revoked = ids[0]
			if strings.Contains(*b.faults.heldPath.Load(), "/"+revoked+"/") {
				revoked = ids[1]
			}
			b.revoke(t, revoked)
		}
		release()
	}
	lost := receive(t, reports, "the run whose lease was revoked")
	if lost.JobID != revoked || lost.Result != jobs.ResultLost || !errors.Is(lost.Err, leaseapi.ErrLeaseLost) {
		t.Fatalf("revoked run: got %+v, want %s lost with lease_lost", lost, revoked)
	}
	blockUntil(t, clock, 2*len(ids)-1)
	if single, batches := b.faults.answered("heartbeat", http.StatusOK), b.faults.answered("heartbeat-batch", http.StatusOK); single+batches > 2*rounds || single > rounds {
		t.Fatalf("%d single heartbeats and %d batches for %d heartbeats; want at most two requests per round, at most one single", single, batches, rounds*len(ids))
	}
	close(finish)
	for range len(ids) - 1 {
		if rep := receive(t, reports, "a run"); rep.Result != jobs.ResultSucceeded {
			t.Fatalf("run: got %+v, want succeeded after %d heartbeats", rep, rounds)
		}
	}
	cancel()
	if err := receive(t, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// runHeld runs jobs (each with its options) on r as one batch: a first
// run of job "warmup" is held at the service, the others queue behind it,
// and go together when it returns. It returns what each Run returned.
func runHeld(t *testing.T, b *testBundle, r *jobs.Runner, tick time.Time, ids []string, opts map[string][]jobs.JobOption) map[string]runResult {
	t.Helper()
	noop := func(context.Context) error { return nil }
	release := b.holdCalls(t)
	warmup := goRun(context.Background(), r, "warmup", tick, noop)
	waitFor(t, "the warmup acquire to be held", func() bool { return b.faults.held.Load() == 1 })
	results := make(map[string]<-chan runResult, len(ids))
	for _, id := range ids {
		results[id] = goRun(context.Background(), r, id, tick, noop, opts[id]...)
	}
	waitFor(t, "the acquires to queue", func() bool { return jobs.QueuedAcquires(r) == len(ids) })
	release()
	receive(t, warmup, "the warmup run")
	out := make(map[string]runResult, len(ids))
	for id, ch := range results {
		out[id] = receive(t, ch, "the run of "+id)
	}
	return out
}

// TestBatchItemsFailAsSingleCalls: each refusal an item of a batch gets is
// the error its single acquire gets: held, done, paused, group full, tick
// ahead, too soon.
func TestBatchItemsFailAsSingleCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tick := epoch.Truncate(time.Minute)
	b.acquire(t, "held", "replica-x", tick)
	done := b.acquire(t, "done", "replica-x", tick)
	b.release(t, "done", "replica-x", done.Token)
	prev := b.acquire(t, "paused", "replica-x", tick.Add(-time.Minute))
	b.release(t, "paused", "replica-x", prev.Token)
	soon := b.acquire(t, "soon", "replica-x", tick.Add(-time.Minute))
	b.release(t, "soon", "replica-x", soon.Token)
	if resp, err := b.client.PauseJobWithResponse(ctx, "paused", client.PauseRequest{}); err != nil || resp.StatusCode() != http.StatusOK {
		t.Fatalf("pause: %v %v", err, resp)
	}
	if resp, err := b.client.PutGroupWithResponse(ctx, "reports", client.PutGroupRequest{Limit: 1}); err != nil || resp.JSON200 == nil {
		t.Fatalf("put group: %v %v", err, resp)
	}
	group := "reports"
	if resp, err := b.client.AcquireLeaseWithResponse(ctx, "holder", client.AcquireRequest{Owner: "replica-x", Tick: &tick, Group: &group}); err != nil || resp.JSON200 == nil {
		t.Fatalf("acquire holder: %v %v", err, resp)
	}
	// The grace is over by the runner's clock: a full group skips at once.
	opts := map[string][]jobs.JobOption{"full": {jobs.Schedule("* * * * *"), jobs.Grace(time.Second), jobs.Group("reports")},
		"soon": {jobs.MinInterval(time.Hour)}}
	ids := []string{"held", "done", "paused", "full", "soon"}

	singles := b.batchRunner(t, "replica-s", clockwork.NewFakeClockAt(epoch), func(c *jobs.Config) { c.DisableBatches = true })
	want := make(map[string]error)
	for _, id := range ids {
		_, want[id] = singles.Run(ctx, id, tick, func(context.Context) error { return nil }, opts[id]...)
	}
	if n := b.faults.answered("acquire-batch", http.StatusOK); n != 0 {
		t.Fatalf("a runner with DisableBatches sent %d batches", n)
	}
	r := b.batchRunner(t, "replica-b", clockwork.NewFakeClockAt(epoch), nil)
	got := runHeld(t, b, r, tick, ids, opts)
	if n := b.faults.answered("acquire-batch", http.StatusOK); n != 1 {
		t.Fatalf("batches: got %d, want 1", n)
	}
	for _, id := range ids {
		g, w := got[id].err, want[id]
		if g == nil || w == nil || g.Error() != w.Error() || !jobs.Skipped(g) || got[id].report.Token != 0 {
			t.Errorf("%s: batch item got %v (%+v), single call %v; want the same skipped refusal", id, g, got[id].report, w)
		}
	}
	for _, sentinel := range []struct {
		id  string
		err error
	}{{"held", leaseapi.ErrLeaseHeld}, {"done", leaseapi.ErrTickDone}, {"paused", leaseapi.ErrJobPaused}, {"full", leaseapi.ErrGroupFull},
		{"soon", leaseapi.ErrTooSoon}} {
		if !errors.Is(got[sentinel.id].err, sentinel.err) {
			t.Errorf("%s: got %v, want %v", sentinel.id, got[sentinel.id].err, sentinel.err)
		}
	}
	if full, ok := errors.AsType[*leaseapi.GroupFullError](got["full"].err); !ok || full.Group.Name != "reports" ||
		len(full.Group.Holders) != 1 || full.Group.Holders[0].JobID != "holder" || full.RetryAfter < time.Second {
		t.Errorf("full: got %v, want a *leaseapi.GroupFullError naming holder, with the item's retryAfter", got["full"].err)
	}
	if held, ok := errors.AsType[*leaseapi.ConflictError](got["held"].err); !ok || held.Lease.Owner != "replica-x" {
		t.Errorf("held: got %v, want a *leaseapi.ConflictError with replica-x's lease", got["held"].err)
	}

	// A tick ahead of the service's clock: the tick as sent, the
	// service's clock from the item's problem.
	ahead := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	res := runHeld(t, b, r, ahead, []string{"ahead-a", "ahead-b"}, nil)
	for id, rr := range res {
		e, ok := errors.AsType[*leaseapi.TickAheadError](rr.err)
		if !ok || !jobs.Skipped(rr.err) || !e.Tick.Equal(ahead) || e.Now.After(time.Now()) {
			t.Errorf("%s: got %v, want a skipped *leaseapi.TickAheadError for tick %s", id, rr.err, ahead)
		}
	}
}

// TestBatchItemRateLimitedIsRetried: an item answered 429 rate_limited is
// retried as a single call's would be, and runs.
func TestBatchItemRateLimitedIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := clockwork.NewFakeClockAt(epoch)
	r := b.batchRunner(t, "replica-a", clock, nil)
	tick := epoch.Truncate(time.Minute)
	ids := []string{"first", "second", "third"}
	b.faults.rateLimitItems.Store(1)
	release := b.holdCalls(t)
	warmup := goRun(context.Background(), r, "warmup", tick, func(context.Context) error { return nil })
	waitFor(t, "the warmup acquire to be held", func() bool { return b.faults.held.Load() == 1 })
	results := make([]<-chan runResult, len(ids))
	for i, id := range ids {
		// One after the other: the batch holds them in this order, and
		// the first is refused.
		results[i] = goRun(context.Background(), r, id, tick, func(context.Context) error { return nil })
		waitFor(t, id+" to queue", func() bool { return jobs.QueuedAcquires(r) == i+1 })
	}
	release()
	receive(t, warmup, "the warmup run")
	for i := 1; i < len(ids); i++ {
		if got := receive(t, results[i], "the run of "+ids[i]); got.err != nil {
			t.Fatalf("%s: %v", ids[i], got.err)
		}
	}
	blockUntil(t, clock, 1) // the rate-limited acquire's backoff
	clock.Advance(time.Second)
	if got := receive(t, results[0], "the run of "+ids[0]); got.err != nil || got.report.Result != jobs.ResultSucceeded {
		t.Fatalf("%s: got %+v, %v; want it retried and succeeded", ids[0], got.report, got.err)
	}
	if n := b.faults.answered("acquire", http.StatusOK); n != 2 {
		t.Fatalf("single acquires: got %d, want the warmup and the retry", n)
	}
}

// TestFallsBackWithoutBatchRoutes: against a leaseapi without the batch
// routes the runner sends the batch's calls singly, says so once, and
// sends no batch again.
func TestFallsBackWithoutBatchRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.faults.noBatchRoutes.Store(true)
	var logs bytes.Buffer
	r := b.batchRunner(t, "replica-a", clockwork.NewFakeClockAt(epoch), func(c *jobs.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	ids := jobIDs(10)
	tick := epoch.Truncate(time.Minute)
	for id, rr := range runHeld(t, b, r, tick, ids, nil) {
		if rr.err != nil || rr.report.Result != jobs.ResultSucceeded {
			t.Fatalf("%s: got %+v, %v; want succeeded", id, rr.report, rr.err)
		}
	}
	if n := b.faults.answered("acquire-batch", http.StatusNotFound); n != 1 {
		t.Fatalf("batches answered 404: got %d, want 1", n)
	}
	if n := b.faults.answered("acquire", http.StatusOK); n != len(ids)+1 {
		t.Fatalf("single acquires: got %d, want %d", n, len(ids)+1)
	}
	// The next tick: every acquire goes single at once, none queues.
	next := tick.Add(time.Minute)
	results := make([]<-chan runResult, len(ids))
	for i, id := range ids {
		results[i] = goRun(context.Background(), r, id, next, func(context.Context) error { return nil })
	}
	for i := range ids {
		if got := receive(t, results[i], "a run"); got.err != nil {
			t.Fatalf("%s: %v", ids[i], got.err)
		}
	}
	if n := b.faults.answered("acquire-batch", http.StatusNotFound); n != 1 {
		t.Fatalf("batches answered 404: got %d, want still 1", n)
	}
	if n := strings.Count(logs.String(), `"msg":"leaseapi has no batch route`); n != 1 {
		t.Fatalf("log: %d lines about the missing batch route, want 1:\n%s", n, logs.String())
	}
}
