package handlers_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestIdempotencyKey: a trigger with an Idempotency-Key is answered as the
// first was (its recorded answer, whatever became of the job since), for
// the key sent bare or as a structured-field string; the key with another
// body or job is 422 idempotency_key_reused; keys are the caller's own; a
// request that failed is forgotten, so its retry runs again.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, admin := mint(t, store, "admin", leaseapi.RoleAdmin, "*")
		_, other := mint(t, store, "other", leaseapi.RoleAdmin, "*")
		b := setup(t, store, defaultOptions())
		job, job2 := b.job("idem"), b.job("idem-2")
		for _, j := range []string{job, job2} {
			l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + j + "/acquire", body: `{"owner":"o"}`, header: admin}))
			wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + j + "/release",
				body: `{"owner":"o","token":` + fmt.Sprint(l.Token) + `}`, header: admin}))
		}
		with := func(h http.Header, key string) http.Header {
			out := h.Clone()
			out.Set("Idempotency-Key", key)
			return out
		}
		trigger := func(j, body string, h http.Header) response {
			t.Helper()
			return b.do(t, request{method: http.MethodPost, path: "/leases/" + j + "/trigger", body: body, header: h})
		}

		first := trigger(job, `{"reason":"r"}`, with(admin, "k-1"))
		l := wantLease(t, first)
		if l.OwedTick == nil {
			t.Fatalf("trigger: owes nothing")
		}
		// The job changes: the retry is still answered as the first was.
		wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job + "/trigger", header: admin}))
		for _, key := range []string{"k-1", `"k-1"`} {
			again := trigger(job, ` { "reason" : "r" } `, with(admin, key))
			if again.status != http.StatusOK || string(again.body) != string(first.body) {
				t.Errorf("retry with Idempotency-Key %s: got %d %s, want the first answer %s", key, again.status, again.body, first.body)
			}
		}
		if got := b.owed(t, admin, job); len(got.Owed) != 0 {
			t.Errorf("after the retries of a cancelled trigger: the job owes %+v, want nothing (no second run)", got.Owed)
		}

		// Another request with the key: refused, nothing done.
		for _, c := range []struct{ job, body string }{{job, `{}`}, {job, `{"reason":"other"}`}, {job2, `{"reason":"r"}`}} {
			p := wantProblem(t, trigger(c.job, c.body, with(admin, "k-1")), http.StatusUnprocessableEntity, api.CodeIdempotencyKeyReused)
			if p.Detail == "" {
				t.Errorf("422 without a detail")
			}
		}
		if got := b.owed(t, admin, job2); len(got.Owed) != 0 {
			t.Errorf("after a refused reuse on %s: the job owes %+v, want nothing", job2, got.Owed)
		}
		// Another credential's key of the same spelling is its own.
		if l := wantLease(t, trigger(job2, `{}`, with(other, "k-1"))); l.OwedTick == nil {
			t.Errorf("another credential's k-1: owes nothing, want a manual tick")
		}

		// A failed request is forgotten: paused, then resumed, the same
		// request runs.
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/pause", body: `{}`, header: admin}))
		wantProblem(t, trigger(job, `{}`, with(admin, "k-2")), http.StatusConflict, api.CodeJobPaused)
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/resume", body: `{}`, header: admin}))
		if l := wantLease(t, trigger(job, `{}`, with(admin, "k-2"))); l.OwedTick == nil {
			t.Errorf("the retry of a failed request: owes nothing, want a manual tick")
		}
	})
}

// TestIdempotencyKeyInFlight: while the first request of a key is being
// answered, the same request is 409 idempotency_key_in_flight and another
// one 422; of identical requests sent at once one runs and every other is
// answered alike or 409, and the job owes one manual tick.
func TestIdempotencyKeyInFlight(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		cred, admin := mint(t, store, "admin", leaseapi.RoleAdmin, "*")
		b := setup(t, store, defaultOptions())
		job := b.job("in-flight")
		l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"o"}`, header: admin}))
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release",
			body: `{"owner":"o","token":` + fmt.Sprint(l.Token) + `}`, header: admin}))
		header := admin.Clone()
		header.Set("Idempotency-Key", "held")

		// A first request in flight: its claim, as the handler makes it
		// (the fingerprint of the route, the job id and the reason).
		claim := &leaseapi.IdempotencyParams{Credential: cred.ID, Key: "held", Hold: time.Hour,
			Fingerprint: leaseapi.IdempotencyFingerprint("POST /leases/{jobId}/trigger", job, "")}
		if a, err := store.(leaseapi.IdempotencyStore).ClaimIdempotencyKey(t.Context(), claim); a != nil || err != nil {
			t.Fatalf("claim: %v %v", a, err)
		}
		trigger := func(body string) response {
			return b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/trigger", body: body, header: header})
		}
		wantProblem(t, trigger(`{}`), http.StatusConflict, api.CodeIdempotencyKeyInFlight)
		wantProblem(t, trigger(`{"reason":"x"}`), http.StatusUnprocessableEntity, api.CodeIdempotencyKeyReused)
		if got := b.owed(t, admin, job); len(got.Owed) != 0 {
			t.Errorf("while the key is in flight: the job owes %+v, want nothing", got.Owed)
		}

		// Identical requests at once.
		header.Set("Idempotency-Key", "at-once")
		const n = 8
		answers := make([]response, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				answers[i] = trigger(`{"reason":"once"}`)
			})
		}
		close(start)
		wg.Wait()
		var ok []string
		for _, a := range answers {
			switch {
			case a.status == http.StatusOK:
				ok = append(ok, string(a.body))
			case a.status == http.StatusConflict && a.problem(t).Code == api.CodeIdempotencyKeyInFlight:
			default:
				t.Errorf("a request at once: got %d %s, want 200 or 409 idempotency_key_in_flight", a.status, a.body)
			}
		}
		if len(ok) == 0 {
			t.Fatalf("identical requests at once: none answered 200")
		}
		for _, body := range ok[1:] {
			if body != ok[0] {
				t.Errorf("identical requests at once answered %s and %s, want one answer", ok[0], body)
			}
		}
		if got := b.owed(t, admin, job); len(got.Owed) != 1 {
			t.Errorf("after identical requests at once: the job owes %+v, want one manual tick", got.Owed)
		}
	})
}
