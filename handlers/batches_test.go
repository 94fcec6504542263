package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

func (b *testBundle) acquireBatch(t *testing.T, req api.AcquireBatchRequest, h http.Header) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/acquire", body: jsonBody(t, req), header: h})
}

func (b *testBundle) heartbeatBatch(t *testing.T, req api.HeartbeatBatchRequest, h http.Header) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/heartbeat", body: jsonBody(t, req), header: h})
}

// wantResults checks a 200 batch answer with one result per job of jobs,
// in that order, each a lease or a problem consistent with its status, and
// returns the results.
func wantResults(t *testing.T, resp response, jobs ...string) []api.BatchResult {
	t.Helper()
	if resp.status != http.StatusOK {
		t.Fatalf("status: got %d, want 200\n%s", resp.status, resp.body)
	}
	var got api.BatchResponse
	if err := json.Unmarshal(resp.body, &got); err != nil {
		t.Fatalf("decode batch: %v\n%s", err, resp.body)
	}
	if len(got.Results) != len(jobs) {
		t.Fatalf("%d results for %d items\n%s", len(got.Results), len(jobs), resp.body)
	}
	for i, res := range got.Results {
		if res.JobID != jobs[i] {
			t.Errorf("results[%d] is job %s, want %s (item order)", i, res.JobID, jobs[i])
		}
		ok := res.Status == http.StatusOK
		if ok != (res.Lease != nil) || ok == (res.Problem != nil) {
			t.Errorf("results[%d]: status %d with lease %v and problem %v", i, res.Status, res.Lease != nil, res.Problem != nil)
		}
		if p := res.Problem; p != nil && (p.Status != res.Status || p.Type != api.ProblemTypePrefix+p.Code || p.Title == "" || p.Detail == "") {
			t.Errorf("results[%d]: inconsistent problem for status %d: %+v", i, res.Status, p)
		}
	}
	return got.Results
}

// wantItemProblem checks that res is the problem of status and code, and
// returns it.
func wantItemProblem(t *testing.T, res api.BatchResult, status int, code string) api.Problem {
	t.Helper()
	if res.Status != status || res.Problem == nil || res.Problem.Code != code {
		t.Fatalf("%s: got status %d, problem %+v; want %d %s", res.JobID, res.Status, res.Problem, status, code)
	}
	return *res.Problem
}

func wantItemLease(t *testing.T, res api.BatchResult) api.Lease {
	t.Helper()
	if res.Status != http.StatusOK || res.Lease == nil {
		t.Fatalf("%s: got status %d, problem %+v; want a lease", res.JobID, res.Status, res.Problem)
	}
	return *res.Lease
}

// sameProblem: an item's problem is the problem its single call answered,
// lease included.
func sameProblem(t *testing.T, item api.Problem, single response) {
	t.Helper()
	p := single.problem(t)
	if item.Status != p.Status || item.Code != p.Code || item.Detail != p.Detail {
		t.Errorf("item answered %d %s %q, its single call %d %s %q", item.Status, item.Code, item.Detail, p.Status, p.Code, p.Detail)
	}
	if (item.Lease == nil) != (p.Lease == nil) || item.Lease != nil && (item.Lease.Token != p.Lease.Token || item.Lease.Owner != p.Lease.Owner) {
		t.Errorf("item's problem carries lease %+v, its single call's %+v", item.Lease, p.Lease)
	}
}

// storeCalls is how many store calls of operation op
// leaseapi_store_duration_seconds timed.
func (b *testBundle) storeCalls(t *testing.T, op string) uint64 {
	t.Helper()
	families, err := b.registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != "leaseapi_store_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "operation" && lp.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// TestAcquireBatch: each item of POST /acquire is decided as its single
// acquire (a grant, lease_held and tick_done with the lease, a 400 for an
// invalid item), answered in item order; an item's own fields win over the
// defaults, and an item that sends nearestTick takes no default tick; the
// batch sent again is an idempotent retry of every grant.
func TestAcquireBatch(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		tick := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
		earlier := tick.Add(-time.Minute)
		fresh, held, done, invalid, own, nearest := b.job("fresh"), b.job("held"), b.job("done"), b.job("invalid"), b.job("own"), b.job("nearest")
		// A job whose row exists and is free: on Postgres a plain grant of
		// the batched grant statements, not a single acquire.
		free := b.job("free")
		f := wantLease(t, b.acquire(t, free, api.AcquireRequest{Owner: "b", Tick: ptr(api.FormatTime(earlier))}))
		wantLease(t, b.release(t, free, api.ReleaseRequest{Owner: "b", Token: f.Token}))

		wantLease(t, b.acquire(t, held, api.AcquireRequest{Owner: "other", TTLMs: ptr[int64](60000)}))
		d := wantLease(t, b.acquire(t, done, api.AcquireRequest{Owner: "a", Tick: ptr(api.FormatTime(tick))}))
		wantLease(t, b.release(t, done, api.ReleaseRequest{Owner: "a", Token: d.Token}))

		batch := api.AcquireBatchRequest{
			Owner: ptr("a"), TTLMs: ptr[int64](60000), Tick: ptr(api.FormatTime(tick)),
			Items: []api.AcquireBatchItem{
				{JobID: fresh},
				{JobID: held},
				{JobID: done},
				{JobID: invalid, TTLMs: ptr[int64](10)},
				{JobID: own, Owner: ptr("b"), TTLMs: ptr[int64](120000), Tick: ptr(api.FormatTime(earlier))},
				{JobID: nearest, NearestTick: ptr(true), Schedule: ptr("@every 1m")},
				{JobID: free},
			},
		}
		res := wantResults(t, b.acquireBatch(t, batch, nil), fresh, held, done, invalid, own, nearest, free)

		granted := wantItemLease(t, res[0])
		if granted.Owner != "a" || granted.TTLMs != 60000 || granted.Tick == nil || !granted.Tick.Equal(tick) || granted.State != leaseapi.StateHeld {
			t.Errorf("the defaults' grant: %+v", granted)
		}
		sameProblem(t, wantItemProblem(t, res[1], http.StatusConflict, api.CodeLeaseHeld),
			b.acquire(t, held, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](60000), Tick: ptr(api.FormatTime(tick))}))
		if res[1].RetryAfter == nil || *res[1].RetryAfter < 1 || res[2].RetryAfter != nil {
			t.Errorf("retryAfter: lease_held %v, tick_done %v; want the held item's Retry-After seconds, none for tick_done", res[1].RetryAfter, res[2].RetryAfter)
		}
		sameProblem(t, wantItemProblem(t, res[2], http.StatusConflict, api.CodeTickDone),
			b.acquire(t, done, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](60000), Tick: ptr(api.FormatTime(tick))}))
		sameProblem(t, wantItemProblem(t, res[3], http.StatusBadRequest, api.CodeInvalidRequest),
			b.acquire(t, invalid, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](10), Tick: ptr(api.FormatTime(tick))}))
		mine := wantItemLease(t, res[4])
		if mine.Owner != "b" || mine.TTLMs != 120000 || mine.Tick == nil || !mine.Tick.Equal(earlier) {
			t.Errorf("the item's own fields lost to the defaults: %+v", mine)
		}
		// With the default tick as well, nearestTick would be a 400.
		near := wantItemLease(t, res[5])
		if near.Owner != "a" || near.Tick == nil || near.Schedule == nil || *near.Schedule != "@every 1m" {
			t.Errorf("the nearestTick grant: %+v", near)
		}
		freed := wantItemLease(t, res[6])
		if freed.Owner != "a" || freed.Token != f.Token+1 || freed.Tick == nil || !freed.Tick.Equal(tick) {
			t.Errorf("the grant of a free job: %+v", freed)
		}
		if got := wantLease(t, b.get(t, "/leases/"+fresh)); got.Token != granted.Token || got.Owner != "a" {
			t.Errorf("the granted job reads back as %+v", got)
		}
		wantProblem(t, b.get(t, "/leases/"+invalid), http.StatusNotFound, api.CodeNotFound)

		// Sent again, every grant is the holder's idempotent retry.
		again := wantResults(t, b.acquireBatch(t, batch, nil), fresh, held, done, invalid, own, nearest, free)
		for i, first := range []api.Lease{granted, mine, near, freed} {
			k := []int{0, 4, 5, 6}[i]
			if l := wantItemLease(t, again[k]); l.Token != first.Token {
				t.Errorf("%s: retried, token %d, first %d", first.JobID, l.Token, first.Token)
			}
		}
	})
}

// TestBatchRefused: what no item can be answered for refuses the whole
// request, and stores nothing: no items or more than
// leaseapi.MaxBatchItems, a job named twice, an invalid jobId, an unknown
// field inside an item (named by its index), a body over 1 MiB (413,
// unread). A body far over the 64 KiB of single calls but within 1 MiB is
// served: MaxBatchItems acquires of the longest job ids.
func TestBatchRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	job := b.job("x")
	wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))
	before := b.snapshot(t)
	items := func(n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf(`{"jobId":%q,"token":1}`, b.job(fmt.Sprint(i)))
		}
		return "[" + strings.Join(ids, ",") + "]"
	}
	for _, path := range []string{"/acquire", "/heartbeat"} {
		for _, c := range []struct {
			name, body, detail string
			validBySpec        bool
		}{
			{"NoItems", `{"owner":"a","items":[]}`, "items must hold 1 to 1000 items", false},
			{"ItemsMissing", `{"owner":"a"}`, "items must hold 1 to 1000 items", false},
			{"TooMany", `{"owner":"a","items":` + items(leaseapi.MaxBatchItems+1) + `}`, "send at most 1000", false},
			{"Twice", `{"owner":"a","items":[{"jobId":"` + job + `","token":1},{"jobId":"` + b.job("y") + `","token":1},{"jobId":"` + job + `","token":1}]}`,
				"items[0] and items[2] are both job " + job, true},
			{"InvalidJobID", `{"owner":"a","items":[{"jobId":"` + job + `","token":1},{"jobId":"-x","token":1}]}`, "items[1].jobId", false},
			{"UnknownItemField", `{"owner":"a","items":[{"jobId":"` + job + `","token":1},{"jobId":"` + b.job("y") + `","token":1,"ownr":"a"}]}`, "items[1]", false},
		} {
			if path == "/acquire" {
				c.body = strings.ReplaceAll(c.body, `,"token":1`, "")
			}
			req := request{method: http.MethodPost, path: path, body: c.body}
			var resp response
			if c.validBySpec {
				resp = b.do(t, req)
			} else {
				resp = b.doInvalid(t, req)
			}
			if p := wantProblem(t, resp, http.StatusBadRequest, api.CodeInvalidRequest); !strings.Contains(p.Detail, c.detail) {
				t.Errorf("%s %s: detail %q, want it to say %q", path, c.name, p.Detail, c.detail)
			}
		}
		huge := `{"owner":"a","items":[{"jobId":"` + job + `","owner":"` + strings.Repeat("a", api.MaxBatchBodyBytes) + `"}]}`
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: path, body: huge}), http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
	}
	if after := b.snapshot(t); !after.equal(before) {
		t.Error("a refused batch changed the store")
	}

	long := make([]string, leaseapi.MaxBatchItems)
	for i := range long {
		long[i] = b.job(fmt.Sprintf("%0*d", 128-len(b.job("")), i))
	}
	// Each item is refused for its own TTL, so that the body's size, not
	// the store's speed, is what this answer tests.
	req := api.AcquireBatchRequest{Owner: ptr("a"), TTLMs: ptr[int64](1)}
	for _, id := range long {
		req.Items = append(req.Items, api.AcquireBatchItem{JobID: id})
	}
	body := jsonBody(t, req)
	if len(body) <= 64<<10 || len(body) > api.MaxBatchBodyBytes {
		t.Fatalf("a body of %d bytes does not test the batch's own limit", len(body))
	}
	for _, res := range wantResults(t, b.do(t, request{method: http.MethodPost, path: "/acquire", body: body}), long...) {
		if p := wantItemProblem(t, res, http.StatusBadRequest, api.CodeInvalidRequest); !strings.Contains(p.Detail, "ttlMs") {
			t.Errorf("%s: detail %q, want the item's ttlMs refused", res.JobID, p.Detail)
		}
	}
}

// TestHeartbeatBatch: each item of POST /heartbeat is decided as its single
// heartbeat: renewed (with the defaults, or the item's own owner and TTL),
// lease_lost with the lease, not_found, a 400 for an invalid item.
func TestHeartbeatBatch(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		mine, lost, theirs, unknown, invalid := b.job("mine"), b.job("lost"), b.job("theirs"), b.job("unknown"), b.job("invalid")
		m := wantLease(t, b.acquire(t, mine, api.AcquireRequest{Owner: "a"}))
		l := wantLease(t, b.acquire(t, lost, api.AcquireRequest{Owner: "a"}))
		o := wantLease(t, b.acquire(t, theirs, api.AcquireRequest{Owner: "b"}))
		i := wantLease(t, b.acquire(t, invalid, api.AcquireRequest{Owner: "a"}))

		res := wantResults(t, b.heartbeatBatch(t, api.HeartbeatBatchRequest{
			Owner: ptr("a"), TTLMs: ptr[int64](90000),
			Items: []api.HeartbeatBatchItem{
				{JobID: mine, Token: m.Token},
				{JobID: lost, Token: l.Token + 1},
				{JobID: theirs, Token: o.Token, Owner: ptr("b"), TTLMs: ptr[int64](120000)},
				{JobID: unknown, Token: 1},
				{JobID: invalid, Token: i.Token, TTLMs: ptr[int64](10)},
			},
		}, nil), mine, lost, theirs, unknown, invalid)

		// Counted per item, timed once per batch.
		for result, want := range map[string]float64{"ok": 2, "lost": 1, "not_found": 1} {
			if got := b.counter(t, "leaseapi_heartbeat_total", map[string]string{"result": result}); got != want {
				t.Errorf("leaseapi_heartbeat_total{result=%q}: got %v, want %v", result, got, want)
			}
		}
		if got := b.storeCalls(t, "heartbeat_batch"); got != 1 {
			t.Errorf("store calls timed as heartbeat_batch: got %d, want 1", got)
		}
		if got := wantItemLease(t, res[0]); got.Token != m.Token || got.TTLMs != 90000 {
			t.Errorf("renewed with the defaults: %+v", got)
		}
		sameProblem(t, wantItemProblem(t, res[1], http.StatusConflict, api.CodeLeaseLost),
			b.heartbeat(t, lost, api.HeartbeatRequest{Owner: "a", Token: l.Token + 1, TTLMs: ptr[int64](90000)}))
		if got := wantItemLease(t, res[2]); got.Owner != "b" || got.TTLMs != 120000 {
			t.Errorf("renewed with the item's own owner and TTL: %+v", got)
		}
		sameProblem(t, wantItemProblem(t, res[3], http.StatusNotFound, api.CodeNotFound),
			b.heartbeat(t, unknown, api.HeartbeatRequest{Owner: "a", Token: 1, TTLMs: ptr[int64](90000)}))
		sameProblem(t, wantItemProblem(t, res[4], http.StatusBadRequest, api.CodeInvalidRequest),
			b.heartbeat(t, invalid, api.HeartbeatRequest{Owner: "a", Token: i.Token, TTLMs: ptr[int64](10)}))
		if got := wantLease(t, b.get(t, "/leases/"+invalid)); got.TTLMs != i.TTLMs || !got.ExpiresAt.Equal(i.ExpiresAt.Time) {
			t.Errorf("the invalid item renewed the lease: %+v", got)
		}
	})
}

// TestBatchScopesAndRate: a credential's scopes are checked per item (a job
// or a group outside them fails its item with the single call's answer, not
// the batch), and its rate per item: a credential of ratePerSecond 3 gets
// three items decided and the rest 429 rate_limited, undecided; its
// heartbeats are never limited.
func TestBatchScopesAndRate(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		_, teamA := mint(t, store, "a", leaseapi.RoleLease, "team-a:")
		three := 3.0
		rated, ratedToken := leaseapi.NewCredential("rated", leaseapi.RoleLease, []string{"team-a:"}, &three)
		if err := store.(leaseapi.CredentialStore).CreateCredential(t.Context(), &rated); err != nil {
			t.Fatal(err)
		}
		b := setup(t, store, defaultOptions())
		for _, g := range []string{"team-a:g", "team-b.g"} {
			wantGroup(t, b.putGroup(t, g, 1, root))
		}

		jobs := []string{"team-a:one", "team-b.two", "team-a:three", "team-a:four"}
		res := wantResults(t, b.acquireBatch(t, api.AcquireBatchRequest{Owner: ptr("o"), Items: []api.AcquireBatchItem{
			{JobID: jobs[0]},
			{JobID: jobs[1]},
			{JobID: jobs[2], Group: ptr("team-a:g")},
			{JobID: jobs[3], Group: ptr("team-b.g")},
		}}, teamA), jobs...)
		wantItemLease(t, res[0])
		out := wantItemProblem(t, res[1], http.StatusForbidden, api.CodeForbidden)
		sameProblem(t, out, b.do(t, request{method: http.MethodPost, path: "/leases/" + jobs[1] + "/acquire", body: `{"owner":"o"}`, header: teamA}))
		if !strings.Contains(out.Detail, "team-a:") {
			t.Errorf("out of scope: detail %q does not name the caller's scopes", out.Detail)
		}
		if got := wantItemLease(t, res[2]); got.Group == nil || *got.Group != "team-a:g" {
			t.Errorf("the grant in a group in scope: %+v", got)
		}
		sameProblem(t, wantItemProblem(t, res[3], http.StatusBadRequest, api.CodeInvalidRequest),
			b.do(t, request{method: http.MethodPost, path: "/leases/" + jobs[3] + "/acquire", body: `{"owner":"o","group":"team-b.g"}`, header: teamA}))
		wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + jobs[1], header: root}), http.StatusNotFound, api.CodeNotFound)
		theirs := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + jobs[1] + "/acquire", body: `{"owner":"o"}`, header: root}))
		hbs := wantResults(t, b.heartbeatBatch(t, api.HeartbeatBatchRequest{Owner: ptr("o"), Items: []api.HeartbeatBatchItem{
			{JobID: jobs[0], Token: res[0].Lease.Token},
			{JobID: jobs[1], Token: theirs.Token},
		}}, teamA), jobs[:2]...)
		wantItemLease(t, hbs[0])
		sameProblem(t, wantItemProblem(t, hbs[1], http.StatusForbidden, api.CodeForbidden),
			b.do(t, request{method: http.MethodPost, path: "/leases/" + jobs[1] + "/heartbeat", body: fmt.Sprintf(`{"owner":"o","token":%d}`, theirs.Token), header: teamA}))

		ratedJobs := []string{"team-a:r0", "team-a:r1", "team-a:r2", "team-a:r3", "team-a:r4"}
		req := api.AcquireBatchRequest{Owner: ptr("o")}
		for _, id := range ratedJobs {
			req.Items = append(req.Items, api.AcquireBatchItem{JobID: id})
		}
		res = wantResults(t, b.acquireBatch(t, req, bearerHeader(ratedToken)), ratedJobs...)
		hb := api.HeartbeatBatchRequest{Owner: ptr("o")}
		for i, r := range res {
			if i < 3 {
				hb.Items = append(hb.Items, api.HeartbeatBatchItem{JobID: r.JobID, Token: wantItemLease(t, r).Token})
				continue
			}
			wantItemProblem(t, r, http.StatusTooManyRequests, api.CodeRateLimited)
			if r.RetryAfter == nil || *r.RetryAfter < 1 {
				t.Errorf("%s: rate_limited without retryAfter", r.JobID)
			}
			wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + r.JobID, header: root}), http.StatusNotFound, api.CodeNotFound)
		}
		for range 2 {
			for _, r := range wantResults(t, b.heartbeatBatch(t, hb, bearerHeader(ratedToken)), ratedJobs[:3]...) {
				wantItemLease(t, r)
			}
		}
	})
}
