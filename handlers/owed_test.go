package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// The HTTP side of owed ticks: run now (trigger, its Idempotency-Key, its
// cancellation), POST /owed, the claim with an ordinary acquire, and the
// catch-up fields of an acquire; every request and answer checked against
// the spec by the harness.

func (b *testBundle) trigger(t *testing.T, job, body string, header http.Header) response {
	t.Helper()
	return b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/trigger", body: body, header: header})
}

func (b *testBundle) owed(t *testing.T, header http.Header, jobs ...string) api.OwedList {
	t.Helper()
	body, _ := json.Marshal(api.OwedRequest{Jobs: jobs})
	resp := b.do(t, request{method: http.MethodPost, path: "/owed", body: string(body), header: header})
	if resp.status != http.StatusOK {
		t.Fatalf("POST /owed: %d %s", resp.status, resp.body)
	}
	var l api.OwedList
	if err := json.Unmarshal(resp.body, &l); err != nil {
		t.Fatalf("POST /owed: %v", err)
	}
	return l
}

// TestRunNowOverHTTP: a trigger owes one manual tick, a retry with its
// Idempotency-Key answers that tick, POST /owed reports it, an acquire of
// exactly that tick claims it (its run says manual) and settles it, and
// the tick is never granted again.
func TestRunNowOverHTTP(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("run-now")
		hour := time.Now().UTC().Truncate(time.Hour)
		spec, tick := "@every 1h", api.FormatTime(hour)
		first := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a", Tick: &tick, Schedule: &spec}))
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "a", Token: first.Token}))

		key := http.Header{"Idempotency-Key": {"run-1"}}
		triggered := wantLease(t, b.trigger(t, job, `{"reason":"rerun the report"}`, key))
		if triggered.OwedTick == nil || triggered.OwedReason == nil || *triggered.OwedReason != leaseapi.TriggerManual {
			t.Fatalf("trigger: got owed %v %v, want a manual tick", triggered.OwedTick, triggered.OwedReason)
		}
		m := *triggered.OwedTick
		again := wantLease(t, b.trigger(t, job, `{"reason":"rerun the report"}`, key))
		if again.OwedTick == nil || !again.OwedTick.Equal(m.Time) {
			t.Errorf("trigger retried with its Idempotency-Key: got owed %v, want %s", again.OwedTick, m)
		}
		wantProblem(t, b.trigger(t, job, `{}`, key), http.StatusUnprocessableEntity, api.CodeIdempotencyKeyReused)
		o := b.owed(t, nil, job, b.job("unknown"))
		if len(o.Owed) != 1 || o.Owed[0].JobID != job || !o.Owed[0].Tick.Equal(m.Time) || o.Owed[0].Reason != leaseapi.TriggerManual ||
			o.Owed[0].TriggerReason == nil || *o.Owed[0].TriggerReason != "rerun the report" {
			t.Errorf("POST /owed: got %+v, want the manual tick %s with its reason", o.Owed, m)
		}

		claim := api.FormatTime(m.Time)
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: &tick}), http.StatusConflict, api.CodeTickDone)
		granted := wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "b", Tick: &claim}))
		if granted.Tick == nil || !granted.Tick.Equal(m.Time) || granted.OwedTick != nil || granted.OwedReason != nil {
			t.Errorf("the claim: got tick %v owed %v %v, want tick %s owing nothing", granted.Tick, granted.OwedTick, granted.OwedReason, m)
		}
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "c", Tick: &claim}), http.StatusConflict, api.CodeLeaseHeld)
		resp := b.get(t, "/leases/"+job+"/runs?limit=1")
		var runs api.RunList
		if err := json.Unmarshal(resp.body, &runs); err != nil || len(runs.Runs) != 1 || runs.Runs[0].Trigger != leaseapi.TriggerManual {
			t.Errorf("runs after the claim: %s, want the manual run first", resp.body)
		}
		wantLease(t, b.release(t, job, api.ReleaseRequest{Owner: "b", Token: granted.Token}))
		wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: "c", Tick: &claim}), http.StatusConflict, api.CodeTickDone)
		if o := b.owed(t, nil, job); len(o.Owed) != 0 {
			t.Errorf("POST /owed after the run: got %+v, want nothing", o.Owed)
		}

		// A new trigger, cancelled: owed no more.
		wantLease(t, b.trigger(t, job, `{}`, http.Header{"Idempotency-Key": {"run-2"}}))
		cancelled := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/trigger"}))
		if cancelled.OwedTick != nil {
			t.Errorf("DELETE /trigger: got owed %v, want nothing", cancelled.OwedTick)
		}
		wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/trigger"})) // owes nothing: as it is
	})
}

// TestRunNowBadInput: every bad trigger and POST /owed gets a precise 4xx
// and changes nothing.
func TestRunNowBadInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		job := b.job("bad")
		wantLease(t, b.acquire(t, job, api.AcquireRequest{Owner: "a"}))
		post := func(path, body string, header http.Header) response {
			return b.doInvalid(t, request{method: http.MethodPost, path: path, body: body, header: header})
		}
		for _, c := range []struct {
			name, path, body string
			header           http.Header
			status           int
			code, detail     string
		}{
			{"unknown job", "/leases/" + b.job("nope") + "/trigger", `{}`, nil, 404, api.CodeNotFound, ""},
			{"unknown field", "/leases/" + job + "/trigger", `{"why":"x"}`, nil, 400, api.CodeInvalidRequest, "why"},
			{"reason too long", "/leases/" + job + "/trigger", `{"reason":"` + strings.Repeat("r", 257) + `"}`, nil, 400, api.CodeInvalidRequest, "reason"},
			{"key too long", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {strings.Repeat("k", 257)}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"key not ASCII", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {"clé"}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"quoted key too long", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {`"` + strings.Repeat("k", 257) + `"`}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"key unterminated", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {`"abc`}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"key quoted empty", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {`""`}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"key bad escape", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {`"a\x"`}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"key after quote", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {`"a";p=1`}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"two keys", "/leases/" + job + "/trigger", `{}`, http.Header{"Idempotency-Key": {"a", "b"}}, 400, api.CodeInvalidRequest, "Idempotency-Key"},
			{"no jobs", "/owed", `{"jobs":[]}`, nil, 400, api.CodeInvalidRequest, "jobs"},
			{"jobs missing", "/owed", `{}`, nil, 400, api.CodeInvalidRequest, "jobs"},
			{"1,001 jobs", "/owed", manyJobs(1001), nil, 400, api.CodeInvalidRequest, "jobs"},
			{"a bad id", "/owed", `{"jobs":["a b"]}`, nil, 400, api.CodeInvalidRequest, "jobs"},
			{"too large", "/owed", `{"jobs":["` + strings.Repeat("j", api.MaxOwedBodyBytes) + `"]}`, nil, 413, api.CodePayloadTooLarge, "262144"},
		} {
			p := wantProblem(t, post(c.path, c.body, c.header), c.status, c.code)
			if !strings.Contains(p.Detail, c.detail) {
				t.Errorf("%s: detail %q does not name %q", c.name, p.Detail, c.detail)
			}
		}
		if got := b.owed(t, nil, job); len(got.Owed) != 0 {
			t.Errorf("after the bad triggers: the job owes %+v, want nothing", got.Owed)
		}
		if o := b.owed(t, nil, strings.Split(strings.Repeat(job+",", 1000), ",")[:1000]...); len(o.Owed) != 0 {
			t.Errorf("POST /owed of 1,000 ids: got %+v, want nothing", o.Owed)
		}

		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`}))
		p := wantProblem(t, post("/leases/"+job+"/trigger", `{}`, nil), http.StatusConflict, api.CodeJobPaused)
		if p.Lease == nil || !p.Lease.Paused || p.Lease.OwedTick != nil {
			t.Errorf("trigger of a paused job: the problem's lease is %+v, want paused, owing nothing", p.Lease)
		}

		spec := "@every 1h"
		for _, c := range []struct{ name, body, field string }{
			{"unknown catchUp", `{"owner":"a","schedule":"@every 1h","catchUp":"all"}`, "catchUp"},
			{"empty catchUp", `{"owner":"a","schedule":"@every 1h","catchUp":""}`, "catchUp"},
			{"window too short", `{"owner":"a","schedule":"@every 1h","catchUp":"latest","catchUpWindowMs":59999}`, "catchUpWindowMs"},
			{"window zero", `{"owner":"a","schedule":"@every 1h","catchUp":"latest","catchUpWindowMs":0}`, "catchUpWindowMs"},
			{"window too long", `{"owner":"a","schedule":"@every 1h","catchUp":"latest","catchUpWindowMs":604800001}`, "catchUpWindowMs"},
			{"window without catchUp", `{"owner":"a","schedule":"@every 1h","catchUpWindowMs":60000}`, "catchUpWindowMs"},
			{"catchUp without schedule", `{"owner":"a","catchUp":"latest"}`, "catchUp"},
		} {
			p := wantProblem(t, post("/leases/"+b.job("catch-up")+"/acquire", c.body, nil), http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(p.Detail, c.field) {
				t.Errorf("%s: detail %q does not name %s", c.name, p.Detail, c.field)
			}
		}
		latest, window := "latest", int64(2*time.Hour/time.Millisecond)
		l := wantLease(t, b.acquire(t, b.job("catch-up"), api.AcquireRequest{Owner: "a", Schedule: &spec, CatchUp: &latest, CatchUpWindowMs: &window}))
		if l.CatchUp != leaseapi.CatchUpLatest || l.CatchUpWindowMs != window {
			t.Errorf("acquire with catch-up latest, 2 h: got %q %d", l.CatchUp, l.CatchUpWindowMs)
		}
	})
}

// manyJobs is a POST /owed body naming n distinct jobs.
func manyJobs(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%d", i)
	}
	b, _ := json.Marshal(api.OwedRequest{Jobs: ids})
	return string(b)
}

// TestOwedScopes: POST /owed naming a job outside the caller's scopes is
// 403, whether or not the job exists; a trigger needs role admin.
func TestOwedScopes(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	adminCred, admin := mint(t, store, "admin", leaseapi.RoleAdmin, "*")
	_, reader := mint(t, store, "reader", leaseapi.RoleRead, "team-a:")
	b := setup(t, store, defaultOptions())
	for _, job := range []string{"team-a:report", "team-b:report"} {
		resp := b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"o"}`, header: admin})
		l := wantLease(t, resp)
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release",
			body: fmt.Sprintf(`{"owner":"o","token":%d}`, l.Token), header: admin}))
		wantLease(t, b.trigger(t, job, `{}`, admin))
	}
	wantProblem(t, b.trigger(t, "team-a:report", `{}`, reader), http.StatusForbidden, api.CodeForbidden)
	o := b.owed(t, reader, "team-a:report")
	if len(o.Owed) != 1 || o.Owed[0].JobID != "team-a:report" || o.Owed[0].TriggeredBy == nil || *o.Owed[0].TriggeredBy != "admin ("+adminCred.ID+")" {
		t.Errorf("POST /owed by a reader of team-a: got %+v, want team-a:report, triggered by admin (its id)", o.Owed)
	}
	for _, body := range []string{`{"jobs":["team-a:report","team-b:report"]}`, `{"jobs":["team-b:report"]}`, `{"jobs":["team-b:nothing"]}`} {
		p := wantProblem(t, b.do(t, request{method: http.MethodPost, path: "/owed", body: body, header: reader}), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(p.Detail, "scopes (team-a:)") {
			t.Errorf("POST /owed %s: detail %q does not name the scopes", body, p.Detail)
		}
	}
}

// TestRunNowAcrossInstances: two instances on one database; a manual tick
// triggered on one is granted to exactly one of eight replicas spread over
// both, and once released succeeded to none.
func TestRunNowAcrossInstances(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, reopen func(*testing.T) leaseapi.Store) {
		one := setup(t, store, defaultOptions())
		two := setup(t, reopen(t), defaultOptions())
		instances := []*testBundle{one, two}
		job := one.job("run-now-shared")
		wantLease(t, one.release(t, job, api.ReleaseRequest{Owner: "setup",
			Token: wantLease(t, one.acquire(t, job, api.AcquireRequest{Owner: "setup"})).Token}))
		triggered := wantLease(t, one.trigger(t, job, `{}`, nil))
		if triggered.OwedTick == nil {
			t.Fatalf("trigger: no owed tick")
		}
		claim := api.FormatTime(triggered.OwedTick.Time)
		if o := two.owed(t, nil, job); len(o.Owed) != 1 || !o.Owed[0].Tick.Equal(triggered.OwedTick.Time) {
			t.Fatalf("POST /owed on the other instance: got %+v, want the manual tick %s", o.Owed, claim)
		}

		const replicas = 8
		answers := make([]response, replicas)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range replicas {
			wg.Go(func() {
				<-start
				answers[i] = instances[i%2].acquire(t, job, api.AcquireRequest{Owner: fmt.Sprint("replica-", i), Tick: &claim})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, a := range answers {
			switch {
			case a.status == http.StatusOK && winner >= 0:
				t.Fatalf("the manual tick %s was granted to replica-%d and replica-%d", claim, winner, i)
			case a.status == http.StatusOK:
				winner = i
			case a.status == http.StatusConflict:
			default:
				t.Errorf("replica-%d: got %d %s, want 200 or 409", i, a.status, a.body)
			}
		}
		if winner < 0 {
			t.Fatalf("the manual tick %s was granted to none of %d replicas", claim, replicas)
		}
		won := wantLease(t, answers[winner])
		wantLease(t, instances[winner%2].release(t, job, api.ReleaseRequest{Owner: won.Owner, Token: won.Token}))
		for i, b := range instances {
			wantProblem(t, b.acquire(t, job, api.AcquireRequest{Owner: fmt.Sprint("late-", i), Tick: &claim}),
				http.StatusConflict, api.CodeTickDone)
		}
	})
}
