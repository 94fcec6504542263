package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/testca"
)

// tlsBundle is a CA and the certificate files of one server.
type tlsBundle struct {
	ca                *testca.CA
	dir               string
	certFile, keyFile string
}

// newTLSBundle writes a certificate named commonName, signed by a new CA,
// into a temporary directory.
func newTLSBundle(t *testing.T, commonName string) *tlsBundle {
	t.Helper()
	b := &tlsBundle{ca: testca.New(t, "leaseapi test CA"), dir: t.TempDir()}
	b.rotate(t, commonName)
	return b
}

// rotate replaces the certificate and its key with a new pair named
// commonName, as cert-manager renews one.
func (b *tlsBundle) rotate(t *testing.T, commonName string) {
	t.Helper()
	certPEM, keyPEM := b.ca.Issue(t, commonName)
	b.certFile = testca.WriteFile(t, b.dir, "tls.crt", certPEM)
	b.keyFile = testca.WriteFile(t, b.dir, "tls.key", keyPEM)
}

// client returns a client that trusts only the bundle's CA. Each client has
// its own connections.
func (b *tlsBundle) client(t *testing.T) *http.Client {
	t.Helper()
	transport := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: b.ca.Pool()},
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: waitTimeout}
}

// startTLS runs serveWith with TLS from b; every handshake looks at the
// files, so a rotation is seen by the next connection.
func startTLS(t *testing.T, b *tlsBundle) string {
	t.Helper()
	cfg := serveConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = b.certFile, b.keyFile
	srv := startServer(t, func(ctx context.Context, stderr io.Writer) error {
		logger, err := newLogger(cfg, stderr)
		if err != nil {
			return err
		}
		limits := defaultServerLimits()
		limits.certCheckInterval = 0
		return serveWith(ctx, cfg, logger, limits)
	})
	return strings.Replace(srv.url, "http://", "https://", 1)
}

// served is what one GET tells about its connection.
type served struct {
	proto      string // HTTP/1.1, HTTP/2.0
	commonName string // of the server's certificate
	reused     bool   // the connection served a request before
}

func get(t *testing.T, c *http.Client, url string) served {
	t.Helper()
	var out served
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { out.reused = info.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200", url, resp.StatusCode)
	}
	if resp.TLS == nil {
		t.Fatalf("GET %s: not over TLS", url)
	}
	out.proto = resp.Proto
	out.commonName = resp.TLS.PeerCertificates[0].Subject.CommonName
	return out
}

// TestTLSServesHTTP2AndReloadsTheCertificate: the server speaks HTTP/2 over
// TLS; after the files are replaced a new connection gets the new
// certificate, a connection opened before keeps working, and no request
// fails meanwhile, without a restart.
func TestTLSServesHTTP2AndReloadsTheCertificate(t *testing.T) {
	t.Parallel()
	b := newTLSBundle(t, "leaseapi-1")
	base := startTLS(t, b)

	old := b.client(t)
	got := get(t, old, base+"/healthz")
	if got.proto != "HTTP/2.0" || got.commonName != "leaseapi-1" {
		t.Fatalf("first GET over %s with certificate %q, want HTTP/2.0 with leaseapi-1", got.proto, got.commonName)
	}

	// Requests on new connections all through the rotation: none fails
	// (a handshake between the two file writes gets the old pair).
	stop, loopDone := make(chan struct{}), make(chan error, 1)
	fresh := b.client(t)
	fresh.Transport.(*http.Transport).DisableKeepAlives = true
	go func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				loopDone <- nil
				return
			default:
			}
			resp, err := fresh.Get(base + "/healthz")
			if err != nil {
				loopDone <- fmt.Errorf("request %d during the rotation: %w", n, err)
				return
			}
			resp.Body.Close()
		}
	}()

	b.rotate(t, "leaseapi-2")

	if got := get(t, b.client(t), base+"/readyz"); got.commonName != "leaseapi-2" {
		t.Errorf("a new connection after the rotation got certificate %q, want leaseapi-2", got.commonName)
	}
	got = get(t, old, base+"/readyz")
	if !got.reused || got.commonName != "leaseapi-1" {
		t.Errorf("the connection opened before the rotation: reused %v, certificate %q; want it reused with leaseapi-1", got.reused, got.commonName)
	}
	close(stop)
	if err := <-loopDone; err != nil {
		t.Error(err)
	}
}

// TestTLSHTTP1: a client that offers no h2 is served HTTP/1.1.
func TestTLSHTTP1(t *testing.T) {
	t.Parallel()
	b := newTLSBundle(t, "leaseapi")
	base := startTLS(t, b)
	c := b.client(t)
	c.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	if got := get(t, c, base+"/healthz"); got.proto != "HTTP/1.1" {
		t.Errorf("proto %s, want HTTP/1.1", got.proto)
	}
}

// TestTLSMinVersion: TLS 1.1 is refused.
func TestTLSMinVersion(t *testing.T) {
	t.Parallel()
	b := newTLSBundle(t, "leaseapi")
	base := startTLS(t, b)
	c := b.client(t)
	// Go's client refuses TLS 1.1 itself unless told otherwise.
	cfg := c.Transport.(*http.Transport).TLSClientConfig
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	resp, err := c.Get(base + "/healthz")
	if err == nil {
		resp.Body.Close()
		t.Fatal("a TLS 1.1 client was served, want the handshake refused")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("error %q, want a protocol version alert", err)
	}
}

// TestTLSConfigErrors: files that do not make a certificate stop the start
// with one line naming the variables.
func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	one := newTLSBundle(t, "one")
	other := newTLSBundle(t, "other")
	tests := []struct {
		name              string
		certFile, keyFile string
		want              []string
	}{
		{
			name:     "KeyOfAnotherCertificate",
			certFile: one.certFile, keyFile: other.keyFile,
			want: []string{"LEASEAPI_TLS_CERT_FILE (" + one.certFile + ") and LEASEAPI_TLS_KEY_FILE (" + other.keyFile + ")", "private key does not match public key"},
		},
		{
			name:     "KeyIsACertificate",
			certFile: one.certFile, keyFile: one.certFile,
			want: []string{"LEASEAPI_TLS_CERT_FILE", "LEASEAPI_TLS_KEY_FILE"},
		},
		{
			name:     "MissingCert",
			certFile: one.dir + "/missing.crt", keyFile: one.keyFile,
			want: []string{"LEASEAPI_TLS_CERT_FILE: open " + one.dir + "/missing.crt: no such file or directory"},
		},
		{
			name:     "MissingKey",
			certFile: one.certFile, keyFile: one.dir + "/missing.key",
			want: []string{"LEASEAPI_TLS_KEY_FILE: open " + one.dir + "/missing.key: no such file or directory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			cfg.TLSCertFile, cfg.TLSKeyFile = tt.certFile, tt.keyFile
			_, err := newTLSConfig(cfg, slog.New(slog.DiscardHandler), 0)
			if err == nil {
				t.Fatal("newTLSConfig() succeeded, want an error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is not one line", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// servedName is the common name of the certificate a handshake gets now.
func servedName(t *testing.T, r *certReloader) string {
	t.Helper()
	cert, err := r.getCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.Subject.CommonName
}

// TestCertReloaderHalfWritten: a certificate written before its key is not
// served; the previous pair stays until the key follows.
func TestCertReloaderHalfWritten(t *testing.T) {
	t.Parallel()
	b := newTLSBundle(t, "first")
	logs := &strings.Builder{}
	r := &certReloader{certFile: b.certFile, keyFile: b.keyFile, now: time.Now, logger: slog.New(slog.NewTextHandler(logs, nil))}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}

	certPEM, keyPEM := b.ca.Issue(t, "second")
	testca.WriteFile(t, b.dir, "tls.crt", certPEM)
	for range 2 {
		if got := servedName(t, r); got != "first" {
			t.Fatalf("with the new certificate and the old key: served %q, want first", got)
		}
	}
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs)
	}

	testca.WriteFile(t, b.dir, "tls.key", keyPEM)
	if got := servedName(t, r); got != "second" {
		t.Errorf("with both files new: served %q, want second", got)
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("no reload logged:\n%s", logs)
	}
}

// TestCertReloaderInterval: the files are looked at once per interval, not
// at every handshake.
func TestCertReloaderInterval(t *testing.T) {
	t.Parallel()
	b := newTLSBundle(t, "first")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := &certReloader{
		certFile: b.certFile, keyFile: b.keyFile, interval: time.Second,
		now: func() time.Time { return now }, logger: slog.New(slog.DiscardHandler),
	}
	if err := r.load(); err != nil {
		t.Fatal(err)
	}
	b.rotate(t, "second")
	now = now.Add(time.Second - time.Nanosecond)
	if got := servedName(t, r); got != "first" {
		t.Errorf("within the interval: served %q, want first", got)
	}
	now = now.Add(time.Nanosecond)
	if got := servedName(t, r); got != "second" {
		t.Errorf("after the interval: served %q, want second", got)
	}
}
