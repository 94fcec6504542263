package main

// The hostile-input and authorization suite (docs/reliability.md) against the
// real server: serveWith, the http.Server exactly as serve builds it (the
// production limits unless a test shortens the timeouts), the handlers and
// the Postgres store, over TCP on the loopback address. The handler tests
// (handlers/badinput_test.go) already hold ~125 bad bodies, paths and
// queries to the contract through httptest; this suite covers what only the
// real server shows: the request line and headers as bytes on the wire,
// net/http's own refusals, slow and idle clients, pipelining, and the
// authorization cases, with the database checked directly with SQL.
//
// It lives in package main because serveWith is unexported and starting the
// server in-process costs no build, no port race and no process management;
// it is the same code path main runs.
//
// Every case: the expected 4xx, a body of at most 1 KiB without SQL, driver
// text or stack traces (a problem+json when the handlers answer), the
// leases and runs tables unchanged (an md5 of each, read with SQL), and the
// server still serving /readyz afterwards. Each test has its own database,
// so the digests are of whole tables.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/repo/repotest"
)

// Tokens of the hostile servers.
const (
	hostileAPIToken   = "api-secret-1"
	hostileAdminToken = "admin-secret-1"
)

// tablesDigestSQL hashes both tables, every column of every row in a fixed
// order; any write changes it.
const tablesDigestSQL = `
SELECT
    (SELECT md5(coalesce(string_agg(l::text, '|' ORDER BY l.job_id), '')) FROM leases l),
    (SELECT md5(coalesce(string_agg(r::text, '|' ORDER BY r.id), '')) FROM runs r),
    (SELECT count(*) FROM leases),
    (SELECT count(*) FROM runs)`

// hostileEnv is one leaseapi server over its own fresh Postgres database,
// and a direct connection to that database.
type hostileEnv struct {
	srv  *server
	addr string // host:port
	db   *sql.DB
}

// newHostileEnv creates a database, starts serveWith on it with limits and
// API and admin tokens, and stops both when the test ends.
func newHostileEnv(t *testing.T, limits serverLimits) *hostileEnv {
	t.Helper()
	dsn := newDatabase(t)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })

	cfg := serveConfig(t)
	cfg.DatabaseURL = dsn
	cfg.LogLevel = "info"
	cfg.APITokens = []string{hostileAPIToken}
	cfg.AdminTokens = []string{hostileAdminToken}
	// Short grants let a test see a lease expire and be taken over.
	cfg.MinTTL = 50 * time.Millisecond
	srv := startServer(t, func(ctx context.Context, stderr io.Writer) error {
		logger, err := newLogger(cfg, stderr)
		if err != nil {
			return err
		}
		return serveWith(ctx, cfg, logger, limits)
	})
	return &hostileEnv{srv: srv, addr: strings.TrimPrefix(srv.url, "http://"), db: db}
}

// newDatabase creates an empty database on the test server and drops it
// when the test ends (after the server has stopped: cleanups run last in,
// first out). The server's start migrates it.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := repotest.PostgresURL(t)
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var r [6]byte
	_, _ = rand.Read(r[:])
	name := "leaseapi_hostile_" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	// Identifiers cannot be bind parameters; name is [a-z0-9_] and quoted.
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("postgres", base)
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(name)+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// digest is the state of both tables.
type digest struct {
	leases, runs   string
	nLeases, nRuns int
}

func (e *hostileEnv) digest(t *testing.T) digest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var d digest
	if err := e.db.QueryRowContext(ctx, tablesDigestSQL).Scan(&d.leases, &d.runs, &d.nLeases, &d.nRuns); err != nil {
		t.Fatalf("digest of the tables: %v", err)
	}
	return d
}

// unchanged runs fn and fails the test when it changed either table or when
// the server stops serving.
func (e *hostileEnv) unchanged(t *testing.T, fn func()) {
	t.Helper()
	before := e.digest(t)
	fn()
	if after := e.digest(t); after != before {
		t.Errorf("the database changed: before %+v, after %+v", before, after)
	}
	e.mustServe(t)
}

// mustServe checks that a fresh connection is served: /readyz answers 200,
// so the process and its database pool are fine.
func (e *hostileEnv) mustServe(t *testing.T) {
	t.Helper()
	resps := e.exchange(t, "GET /readyz HTTP/1.1\r\nHost: leaseapi\r\nConnection: close\r\n\r\n", 1)
	if len(resps) != 1 || resps[0].status != http.StatusOK {
		t.Fatalf("the server no longer serves /readyz: %+v\nlogs:\n%s", resps, e.srv.logs)
	}
}

// rawResponse is one response read off the wire.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
	// close: the server announced it closes the connection after it.
	close bool
}

func (r rawResponse) String() string {
	return fmt.Sprintf("%d close=%v %v %q", r.status, r.close, r.header, r.body)
}

// parseRaw parses the one response in raw.
func parseRaw(t *testing.T, raw []byte) rawResponse {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("unreadable response: %v: %q", err, raw)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("unreadable response body: %v: %q", err, raw)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: body, close: resp.Close}
}

// dial opens a connection to the server that the test closes; its deadline
// bounds every read and write on it (a ceiling, never a measurement).
func (e *hostileEnv) dial(t *testing.T) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: waitTimeout}
	conn, err := d.DialContext(t.Context(), "tcp", e.addr)
	if err != nil {
		t.Fatalf("dial %s: %v", e.addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// exchange writes raw on a new connection, from a goroutine (the server may
// answer and close before it has read everything), and reads up to most
// responses, fewer when the server closes the connection.
func (e *hostileEnv) exchange(t *testing.T, raw string, most int) []rawResponse {
	t.Helper()
	conn := e.dial(t)
	go func() { _, _ = io.WriteString(conn, raw) }()
	return readResponses(t, conn, most)
}

// readResponses reads up to most responses from conn, fewer when it closes.
func readResponses(t *testing.T, conn net.Conn, most int) []rawResponse {
	t.Helper()
	br := bufio.NewReader(conn)
	var out []rawResponse
	for len(out) < most {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
				return out
			}
			t.Fatalf("read response %d: %v (so far %v)", len(out)+1, err, out)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("read body of response %d: %v", len(out)+1, err)
		}
		out = append(out, rawResponse{status: resp.StatusCode, header: resp.Header, body: body, close: resp.Close})
		if resp.Close {
			return out
		}
	}
	return out
}

func isReset(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && !opErr.Timeout()
}

// leaks are substrings no refusal may contain: SQL, driver and runtime text.
var leaks = []string{"sql", "pq:", "goroutine", ".go:", "sqlite", "postgres", "runtime.", "panic", "127.0.0.1", "i/o timeout"}

// origin says who answers a refusal: the handlers (problem+json) or net/http
// itself, before any handler, with a text/plain body and Connection: close.
type origin int

const (
	fromHandlers origin = iota
	fromNetHTTP
)

// checkRefusal holds one response to the suite's rules.
func checkRefusal(t *testing.T, resp rawResponse, status int, code string, from origin) {
	t.Helper()
	if resp.status != status {
		t.Fatalf("status %d, want %d: %s", resp.status, status, resp)
	}
	if len(resp.body) > 1024 {
		t.Errorf("body of %d bytes, want at most 1 KiB", len(resp.body))
	}
	lower := strings.ToLower(string(resp.body))
	for _, leak := range leaks {
		if strings.Contains(lower, leak) {
			t.Errorf("body leaks %q: %s", leak, resp.body)
		}
	}
	if from == fromNetHTTP {
		if !strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") || !resp.close {
			t.Errorf("net/http refusal without text/plain and Connection: close: %s", resp)
		}
		return
	}
	if ct := resp.header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Fatalf("Content-Type %q, want %s: %s", ct, api.ProblemContentType, resp)
	}
	var p api.Problem
	if err := json.Unmarshal(resp.body, &p); err != nil {
		t.Fatalf("problem does not decode: %v: %s", err, resp.body)
	}
	if p.Code != code || p.Status != status || p.Type != api.ProblemTypePrefix+code || p.Title == "" || p.Detail == "" {
		t.Errorf("problem %+v, want code %s and status %d", p, code, status)
	}
}

// Request builders for raw requests. Every one carries a valid API token
// unless it says otherwise, so that the case is about what it changes.

func bearer(token string) string { return "Authorization: Bearer " + token + "\r\n" }

// rawPost is a complete HTTP/1.1 POST with a JSON body and extra header lines.
func rawPost(path, body, extra string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: leaseapi\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s",
		path, bearer(hostileAPIToken), len(body), extra, body)
}

// client is an HTTP client for the valid requests that set a case up.
type client struct {
	t    *testing.T
	base string
}

func (e *hostileEnv) client(t *testing.T) client { return client{t: t, base: e.srv.url} }

// do sends one request with token (none when empty) and decodes a JSON body.
func (c client) do(method, path, token, body string) (int, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, out
}

// lease acquires, heartbeats or releases and wants a 200 lease.
func (c client) lease(op, job, body string) map[string]any {
	c.t.Helper()
	status, l := c.do(http.MethodPost, "/leases/"+job+"/"+op, hostileAPIToken, body)
	if status != http.StatusOK {
		c.t.Fatalf("%s %s %s: %d %v, want 200", op, job, body, status, l)
	}
	return l
}

// waitExpired polls the lease of job until its state is expired (bounded).
func (c client) waitExpired(job string) {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		status, l := c.do(http.MethodGet, "/leases/"+job, hostileAPIToken, "")
		if status == http.StatusOK && l["state"] == "expired" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("lease %s not expired within %s: %d %v", job, waitTimeout, status, l)
		}
		<-tick.C
	}
}

// uniqueJob is a job id for one test run (the database is fresh, but -count
// may run a test again on a new one; unique names also keep logs readable).
func uniqueJob(name string) string {
	return fmt.Sprintf("%s-%d", name, jobSeq.Add(1))
}

// TestHostileProtocol sends requests as bytes on the wire to the server with
// its production limits.
func TestHostileProtocol(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t, defaultServerLimits())
	c := e.client(t)
	held := uniqueJob("held")
	c.lease("acquire", held, `{"owner":"replica-a","ttlMs":3600000}`)
	fresh := uniqueJob("fresh")
	validAcquire := rawPost("/leases/"+fresh+"/acquire", `{"owner":"replica-a"}`, "")

	t.Run("ValidAcquireChangesTheDigest", func(t *testing.T) {
		// The negative control: the digest does see a write.
		before := e.digest(t)
		resps := e.exchange(t, validAcquire, 1)
		if len(resps) != 1 || resps[0].status != http.StatusOK {
			t.Fatalf("valid acquire: %v", resps)
		}
		if e.digest(t) == before {
			t.Fatal("a granted acquire left the digest unchanged; the digest sees nothing")
		}
	})

	t.Run("Headers15KiBAccepted", func(t *testing.T) {
		// The control of the next cases: below 16 KiB, headers are fine.
		raw := "GET /leases/" + held + " HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) + "X-Big: " + strings.Repeat("a", 15<<10) + "\r\n\r\n"
		if resps := e.exchange(t, raw, 1); len(resps) != 1 || resps[0].status != http.StatusOK {
			t.Fatalf("15 KiB of headers: %v", resps)
		}
	})

	// Headers: a request line plus headers above 16 KiB is a 431 from
	// net/http before any handler runs, and a huge header block is not read
	// whole.
	for _, tc := range []struct {
		name   string
		header string
	}{
		{"OneHeader17KiB", "X-Big: " + strings.Repeat("a", 17<<10) + "\r\n"},
		{"ManyHeaders17KiB", strings.Repeat("X-Many: "+strings.Repeat("b", 100)+"\r\n", 17<<10/110)},
		{"OneHeader32KiB", "X-Big: " + strings.Repeat("a", 32<<10) + "\r\n"},
		{"Headers1MiB", strings.Repeat("X-Many: "+strings.Repeat("c", 1000)+"\r\n", 1<<10)},
		{"RequestLine64KiB", ""},
	} {
		t.Run("HeadersTooLarge"+tc.name, func(t *testing.T) {
			raw := rawPost("/leases/"+fresh+"/acquire", `{"owner":"replica-a"}`, tc.header)
			if tc.header == "" {
				raw = rawPost("/leases/"+fresh+"/acquire?x="+strings.Repeat("q", 64<<10), `{"owner":"replica-a"}`, "")
			}
			e.unchanged(t, func() {
				resps := e.exchange(t, raw, 2)
				if len(resps) != 1 {
					t.Fatalf("got %d responses, want one 431: %v", len(resps), resps)
				}
				checkRefusal(t, resps[0], http.StatusRequestHeaderFieldsTooLarge, "", fromNetHTTP)
			})
		})
	}

	// Request lines and framing net/http refuses itself (400, or 501 for a
	// transfer coding it does not implement).
	for _, tc := range []struct {
		name   string
		raw    string
		status int
	}{
		{"NoHost", "GET /healthz HTTP/1.1\r\n\r\n", 400},
		{"TwoHosts", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"NULInPath", "GET /leases/a\x00b HTTP/1.1\r\nHost: a\r\n" + bearer(hostileAPIToken) + "\r\n", 400},
		{"SpaceInPath", "GET /leases/a b HTTP/1.1\r\nHost: a\r\n" + bearer(hostileAPIToken) + "\r\n", 400},
		{"CRInPath", "GET /leases/a\rb HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"BareLF", "GET /healthz HTTP/1.1\nHost: a\n\n", -1}, // accepted; see below
		{"HeaderWithoutColon", "GET /healthz HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400},
		{"HeaderNameWithSpace", "GET /healthz HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400},
		{"ObsFold", "GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n folded\r\n\r\n", -1}, // accepted; see below
		{"NotHTTP", "HELLO\r\n\r\n", 400},
		{"HTTP09", "GET /healthz\r\n\r\n", 400},
		{"BadVersion", "GET /healthz HTTP/1.x\r\nHost: a\r\n\r\n", 400},
		{"ContentLengthNegative", strings.Replace(validAcquire, "Content-Length: 21", "Content-Length: -1", 1), 400},
		{"ContentLengthWord", strings.Replace(validAcquire, "Content-Length: 21", "Content-Length: abc", 1), 400},
		{"ContentLengthTwoValues", strings.Replace(validAcquire, "Content-Length: 21", "Content-Length: 21\r\nContent-Length: 22", 1), 400},
		{"ContentLengthHuge", strings.Replace(validAcquire, "Content-Length: 21", "Content-Length: 99999999999999999999", 1), 400},
		{"TransferEncodingUnknown", strings.Replace(validAcquire, "Content-Length: 21", "Transfer-Encoding: gzip, chunked", 1), 501},
		{"HTTP2RequestLine", "GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"ChunkSizeHuge", strings.Replace(strings.Split(validAcquire, "\r\n\r\n")[0], "Content-Length: 21", "Transfer-Encoding: chunked", 1) +
			"\r\n\r\nffffffffffffffffff\r\n{\"owner\":\"replica-a\"}\r\n0\r\n\r\n", 400},
	} {
		t.Run("Framing"+tc.name, func(t *testing.T) {
			e.unchanged(t, func() {
				resps := e.exchange(t, tc.raw, 1)
				if tc.status == -1 {
					// RFC 9112 lets a server accept a bare LF as a line
					// terminator and replace an obs-fold with a space;
					// net/http does both. The request is then served.
					if len(resps) == 0 || resps[0].status != http.StatusOK {
						t.Fatalf("bare LF request: %v", resps)
					}
					return
				}
				if len(resps) == 0 {
					t.Fatalf("no response, want %d", tc.status)
				}
				if tc.status >= 500 {
					// net/http's own answers, not the API's: 501 for a
					// transfer coding it does not implement (RFC 9112 §6.1),
					// 505 for a major version other than 1 (RFC 9110 §15.6.6).
					if resps[0].status != tc.status {
						t.Fatalf("status %d, want %d: %s", resps[0].status, tc.status, resps[0])
					}
					return
				}
				from := fromNetHTTP
				if resps[0].header.Get("Content-Type") == api.ProblemContentType {
					from = fromHandlers
				}
				checkRefusal(t, resps[0], tc.status, api.CodeInvalidRequest, from)
			})
		})
	}

	t.Run("HTTP2PrefaceOnCleartext", func(t *testing.T) {
		// h2c is not served: the preface is an unsupported version.
		e.unchanged(t, func() {
			resps := e.exchange(t, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 2)
			if len(resps) > 0 && resps[0].status < 400 {
				t.Fatalf("HTTP/2 preface: %v", resps)
			}
		})
	})

	// Methods and paths: the handlers' 405 with Allow and 404.
	for _, tc := range []struct {
		name, method, path string
		status             int
		allow              string
	}{
		{"PutLease", "PUT", "/leases/" + held, 405, "GET, DELETE"},
		{"PatchLease", "PATCH", "/leases/" + held, 405, "GET, DELETE"},
		{"GetAcquire", "GET", "/leases/" + held + "/acquire", 405, "POST"},
		{"DeleteRelease", "DELETE", "/leases/" + held + "/release", 405, "POST"},
		{"PostList", "POST", "/leases", 405, "GET"},
		{"TraceHealthz", "TRACE", "/healthz", 405, "GET"},
		{"LowercaseGet", "get", "/leases/" + held, 405, "GET, DELETE"},
		{"UnknownMethod", "BREW", "/leases/" + held, 405, "GET, DELETE"},
		{"UnknownMethodUnknownPath", "BREW", "/coffee", 404, ""},
		{"UnknownPath", "GET", "/v2/leases", 404, ""},
		{"UnknownSubresource", "GET", "/leases/" + held + "/owner", 404, ""},
		{"DotDotPath", "GET", "/leases/../healthz", 404, ""},
		{"DoubleSlash", "GET", "//leases", 404, ""},
		{"EncodedSlash", "GET", "/leases/" + held + "%2Fruns", 400, ""},
		{"AbsoluteForm", "GET", "http://evil.example/leases/" + held + "/owner", 404, ""},
	} {
		t.Run("Route"+tc.name, func(t *testing.T) {
			e.unchanged(t, func() {
				raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: leaseapi\r\n%sConnection: close\r\n\r\n", tc.method, tc.path, bearer(hostileAPIToken))
				resps := e.exchange(t, raw, 2)
				if len(resps) != 1 {
					t.Fatalf("got %d responses, want 1: %v", len(resps), resps)
				}
				code := map[int]string{400: api.CodeInvalidRequest, 404: api.CodeNotFound, 405: api.CodeMethodNotAllowed}[tc.status]
				checkRefusal(t, resps[0], tc.status, code, fromHandlers)
				if tc.status == 405 && resps[0].header.Get("Allow") != tc.allow {
					t.Errorf("Allow %q, want %q", resps[0].header.Get("Allow"), tc.allow)
				}
			})
		})
	}

	// SQL in every input that could carry it. The handler tests refuse
	// these too, but compare only their own jobs through the store; here
	// the whole tables are hashed, so a write to any row (or a dropped
	// table: the digest query would fail) is seen.
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"JobID", "POST", "/leases/x')%3B%20DROP%20TABLE%20leases%3B--/acquire", `{"owner":"a"}`},
		{"Owner", "POST", "/leases/" + fresh + "/acquire", `{"owner":"x'); DROP TABLE leases;--"}`},
		{"OwnerOfHeartbeat", "POST", "/leases/" + held + "/heartbeat", `{"owner":"' OR 1=1--","token":1}`},
		{"TokenAsSQL", "POST", "/leases/" + held + "/release", `{"owner":"replica-a","token":"1 OR 1=1"}`},
		{"Prefix", "GET", "/leases?prefix=%27%20OR%201%3D1--", ""},
		{"Cursor", "GET", "/leases?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("x' OR '1'='1")), ""},
		{"Limit", "GET", "/leases?limit=1;DELETE%20FROM%20runs", ""},
		{"RunsLimit", "GET", "/leases/" + held + "/runs?limit=1%20OR%201=1", ""},
	} {
		t.Run("SQLIn"+tc.name, func(t *testing.T) {
			e.unchanged(t, func() {
				raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: leaseapi\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
					tc.method, tc.path, bearer(hostileAPIToken), len(tc.body), tc.body)
				resps := e.exchange(t, raw, 1)
				if len(resps) != 1 {
					t.Fatalf("responses: %v", resps)
				}
				checkRefusal(t, resps[0], http.StatusBadRequest, api.CodeInvalidRequest, fromHandlers)
			})
		})
	}

	t.Run("SQLMetaInAValidOwnerIsStoredVerbatim", func(t *testing.T) {
		// No spaces, so a valid owner: stored as text, read back unchanged.
		owner := `x');DROP_TABLE_leases;--$1`
		job := uniqueJob("sql-owner")
		if l := c.lease("acquire", job, `{"owner":"`+owner+`"}`); l["owner"] != owner {
			t.Fatalf("owner came back as %v", l["owner"])
		}
		var stored string
		if err := e.db.QueryRowContext(t.Context(), `SELECT owner FROM leases WHERE job_id = $1`, job).Scan(&stored); err != nil || stored != owner {
			t.Fatalf("stored owner %q, %v; want %q", stored, err, owner)
		}
	})

	t.Run("HTTP10", func(t *testing.T) {
		e.unchanged(t, func() {
			// No Host needed, and the server closes after the answer.
			resps := e.exchange(t, "GET /healthz HTTP/1.0\r\n\r\n", 2)
			if len(resps) != 1 || resps[0].status != http.StatusOK {
				t.Fatalf("HTTP/1.0 GET /healthz: %v", resps)
			}
			raw := strings.Replace(rawPost("/leases/"+fresh+"/acquire", `{"owner":"a b"}`, ""), "HTTP/1.1", "HTTP/1.0", 1)
			resps = e.exchange(t, raw, 2)
			if len(resps) != 1 {
				t.Fatalf("HTTP/1.0 bad acquire: %v", resps)
			}
			checkRefusal(t, resps[0], http.StatusBadRequest, api.CodeInvalidRequest, fromHandlers)
		})
		// And a valid HTTP/1.0 request is served like any other.
		raw := strings.Replace(rawPost("/leases/"+uniqueJob("http10")+"/acquire", `{"owner":"replica-a"}`, ""), "HTTP/1.1", "HTTP/1.0", 1)
		if resps := e.exchange(t, raw, 2); len(resps) != 1 || resps[0].status != http.StatusOK {
			t.Fatalf("HTTP/1.0 acquire: %v", resps)
		}
	})

	t.Run("Pipelined", func(t *testing.T) {
		e.unchanged(t, func() {
			raw := "GET /healthz HTTP/1.1\r\nHost: leaseapi\r\n\r\n" +
				rawPost("/leases/"+fresh+"/acquire", `{"owner":"a","ttlMs":0}`, "") +
				rawPost("/leases/"+held+"/heartbeat", `{"owner":"replica-b","token":1}`, "") +
				"GET /leases/" + held + " HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) + "Connection: close\r\n\r\n"
			resps := e.exchange(t, raw, 5)
			if len(resps) != 4 {
				t.Fatalf("got %d responses to 4 pipelined requests: %v", len(resps), resps)
			}
			if resps[0].status != http.StatusOK || resps[3].status != http.StatusOK {
				t.Errorf("pipelined valid requests: %v and %v", resps[0], resps[3])
			}
			checkRefusal(t, resps[1], http.StatusBadRequest, api.CodeInvalidRequest, fromHandlers)
			checkRefusal(t, resps[2], http.StatusConflict, api.CodeLeaseLost, fromHandlers)
		})
	})

	t.Run("SmuggledRequestInBody", func(t *testing.T) {
		// Transfer-Encoding wins over Content-Length (RFC 9112 §6.3): the
		// chunked body ends at once, so the declared length would have
		// hidden an acquire after it. net/http must not run that acquire
		// as if it were the body, nor grant anything for the outer request.
		smuggled := rawPost("/leases/"+uniqueJob("smuggled")+"/acquire", `{"owner":"evil"}`, "Connection: close\r\n")
		outer := "POST /leases/" + fresh + "/acquire HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) +
			"Content-Type: application/json\r\nContent-Length: " + fmt.Sprint(5+len(smuggled)) + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
		before := e.digest(t)
		resps := e.exchange(t, outer+smuggled, 2)
		if len(resps) == 0 {
			t.Fatal("no response")
		}
		if resps[0].status < 400 || resps[0].status >= 500 {
			t.Fatalf("outer request with both framings: %s, want a 4xx", resps[0])
		}
		if len(resps) > 1 {
			t.Errorf("the bytes after a request with both Content-Length and Transfer-Encoding were served as a request: %v", resps[1:])
		}
		if after := e.digest(t); after != before {
			t.Errorf("the database changed: before %+v, after %+v", before, after)
		}
		e.mustServe(t)
	})

	// Bodies: refused before they are read whole.
	t.Run("ExpectContinueTooLarge", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			head := "POST /leases/" + fresh + "/acquire HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) +
				"Content-Type: application/json\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			// Nothing of the body is sent: the answer must come without it,
			// and without a 100 Continue inviting it.
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a 10 MiB Expect: 100-continue: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			checkRefusal(t, rawResponse{status: resp.StatusCode, header: resp.Header, body: body},
				http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, fromHandlers)
		})
	})

	t.Run("ContentLength10MiBHalfSent", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			head := "POST /leases/" + fresh + "/acquire HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) +
				"Content-Type: application/json\r\nContent-Length: 10485760\r\n\r\n"
			// 1 MiB of the announced 10 MiB, then the client stalls: the
			// answer must not wait for the rest.
			go func() { _, _ = io.WriteString(conn, head+strings.Repeat(" ", 1<<20)) }()
			resps := readResponses(t, conn, 2)
			if len(resps) != 1 {
				t.Fatalf("got %d responses, want one 413: %v", len(resps), resps)
			}
			checkRefusal(t, resps[0], http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, fromHandlers)
		})
	})

	t.Run("Chunked10MiB", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			head := "POST /leases/" + fresh + "/acquire HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) +
				"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat(" ", 64<<10))
			go func() {
				if _, err := io.WriteString(conn, head); err != nil {
					return
				}
				for range 160 { // 10 MiB, unless the server stops reading first
					if _, err := io.WriteString(conn, chunk); err != nil {
						return
					}
				}
			}()
			resps := readResponses(t, conn, 2)
			if len(resps) != 1 {
				t.Fatalf("got %d responses, want one 413: %v", len(resps), resps)
			}
			checkRefusal(t, resps[0], http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, fromHandlers)
		})
	})
}

// TestHostileTicks: RFC 3339 ticks at the edges of what every client can
// show (years 0001 to 9999) reach Postgres and come back unchanged, those
// outside (year 0000 included: Python's datetime cannot represent it) are
// refused, and the last instant of 9999, far ahead of the clock, is
// refused tick_ahead, writing nothing.
func TestHostileTicks(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t, defaultServerLimits())
	c := e.client(t)
	for _, tick := range []string{"0001-01-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"} {
		l := c.lease("acquire", uniqueJob("tick"), `{"owner":"a","tick":"`+tick+`"}`)
		if l["tick"] != tick {
			t.Errorf("tick %s came back as %v", tick, l["tick"])
		}
	}
	for _, tc := range []struct {
		tick   string
		status int
		code   string
	}{
		{"0000-01-01T00:00:00.000Z", http.StatusBadRequest, api.CodeInvalidRequest},
		{"0000-12-31T23:59:59.999Z", http.StatusBadRequest, api.CodeInvalidRequest},
		{"0000-01-01T00:00:00+00:01", http.StatusBadRequest, api.CodeInvalidRequest},
		{"9999-12-31T23:59:59-00:01", http.StatusBadRequest, api.CodeInvalidRequest},
		{"9999-12-31T23:59:59.999Z", http.StatusConflict, api.CodeTickAhead},
	} {
		t.Run(tc.tick, func(t *testing.T) {
			e.unchanged(t, func() {
				resps := e.exchange(t, rawPost("/leases/"+uniqueJob("tick")+"/acquire", `{"owner":"a","tick":"`+tc.tick+`"}`, ""), 1)
				if len(resps) != 1 {
					t.Fatalf("responses: %v", resps)
				}
				checkRefusal(t, resps[0], tc.status, tc.code, fromHandlers)
			})
		})
	}
}

// TestHostileSlowClients: with short server timeouts, a client that sends
// its headers or its body one byte at a time is cut off, and an idle
// keep-alive connection is closed; nothing of theirs reaches the database.
func TestHostileSlowClients(t *testing.T) {
	t.Parallel()
	limits := defaultServerLimits()
	// Short, yet long enough that a request written at once is read in time
	// on a busy machine: they are settings, not measurements.
	limits.readHeaderTimeout = 500 * time.Millisecond
	limits.readTimeout = time.Second
	limits.idleTimeout = 500 * time.Millisecond
	e := newHostileEnv(t, limits)
	fresh := uniqueJob("slow")

	// drip writes data one byte per interval until the server closes the
	// connection, and returns what the server sent before closing. Sending
	// all of data would take far longer than the server's timeouts; the
	// connection deadline (waitTimeout) bounds the wait if it never closes.
	drip := func(t *testing.T, conn net.Conn, prefix, data string) []byte {
		t.Helper()
		if _, err := io.WriteString(conn, prefix); err != nil {
			t.Fatalf("write: %v", err)
		}
		closed := make(chan []byte, 1)
		go func() {
			got, _ := io.ReadAll(conn) // until EOF, reset or the deadline
			closed <- got
		}()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < len(data); i++ {
			select {
			case got := <-closed:
				return got
			case <-tick.C:
				if _, err := conn.Write([]byte{data[i]}); err != nil {
					return <-closed
				}
			}
		}
		t.Fatalf("sent all %d bytes one at a time and the server did not close the connection", len(data))
		return nil
	}

	t.Run("Slowloris", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			got := drip(t, conn, "POST /leases/"+fresh+"/acquire HTTP/1.1\r\n",
				"Host: leaseapi\r\n"+bearer(hostileAPIToken)+"X-Slow: "+strings.Repeat("s", 5000)+"\r\n\r\n")
			// net/http closes at ReadHeaderTimeout, without an answer, or
			// with its 400 when the deadline cut a header line in two
			// (textproto reports the partial line as malformed).
			if len(got) != 0 {
				checkRefusal(t, parseRaw(t, got), http.StatusBadRequest, "", fromNetHTTP)
			}
		})
	})

	t.Run("SlowBody", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			body := `{"owner":"replica-a"` + strings.Repeat(" ", 5000) + `}`
			head := "POST /leases/" + fresh + "/acquire HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) +
				"Content-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n"
			got := drip(t, conn, head, body)
			// The handler's body read fails at ReadTimeout: a 400 (the
			// client may still be sending and never read it), then the
			// connection closes.
			if len(got) > 0 {
				checkRefusal(t, parseRaw(t, got), http.StatusBadRequest, api.CodeInvalidRequest, fromHandlers)
			}
		})
	})

	t.Run("IdleKeepAliveClosed", func(t *testing.T) {
		e.unchanged(t, func() {
			conn := e.dial(t)
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: leaseapi\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
				t.Fatalf("keep-alive request: %v %v", resp, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// Then nothing: the server closes the idle connection at
			// IdleTimeout (the read returns EOF before the deadline).
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("idle connection: read %q, %v; want EOF", rest, err)
			}
		})
	})
}

// TestHostileIdleConnections: many idle keep-alive connections do not stop
// the server from serving a fresh one.
func TestHostileIdleConnections(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t, defaultServerLimits())
	// 2,000 connections take 4,000 descriptors in this process (both ends),
	// well inside the limit of the test machines (ulimit -n 20000).
	const idle = 2000
	const workers = 8
	conns := make(chan net.Conn, idle)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < idle; i += workers {
				conn, err := net.DialTimeout("tcp", e.addr, waitTimeout)
				if err != nil {
					errs <- fmt.Errorf("dial %d: %w", i, err)
					return
				}
				conns <- conn
				_ = conn.SetDeadline(time.Now().Add(waitTimeout))
				if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: leaseapi\r\n\r\n"); err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					errs <- fmt.Errorf("read %d: %w", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Close {
					errs <- fmt.Errorf("connection %d: status %d, close %v", i, resp.StatusCode, resp.Close)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(conns)
	t.Cleanup(func() {
		for c := range conns {
			_ = c.Close()
		}
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(conns) != idle {
		t.Fatalf("%d idle connections open, want %d", len(conns), idle)
	}
	e.unchanged(t, func() {
		c := e.client(t)
		if status, _ := c.do(http.MethodGet, "/leases?limit=1", hostileAPIToken, ""); status != http.StatusOK {
			t.Fatalf("GET /leases with %d idle connections: %d", idle, status)
		}
	})
}

// TestHostileAuth: the authentication and authorization cases of §6 over
// the real server. Every refusal leaves the database unchanged.
func TestHostileAuth(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t, defaultServerLimits())
	c := e.client(t)
	held := uniqueJob("auth-held")
	c.lease("acquire", held, `{"owner":"replica-a","ttlMs":3600000}`)
	fresh := uniqueJob("auth-fresh")

	// Authentication: each header on requests that would change the
	// database if they got through.
	for _, tc := range []struct{ name, header string }{
		{"Missing", ""},
		{"Basic", "Authorization: Basic " + "YXBpLXNlY3JldC0xOg==" + "\r\n"},
		{"EmptyToken", "Authorization: Bearer \r\n"},
		{"SchemeOnly", "Authorization: Bearer\r\n"},
		{"WrongToken", "Authorization: Bearer api-secret-2\r\n"},
		{"DoubleSpace", "Authorization: Bearer  " + hostileAPIToken + "\r\n"},
		{"TokenThenWord", "Authorization: Bearer " + hostileAPIToken + " x\r\n"},
		{"TokenPrefix", "Authorization: Bearer " + hostileAPIToken[:len(hostileAPIToken)-1] + "\r\n"},
		{"AdminTokenPrefix", "Authorization: Bearer " + hostileAdminToken + "x\r\n"},
		{"TokenWithoutScheme", "Authorization: " + hostileAPIToken + "\r\n"},
		{"TwoHeaders", "Authorization: Bearer wrong\r\nAuthorization: Bearer " + hostileAPIToken + "\r\n"},
		{"TwoHeadersBothRight", "Authorization: Bearer " + hostileAPIToken + "\r\nAuthorization: Bearer " + hostileAPIToken + "\r\n"},
		{"TabInToken", "Authorization: Bearer " + hostileAPIToken[:4] + "\t" + hostileAPIToken[4:] + "\r\n"},
		{"NonASCIIToken", "Authorization: Bearer " + hostileAPIToken + "\xc3\xa9\r\n"},
		{"HomoglyphToken", "Authorization: Bearer \xd0\xb0" + hostileAPIToken[1:] + "\r\n"},
		{"CredentialShapedToken", "Authorization: Bearer lk_abcdefghijkl." + strings.Repeat("A", 43) + "\r\n"},
		{"CredentialIDOnly", "Authorization: Bearer lk_abcdefghijkl.\r\n"},
		{"LongToken", "Authorization: Bearer " + strings.Repeat("t", 8<<10) + "\r\n"},
	} {
		t.Run("Unauthorized"+tc.name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/leases/" + fresh + "/acquire", `{"owner":"replica-a"}`},
				{"POST", "/leases/" + held + "/heartbeat", `{"owner":"replica-a","token":1}`},
				{"POST", "/leases/" + held + "/release", `{"owner":"replica-a","token":1}`},
				{"DELETE", "/leases/" + held, ""},
			} {
				e.unchanged(t, func() {
					raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: leaseapi\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
						req.method, req.path, tc.header, len(req.body), req.body)
					resps := e.exchange(t, raw, 2)
					if len(resps) != 1 {
						t.Fatalf("%s %s: %v", req.method, req.path, resps)
					}
					checkRefusal(t, resps[0], http.StatusUnauthorized, api.CodeUnauthorized, fromHandlers)
					if !strings.HasPrefix(resps[0].header.Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("WWW-Authenticate %q", resps[0].header.Get("WWW-Authenticate"))
					}
				})
			}
		})
	}

	t.Run("TrailingWhitespaceIsNotPartOfTheToken", func(t *testing.T) {
		// RFC 9110 §5.5: whitespace around a field value is not part of it,
		// and net/http trims it, so "Bearer <token> " carries <token>.
		raw := "GET /leases/" + held + " HTTP/1.1\r\nHost: leaseapi\r\nAuthorization: Bearer " + hostileAPIToken + " \t\r\n\r\n"
		if resps := e.exchange(t, raw, 1); len(resps) != 1 || resps[0].status != http.StatusOK {
			t.Fatalf("token with trailing whitespace: %v", resps)
		}
	})

	// conflict sends op with body and wants 409 lease_lost, nothing changed.
	conflict := func(t *testing.T, job, op, body string) {
		t.Helper()
		e.unchanged(t, func() {
			resps := e.exchange(t, rawPost("/leases/"+job+"/"+op, body, ""), 1)
			if len(resps) != 1 {
				t.Fatalf("%s %s %s: %v", op, job, body, resps)
			}
			checkRefusal(t, resps[0], http.StatusConflict, api.CodeLeaseLost, fromHandlers)
		})
	}

	t.Run("WrongOwner", func(t *testing.T) {
		conflict(t, held, "heartbeat", `{"owner":"replica-b","token":1}`)
		conflict(t, held, "release", `{"owner":"replica-b","token":1}`)
		conflict(t, held, "release", `{"owner":"replica-b","token":1,"outcome":"failed"}`)
	})

	t.Run("TokenOfAnotherJob", func(t *testing.T) {
		// replica-a also holds other, at token 3; that token is not held's.
		other := uniqueJob("auth-other")
		for range 2 {
			l := c.lease("acquire", other, `{"owner":"replica-a"}`)
			c.lease("release", other, fmt.Sprintf(`{"owner":"replica-a","token":%v}`, l["token"]))
		}
		if l := c.lease("acquire", other, `{"owner":"replica-a"}`); l["token"] != 3.0 {
			t.Fatalf("setup: token %v, want 3", l["token"])
		}
		conflict(t, held, "heartbeat", `{"owner":"replica-a","token":3}`)
		conflict(t, held, "release", `{"owner":"replica-a","token":3}`)
	})

	t.Run("StaleTokenAfterTakeover", func(t *testing.T) {
		job := uniqueJob("auth-stale")
		c.lease("acquire", job, `{"owner":"replica-a","ttlMs":50}`)
		c.waitExpired(job)
		if l := c.lease("acquire", job, `{"owner":"replica-b","ttlMs":3600000}`); l["token"] != 2.0 {
			t.Fatalf("takeover: token %v, want 2", l["token"])
		}
		conflict(t, job, "heartbeat", `{"owner":"replica-a","token":1}`)
		conflict(t, job, "release", `{"owner":"replica-a","token":1}`)
		conflict(t, job, "heartbeat", `{"owner":"replica-a","token":2}`) // the new token, the old owner
	})

	t.Run("ReplayedReleaseAfterNewGrant", func(t *testing.T) {
		job := uniqueJob("auth-replay")
		c.lease("acquire", job, `{"owner":"replica-a"}`)
		c.lease("release", job, `{"owner":"replica-a","token":1}`)
		c.lease("acquire", job, `{"owner":"replica-b"}`)
		conflict(t, job, "release", `{"owner":"replica-a","token":1}`)
		conflict(t, job, "release", `{"owner":"replica-a","token":1,"outcome":"failed"}`)
	})

	t.Run("Revoke", func(t *testing.T) {
		job := uniqueJob("auth-revoke")
		c.lease("acquire", job, `{"owner":"replica-a","ttlMs":3600000}`)
		e.unchanged(t, func() {
			raw := "DELETE /leases/" + job + " HTTP/1.1\r\nHost: leaseapi\r\n" + bearer(hostileAPIToken) + "\r\n"
			resps := e.exchange(t, raw, 1)
			if len(resps) != 1 {
				t.Fatalf("DELETE with an API token: %v", resps)
			}
			checkRefusal(t, resps[0], http.StatusForbidden, api.CodeForbidden, fromHandlers)
		})
		status, l := c.do(http.MethodDelete, "/leases/"+job, hostileAdminToken, "")
		if status != http.StatusOK || l["state"] != "revoked" || l["token"] != 2.0 {
			t.Fatalf("DELETE with the admin token: %d %v, want 200 revoked with token 2", status, l)
		}
		var outcome string
		if err := e.db.QueryRowContext(t.Context(), `SELECT outcome FROM runs WHERE job_id = $1 AND token = 1`, job).Scan(&outcome); err != nil || outcome != "revoked" {
			t.Errorf("run of the revoked grant: %q, %v; want revoked", outcome, err)
		}
		conflict(t, job, "heartbeat", `{"owner":"replica-a","token":1}`)
		conflict(t, job, "release", `{"owner":"replica-a","token":1}`)
	})
}
