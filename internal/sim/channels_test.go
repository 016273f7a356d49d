package sim_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"changeflow/internal/notify"
	"changeflow/internal/notify/chat"
	"changeflow/internal/notify/mail"
	"changeflow/internal/notify/webhook"
	"changeflow/internal/sim"
	"changeflow/internal/sim/simtoken"
)

// TestTheLocalWorldReceivesEveryChannel: the channels as the local
// profile points them at the simulators — the webhook at /hooks/local
// with its well-known secret, chat at /hooks/chat/…, mail to the SMTP
// server — arrive verified, recorded and in the inbox.
func TestTheLocalWorldReceivesEveryChannel(t *testing.T) {
	svc := newService(t)
	s := start(t, svc.srv.URL)
	ctx := context.Background()
	e := notify.Event{SpecVersion: notify.SpecVersion, ID: "evt-local", Source: s.URL(), Type: notify.KindRequestInEffect.Type(),
		Data: notify.Data{Kind: notify.KindRequestInEffect, Summary: "Access of adam to billing is in effect.", Requester: "adam",
			Subject: "adam", TargetKey: "billing", Link: "http://127.0.0.1:8080/requests/op-1"}}

	hook, err := webhook.New(webhook.Endpoint{Name: "local", URL: s.URL() + "/hooks/local", Secret: simtoken.NotifyWebhook}, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	room, err := chat.New(chat.Endpoint{Name: "local", URL: s.URL() + "/hooks/chat/local"}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(s.SMTPAddr())
	p, _ := strconv.Atoi(port)
	mailer, err := mail.New(mail.Settings{Host: host, Port: p, From: "changeflow@localhost"}, mail.Options{
		Lookup: func(context.Context, string) (string, bool, error) { return "adam@example.com", true, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []notify.Channel{hook, room, mailer} {
		if err := c.Send(ctx, e); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
	ds := s.Hooks.Deliveries()
	if len(ds) != 2 || !ds[0].Verified || ds[0].ID != "evt-local" || ds[1].Channel != "chat" || ds[1].Text != chat.Line(e) {
		t.Fatalf("deliveries %+v", ds)
	}
	msgs := s.Mail.Messages()
	if len(msgs) != 1 || msgs[0].EnvelopeTo[0] != "adam@example.com" || msgs[0].Subject != "Your access to billing is in effect" {
		t.Fatalf("inbox %+v", msgs)
	}
	if _, err := sim.New(sim.Config{HookReceivers: map[string]string{"chat": "x"}, DataDir: t.TempDir()}); err == nil {
		t.Fatal("a receiver named like the chat path is refused")
	}
}
