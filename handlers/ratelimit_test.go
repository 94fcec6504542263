package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestRateLimit: a credential beyond its rate gets 429 rate_limited with
// Retry-After and nothing is done; its heartbeats and releases are never
// limited; other credentials are not slowed by it; LEASEAPI_RATE_LIMIT is
// the rate of credentials without their own; guessing a known credential's
// secret is no faster than its rate.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		opts := defaultOptions()
		opts.RateLimit = 1 // one call a second, a bucket of one
		b := setup(t, store, opts)
		slowCred, slow := mint(t, store, "slow", leaseapi.RoleLease, "rl:")
		_, other := mint(t, store, "other", leaseapi.RoleLease, "rl:")
		fast := 1000.0
		fastCred, fastToken := leaseapi.NewCredential("fast", leaseapi.RoleLease, []string{"rl:"}, &fast)
		if err := store.(leaseapi.CredentialStore).CreateCredential(t.Context(), &fastCred); err != nil {
			t.Fatal(err)
		}
		acquire := func(job string, h http.Header) request {
			return request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"o","ttlMs":60000}`, header: h}
		}

		held := wantLease(t, b.do(t, acquire("rl:one", slow)))
		before := b.snapshot(t)
		resp := b.do(t, acquire("rl:two", slow))
		wantProblem(t, resp, http.StatusTooManyRequests, api.CodeRateLimited)
		if n, err := strconv.Atoi(resp.header.Get("Retry-After")); err != nil || n < 1 {
			t.Errorf("Retry-After %q, want whole seconds >= 1", resp.header.Get("Retry-After"))
		}
		if after := b.snapshot(t); !after.equal(before) {
			t.Error("a rate-limited acquire changed the store")
		}
		// The holder's heartbeats and release pass however many.
		for range 3 {
			wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/rl:one/heartbeat",
				body: `{"owner":"o","token":` + strconv.FormatInt(held.Token, 10) + `}`, header: slow}))
		}
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/rl:one/release",
			body: `{"owner":"o","token":` + strconv.FormatInt(held.Token, 10) + `}`, header: slow}))
		// Others have their own buckets: the default, or their own rate.
		wantLease(t, b.do(t, acquire("rl:three", other)))
		for i := range 5 {
			wantLease(t, b.do(t, acquire("rl:fast-"+strconv.Itoa(i), bearerHeader(fastToken))))
		}

		// Guessing: wrong secrets for slow's id are 401 until its rate is
		// spent, then 429, and slow's own calls are not affected by them.
		guess := bearerHeader(slowCred.ID + "." + strings.Repeat("A", 43))
		codes := map[int]int{}
		for range 5 {
			codes[b.do(t, request{method: http.MethodGet, path: "/leases/rl:one", header: guess}).status]++
		}
		if codes[http.StatusUnauthorized] < 1 || codes[http.StatusTooManyRequests] < 1 || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 5 {
			t.Errorf("five wrong guesses at once: got %v, want 401 first and then 429", codes)
		}
	})
}
