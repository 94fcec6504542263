package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// fakeClock is the clock of the GET /stats cache in a test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// consoleJobs acquires, as root, a run of each outcome for jobs in and out
// of the scope team-a: and returns how many runs each job has.
func consoleJobs(t *testing.T, b *testBundle, root http.Header) map[string]int {
	t.Helper()
	runs := map[string]int{}
	for _, job := range []string{"team-a:one", "team-a:two", "team-ab:x", "team-b.y"} {
		for i, outcome := range []string{"succeeded", "failed", "succeeded"} {
			l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"o` + string(rune('0'+i)) + `"}`, header: root}))
			b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release", header: root,
				body: jsonBody(t, api.ReleaseRequest{Owner: *ptr(l.Owner), Token: l.Token, Outcome: ptr(leaseapi.Outcome(outcome))})})
			runs[job]++
		}
	}
	// Held for the longest TTL, so that it is still held however long the
	// test takes on a loaded machine.
	wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-a:held/acquire", body: `{"owner":"o","ttlMs":3600000}`, header: root}))
	runs["team-a:held"]++
	return runs
}

// recentRuns reads every page of GET /runs with query (without cursor and
// limit) and limit, checking that the runs come newest first.
func recentRuns(t *testing.T, b *testBundle, h http.Header, query string, limit int) []api.Run {
	t.Helper()
	var out []api.Run
	cursor := ""
	for range 1000 {
		q := "/runs?limit=" + string(rune('0'+limit)) + query
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		resp := b.do(t, request{method: http.MethodGet, path: q, header: h})
		if resp.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", q, resp.status, resp.body)
		}
		var page api.RecentRunList
		if err := json.Unmarshal(resp.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) > limit {
			t.Fatalf("GET %s: %d runs", q, len(page.Runs))
		}
		for _, r := range page.Runs {
			if n := len(out); n > 0 && r.StartedAt.After(out[n-1].StartedAt.Time) {
				t.Fatalf("GET /runs: %s started after the run before it", r.JobID)
			}
			out = append(out, r)
		}
		if page.NextCursor == nil {
			return out
		}
		cursor = *page.NextCursor
	}
	t.Fatal("GET /runs: no last page")
	return nil
}

func jobsOf(runs []api.Run) map[string]int {
	m := map[string]int{}
	for _, r := range runs {
		m[r.JobID]++
	}
	return m
}

// TestRecentRunsInScope: GET /runs lists the newest runs of the jobs in the
// caller's scopes only, page by page, under one scope or several, with
// outcome filters; a forged cursor never leads out of scope; bad
// parameters are answered 400 naming the parameter.
func TestRecentRunsInScope(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		_, aRead := mint(t, store, "a-read", leaseapi.RoleRead, "team-a:")
		_, two := mint(t, store, "two", leaseapi.RoleRead, "team-b.", "team-a:")
		b := setup(t, store, defaultOptions())
		runs := consoleJobs(t, b, root)

		want := func(prefixes ...string) map[string]int {
			m := map[string]int{}
			for job, n := range runs {
				if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(job, p) }) {
					m[job] = n
				}
			}
			return m
		}
		for _, tc := range []struct {
			name   string
			header http.Header
			want   map[string]int
		}{
			{"root", root, want("")},
			{"a-read", aRead, want("team-a:")},
			{"two scopes", two, want("team-a:", "team-b.")},
		} {
			for _, limit := range []int{1, 2, 9} {
				got := jobsOf(recentRuns(t, b, tc.header, "", limit))
				if !mapsEqual(got, tc.want) {
					t.Errorf("%s GET /runs limit %d: runs by job %v, want %v", tc.name, limit, got, tc.want)
				}
			}
		}
		failed := recentRuns(t, b, aRead, "&outcome=failed,expired,missed", 2)
		if got := jobsOf(failed); !mapsEqual(got, map[string]int{"team-a:one": 1, "team-a:two": 1}) {
			t.Errorf("a-read GET /runs?outcome=failed,expired,missed: %v", got)
		}
		for _, r := range failed {
			if r.Outcome != leaseapi.OutcomeFailed || r.DurationMs == nil {
				t.Errorf("a failed run: %+v", r)
			}
		}
		// A forged cursor (any place in the order) stays in scope.
		forged := base64.RawURLEncoding.EncodeToString([]byte("253402300799000000.9223372036854775807"))
		resp := b.do(t, request{method: http.MethodGet, path: "/runs?cursor=" + forged, header: aRead})
		var page api.RecentRunList
		if err := json.Unmarshal(resp.body, &page); err != nil || resp.status != http.StatusOK {
			t.Fatalf("forged cursor: %d %s", resp.status, resp.body)
		}
		if got := jobsOf(page.Runs); !mapsEqual(got, want("team-a:")) {
			t.Errorf("forged cursor: runs by job %v, want %v", got, want("team-a:"))
		}
		for _, tc := range []struct{ query, field string }{
			{"?outcome=bogus", "outcome"},
			{"?outcome=failed,failed", "outcome"},
			{"?outcome=failed,", "outcome"},
			{"?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("team-a:one")), "cursor"},
			{"?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("1.0")), "cursor"},
			// A time of year 0000 (here 0000-06-01): no run lies there.
			{"?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("-62154086400000000.1")), "cursor"},
			{"?cursor=***", "cursor"},
			{"?limit=0", "limit"},
			{"?limit=1001", "limit"},
			{"?prefix=team-a:", "prefix"},
		} {
			p := wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/runs" + tc.query, header: root}), http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, tc.field) {
				t.Errorf("GET /runs%s: detail %q does not name %s", tc.query, p.Detail, tc.field)
			}
		}
	})
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func getStats(t *testing.T, b *testBundle, h http.Header) api.Stats {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/stats", header: h})
	if resp.status != http.StatusOK {
		t.Fatalf("GET /stats: %d %s", resp.status, resp.body)
	}
	var st api.Stats
	if err := json.Unmarshal(resp.body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatsInScopeAndCached: GET /stats counts only the caller's jobs,
// summed over several scopes; it answers from its cache within 5 s (by
// the handler's clock) for callers of the same scopes only, and anew
// after.
func TestStatsInScopeAndCached(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		_, aRead := mint(t, store, "a-read", leaseapi.RoleRead, "team-a:")
		_, aRead2 := mint(t, store, "a-read-2", leaseapi.RoleRead, "team-a:")
		_, two := mint(t, store, "two", leaseapi.RoleRead, "team-b.", "team-a:")
		clock := &fakeClock{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		opts := defaultOptions()
		opts.Now = clock.Now
		b := setup(t, store, opts)
		consoleJobs(t, b, root)

		wantStats := func(name string, got api.Stats, held, released, succeeded, failed int64) {
			t.Helper()
			if got.Leases.Held != held || got.Leases.Released != released || got.Runs24h.Succeeded != succeeded || got.Runs24h.Failed != failed ||
				got.Leases.Expired != 0 || got.Leases.Revoked != 0 || got.Paused != 0 || got.Overdue != 0 {
				t.Errorf("%s GET /stats: got %+v, want held %d released %d, runs24h succeeded %d failed %d", name, got, held, released, succeeded, failed)
			}
		}
		wantStats("root", getStats(t, b, root), 1, 4, 8, 4)
		first := getStats(t, b, aRead)
		wantStats("a-read", first, 1, 2, 4, 2)
		wantStats("two scopes", getStats(t, b, two), 1, 3, 6, 3)

		// A new held job in team-a: within 5 s: the same answer, also for
		// another credential of the same scopes; a caller of other scopes
		// gets its own numbers.
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-a:new/acquire", body: `{"owner":"o"}`, header: root}))
		clock.Advance(4900 * time.Millisecond)
		for name, h := range map[string]http.Header{"a-read": aRead, "a-read-2": aRead2} {
			if got := getStats(t, b, h); got != first {
				t.Errorf("%s within 5 s: got %+v, want the cached %+v", name, got, first)
			}
		}
		wantStats("root, cached", getStats(t, b, root), 1, 4, 8, 4)
		clock.Advance(100 * time.Millisecond)
		fresh := getStats(t, b, aRead)
		wantStats("a-read after 5 s", fresh, 2, 2, 4, 2)
		if !fresh.ServerTime.After(first.ServerTime.Time) {
			t.Errorf("a-read after 5 s: serverTime %v, not after %v", fresh.ServerTime, first.ServerTime)
		}
		wantStats("root after 5 s", getStats(t, b, root), 2, 4, 8, 4)

		p := wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/stats?prefix=x", header: root}), http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(p.Detail, "prefix") {
			t.Errorf("GET /stats?prefix=x: detail %q does not name prefix", p.Detail)
		}
	})
}

// TestListPausedOverdue: GET /leases filters by paused and overdue, pages
// with the filters kept, and answers 400 naming a bad value.
func TestListPausedOverdue(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		var paused []string
		for _, name := range []string{"a", "b", "c", "d"} {
			job := b.job(name)
			wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "o"}))
			if name != "c" {
				wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`}))
				paused = append(paused, job)
			}
		}
		list := func(query string) []string {
			var ids []string
			cursor := ""
			for range 10 {
				q := "/leases?limit=1&prefix=" + b.prefix + query
				if cursor != "" {
					q += "&cursor=" + cursor
				}
				resp := b.do(t, request{method: http.MethodGet, path: q})
				var l api.LeaseList
				if err := json.Unmarshal(resp.body, &l); err != nil || resp.status != http.StatusOK {
					t.Fatalf("GET %s: %d %s", q, resp.status, resp.body)
				}
				for _, x := range l.Leases {
					ids = append(ids, x.JobID)
				}
				if l.NextCursor == nil {
					return ids
				}
				cursor = *l.NextCursor
			}
			t.Fatalf("GET /leases%s: no last page", query)
			return nil
		}
		if got := list("&paused=true"); !slices.Equal(got, paused) {
			t.Errorf("paused=true: got %q, want %q", got, paused)
		}
		if got, want := list("&paused=false"), []string{b.job("c")}; !slices.Equal(got, want) {
			t.Errorf("paused=false: got %q, want %q", got, want)
		}
		if got := list("&overdue=true"); len(got) != 0 {
			t.Errorf("overdue=true: got %q, want none", got)
		}
		if got := list("&overdue=false&paused=true"); !slices.Equal(got, paused) {
			t.Errorf("overdue=false&paused=true: got %q, want %q", got, paused)
		}
		for _, q := range []string{"paused=yes", "overdue=1", "paused="} {
			field, _, _ := strings.Cut(q, "=")
			p := wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/leases?" + q}), http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, field) {
				t.Errorf("GET /leases?%s: detail %q does not name %s", q, p.Detail, field)
			}
		}
	})
}
