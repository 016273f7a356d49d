package httpapi

import (
	"net/netip"
	"strings"
	"testing"
)

// testTrusted parses a comma-separated list of prefixes or addresses,
// skipping junk, the way the fuzz target needs it.
func testTrusted(list string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}

func TestClientAddr(t *testing.T) {
	trusted := testTrusted("10.0.0.0/8, fd00::/8, 192.0.2.10")
	for _, c := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"no header: the peer", "198.51.100.7:5000", nil, "198.51.100.7"},
		{"untrusted peer: header ignored", "198.51.100.7:5000", []string{"1.2.3.4"}, "198.51.100.7"},
		{"trusted peer: the hop it appended", "10.0.0.1:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"left-most hop is the client's own claim", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"trusted hops are skipped", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.7, 10.1.1.1, 192.0.2.10"}, "198.51.100.7"},
		{"several header lines read as one list", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.7", "10.1.1.1"}, "198.51.100.7"},
		{"empty header lines are skipped", "10.0.0.1:5000", []string{"198.51.100.7", "", " "}, "198.51.100.7"},
		{"all hops trusted: the origin", "10.0.0.1:5000", []string{"10.2.2.2, 10.3.3.3"}, "10.2.2.2"},
		{"malformed hop: the last vouched address", "10.0.0.1:5000", []string{"198.51.100.7, bogus, 10.3.3.3"}, "10.3.3.3"},
		{"malformed right-most hop: the peer", "10.0.0.1:5000", []string{"198.51.100.7, bogus"}, "10.0.0.1"},
		{"trailing comma is malformed", "10.0.0.1:5000", []string{"198.51.100.7,"}, "10.0.0.1"},
		{"hop with a port", "10.0.0.1:5000", []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{"bracketed IPv6 hop with a port", "10.0.0.1:5000", []string{"[2001:db8:1:2:3:4:5:6]:443"}, "2001:db8:1:2::/64"},
		{"IPv6 clients are keyed by their /64", "[2001:db8:aa:bb::1]:5000", nil, "2001:db8:aa:bb::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:198.51.100.7]:5000", nil, "198.51.100.7"},
		{"trusted IPv6 proxy", "[fd00::1]:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"zone dropped", "[fe80::1%eth0]:5000", nil, "fe80::/64"},
		{"peer without port", "198.51.100.7", nil, "198.51.100.7"},
		{"peer not an IP is kept, clipped", "pipe", nil, "pipe"},
		{"overlong chain stops at the last vouched hop", "10.0.0.1:5000", []string{"198.51.100.7," + strings.Repeat(" 10.0.0.9,", 40) + " 10.0.0.8"}, "10.0.0.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := clientAddr(c.remote, c.xff, trusted); got != c.want {
				t.Fatalf("clientAddr(%q, %q) = %q, want %q", c.remote, c.xff, got, c.want)
			}
		})
	}
}

// FuzzClientAddr checks the X-Forwarded-For walk on arbitrary input: it
// never panics, answers one of the addresses it was given, ignores the
// header of an untrusted peer, and — the anti-spoofing property — an
// untrusted answer does not change whatever a client prepends.
func FuzzClientAddr(f *testing.F) {
	f.Add("198.51.100.7:5000", "1.2.3.4", "10.0.0.0/8")
	f.Add("10.0.0.1:5000", "6.6.6.6, 198.51.100.7, 10.1.1.1", "10.0.0.0/8")
	f.Add("[fd00::1]:443", "[2001:db8::1]:80, fd00::2", "fd00::/8")
	f.Add("10.0.0.1:1", ",,, ,", "10.0.0.1")
	f.Fuzz(func(t *testing.T, remote, xff, trustedList string) {
		trusted := testTrusted(trustedList)
		lines := strings.Split(xff, "\n")
		got := clientAddr(remote, lines, trusted)
		if got == "" && remote != "" {
			t.Fatalf("empty subject for remote %q", remote)
		}
		addr, ok := clientIP(remote, lines, trusted)
		if !ok {
			if got != clipAddr(remote, 64) {
				t.Fatalf("non-IP peer %q gave %q", remote, got)
			}
			return
		}
		peer, _ := parseForwardedHop(remote)
		if !fromTrustedProxy(peer, trusted) && addr != peer {
			t.Fatalf("untrusted peer %v: answer %v came from the header %q", peer, addr, xff)
		}
		if addr != peer && !hopsContain(lines, addr) {
			t.Fatalf("answer %v is neither the peer %v nor a hop of %q", addr, peer, xff)
		}
		if !fromTrustedProxy(addr, trusted) {
			spoofed := append([]string{"203.0.113.66, " + lines[0]}, lines[1:]...)
			if again, _ := clientIP(remote, spoofed, trusted); again != addr {
				t.Fatalf("prepending a hop to %q changed the answer from %v to %v", xff, addr, again)
			}
		}
	})
}

func hopsContain(lines []string, want netip.Addr) bool {
	for _, l := range lines {
		for _, h := range strings.Split(l, ",") {
			if a, ok := parseForwardedHop(h); ok && a == want {
				return true
			}
		}
	}
	return false
}
