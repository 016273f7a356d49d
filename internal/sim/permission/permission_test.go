package permission_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"changeflow/internal/sim/permission"
)

func newSim(t *testing.T) (*permission.Server, *httptest.Server) {
	t.Helper()
	s, err := permission.New(permission.Options{Grants: permission.LocalGrants()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { _ = s.Close(); ts.Close() })
	return s, ts
}

func call(t *testing.T, c *http.Client, method, url, body string) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, nil
}

func check(t *testing.T, ts *httptest.Server, subject string, codes ...string) (int, []string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"subject": subject, "ruleCodes": codes})
	status, b, err := call(t, http.DefaultClient, "POST", ts.URL+"/v1/check", string(body))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Granted []string }
	_ = json.Unmarshal(b, &out)
	return status, out.Granted
}

func TestCheckFromTheLocalTable(t *testing.T) {
	_, ts := newSim(t)
	for _, tc := range []struct {
		name    string
		subject string
		codes   []string
		want    []string
	}{
		{"operator holds both ops codes", "olivia", []string{"ops.read", "admin", "ops.write"}, []string{"ops.read", "ops.write"}},
		{"admin holds admin", "adam", []string{"ops.read", "admin"}, []string{"admin"}},
		{"plain user holds nothing", "alice", []string{"ops.read", "admin"}, []string{}},
		{"unknown subject holds nothing", "mallory", []string{"admin"}, []string{}},
		{"repeated code granted once", "adam", []string{"admin", "admin"}, []string{"admin"}},
		{"no codes asked, none granted", "adam", nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, got := check(t, ts, tc.subject, tc.codes...)
			if status != 200 || got == nil || !slices.Equal(got, tc.want) {
				t.Fatalf("%d %v, want %v", status, got, tc.want)
			}
		})
	}
	for name, body := range map[string]string{"malformed": `{"subject":`, "no subject": `{"ruleCodes":["admin"]}`} {
		t.Run(name+" is 400", func(t *testing.T) {
			if status, _, _ := call(t, http.DefaultClient, "POST", ts.URL+"/v1/check", body); status != 400 {
				t.Fatal(status)
			}
		})
	}
}

func TestControlGrants(t *testing.T) {
	s, ts := newSim(t)
	if status, _, _ := call(t, http.DefaultClient, "PUT", ts.URL+"/_control/grants/alice", `{"ruleCodes":["ops.read"]}`); status != 200 {
		t.Fatal(status)
	}
	if _, got := check(t, ts, "alice", "ops.read", "ops.write"); !slices.Equal(got, []string{"ops.read"}) {
		t.Fatalf("%v", got)
	}
	call(t, http.DefaultClient, "DELETE", ts.URL+"/_control/grants/olivia", "")
	if _, got := check(t, ts, "olivia", "ops.read"); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	if status, b, _ := call(t, http.DefaultClient, "POST", ts.URL+"/_control/grants", `{"zoe":["admin"]}`); status != 200 || !bytes.Contains(b, []byte(`"zoe":["admin"]`)) {
		t.Fatalf("%d %s", status, b)
	}
	if _, got := check(t, ts, "adam", "admin"); len(got) != 0 {
		t.Fatal("replace kept the old table")
	}
	_, b, _ := call(t, http.DefaultClient, "GET", ts.URL+"/_control/checks", "")
	if !bytes.Contains(b, []byte(`"subject":"adam"`)) || len(s.Checks()) != 3 {
		t.Fatalf("checks: %s", b)
	}
}

func TestFaults(t *testing.T) {
	t.Run("error status N times", func(t *testing.T) {
		_, ts := newSim(t)
		call(t, http.DefaultClient, "POST", ts.URL+"/_control/faults", `{"errorStatus":503,"errorCount":2}`)
		for range 2 {
			if status, _ := check(t, ts, "adam", "admin"); status != 503 {
				t.Fatal(status)
			}
		}
		if status, got := check(t, ts, "adam", "admin"); status != 200 || len(got) != 1 {
			t.Fatal(status)
		}
	})
	t.Run("timeout: held until the client gives up", func(t *testing.T) {
		s, ts := newSim(t)
		call(t, http.DefaultClient, "POST", ts.URL+"/_control/faults", `{"timeoutCount":1,"timeoutMaxMs":20000}`)
		impatient := &http.Client{Timeout: 100 * time.Millisecond}
		start := time.Now()
		if _, _, err := call(t, impatient, "POST", ts.URL+"/v1/check", `{"subject":"adam","ruleCodes":["admin"]}`); err == nil {
			t.Fatal("the check answered; want the client to time out")
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("held %v", el)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(s.Checks()) == 0 || s.Checks()[0].Status != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("checks %+v", s.Checks())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if status, _ := check(t, ts, "adam", "admin"); status != 200 {
			t.Fatalf("after the timeout fault: %d", status)
		}
	})
	t.Run("timeout: 504 after the max", func(t *testing.T) {
		_, ts := newSim(t)
		call(t, http.DefaultClient, "POST", ts.URL+"/_control/faults", `{"timeoutCount":1,"timeoutMaxMs":50}`)
		if status, _ := check(t, ts, "adam", "admin"); status != http.StatusGatewayTimeout {
			t.Fatal(status)
		}
	})
	t.Run("close releases held checks", func(t *testing.T) {
		s, ts := newSim(t)
		_ = s.SetFaults(permission.Faults{TimeoutCount: 1, TimeoutMaxMs: 60000})
		done := make(chan int, 1)
		go func() {
			status, _, _ := call(t, http.DefaultClient, "POST", ts.URL+"/v1/check", `{"subject":"adam"}`)
			done <- status
		}()
		_ = s.Close()
		select {
		case status := <-done:
			if status != http.StatusGatewayTimeout {
				t.Fatal(status)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("held check not released by Close")
		}
	})
	t.Run("slow answers", func(t *testing.T) {
		_, ts := newSim(t)
		call(t, http.DefaultClient, "POST", ts.URL+"/_control/faults", `{"slowMs":120}`)
		start := time.Now()
		if status, _ := check(t, ts, "olivia", "ops.read"); status != 200 || time.Since(start) < 120*time.Millisecond {
			t.Fatalf("%d after %v", status, time.Since(start))
		}
		if status, b, _ := call(t, http.DefaultClient, "DELETE", ts.URL+"/_control/faults", ""); status != 200 || !bytes.Contains(b, []byte(`"slowMs":0`)) {
			t.Fatalf("%d %s", status, b)
		}
	})
	t.Run("bad faults are 400", func(t *testing.T) {
		_, ts := newSim(t)
		for _, body := range []string{`{"errorStatus":200,"errorCount":1}`, `{`} {
			if status, _, _ := call(t, http.DefaultClient, "POST", ts.URL+"/_control/faults", body); status != 400 {
				t.Fatalf("%s: %d", body, status)
			}
		}
	})
}
