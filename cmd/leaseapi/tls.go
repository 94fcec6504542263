package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// certCheckInterval is how often, at most, a TLS handshake makes the server
// look at its certificate files again. cert-manager renews a certificate
// days before it expires, so a second of delay costs nothing, and a burst of
// handshakes reads the files once.
const certCheckInterval = time.Second

// newTLSConfig returns the server's TLS configuration when
// LEASEAPI_TLS_CERT_FILE and LEASEAPI_TLS_KEY_FILE are set, and nil (plain
// HTTP) when they are not. The certificate is loaded here, so that a missing
// file or a key that does not match its certificate stops the start.
func newTLSConfig(cfg Config, logger *slog.Logger, checkInterval time.Duration) (*tls.Config, error) {
	if cfg.TLSCertFile == "" {
		return nil, nil
	}
	r := &certReloader{
		certFile: cfg.TLSCertFile,
		keyFile:  cfg.TLSKeyFile,
		interval: checkInterval,
		now:      time.Now,
		logger:   logger,
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.getCertificate,
		// h2 first: net/http serves HTTP/2 to the clients that offer it.
		NextProtos: []string{"h2", "http/1.1"},
	}, nil
}

// serveOn serves srv on ln, over TLS when srv has a TLS configuration.
func serveOn(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		// The certificate comes from TLSConfig.GetCertificate.
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// certReloader serves the certificate in certFile and keyFile, and loads it
// again when the files change: cert-manager writes a renewed certificate
// into the Secret, and the kubelet swaps the mounted files (a symbolic link,
// ..data, to a new directory). A handshake looks at the files at most once
// per interval and compares their contents with the ones it serves, which
// catches a swap whatever the files' times say. Connections already open
// keep the certificate they were made with; new ones get the new one, with
// no restart.
//
// A pair that does not load (a cert rewritten before its key, a half-written
// file) is not served: the previous certificate stays until the files agree
// again, and each new failure is logged once.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration
	now               func() time.Time
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certPEM []byte
	keyPEM  []byte
	checked time.Time
	// failed is the last failure to load, logged once.
	failed string
}

// load reads and parses the files; the start fails on its error.
func (r *certReloader) load() error {
	certPEM, keyPEM, err := r.read()
	if err != nil {
		return err
	}
	cert, err := r.parse(certPEM, keyPEM)
	if err != nil {
		return err
	}
	r.cert, r.certPEM, r.keyPEM, r.checked = cert, certPEM, keyPEM, r.now()
	return nil
}

func (r *certReloader) read() (certPEM, keyPEM []byte, err error) {
	certPEM, err = os.ReadFile(r.certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key("TLS_CERT_FILE"), err)
	}
	keyPEM, err = os.ReadFile(r.keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key("TLS_KEY_FILE"), err)
	}
	return certPEM, keyPEM, nil
}

func (r *certReloader) parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair tells which of the two it could not use ("failed to
		// find any PEM data in key input", "private key does not match
		// public key"); the variables say where they came from.
		return nil, fmt.Errorf("%s (%s) and %s (%s): %w",
			key("TLS_CERT_FILE"), r.certFile, key("TLS_KEY_FILE"), r.keyFile, err)
	}
	return &cert, nil
}

// getCertificate is the TLS configuration's GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		r.reload()
	}
	return r.cert, nil
}

// reload loads the files when their contents changed. It runs with r.mu
// held.
func (r *certReloader) reload() {
	certPEM, keyPEM, err := r.read()
	if err == nil && bytes.Equal(certPEM, r.certPEM) && bytes.Equal(keyPEM, r.keyPEM) {
		return
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = r.parse(certPEM, keyPEM)
	}
	if err != nil {
		if err.Error() != r.failed {
			r.failed = err.Error()
			r.logger.Warn("TLS certificate files changed but do not load; still serving the previous certificate", slog.Any("error", err))
		}
		return
	}
	r.cert, r.certPEM, r.keyPEM = cert, certPEM, keyPEM
	r.failed = ""
	attrs := []any{slog.String("cert_file", r.certFile)}
	if cert.Leaf != nil {
		attrs = append(attrs, slog.String("subject", cert.Leaf.Subject.String()),
			slog.Time("not_after", cert.Leaf.NotAfter))
	}
	r.logger.Info("TLS certificate reloaded", attrs...)
}
