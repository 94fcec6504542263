package webhook_test

import (
	"net/netip"
	"net/url"
	"testing"

	"github.com/leaseapi/leaseapi/webhook"
)

// FuzzCheckURL: CheckURL never panics, and never accepts a URL whose host
// is an IP literal that a webhook must not reach, or an IPv4 address in a
// form other than a dotted quad, or whose port is out of range.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/leaseapi", "http://127.0.0.1:8080/", "http://[::1]/", "http://2130706433/",
		"http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/", "http://0/", "http://[64:ff9b::7f00:1]/",
		"http://[2002:a00:1::]/", "http://[fe80::1%25eth0]/", "http://example.com:0/", "http://8.8.8.8:65535/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if webhook.CheckURL(raw, false) != nil {
			_ = webhook.CheckURL(raw, true)
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("CheckURL accepted %q, which url.Parse refuses: %v", raw, err)
		}
		host := u.Hostname()
		if addr, err := netip.ParseAddr(host); err == nil {
			if e, ok := webhook.Lookup(addr.Unmap()); ok && e.Reach != webhook.ReachTrue {
				t.Fatalf("CheckURL accepted %q: %s is in %s (%s)", raw, addr, e.Prefix, e.Name)
			}
		} else if _, ipv4 := webhook.ReadIPv4Host(host); ipv4 {
			t.Fatalf("CheckURL accepted %q, whose host reads as an IPv4 address", raw)
		}
		if p := u.Port(); p == "0" || len(p) > 5 {
			t.Fatalf("CheckURL accepted %q, port %q", raw, p)
		}
	})
}
