package handlers_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/go-chi/chi/v5"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

func init() {
	// The console's files are text; the contract validates their answers
	// (status, headers) like every other, and their bodies as strings.
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
}

// consoleAssets are the console's files and their content types.
var consoleAssets = map[string]string{
	"/ui/":           "text/html; charset=utf-8",
	"/ui/index.html": "text/html; charset=utf-8",
	"/ui/app.js":     "text/javascript; charset=utf-8",
	"/ui/api.js":     "text/javascript; charset=utf-8",
	"/ui/views.js":   "text/javascript; charset=utf-8",
	"/ui/dom.js":     "text/javascript; charset=utf-8",
	"/ui/style.css":  "text/css; charset=utf-8",
}

func wantSecurityHeaders(t *testing.T, path string, resp response) {
	t.Helper()
	csp := resp.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("%s: Content-Security-Policy %q allows %q", path, csp, bad)
		}
	}
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := resp.header.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", path, k, got, v)
		}
	}
}

// TestConsoleFiles: every file of the console is served without a
// credential on a closed API (whose data calls need one), with its content
// type, the security headers, no-cache and an ETag that revalidates, and
// gzip-encoded when asked, decompressing to the same bytes.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, reader := mint(t, store, "reader", leaseapi.RoleRead, "*")
		b := setup(t, store, defaultOptions())
		// The data needs a credential...
		wantProblem(t, b.do(t, request{method: http.MethodGet, path: "/leases"}), http.StatusUnauthorized, api.CodeUnauthorized)
		if resp := b.do(t, request{method: http.MethodGet, path: "/leases", header: reader}); resp.status != http.StatusOK {
			t.Fatalf("GET /leases with a read credential: %d %s", resp.status, resp.body)
		}
		// ...the console's files do not.
		for path, ct := range consoleAssets {
			plain := b.do(t, request{method: http.MethodGet, path: path, header: http.Header{"Accept-Encoding": {"identity"}}})
			if plain.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, plain.status, plain.body)
			}
			wantSecurityHeaders(t, path, plain)
			if got := plain.header.Get("Content-Type"); got != ct {
				t.Errorf("GET %s: Content-Type %q, want %q", path, got, ct)
			}
			if got := plain.header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("GET %s: Cache-Control %q, want no-cache", path, got)
			}
			if enc := plain.header.Get("Content-Encoding"); enc != "" {
				t.Errorf("GET %s with Accept-Encoding identity: Content-Encoding %q", path, enc)
			}
			etag := plain.header.Get("ETag")
			if !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
				t.Fatalf("GET %s: ETag %q, want a strong one", path, etag)
			}
			again := b.do(t, request{method: http.MethodGet, path: path, header: http.Header{"Accept-Encoding": {"identity"}, "If-None-Match": {etag}}})
			if again.status != http.StatusNotModified || len(again.body) != 0 {
				t.Errorf("GET %s with If-None-Match %s: %d, %d bytes; want 304 and none", path, etag, again.status, len(again.body))
			}
			wantSecurityHeaders(t, path+" (304)", again)
			if other := b.do(t, request{method: http.MethodGet, path: path, header: http.Header{"Accept-Encoding": {"identity"}, "If-None-Match": {`"other"`}}}); other.status != http.StatusOK {
				t.Errorf("GET %s with a stale If-None-Match: %d, want 200", path, other.status)
			}

			zipped := b.do(t, request{method: http.MethodGet, path: path, header: http.Header{"Accept-Encoding": {"br, gzip"}}})
			if zipped.header.Get("Content-Encoding") != "gzip" {
				t.Errorf("GET %s with Accept-Encoding gzip: Content-Encoding %q", path, zipped.header.Get("Content-Encoding"))
				continue
			}
			if zipped.header.Get("ETag") == etag {
				t.Errorf("GET %s: the gzip copy has the ETag of the identity body", path)
			}
			zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
			if err != nil {
				t.Fatalf("GET %s: gunzip: %v", path, err)
			}
			unzipped, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(unzipped, plain.body) {
				t.Errorf("GET %s: the gzip body does not decompress to the identity body (%v)", path, err)
			}
			if refused := b.do(t, request{method: http.MethodGet, path: path, header: http.Header{"Accept-Encoding": {"gzip;q=0"}}}); refused.header.Get("Content-Encoding") != "" {
				t.Errorf("GET %s with gzip;q=0: Content-Encoding %q", path, refused.header.Get("Content-Encoding"))
			}
		}
	})
}

// TestConsoleRedirectAndNotFound: / and /ui redirect to the console with
// its headers; a file the console does not have is the API's 404 problem,
// with the console's headers too.
func TestConsoleRedirectAndNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	client := b.server.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{"/", "/ui"} {
		resp := b.do(t, request{method: http.MethodGet, path: path})
		if resp.status != http.StatusFound || resp.header.Get("Location") != "/ui/" {
			t.Errorf("GET %s: %d Location %q, want 302 to /ui/", path, resp.status, resp.header.Get("Location"))
		}
		wantSecurityHeaders(t, path, resp)
	}
	for _, path := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/index.html.gz"} {
		resp := b.doInvalid(t, request{method: http.MethodGet, path: path}) // a path the spec has no file for
		wantProblem(t, resp, http.StatusNotFound, api.CodeNotFound)
		wantSecurityHeaders(t, path, resp)
	}
	// Not a GET: 405 like any other route.
	resp := b.doInvalid(t, request{method: http.MethodPost, path: "/ui/app.js", body: `{}`})
	wantProblem(t, resp, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
}

// TestPublicRoutes walks the router: every route that is not an API route
// (those are in TestEveryRouteAuthorized's table) is in this list of the
// routes served without a credential, so a new one is public only by a
// decision made here.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	public := []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.yaml", "GET /", "GET /ui", "GET /ui/*"}
	h := handlers.New(openSQLite(t), defaultOptions())
	var seen []string
	err := chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		for _, p := range []string{"/leases", "/stats", "/runs", "/credentials", "/webhooks", "/whoami", "/owed", "/groups", "/acquire", "/heartbeat"} {
			if strings.HasPrefix(route, p) {
				return nil
			}
		}
		key := method + " " + route
		seen = append(seen, key)
		if !slices.Contains(public, key) {
			t.Errorf("%s: served without authorize, and not in the list of public routes", key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range public {
		if !slices.Contains(seen, p) {
			t.Errorf("%s: in the list of public routes, but not routed", p)
		}
	}
}
