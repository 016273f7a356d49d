package mail_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"strings"
	"testing"

	"changeflow/internal/sim/mail"
)

const multipartMsg = "From: changeflow <cf@corp.example>\r\n" +
	"To: alice@corp.example\r\n" +
	"Subject: =?UTF-8?q?Your_access_=E2=80=94_<b>bold</b>?=\r\n" +
	"Message-ID: <changeflow-event-e1@corp.example>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=XX\r\n" +
	"\r\n" +
	"--XX\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Hello =E2=80=94 line one\r\nline two\r\n" +
	"--XX\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+SGk8L3A+PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\r\n" +
	"--XX--\r\n"

func start(t *testing.T, o mail.Options) (*mail.Server, *httptest.Server) {
	t.Helper()
	s := mail.New(o)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := httptest.NewServer(s)
	t.Cleanup(h.Close)
	return s, h
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestTheServerKeepsMessagesParsed: a message sent with the standard
// library's SMTP client is kept with its envelope, decoded headers and
// both parts decoded; the API lists it and the pages escape it.
func TestTheServerKeepsMessagesParsed(t *testing.T) {
	s, h := start(t, mail.Options{})
	if err := smtp.SendMail(s.Addr(), nil, "cf@corp.example", []string{"alice@corp.example"}, []byte(multipartMsg)); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []mail.Message
		SMTP  string
	}
	_, body := get(t, h.URL+"/_control/messages?to=ALICE@corp.example")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Items) != 1 || list.SMTP != s.Addr() {
		t.Fatalf("list %s (%v)", body, err)
	}
	m := list.Items[0]
	if m.Subject != "Your access — <b>bold</b>" || m.MessageID != "<changeflow-event-e1@corp.example>" ||
		m.Text != "Hello — line one\nline two" || m.HTML != "<p>Hi</p><script>alert(1)</script>" ||
		m.EnvelopeFrom != "cf@corp.example" || m.To[0] != "alice@corp.example" || m.ParseError != "" {
		t.Fatalf("parsed %+v", m)
	}
	_, inbox := get(t, h.URL+"/")
	if strings.Contains(inbox, "<b>bold</b>") || !strings.Contains(inbox, "&lt;b&gt;bold&lt;/b&gt;") || !strings.Contains(inbox, `href="messages/1"`) {
		t.Fatalf("inbox:\n%s", inbox)
	}
	resp, page := get(t, h.URL+"/messages/1")
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(page, `<iframe sandbox=""`) || strings.Contains(page, "<script>alert(1)") {
		t.Fatalf("message page:\n%s", page)
	}
	if r, _ := get(t, h.URL+"/messages/99"); r.StatusCode != 404 {
		t.Fatalf("unknown message: %d", r.StatusCode)
	}
	if _, body := get(t, h.URL+"/_control/messages?to=bob@corp.example"); !strings.Contains(body, `"items":[]`) {
		t.Fatalf("filter: %s", body)
	}
}

// TestRefusalsAndAuth: RefuseNext refuses whole transactions with its
// code, then mail flows again; with accounts, MAIL needs AUTH PLAIN.
func TestRefusalsAndAuth(t *testing.T) {
	s, h := start(t, mail.Options{Users: map[string]string{"cf": "pw"}})
	req, _ := http.NewRequest(http.MethodPut, h.URL+"/_control/faults", strings.NewReader(`{"refuseNext":{"code":452,"count":1}}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("set faults: %v", err)
	}
	auth := smtp.PlainAuth("", "cf", "pw", "127.0.0.1")
	err := smtp.SendMail(s.Addr(), auth, "cf@corp.example", []string{"a@corp.example"}, []byte(multipartMsg))
	if err == nil || !strings.Contains(err.Error(), "452") {
		t.Fatalf("refused: %v", err)
	}
	if err := smtp.SendMail(s.Addr(), auth, "cf@corp.example", []string{"a@corp.example"}, []byte(multipartMsg)); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
	if err := smtp.SendMail(s.Addr(), nil, "cf@corp.example", []string{"a@corp.example"}, []byte(multipartMsg)); err == nil {
		t.Fatal("without AUTH")
	}
	if err := smtp.SendMail(s.Addr(), smtp.PlainAuth("", "cf", "nope", "127.0.0.1"), "cf@corp.example", []string{"a@corp.example"}, []byte(multipartMsg)); err == nil {
		t.Fatal("wrong password")
	}
	msgs := s.Messages()
	if len(msgs) != 1 || msgs[0].AuthUser != "cf" {
		t.Fatalf("messages %+v", msgs)
	}
	req, _ = http.NewRequest(http.MethodDelete, h.URL+"/_control/messages", nil)
	if _, err := http.DefaultClient.Do(req); err != nil || len(s.Messages()) != 0 {
		t.Fatalf("clear: %v", err)
	}
}
