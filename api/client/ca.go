package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// WithCAFile returns a ClientOption that makes the client trust the CA
// certificates in the PEM file at path, besides the system's roots: for a
// leaseapi whose certificate comes from a private CA (cert-manager's CA
// issuer, a company PKI). The file is read when the client is created.
//
// It changes a copy of the client's *http.Client and of its *http.Transport
// (http.DefaultTransport when it has none: proxies from the environment,
// HTTP/2), so give it after WithHTTPClient, if any. An empty path changes
// nothing.
func WithCAFile(path string) ClientOption {
	return func(c *Client) error {
		if path == "" {
			return nil
		}
		pool, err := caPool(path)
		if err != nil {
			return err
		}
		hc := &http.Client{}
		if c.Client != nil {
			own, ok := c.Client.(*http.Client)
			if !ok {
				return fmt.Errorf("CA file %s: the HTTP client is a %T, not an *http.Client; give it a transport that trusts the CA instead", path, c.Client)
			}
			copied := *own
			hc = &copied
		}
		base := http.DefaultTransport.(*http.Transport)
		if hc.Transport != nil {
			own, ok := hc.Transport.(*http.Transport)
			if !ok {
				return fmt.Errorf("CA file %s: the HTTP client's transport is a %T, not an *http.Transport; give it a TLS configuration that trusts the CA instead", path, hc.Transport)
			}
			base = own
		}
		transport := base.Clone()
		if transport.TLSClientConfig == nil {
			transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		transport.TLSClientConfig.RootCAs = pool
		hc.Transport = transport
		c.Client = hc
		return nil
	}
}

// caPool is the system's roots plus the certificates in the PEM file.
func caPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", path)
	}
	return pool, nil
}
