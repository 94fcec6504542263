package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/api"
)

// TestAuth: with tokens configured, /leases needs a valid bearer token
// (401 otherwise), DELETE needs an admin token (403 otherwise), refusals
// leave the store unchanged, and the operations endpoints stay open.
func TestAuth(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		opts := defaultOptions()
		opts.APITokens = []string{"api-token-1", "api-token-2"}
		opts.AdminTokens = []string{"admin-token"}
		b := setup(t, open(t), opts)
		job := b.job("auth")
		bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

		acquire := request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"a"}`}
		with := func(r request, h http.Header) request { r.header = h; return r }
		wantLease(t, b.do(t, with(acquire, bearer("api-token-1"))))
		before := b.snapshot(t)

		for _, tc := range []struct {
			name   string
			header string
		}{
			{"Missing", ""},
			{"Basic", "Basic YXBpLXRva2VuLTE6"},
			{"SchemeOnly", "Bearer"},
			{"EmptyToken", "Bearer "},
			{"DoubleSpace", "Bearer  api-token-1"},
			{"WrongToken", "Bearer api-token-3"},
			{"TokenPrefix", "Bearer api-token"},
			{"TokenExtended", "Bearer api-token-11"},
			{"RawToken", "api-token-1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, req := range []request{
					with(acquire, http.Header{"Authorization": {tc.header}}),
					{method: http.MethodGet, path: "/leases/" + job, header: http.Header{"Authorization": {tc.header}}},
					{method: http.MethodGet, path: "/leases", header: http.Header{"Authorization": {tc.header}}},
					{method: http.MethodDelete, path: "/leases/" + job, header: http.Header{"Authorization": {tc.header}}},
				} {
					resp := b.do(t, req)
					wantProblem(t, resp, http.StatusUnauthorized, api.CodeUnauthorized)
					if got := resp.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
						t.Errorf("WWW-Authenticate: got %q, want Bearer…", got)
					}
				}
				if after := b.snapshot(t); !after.equal(before) {
					t.Fatal("the store changed")
				}
			})
		}

		t.Run("APITokenCannotRevoke", func(t *testing.T) {
			for _, token := range []string{"api-token-1", "api-token-2"} {
				wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job, header: bearer(token)}),
					http.StatusForbidden, api.CodeForbidden)
			}
			if after := b.snapshot(t); !after.equal(before) {
				t.Fatal("the store changed")
			}
		})

		t.Run("Valid", func(t *testing.T) {
			wantLease(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + job, header: bearer("api-token-2")}))
			// The scheme is case-insensitive (RFC 9110).
			wantLease(t, b.do(t, request{method: http.MethodGet, path: "/leases/" + job, header: http.Header{"Authorization": {"bearer api-token-1"}}}))
			// An admin token is also an API token.
			wantLease(t, b.do(t, with(acquire, bearer("admin-token"))))
			rev := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/" + job, header: bearer("admin-token")}))
			if rev.State != "revoked" {
				t.Errorf("revoke with the admin token: %+v", rev)
			}
		})

		t.Run("OperationsOpen", func(t *testing.T) {
			for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
				if resp := b.get(t, path); resp.status != http.StatusOK {
					t.Errorf("%s without a token: %d", path, resp.status)
				}
			}
		})
	})
}
