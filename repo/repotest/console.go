package repotest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
)

// The reads across jobs of the operations console: the lease list's paused
// and overdue filters, the recent runs of every job, the runs of the last
// 24 hours in Stats.

// testListPausedOverdue: the paused and overdue filters keep exactly the
// jobs Stats counts so, page by page.
func testListPausedOverdue(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	plain, paused, overdue, pausedSched := b.job("1-plain"), b.job("2-paused"), b.job("3-overdue"), b.job("4-paused-scheduled")
	b.acquire(t, leaseapi.AcquireParams{JobID: plain, Owner: a, TTL: longTTL})
	b.acquire(t, leaseapi.AcquireParams{JobID: paused, Owner: a, TTL: longTTL})
	b.register(t, overdue, everySecond, shortGrace)
	b.register(t, pausedSched, everySecond, shortGrace)
	b.sweepUntil(t, overdue, "a missed tick", func(l leaseapi.Lease) bool { return l.MissedTicks >= 1 })
	for _, job := range []string{paused, pausedSched} {
		if _, err := b.store.Pause(ctx, &leaseapi.PauseParams{JobID: job}); err != nil {
			t.Fatalf("Pause(%s): %v", job, err)
		}
	}
	yes, no := ptr(true), ptr(false)
	for _, tc := range []struct {
		name            string
		paused, overdue *bool
		want            []string
	}{
		{"all", nil, nil, []string{plain, paused, overdue, pausedSched}},
		{"paused", yes, nil, []string{paused, pausedSched}},
		{"not paused", no, nil, []string{plain, overdue}},
		{"overdue", nil, yes, []string{overdue}},
		{"not overdue", nil, no, []string{plain, paused, pausedSched}},
		{"paused and overdue", yes, yes, nil},
		{"not paused, not overdue", no, no, []string{plain}},
	} {
		for _, limit := range []int{1, 2, 100} {
			got := leaseIDs(b.listAll(t, leaseapi.ListParams{Prefix: b.prefix, Paused: tc.paused, Overdue: tc.overdue, Limit: limit}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("List %s, limit %d: got %q, want %q", tc.name, limit, got, tc.want)
			}
		}
	}
	st, err := b.store.Stats(ctx, b.prefix)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Paused != 2 || st.Overdue != 1 {
		t.Errorf("Stats: got paused %d overdue %d, want 2 1 (as the list filters)", st.Paused, st.Overdue)
	}
}

// recentRunsAll reads every page of RecentRuns with p and checks that the
// pages are in order, each run after the previous one, none twice.
func (b *bundle) recentRunsAll(t *testing.T, p leaseapi.RecentRunsParams) []leaseapi.RecentRun {
	t.Helper()
	var out []leaseapi.RecentRun
	for range 10_000 {
		page, err := b.store.RecentRuns(t.Context(), &p)
		if err != nil {
			t.Fatalf("RecentRuns(%+v): %v", p, err)
		}
		if len(page.Runs) > p.Limit {
			t.Fatalf("RecentRuns limit %d: got %d runs", p.Limit, len(page.Runs))
		}
		if page.Now.IsZero() {
			t.Fatalf("RecentRuns: no Now")
		}
		for _, r := range page.Runs {
			if n := len(out); n > 0 && !out[n-1].Key.Before(r.Key) {
				t.Fatalf("RecentRuns: run %+v follows %+v, want newest first by (at, id)", r.Key, out[n-1].Key)
			}
			out = append(out, r)
		}
		if !page.More {
			return out
		}
		if len(page.Runs) == 0 {
			t.Fatal("RecentRuns: an empty page with More")
		}
		p.After = &page.Runs[len(page.Runs)-1].Key
	}
	t.Fatal("RecentRuns: no last page")
	return nil
}

// runID is what identifies a run in both listings.
func runID(r leaseapi.Run) string {
	return fmt.Sprintf("%s/%d/%s/%s/%s/%s", r.JobID, r.Token, r.Owner, fmtTime(r.Tick), fmtTime(r.StartedAt), r.Outcome)
}

// testRecentRuns: the runs of every job under a prefix, newest first,
// paged with ties (missed ticks of several jobs share their tick), filtered
// by outcome, agree with each job's own history.
func testRecentRuns(t *testing.T, b *bundle) {
	ctx, a := t.Context(), b.owner("a")
	var jobs []string
	// Three scheduled jobs that nobody runs: their missed runs share ticks.
	for i := range 3 {
		job := b.job(fmt.Sprintf("sched-%d", i))
		jobs = append(jobs, job)
		b.register(t, job, everySecond, shortGrace)
	}
	for _, job := range jobs {
		b.sweepUntil(t, job, "two missed ticks", func(l leaseapi.Lease) bool { return l.MissedTicks >= 2 })
	}
	for _, job := range jobs {
		if _, err := b.store.ForgetSchedule(ctx, job); err != nil { // no more missed runs from here on
			t.Fatalf("ForgetSchedule: %v", err)
		}
	}
	// Grants of every other outcome.
	for i := range 4 {
		job := b.job(fmt.Sprintf("grant-%d", i))
		jobs = append(jobs, job)
		for k := range 3 {
			l := b.acquire(t, leaseapi.AcquireParams{JobID: job, Owner: a, TTL: longTTL, Tick: tickAt(k)})
			outcome := leaseapi.OutcomeSucceeded
			if (i+k)%2 == 1 {
				outcome = leaseapi.OutcomeFailed
			}
			b.release(t, leaseapi.ReleaseParams{JobID: job, Owner: a, Token: l.Token, Outcome: outcome})
		}
	}
	revoked, running, expired := b.job("revoked"), b.job("running"), b.job("expired")
	jobs = append(jobs, revoked, running, expired)
	b.acquire(t, leaseapi.AcquireParams{JobID: revoked, Owner: a, TTL: longTTL})
	b.revoke(t, revoked)
	b.acquire(t, leaseapi.AcquireParams{JobID: running, Owner: a, TTL: longTTL})
	exp := b.acquire(t, leaseapi.AcquireParams{JobID: expired, Owner: a, TTL: shortTTL})
	b.waitForState(t, expired, leaseapi.StateExpired)

	// What each job's history holds, in the suite's own order of jobs.
	var want []leaseapi.Run
	for _, job := range jobs {
		want = append(want, b.runs(t, job, 1000)...)
	}
	byOutcome := func(outcomes ...leaseapi.Outcome) []string {
		var ids []string
		for _, r := range want {
			if len(outcomes) == 0 || slices.Contains(outcomes, r.Outcome) {
				ids = append(ids, runID(r))
			}
		}
		slices.Sort(ids)
		return ids
	}
	ids := func(runs []leaseapi.RecentRun) []string {
		var out []string
		for _, r := range runs {
			out = append(out, runID(r.Run))
		}
		slices.Sort(out)
		return out
	}

	all := b.recentRunsAll(t, leaseapi.RecentRunsParams{Prefix: b.prefix, Limit: 1000})
	if got, w := ids(all), byOutcome(); !slices.Equal(got, w) {
		t.Fatalf("RecentRuns: got\n%q\nwant (each job's Runs)\n%q", got, w)
	}
	ties := false
	for i := 1; i < len(all); i++ {
		ties = ties || all[i].Key.At.Equal(all[i-1].Key.At)
	}
	if !ties {
		t.Error("RecentRuns: no two runs share their time; the test means to page across ties")
	}
	for _, r := range all {
		if r.JobID == expired && r.Token == exp.Token {
			if r.Outcome != leaseapi.OutcomeExpired || r.EndedAt == nil || !r.EndedAt.Equal(b.get(t, expired).ExpiresAt) {
				t.Errorf("RecentRuns: the expired grant shows outcome %s ended %s, want expired at its expiresAt", r.Outcome, fmtTime(r.EndedAt))
			}
		}
	}
	// Pages of every size list the same runs in the same order.
	for _, limit := range []int{1, 2, 5} {
		paged := b.recentRunsAll(t, leaseapi.RecentRunsParams{Prefix: b.prefix, Limit: limit})
		if len(paged) != len(all) {
			t.Fatalf("RecentRuns limit %d: got %d runs, want %d", limit, len(paged), len(all))
		}
		for i := range paged {
			if paged[i].Key != all[i].Key || runID(paged[i].Run) != runID(all[i].Run) {
				t.Fatalf("RecentRuns limit %d: run %d is %+v, want %+v", limit, i, paged[i], all[i])
			}
		}
	}
	// Outcome filters.
	for _, outcomes := range [][]leaseapi.Outcome{
		{leaseapi.OutcomeFailed, leaseapi.OutcomeExpired, leaseapi.OutcomeMissed},
		{leaseapi.OutcomeRunning},
		{leaseapi.OutcomeExpired},
		{leaseapi.OutcomeSucceeded, leaseapi.OutcomeRevoked},
	} {
		for _, limit := range []int{2, 1000} {
			got := ids(b.recentRunsAll(t, leaseapi.RecentRunsParams{Outcomes: outcomes, Prefix: b.prefix, Limit: limit}))
			if w := byOutcome(outcomes...); !slices.Equal(got, w) || len(w) == 0 {
				t.Errorf("RecentRuns %v limit %d: got %q, want %q (not empty)", outcomes, limit, got, w)
			}
		}
	}
	// A narrower prefix, and one without jobs.
	got := ids(b.recentRunsAll(t, leaseapi.RecentRunsParams{Prefix: b.job("grant-"), Limit: 4}))
	var w []string
	for _, r := range want {
		if r.JobID >= b.job("grant-") && r.JobID < b.job("grant-~") {
			w = append(w, runID(r))
		}
	}
	slices.Sort(w)
	if !slices.Equal(got, w) || len(w) != 12 {
		t.Errorf("RecentRuns under %s: got %q, want %q", b.job("grant-"), got, w)
	}
	if none := b.recentRunsAll(t, leaseapi.RecentRunsParams{Prefix: b.prefix + "-nothing", Limit: 10}); len(none) != 0 {
		t.Errorf("RecentRuns of an unused prefix: got %d runs", len(none))
	}
	// A cursor past the last run lists nothing; one before the first, all.
	last := all[len(all)-1].Key
	page, err := b.store.RecentRuns(ctx, &leaseapi.RecentRunsParams{Prefix: b.prefix, After: &last, Limit: 10})
	if err != nil || len(page.Runs) != 0 || page.More {
		t.Errorf("RecentRuns after the last run: got %d runs, more %v, err %v; want none", len(page.Runs), page.More, err)
	}
}

// testRunsShowExpiry: a run still marked running is shown as its job's
// lease, read with it, shows its grant (leaseapi.Run.ShowExpiry): running
// while the grant is held, expired at the grant's expiry once it has
// expired with nobody taking over; in a job's history and in the recent
// runs alike, where the outcome filter keeps exactly the runs so shown,
// page by page, also when the runs of the other outcome fill a page of
// the runs still marked running.
func testRunsShowExpiry(t *testing.T, b *bundle) {
	a := b.owner("a")
	const pairs = 4
	var held, expired []string
	for i := range pairs {
		h, e := b.job(fmt.Sprintf("%d-held", i)), b.job(fmt.Sprintf("%d-expired", i))
		held, expired = append(held, h), append(expired, e)
		b.acquire(t, leaseapi.AcquireParams{JobID: h, Owner: a, TTL: longTTL})
		b.acquire(t, leaseapi.AcquireParams{JobID: e, Owner: a, TTL: shortTTL})
	}
	for _, job := range expired {
		b.waitForState(t, job, leaseapi.StateExpired)
	}
	want := map[leaseapi.Outcome][]string{}
	for _, job := range slices.Concat(held, expired) {
		lease := b.get(t, job)
		runs := b.runs(t, job, 10)
		if len(runs) != 1 || runs[0].Token != lease.Token {
			t.Fatalf("Runs(%s): got %+v, want the one run of token %d", job, runs, lease.Token)
		}
		r := runs[0]
		wantOutcome, wantEnd := leaseapi.OutcomeRunning, (*time.Time)(nil)
		if lease.State == leaseapi.StateExpired {
			wantOutcome, wantEnd = leaseapi.OutcomeExpired, &lease.ExpiresAt
		}
		if r.Outcome != wantOutcome || !equalTimePtr(r.EndedAt, wantEnd) {
			t.Errorf("Runs(%s) beside a lease %s until %s: got outcome %s ended %s, want %s ended %s",
				job, lease.State, fmtTime(&lease.ExpiresAt), r.Outcome, fmtTime(r.EndedAt), wantOutcome, fmtTime(wantEnd))
		}
		want[wantOutcome] = append(want[wantOutcome], runID(r))
	}
	for _, o := range []leaseapi.Outcome{leaseapi.OutcomeRunning, leaseapi.OutcomeExpired} {
		slices.Sort(want[o])
		for _, limit := range []int{1, 2, 3, 100} {
			var got []string
			for _, r := range b.recentRunsAll(t, leaseapi.RecentRunsParams{Outcomes: []leaseapi.Outcome{o}, Prefix: b.prefix, Limit: limit}) {
				got = append(got, runID(r.Run))
			}
			slices.Sort(got)
			if !slices.Equal(got, want[o]) || len(got) != pairs {
				t.Errorf("RecentRuns %s, limit %d: got %q, want %q", o, limit, got, want[o])
			}
		}
	}
}
