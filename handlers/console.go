package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// The reads of the operations console across jobs: GET /runs and GET
// /stats, both within the caller's scopes.

func (h *handler) listRecentRuns(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "recent_runs", recentRunsParams, h.recentRunsInScope, func(_ *http.Request, page leaseapi.RunPage) any {
		out := api.RecentRunList{Runs: make([]api.Run, 0, len(page.Runs)), ServerTime: api.NewTime(page.Now)}
		for _, run := range page.Runs {
			out.Runs = append(out.Runs, api.FromRun(run.Run))
		}
		if page.More && len(page.Runs) > 0 {
			c := encodeRunCursor(page.Runs[len(page.Runs)-1].Key)
			out.NextCursor = &c
		}
		return out
	})
}

// noRunKey sorts after every run: a page after it is empty.
var noRunKey = leaseapi.RunKey{At: time.Date(0, time.January, 1, 0, 0, 0, 0, time.UTC), ID: 1}

// recentRunsInScope reads one page of the runs the caller may see: a page
// under each of its scoped prefixes, merged newest first. A cursor is
// only a place in the order of runs, so a forged one can skip runs but
// never lead out of scope.
func (h *handler) recentRunsInScope(ctx context.Context, p *leaseapi.RecentRunsParams) (leaseapi.RunPage, error) {
	prefixes := scopedPrefixes(principalFrom(ctx).scopes, "")
	if len(prefixes) == 1 && prefixes[0] == "" {
		return h.store.RecentRuns(ctx, p)
	}
	if len(prefixes) == 0 { // nothing in scope: an empty page, at the store's clock
		empty := *p
		empty.After, empty.Limit = &noRunKey, 1
		page, err := h.store.RecentRuns(ctx, &empty)
		page.Runs, page.More = []leaseapi.RecentRun{}, false
		return page, err
	}
	var page leaseapi.RunPage
	for _, prefix := range prefixes {
		q := *p
		q.Prefix = prefix
		sub, err := h.store.RecentRuns(ctx, &q)
		if err != nil {
			return leaseapi.RunPage{}, err
		}
		if page.Now.IsZero() {
			page.Now = sub.Now
		}
		page.Runs = append(page.Runs, sub.Runs...)
		page.More = page.More || sub.More
	}
	slices.SortFunc(page.Runs, func(a, b leaseapi.RecentRun) int {
		switch {
		case a.Key.Before(b.Key):
			return -1
		case b.Key.Before(a.Key):
			return 1
		}
		return 0
	})
	if len(page.Runs) > p.Limit {
		page.Runs, page.More = page.Runs[:p.Limit], true
	}
	return page, nil
}

func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	serve(h, w, r, "stats", func(_ http.ResponseWriter, r *http.Request) (struct{}, error) {
		_, err := query(r)
		return struct{}{}, err
	}, func(ctx context.Context, _ struct{}) (leaseapi.Stats, error) {
		return h.statsInScope(ctx)
	}, func(_ *http.Request, st leaseapi.Stats) any {
		return api.FromStats(st)
	})
}

// statsInScope counts the jobs the caller may see: the store's counts
// under each of its scoped prefixes, summed. The prefixes are disjoint
// (scopes are normalized so), so no job is counted twice. The sum is
// cached per set of prefixes for statsTTL.
func (h *handler) statsInScope(ctx context.Context) (leaseapi.Stats, error) {
	prefixes := scopedPrefixes(principalFrom(ctx).scopes, "")
	key := strings.Join(prefixes, " ")
	if st, ok := h.statsCache.get(key, h.now()); ok {
		return st, nil
	}
	if len(prefixes) == 0 {
		// Nothing in scope: no job id starts with ".", so the store
		// counts nothing, at its clock.
		prefixes = []string{"."}
	}
	sum := leaseapi.Stats{Leases: map[leaseapi.State]int64{}, Runs24h: map[leaseapi.Outcome]int64{}}
	for _, prefix := range prefixes {
		st, err := h.store.Stats(ctx, prefix)
		if err != nil {
			return leaseapi.Stats{}, err
		}
		for s, n := range st.Leases {
			sum.Leases[s] += n
		}
		for o, n := range st.Runs24h {
			sum.Runs24h[o] += n
		}
		sum.Paused += st.Paused
		sum.Overdue += st.Overdue
		if sum.Now.IsZero() {
			sum.Now = st.Now
		}
	}
	h.statsCache.put(key, sum, h.now())
	return sum, nil
}

// statsTTL is how long GET /stats answers from its cache: the console
// refreshes every few seconds, and a count over every job is not free.
const statsTTL = 5 * time.Second

// maxStatsCacheEntries bounds the cache: one entry per distinct set of
// scopes that asked within statsTTL.
const maxStatsCacheEntries = 1024

// statsCache holds the recent counts of GET /stats, keyed by the caller's
// scoped prefixes, so that a caller only ever gets the counts of its own
// scopes.
type statsCache struct {
	mu      sync.Mutex
	entries map[string]statsEntry
}

type statsEntry struct {
	stats leaseapi.Stats
	at    time.Time
}

func (c *statsCache) get(key string, now time.Time) (leaseapi.Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || now.Sub(e.at) >= statsTTL || now.Before(e.at) {
		return leaseapi.Stats{}, false
	}
	return e.stats, true
}

func (c *statsCache) put(key string, st leaseapi.Stats, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]statsEntry)
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxStatsCacheEntries {
		for k, e := range c.entries {
			if now.Sub(e.at) >= statsTTL || now.Before(e.at) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxStatsCacheEntries {
			clear(c.entries) // as many scope sets as that within 5 s: start over
		}
	}
	c.entries[key] = statsEntry{stats: st, at: now}
}
