package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLocalAccessReviewRevokes is the access review with the real
// binary's wiring on the local profile: alice holds the batching target
// bob owns; olivia (an operator) opens a campaign; alice cannot decide her
// own item; bob revokes it; the review's removal goes through the batch
// rounds to main and the deployment, and the report says it is in effect.
func TestLocalAccessReviewRevokes(t *testing.T) {
	in, simPort := startLocalProfile(t)
	call := func(user, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, in.base+path, bytes.NewBufferString(body))
		req.Header.Set("X-Auth-Request-User", user)
		req.Header.Set("Content-Type", "application/json")
		resp, err := procClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		var env map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
		return resp.StatusCode, env
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90s\nstderr:\n%s", what, in.stderr.String())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	const target = "payments-db-readonly"
	code, env := call("alice", "POST", "/api/requests", `{"operationId":"rv-1","targetKey":"`+target+`","reason":"quarter close","days":5}`)
	if code != 202 {
		t.Fatalf("submit = %d %v", code, env)
	}
	until("alice's access in effect", func() bool {
		_, env := call("alice", "GET", "/api/requests/rv-1", "")
		data, _ := env["data"].(map[string]any)
		return data != nil && data["status"] == "VALIDATED"
	})

	due := time.Now().Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	code, env = call("olivia", "POST", "/ops/reviews", `{"targetKey":"`+target+`","dueAt":"`+due+`","defaultDecision":"revoke"}`)
	if code != 200 {
		t.Fatalf("open review = %d %v", code, env)
	}
	review := int(env["data"].(map[string]any)["id"].(float64))
	_, env = call("bob", "GET", "/api/reviews", "")
	items := env["data"].(map[string]any)["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["subject"] != "alice" {
		t.Fatalf("bob's items %v", env)
	}
	item := fmt.Sprintf("/api/reviews/%d/items/%d", review, int(items[0].(map[string]any)["id"].(float64)))
	if code, env := call("alice", "POST", item, `{"decision":"keep"}`); code != 403 || env["code"] != "REVIEW_NOT_ALLOWED" {
		t.Fatalf("alice on her own access = %d %v", code, env)
	}
	if code, env := call("bob", "POST", item, `{"decision":"revoke","comment":"quarter closed"}`); code != 200 {
		t.Fatalf("bob revokes = %d %v", code, env)
	}

	until("the removal in effect in the report", func() bool {
		_, env := call("olivia", "GET", fmt.Sprintf("/ops/reviews/%d", review), "")
		entries, _ := env["data"].(map[string]any)["entries"].([]any)
		return len(entries) == 1 && entries[0].(map[string]any)["removalInEffect"] == true
	})
	_, env = call("olivia", "GET", "/ops/requests/rv-1~revoke", "")
	op, _ := env["data"].(map[string]any)["operation"].(map[string]any)
	if reason, _ := op["reason"].(string); !strings.Contains(reason, "revoked by bob (quarter closed)") {
		t.Fatalf("the removal's reason names the review: %v", op)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/gitlab/api/v4/projects/1/repository/files/bindings%%2F%s.yaml/raw?ref=main", simPort, target), nil)
	req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(buf.String(), "alice") {
		t.Fatalf("bindings file on main = %d %q; want alice's entry gone", resp.StatusCode, buf.String())
	}
}
