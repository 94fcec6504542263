package handlers_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/handlers"
)

// Regression tests for what the hostile suite (cmd/leaseapi/hostile_test.go)
// found over the real server; here they run on the handler alone.

// TestChunkedRequestClosesConnection: a request with both Content-Length
// and Transfer-Encoding hides a second request in what its Content-Length
// calls the body. net/http frames it by Transfer-Encoding alone (RFC 9112
// §6.1) and would then serve the hidden acquire from the same connection;
// the handlers close the connection after any chunked request instead.
func TestChunkedRequestClosesConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	hidden := b.job("smuggled")
	inner := fmt.Sprintf("POST /leases/%s/acquire HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"owner\":\"a\"}", hidden)
	outer := fmt.Sprintf("POST /leases/%s/acquire HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		b.job("outer"), 5+len(inner))

	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(b.server.URL, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // a bound, not a measurement
	if _, err := io.WriteString(conn, outer+inner); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Errorf("chunked request with an empty body: status %d, close %v; want 400 and Connection: close", resp.StatusCode, resp.Close)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after the chunked request: read %q, %v; want EOF (the hidden request not served)", rest, err)
	}
	wantProblem(t, b.get(t, "/leases/"+hidden), http.StatusNotFound, api.CodeNotFound)
}

// TestUnknownMethod: chi sends a method it does not know to the 405
// handler whatever the path; a path that no method serves is a 404, not a
// 405 with an empty Allow.
func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, openSQLite(t), defaultOptions())
	resp := b.doInvalid(t, request{method: "BREW", path: "/coffee"})
	wantProblem(t, resp, http.StatusNotFound, api.CodeNotFound)
	if _, ok := resp.header["Allow"]; ok {
		t.Errorf("404 with Allow %q", resp.header.Get("Allow"))
	}
	resp = b.doInvalid(t, request{method: "BREW", path: "/leases/" + b.job("x")})
	wantProblem(t, resp, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
	if got := resp.header.Get("Allow"); got != "GET, DELETE" {
		t.Errorf("Allow %q, want GET, DELETE", got)
	}
}

// failingBody fails like a connection whose read deadline passed.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080},
		Addr: &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 55555}, Err: errors.New("i/o timeout")}
}

func (failingBody) Close() error { return nil }

// TestBodyReadError: a body that cannot be read (ReadTimeout, a client gone
// mid-body) is a 400 whose detail does not echo the error, which names the
// server's and the client's addresses.
func TestBodyReadError(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	opts.Open = true // httptest's requests come from 192.0.2.1 to example.com
	h := handlers.New(openSQLite(t), opts)
	req := httptest.NewRequest(http.MethodPost, "/leases/job/acquire", nil)
	req.Body = failingBody{}
	req.ContentLength = 100
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
	}
	for _, leak := range []string{"10.1.2.3", "10.9.8.7", "i/o timeout", "tcp"} {
		if strings.Contains(rec.Body.String(), leak) {
			t.Errorf("detail leaks %q: %s", leak, rec.Body)
		}
	}
}
