package httpapi

import (
	"net/netip"
	"strings"
)

// maxForwardedHops bounds the X-Forwarded-For walk. A real chain of
// trusted proxies is a handful of hops; a longer walk only serves a
// client padding the header.
const maxForwardedHops = 32

// clientAddr returns the address a rate-limited anonymous caller is known
// by: the right-most X-Forwarded-For hop that is not a trusted proxy.
//
// X-Forwarded-For is only believed when the direct peer is itself a
// trusted proxy. Anyone who connects directly can write any header they
// like, so for an untrusted peer every hop is client-supplied fiction and
// the peer's own address is the only fact. Behind a trusted proxy, each
// proxy appends the address it received the connection from, so walking
// from the right over trusted proxies reaches the first address that no
// proxy of ours vouches for beyond "this is who connected": that is the
// client. Hops to its left were written by the client and are ignored (any
// client can forge them).
//
// When every hop is a trusted proxy, the request came from inside the
// proxy network and the left-most hop is its origin. A malformed hop, or a
// chain longer than maxForwardedHops, stops the walk at the last address
// a trusted proxy vouched for. IPv6 clients are keyed by their /64: a
// single host is routinely given a whole /64, and keying by /128 would
// let it rotate through 2^64 quotas.
func clientAddr(remoteAddr string, forwarded []string, trusted []netip.Prefix) string {
	var buf [64]byte
	return string(appendClientAddr(buf[:0], remoteAddr, forwarded, trusted))
}

// appendClientAddr appends clientAddr's answer to b, so the rate-limit
// link builds its whole key in one allocation.
func appendClientAddr(b []byte, remoteAddr string, forwarded []string, trusted []netip.Prefix) []byte {
	addr, ok := clientIP(remoteAddr, forwarded, trusted)
	if !ok {
		// The peer is not an IP (a test's "pipe", a Unix socket): keep it
		// as the key, bounded, rather than lumping such callers together.
		return append(b, clipAddr(remoteAddr, 64)...)
	}
	return appendAddrSubject(b, addr)
}

// clientIP is clientAddr before formatting; ok is false when remoteAddr is
// not an IP address.
func clientIP(remoteAddr string, forwarded []string, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parseForwardedHop(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !fromTrustedProxy(peer, trusted) {
		return peer, true
	}
	client := peer
	hops := 0
	for i := len(forwarded) - 1; i >= 0; i-- {
		rest := forwarded[i]
		for {
			var hop string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				hop, rest = rest, ""
			}
			if rest == "" && strings.TrimSpace(hop) == "" {
				break // an empty header line, or nothing left of this one
			}
			hops++
			addr, ok := parseForwardedHop(hop)
			if !ok || hops > maxForwardedHops {
				return client, true
			}
			client = addr
			if !fromTrustedProxy(addr, trusted) {
				return addr, true
			}
			if rest == "" {
				break
			}
		}
	}
	return client, true
}

// parseForwardedHop parses one hop: an IP, optionally with a port ("1.2.3.4:80",
// "[::1]:80") or in brackets, as some proxies write them. IPv4-mapped
// IPv6 addresses count as IPv4 and zones are dropped, so one host has one
// spelling. The likely form is tried first: a failed parse allocates its
// error, and RemoteAddr always carries a port.
func parseForwardedHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	var addr netip.Addr
	var err error
	switch {
	case strings.HasPrefix(s, "["):
		var ap netip.AddrPort
		if ap, err = netip.ParseAddrPort(s); err == nil {
			addr = ap.Addr()
		} else {
			addr, err = netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
		}
	case strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		if ap, err = netip.ParseAddrPort(s); err == nil {
			addr = ap.Addr()
		}
	default:
		addr, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return addr.Unmap().WithZone(""), true
}

func fromTrustedProxy(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// appendAddrSubject appends an address as a rate-limit subject: IPv4 as
// is, IPv6 as its /64.
func appendAddrSubject(b []byte, a netip.Addr) []byte {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.AppendTo(b)
	}
	return a.AppendTo(b)
}

func clipAddr(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
