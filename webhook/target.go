package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timeout bounds one delivery attempt by default, from dialling to the end
// of the response headers and body (NewClient takes another).
const Timeout = 10 * time.Second

// ErrForbiddenTarget reports an address a webhook must not reach: its most
// specific entry in IANA's special-purpose address registries
// (SpecialPurposes) is not globally reachable, or it embeds an IPv4
// address that is not (IPv4-compatible, NAT64, 6to4, Teredo). A
// *ForbiddenError says which entry.
var ErrForbiddenTarget = errors.New("webhook: target address is not public")

// ErrBadURL reports a URL that is not absolute http or https with a host.
var ErrBadURL = errors.New("webhook: url must be absolute http or https with a host")

// ErrIPv4Form reports a URL host that a URL parser reads as an IPv4
// address but that is not written as a dotted quad: decimal (2130706433),
// hex (0x7f000001), octal (0177.0.0.1), short (127.1), 0. Such a host is
// refused whatever it reaches: clients and resolvers differ on what it
// means. An *IPv4FormError says how it reads.
var ErrIPv4Form = errors.New("webhook: url host is an IPv4 address not written as a dotted quad")

// ErrBadPort reports a URL port outside 1–65535.
var ErrBadPort = errors.New("webhook: url port must be 1 to 65535")

// ForbiddenError is an ErrForbiddenTarget: Addr is refused because of
// Entry, its own or, when Embedded is valid, that of the IPv4 address it
// embeds.
type ForbiddenError struct {
	Addr     netip.Addr
	Embedded netip.Addr
	Entry    SpecialPurpose
}

// Reason says why, for a user: "127.0.0.1 is in 127.0.0.0/8 (Loopback,
// RFC 1122), which is not globally reachable".
func (e *ForbiddenError) Reason() string {
	if !e.Addr.IsValid() {
		return "the address is not valid"
	}
	in := e.Addr.String()
	if e.Embedded.IsValid() {
		in += " embeds " + e.Embedded.String() + ", which"
	}
	reach := "which is not globally reachable"
	if e.Entry.Reach == ReachNA {
		reach = "which is not a destination (globally reachable: N/A)"
	}
	return fmt.Sprintf("%s is in %s (%s, %s), %s", in, e.Entry.Prefix, e.Entry.Name, e.Entry.RFC, reach)
}

func (e *ForbiddenError) Error() string { return ErrForbiddenTarget.Error() + ": " + e.Reason() }

// Is makes a ForbiddenError an ErrForbiddenTarget.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbiddenTarget }

// IPv4FormError is an ErrIPv4Form: Host reads as Addr, or as no address
// at all when Addr is not valid (a part out of range).
type IPv4FormError struct {
	Host string
	Addr netip.Addr
}

func (e *IPv4FormError) Error() string { return ErrIPv4Form.Error() + ": " + e.Reason() }

// Is makes an IPv4FormError an ErrIPv4Form.
func (e *IPv4FormError) Is(target error) bool { return target == ErrIPv4Form }

// Reason says what is wrong and what to write instead.
func (e *IPv4FormError) Reason() string {
	host := e.Host
	if len(host) > 64 {
		host = host[:64] + "…"
	}
	if !e.Addr.IsValid() {
		return fmt.Sprintf("host %q ends in a number, so a URL parser reads it as an IPv4 address, and it is not a valid one; write an IPv4 address as four decimal numbers a.b.c.d, or use a host name", host)
	}
	return fmt.Sprintf("host %q is the IPv4 address %s written in another form; write it as %s", host, e.Addr, e.Addr)
}

// CheckAddr returns a *ForbiddenError when a webhook must not reach addr:
// its most specific SpecialPurposes entry is not globally reachable, or it
// is an IPv6 form that embeds an IPv4 address so refused. An IPv4-mapped
// address is the IPv4 address it maps (a socket given one talks IPv4).
func CheckAddr(addr netip.Addr) error {
	addr = addr.WithZone("")
	if !addr.IsValid() {
		return &ForbiddenError{}
	}
	addr = addr.Unmap()
	if e, ok := Lookup(addr); ok && e.Reach != ReachTrue {
		return &ForbiddenError{Addr: addr, Entry: e}
	}
	for _, v4 := range embedded(addr) {
		if e, ok := Lookup(v4); ok && e.Reach != ReachTrue {
			return &ForbiddenError{Addr: addr, Embedded: v4, Entry: e}
		}
	}
	return nil
}

// IPv6 blocks that embed an IPv4 address.
var (
	compat    = netip.MustParsePrefix("::/96")        // deprecated IPv4-compatible: the last 32 bits
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // RFC 3056: bits 16–48
	teredo    = netip.MustParsePrefix("2001::/32")    // RFC 4380: the server, bits 32–64; the client, the last 32 bits inverted
)

// embedded are the IPv4 addresses an IPv6 address carries.
func embedded(addr netip.Addr) []netip.Addr {
	if !addr.Is6() {
		return nil
	}
	b := addr.As16()
	last := netip.AddrFrom4([4]byte(b[12:16]))
	switch {
	case compat.Contains(addr) && !addr.IsUnspecified() && !addr.IsLoopback(), nat64.Contains(addr):
		return []netip.Addr{last}
	case sixToFour.Contains(addr):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case teredo.Contains(addr):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)}
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

// CheckURL validates a webhook URL at creation: absolute http or https
// with a host and no user information (ErrBadURL), a port, if any, of
// 1–65535 (ErrBadPort), a host that is not an IPv4 address in a form other
// than a dotted quad (ErrIPv4Form, as the WHATWG URL host parser reads a
// host that ends in a number), and, unless allowPrivate, a host IP literal
// that CheckAddr accepts (ErrForbiddenTarget). A host name is checked on
// every address it resolves to when a delivery dials it (Control).
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return ErrBadURL
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w, not %.16s", ErrBadPort, p)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%w, not empty", ErrBadPort)
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if allowPrivate {
			return nil
		}
		return CheckAddr(addr)
	}
	if addr, ok := ReadIPv4Host(host); ok {
		return &IPv4FormError{Host: host, Addr: addr}
	}
	return nil
}

// ReadIPv4Host reads host as the WHATWG URL host parser does once a host
// ends in a number: true when it is read as an IPv4 address (addr, or an
// invalid addr when the parser fails on it), false when it is a name.
// Dotted quads come back as well: the caller compares.
func ReadIPv4Host(host string) (addr netip.Addr, ipv4 bool) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last == "" {
		return netip.Addr{}, false
	}
	if _, ok := ipv4Number(last); !ok && strings.TrimLeft(last, "0123456789") != "" {
		return netip.Addr{}, false // ends in a label: a name
	}
	if len(parts) > 4 {
		return netip.Addr{}, true
	}
	var n uint64
	for i, p := range parts {
		v, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, true
		}
		if i < len(parts)-1 {
			if v > 255 {
				return netip.Addr{}, true
			}
			n |= v << (8 * (3 - i))
			continue
		}
		if v >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, true
		}
		n |= v
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// ipv4Number reads one part as the WHATWG IPv4 number parser does: 0x or
// 0X then hex, a leading 0 then octal, else decimal; "0x" alone is 0.
// Values past 2^32 are cut to it (they fail every range check anyway).
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	var v uint64
	for _, c := range []byte(s) {
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = min(v*base+d, 1<<32)
	}
	return v, true
}

// NewClient returns the HTTP client that delivers webhooks: timeout (0 for
// Timeout) bounds each attempt, no proxy (a proxy would dial for us and
// escape the check), no redirects (the 3xx is the answer), and, unless
// allowPrivate, the dial check.
func NewClient(allowPrivate bool, timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = Timeout
	}
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
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
