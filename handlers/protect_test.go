package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

// serveFrom serves req by h as if it came from the peer remoteAddr with
// Host host (a TCP test server only ever sees loopback peers), and checks
// the answer against the spec.
func serveFrom(t *testing.T, h http.Handler, remoteAddr, host string, r request) response {
	t.Helper()
	req := r.build(t, "http://leaseapi.test")
	req.RemoteAddr, req.Host, req.RequestURI = remoteAddr, host, r.path
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	resp := response{status: rec.Code, header: rec.Result().Header, body: body}
	if err := loadContract(t).validateResponse(req, resp); err != nil {
		t.Fatalf("%s from %s to %s: the response does not match the spec: %v\n%d %s", r, remoteAddr, host, err, resp.status, resp.body)
	}
	checkCommon(t, r, resp)
	return resp
}

// TestProtectedOpenMode: while the API is open and Options.Open is false,
// only a loopback peer naming a loopback Host is served; every other
// request gets 403 saying how to create the first credential or set
// LEASEAPI_OPEN=true, except on /healthz, /readyz, /metrics and
// /openapi.yaml. Options.Open lifts both checks; once a credential exists
// the API is closed and the guard is out of the way.
func TestProtectedOpenMode(t *testing.T) {
	t.Parallel()
	store := openSQLite(t)
	guarded := handlers.New(store, defaultOptions())
	openOpts := defaultOptions()
	openOpts.Open = true
	open := handlers.New(store, openOpts)
	whoami := request{method: http.MethodGet, path: "/whoami"}
	pause := request{method: http.MethodPost, path: "/leases/j/pause", body: `{}`}

	served := []struct{ peer, host string }{
		{"127.0.0.1:5000", "localhost:8080"},
		{"127.0.0.1:5000", "localhost"},
		{"127.0.0.1:5000", "LocalHost:8080"},
		{"127.0.0.1:5000", "console.localhost:8080"},
		{"127.9.8.7:5000", "127.0.0.1:8080"},
		{"127.0.0.1:5000", "127.255.0.1"},
		{"[::1]:5000", "[::1]:8080"},
		{"[::1]:5000", "[::1]"},
		{"[::ffff:127.0.0.1]:5000", "localhost:8080"},
	}
	for _, c := range served {
		if resp := serveFrom(t, guarded, c.peer, c.host, whoami); resp.status != http.StatusOK {
			t.Errorf("GET /whoami from %s to %s: got %d %s, want 200", c.peer, c.host, resp.status, resp.body)
		}
	}
	refused := []struct{ peer, host string }{
		{"192.0.2.1:5000", "localhost:8080"},             // not loopback: another host
		{"10.0.0.7:5000", "leaseapi:8080"},               // a pod on the network
		{"[2001:db8::1]:5000", "[::1]:8080"},             // IPv6, not loopback
		{"127.0.0.1:5000", "attacker.example:8080"},      // DNS rebinding
		{"127.0.0.1:5000", "localhost.attacker.example"}, // not under .localhost
		{"127.0.0.1:5000", "128.0.0.1:8080"},             // not 127/8
		{"127.0.0.1:5000", "[::ffff:127.0.0.1]:8080"},    // only [::1] of IPv6
		{"127.0.0.1:5000", "0x7f000001"},                 // not dotted decimal
		{"127.0.0.1:5000", "localhost:http"},             // bad port
		{"127.0.0.1:5000", ""},                           // none
		{"127.0.0.1:5000", "a..localhost"},               // empty label
		{"[::1]:5000", "::1"},                            // IPv6 without brackets
		{"127.0.0.1:5000", "[fe80::1%25lo]:8080"},        // a zone
		{"192.0.2.1:5000", "example.com"},                // httptest's defaults
	}
	for _, c := range refused {
		for _, r := range []request{whoami, pause, {method: http.MethodGet, path: "/leases"}, {method: http.MethodGet, path: "/ui/"}} {
			p := wantProblem(t, serveFrom(t, guarded, c.peer, c.host, r), http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(p.Detail, "leaseapi credentials create") || !strings.Contains(p.Detail, "LEASEAPI_OPEN=true") {
				t.Errorf("%s from %s to %s: detail %q does not say how to create the first credential or set LEASEAPI_OPEN=true", r, c.peer, c.host, p.Detail)
			}
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.yaml"} {
			if resp := serveFrom(t, guarded, c.peer, c.host, request{method: http.MethodGet, path: path}); resp.status != http.StatusOK {
				t.Errorf("GET %s from %s to %s: got %d, want 200 (exempt)", path, c.peer, c.host, resp.status)
			}
		}
		if resp := serveFrom(t, open, c.peer, c.host, whoami); resp.status != http.StatusOK {
			t.Errorf("GET /whoami from %s to %s with Open: got %d %s, want 200", c.peer, c.host, resp.status, resp.body)
		}
	}

	// Once a credential exists the API is closed: a remote caller meets
	// authentication, not the guard.
	_, admin := mint(t, store, "admin", leaseapi.RoleAdmin, "*")
	closed := handlers.New(store, defaultOptions())
	wantProblem(t, serveFrom(t, closed, "192.0.2.1:5000", "leaseapi.example", whoami), http.StatusUnauthorized, api.CodeUnauthorized)
	whoami.header = admin
	if resp := serveFrom(t, closed, "192.0.2.1:5000", "leaseapi.example", whoami); resp.status != http.StatusOK {
		t.Errorf("GET /whoami from afar with a credential: got %d %s, want 200", resp.status, resp.body)
	}
}

// TestProtectedOpenModeTokens: configured tokens close the API too, so the
// guard never refuses a caller of a server that has them.
func TestProtectedOpenModeTokens(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	opts.AdminTokens = []string{"admin-secret"}
	h := handlers.New(openSQLite(t), opts)
	r := request{method: http.MethodGet, path: "/whoami", header: bearerHeader("admin-secret")}
	if resp := serveFrom(t, h, "192.0.2.1:5000", "leaseapi.example", r); resp.status != http.StatusOK {
		t.Errorf("GET /whoami from afar with a configured token: got %d %s, want 200", resp.status, resp.body)
	}
}
