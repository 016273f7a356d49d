package hostguard

import (
	"net/netip"
	"testing"
)

func TestAllowed(t *testing.T) {
	const public = "https://changeflow.corp.example"
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.1", true},
		{"127.255.0.1:1", true},
		{"localhost", true},
		{"localhost.:8080", true},
		{"app.localhost:8080", true},
		{"[::1]:8080", true},
		{"[::1]", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{"changeflow.corp.example", true},
		{"CHANGEFLOW.corp.example.", true},
		{"changeflow.corp.example:443", true},
		{"changeflow.corp.example:80", false},
		{"attacker.example", false},
		{"attacker.example:8080", false},
		{"localhost.attacker.example", false},
		{"127.0.0.1.attacker.example", false},
		{"0.0.0.0:8080", false},
		{"10.0.0.1:8080", false},
		{"", false},
		{":8080", false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.host, public); got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
	if !Matches("sim.example:8090", "http://sim.example:8090/") || Matches("sim.example", "http://sim.example:8090") {
		t.Error("an explicit port must match exactly")
	}
	if Allowed("attacker.example", "") || Allowed("attacker.example", "not a url") {
		t.Error("no public URL allows only loopback")
	}
}

func TestTrustsLoopback(t *testing.T) {
	for list, want := range map[string]bool{
		"127.0.0.1/32": true, "::1/128": true, "0.0.0.0/0": true, "127.0.0.0/8": true,
		"10.0.0.0/8": false, "::ffff:127.0.0.1/128": false, "": false,
	} {
		var p []netip.Prefix
		if list != "" {
			p = append(p, netip.MustParsePrefix(list))
		}
		if got := TrustsLoopback(p); got != want {
			t.Errorf("TrustsLoopback(%s) = %v, want %v", list, got, want)
		}
	}
}
