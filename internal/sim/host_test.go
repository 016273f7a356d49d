package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"

	"changeflow/internal/sim"
)

// TestControlAPIsRefuseRebindingHosts: a page that rebinds its own name
// to 127.0.0.1 must not mint tokens, decide approvals or merge MRs
// through the simulators' control APIs; the simulated systems' own APIs
// and loopback names are served as before.
func TestControlAPIsRefuseRebindingHosts(t *testing.T) {
	svc := newService(t)
	s := start(t, svc.srv.URL)
	send := func(t *testing.T, method, path, host, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	port := s.URL()[strings.LastIndex(s.URL(), ":")+1:]
	tests := []struct {
		name, method, path, host, body string
		want                           int
	}{
		{"mint a token from a rebound name", "POST", "/oidc/_control/token", "attacker.example:" + port, `{"sub":"adam"}`, http.StatusMisdirectedRequest},
		{"read the approval control page from a rebound name", "GET", "/approval/_control/ui", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"merge an MR from a rebound name", "POST", "/gitlab/_control/projects/1/merge_requests/1/merge", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"read webhook deliveries from a rebound name", "GET", "/gitlab/_control/deliveries", "attacker.example", "", http.StatusMisdirectedRequest},
		{"change the deploy simulator from a name under localhost's label", "GET", "/deploy/_control/deliveries", "localhost.attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"read notification deliveries from a rebound name", "GET", "/hooks/_control/deliveries", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"read notification deliveries over loopback", "GET", "/hooks/_control/deliveries", "127.0.0.1:" + port, "", http.StatusOK},
		{"a webhook post stays open to any Host (and is unsigned)", "POST", "/hooks/local", "receiver.example", "{}", http.StatusUnauthorized},
		{"read the mail inbox's API from a rebound name", "GET", "/mail/_control/messages", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"read the mail inbox's API over loopback", "GET", "/mail/_control/messages", "localhost:" + port, "", http.StatusOK},
		{"mint a token over 127.0.0.1", "POST", "/oidc/_control/token", "127.0.0.1:" + port, `{"sub":"adam"}`, http.StatusOK},
		{"mint a token over localhost", "POST", "/oidc/_control/token", "localhost:" + port, `{"sub":"adam"}`, http.StatusOK},
		{"the issuer's discovery stays open to any Host", "GET", "/oidc/.well-known/openid-configuration", "attacker.example", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := send(t, tt.method, tt.path, tt.host, tt.body); got != tt.want {
				t.Fatalf("status %d, want %d", got, tt.want)
			}
		})
	}
}

// TestTheLoginCallbacksAreRegistered: the OIDC simulator redirects only to
// the web app's callback under the service's own addresses.
func TestTheLoginCallbacksAreRegistered(t *testing.T) {
	got := sim.AppRedirectURIs("http://127.0.0.1:8080/", "https://changeflow.corp.example", "http://0.0.0.0:9000")
	want := []string{
		"http://127.0.0.1:8080/login/callback", "http://localhost:8080/login/callback",
		"https://changeflow.corp.example/login/callback",
		"http://127.0.0.1:9000/login/callback", "http://localhost:9000/login/callback",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v", got)
	}
	svc := newService(t)
	s := start(t, svc.srv.URL)
	v := url.Values{"response_type": {"code"}, "client_id": {"changeflow"}, "code_challenge": {"x"}, "code_challenge_method": {"S256"}}
	for uri, status := range map[string]int{svc.srv.URL + "/login/callback": 200, "http://attacker.example/login/callback": 400} {
		v.Set("redirect_uri", uri)
		resp, err := http.Get(s.URL() + "/oidc/authorize?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status {
			t.Errorf("%s: %d, want %d", uri, resp.StatusCode, status)
		}
	}
}

// TestTheSMTPServerListensOnLoopbackAndFillsTheInbox: a started world
// has an SMTP server on a loopback port whose messages /mail/ lists; an
// SMTP address that is not loopback is refused.
func TestTheSMTPServerListensOnLoopbackAndFillsTheInbox(t *testing.T) {
	svc := newService(t)
	s := start(t, svc.srv.URL)
	addr := s.SMTPAddr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("SMTP on %q", addr)
	}
	msg := "Subject: hello\r\nMessage-ID: <m1@corp.example>\r\n\r\nin effect\r\n"
	if err := smtp.SendMail(addr, nil, "cf@corp.example", []string{"alice@corp.example"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.URL() + "/mail/_control/messages")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct{ Subject, Text string }
		SMTP  string
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Items) != 1 || list.Items[0].Subject != "hello" || list.Items[0].Text != "in effect\n" || list.SMTP != addr {
		t.Fatalf("inbox %+v (%v)", list, err)
	}
	if _, err := sim.New(sim.Config{SMTPListen: "0.0.0.0:2525", DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Fatalf("an SMTP server on every interface: %v", err)
	}
}
