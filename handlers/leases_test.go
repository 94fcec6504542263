package handlers_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestLeaseLifecycle: acquire, a competitor's 409 with Retry-After, an
// idempotent re-acquire, heartbeat, release (twice), takeover, the old
// holder's lease_lost, and the run history.
func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("lifecycle")

		first := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "replica-a", TTLMs: ptr[int64](60_000)}))
		if first.JobID != job || first.Owner != "replica-a" || first.Token != 1 || first.State != leaseapi.StateHeld ||
			first.TTLMs != 60_000 || first.ReleasedAt != nil || first.Tick != nil || first.LastOutcome != nil {
			t.Fatalf("first grant: %+v", first)
		}
		if got := first.ExpiresAt.Sub(first.AcquiredAt.Time); got != time.Minute {
			t.Errorf("expiresAt - acquiredAt: got %s, want 1m", got)
		}

		resp := b.acquire(t, job, api.AcquireRequest{Owner: "replica-b"})
		p := wantProblem(t, resp, http.StatusConflict, api.CodeLeaseHeld)
		if p.Lease == nil || p.Lease.Owner != "replica-a" || p.Lease.Token != 1 {
			t.Errorf("lease_held lease: %+v", p.Lease)
		}
		ra, err := strconv.Atoi(resp.header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After: got %q, want whole seconds in [1, 60]", resp.header.Get("Retry-After"))
		}

		again := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "replica-a", TTLMs: ptr[int64](60_000)}))
		if again.Token != 1 || !again.AcquiredAt.Equal(first.AcquiredAt.Time) || again.ExpiresAt.Before(first.ExpiresAt.Time) {
			t.Errorf("idempotent re-acquire: got %+v, want token 1 and the same acquiredAt", again)
		}

		hb := wantLease(t, b.heartbeat(t, job, api.HeartbeatRequest{Owner: "replica-a", Token: 1, TTLMs: ptr[int64](120_000)}))
		if hb.Token != 1 || hb.TTLMs != 120_000 || hb.ExpiresAt.Sub(hb.RenewedAt.Time) != 2*time.Minute {
			t.Errorf("heartbeat: %+v", hb)
		}
		hb = wantLease(t, b.heartbeat(t, job, api.HeartbeatRequest{Owner: "replica-a", Token: 1}))
		if hb.TTLMs != 120_000 {
			t.Errorf("heartbeat without ttlMs: ttlMs %d, want the grant's 120000", hb.TTLMs)
		}

		rel := wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "replica-a", Token: 1}))
		if rel.State != leaseapi.StateReleased || rel.ReleasedAt == nil || rel.LastOutcome == nil || *rel.LastOutcome != leaseapi.OutcomeSucceeded {
			t.Errorf("release: %+v", rel)
		}
		rel2 := wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "replica-a", Token: 1}))
		if !rel2.ReleasedAt.Equal(rel.ReleasedAt.Time) || rel2.Token != 1 {
			t.Errorf("second release changed the lease: %+v, then %+v", rel, rel2)
		}

		taken := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "replica-b"}))
		if taken.Owner != "replica-b" || taken.Token != 2 || taken.State != leaseapi.StateHeld || taken.TTLMs != 30_000 {
			t.Errorf("takeover: %+v", taken)
		}

		for _, resp := range []response{
			b.heartbeat(t, job, api.HeartbeatRequest{Owner: "replica-a", Token: 1}),
			b.release(t, job, api.ReleaseRequest{Owner: "replica-a", Token: 1}), // replay of an old release
			b.heartbeat(t, job, api.HeartbeatRequest{Owner: "replica-a", Token: 2}),
			b.heartbeat(t, job, api.HeartbeatRequest{Owner: "replica-b", Token: 1}),
		} {
			p := wantProblem(t, resp, http.StatusConflict, api.CodeLeaseLost)
			if p.Lease == nil || p.Lease.Owner != "replica-b" || p.Lease.Token != 2 {
				t.Errorf("lease_lost lease: %+v", p.Lease)
			}
		}

		var runs api.RunList
		resp = b.get(t, "/leases/"+job+"/runs")
		if resp.status != http.StatusOK {
			t.Fatalf("runs: %d %s", resp.status, resp.body)
		}
		decode(t, resp.body, &runs)
		if len(runs.Runs) != 2 {
			t.Fatalf("runs: got %d, want 2: %+v", len(runs.Runs), runs)
		}
		if r := runs.Runs[0]; r.Token == nil || *r.Token != 2 || r.Outcome != leaseapi.OutcomeRunning || r.EndedAt != nil || r.DurationMs != nil {
			t.Errorf("newest run: %+v", r)
		}
		if r := runs.Runs[1]; r.Token == nil || *r.Token != 1 || r.Owner == nil || *r.Owner != "replica-a" || r.Outcome != leaseapi.OutcomeSucceeded || r.EndedAt == nil || r.DurationMs == nil {
			t.Errorf("first run: %+v", r)
		}
		var one api.RunList
		decode(t, b.get(t, "/leases/"+job+"/runs?limit=1").body, &one)
		if len(one.Runs) != 1 || one.Runs[0].Token == nil || *one.Runs[0].Token != 2 {
			t.Errorf("runs?limit=1: %+v", one)
		}

		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "granted"}); got != 2 {
			t.Errorf("acquire granted: got %v, want 2", got)
		}
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "renewed"}); got != 1 {
			t.Errorf("acquire renewed: got %v, want 1", got)
		}
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "held"}); got != 1 {
			t.Errorf("acquire held: got %v, want 1", got)
		}
		if got := b.counter(t, "leaseapi_heartbeat_total", map[string]string{"result": "lost"}); got != 3 {
			t.Errorf("heartbeat lost: got %v, want 3", got)
		}
		if got := b.counter(t, "leaseapi_release_total", map[string]string{"result": "ok"}); got != 2 {
			t.Errorf("release ok: got %v, want 2", got)
		}
		if got := b.counter(t, "leaseapi_http_requests_total", map[string]string{"route": "/leases/{jobId}/acquire", "code": "409"}); got != 1 {
			t.Errorf("requests_total{acquire,409}: got %v, want 1", got)
		}
	})
}

// TestTicks: a tick released succeeded is never granted again (tick_done),
// ticks are stored in UTC truncated to milliseconds, and the same owner for
// another tick is lease_held.
func TestTicks(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("ticks")
		tick := "2026-11-30T08:00:00.123456+01:00" // 07:00:00.123Z

		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: ptr(tick)}))
		if l.Tick == nil || l.Tick.String() != "2026-11-30T07:00:00.123Z" {
			t.Fatalf("tick: got %v, want 2026-11-30T07:00:00.123Z", l.Tick)
		}
		other := "2026-11-30T07:01:00Z"
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: ptr(other)}), http.StatusConflict, api.CodeLeaseHeld)
		// The same tick in another spelling is the same tick: an idempotent retry.
		again := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: ptr("2026-11-30T07:00:00.123Z")}))
		if again.Token != l.Token {
			t.Errorf("retry of the same tick: token %d, want %d", again.Token, l.Token)
		}
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: l.Token, Outcome: ptr(leaseapi.OutcomeSucceeded)}))

		for _, tk := range []string{"2026-11-30T07:00:00.123Z", "2026-11-30T07:00:00.123999Z", "2026-11-30T06:00:00Z"} {
			p := wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: ptr(tk)}), http.StatusConflict, api.CodeTickDone)
			if p.Lease == nil || p.Lease.LastCompletedTick == nil || p.Lease.LastCompletedTick.String() != "2026-11-30T07:00:00.123Z" {
				t.Errorf("tick_done for %s: lease %+v", tk, p.Lease)
			}
		}
		next := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: ptr(other)}))
		if next.Token != l.Token+1 || next.Tick.String() != "2026-11-30T07:01:00.000Z" {
			t.Errorf("next tick: %+v", next)
		}
		failed := wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "b", Token: next.Token, Outcome: ptr(leaseapi.OutcomeFailed)}))
		if *failed.LastOutcome != leaseapi.OutcomeFailed || failed.LastCompletedTick.String() != "2026-11-30T07:00:00.123Z" {
			t.Errorf("failed release moved lastCompletedTick: %+v", failed)
		}
		// A failed tick may run again.
		wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "c", Tick: ptr(other)}))
		if got := b.counter(t, "leaseapi_acquire_total", map[string]string{"result": "tick_done"}); got != 3 {
			t.Errorf("acquire tick_done: got %v, want 3", got)
		}
	})
}

// TestExpiry: a lease whose holder stops heartbeating expires; its
// heartbeat is lease_lost (never revived), its release still records the
// finished run, and another owner takes over; the expired run is recorded.
func TestExpiry(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.MinTTL = time.Millisecond
		b := setup(t, open(t), opts)

		lost := b.job("lost")
		l := wantLease(t, b.acquire(t, lost, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](50)}))
		b.waitForState(t, lost, leaseapi.StateExpired)
		p := wantProblem(t, b.heartbeat(t, lost, api.HeartbeatRequest{Owner: "a", Token: l.Token, TTLMs: ptr[int64](60_000)}), http.StatusConflict, api.CodeLeaseLost)
		if p.Lease == nil || p.Lease.State != leaseapi.StateExpired {
			t.Errorf("lease_lost after expiry: %+v", p.Lease)
		}
		taken := wantLease(t, b.acquire(t, lost, api.AcquireRequest{Owner: "b"}))
		if taken.Token != l.Token+1 || taken.LastOutcome == nil || *taken.LastOutcome != leaseapi.OutcomeExpired {
			t.Errorf("takeover after expiry: %+v", taken)
		}
		wantProblem(t, b.release(t, lost, api.ReleaseRequest{Owner: "a", Token: l.Token}), http.StatusConflict, api.CodeLeaseLost)
		var runs api.RunList
		decode(t, b.get(t, "/leases/"+lost+"/runs").body, &runs)
		if len(runs.Runs) != 2 || runs.Runs[1].Outcome != leaseapi.OutcomeExpired {
			t.Errorf("runs after expiry: %+v", runs)
		}

		late := b.job("late")
		l = wantLease(t, b.acquire(t, late, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](50)}))
		b.waitForState(t, late, leaseapi.StateExpired)
		rel := wantLease(t, b.release(t, late, api.ReleaseRequest{Owner: "a", Token: l.Token}))
		if rel.State != leaseapi.StateReleased {
			t.Errorf("release of an expired lease nobody took over: %+v", rel)
		}
	})
}

// TestRevoke: an admin force-release bumps the token, so the old holder's
// heartbeat and release fail; revoking a lease that is not held changes
// nothing.
func TestRevoke(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("revoke")
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))

		rev := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job}))
		if rev.State != leaseapi.StateRevoked || rev.Token != l.Token+1 || *rev.LastOutcome != leaseapi.OutcomeRevoked {
			t.Fatalf("revoke: %+v", rev)
		}
		wantProblem(t, b.heartbeat(t, job, api.HeartbeatRequest{Owner: "a", Token: l.Token}), http.StatusConflict, api.CodeLeaseLost)
		wantProblem(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: l.Token}), http.StatusConflict, api.CodeLeaseLost)
		wantProblem(t, b.heartbeat(t, job, api.HeartbeatRequest{Owner: "a", Token: rev.Token}), http.StatusConflict, api.CodeLeaseLost)

		again := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job}))
		if again.Token != rev.Token || again.State != leaseapi.StateRevoked {
			t.Errorf("second revoke changed the lease: %+v", again)
		}
		next := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "b"}))
		if next.Token != rev.Token+1 {
			t.Errorf("grant after revoke: token %d, want %d", next.Token, rev.Token+1)
		}
		var runs api.RunList
		decode(t, b.get(t, "/leases/"+job+"/runs").body, &runs)
		if len(runs.Runs) != 2 || runs.Runs[1].Outcome != leaseapi.OutcomeRevoked {
			t.Errorf("runs: %+v", runs)
		}
	})
}

// TestNotFound: every operation on an unknown job, unknown paths, and
// methods a path does not support.
func TestNotFound(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("missing")
		for _, req := range []request{
			{method: http.MethodGet, path: "/leases/" + job},
			{method: http.MethodGet, path: "/leases/" + job + "/runs"},
			{method: http.MethodDelete, path: "/leases/" + job},
			{method: http.MethodPost, path: "/leases/" + job + "/heartbeat", body: `{"owner":"a","token":1}`},
			{method: http.MethodPost, path: "/leases/" + job + "/release", body: `{"owner":"a","token":1}`},
		} {
			wantProblem(t, b.do(t, req), http.StatusNotFound, api.CodeNotFound)
		}
		if got := b.counter(t, "leaseapi_heartbeat_total", map[string]string{"result": "not_found"}); got != 1 {
			t.Errorf("heartbeat not_found: got %v, want 1", got)
		}

		for _, path := range []string{"/nope", "/leases/" + job + "/nope", "/leases/" + job + "/acquire/x", "/v1/leases"} {
			wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: path}), http.StatusNotFound, api.CodeNotFound)
		}

		for _, tt := range []struct {
			method, path, allow string
		}{
			{http.MethodGet, "/leases/" + job + "/acquire", "POST"},
			{http.MethodPut, "/leases/" + job, "GET, DELETE"},
			{http.MethodPost, "/leases", "GET"},
			{http.MethodDelete, "/healthz", "GET"},
		} {
			resp := b.doInvalid(t, request{method: tt.method, path: tt.path})
			wantProblem(t, resp, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
			if got := resp.header.Get("Allow"); got != tt.allow {
				t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
			}
		}
	})
}

// TestListPagination walks several pages with the cursor and checks the
// filters.
func TestListPagination(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		var want []string
		for i := range 7 {
			job := b.job("job-" + strconv.Itoa(i))
			want = append(want, job)
			l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "owner-" + strconv.Itoa(i%2)}))
			if i%3 == 0 {
				wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: l.Owner, Token: l.Token}))
			}
		}

		var got []string
		pages := 0
		path := "/leases?limit=3&prefix=" + b.prefix
		for {
			resp := b.get(t, path)
			var page api.LeaseList
			decode(t, resp.body, &page)
			pages++
			if len(page.Leases) > 3 {
				t.Fatalf("page of %d leases with limit=3", len(page.Leases))
			}
			for _, l := range page.Leases {
				got = append(got, l.JobID)
			}
			if page.ServerTime.IsZero() {
				t.Error("serverTime is zero")
			}
			if page.NextCursor == nil {
				break
			}
			if pages > 10 {
				t.Fatal("more than 10 pages")
			}
			path = "/leases?limit=3&prefix=" + b.prefix + "&cursor=" + *page.NextCursor
		}
		if !slices.Equal(got, want) || pages != 3 {
			t.Errorf("paged through %d pages: got %v, want %v", pages, got, want)
		}

		var released api.LeaseList
		decode(t, b.get(t, "/leases?state=released&prefix="+b.prefix).body, &released)
		if ids := jobIDs(released); !slices.Equal(ids, []string{want[0], want[3], want[6]}) {
			t.Errorf("state=released: got %v", ids)
		}
		var owned api.LeaseList
		decode(t, b.get(t, "/leases?owner=owner-1&state=held&prefix="+b.prefix).body, &owned)
		if ids := jobIDs(owned); !slices.Equal(ids, []string{want[1], want[5]}) {
			t.Errorf("owner=owner-1&state=held: got %v", ids)
		}
		var none api.LeaseList
		decode(t, b.get(t, "/leases?prefix="+b.prefix+"zzz").body, &none)
		if none.Leases == nil || len(none.Leases) != 0 || none.NextCursor != nil {
			t.Errorf("empty page: %+v", none)
		}
		var all api.LeaseList
		decode(t, b.get(t, "/leases?limit=1000&prefix="+b.prefix).body, &all)
		if len(all.Leases) != 7 || all.NextCursor != nil {
			t.Errorf("one big page: %d leases, cursor %v", len(all.Leases), all.NextCursor)
		}
	})
}

// TestOddButValidValues: values at the edges of the rules, and values that
// look like SQL, are accepted and stored verbatim.
func TestOddButValidValues(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		longJob := b.job(strings.Repeat("j", 128-len(b.prefix)))
		owners := []string{
			strings.Repeat("o", 128),
			`x');DROP_TABLE_leases;--`,
			"$1",
			`'OR'1'='1`,
			`"quoted"\backslash`,
		}
		for i, owner := range owners {
			job := b.job("odd-" + strconv.Itoa(i))
			if i == 0 {
				job = longJob
			}
			l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: owner, TTLMs: ptr[int64](1000)}))
			if l.Owner != owner || l.JobID != job {
				t.Errorf("stored %q/%q, want %q/%q", l.JobID, l.Owner, job, owner)
			}
			got := wantLease(t, b.get(t, "/leases/"+job))
			if got.Owner != owner {
				t.Errorf("read back owner %q, want %q", got.Owner, owner)
			}
		}
		// Bounds of ttlMs, the media type with parameters, and a
		// case-insensitive bearer scheme are all accepted.
		wantLease(t, b.acquire(t, b.job("maxttl"), api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](3_600_000)}))
		resp := b.do(t, request{
			method: http.MethodPost, path: "/leases/" + b.job("charset") + "/acquire", body: `{"owner":"a"}`,
			header: http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		})
		wantLease(t, resp)
	})
}

func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, body)
	}
}

func jobIDs(l api.LeaseList) []string {
	ids := make([]string, 0, len(l.Leases))
	for _, x := range l.Leases {
		ids = append(ids, x.JobID)
	}
	return ids
}

// TestTickAheadOverHTTP: a tick two days ahead of the server's clock is
// 409 tick_ahead with the server's clock as now and no Retry-After,
// carrying the lease when the job has one; nothing is written.
func TestTickAheadOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("ahead")
		before := time.Now()
		ahead := api.FormatTime(before.Add(48 * time.Hour))
		resp := b.acquire(t, job, api.AcquireRequest{Owner: "fast", Tick: &ahead})
		p := wantProblem(t, resp, http.StatusConflict, api.CodeTickAhead)
		if p.Now == nil || p.Now.Before(before.Add(-time.Minute)) || p.Lease != nil || resp.header.Get("Retry-After") != "" ||
			!strings.Contains(p.Detail, ahead) || !strings.Contains(p.Detail, "LEASEAPI_MAX_TICK_AHEAD") {
			t.Errorf("tick_ahead of a new job: problem %+v, Retry-After %q; want now, no lease, no Retry-After, a detail naming the tick and the setting",
				p, resp.header.Get("Retry-After"))
		}
		wantProblem(t, b.get(t, "/leases/"+job), http.StatusNotFound, api.CodeNotFound)

		now := api.FormatTime(before)
		l := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &now}))
		p = wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "fast", Tick: &ahead}), http.StatusConflict, api.CodeTickAhead)
		if p.Now == nil || p.Lease == nil || p.Lease.Token != l.Token {
			t.Errorf("tick_ahead of a held job: problem %+v, want now and the lease (token %d)", p, l.Token)
		}
	})
}
