package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Timeout bounds one delivery attempt, from dialling to the end of the
// response headers and body.
const Timeout = 10 * time.Second

// ErrForbiddenTarget reports an address a webhook must not reach: loopback,
// private, link-local, multicast, unspecified, CGNAT, benchmarking, reserved,
// or an IPv6 form (IPv4-mapped, IPv4-compatible, NAT64, 6to4) of one.
var ErrForbiddenTarget = errors.New("webhook: target address is not public")

// ErrBadURL reports a URL that is not absolute http or https with a host.
var ErrBadURL = errors.New("webhook: url must be absolute http or https with a host")

// refused are the IPv4 ranges the netip predicates do not cover.
var refused4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // CGNAT (RFC 6598)
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking (RFC 2544)
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and the broadcast address
}

// IPv6 prefixes that embed an IPv4 address, and where it sits.
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: the last 32 bits
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215: local use, refused
	sixToFour  = netip.MustParsePrefix("2002::/16")      // RFC 3056: bits 16–48
	compat     = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible
	siteLocal  = netip.MustParsePrefix("fec0::/10")      // deprecated site-local
)

// CheckAddr returns ErrForbiddenTarget when a webhook must not reach addr.
func CheckAddr(addr netip.Addr) error {
	addr = addr.WithZone("")
	if !addr.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrForbiddenTarget)
	}
	addr = addr.Unmap()
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64Local.Contains(addr), siteLocal.Contains(addr):
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, addr)
		case nat64.Contains(addr), compat.Contains(addr) && !addr.IsUnspecified() && !addr.IsLoopback():
			if err := check4(netip.AddrFrom4([4]byte(b[12:16]))); err != nil {
				return fmt.Errorf("%w: %s embeds it", err, addr)
			}
		case sixToFour.Contains(addr):
			if err := check4(netip.AddrFrom4([4]byte(b[2:6]))); err != nil {
				return fmt.Errorf("%w: %s embeds it", err, addr)
			}
		}
	}
	if addr.Is4() {
		return check4(addr)
	}
	return checkCommon(addr)
}

func check4(addr netip.Addr) error {
	for _, p := range refused4 {
		if p.Contains(addr) {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, addr)
		}
	}
	return checkCommon(addr)
}

func checkCommon(addr netip.Addr) error {
	if addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsMulticast() ||
		addr.IsUnspecified() || addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() {
		return fmt.Errorf("%w: %s", ErrForbiddenTarget, addr)
	}
	return nil
}

// Control is a net.Dialer Control hook that refuses a connection to an
// address CheckAddr forbids. It runs after name resolution, on the address
// actually dialled, so a name that resolves to a public address when a
// webhook is created and to a private one later (DNS rebinding) is refused.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %v", ErrForbiddenTarget, network, address, err)
	}
	return CheckAddr(ap.Addr())
}

// CheckURL validates a webhook URL at creation: absolute http or https with
// a host; when the host is an IP literal it must pass CheckAddr unless
// allowPrivate. A host name is checked when it is dialled (Control).
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
		return ErrBadURL
	}
	if allowPrivate {
		return nil
	}
	if addr, err := netip.ParseAddr(u.Hostname()); err == nil {
		return CheckAddr(addr)
	}
	return nil
}

// NewClient returns the HTTP client that delivers webhooks: a 10 s timeout,
// no proxy (a proxy would dial for us and escape the check), no redirects
// (the 3xx is the answer), and, unless allowPrivate, the dial check.
func NewClient(allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: Timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   Timeout,
		ResponseHeaderTimeout: Timeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Redact is how a webhook's URL is shown after its creation: the scheme
// and the host (with its port), and "…" for whatever followed, since a
// path or query may hold a secret (a Slack URL's path is its credential).
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	out := u.Scheme + "://" + u.Host + "/"
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		out += "…"
	}
	return out
}
