package repotest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TTLs of the suite: long enough never to expire during a test, or short
// enough that waiting for expiry (bounded polling) is quick.
const (
	longTTL  = time.Hour
	shortTTL = 100 * time.Millisecond
)

// RunStoreSuite holds a leaseapi.Store implementation to the contract of
// leaseapi.Store (store.go) and the API (api/openapi.yaml): one subtest per
// behaviour and invariant, most of them parallel.
//
// open is called at the start of every subtest and must return a new store;
// the suite closes every store it gets. Within one subtest (one t), every
// call must return a store over the same data as the previous calls: the
// restart test closes its store, opens another and expects to find its
// leases. The suite never has two stores of one subtest open at once. Stores
// of different subtests are open at the same time; they may share data (the
// Postgres store: one database per test package) or not (a SQLite file per
// subtest); subtests isolate themselves by unique job ids and owners.
//
// The PruneRuns subtest deletes finished runs store-wide, and the webhook
// subtests claim every due webhook event. They run before the parallel
// subtests, so call RunStoreSuite from a test that is not parallel
// and do not share the store's data with parallel tests that read run
// history.
func RunStoreSuite(t *testing.T, open OpenFunc) {
	t.Helper()

	// Sequential: nothing else runs while they prune or read every job.
	t.Run("PruneRuns", func(t *testing.T) { testPruneRuns(t, setup(t, open)) })
	t.Run("JobHealth", func(t *testing.T) { testJobHealth(t, setup(t, open)) })
	// They claim every due webhook event of the store.
	t.Run("Webhooks", func(t *testing.T) { testWebhooks(t, setup(t, open)) })
	t.Run("WebhookNames", func(t *testing.T) { testWebhookNames(t, setup(t, open)) })
	t.Run("WebhookSweepEvents", func(t *testing.T) { testWebhookSweepEvents(t, setup(t, open)) })
	t.Run("WebhookFairClaims", func(t *testing.T) { testWebhookFairClaims(t, setup(t, open)) })
	t.Run("WebhookJobMissed", func(t *testing.T) { testWebhookJobMissed(t, setup(t, open)) })
	t.Run("PolicyEvents", func(t *testing.T) { testPolicyEvents(t, setup(t, open)) })
	// It raises the store's finalized level, which nothing else reads.
	t.Run("Registry", func(t *testing.T) { testRegistry(t, setup(t, open)) })

	// The subtests whose ticks lie up to hours ahead of the clock get a
	// store with a wider window (MaxTickAhead); the others the default.
	wideAhead := StoreOptions{MaxTickAhead: 24 * time.Hour}
	opts := map[string]StoreOptions{
		"TriggerAfterTicks": wideAhead, "ClaimManual": wideAhead, "ClaimManualNotOwed": wideAhead,
		"ClaimManualAfterLaterTick": wideAhead, "MinIntervalClaim": wideAhead,
	}
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b *bundle)
	}{
		{"FirstAcquire", testFirstAcquire},
		{"UnknownJob", testUnknownJob},
		{"Contention", testContention},
		{"FencingUnderChurn", testFencingUnderChurn},
		{"IdempotentAcquire", testIdempotentAcquire},
		{"ExpiryAndTakeover", testExpiryAndTakeover},
		{"Release", testRelease},
		{"ReleaseAfterExpiry", testReleaseAfterExpiry},
		{"Ticks", testTicks},
		{"Revoke", testRevoke},
		{"RevokeNotHeld", testRevokeNotHeld},
		{"Heartbeat", testHeartbeat},
		{"HolderRules", testHolderRules},
		{"RunHistory", testRunHistory},
		{"List", testList},
		{"ListFiltersAreLiteral", testListFiltersAreLiteral},
		{"Restart", testRestart},
		{"Ready", testReady},
		{"InvalidInput", testInvalidInput},
		{"ScheduleRegistration", testScheduleRegistration},
		{"Pause", testPause},
		{"SweepMissed", testSweepMissed},
		{"SweepRanAndSkipped", testSweepRanAndSkipped},
		{"SweepPaused", testSweepPaused},
		{"Stats", testStats},
		{"NearestTick", testNearestTick},
		{"NearestTickRetry", testNearestTickRetry},
		{"NearestTickContention", testNearestTickContention},
		{"TickSnapping", testTickSnapping},
		{"ListPausedOverdue", testListPausedOverdue},
		{"RecentRuns", testRecentRuns},
		{"RunsShowExpiry", testRunsShowExpiry},
		{"Credentials", testCredentials},
		{"IdempotencyKeys", testIdempotencyKeys},
		{"Trigger", testTrigger},
		{"TriggerAfterTicks", testTriggerAfterTicks},
		{"TickAheadRefused", testTickAheadRefused},
		{"TickAheadWindow", testTickAheadWindow},
		{"TickAheadNoPoison", testTickAheadNoPoison},
		{"TickAheadNearest", testTickAheadNearest},
		{"TriggerAhead", testTriggerAhead},
		{"TriggerPaused", testTriggerPaused},
		{"OwedMany", testOwedMany},
		{"ClaimManual", testClaimManual},
		{"ClaimManualNotOwed", testClaimManualNotOwed},
		{"ClaimManualAfterLaterTick", testClaimManualAfterLaterTick},
		{"CatchUpRegistration", testCatchUpRegistration},
		{"CatchUpOwed", testCatchUpOwed},
		{"CatchUpSettledByLaterTick", testCatchUpSettledByLaterTick},
		{"ManualUnclaimed", testManualUnclaimed},
		{"OwedGrantSkipsTick", testOwedGrantSkipsTick},
		{"GroupCRUD", testGroupCRUD},
		{"GroupLimit", testGroupLimit},
		{"GroupSlotFreed", testGroupSlotFreed},
		{"GroupHolderNeverRefused", testGroupHolderNeverRefused},
		{"GroupLowerLimit", testGroupLowerLimit},
		{"GroupOwedTick", testGroupOwedTick},
		{"GroupFullMissed", testGroupFullMissed},
		{"PolicyCRUD", testPolicyCRUD},
		{"PolicyFailures", testPolicyFailures},
		{"PolicyRateAndRuntime", testPolicyRateAndRuntime},
		{"PolicyHeldAndExpired", testPolicyHeldAndExpired},
		{"PolicyMissed", testPolicyMissed},
		{"MinInterval", testMinInterval},
		{"MinIntervalOrder", testMinIntervalOrder},
		{"MinIntervalClaim", testMinIntervalClaim},
		{"MinIntervalGroup", testMinIntervalGroup},
		{"MinIntervalContention", testMinIntervalContention},
		{"BatchAcquireConformance", testBatchAcquireConformance},
		{"BatchHeartbeatConformance", testBatchHeartbeatConformance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, setup(t, open, opts[tc.name]))
		})
	}
}

// testFirstAcquire: the first grant of a job, and Get and Runs agreeing with it.
func testFirstAcquire(t *testing.T, b *bundle) {
	job, owner, tick := b.job("first"), b.owner("a"), tickAt(0)
	got := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: time.Minute, Tick: tick})

	if got.AcquiredAt.IsZero() {
		t.Fatalf("Acquire: got zero AcquiredAt")
	}
	want := leaseapi.Lease{
		JobID:      job,
		Owner:      owner,
		Token:      1,
		State:      leaseapi.StateHeld,
		AcquiredAt: got.AcquiredAt,
		RenewedAt:  got.AcquiredAt,
		ExpiresAt:  got.AcquiredAt.Add(time.Minute),
		TTL:        time.Minute,
		Tick:       tick,
		// A new job catches up nothing, with the default window.
		CatchUp:       leaseapi.CatchUpNone,
		CatchUpWindow: leaseapi.DefaultCatchUpWindow,
	}
	checkLease(t, "Acquire", got, want)
	checkLease(t, "Get after Acquire", b.get(t, job), want)
	// The suite's databases were never promoted: every token is on
	// timeline 1, where tokens count from 1.
	if g := b.get(t, job); got.Timeline != 1 || g.Timeline != 1 {
		t.Errorf("Timeline of the first grant: got %d (Get: %d), want 1", got.Timeline, g.Timeline)
	}

	runs := b.runs(t, job, 10)
	if len(runs) != 1 {
		t.Fatalf("Runs: got %d runs, want 1: %+v", len(runs), runs)
	}
	checkRun(t, "Runs[0]", runs[0], 1, owner, tick, leaseapi.OutcomeRunning)
	if !equalTimePtr(runs[0].StartedAt, &got.AcquiredAt) {
		t.Errorf("Runs[0].StartedAt: got %s, want AcquiredAt %s", fmtTime(runs[0].StartedAt), fmtTime(&got.AcquiredAt))
	}

	// Without a tick.
	job2 := b.job("notick")
	got2 := b.acquire(t, leaseapi.AcquireParams{JobID: job2, Owner: owner, TTL: 1500 * time.Millisecond})
	want2 := leaseapi.Lease{
		JobID: job2, Owner: owner, Token: 1, State: leaseapi.StateHeld,
		AcquiredAt: got2.AcquiredAt, RenewedAt: got2.AcquiredAt, ExpiresAt: got2.AcquiredAt.Add(1500 * time.Millisecond),
		TTL: 1500 * time.Millisecond, CatchUp: leaseapi.CatchUpNone, CatchUpWindow: leaseapi.DefaultCatchUpWindow,
	}
	checkLease(t, "Acquire without tick", got2, want2)
}

// testUnknownJob: every per-job operation on a job without a lease.
func testUnknownJob(t *testing.T, b *bundle) {
	ctx, job, owner := t.Context(), b.job("unknown"), b.owner("a")

	_, err := b.store.Get(ctx, job)
	wantError(t, "Get", err, leaseapi.ErrNotFound)
	_, err = b.store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: job, Owner: owner, Token: 1})
	wantError(t, "Heartbeat", err, leaseapi.ErrNotFound)
	_, err = b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: 1, Outcome: leaseapi.OutcomeSucceeded})
	wantError(t, "Release", err, leaseapi.ErrNotFound)
	_, err = b.store.Revoke(ctx, &leaseapi.RevokeParams{JobID: job})
	wantError(t, "Revoke", err, leaseapi.ErrNotFound)
	_, err = b.store.Runs(ctx, job, 10)
	wantError(t, "Runs", err, leaseapi.ErrNotFound)

	// None of them created the lease.
	_, err = b.store.Get(ctx, job)
	wantError(t, "Get after the failed operations", err, leaseapi.ErrNotFound)

	page := b.list(t, leaseapi.ListParams{Prefix: b.prefix, Limit: 10})
	if len(page.Leases) != 0 || page.More {
		t.Errorf("List of an unused prefix: got %d leases, more %v, want none", len(page.Leases), page.More)
	}
}

// testContention: many replicas acquire the same job at the same instant;
// exactly one wins (invariant 1), and a completed tick is never granted
// again even under contention (invariant 3).
func testContention(t *testing.T, b *bundle) {
	const jobs, contenders, laterContenders = 12, 64, 8

	type result struct {
		owner string
		lease leaseapi.Lease
		err   error
	}
	// race starts n contenders per job at once and returns their results.
	race := func(wave string, n int, tick *time.Time) [][]result {
		results := make([][]result, jobs)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for j := range jobs {
			results[j] = make([]result, n)
			for c := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					owner := b.owner(fmt.Sprintf("%s%d", wave, c))
					<-start
					l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{
						JobID: b.job(fmt.Sprint(j)), Owner: owner, TTL: longTTL, Tick: tick,
					})
					results[j][c] = result{owner, l, err}
				}()
			}
		}
		close(start)
		wg.Wait()
		return results
	}
	// winners checks that exactly one contender per job won, with token
	// want, and that every other one got lease_held with the winner's lease.
	winners := func(wave string, results [][]result, wantToken int64) []result {
		t.Helper()
		won := make([]result, jobs)
		for j, rs := range results {
			var ws []result
			for _, r := range rs {
				if r.err == nil {
					ws = append(ws, r)
				}
			}
			if len(ws) != 1 {
				var owners []string
				for _, w := range ws {
					owners = append(owners, w.owner)
				}
				t.Fatalf("%s, job %d: got %d winners %v, want exactly 1", wave, j, len(ws), owners)
			}
			w := ws[0]
			won[j] = w
			if w.lease.Token != wantToken || w.lease.Owner != w.owner || w.lease.State != leaseapi.StateHeld {
				t.Errorf("%s, job %d: winner got token %d owner %s state %s, want token %d owner %s state held",
					wave, j, w.lease.Token, w.lease.Owner, w.lease.State, wantToken, w.owner)
			}
			reported := 0
			for _, r := range rs {
				if r.err == nil {
					continue
				}
				var ce *leaseapi.ConflictError
				ok := errors.Is(r.err, leaseapi.ErrLeaseHeld) && errors.As(r.err, &ce) &&
					ce.Lease.Owner == w.owner && ce.Lease.Token == wantToken && ce.Lease.State == leaseapi.StateHeld
				if !ok && reported < 3 {
					reported++
					t.Errorf("%s, job %d, owner %s: got error %v, want a ConflictError wrapping ErrLeaseHeld with the winner's lease (owner %s, token %d, held)",
						wave, j, r.owner, r.err, w.owner, wantToken)
				}
			}
		}
		return won
	}

	tick := tickAt(0)
	first := winners("first wave", race("a", contenders, tick), 1)
	if t.Failed() {
		return
	}
	for j, w := range first {
		if got := b.get(t, b.job(fmt.Sprint(j))); got.Owner != w.owner || got.Token != 1 {
			t.Errorf("Get job %d after the race: got owner %s token %d, want owner %s token 1", j, got.Owner, got.Token, w.owner)
		}
		b.release(t, leaseapi.ReleaseParams{JobID: b.job(fmt.Sprint(j)), Owner: w.owner, Token: 1, Outcome: leaseapi.OutcomeSucceeded})
	}

	// The tick is done: nobody gets it, however many ask at once.
	for j, rs := range race("b", laterContenders, tick) {
		for _, r := range rs {
			if !errors.Is(r.err, leaseapi.ErrTickDone) {
				t.Errorf("completed tick, job %d, owner %s: got lease token %d, error %v, want ErrTickDone", j, r.owner, r.lease.Token, r.err)
				break
			}
		}
	}

	// The next tick: again exactly one winner, with the next token.
	winners("next tick", race("c", laterContenders, tickAt(1)), 2)
}

// testFencingUnderChurn: owners loop acquire → release on one job; every
// grant gets the next token, in the order grants happened (invariant 2), and
// no two holders overlap (invariant 1).
func testFencingUnderChurn(t *testing.T, b *bundle) {
	const owners, attempts = 6, 20
	job := b.job("churn")

	var (
		mu      sync.Mutex
		granted []int64 // appended while holding the lease, so in grant order
		errs    []error
		holders atomic.Int32
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for o := range owners {
		owner := b.owner(fmt.Sprint(o))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range attempts {
				l, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL})
				if errors.Is(err, leaseapi.ErrLeaseHeld) {
					continue
				}
				if err != nil {
					fail(fmt.Errorf("acquire by %s: %w", owner, err))
					return
				}
				if n := holders.Add(1); n != 1 {
					fail(fmt.Errorf("owner %s got token %d while %d other holders hold the lease", owner, l.Token, n-1))
				}
				mu.Lock()
				granted = append(granted, l.Token)
				mu.Unlock()
				holders.Add(-1)
				if _, err := b.store.Release(t.Context(), &leaseapi.ReleaseParams{
					JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded,
				}); err != nil {
					fail(fmt.Errorf("release by %s of token %d: %w", owner, l.Token, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(granted) == 0 {
		t.Fatalf("no grant in %d attempts, want at least 1", owners*attempts)
	}
	// Only grants bump the token here, so they are exactly 1, 2, 3, …
	for i, tok := range granted {
		if tok != int64(i+1) {
			t.Fatalf("grant %d got token %d, want %d (tokens in grant order: %v)", i, tok, i+1, granted)
		}
	}

	runs := b.runs(t, job, 1000)
	if len(runs) != len(granted) {
		t.Fatalf("Runs: got %d runs, want %d (one per grant)", len(runs), len(granted))
	}
	checkRunsOrdered(t, "Runs", runs)
	for i, r := range runs {
		if want := granted[len(granted)-1-i]; r.Token != want || r.Outcome != leaseapi.OutcomeSucceeded {
			t.Errorf("Runs[%d]: got token %d outcome %s, want token %d outcome succeeded", i, r.Token, r.Outcome, want)
		}
	}
}

// testIdempotentAcquire: the same owner acquiring again for the same tick
// (or no tick) renews its grant; anything else is refused while held.
func testIdempotentAcquire(t *testing.T, b *bundle) {
	job, a, other := b.job("idem"), b.owner("a"), b.owner("b")
	tick := tickAt(0)
	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: time.Minute, Tick: tick})

	for _, tc := range []struct {
		name string
		ttl  time.Duration
		tick *time.Time
	}{
		{"SameTick", time.Minute, tick},
		{"NoTick", time.Minute, nil},
		{"LongerTTL", 2 * time.Minute, tick},
	} {
		prev := b.get(t, job)
		got := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: tc.ttl, Tick: tc.tick})
		op := "re-acquire " + tc.name
		if got.Token != first.Token || got.Owner != a || got.State != leaseapi.StateHeld {
			t.Errorf("%s: got token %d owner %s state %s, want token %d owner %s state held", op, got.Token, got.Owner, got.State, first.Token, a)
		}
		if !got.AcquiredAt.Equal(first.AcquiredAt) {
			t.Errorf("%s: AcquiredAt got %s, want unchanged %s", op, fmtTime(&got.AcquiredAt), fmtTime(&first.AcquiredAt))
		}
		// The grant is the same, and so is the tick it is for.
		if !equalTimePtr(got.Tick, tick) {
			t.Errorf("%s: Tick got %s, want unchanged %s", op, fmtTime(got.Tick), fmtTime(tick))
		}
		if got.TTL != tc.ttl {
			t.Errorf("%s: TTL got %v, want %v", op, got.TTL, tc.ttl)
		}
		if got.ExpiresAt.Before(prev.ExpiresAt) {
			t.Errorf("%s: ExpiresAt got %s, want at or after the previous %s", op, fmtTime(&got.ExpiresAt), fmtTime(&prev.ExpiresAt))
		}
		if tc.ttl > prev.TTL && !got.ExpiresAt.After(prev.ExpiresAt) {
			t.Errorf("%s with a longer TTL: ExpiresAt got %s, want after the previous %s", op, fmtTime(&got.ExpiresAt), fmtTime(&prev.ExpiresAt))
		}
		checkLease(t, "Get after "+op, b.get(t, job), got)
	}

	before := b.get(t, job)
	for _, tc := range []struct {
		name  string
		owner string
		tick  *time.Time
	}{
		{"SameOwnerOtherTick", a, tickAt(1)},
		{"OtherOwnerNoTick", other, nil},
		{"OtherOwnerSameTick", other, tick},
		{"OtherOwnerOtherTick", other, tickAt(1)},
	} {
		_, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: tc.owner, TTL: time.Minute, Tick: tc.tick})
		l := wantConflict(t, "acquire "+tc.name, err, leaseapi.ErrLeaseHeld)
		if l.Owner != a || l.Token != first.Token || l.State != leaseapi.StateHeld {
			t.Errorf("acquire %s: conflict lease got owner %s token %d state %s, want owner %s token %d held", tc.name, l.Owner, l.Token, l.State, a, first.Token)
		}
	}
	checkLease(t, "Get after the refused acquires", b.get(t, job), before)
}

// testExpiryAndTakeover: a holder that stops heartbeating loses the lease
// once it expires (invariant 4); its late heartbeat cannot revive it, and
// its calls after a takeover fail (invariant 2).
func testExpiryAndTakeover(t *testing.T, b *bundle) {
	job, a, other := b.job("expiry"), b.owner("a"), b.owner("b")
	first := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL, Tick: tickAt(0)})
	expired := b.waitForState(t, job, leaseapi.StateExpired)
	if !expired.ExpiresAt.Equal(first.ExpiresAt) || expired.Token != first.Token || expired.Owner != a {
		t.Errorf("expired lease: got token %d owner %s expiresAt %s, want token %d owner %s expiresAt %s",
			expired.Token, expired.Owner, fmtTime(&expired.ExpiresAt), first.Token, a, fmtTime(&first.ExpiresAt))
	}

	// A heartbeat never revives an expired lease, whatever TTL it asks for.
	for _, ttl := range []time.Duration{0, longTTL} {
		_, err := b.store.Heartbeat(t.Context(), &leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: first.Token, TTL: ttl})
		l := wantConflict(t, fmt.Sprintf("Heartbeat(ttl %v) of the expired lease", ttl), err, leaseapi.ErrLeaseLost)
		if l.State != leaseapi.StateExpired {
			t.Errorf("Heartbeat of the expired lease: conflict lease state got %s, want expired", l.State)
		}
	}
	if got := b.get(t, job); got.State != leaseapi.StateExpired || !got.ExpiresAt.Equal(first.ExpiresAt) {
		t.Errorf("Get after the late heartbeats: got state %s expiresAt %s, want expired, expiresAt %s",
			got.State, fmtTime(&got.ExpiresAt), fmtTime(&first.ExpiresAt))
	}

	// Another owner takes over with the next token.
	second := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)})
	if second.Token != first.Token+1 || second.Owner != other || second.State != leaseapi.StateHeld {
		t.Errorf("takeover: got token %d owner %s state %s, want token %d owner %s held", second.Token, second.Owner, second.State, first.Token+1, other)
	}
	if second.LastOutcome != leaseapi.OutcomeExpired {
		t.Errorf("takeover: LastOutcome got %q, want %q", second.LastOutcome, leaseapi.OutcomeExpired)
	}
	if second.AcquiredAt.Before(first.ExpiresAt) {
		t.Errorf("takeover: AcquiredAt %s is before the previous grant expired at %s", fmtTime(&second.AcquiredAt), fmtTime(&first.ExpiresAt))
	}

	// The old holder's token is dead.
	_, err := b.store.Heartbeat(t.Context(), &leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: first.Token})
	if l := wantConflict(t, "old holder's Heartbeat after the takeover", err, leaseapi.ErrLeaseLost); l.Token != second.Token || l.Owner != other {
		t.Errorf("old holder's Heartbeat: conflict lease got owner %s token %d, want owner %s token %d", l.Owner, l.Token, other, second.Token)
	}
	_, err = b.store.Release(t.Context(), &leaseapi.ReleaseParams{JobID: job, Owner: a, Token: first.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantConflict(t, "old holder's Release after the takeover", err, leaseapi.ErrLeaseLost)
	checkLease(t, "Get after the old holder's calls", b.get(t, job), second)

	runs := b.runs(t, job, 10)
	if len(runs) != 2 {
		t.Fatalf("Runs: got %d runs, want 2: %+v", len(runs), runs)
	}
	checkRun(t, "Runs[0]", runs[0], second.Token, other, tickAt(1), leaseapi.OutcomeRunning)
	checkRun(t, "Runs[1]", runs[1], first.Token, a, tickAt(0), leaseapi.OutcomeExpired)
	if runs[1].EndedAt != nil && !runs[1].EndedAt.Equal(first.ExpiresAt) {
		t.Errorf("expired run: EndedAt got %s, want the grant's ExpiresAt %s", fmtTime(runs[1].EndedAt), fmtTime(&first.ExpiresAt))
	}
	checkRunsOrdered(t, "Runs", runs)
}

// testRelease: release records the outcome and completes the tick; it is
// idempotent for its holder and refused for anyone else.
func testRelease(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("release"), b.owner("a"), b.owner("b")
	tick := tickAt(0)
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tick})

	// Refused: other owner, newer token. Nothing changes. (Token 0 is
	// invalid input, see InvalidInput; a superseded token, see
	// ExpiryAndTakeover and Revoke.)
	for _, p := range []leaseapi.ReleaseParams{
		{JobID: job, Owner: other, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded},
		{JobID: job, Owner: a, Token: held.Token + 1, Outcome: leaseapi.OutcomeSucceeded},
	} {
		_, err := b.store.Release(ctx, &p)
		l := wantConflict(t, fmt.Sprintf("Release(owner %s, token %d) of a held lease", p.Owner, p.Token), err, leaseapi.ErrLeaseLost)
		checkLease(t, "conflict lease of a refused release", l, held)
	}
	checkLease(t, "Get after the refused releases", b.get(t, job), held)

	released := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	if released.ReleasedAt == nil {
		t.Fatalf("Release: got nil ReleasedAt")
	}
	want := held
	want.State = leaseapi.StateReleased
	want.RenewedAt = released.RenewedAt // the contract leaves it to the store
	want.ReleasedAt = released.ReleasedAt
	want.ExpiresAt = *released.ReleasedAt
	want.LastCompletedTick = tick
	want.LastOutcome = leaseapi.OutcomeSucceeded
	checkLease(t, "Release", released, want)
	if released.RenewedAt.Before(held.RenewedAt) || released.ReleasedAt.Before(released.RenewedAt) {
		t.Errorf("Release: got renewedAt %s releasedAt %s, want renewedAt %s <= renewedAt <= releasedAt",
			fmtTime(&released.RenewedAt), fmtTime(released.ReleasedAt), fmtTime(&held.RenewedAt))
	}
	checkLease(t, "Get after Release", b.get(t, job), released)

	// Idempotent: the same owner and token again, even with another outcome.
	for _, outcome := range []leaseapi.Outcome{leaseapi.OutcomeSucceeded, leaseapi.OutcomeFailed} {
		again := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: outcome})
		checkLease(t, "second Release with outcome "+string(outcome), again, released)
	}
	checkLease(t, "Get after the second releases", b.get(t, job), released)

	// Refused after release too, and a heartbeat cannot revive it.
	_, err := b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: other, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantConflict(t, "Release by another owner after release", err, leaseapi.ErrLeaseLost)
	_, err = b.store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: held.Token})
	wantConflict(t, "Heartbeat after release", err, leaseapi.ErrLeaseLost)
	checkLease(t, "Get after the refused calls", b.get(t, job), released)

	// A failed run leaves the completed tick alone; the old token stays dead.
	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)})
	if next.Token != held.Token+1 {
		t.Errorf("acquire after release: got token %d, want %d", next.Token, held.Token+1)
	}
	if next.LastOutcome != leaseapi.OutcomeSucceeded || !equalTimePtr(next.LastCompletedTick, tick) {
		t.Errorf("acquire after release: got lastOutcome %q lastCompletedTick %s, want succeeded, %s", next.LastOutcome, fmtTime(next.LastCompletedTick), fmtTime(tick))
	}
	_, err = b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	wantConflict(t, "Release with the previous grant's token", err, leaseapi.ErrLeaseLost)
	failed := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: other, Token: next.Token, Outcome: leaseapi.OutcomeFailed})
	if failed.State != leaseapi.StateReleased || failed.LastOutcome != leaseapi.OutcomeFailed || !equalTimePtr(failed.LastCompletedTick, tick) {
		t.Errorf("Release failed: got state %s lastOutcome %q lastCompletedTick %s, want released, failed, %s",
			failed.State, failed.LastOutcome, fmtTime(failed.LastCompletedTick), fmtTime(tick))
	}

	runs := b.runs(t, job, 10)
	if len(runs) != 2 {
		t.Fatalf("Runs: got %d runs, want 2", len(runs))
	}
	checkRun(t, "Runs[0]", runs[0], next.Token, other, tickAt(1), leaseapi.OutcomeFailed)
	checkRun(t, "Runs[1]", runs[1], held.Token, a, tick, leaseapi.OutcomeSucceeded)
	if !equalTimePtr(runs[1].StartedAt, &held.AcquiredAt) || !equalTimePtr(runs[1].EndedAt, released.ReleasedAt) {
		t.Errorf("succeeded run: got startedAt %s endedAt %s, want the grant's AcquiredAt %s and ReleasedAt %s",
			fmtTime(runs[1].StartedAt), fmtTime(runs[1].EndedAt), fmtTime(&held.AcquiredAt), fmtTime(released.ReleasedAt))
	}
	checkRunsOrdered(t, "Runs", runs)
}

// testReleaseAfterExpiry: the run did finish, so a release after expiry
// with nobody taking over still records its outcome and tick.
func testReleaseAfterExpiry(t *testing.T, b *bundle) {
	job, a := b.job("late"), b.owner("a")
	tick := tickAt(0)
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL, Tick: tick})
	b.waitForState(t, job, leaseapi.StateExpired)

	released := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	if released.State != leaseapi.StateReleased || released.Token != held.Token || released.LastOutcome != leaseapi.OutcomeSucceeded ||
		!equalTimePtr(released.LastCompletedTick, tick) || released.ReleasedAt == nil || !released.ReleasedAt.Equal(released.ExpiresAt) {
		t.Errorf("Release after expiry: got state %s token %d lastOutcome %q lastCompletedTick %s releasedAt %s expiresAt %s, want released, token %d, succeeded, %s, releasedAt == expiresAt",
			released.State, released.Token, released.LastOutcome, fmtTime(released.LastCompletedTick), fmtTime(released.ReleasedAt), fmtTime(&released.ExpiresAt), held.Token, fmtTime(tick))
	}
	checkLease(t, "Get after the late release", b.get(t, job), released)

	// The next grant does not turn the finished run into an expired one.
	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(1)})
	if next.Token != held.Token+1 || next.LastOutcome != leaseapi.OutcomeSucceeded {
		t.Errorf("acquire after the late release: got token %d lastOutcome %q, want token %d, succeeded", next.Token, next.LastOutcome, held.Token+1)
	}
	runs := b.runs(t, job, 10)
	if len(runs) != 2 {
		t.Fatalf("Runs: got %d runs, want 2", len(runs))
	}
	checkRun(t, "Runs[1]", runs[1], held.Token, a, tick, leaseapi.OutcomeSucceeded)
	checkRunsOrdered(t, "Runs", runs)
}

// testTicks: a tick released succeeded is never granted again (invariant 3);
// failed ticks can be retried; lastCompletedTick only moves forward.
func testTicks(t *testing.T, b *bundle) {
	job, a, other := b.job("ticks"), b.owner("a"), b.owner("b")
	t0, t1 := tickAt(0), tickAt(10)

	run := func(owner string, tick *time.Time, outcome leaseapi.Outcome) leaseapi.Lease {
		t.Helper()
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: tick})
		return b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: outcome})
	}
	wantTickDone := func(owner string, tick *time.Time, lastCompleted *time.Time) {
		t.Helper()
		before := b.get(t, job)
		_, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Tick: tick})
		l := wantConflict(t, fmt.Sprintf("Acquire(owner %s, tick %s)", owner, fmtTime(tick)), err, leaseapi.ErrTickDone)
		if !equalTimePtr(l.LastCompletedTick, lastCompleted) {
			t.Errorf("Acquire(tick %s): conflict lease lastCompletedTick got %s, want %s", fmtTime(tick), fmtTime(l.LastCompletedTick), fmtTime(lastCompleted))
		}
		checkLease(t, "Get after the refused acquire", b.get(t, job), before)
	}

	l := run(a, t0, leaseapi.OutcomeSucceeded)
	if !equalTimePtr(l.LastCompletedTick, t0) {
		t.Fatalf("after tick %s succeeded: lastCompletedTick got %s, want %s", fmtTime(t0), fmtTime(l.LastCompletedTick), fmtTime(t0))
	}
	wantTickDone(a, t0, t0)
	wantTickDone(other, t0, t0)
	wantTickDone(other, tickAt(-1), t0)

	// A later tick fails, and is retried by another owner.
	l = run(other, t1, leaseapi.OutcomeFailed)
	if !equalTimePtr(l.LastCompletedTick, t0) || l.LastOutcome != leaseapi.OutcomeFailed {
		t.Errorf("after tick %s failed: got lastCompletedTick %s lastOutcome %q, want %s, failed", fmtTime(t1), fmtTime(l.LastCompletedTick), l.LastOutcome, fmtTime(t0))
	}
	retry := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: t1})
	if retry.Token != l.Token+1 || !equalTimePtr(retry.Tick, t1) {
		t.Errorf("retry of the failed tick: got token %d tick %s, want token %d tick %s", retry.Token, fmtTime(retry.Tick), l.Token+1, fmtTime(t1))
	}
	l = b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: retry.Token, Outcome: leaseapi.OutcomeSucceeded})
	if !equalTimePtr(l.LastCompletedTick, t1) {
		t.Errorf("after the retry succeeded: lastCompletedTick got %s, want %s", fmtTime(l.LastCompletedTick), fmtTime(t1))
	}
	wantTickDone(other, t1, t1)
	// Between the two completed ticks: older than the newest, so done.
	wantTickDone(other, tickAt(5), t1)

	// A run without a tick completes no tick.
	l = run(other, nil, leaseapi.OutcomeSucceeded)
	if !equalTimePtr(l.LastCompletedTick, t1) {
		t.Errorf("after a run without tick: lastCompletedTick got %s, want %s", fmtTime(l.LastCompletedTick), fmtTime(t1))
	}
	wantTickDone(a, t0, t1)

	// A newer tick is granted.
	newer := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(11)})
	if newer.State != leaseapi.StateHeld || !equalTimePtr(newer.LastCompletedTick, t1) {
		t.Errorf("newer tick: got state %s lastCompletedTick %s, want held, %s", newer.State, fmtTime(newer.LastCompletedTick), fmtTime(t1))
	}
}

// testRevoke: an admin revocation ends the grant and bumps the token, so the
// old holder is fenced off (invariant 2).
func testRevoke(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("revoke"), b.owner("a"), b.owner("b")
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})

	revoked := b.revoke(t, job)
	if revoked.State != leaseapi.StateRevoked || revoked.Token != held.Token+1 || revoked.Owner != a || revoked.LastOutcome != leaseapi.OutcomeRevoked {
		t.Errorf("Revoke: got state %s token %d owner %s lastOutcome %q, want revoked, token %d, owner %s, revoked",
			revoked.State, revoked.Token, revoked.Owner, revoked.LastOutcome, held.Token+1, a)
	}
	if revoked.LastCompletedTick != nil {
		t.Errorf("Revoke: lastCompletedTick got %s, want nil", fmtTime(revoked.LastCompletedTick))
	}
	if by := "ops-" + b.prefix; revoked.RevokedBy != by {
		t.Errorf("Revoke: revokedBy got %q, want %q", revoked.RevokedBy, by)
	}
	checkLease(t, "Get after Revoke", b.get(t, job), revoked)
	if revoked.Timeline != 1 {
		t.Errorf("Revoke: timeline got %d, want 1", revoked.Timeline)
	}

	// Neither the old token nor the revocation's token works for the old holder.
	for _, token := range []int64{held.Token, revoked.Token} {
		_, err := b.store.Heartbeat(ctx, &leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: token})
		wantConflict(t, fmt.Sprintf("Heartbeat(token %d) after Revoke", token), err, leaseapi.ErrLeaseLost)
		_, err = b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: job, Owner: a, Token: token, Outcome: leaseapi.OutcomeSucceeded})
		wantConflict(t, fmt.Sprintf("Release(token %d) after Revoke", token), err, leaseapi.ErrLeaseLost)
	}
	checkLease(t, "Get after the old holder's calls", b.get(t, job), revoked)

	// Revoking again changes nothing.
	checkLease(t, "second Revoke", b.revoke(t, job), revoked)

	runs := b.runs(t, job, 10)
	if len(runs) != 1 {
		t.Fatalf("Runs after Revoke: got %d runs, want 1", len(runs))
	}
	checkRun(t, "Runs[0]", runs[0], held.Token, a, tickAt(0), leaseapi.OutcomeRevoked)
	if by := "ops-" + b.prefix; runs[0].RevokedBy != by {
		t.Errorf("Runs[0].RevokedBy: got %q, want %q", runs[0].RevokedBy, by)
	}

	// The next grant's token is above the revocation's.
	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(0)})
	if next.Token != revoked.Token+1 || next.State != leaseapi.StateHeld || next.Owner != other || next.LastOutcome != leaseapi.OutcomeRevoked {
		t.Errorf("acquire after Revoke: got token %d state %s owner %s lastOutcome %q, want token %d, held, %s, revoked",
			next.Token, next.State, next.Owner, next.LastOutcome, revoked.Token+1, other)
	}
	runs = b.runs(t, job, 10)
	if len(runs) != 2 {
		t.Fatalf("Runs after the next grant: got %d runs, want 2", len(runs))
	}
	checkRun(t, "Runs[0]", runs[0], next.Token, other, tickAt(0), leaseapi.OutcomeRunning)
	checkRun(t, "Runs[1]", runs[1], held.Token, a, tickAt(0), leaseapi.OutcomeRevoked)
	checkRunsOrdered(t, "Runs", runs)
}

// testRevokeNotHeld: revoking a lease that is not held returns it unchanged.
func testRevokeNotHeld(t *testing.T, b *bundle) {
	a := b.owner("a")

	releasedJob := b.job("released")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: releasedJob, Owner: a, TTL: longTTL})
	b.release(t, leaseapi.ReleaseParams{JobID: releasedJob, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	expiredJob := b.job("expired")
	b.acquire(t, leaseapi.AcquireParams{JobID: expiredJob, Owner: a, TTL: shortTTL})
	b.waitForState(t, expiredJob, leaseapi.StateExpired)

	for _, job := range []string{releasedJob, expiredJob} {
		before := b.get(t, job)
		checkLease(t, "Revoke of a "+string(before.State)+" lease", b.revoke(t, job), before)
		checkLease(t, "Get after Revoke of a "+string(before.State)+" lease", b.get(t, job), before)
		next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL})
		if next.Token != before.Token+1 {
			t.Errorf("acquire after Revoke of a %s lease: got token %d, want %d", before.State, next.Token, before.Token+1)
		}
	}
}

// testHeartbeat: a heartbeat extends the holder's grant and keeps its token.
func testHeartbeat(t *testing.T, b *bundle) {
	ctx, job, a, other := t.Context(), b.job("hb"), b.owner("a"), b.owner("b")
	tick := tickAt(0)
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: time.Minute, Tick: tick})

	check := func(op string, got, prev leaseapi.Lease, wantTTL time.Duration) {
		t.Helper()
		want := held
		want.RenewedAt = got.RenewedAt
		want.ExpiresAt = got.RenewedAt.Add(wantTTL)
		want.TTL = wantTTL
		checkLease(t, op, got, want)
		if got.RenewedAt.Before(prev.RenewedAt) {
			t.Errorf("%s: RenewedAt got %s, want at or after the previous %s", op, fmtTime(&got.RenewedAt), fmtTime(&prev.RenewedAt))
		}
		checkLease(t, "Get after "+op, b.get(t, job), got)
	}

	// TTL 0 keeps the grant's TTL.
	hb1 := b.heartbeat(t, leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: held.Token})
	check("Heartbeat(ttl 0)", hb1, held, time.Minute)
	// A TTL replaces it.
	hb2 := b.heartbeat(t, leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: held.Token, TTL: 3 * time.Minute})
	check("Heartbeat(ttl 3m)", hb2, hb1, 3*time.Minute)
	if !hb2.ExpiresAt.After(hb1.ExpiresAt) {
		t.Errorf("Heartbeat(ttl 3m): ExpiresAt got %s, want after %s", fmtTime(&hb2.ExpiresAt), fmtTime(&hb1.ExpiresAt))
	}
	// A shorter TTL may bring expiry forward; still consistent.
	hb3 := b.heartbeat(t, leaseapi.HeartbeatParams{JobID: job, Owner: a, Token: held.Token, TTL: 2 * time.Minute})
	check("Heartbeat(ttl 2m)", hb3, hb2, 2*time.Minute)

	// Wrong owner or token: lease_lost with the lease, nothing changes.
	// (Token 0 is invalid input, see InvalidInput; a superseded token, see
	// ExpiryAndTakeover and Revoke.)
	for _, p := range []leaseapi.HeartbeatParams{
		{JobID: job, Owner: other, Token: held.Token},
		{JobID: job, Owner: a, Token: held.Token + 1},
	} {
		_, err := b.store.Heartbeat(ctx, &p)
		l := wantConflict(t, fmt.Sprintf("Heartbeat(owner %s, token %d)", p.Owner, p.Token), err, leaseapi.ErrLeaseLost)
		checkLease(t, "conflict lease of a refused heartbeat", l, hb3)
	}
	checkLease(t, "Get after the refused heartbeats", b.get(t, job), hb3)

	runs := b.runs(t, job, 10)
	if len(runs) != 1 {
		t.Fatalf("Runs after heartbeats: got %d runs, want 1 (heartbeats start no run)", len(runs))
	}
	checkRun(t, "Runs[0]", runs[0], held.Token, a, tick, leaseapi.OutcomeRunning)
}

// testRunHistory: one run per grant with its outcome, newest first, limited.
func testRunHistory(t *testing.T, b *bundle) {
	job, a, other := b.job("runs"), b.owner("a"), b.owner("b")

	type wantRun struct {
		token   int64
		owner   string
		tick    *time.Time
		outcome leaseapi.Outcome
		grant   leaseapi.Lease // as returned by the acquire
		ended   *time.Time     // known end time, or nil
	}
	var want []wantRun // oldest first

	// 1: succeeded.
	g := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	r := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: g.Token, Outcome: leaseapi.OutcomeSucceeded})
	want = append(want, wantRun{g.Token, a, tickAt(0), leaseapi.OutcomeSucceeded, g, r.ReleasedAt})
	// 2: failed.
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)})
	r = b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: other, Token: g.Token, Outcome: leaseapi.OutcomeFailed})
	want = append(want, wantRun{g.Token, other, tickAt(1), leaseapi.OutcomeFailed, g, r.ReleasedAt})
	// 3: expired (taken over by 4).
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL, Tick: tickAt(2)})
	b.waitForState(t, job, leaseapi.StateExpired)
	want = append(want, wantRun{g.Token, a, tickAt(2), leaseapi.OutcomeExpired, g, ptr(g.ExpiresAt)})
	// 4: revoked; the revocation takes token 5.
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL})
	b.revoke(t, job)
	want = append(want, wantRun{g.Token, other, nil, leaseapi.OutcomeRevoked, g, nil})
	// 6: running.
	g = b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(3)})
	want = append(want, wantRun{g.Token, a, tickAt(3), leaseapi.OutcomeRunning, g, nil})
	if g.Token != 6 {
		t.Errorf("sixth token: got %d, want 6 (five grants and one revocation before it)", g.Token)
	}
	slices.Reverse(want) // newest first, as Runs returns them

	runs := b.runs(t, job, 100)
	if len(runs) != len(want) {
		t.Fatalf("Runs: got %d runs, want %d: %+v", len(runs), len(want), runs)
	}
	for i, w := range want {
		op := fmt.Sprintf("Runs[%d]", i)
		checkRun(t, op, runs[i], w.token, w.owner, w.tick, w.outcome)
		if !equalTimePtr(runs[i].StartedAt, &w.grant.AcquiredAt) {
			t.Errorf("%s: StartedAt got %s, want the grant's AcquiredAt %s", op, fmtTime(runs[i].StartedAt), fmtTime(&w.grant.AcquiredAt))
		}
		if w.ended != nil && !equalTimePtr(runs[i].EndedAt, w.ended) {
			t.Errorf("%s (%s): EndedAt got %s, want %s", op, w.outcome, fmtTime(runs[i].EndedAt), fmtTime(w.ended))
		}
		if d, ok := runs[i].Duration(); ok && w.ended != nil && d != w.ended.Sub(w.grant.AcquiredAt) {
			t.Errorf("%s: Duration got %v, want %v", op, d, w.ended.Sub(w.grant.AcquiredAt))
		}
	}
	checkRunsOrdered(t, "Runs", runs)

	for _, limit := range []int{1, 2, len(want), len(want) + 1} {
		got := b.runs(t, job, limit)
		wantN := min(limit, len(want))
		if len(got) != wantN {
			t.Errorf("Runs(limit %d): got %d runs, want %d", limit, len(got), wantN)
			continue
		}
		for i := range got {
			if got[i].Token != want[i].token {
				t.Errorf("Runs(limit %d)[%d]: got token %d, want %d (the newest runs)", limit, i, got[i].Token, want[i].token)
			}
		}
	}
}

// testList: keyset pagination and filters.
func testList(t *testing.T, b *bundle) {
	a, other := b.owner("a"), b.owner("b")
	const n = 25
	type wantLease struct {
		state leaseapi.State
		owner string
	}
	want := map[string]wantLease{}
	var ids []string
	var expiring []string
	for i := range n {
		job := fmt.Sprintf("%s-%02d", b.prefix, i)
		ids = append(ids, job)
		switch i % 5 {
		case 0:
			b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL})
			want[job] = wantLease{leaseapi.StateHeld, a}
		case 1:
			b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL})
			want[job] = wantLease{leaseapi.StateHeld, other}
		case 2:
			l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL})
			b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
			want[job] = wantLease{leaseapi.StateReleased, a}
		case 3:
			b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL})
			b.revoke(t, job)
			want[job] = wantLease{leaseapi.StateRevoked, other}
		case 4:
			b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: shortTTL})
			want[job] = wantLease{leaseapi.StateExpired, a}
			expiring = append(expiring, job)
		}
	}
	for _, job := range expiring {
		b.waitForState(t, job, leaseapi.StateExpired)
	}

	// Every lease as Get returns it; states are stable from here on.
	gets := map[string]leaseapi.Lease{}
	for _, job := range ids {
		gets[job] = b.get(t, job)
	}

	// selectIDs returns the ids (in order) whose lease matches the filter.
	selectIDs := func(state leaseapi.State, owner string) []string {
		var out []string
		for _, id := range ids {
			w := want[id]
			if (state == "" || w.state == state) && (owner == "" || w.owner == owner) {
				out = append(out, id)
			}
		}
		return out
	}

	// Prefix only, at several page sizes; checks exact page boundaries.
	for _, limit := range []int{7, 5, 25, 24, 1000} {
		pages := b.listAll(t, leaseapi.ListParams{Prefix: b.prefix, Limit: limit})
		var sizes []int
		for _, p := range pages {
			sizes = append(sizes, len(p.Leases))
		}
		var wantSizes []int
		for left := n; left > 0; left -= limit {
			wantSizes = append(wantSizes, min(left, limit))
		}
		if !slices.Equal(sizes, wantSizes) {
			t.Errorf("List(prefix, limit %d): got page sizes %v, want %v", limit, sizes, wantSizes)
		}
		got := leaseIDs(pages)
		if !slices.Equal(got, ids) {
			t.Errorf("List(prefix, limit %d): got job ids %v, want %v", limit, got, ids)
		}
		if limit != 7 {
			continue
		}
		for _, p := range pages {
			for _, l := range p.Leases {
				checkLease(t, "List lease "+l.JobID, l, gets[l.JobID])
				if w := want[l.JobID]; l.State != w.state || l.Owner != w.owner {
					t.Errorf("List lease %s: got state %s owner %s, want %s %s", l.JobID, l.State, l.Owner, w.state, w.owner)
				}
				// States are computed with the page's clock.
				if (l.State == leaseapi.StateHeld) != l.ExpiresAt.After(p.Now) && (l.State == leaseapi.StateHeld || l.State == leaseapi.StateExpired) {
					t.Errorf("List lease %s: state %s with expiresAt %s and the page's Now %s", l.JobID, l.State, fmtTime(&l.ExpiresAt), fmtTime(&p.Now))
				}
			}
		}
	}

	// Each filter alone and combined. State alone spans other subtests'
	// leases too: check that all have the state, and that ours are exact.
	for _, tc := range []struct {
		name   string
		params leaseapi.ListParams
		want   []string
	}{
		{"StateHeld", leaseapi.ListParams{State: leaseapi.StateHeld}, selectIDs(leaseapi.StateHeld, "")},
		{"StateReleased", leaseapi.ListParams{State: leaseapi.StateReleased}, selectIDs(leaseapi.StateReleased, "")},
		{"StateExpired", leaseapi.ListParams{State: leaseapi.StateExpired}, selectIDs(leaseapi.StateExpired, "")},
		{"StateRevoked", leaseapi.ListParams{State: leaseapi.StateRevoked}, selectIDs(leaseapi.StateRevoked, "")},
		{"OwnerA", leaseapi.ListParams{Owner: a}, selectIDs("", a)},
		{"OwnerB", leaseapi.ListParams{Owner: other}, selectIDs("", other)},
		{"PrefixStateHeld", leaseapi.ListParams{Prefix: b.prefix, State: leaseapi.StateHeld}, selectIDs(leaseapi.StateHeld, "")},
		{"PrefixOwnerB", leaseapi.ListParams{Prefix: b.prefix, Owner: other}, selectIDs("", other)},
		{"StateHeldOwnerA", leaseapi.ListParams{State: leaseapi.StateHeld, Owner: a}, selectIDs(leaseapi.StateHeld, a)},
		{"StateExpiredOwnerA", leaseapi.ListParams{State: leaseapi.StateExpired, Owner: a}, selectIDs(leaseapi.StateExpired, a)},
		{"StateRevokedOwnerA", leaseapi.ListParams{State: leaseapi.StateRevoked, Owner: a}, nil},
		{"AllThree", leaseapi.ListParams{Prefix: b.prefix, State: leaseapi.StateReleased, Owner: a}, selectIDs(leaseapi.StateReleased, a)},
		{"LongerPrefix", leaseapi.ListParams{Prefix: b.prefix + "-1"}, ids[10:20]},
	} {
		for _, limit := range []int{2, 7} {
			p := tc.params
			p.Limit = limit
			pages := b.listAll(t, p)
			var got []string
			for _, page := range pages {
				for _, l := range page.Leases {
					if (p.State != "" && l.State != p.State) || (p.Owner != "" && l.Owner != p.Owner) || !strings.HasPrefix(l.JobID, p.Prefix) {
						t.Errorf("List %s (limit %d): got lease %s (state %s, owner %s), which the filter excludes", tc.name, limit, l.JobID, l.State, l.Owner)
					}
					if strings.HasPrefix(l.JobID, b.prefix+"-") {
						got = append(got, l.JobID)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("List %s (limit %d): got our job ids %v, want %v", tc.name, limit, got, tc.want)
			}
		}
	}
}

// listAll pages through List, After = the last job id of the previous
// page, and checks what holds for every page.
func (b *bundle) listAll(t *testing.T, p leaseapi.ListParams) []leaseapi.LeasePage {
	t.Helper()
	const maxPages = 10000 // a hang guard against a cursor that never advances
	var pages []leaseapi.LeasePage
	seen := map[string]bool{}
	for range maxPages {
		page := b.list(t, p)
		if page.Now.IsZero() {
			t.Errorf("List(%+v): got zero Now", p)
		}
		if len(page.Leases) > p.Limit {
			t.Fatalf("List(%+v): got %d leases, want at most %d", p, len(page.Leases), p.Limit)
		}
		for _, l := range page.Leases {
			if seen[l.JobID] {
				t.Fatalf("List(%+v): job %s appears twice", p, l.JobID)
			}
			seen[l.JobID] = true
		}
		pages = append(pages, page)
		if !page.More {
			return pages
		}
		if len(page.Leases) == 0 {
			t.Fatalf("List(%+v): got an empty page with More set", p)
		}
		p.After = page.Leases[len(page.Leases)-1].JobID
	}
	t.Fatalf("List(%+v): still More after %d pages", p, maxPages)
	return nil
}

func leaseIDs(pages []leaseapi.LeasePage) []string {
	var ids []string
	for _, p := range pages {
		for _, l := range p.Leases {
			ids = append(ids, l.JobID)
		}
	}
	return ids
}

// testListFiltersAreLiteral: the prefix and owner filters match text
// exactly, case-sensitively, with no wildcards (LIKE's _ included; a
// prefix with % is invalid input, an owner with % matches literally).
func testListFiltersAreLiteral(t *testing.T, b *bundle) {
	p := b.prefix
	odd := `o'"\%_;--` + p // printable ASCII an owner may contain
	jobs := []struct{ id, owner string }{
		{p + "_x", b.owner("a")},
		{p + "ax", b.owner("a")},
		{p + ".y", b.owner("a")},
		{p + "-Up", b.owner("a")},
		{p + "-up", odd},
	}
	for _, j := range jobs {
		got := b.acquire(t, leaseapi.AcquireParams{JobID: j.id, Owner: j.owner, TTL: longTTL})
		if got.JobID != j.id || got.Owner != j.owner {
			t.Errorf("Acquire: got job %q owner %q, want %q %q", got.JobID, got.Owner, j.id, j.owner)
		}
	}
	if got := b.get(t, p+"-up"); got.Owner != odd {
		t.Errorf("Get: owner got %q, want %q", got.Owner, odd)
	}

	for _, tc := range []struct {
		name   string
		params leaseapi.ListParams
		want   []string
	}{
		{"Underscore", leaseapi.ListParams{Prefix: p + "_"}, []string{p + "_x"}},
		{"Dot", leaseapi.ListParams{Prefix: p + "."}, []string{p + ".y"}},
		{"CaseLower", leaseapi.ListParams{Prefix: p + "-u"}, []string{p + "-up"}},
		{"CaseUpper", leaseapi.ListParams{Prefix: p + "-U"}, []string{p + "-Up"}},
		{"OddOwner", leaseapi.ListParams{Owner: odd}, []string{p + "-up"}},
		{"OwnerPercent", leaseapi.ListParams{Prefix: p, Owner: "%"}, nil},
		{"OwnerUnderscore", leaseapi.ListParams{Prefix: p, Owner: strings.Replace(b.owner("a"), "-", "_", 1)}, nil},
	} {
		tc.params.Limit = 100
		got := leaseIDs(b.listAll(t, tc.params))
		if !slices.Equal(got, tc.want) {
			t.Errorf("List %s (%+v): got %q, want %q", tc.name, tc.params, got, tc.want)
		}
	}
}

// testRestart: a new store over the same data finds every lease, token and
// completed tick (invariant 5), and tokens keep increasing.
func testRestart(t *testing.T, b *bundle) {
	job, a, other := b.job("restart"), b.owner("a"), b.owner("b")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	held := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: other, TTL: longTTL, Tick: tickAt(1)})
	before := b.get(t, job)
	runsBefore := b.runs(t, job, 10)

	b.reopen(t)
	checkLease(t, "Get after reopening", b.get(t, job), before)
	runsAfter := b.runs(t, job, 10)
	if len(runsAfter) != len(runsBefore) {
		t.Fatalf("Runs after reopening: got %d runs, want %d", len(runsAfter), len(runsBefore))
	}
	for i := range runsBefore {
		if runsAfter[i].Token != runsBefore[i].Token || runsAfter[i].Outcome != runsBefore[i].Outcome ||
			!equalTimePtr(runsAfter[i].StartedAt, runsBefore[i].StartedAt) || !equalTimePtr(runsAfter[i].EndedAt, runsBefore[i].EndedAt) {
			t.Errorf("Runs[%d] after reopening: got %+v, want %+v", i, runsAfter[i], runsBefore[i])
		}
	}

	// The grant survived: its holder heartbeats and releases it.
	b.heartbeat(t, leaseapi.HeartbeatParams{JobID: job, Owner: other, Token: held.Token})
	_, err := b.store.Acquire(t.Context(), &leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(0)})
	wantConflict(t, "Acquire of the completed tick after reopening", err, leaseapi.ErrTickDone)
	b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: other, Token: held.Token, Outcome: leaseapi.OutcomeSucceeded})
	final := b.get(t, job)

	b.reopen(t)
	checkLease(t, "Get after reopening again", b.get(t, job), final)
	next := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(2)})
	if next.Token != held.Token+1 || !equalTimePtr(next.LastCompletedTick, tickAt(1)) {
		t.Errorf("Acquire after reopening again: got token %d lastCompletedTick %s, want token %d, %s",
			next.Token, fmtTime(next.LastCompletedTick), held.Token+1, fmtTime(tickAt(1)))
	}
}

// testReady: a migrated store is ready.
func testReady(t *testing.T, b *bundle) {
	if err := b.store.Ready(t.Context()); err != nil {
		t.Errorf("Ready: got %v, want nil", err)
	}
}

// testPruneRuns: pruning deletes finished runs older than the retention, at
// most batch per call, and never a running one.
func testPruneRuns(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	const retention = time.Millisecond

	finished, running, emptied := b.job("finished"), b.job("running"), b.job("emptied")
	var lastEnd time.Time
	finish := func(job string, tick *time.Time, outcome leaseapi.Outcome) {
		t.Helper()
		l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tick})
		r := b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: outcome})
		if r.ReleasedAt == nil {
			t.Fatalf("Release(%s): got nil ReleasedAt", job)
		}
		if r.ReleasedAt.After(lastEnd) {
			lastEnd = *r.ReleasedAt
		}
	}
	for i := range 3 {
		finish(finished, tickAt(i), leaseapi.OutcomeSucceeded)
	}
	finish(emptied, nil, leaseapi.OutcomeFailed)
	held := b.acquire(t, leaseapi.AcquireParams{JobID: finished, Owner: a, TTL: longTTL, Tick: tickAt(3)})
	b.acquire(t, leaseapi.AcquireParams{JobID: running, Owner: a, TTL: longTTL})

	// A long retention keeps everything of ours.
	if _, err := b.store.PruneRuns(ctx, 24*time.Hour, 1000); err != nil {
		t.Fatalf("PruneRuns(24h): %v", err)
	}
	if got := len(b.runs(t, finished, 10)); got != 4 {
		t.Errorf("Runs after PruneRuns(24h): got %d runs, want 4", got)
	}

	// Wait, on the store's clock, until our runs are older than the retention.
	for i := 0; ; i++ {
		now := b.list(t, leaseapi.ListParams{Prefix: b.prefix, Limit: 1}).Now
		if now.Sub(lastEnd) > 10*retention {
			break
		}
		if i == pollAttempts {
			t.Fatalf("the store's clock (List Now %s) did not pass %s", fmtTime(&now), fmtTime(&lastEnd))
		}
		time.Sleep(pollInterval)
	}

	// At least four finished runs are due: batches are filled exactly.
	for _, batch := range []int{1, 2} {
		n, err := b.store.PruneRuns(ctx, retention, batch)
		if err != nil {
			t.Fatalf("PruneRuns(batch %d): %v", batch, err)
		}
		if n != int64(batch) {
			t.Errorf("PruneRuns(batch %d): got %d deleted, want %d", batch, n, batch)
		}
	}
	drained := false
	for range 1000 {
		n, err := b.store.PruneRuns(ctx, retention, 100)
		if err != nil {
			t.Fatalf("PruneRuns(batch 100): %v", err)
		}
		if n > 100 {
			t.Fatalf("PruneRuns(batch 100): got %d deleted, want at most 100", n)
		}
		if n == 0 {
			drained = true
			break
		}
	}
	if !drained {
		t.Fatalf("PruneRuns kept deleting after 1000 batches")
	}

	runs := b.runs(t, finished, 10)
	if len(runs) != 1 {
		t.Fatalf("Runs(%s) after pruning: got %d runs, want only the running one", finished, len(runs))
	}
	checkRun(t, "Runs after pruning", runs[0], held.Token, a, tickAt(3), leaseapi.OutcomeRunning)
	if got := b.runs(t, running, 10); len(got) != 1 || got[0].Outcome != leaseapi.OutcomeRunning {
		t.Errorf("Runs(%s) after pruning: got %+v, want the running run", running, got)
	}
	if got := b.runs(t, emptied, 10); len(got) != 0 {
		t.Errorf("Runs(%s) after pruning: got %d runs, want none (the lease stays, its history is gone)", emptied, len(got))
	}
	// Pruning history never touches leases.
	if got := b.get(t, finished); got.Token != held.Token || got.State != leaseapi.StateHeld {
		t.Errorf("Get(%s) after pruning: got token %d state %s, want token %d held", finished, got.Token, got.State, held.Token)
	}
}
