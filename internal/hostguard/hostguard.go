// Package hostguard checks the Host header of requests to services that
// trust loopback, against DNS rebinding.
//
// The attack: a page on attacker.example makes its own name resolve to
// 127.0.0.1 after it has loaded, so the browser — which believes it is
// still talking to attacker.example — sends the page's requests, with any
// headers the page likes, to a service on the victim's loopback
// interface. A service that believes loopback peers (the local run trusts
// loopback identity headers; the simulators' control APIs trust anyone)
// then acts for the attacker. The browser cannot be made to send a Host
// other than the attacker's name, so serving only Host values that name
// loopback, or the service's own configured address, defeats it.
package hostguard

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Loopback reports whether hostport, a Host header value (name or IP,
// optionally with a port), names the loopback interface: localhost or a
// name under .localhost (RFC 6761: resolved to loopback by the client
// itself, so no DNS answer can rebind it), an address in 127.0.0.0/8, or
// ::1. An empty Host names nothing.
func Loopback(hostport string) bool {
	host, _ := split(hostport)
	if host == "" {
		return false
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// Matches reports whether hostport names the host and port of the
// absolute URL u (a server.publicURL). Names compare case-insensitively
// and without a trailing dot; a Host without a port matches the URL's
// scheme's default port, so "changeflow.example" matches
// "https://changeflow.example" and "https://changeflow.example:443".
func Matches(hostport, u string) bool {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return false
	}
	host, port := split(hostport)
	want, wantPort := split(pu.Host)
	if host == "" || host != want {
		return false
	}
	def := map[string]string{"http": "80", "https": "443"}[strings.ToLower(pu.Scheme)]
	if wantPort == "" {
		wantPort = def
	}
	if port == "" {
		port = def
	}
	return port == wantPort
}

// Allowed reports whether hostport is loopback or matches one of urls.
func Allowed(hostport string, urls ...string) bool {
	if Loopback(hostport) {
		return true
	}
	for _, u := range urls {
		if u != "" && Matches(hostport, u) {
			return true
		}
	}
	return false
}

// TrustsLoopback reports whether any of prefixes covers a loopback
// address — the condition under which Host must be checked.
func TrustsLoopback(prefixes []netip.Prefix) bool {
	v4, v6 := netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")
	for _, p := range prefixes {
		if p.Overlaps(v4) || p.Overlaps(v6) {
			return true
		}
	}
	return false
}

// split returns the lower-cased host without brackets or a trailing dot,
// and the port ("" when none).
func split(hostport string) (host, port string) {
	hostport = strings.TrimSpace(hostport)
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port
}
