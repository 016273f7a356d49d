package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"changeflow/internal/notify"
	"changeflow/internal/notify/chat"
	"changeflow/internal/outbound"
	"changeflow/internal/sim/hooks"
)

func event(kind notify.Kind, summary string) notify.Event {
	return notify.Event{SpecVersion: "1.0", ID: "e1", Type: kind.Type(), Data: notify.Data{Kind: kind, Summary: summary,
		Link: "https://changeflow.example/requests/op-1", RenewLink: "https://changeflow.example/requests/op-1/renew?days=7&from=mail"}}
}

// TestTheLineIsOneEscapedLineWithTheLink: Slack's <url|label> link, the
// summary's &, < and > as entities (no mention, no forged link), white
// space on one line; an expiry reminder links its renewal.
func TestTheLineIsOneEscapedLineWithTheLink(t *testing.T) {
	tests := []struct {
		name string
		e    notify.Event
		want string
	}{
		{"in effect", event(notify.KindRequestInEffect, "Access of alice to billing is in effect."),
			"Access of alice to billing is in effect. <https://changeflow.example/requests/op-1|Open in changeflow>"},
		{"hostile text", event(notify.KindRequestRejected, "Rejected:\n<!channel> & <https://evil.example|click>"),
			"Rejected: &lt;!channel&gt; &amp; &lt;https://evil.example|click&gt; <https://changeflow.example/requests/op-1|Open in changeflow>"},
		{"expiring renews", event(notify.KindAccessExpiring, "Access of alice to billing ends in 24h."),
			"Access of alice to billing ends in 24h. <https://changeflow.example/requests/op-1/renew?days=7&amp;from=mail|Renew>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := chat.Line(tt.e); got != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestPostsReachTheSimulatedIncomingWebhook: the payload {"text": …} is
// what the hooks simulator records; 410 is ErrGone, 500 an error; the
// URL (the webhook's credential) is in no error.
func TestPostsReachTheSimulatedIncomingWebhook(t *testing.T) {
	recv, _ := hooks.New(hooks.Options{})
	srv := httptest.NewServer(http.StripPrefix("/hooks", recv))
	defer srv.Close()
	c, err := chat.New(chat.Endpoint{Name: "team", URL: srv.URL + "/hooks/chat/T0-s3cr3t", Types: []notify.Kind{notify.KindRequestFailed}}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "chat:team" || !c.Wants(notify.KindRequestFailed) || c.Wants(notify.KindRequestInEffect) {
		t.Fatal("name or types")
	}
	ctx := context.Background()
	e := event(notify.KindRequestFailed, "The request of alice failed.")
	if err := c.Send(ctx, e); err != nil {
		t.Fatal(err)
	}
	ds := recv.Deliveries()
	var p chat.Payload
	if len(ds) != 1 || json.Unmarshal([]byte(ds[0].Body), &p) != nil || p.Text != chat.Line(e) || ds[0].Text != p.Text {
		t.Fatalf("recorded %+v", ds)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(ds[0].Body), &raw)
	if len(raw) != 1 {
		t.Fatalf("the payload is exactly {text}: %s", ds[0].Body)
	}
	recv.SetFaults(hooks.Faults{FailNext: hooks.FailNext{Status: 410, Count: 1}})
	if err := c.Send(ctx, e); !errors.Is(err, notify.ErrGone) {
		t.Fatalf("410: %v", err)
	}
	recv.SetFaults(hooks.Faults{FailNext: hooks.FailNext{Status: 500, Count: 1}})
	if err := c.Send(ctx, e); outbound.StatusOf(err) != 500 || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("500: %v", err)
	}
	srv.Close()
	if err := c.Send(ctx, e); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("down: %v", err)
	}
	if _, err := chat.New(chat.Endpoint{Name: "x", URL: "ftp://x.example/"}, chat.Options{}); err == nil {
		t.Fatal("a non-http URL is refused")
	}
}
