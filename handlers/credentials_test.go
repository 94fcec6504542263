package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
)

// TestCredentialNamesPerTeam: a credential's name is unique within the
// same scopes only, so creating one never tells a team of another's: team
// B may name a credential as team A did; the same name with the same
// scopes is 409, and the creator can see that credential.
func TestCredentialNamesPerTeam(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, aAdmin := mint(t, store, "a-admin", leaseapi.RoleAdmin, "team-a:")
		_, bAdmin := mint(t, store, "b-admin", leaseapi.RoleAdmin, "team-b:")
		b := setup(t, store, defaultOptions())
		create := func(h http.Header, body string) response {
			return b.do(t, request{method: http.MethodPost, path: "/credentials", body: body, header: h})
		}
		if resp := create(aAdmin, `{"name":"ci","role":"lease","scopes":["team-a:"]}`); resp.status != http.StatusCreated {
			t.Fatalf("team A creates ci: %d %s", resp.status, resp.body)
		}
		if resp := create(bAdmin, `{"name":"ci","role":"lease","scopes":["team-b:"]}`); resp.status != http.StatusCreated {
			t.Errorf("team B creates ci, a name team A uses: got %d %s, want 201", resp.status, resp.body)
		}
		// A's narrower scope is another credential too.
		if resp := create(aAdmin, `{"name":"ci","role":"read","scopes":["team-a:nightly."]}`); resp.status != http.StatusCreated {
			t.Errorf("team A creates ci in a narrower scope: got %d %s, want 201", resp.status, resp.body)
		}
		p := wantProblem(t, create(aAdmin, `{"name":"ci","role":"read","scopes":["team-a:"]}`), http.StatusConflict, api.CodeCredentialExists)
		if !strings.Contains(p.Detail, "scopes") {
			t.Errorf("409 detail %q does not say the name is taken within these scopes", p.Detail)
		}
		// The 409 names a credential A can see: its list holds it.
		var list api.CredentialList
		if err := json.Unmarshal(b.do(t, request{method: http.MethodGet, path: "/credentials", header: aAdmin}).body, &list); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range list.Credentials {
			if c.Name == "ci" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("team A lists %d credentials named ci, want its 2", n)
		}
	})
}

// TestCredentialRateNeverAboveCreator: a credential never gets a higher
// rate than its creator: under a limited creator an omitted ratePerSecond
// is the creator's, a higher one or 0 (no limit) is 403 naming the
// creator's rate; a creator on the server's default passes the default on.
func TestCredentialRateNeverAboveCreator(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	token := mintAdmin(t, store, "limited", new(10.0))
	unlimitedToken := mintAdmin(t, store, "unlimited", new(0.0))
	defaultToken := mintAdmin(t, store, "on-default", nil)
	opts := defaultOptions()
	opts.RateLimit = 1000 // high enough that these calls are never limited
	b := setup(t, store, opts)
	create := func(token, body string) response {
		return b.do(t, request{method: http.MethodPost, path: "/credentials", body: body, header: bearerHeader(token)})
	}
	rateOf := func(resp response) *float64 {
		t.Helper()
		if resp.status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.status, resp.body)
		}
		var c api.CreatedCredential
		if err := json.Unmarshal(resp.body, &c); err != nil {
			t.Fatal(err)
		}
		return c.RatePerSecond
	}

	if got := rateOf(create(token, `{"name":"child-omitted","role":"read","scopes":["*"]}`)); got == nil || *got != 10 {
		t.Errorf("omitted under a creator of 10/s: got %v, want 10", got)
	}
	if got := rateOf(create(token, `{"name":"child-lower","role":"read","scopes":["*"],"ratePerSecond":2.5}`)); got == nil || *got != 2.5 {
		t.Errorf("2.5 under a creator of 10/s: got %v, want 2.5", got)
	}
	if got := rateOf(create(token, `{"name":"child-equal","role":"read","scopes":["*"],"ratePerSecond":10}`)); got == nil || *got != 10 {
		t.Errorf("10 under a creator of 10/s: got %v, want 10", got)
	}
	for _, rate := range []string{"10.5", "1000000", "0"} {
		p := wantProblem(t, create(token, `{"name":"child-high","role":"read","scopes":["*"],"ratePerSecond":`+rate+`}`), http.StatusForbidden, api.CodeForbidden)
		if !strings.Contains(p.Detail, "own rate of 10 calls per second") || !strings.Contains(p.Detail, "ratePerSecond "+rate) {
			t.Errorf("ratePerSecond %s under 10/s: detail %q does not name both rates", rate, p.Detail)
		}
	}
	// A creator on the default (1000/s): an omitted rate stays the
	// default; above it is refused.
	if got := rateOf(create(defaultToken, `{"name":"child-default","role":"read","scopes":["*"]}`)); got != nil {
		t.Errorf("omitted under a creator on the default: got %v, want the default (null)", *got)
	}
	wantProblem(t, create(defaultToken, `{"name":"child-default-high","role":"read","scopes":["*"],"ratePerSecond":1001}`), http.StatusForbidden, api.CodeForbidden)
	// An unlimited creator may give any rate, or none.
	if got := rateOf(create(unlimitedToken, `{"name":"child-free","role":"read","scopes":["*"],"ratePerSecond":0}`)); got == nil || *got != 0 {
		t.Errorf("0 under an unlimited creator: got %v, want 0", got)
	}
}

// mintAdmin creates an admin of every job at rate and returns its token.
func mintAdmin(t *testing.T, store leaseapi.Store, name string, rate *float64) string {
	t.Helper()
	c, token := leaseapi.NewCredential(name, leaseapi.RoleAdmin, []string{"*"}, rate)
	if err := store.(leaseapi.CredentialStore).CreateCredential(t.Context(), &c); err != nil {
		t.Fatalf("CreateCredential %s: %v", name, err)
	}
	return token
}
