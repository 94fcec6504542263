package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/repo/postgres"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// forEachFreshStore runs fn against each real store on a database of its
// own: credentials close the API of every handler on a database, so these
// tests never share one with the others.
func forEachFreshStore(t *testing.T, fn func(t *testing.T, store leaseapi.Store, reopen func(t *testing.T) leaseapi.Store)) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		s := openSQLite(t)
		fn(t, s, func(*testing.T) leaseapi.Store { return s }) // one process per file
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		dsn := repotest.NewPostgresURL(t)
		open := func(t *testing.T) leaseapi.Store {
			p, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxOpenConns: 4})
			if err != nil {
				t.Fatalf("open postgres: %v", err)
			}
			t.Cleanup(func() { _ = p.Close() })
			return p
		}
		fn(t, open(t), open)
	})
}

// mint creates a credential directly in the store, as `leaseapi
// credentials create` does, and returns its bearer header.
func mint(t *testing.T, store leaseapi.Store, name string, role leaseapi.Role, scopes ...string) (leaseapi.Credential, http.Header) {
	t.Helper()
	c, token := leaseapi.NewCredential(name, role, scopes, nil)
	if err := store.(leaseapi.CredentialStore).CreateCredential(t.Context(), &c); err != nil {
		t.Fatalf("CreateCredential %s: %v", name, err)
	}
	return c, bearerHeader(token)
}

func bearerHeader(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestScopes: every job operation for each credential, on jobs in and out
// of its scopes: a role too weak is 403, a job out of scope is 403
// naming the caller's scopes, with exactly the body of a job of that
// prefix that does not exist, and the rest reaches the store.
func TestScopes(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		creds := map[string]struct {
			role   leaseapi.Role
			header http.Header
			scopes []string
		}{}
		ids := map[string]string{}
		for _, c := range []struct {
			name   string
			role   leaseapi.Role
			scopes []string
		}{
			{"a-admin", leaseapi.RoleAdmin, []string{"team-a:"}},
			{"a-lease", leaseapi.RoleLease, []string{"team-a:"}},
			{"a-read", leaseapi.RoleRead, []string{"team-a:"}},
			{"b-lease", leaseapi.RoleLease, []string{"team-b."}},
		} {
			cred, h := mint(t, store, c.name, c.role, c.scopes...)
			creds[c.name] = struct {
				role   leaseapi.Role
				header http.Header
				scopes []string
			}{c.role, h, c.scopes}
			ids[c.name] = cred.ID
		}
		_, two := mint(t, store, "a-and-b", leaseapi.RoleRead, "team-b.", "team-a:")
		b := setup(t, store, defaultOptions())
		jobs := []string{"team-a:job", "team-ab:job", "team-b.job", "team-bb.job"}
		for _, job := range jobs {
			wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"root"}`, header: root}))
		}
		holder := `{"owner":"someone","token":999}`
		ops := []struct {
			name   string
			role   leaseapi.Role
			method string
			suffix string
			body   string
			// ok is the status when the role suffices and the job is in scope.
			ok int
		}{
			{"Get", leaseapi.RoleRead, http.MethodGet, "", "", 200},
			{"Runs", leaseapi.RoleRead, http.MethodGet, "/runs", "", 200},
			{"Acquire", leaseapi.RoleLease, http.MethodPost, "/acquire", `{"owner":"other"}`, 409},
			{"Heartbeat", leaseapi.RoleLease, http.MethodPost, "/heartbeat", holder, 409},
			{"Release", leaseapi.RoleLease, http.MethodPost, "/release", holder + "", 409},
			{"Pause", leaseapi.RoleAdmin, http.MethodPost, "/pause", `{}`, 200},
			{"Resume", leaseapi.RoleAdmin, http.MethodPost, "/resume", `{}`, 200},
			{"Repair", leaseapi.RoleAdmin, http.MethodPost, "/repair", `{}`, 200},
			{"ForgetSchedule", leaseapi.RoleAdmin, http.MethodDelete, "/schedule", "", 200},
			{"LeaveGroup", leaseapi.RoleAdmin, http.MethodDelete, "/group", "", 200},
		}
		for name, c := range creds {
			for _, op := range ops {
				for _, job := range jobs {
					body := op.body
					if op.name == "Release" {
						body = `{"owner":"someone","token":999,"outcome":"succeeded"}`
					}
					resp := b.do(t, request{method: op.method, path: "/leases/" + job + op.suffix, body: body, header: c.header})
					in := leaseapi.InScope(c.scopes, job)
					switch {
					case !c.role.Allows(op.role):
						wantProblem(t, resp, http.StatusForbidden, api.CodeForbidden)
					case !in:
						// 403 before any lookup: the same answer as for a
						// job of that prefix that does not exist.
						p := wantProblem(t, resp, http.StatusForbidden, api.CodeForbidden)
						if !strings.Contains(p.Detail, strings.Join(c.scopes, " ")) {
							t.Errorf("%s %s %s: detail %q does not name the caller's scopes %v", name, op.name, job, p.Detail, c.scopes)
						}
						ghost := job + "-none"
						other := b.do(t, request{method: op.method, path: "/leases/" + ghost + op.suffix, body: body, header: c.header})
						if got, want := string(other.body), strings.ReplaceAll(string(resp.body), job, ghost); got != want {
							t.Errorf("%s %s: a missing job out of scope answered %s, an existing one %s", name, op.name, got, resp.body)
						}
					case resp.status != op.ok:
						t.Errorf("%s %s %s: got %d %s, want %d", name, op.name, job, resp.status, resp.body, op.ok)
					}
				}
			}
		}
		// Pause records who paused.
		if l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-a:job/pause", body: `{}`, header: creds["a-admin"].header})); l.PausedBy == nil || *l.PausedBy != "a-admin ("+ids["a-admin"]+")" {
			t.Errorf("pausedBy: got %v, want a-admin and its id", l.PausedBy)
		}
		// Revoke last: it changes the lease.
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/team-ab:job", header: creds["a-admin"].header}), http.StatusForbidden, api.CodeForbidden)
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/leases/team-a:job", header: creds["a-lease"].header}), http.StatusForbidden, api.CodeForbidden)
		if l := wantLease(t, b.do(t, request{method: http.MethodDelete, path: "/leases/team-a:job", header: creds["a-admin"].header})); l.State != "revoked" {
			t.Errorf("revoke in scope: %+v", l)
		}

		t.Run("List", func(t *testing.T) {
			list := func(h http.Header, query string) (ids []string, next string) {
				t.Helper()
				resp := b.do(t, request{method: http.MethodGet, path: "/leases" + query, header: h})
				if resp.status != 200 {
					t.Fatalf("GET /leases%s: %d %s", query, resp.status, resp.body)
				}
				var l api.LeaseList
				if err := json.Unmarshal(resp.body, &l); err != nil {
					t.Fatal(err)
				}
				for _, x := range l.Leases {
					ids = append(ids, x.JobID)
				}
				if l.NextCursor != nil {
					next = *l.NextCursor
				}
				return ids, next
			}
			cursor := func(job string) string { return base64.RawURLEncoding.EncodeToString([]byte(job)) }
			read := creds["a-read"].header
			for _, tc := range []struct {
				query string
				want  []string
			}{
				{"", []string{"team-a:job"}},
				{"?prefix=team-", []string{"team-a:job"}},
				{"?prefix=team-a", []string{"team-a:job"}},
				{"?prefix=team-ab", nil},
				{"?prefix=team-a:j", []string{"team-a:job"}},
				{"?cursor=" + cursor("team-a"), []string{"team-a:job"}},
				{"?cursor=" + cursor("team-a:job"), nil},
				{"?cursor=" + cursor("team-ab:"), nil}, // forged: past the scope
				{"?cursor=" + cursor("A"), []string{"team-a:job"}},
			} {
				if got, next := list(read, tc.query); !slices.Equal(got, tc.want) || next != "" {
					t.Errorf("a-read GET /leases%s: got %q next %q, want %q", tc.query, got, next, tc.want)
				}
			}
			// Two scopes, one page at a time: in job id order, never out of scope.
			var got []string
			next := ""
			for range 5 {
				q := "?limit=1"
				if next != "" {
					q += "&cursor=" + next
				}
				ids, n := list(two, q)
				got = append(got, ids...)
				if next = n; next == "" {
					break
				}
			}
			if want := []string{"team-a:job", "team-b.job"}; !slices.Equal(got, want) {
				t.Errorf("two scopes, paged: got %q, want %q", got, want)
			}
		})

		t.Run("Credentials", func(t *testing.T) {
			aAdmin := creds["a-admin"].header
			create := func(h http.Header, body string) response {
				return b.do(t, request{method: http.MethodPost, path: "/credentials", body: body, header: h})
			}
			for _, scopes := range []string{`["*"]`, `["team-ab:"]`, `["team-a:","team-b."]`} {
				wantProblem(t, create(aAdmin, `{"name":"wide","role":"read","scopes":`+scopes+`}`), http.StatusForbidden, api.CodeForbidden)
			}
			wantProblem(t, create(creds["a-lease"].header, `{"name":"x","role":"read","scopes":["team-a:"]}`), http.StatusForbidden, api.CodeForbidden)
			resp := create(aAdmin, `{"name":"a-sub","role":"lease","scopes":["team-a:sub."],"ratePerSecond":5}`)
			if resp.status != http.StatusCreated {
				t.Fatalf("create within scope: %d %s", resp.status, resp.body)
			}
			var created api.CreatedCredential
			if err := json.Unmarshal(resp.body, &created); err != nil {
				t.Fatal(err)
			}
			wantProblem(t, create(aAdmin, `{"name":"a-sub","role":"read","scopes":["team-a:sub."]}`), http.StatusConflict, api.CodeCredentialExists)
			// Works at once on this instance.
			who := b.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(created.Token)})
			if who.status != 200 || !strings.Contains(string(who.body), `"name":"a-sub"`) {
				t.Fatalf("whoami with the new credential: %d %s", who.status, who.body)
			}
			// A scoped admin sees only the credentials within its scopes.
			lresp := b.do(t, request{method: http.MethodGet, path: "/credentials", header: aAdmin})
			var l api.CredentialList
			if err := json.Unmarshal(lresp.body, &l); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range l.Credentials {
				names = append(names, c.Name)
			}
			if want := []string{"a-admin", "a-lease", "a-read", "a-sub"}; !slices.Equal(names, want) {
				t.Errorf("a-admin GET /credentials: got %q, want %q", names, want)
			}
			if strings.Contains(string(lresp.body), created.Token[16:]) {
				t.Error("GET /credentials shows a secret")
			}
			// Another's credential is not found; its own are deleted.
			all := b.do(t, request{method: http.MethodGet, path: "/credentials", header: root})
			var everyone api.CredentialList
			_ = json.Unmarshal(all.body, &everyone)
			for _, c := range everyone.Credentials {
				if c.Name == "b-lease" {
					wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/credentials/" + c.ID, header: aAdmin}), http.StatusNotFound, api.CodeNotFound)
				}
			}
			if r := b.do(t, request{method: http.MethodDelete, path: "/credentials/" + created.ID, header: aAdmin}); r.status != http.StatusNoContent {
				t.Fatalf("delete within scope: %d %s", r.status, r.body)
			}
			// Revoked: refused at once on this instance.
			wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(created.Token)}), http.StatusUnauthorized, api.CodeUnauthorized)
			wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/credentials/" + created.ID, header: aAdmin}), http.StatusNotFound, api.CodeNotFound)

			// Malformed and wrong tokens.
			id, secret, _ := strings.Cut(created.Token, ".")
			for _, token := range []string{
				"lk_short.x", id + ".", id, "." + secret, id + "." + secret + "x",
				"lk_000000000000." + secret, strings.ToUpper(created.Token),
			} {
				wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(token)}), http.StatusUnauthorized, api.CodeUnauthorized)
			}
			// The audit: the access log names the credential, never a token.
			if len(b.logs.lines(t, map[string]any{"msg": "request", "method": "POST", "credential": "a-admin (" + ids["a-admin"] + ")"})) == 0 {
				t.Error("no access log line names the credential a-admin with its id")
			}
			if strings.Contains(b.logs.buf.String(), secret) {
				t.Error("the log holds a secret")
			}
		})
	})
}

// TestOpenModeFailsClosed: open only until the first credential exists;
// revoking every credential leaves the API closed; /credentials always
// needs an admin; configured tokens have names by position.
func TestOpenModeFailsClosed(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		opts := defaultOptions()
		opts.CredentialRefresh = 10 * time.Millisecond
		b := setup(t, store, opts)
		who := b.do(t, request{method: http.MethodGet, path: "/whoami"})
		if who.status != 200 || string(who.body) != `{"open":true}` {
			t.Fatalf("whoami in open mode: %d %s", who.status, who.body)
		}
		wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/credentials"}), http.StatusUnauthorized, api.CodeUnauthorized)
		c, _ := mint(t, store, "only", leaseapi.RoleAdmin, "*")
		if err := store.(leaseapi.CredentialStore).DeleteCredential(t.Context(), c.ID); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp := b.do(t, request{method: http.MethodGet, path: "/leases"})
			if resp.status == http.StatusUnauthorized {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no credential left: GET /leases answers %d, want 401", resp.status)
			}
			time.Sleep(10 * time.Millisecond) // bounded polling
		}

		// Configured tokens: named by position, never by value.
		opts.APITokens, opts.AdminTokens = []string{"first-api", "second-api"}, []string{"the-admin"}
		env := setup(t, store, opts)
		for token, want := range map[string]string{
			"second-api": `{"name":"api-token-2","role":"lease","scopes":["*"]}`,
			"the-admin":  `{"name":"admin-token-1","role":"admin","scopes":["*"]}`,
		} {
			if resp := env.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(token)}); string(resp.body) != want {
				t.Errorf("whoami %s: got %s, want %s", token, resp.body, want)
			}
		}
	})
}

// TestRevocationAcrossInstances: two instances on one database; a
// credential revoked on one stops working on the other within 5 s.
func TestRevocationAcrossInstances(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, reopen func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		one := setup(t, store, defaultOptions())
		two := setup(t, reopen(t), defaultOptions())
		resp := one.do(t, request{method: http.MethodPost, path: "/credentials", body: `{"name":"moving","role":"read","scopes":["x:"]}`, header: root})
		var c api.CreatedCredential
		if err := json.Unmarshal(resp.body, &c); err != nil || resp.status != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.status, resp.body)
		}
		waitStatus := func(b *testBundle, want int) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for {
				r := b.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(c.Token)})
				if r.status == want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 5s: got %d, want %d", r.status, want)
				}
				time.Sleep(20 * time.Millisecond) // bounded polling
			}
		}
		waitStatus(two, http.StatusOK)
		if r := one.do(t, request{method: http.MethodDelete, path: "/credentials/" + c.ID, header: root}); r.status != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		wantProblem(t, one.do(t, request{method: http.MethodGet, path: "/whoami", header: bearerHeader(c.Token)}), http.StatusUnauthorized, api.CodeUnauthorized)
		waitStatus(two, http.StatusUnauthorized)
	})
}

// TestEveryRouteAuthorized walks the router: every API route (/leases,
// /runs, /stats, /credentials, /webhooks, /whoami, /groups) refuses a caller without a token on a
// closed API, refuses a role too weak for it, and hides a job or group out
// of scope; and it is in this table of the roles each route needs, so a new
// route is not added without deciding its role here.
func TestEveryRouteAuthorized(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	_, reader := mint(t, store, "reader", leaseapi.RoleRead, "zz:")
	_, leaser := mint(t, store, "leaser", leaseapi.RoleLease, "zz:")
	roles := map[string]leaseapi.Role{
		"GET /whoami": leaseapi.RoleRead, "GET /leases": leaseapi.RoleRead, "GET /leases/{jobId}": leaseapi.RoleRead,
		"GET /leases/{jobId}/runs": leaseapi.RoleRead, "GET /runs": leaseapi.RoleRead, "GET /stats": leaseapi.RoleRead,
		"POST /leases/{jobId}/acquire":   leaseapi.RoleLease,
		"POST /leases/{jobId}/heartbeat": leaseapi.RoleLease, "POST /leases/{jobId}/release": leaseapi.RoleLease,
		"DELETE /leases/{jobId}": leaseapi.RoleAdmin, "POST /leases/{jobId}/pause": leaseapi.RoleAdmin,
		"POST /leases/{jobId}/resume": leaseapi.RoleAdmin, "POST /leases/{jobId}/repair": leaseapi.RoleAdmin,
		"DELETE /leases/{jobId}/schedule": leaseapi.RoleAdmin,
		"POST /leases/{jobId}/trigger":    leaseapi.RoleAdmin, "DELETE /leases/{jobId}/trigger": leaseapi.RoleAdmin,
		"POST /owed":    leaseapi.RoleRead,
		"POST /acquire": leaseapi.RoleLease, "POST /heartbeat": leaseapi.RoleLease,
		"POST /credentials": leaseapi.RoleAdmin, "GET /credentials": leaseapi.RoleAdmin, "DELETE /credentials/{id}": leaseapi.RoleAdmin,
		"POST /webhooks": leaseapi.RoleAdmin, "GET /webhooks": leaseapi.RoleAdmin, "DELETE /webhooks/{id}": leaseapi.RoleAdmin,
		"GET /webhooks/{id}/deliveries": leaseapi.RoleAdmin,
		"DELETE /leases/{jobId}/group":  leaseapi.RoleAdmin,
		"GET /groups":                   leaseapi.RoleRead, "GET /groups/{name}": leaseapi.RoleRead,
		"PUT /groups/{name}": leaseapi.RoleAdmin, "DELETE /groups/{name}": leaseapi.RoleAdmin,
		"PUT /leases/{jobId}/policy": leaseapi.RoleAdmin, "GET /leases/{jobId}/policy": leaseapi.RoleRead,
		"DELETE /leases/{jobId}/policy": leaseapi.RoleAdmin,
	}
	h := handlers.New(store, defaultOptions())
	b := setupHandler(t, store, defaultOptions(), func(o handlers.Options) http.Handler { return handlers.New(store, o) })
	seen := 0
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/leases") && !strings.HasPrefix(route, "/stats") && !strings.HasPrefix(route, "/runs") &&
			!strings.HasPrefix(route, "/credentials") && !strings.HasPrefix(route, "/whoami") && route != "/owed" &&
			route != "/acquire" && route != "/heartbeat" &&
			!strings.HasPrefix(route, "/webhooks") && !strings.HasPrefix(route, "/groups") {
			return nil
		}
		seen++
		key := method + " " + route
		need, ok := roles[key]
		if !ok {
			t.Errorf("%s: not in the table of roles", key)
			return nil
		}
		path := strings.NewReplacer("{jobId}", "team-a:job", "{id}", "lk_000000000000", "{name}", "team-a:group").Replace(route)
		req := request{method: method, path: path}
		wantProblem(t, b.doInvalid(t, req), http.StatusUnauthorized, api.CodeUnauthorized)
		for _, c := range []struct {
			role   leaseapi.Role
			header http.Header
		}{{leaseapi.RoleRead, reader}, {leaseapi.RoleLease, leaser}} {
			req.header = c.header
			resp := b.doInvalid(t, req)
			switch {
			case !c.role.Allows(need):
				wantProblem(t, resp, http.StatusForbidden, api.CodeForbidden)
			case strings.Contains(route, "{jobId}") || strings.Contains(route, "{name}"):
				if p := wantProblem(t, resp, http.StatusForbidden, api.CodeForbidden); !strings.Contains(p.Detail, "outside this credential's scopes (zz:)") {
					t.Errorf("%s: out of scope: detail %q", key, p.Detail)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(roles) {
		t.Errorf("walked %d API routes, the table has %d", seen, len(roles))
	}
}

// TestEscapedJobID: a job id whose characters the client escaped in the
// path ("team-a%3Ajob") is the same job as the plain spelling, for the
// operations and for the scope check: an escaped id out of scope is 403.
func TestEscapedJobID(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		_, teamA := mint(t, store, "a-lease", leaseapi.RoleLease, "team-a:")
		b := setup(t, store, defaultOptions())
		// The spec's validator in the harness matches the escaped segment
		// against the jobId pattern, so the escaped requests go unchecked
		// (doInvalid); their answers are still checked against the spec.
		wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/team-b:job/acquire", body: `{"owner":"root"}`, header: root}))

		l := wantLease(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/team-a%3Ajob/acquire", body: `{"owner":"a"}`, header: teamA}))
		if l.JobID != "team-a:job" {
			t.Errorf("acquire of team-a%%3Ajob: jobId %q, want team-a:job", l.JobID)
		}
		if got := wantLease(t, b.do(t, request{method: http.MethodGet, path: "/leases/team-a:job", header: teamA})); got.Token != l.Token {
			t.Errorf("the plain spelling reads token %d, want %d (the same lease)", got.Token, l.Token)
		}
		for _, path := range []string{"/leases/team-b%3Ajob", "/leases/team-b%3ajob/runs", "/leases/%74eam-b:job"} {
			wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: path, header: teamA}), http.StatusForbidden, api.CodeForbidden)
		}
		wantProblem(t, b.doInvalid(t, request{method: http.MethodPost, path: "/leases/team-b%3Ajob/acquire", body: `{"owner":"a"}`, header: teamA}), http.StatusForbidden, api.CodeForbidden)
		wantProblem(t, b.doInvalid(t, request{method: http.MethodGet, path: "/leases/team-a%25job", header: teamA}), http.StatusBadRequest, api.CodeInvalidRequest)
	})
}
