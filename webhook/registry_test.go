package webhook_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/webhook"
)

// Every entry of the table, entry by entry: its first and last address
// are judged by it (unless a more specific entry holds them), and the
// most specific entry wins over the block around it.
func TestSpecialPurposesEntryByEntry(t *testing.T) {
	t.Parallel()
	for _, e := range webhook.SpecialPurposes {
		first := e.Prefix.Masked().Addr()
		last := lastAddr(e.Prefix)
		for _, a := range []netip.Addr{first, last} {
			got, ok := webhook.Lookup(a)
			if !ok {
				t.Errorf("%s (%s): Lookup(%s) found nothing", e.Prefix, e.Name, a)
				continue
			}
			if got.Prefix.Bits() < e.Prefix.Bits() {
				t.Errorf("%s: Lookup(%s) = %s, a less specific entry", e.Prefix, a, got.Prefix)
			}
			if got.Prefix != e.Prefix {
				continue // a more specific entry holds this end
			}
			if a.Is4In6() || e.Prefix.String() == "64:ff9b::/96" {
				continue // judged by the IPv4 address they carry (TestEmbeddedIPv4)
			}
			err := webhook.CheckAddr(a)
			if refused := errors.Is(err, webhook.ErrForbiddenTarget); refused != (e.Reach != webhook.ReachTrue) {
				t.Errorf("%s (%s, reachable %s): CheckAddr(%s) = %v", e.Prefix, e.Name, e.Reach, a, err)
			}
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestMostSpecificEntryWins(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.0.9":        "192.0.0.9/32",  // true inside the false /24
		"192.0.0.11":       "192.0.0.0/24",  // false
		"192.0.0.3":        "192.0.0.0/29",  // false
		"0.0.0.0":          "0.0.0.0/32",    // within 0/8
		"2001:1::1":        "2001:1::1/128", // true inside 2001::/23
		"2001:1::4":        "2001::/23",     // false: outside each sub-entry
		"2001:0:1::":       "2001::/32",     // Teredo, N/A
		"2001:3::5":        "2001:3::/32",   // AMT, true
		"2001:2:0:1::":     "2001:2::/48",
		"100:0:0:1::7":     "100:0:0:1::/64",
		"64:ff9b:1::1":     "64:ff9b:1::/48",
		"64:ff9b::1":       "64:ff9b::/96",
		"2620:4f:8000::53": "2620:4f:8000::/48",
	} {
		got, ok := webhook.Lookup(netip.MustParseAddr(addr))
		if !ok || got.Prefix.String() != want {
			t.Errorf("Lookup(%s) = %s, %v; want %s", addr, got.Prefix, ok, want)
		}
	}
	for _, addr := range []string{"8.8.8.8", "2606:4700::1", "192.0.3.1", "2001:200::1"} {
		if got, ok := webhook.Lookup(netip.MustParseAddr(addr)); ok {
			t.Errorf("Lookup(%s) = %s, want no entry", addr, got.Prefix)
		}
	}
}

// IPv6 forms that embed an IPv4 address are judged by it as well.
func TestEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	for addr, refused := range map[string]bool{
		"64:ff9b::808:808":   false, // NAT64 of 8.8.8.8
		"64:ff9b::7f00:1":    true,  // NAT64 of 127.0.0.1
		"64:ff9b::c000:209":  false, // NAT64 of 192.0.2.9... is TEST-NET-1: see below
		"::808:808":          false, // IPv4-compatible 8.8.8.8
		"::7f00:1":           true,
		"::ffff:192.168.0.1": true,
		// Teredo: server 65.54.227.120, client 192.0.2.45 (RFC 4380's example), N/A anyway.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": true,
	} {
		if addr == "64:ff9b::c000:209" {
			refused = true // 192.0.2.9 is documentation
		}
		err := webhook.CheckAddr(netip.MustParseAddr(addr))
		if got := errors.Is(err, webhook.ErrForbiddenTarget); got != refused {
			t.Errorf("CheckAddr(%s) = %v, want refused %v", addr, err, refused)
		}
	}
	var fe *webhook.ForbiddenError
	if err := webhook.CheckAddr(netip.MustParseAddr("64:ff9b::a9fe:a9fe")); !errors.As(err, &fe) ||
		fe.Embedded != netip.MustParseAddr("169.254.169.254") || !strings.Contains(fe.Reason(), "Link Local") {
		t.Errorf("CheckAddr(64:ff9b::a9fe:a9fe) = %v, want it refused for the link-local address it embeds", err)
	}
}

// Hosts the WHATWG URL parser reads as IPv4 addresses in other forms are
// refused at registration, with the address they read as; names and
// dotted quads are not.
func TestCheckURLIPv4Forms(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"2130706433":      "127.0.0.1",
		"0x7f000001":      "127.0.0.1",
		"0X7F.1":          "127.0.0.1",
		"0177.0.0.1":      "127.0.0.1",
		"127.1":           "127.0.0.1",
		"127.0.1":         "127.0.0.1",
		"0":               "0.0.0.0",
		"0x":              "0.0.0.0",
		"8.8.8.8.":        "8.8.8.8",
		"134744072":       "8.8.8.8", // a public address too: the form is refused
		"010.0.0.1":       "8.0.0.1",
		"1.2.3.256":       "",
		"1.2.3.4.5":       "",
		"08":              "",
		"4294967296":      "",
		"foo.0x10":        "",
		"99999999999999":  "",
		"1.0x100.0.0":     "",
		"example.com.123": "",
	} {
		err := webhook.CheckURL("http://"+host+"/hook", true)
		var fe *webhook.IPv4FormError
		if !errors.As(err, &fe) || !errors.Is(err, webhook.ErrIPv4Form) {
			t.Errorf("CheckURL(http://%s/hook) = %v, want ErrIPv4Form", host, err)
			continue
		}
		if got := ""; fe.Addr.IsValid() {
			got = fe.Addr.String()
			if got != want {
				t.Errorf("%s reads as %s, want %s", host, got, want)
			}
		} else if want != "" {
			t.Errorf("%s reads as no address, want %s", host, want)
		}
	}
	for _, u := range []string{"http://example.com/", "http://0x.example/", "http://1.2.3.x/", "http://a1/", "http://8.8.8.8/",
		"https://hooks.example.com:8443/a", "http://xn--nxasmq6b.example/", "http://1e3/"} {
		if err := webhook.CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%s) = %v, want nil", u, err)
		}
	}
}

func TestCheckURLPorts(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://example.com:0/", "http://example.com:65536/", "http://example.com:99999999999/", "http://example.com:/"} {
		if err := webhook.CheckURL(u, true); !errors.Is(err, webhook.ErrBadPort) {
			t.Errorf("CheckURL(%s) = %v, want ErrBadPort", u, err)
		}
	}
	for _, u := range []string{"http://example.com:1/", "http://example.com:65535/", "http://example.com/"} {
		if err := webhook.CheckURL(u, true); err != nil {
			t.Errorf("CheckURL(%s) = %v", u, err)
		}
	}
}
