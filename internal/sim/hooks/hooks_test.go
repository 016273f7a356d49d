package hooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/sim/hooks"
)

// sign is this test's own signer, from the Standard Webhooks text.
func sign(key []byte, id string, ts int64, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func post(t *testing.T, url string, h map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func do(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestTheReceiverVerifiesSignatures: a correct signature (also as the
// second of a rotation's two) is 200; a wrong one, a timestamp out of the
// five minutes either way, missing headers and an unknown name are
// refused, each recorded with its reason.
func TestTheReceiverVerifiesSignatures(t *testing.T) {
	now := time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	s, err := hooks.New(hooks.Options{Receivers: map[string]string{"ops": secret}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	body := `{"type":"dev.changeflow.request.failed","id":"e1"}`
	headers := func(id string, ts int64, sig string) map[string]string {
		return map[string]string{"webhook-id": id, "webhook-timestamp": strconv.FormatInt(ts, 10), "webhook-signature": sig}
	}
	ts := now.Unix()
	tests := []struct {
		name   string
		path   string
		h      map[string]string
		status int
		reason string
	}{
		{"signed", "/ops", headers("e1", ts, sign(key, "e1", ts, body)), 200, ""},
		{"second of two signatures", "/ops", headers("e1", ts, "v1,AAAA "+sign(key, "e1", ts, body)), 200, ""},
		{"signed with another key", "/ops", headers("e1", ts, sign([]byte("other"), "e1", ts, body)), 401, "no v1 signature"},
		{"id not the one signed", "/ops", headers("e2", ts, sign(key, "e1", ts, body)), 401, "no v1 signature"},
		{"six minutes old", "/ops", headers("e1", ts-360, sign(key, "e1", ts-360, body)), 401, "tolerance"},
		{"six minutes ahead", "/ops", headers("e1", ts+360, sign(key, "e1", ts+360, body)), 401, "tolerance"},
		{"four minutes old", "/ops", headers("e1", ts-240, sign(key, "e1", ts-240, body)), 200, ""},
		{"unsigned", "/ops", nil, 401, "missing"},
		{"unknown receiver", "/nobody", headers("e1", ts, sign(key, "e1", ts, body)), 404, "no receiver named nobody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _ := post(t, srv.URL+tt.path, tt.h, body)
			ds := s.Deliveries()
			d := ds[len(ds)-1]
			if status != tt.status || d.Status != tt.status || d.Verified != (tt.status == 200) || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("status %d, recorded %+v", status, d)
			}
			if d.Type != "dev.changeflow.request.failed" {
				t.Fatalf("type %q", d.Type)
			}
		})
	}
	ds := s.Deliveries()
	if ds[0].Duplicate || !ds[1].Duplicate || !ds[6].Duplicate {
		t.Fatalf("the verified repeats of e1 are duplicates: %+v", ds)
	}
}

// TestControlAPIConfiguresReceiversAndFaults: receivers are set over the
// control API (a reserved name is refused), faults answer the next N
// posts (of one name when named), deliveries filter and clear.
func TestControlAPIConfiguresReceiversAndFaults(t *testing.T) {
	s, _ := hooks.New(hooks.Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if st := do(t, "PUT", srv.URL+"/_control/receivers/chat", `{"secret":"x"}`, nil); st != 400 {
		t.Fatalf("reserved name: %d", st)
	}
	var recv struct{ Items []string }
	if st := do(t, "PUT", srv.URL+"/_control/receivers/ops", `{"secret":"plain"}`, &recv); st != 200 || len(recv.Items) != 1 {
		t.Fatalf("put receiver: %d %v", st, recv)
	}
	if st := do(t, "PUT", srv.URL+"/_control/faults", `{"failNext":{"status":410,"count":2,"name":"chat/team"}}`, nil); st != 200 {
		t.Fatal(st)
	}
	for i, want := range []int{410, 410, 200} {
		if st, _ := post(t, srv.URL+"/chat/team", nil, `{"text":"hello <b>"}`); st != want {
			t.Fatalf("chat post %d: %d, want %d", i, st, want)
		}
	}
	ts := time.Now().Unix()
	h := map[string]string{"webhook-id": "e9", "webhook-timestamp": strconv.FormatInt(ts, 10), "webhook-signature": sign([]byte("plain"), "e9", ts, "{}")}
	if st, _ := post(t, srv.URL+"/ops", h, "{}"); st != 200 {
		t.Fatalf("the chat fault reached the webhook: %d", st)
	}
	if st, _ := post(t, srv.URL+"/chat/team", nil, `not json`); st != 400 {
		t.Fatalf("chat without text: %d", st)
	}
	var list struct{ Items []hooks.Delivery }
	do(t, "GET", srv.URL+"/_control/deliveries?channel=chat", "", &list)
	if len(list.Items) != 4 || list.Items[2].Text != "hello <b>" || list.Items[2].Verified {
		t.Fatalf("chat deliveries %+v", list.Items)
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), "hello <b>") || !strings.Contains(string(page), "hello &lt;b&gt;") || !strings.Contains(string(page), "/hooks/ops") {
		t.Fatalf("page does not escape or list: %s", page)
	}
	do(t, "DELETE", srv.URL+"/_control/deliveries", "", &list)
	if len(list.Items) != 0 || len(s.Deliveries()) != 0 {
		t.Fatal("clear")
	}
	do(t, "DELETE", srv.URL+"/_control/receivers/ops", "", &recv)
	if st, _ := post(t, srv.URL+"/ops", h, "{}"); st != 404 {
		t.Fatalf("removed receiver: %d", st)
	}
}
