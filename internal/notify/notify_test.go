package notify

import (
	"encoding/json"
	"testing"
	"time"
)

func TestKindTypeRoundTrip(t *testing.T) {
	for _, k := range Kinds {
		if !k.Valid() {
			t.Errorf("%q is listed but not valid", k)
		}
		e := Event{Type: k.Type()}
		if got := e.Kind(); got != k {
			t.Errorf("Kind of type %q = %q, want %q", k.Type(), got, k)
		}
	}
	for _, bad := range []Kind{"", "request", "request.unknown"} {
		if bad.Valid() {
			t.Errorf("%q is valid", bad)
		}
	}
	for _, typ := range []string{"", "dev.changeflow.", "com.example.request.in_effect"} {
		if got := (Event{Type: typ}).Kind(); got != "" {
			t.Errorf("Kind of type %q = %q, want none", typ, got)
		}
	}
}

// The body is CloudEvents 1.0 structured JSON: the required attributes
// under their lower-case names, and the data object.
func TestEventJSONIsStructuredCloudEvent(t *testing.T) {
	e := Event{SpecVersion: SpecVersion, ID: "ev-1", Source: "https://changeflow.example/",
		Type: KindRequestInEffect.Type(), Subject: "op-1", Time: time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC),
		DataContentType: "application/json", Data: Data{Kind: KindRequestInEffect, Summary: "in effect", OperationID: "op-1"}}
	b, err := e.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"specversion": "1.0", "id": "ev-1", "source": "https://changeflow.example/",
		"type": "dev.changeflow.request.in_effect", "subject": "op-1", "time": "2026-12-04T05:00:00Z", "datacontenttype": "application/json"} {
		if m[k] != want {
			t.Errorf("%s = %v, want %q", k, m[k], want)
		}
	}
	data, _ := m["data"].(map[string]any)
	if data["operationId"] != "op-1" || data["kind"] != "request.in_effect" {
		t.Errorf("data = %v", data)
	}
	if _, ok := data["until"]; ok {
		t.Errorf("an unset until is in the body: %v", data)
	}
}
