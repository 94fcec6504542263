package repotest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The sweep suite: what deciding many jobs in one statement risks. A pass
// decides a batch of jobs from one read and writes all of their decisions
// at once, so a job's decision must land on that job only (a batch mixing
// every fate), once however many instances sweep the same jobs at the same
// time, and not at all when its row changed between the read and the write.
//
// Its jobs have a tick that is due without waiting for the clock: each
// job's schedule fires once a year, at a minute about two hours ago (T), and
// once every job is set up, the harness moves each job's past two hours and
// a bit back (SweepHarness.Rewind), so that its schedule was registered,
// and everything else it did happened, shortly before T. One pass then
// decides T for every job; the next tick is a year away.

// SweepHarness is a store set up for RunSweepSuite.
type SweepHarness struct {
	// Stores are stores over data of their own, which no other test
	// sweeps: several instances on one database where the store allows
	// it, else one. Each tells the observer RunSweepSuite passed to open
	// what it did.
	Stores []leaseapi.Store
	// Rewind moves everything that happened to job d earlier: its lease's
	// times (the grant's, the pause's, when its schedule was registered and
	// is due, until when what it owes is claimable), its runs' starts
	// and ends, but not the ticks they name, and its policy's times (when
	// it was set and last alerted, when it is due). It is called before the job's
	// first sweep.
	Rewind func(t *testing.T, jobID string, d time.Duration)
	// SetBeforeWrite makes store s call f between a sweep's read of the
	// due jobs and its write of their decisions; nil for a store that reads
	// and writes a pass in one transaction under a single writer's lock,
	// where no row can change in between.
	SetBeforeWrite func(s leaseapi.Store, f func())
}

// RunSweepSuite holds a store's sweep to deciding each tick once, for its
// own job only, from the row as it read it. open is called once per
// subtest and returns a harness over fresh data.
func RunSweepSuite(t *testing.T, open func(t *testing.T, o leaseapi.Observer) *SweepHarness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s *sweepSetup)
	}{
		{"MixedBatch", testSweepMixedBatch},
		{"ConcurrentSweeps", testSweepConcurrent},
		{"StaleDecision", testSweepStaleDecision},
		{"PolicyRealert", testSweepPolicyRealert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obs := newCountingObserver()
			h := open(t, obs)
			if len(h.Stores) == 0 {
				t.Fatal("open returned no store")
			}
			tc.test(t, &sweepSetup{h: h, obs: obs, b: &bundle{store: h.Stores[0], prefix: uniquePrefix(t)}})
		})
	}
}

// sweepGrace is the grace of the suite's yearly schedules.
const sweepGrace = time.Minute

// sweepSetup is what a sweep subtest works with: the harness, and a bundle
// on its first store for the suite's helpers.
type sweepSetup struct {
	h   *SweepHarness
	obs *countingObserver
	b   *bundle
	// tick is T, spec the yearly schedule that fires at it.
	tick time.Time
	spec string
	// jobs are every job set up so far, to rewind.
	jobs []string
}

// start picks T, about two hours before the store's clock, and the spec.
func (s *sweepSetup) start(t *testing.T) {
	t.Helper()
	s.tick = s.b.dbClock(t).Truncate(time.Minute).Add(-2 * time.Hour).UTC()
	s.spec = fmt.Sprintf("%d %d %d %d *", s.tick.Minute(), s.tick.Hour(), s.tick.Day(), int(s.tick.Month()))
}

// register gives a new job the yearly schedule (with catch-up latest and
// a window that holds T when catchUp) through a grant released at once.
func (s *sweepSetup) register(t *testing.T, name string, catchUp bool) string {
	t.Helper()
	job, owner := s.b.job(name), s.b.owner("registrar")
	p := leaseapi.AcquireParams{JobID: job, Owner: owner, TTL: longTTL, Schedule: s.spec, Grace: sweepGrace}
	if catchUp {
		p.CatchUp, p.CatchUpWindow = leaseapi.CatchUpLatest, leaseapi.DefaultCatchUpWindow
	}
	l := s.b.acquire(t, p)
	s.b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	s.jobs = append(s.jobs, job)
	return job
}

// rewind moves every job set up so far back, so that all of it happened
// before T: by the time from T to now, plus 30 s.
func (s *sweepSetup) rewind(t *testing.T) {
	t.Helper()
	d := s.b.dbClock(t).Sub(s.tick) + 30*time.Second
	for _, job := range s.jobs {
		s.h.Rewind(t, job, d)
	}
	s.jobs = nil
}

// mix is one job of each fate a pass decides, with what it owes.
type mix struct {
	ran, missed, skipped, paused string
	// catchUp owes T after the pass; catchUpUnclaimed too, once its
	// manual tick (manual[catchUpUnclaimed]) is recorded unclaimed first;
	// catchUpClaimable still owes its manual tick, which outranks T;
	// unclaimed (no catch-up) has its manual tick recorded unclaimed.
	catchUp, catchUpUnclaimed, catchUpClaimable, unclaimed string
	// resumed is paused across T and resumed before the pass: the resume
	// decides T (paused), so the pass finds nothing due for it.
	resumed string
	// pausedLate has catch-up and is paused after T's grace ended, before
	// the pass: T is missed, but a paused job owes nothing (pausing cancels
	// what a job owes; a pass while it is paused makes it owe nothing).
	pausedLate string
	// The jobs below are decided from their lease rows alone, or must not
	// be (decide.Plan.LeaseGrants): missedEarly was registered, and
	// heldEarly's grant started, more than decide.TickSkew before T, so no
	// grant started after that and their newest is their lease's; ranAgain
	// ran T, and its lease's grant is a later one (a manual tick claimed
	// after the rewind), which alone would not tell that T ran.
	missedEarly, heldEarly, ranAgain string
	manual                           map[string]time.Time
}

// perMix is what one pass decides of one mix (resumed is not due).
var perMix = leaseapi.SweepResult{Jobs: 12, Ran: 2, Paused: 1, Skipped: 2, Missed: 7, Unclaimed: 2, Expirations: 2}

// earlier is how much further back than the rest of its mix a job whose
// lease row decides it is rewound: its grant started before T's window
// (decide.Plan.GrantsFrom, decide.TickSkew before T).
const earlier = 5 * time.Minute

// setUpMix registers a mix under tag. Call finishMix after the rewind.
func (s *sweepSetup) setUpMix(t *testing.T, tag string) *mix {
	t.Helper()
	ctx, b := t.Context(), s.b
	m := &mix{manual: make(map[string]time.Time)}
	m.ran = s.register(t, tag+"-ran", false)
	owner := b.owner("ran")
	l := b.acquire(t, leaseapi.AcquireParams{JobID: m.ran, Owner: owner, TTL: longTTL, Tick: &s.tick})
	b.release(t, leaseapi.ReleaseParams{JobID: m.ran, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})

	m.missed = s.register(t, tag+"-missed", false)

	// Held across T, never released: its grant expires after the rewind,
	// and the pass counts the expiration.
	m.skipped = s.register(t, tag+"-skipped", false)
	b.acquire(t, leaseapi.AcquireParams{JobID: m.skipped, Owner: b.owner("holder"), TTL: longTTL})

	m.paused = s.register(t, tag+"-paused", false)
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: m.paused}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	m.resumed = s.register(t, tag+"-resumed", false)
	if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: m.resumed}); err != nil {
		t.Fatalf("Pause: %v", err)
	}

	m.catchUp = s.register(t, tag+"-catch-up", true)
	m.catchUpUnclaimed = s.register(t, tag+"-catch-up-unclaimed", true)
	m.manual[m.catchUpUnclaimed] = wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: m.catchUpUnclaimed, By: "ops"}))
	m.catchUpClaimable = s.register(t, tag+"-catch-up-claimable", true)
	m.unclaimed = s.register(t, tag+"-unclaimed", false)
	m.pausedLate = s.register(t, tag+"-paused-late", true)
	m.manual[m.unclaimed] = wantManual(t, "Trigger", b.trigger(t, leaseapi.TriggerParams{JobID: m.unclaimed, By: "ops"}))

	m.missedEarly = s.register(t, tag+"-missed-early", false)
	s.h.Rewind(t, m.missedEarly, earlier)
	m.heldEarly = s.register(t, tag+"-held-early", false)
	b.acquire(t, leaseapi.AcquireParams{JobID: m.heldEarly, Owner: b.owner("early-holder"), TTL: longTTL})
	s.h.Rewind(t, m.heldEarly, earlier)
	m.ranAgain = s.register(t, tag+"-ran-again", false)
	owner = b.owner("ran-again")
	l = b.acquire(t, leaseapi.AcquireParams{JobID: m.ranAgain, Owner: owner, TTL: longTTL, Tick: &s.tick})
	b.release(t, leaseapi.ReleaseParams{JobID: m.ranAgain, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
	return m
}

// finishMix does what a mix does after the rewind: the claimable manual
// tick is triggered now, the paused job is resumed, and pausedLate paused.
func (s *sweepSetup) finishMix(t *testing.T, m *mix) {
	t.Helper()
	if _, err := s.b.store.Pause(t.Context(), &leaseapi.PauseParams{JobID: m.pausedLate}); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	m.manual[m.catchUpClaimable] = wantManual(t, "Trigger", s.b.trigger(t, leaseapi.TriggerParams{JobID: m.catchUpClaimable, By: "ops"}))
	l, err := s.b.store.Resume(t.Context(), m.resumed)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if l.Paused() || l.MissedTicks != 0 {
		t.Errorf("Resume of a job paused across T: got paused %v, %d missed ticks; want resumed, none missed", l.Paused(), l.MissedTicks)
	}
	// ranAgain's newest grant is now, long after T's window began.
	manual := wantManual(t, "Trigger", s.b.trigger(t, leaseapi.TriggerParams{JobID: m.ranAgain, By: "ops"}))
	owner := s.b.owner("ran-again")
	l = s.b.acquire(t, leaseapi.AcquireParams{JobID: m.ranAgain, Owner: owner, TTL: longTTL, Tick: &manual})
	s.b.release(t, leaseapi.ReleaseParams{JobID: m.ranAgain, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
}

// checkMix checks what the passes decided for each job of m: its
// counters, its missed runs (once each), and what it owes.
func (s *sweepSetup) checkMix(t *testing.T, m *mix) {
	t.Helper()
	T := s.tick
	check := func(job string, missed, skipped int64, missedRun bool, owes *time.Time, owesReason leaseapi.Trigger) {
		t.Helper()
		l := s.b.get(t, job)
		if l.MissedTicks != missed || l.SkippedTicks != skipped {
			t.Errorf("%s: got %d missed and %d skipped ticks, want %d and %d", job, l.MissedTicks, l.SkippedTicks, missed, skipped)
		}
		if !equalTimePtr(l.OwedTick, owes) || l.OwedReason != owesReason {
			t.Errorf("%s: owes %s %q, want %s %q", job, fmtTime(l.OwedTick), l.OwedReason, fmtTime(owes), owesReason)
		}
		var scheduled, manual int
		for _, r := range s.b.runs(t, job, 100) {
			if r.Outcome != leaseapi.OutcomeMissed {
				continue
			}
			if r.Token != 0 || r.Owner != "" || r.StartedAt != nil {
				t.Errorf("%s: missed run %+v has a holder", job, r)
			}
			switch r.Trigger {
			case leaseapi.TriggerManual:
				manual++
				if mt, ok := m.manual[job]; !ok || !equalTimePtr(r.Tick, &mt) || r.TriggeredBy != "ops" {
					t.Errorf("%s: got a manual missed run %+v, want one of its manual tick %s by ops", job, r, fmtTime(&mt))
				}
			default:
				scheduled++
				if end := T.Add(sweepGrace); !equalTimePtr(r.Tick, &T) || !equalTimePtr(r.EndedAt, &end) {
					t.Errorf("%s: got missed run of tick %s ended %s, want tick T %s ended %s",
						job, fmtTime(r.Tick), fmtTime(r.EndedAt), fmtTime(&T), fmtTime(&end))
				}
			}
		}
		wantScheduled, wantManualRuns := 0, 0
		if missedRun {
			wantScheduled = 1
		}
		if job == m.catchUpUnclaimed || job == m.unclaimed {
			wantManualRuns = 1
		}
		if scheduled != wantScheduled || manual != wantManualRuns {
			t.Errorf("%s: got %d missed runs of T and %d of a manual tick, want %d and %d", job, scheduled, manual, wantScheduled, wantManualRuns)
		}
	}
	claimable := m.manual[m.catchUpClaimable]
	check(m.ran, 0, 0, false, nil, "")
	check(m.missed, 1, 0, true, nil, "")
	check(m.skipped, 0, 1, false, nil, "")
	check(m.paused, 0, 0, false, nil, "")
	check(m.resumed, 0, 0, false, nil, "")
	check(m.catchUp, 1, 0, true, &T, leaseapi.TriggerCatchUp)
	check(m.catchUpUnclaimed, 1, 0, true, &T, leaseapi.TriggerCatchUp)
	check(m.catchUpClaimable, 1, 0, true, &claimable, leaseapi.TriggerManual)
	check(m.unclaimed, 1, 0, true, nil, "")
	check(m.pausedLate, 1, 0, true, nil, "")
	check(m.missedEarly, 1, 0, true, nil, "")
	check(m.heldEarly, 0, 1, false, nil, "")
	check(m.ranAgain, 0, 0, false, nil, "")
}

// sweepOnce sweeps with store until it reports no more due work, and
// returns the sum of its passes.
func sweepOnce(t *testing.T, store leaseapi.Store, batch int) leaseapi.SweepResult {
	t.Helper()
	var total leaseapi.SweepResult
	for range pollAttempts {
		res, err := store.SweepTicks(t.Context(), batch)
		if err != nil {
			t.Errorf("SweepTicks: %v", err)
			return total
		}
		more := res.More
		res.More = false
		total.Add(res)
		if !more {
			return total
		}
	}
	t.Errorf("SweepTicks: still more due work after %d passes", pollAttempts)
	return total
}

func times(r leaseapi.SweepResult, n int) leaseapi.SweepResult {
	k := int64(n)
	return leaseapi.SweepResult{Jobs: r.Jobs * n, Ran: r.Ran * k, Paused: r.Paused * k, Skipped: r.Skipped * k,
		Missed: r.Missed * k, Expirations: r.Expirations * k, Unclaimed: r.Unclaimed * k}
}

// checkObserved checks that the stores told the observer, since before,
// one missed run per missed tick, the skipped ticks and the expirations of
// got, each once.
func (s *sweepSetup) checkObserved(t *testing.T, before observed, got leaseapi.SweepResult) {
	t.Helper()
	after := s.obs.counts()
	if d := after.missed - before.missed; d != got.Missed {
		t.Errorf("observer: told %d missed runs, want %d (once per missed tick)", d, got.Missed)
	}
	if d := after.skipped - before.skipped; d != got.Skipped {
		t.Errorf("observer: told %d skipped ticks, want %d", d, got.Skipped)
	}
	if d := after.expired - before.expired; d != got.Expirations {
		t.Errorf("observer: told %d expirations, want %d", d, got.Expirations)
	}
}

// testSweepMixedBatch: one pass decides a batch that mixes every fate (ran,
// missed, skipped, paused), jobs that owe T as a catch-up afterwards, one
// whose unclaimed manual tick is recorded before its catch-up debt, one
// whose claimable manual tick outranks it, and an expired grant; each job
// gets its own decision, its own missed runs and its own debt; a resume
// decided its job's tick with the same write; the next pass finds nothing.
func testSweepMixedBatch(t *testing.T, s *sweepSetup) {
	s.start(t)
	m := s.setUpMix(t, "mix")
	s.rewind(t)
	s.finishMix(t, m)
	before := s.obs.counts()
	res, err := s.h.Stores[0].SweepTicks(t.Context(), 100)
	if err != nil {
		t.Fatalf("SweepTicks: %v", err)
	}
	if res != perMix {
		t.Errorf("SweepTicks: got %+v, want %+v", res, perMix)
	}
	s.checkMix(t, m)
	s.checkObserved(t, before, res)
	if again, err := s.h.Stores[0].SweepTicks(t.Context(), 100); err != nil || again != (leaseapi.SweepResult{}) {
		t.Errorf("the next SweepTicks: got %+v, %v; want nothing decided", again, err)
	}
}

// testSweepConcurrent: several instances sweep the same due jobs at once,
// in small batches, each first reading the same batch before any writes
// it (where the store lets a test hold a pass between its read and its
// write): every tick is decided once, by one of them. The sum of their
// results is what one sweep decides, each job's counters, missed runs
// and debt are as one pass leaves them, and the observer is told once.
func testSweepConcurrent(t *testing.T, s *sweepSetup) {
	const copies, sweepers, batch = 4, 6, 5
	s.start(t)
	mixes := make([]*mix, copies)
	for i := range mixes {
		mixes[i] = s.setUpMix(t, fmt.Sprintf("m%d", i))
	}
	s.rewind(t)
	for _, m := range mixes {
		s.finishMix(t, m)
	}
	if s.h.SetBeforeWrite != nil {
		// A barrier at the first write of every sweeper: none writes before
		// all have read.
		var mu sync.Mutex
		arrived, all := 0, make(chan struct{})
		for _, st := range s.h.Stores {
			s.h.SetBeforeWrite(st, func() {
				mu.Lock()
				arrived++
				first := arrived <= sweepers
				if arrived == sweepers {
					close(all)
				}
				mu.Unlock()
				if first {
					select {
					case <-all:
					case <-t.Context().Done():
					}
				}
			})
		}
	}
	before := s.obs.counts()
	results := make([]leaseapi.SweepResult, sweepers)
	var wg sync.WaitGroup
	for i := range sweepers {
		wg.Go(func() { results[i] = sweepOnce(t, s.h.Stores[i%len(s.h.Stores)], batch) })
	}
	wg.Wait()
	var total leaseapi.SweepResult
	for _, r := range results {
		total.Add(r)
	}
	if want := times(perMix, copies); total != want {
		t.Errorf("the sum of %d concurrent sweeps: got %+v, want %+v (each tick decided once)", sweepers, total, want)
	}
	for _, m := range mixes {
		s.checkMix(t, m)
	}
	s.checkObserved(t, before, total)
}

// testSweepStaleDecision: a decision is not written when the job's row
// changed between the pass's read and its write — the job was paused, a
// grant registered a new spec, or a grant was made (here, a late one for
// T) — while the pass writes the unchanged job's; the next pass decides
// the changed jobs from what they are now, once.
func testSweepStaleDecision(t *testing.T, s *sweepSetup) {
	if s.h.SetBeforeWrite == nil {
		t.Skip("the store reads and writes a pass under a single writer's lock: no row changes in between")
	}
	ctx, b := t.Context(), s.b
	s.start(t)
	unchanged := s.register(t, "unchanged", false)
	paused := s.register(t, "paused", false)
	respec := s.register(t, "respec", false)
	granted := s.register(t, "granted", false)
	s.rewind(t)

	var once sync.Once
	s.h.SetBeforeWrite(s.h.Stores[0], func() {
		once.Do(func() {
			if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: paused}); err != nil {
				t.Errorf("Pause: %v", err)
			}
			owner := b.owner("meanwhile")
			l, err := b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: respec, Owner: owner, TTL: longTTL, Schedule: "@every 1h", Grace: sweepGrace})
			if err == nil {
				_, err = b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: respec, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
			}
			if err != nil {
				t.Errorf("a grant with a new spec: %v", err)
			}
			l, err = b.store.Acquire(ctx, &leaseapi.AcquireParams{JobID: granted, Owner: owner, TTL: longTTL, Tick: &s.tick})
			if err == nil {
				_, err = b.store.Release(ctx, &leaseapi.ReleaseParams{JobID: granted, Owner: owner, Token: l.Token, Outcome: leaseapi.OutcomeSucceeded})
			}
			if err != nil {
				t.Errorf("a late grant of T: %v", err)
			}
		})
	})
	first, err := s.h.Stores[0].SweepTicks(ctx, 100)
	if err != nil {
		t.Fatalf("SweepTicks: %v", err)
	}
	if want := (leaseapi.SweepResult{Jobs: 1, Missed: 1}); first != want {
		t.Errorf("the pass whose rows changed: got %+v, want %+v (the unchanged job's decision only)", first, want)
	}
	missedRuns := func(job string) int {
		n := 0
		for _, r := range b.runs(t, job, 100) {
			if r.Outcome == leaseapi.OutcomeMissed {
				n++
			}
		}
		return n
	}
	for _, job := range []string{paused, respec, granted} {
		if l := b.get(t, job); l.MissedTicks != 0 || missedRuns(job) != 0 {
			t.Errorf("%s, changed before the write: got %d missed ticks and %d missed runs, want the stale decision not written",
				job, l.MissedTicks, missedRuns(job))
		}
	}

	// The next pass decides them as they are now: paused after T's grace
	// ended (missed), a new spec whose first tick is ahead (nothing), a
	// grant of T (ran).
	second, err := s.h.Stores[0].SweepTicks(ctx, 100)
	if err != nil {
		t.Fatalf("SweepTicks: %v", err)
	}
	if want := (leaseapi.SweepResult{Jobs: 3, Ran: 1, Missed: 1}); second != want {
		t.Errorf("the next pass: got %+v, want %+v", second, want)
	}
	for job, want := range map[string]int64{unchanged: 1, paused: 1, respec: 0, granted: 0} {
		if l := b.get(t, job); l.MissedTicks != want || int64(missedRuns(job)) != want {
			t.Errorf("%s: got %d missed ticks and %d missed runs, want %d of each", job, l.MissedTicks, missedRuns(job), want)
		}
	}
}

// countingObserver counts what a store tells its observer.
type countingObserver struct {
	mu sync.Mutex
	c  observed
}

type observed struct {
	missed           int64
	skipped, expired int64
}

func newCountingObserver() *countingObserver { return &countingObserver{} }

func (o *countingObserver) RunFinished(outcome leaseapi.Outcome, _ time.Duration) {
	if outcome == leaseapi.OutcomeMissed {
		o.mu.Lock()
		o.c.missed++
		o.mu.Unlock()
	}
}
func (o *countingObserver) TicksSkipped(n int64)        { o.mu.Lock(); o.c.skipped += n; o.mu.Unlock() }
func (o *countingObserver) LeasesExpired(n int64)       { o.mu.Lock(); o.c.expired += n; o.mu.Unlock() }
func (o *countingObserver) RunStarted(leaseapi.Trigger) {}

func (o *countingObserver) counts() observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.c
}

// testSweepPolicyRealert: an alerting job tells job.alerting again once
// its RealertAfter has passed since it last did, once however many
// instances sweep at the same time, and then not again until the next
// RealertAfter.
func testSweepPolicyRealert(t *testing.T, s *sweepSetup) {
	b := s.b
	ws, ok := b.store.(leaseapi.WebhookStore)
	if !ok {
		t.Skipf("%T keeps no webhooks", b.store)
	}
	scope := b.prefix + ":"
	job, owner := scope+"realert", b.owner("a")
	w := newWebhook(t, []string{scope}, "job.alerting", "job.ok")
	if err := ws.CreateWebhook(t.Context(), &w); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	b.run(t, job, owner, leaseapi.OutcomeSucceeded)
	b.putPolicy(t, job, leaseapi.AlertPolicy{ConsecutiveFailures: 1, RealertAfter: time.Minute})
	b.run(t, job, owner, leaseapi.OutcomeFailed)
	first := b.wantPolicy(t, "a failure", job, leaseapi.AlertAlerting, leaseapi.ReasonFailures)
	if events := claimAll(t, ws); len(events) != 1 || events[0].Type != "job.alerting" || events[0].Repeat {
		t.Fatalf("after the failure: claimed %s, want one job.alerting, not a repeat", fmtEvents(events))
	}

	// Nothing is due before RealertAfter has passed.
	sweepOnce(t, b.store, 100)
	if events := claimAll(t, ws); len(events) != 0 {
		t.Fatalf("before RealertAfter: claimed %s, want nothing", fmtEvents(events))
	}
	s.h.Rewind(t, job, 2*time.Minute)
	var wg sync.WaitGroup
	for i := range 2 * len(s.h.Stores) {
		wg.Go(func() { sweepOnce(t, s.h.Stores[i%len(s.h.Stores)], 100) })
	}
	wg.Wait()
	events := claimAll(t, ws)
	if len(events) != 1 || events[0].Type != "job.alerting" || !events[0].Repeat ||
		!slices.Equal(events[0].AlertReasons, []leaseapi.AlertReason{leaseapi.ReasonFailures}) {
		t.Fatalf("after RealertAfter: claimed %s, want one repeated job.alerting with [failures]", fmtEvents(events))
	}
	again := b.wantPolicy(t, "the repeat", job, leaseapi.AlertAlerting, leaseapi.ReasonFailures)
	if again.State.AlertedAt == nil || !again.State.AlertedAt.After(first.State.AlertedAt.Add(-2*time.Minute)) {
		t.Fatalf("the repeat left AlertedAt %v, want it later than the rewound %v", again.State.AlertedAt, first.State.AlertedAt.Add(-2*time.Minute))
	}
	sweepOnce(t, b.store, 100)
	if events := claimAll(t, ws); len(events) != 0 {
		t.Fatalf("a sweep after the repeat: claimed %s, want nothing", fmtEvents(events))
	}
}
