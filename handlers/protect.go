package handlers

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/leaseapi/leaseapi/api"
)

// Protected open mode: while the API is open (no credential was ever
// created, no token configured) and Options.Open is false, only a loopback
// peer naming a loopback Host is served, as Redis's protected mode serves
// only loopback clients while it has no password. The Host check keeps a
// web page that rebinds its own DNS name to 127.0.0.1 (DNS rebinding) from
// driving the API through the browser of someone on the host.

// unprotectedPaths are answered to anyone: probes, scrapes and the spec
// carry nothing an open API could be harmed by.
var unprotectedPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/openapi.yaml": true}

// protect refuses, while the API is open and Options.Open is false, every
// request but those of unprotectedPaths that does not come from a
// loopback peer naming a loopback Host.
func (h *handler) protect(next http.Handler) http.Handler {
	if h.openToAll {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unprotectedPaths[r.URL.Path] || loopbackPeer(r.RemoteAddr) && loopbackHost(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		snap, err := h.auth.snapshot(r.Context())
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		if h.auth.open(snap) {
			writeProblem(w, r, &requestError{status: http.StatusForbidden, code: api.CodeForbidden,
				detail: "the API is open (no credential exists yet), so it answers only requests from this host to localhost; " +
					"create the first credential (leaseapi credentials create --name NAME --role admin --scope '*') " +
					"or set LEASEAPI_OPEN=true to serve every peer without one"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackPeer reports whether remoteAddr (host:port, as net/http sets
// it) is in 127.0.0.0/8 or ::1, an IPv4-mapped loopback address included.
func loopbackPeer(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	return a.Is4() && a.As4()[0] == 127 || a == netip.IPv6Loopback()
}

// loopbackHost reports whether host (a Host header, with or without a
// port) is localhost, a name under .localhost (RFC 6761: always the
// loopback), an address in 127.0.0.0/8 or [::1].
func loopbackHost(host string) bool {
	name := host
	if h, port, err := net.SplitHostPort(host); err == nil && validPort(port) {
		name = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		name = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") {
		return false // an IPv6 address without brackets, or a bad port
	}
	name = strings.ToLower(name)
	if name == "localhost" || strings.HasSuffix(name, ".localhost") && validLabels(name) {
		return true
	}
	a, err := netip.ParseAddr(name)
	if err != nil || a.Zone() != "" {
		return false
	}
	if a.Is4() {
		return a.As4()[0] == 127
	}
	return a == netip.IPv6Loopback() && strings.HasPrefix(host, "[")
}

func validPort(p string) bool {
	if len(p) == 0 || len(p) > 5 {
		return false
	}
	for _, c := range []byte(p) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validLabels reports whether name is dot-separated non-empty labels of
// letters, digits and hyphens.
func validLabels(name string) bool {
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
