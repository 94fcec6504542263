package webhook

import "net/netip"

// Reach is an entry's "Globally Reachable" value in IANA's special-purpose
// address registries.
type Reach int

// The values of Globally Reachable. N/A is given to blocks whose addresses
// are not themselves destinations (6to4, Teredo, a deprecated block).
const (
	ReachFalse Reach = iota
	ReachTrue
	ReachNA
)

func (r Reach) String() string {
	switch r {
	case ReachTrue:
		return "true"
	case ReachNA:
		return "N/A"
	}
	return "false"
}

// SpecialPurpose is one entry of the table below.
type SpecialPurpose struct {
	Prefix netip.Prefix
	Name   string
	RFC    string
	Reach  Reach
}

// RegistriesDate is when the table below was written from IANA's "IPv4
// Special-Purpose Address Registry" and "IPv6 Special-Purpose Address
// Registry" (iana-ipv4-special-registry, iana-ipv6-special-registry); the
// newest entries it holds are 2001:1::3/128 (RFC 9665) and
// 100:0:0:1::/64 (RFC 9780). An entry added to them later is not known
// here until the table is updated.
const RegistriesDate = "2025-06"

func sp(prefix, name, rfc string, r Reach) SpecialPurpose {
	return SpecialPurpose{Prefix: netip.MustParsePrefix(prefix), Name: name, RFC: rfc, Reach: r}
}

// SpecialPurposes is the table of both registries, plus three blocks they
// do not list that a webhook must not reach either: the multicast ranges
// (their own registries) and IPv6's deprecated site-local block. An
// address is judged by its most specific entry (the longest prefix that
// holds it); one in no entry is globally reachable.
var SpecialPurposes = []SpecialPurpose{
	// IPv4.
	sp("0.0.0.0/8", "This network", "RFC 791", ReachFalse),
	sp("0.0.0.0/32", "This host on this network", "RFC 1122", ReachFalse),
	sp("10.0.0.0/8", "Private-Use", "RFC 1918", ReachFalse),
	sp("100.64.0.0/10", "Shared Address Space", "RFC 6598", ReachFalse),
	sp("127.0.0.0/8", "Loopback", "RFC 1122", ReachFalse),
	sp("169.254.0.0/16", "Link Local", "RFC 3927", ReachFalse),
	sp("172.16.0.0/12", "Private-Use", "RFC 1918", ReachFalse),
	sp("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", ReachFalse),
	sp("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", ReachFalse),
	sp("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", ReachFalse),
	sp("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", ReachTrue),
	sp("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", ReachTrue),
	sp("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880", ReachFalse),
	sp("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880", ReachFalse),
	sp("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", ReachFalse),
	sp("192.31.196.0/24", "AS112-v4", "RFC 7535", ReachTrue),
	sp("192.52.193.0/24", "AMT", "RFC 7450", ReachTrue),
	sp("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", ReachNA),
	sp("192.168.0.0/16", "Private-Use", "RFC 1918", ReachFalse),
	sp("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", ReachTrue),
	sp("198.18.0.0/15", "Benchmarking", "RFC 2544", ReachFalse),
	sp("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", ReachFalse),
	sp("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", ReachFalse),
	sp("240.0.0.0/4", "Reserved", "RFC 1112", ReachFalse),
	sp("255.255.255.255/32", "Limited Broadcast", "RFC 919", ReachFalse),
	sp("224.0.0.0/4", "Multicast", "RFC 5771", ReachFalse),

	// IPv6.
	sp("::1/128", "Loopback Address", "RFC 4291", ReachFalse),
	sp("::/128", "Unspecified Address", "RFC 4291", ReachFalse),
	sp("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", ReachFalse),
	sp("64:ff9b::/96", "IPv4-IPv6 Translat.", "RFC 6052", ReachTrue),
	sp("64:ff9b:1::/48", "IPv4-IPv6 Translat.", "RFC 8215", ReachFalse),
	sp("100::/64", "Discard-Only Address Block", "RFC 6666", ReachFalse),
	sp("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", ReachFalse),
	sp("2001::/23", "IETF Protocol Assignments", "RFC 2928", ReachFalse),
	sp("2001::/32", "TEREDO", "RFC 4380", ReachNA),
	sp("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", ReachTrue),
	sp("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", ReachTrue),
	sp("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", ReachTrue),
	sp("2001:2::/48", "Benchmarking", "RFC 5180", ReachFalse),
	sp("2001:3::/32", "AMT", "RFC 7450", ReachTrue),
	sp("2001:4:112::/48", "AS112-v6", "RFC 7535", ReachTrue),
	sp("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", ReachFalse),
	sp("2001:20::/28", "ORCHIDv2", "RFC 7343", ReachTrue),
	sp("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", ReachTrue),
	sp("2001:db8::/32", "Documentation", "RFC 3849", ReachFalse),
	sp("2002::/16", "6to4", "RFC 3056", ReachNA),
	sp("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", ReachTrue),
	sp("3fff::/20", "Documentation", "RFC 9637", ReachFalse),
	sp("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", ReachFalse),
	sp("fc00::/7", "Unique-Local", "RFC 4193", ReachFalse),
	sp("fe80::/10", "Link-Local Unicast", "RFC 4291", ReachFalse),
	sp("fec0::/10", "Site-Local (deprecated)", "RFC 3879", ReachFalse),
	sp("ff00::/8", "Multicast", "RFC 4291", ReachFalse),
}

// Lookup returns the most specific entry of SpecialPurposes that holds
// addr (a zone is ignored), or false when none does.
func Lookup(addr netip.Addr) (SpecialPurpose, bool) {
	addr = addr.WithZone("")
	var best SpecialPurpose
	found := false
	for _, e := range SpecialPurposes {
		if e.Prefix.Contains(addr) && (!found || e.Prefix.Bits() > best.Prefix.Bits()) {
			best, found = e, true
		}
	}
	return best, found
}
