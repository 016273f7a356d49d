package mail_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/notify"
	"changeflow/internal/notify/mail"
	simmail "changeflow/internal/sim/mail"
)

var directory = map[string]string{"alice": "alice@corp.example", "bob": "bob@corp.example", "rita": "rita@corp.example"}

func lookup(_ context.Context, account string) (string, bool, error) {
	e, ok := directory[account]
	return e, ok, nil
}

func event(kind notify.Kind, id string, d notify.Data) notify.Event {
	d.Kind = kind
	if d.Link == "" {
		d.Link = "https://changeflow.example/requests/op-1"
	}
	return notify.Event{SpecVersion: "1.0", ID: id, Source: "https://changeflow.example", Type: kind.Type(),
		Subject: d.OperationID, Time: time.Now(), DataContentType: "application/json", Data: d}
}

func inEffect(id string) notify.Event {
	until := time.Date(2026, 12, 31, 18, 0, 0, 0, time.UTC)
	return event(notify.KindRequestInEffect, id, notify.Data{
		Summary: "Access of alice to billing-dashboard is in effect until 2026-12-31 18:00 UTC.", OperationID: "op-1",
		Requester: "alice", Subject: "alice", TargetKey: "billing-dashboard", Until: &until})
}

// startSMTP starts the simulator's SMTP server on a loopback port.
func startSMTP(t *testing.T, o simmail.Options) (*simmail.Server, string, int) {
	t.Helper()
	s := simmail.New(o)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	host, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	return s, host, p
}

func newMailer(t *testing.T, s mail.Settings, o mail.Options) *mail.Mailer {
	t.Helper()
	if s.From == "" {
		s.From = "changeflow <changeflow@corp.example>"
	}
	if o.Lookup == nil {
		o.Lookup = lookup
	}
	m, err := mail.New(s, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAMessageInWordsOverRealSMTP: one in-effect event is one message to
// the requester over a real SMTP exchange, multipart plain text and
// HTML, with the link, and the event id in its Message-ID and a header.
func TestAMessageInWordsOverRealSMTP(t *testing.T) {
	srv, host, port := startSMTP(t, simmail.Options{})
	m := newMailer(t, mail.Settings{Host: host, Port: port, Timeout: 5 * time.Second}, mail.Options{})
	if err := m.Send(context.Background(), inEffect("01JEVENT1")); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	got := msgs[0]
	if strings.Join(got.EnvelopeTo, ",") != "alice@corp.example" || got.EnvelopeFrom != "changeflow@corp.example" {
		t.Fatalf("envelope %s → %v", got.EnvelopeFrom, got.EnvelopeTo)
	}
	if got.Subject != "Your access to billing-dashboard is in effect" || got.MessageID != "<changeflow-event-01JEVENT1@corp.example>" ||
		got.Headers["X-Changeflow-Event-Id"][0] != "01JEVENT1" || got.Headers["Auto-Submitted"][0] != "auto-generated" {
		t.Fatalf("headers: subject %q id %q %v", got.Subject, got.MessageID, got.Headers)
	}
	if !strings.Contains(got.Headers["Content-Type"][0], "multipart/alternative") {
		t.Fatalf("content type %v", got.Headers["Content-Type"])
	}
	for name, part := range map[string]string{"text": got.Text, "html": got.HTML} {
		for _, want := range []string{"is in effect until 2026-12-31 18:00 UTC", "https://changeflow.example/requests/op-1",
			"Thursday 31 December 2026, 18:00 UTC", "billing-dashboard"} {
			if !strings.Contains(part, want) {
				t.Errorf("%s part lacks %q:\n%s", name, want, part)
			}
		}
	}
	if !strings.Contains(got.HTML, `<a href="https://changeflow.example/requests/op-1"`) {
		t.Errorf("the HTML links the request:\n%s", got.HTML)
	}
	if got.TLS || got.AuthUser != "" {
		t.Errorf("plain, unauthenticated exchange expected: %+v", got)
	}
}

// TestAuthAndMandatorySTARTTLSWithASelfSignedCert: with startTLS the
// exchange is encrypted and authenticated (AUTH PLAIN after STARTTLS); a
// wrong password and a server without STARTTLS are errors.
func TestAuthAndMandatorySTARTTLSWithASelfSignedCert(t *testing.T) {
	cert, pool := selfSigned(t)
	users := map[string]string{"changeflow": "s3cret-pw"}
	srv, host, port := startSMTP(t, simmail.Options{Users: users, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	tc := &tls.Config{RootCAs: pool}
	ok := newMailer(t, mail.Settings{Host: host, Port: port, Username: "changeflow", Password: "s3cret-pw", StartTLS: true},
		mail.Options{TLSConfig: tc})
	if err := ok.Send(context.Background(), inEffect("e-tls")); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || !msgs[0].TLS || msgs[0].AuthUser != "changeflow" {
		t.Fatalf("messages %+v", msgs)
	}
	bad := newMailer(t, mail.Settings{Host: host, Port: port, Username: "changeflow", Password: "wrong", StartTLS: true},
		mail.Options{TLSConfig: tc})
	err := bad.Send(context.Background(), inEffect("e-bad"))
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v", err)
	}
	noAuth := newMailer(t, mail.Settings{Host: host, Port: port, StartTLS: true}, mail.Options{TLSConfig: tc})
	if err := noAuth.Send(context.Background(), inEffect("e-noauth")); err == nil {
		t.Fatal("a server that wants AUTH refuses a client without it")
	}
	untrusted := newMailer(t, mail.Settings{Host: host, Port: port, Username: "changeflow", Password: "s3cret-pw", StartTLS: true}, mail.Options{})
	if err := untrusted.Send(context.Background(), inEffect("e-untrusted")); err == nil {
		t.Fatal("a certificate that does not verify fails the delivery")
	}
	_, plainHost, plainPort := startSMTP(t, simmail.Options{})
	mandatory := newMailer(t, mail.Settings{Host: plainHost, Port: plainPort, StartTLS: true}, mail.Options{})
	if err := mandatory.Send(context.Background(), inEffect("e-plain")); err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("mandatory STARTTLS against a server without it: %v", err)
	}
	clear, clearHost, clearPort := startSMTP(t, simmail.Options{Users: users})
	inClear := newMailer(t, mail.Settings{Host: clearHost, Port: clearPort, Username: "changeflow", Password: "s3cret-pw"}, mail.Options{})
	if err := inClear.Send(context.Background(), inEffect("e-clear")); err == nil || len(clear.Messages()) != 0 {
		t.Fatalf("PLAIN offered without TLS is not used: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d messages; only the good one was accepted", n)
	}
}

// TestAHostileCommentIsEscaped: the approver's comment is the approver's
// text — shown as text in the HTML part (no tag, no javascript: link)
// and quoted in the plain one.
func TestAHostileCommentIsEscaped(t *testing.T) {
	srv, host, port := startSMTP(t, simmail.Options{})
	m := newMailer(t, mail.Settings{Host: host, Port: port}, mail.Options{})
	hostile := "No.\n<script>alert(1)</script> <a href=\"javascript:steal()\">renew</a> & \x1b[31mred"
	e := event(notify.KindRequestRejected, "e-rej", notify.Data{Summary: "The request of alice for billing-dashboard was rejected.",
		OperationID: "op-2", Requester: "alice", Subject: "alice", TargetKey: "billing-dashboard", Comment: hostile,
		Link: "javascript:alert(2)"})
	if err := m.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	got := srv.Messages()[0]
	for _, bad := range []string{"<script>", `href="javascript:`, "<a href=\"javascript", "\x1b"} {
		if strings.Contains(got.HTML, bad) {
			t.Errorf("the HTML part holds %q:\n%s", bad, got.HTML)
		}
	}
	if !strings.Contains(got.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(got.HTML, "#ZgotmplZ") {
		t.Errorf("the comment is escaped text and the javascript: link defused:\n%s", got.HTML)
	}
	if !strings.Contains(got.Text, "The approver wrote:\n> No.\n> <script>alert(1)</script>") || strings.Contains(got.Text, "\x1b") {
		t.Errorf("the plain part quotes the comment without control characters:\n%s", got.Text)
	}
}

// TestARefusalLosesNothing: while the server refuses (a 451, then a
// 554), Send returns an error so the outbox retries; once it takes
// mail the message arrives exactly once, with the same Message-ID.
func TestARefusalLosesNothing(t *testing.T) {
	srv, host, port := startSMTP(t, simmail.Options{})
	m := newMailer(t, mail.Settings{Host: host, Port: port}, mail.Options{})
	e := inEffect("e-retry")
	for _, code := range []int{451, 554} {
		srv.SetFaults(simmail.Faults{RefuseNext: simmail.RefuseNext{Code: code, Count: 1}})
		err := m.Send(context.Background(), e)
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(code)) || errors.Is(err, notify.ErrNotForThisChannel) {
			t.Fatalf("refused with %d: %v", code, err)
		}
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages while refusing", n)
	}
	if err := m.Send(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || msgs[0].MessageID != "<changeflow-event-e-retry@corp.example>" {
		t.Fatalf("after the refusals: %+v", msgs)
	}
	_ = srv.Close()
	if err := m.Send(context.Background(), e); err == nil {
		t.Fatal("a server that is down is an error")
	}
}

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func simmailOptions() simmail.Options { return simmail.Options{} }
