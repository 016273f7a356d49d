package mail_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/notify"
	"changeflow/internal/notify/mail"
)

// TestWhoHearsWhat: the requester (and the holder, for the access's own
// kinds), the reviewers, the operators — less whoever turned the kind
// off or has no address; nobody left is ErrNotForThisChannel, a failing
// look-up an error to retry.
func TestWhoHearsWhat(t *testing.T) {
	srv, host, port := startSMTP(t, simmailOptions())
	ops := []string{"ops@corp.example", "OPS@corp.example", "sec@corp.example"}
	offForAlice := func(_ context.Context, acct string, k notify.Kind) (bool, error) {
		return !(acct == "alice" && k == notify.KindRequestInEffect), nil
	}
	failing := errors.New("directory unavailable")
	tests := []struct {
		name    string
		kind    notify.Kind
		data    notify.Data
		allowed func(context.Context, string, notify.Kind) (bool, error)
		lookup  func(context.Context, string) (string, bool, error)
		want    []string
		wantErr error
	}{
		{"blocked batch to the operators, each once", notify.KindBatchBlocked, notify.Data{Project: "config/bindings", BatchID: 7},
			nil, nil, []string{"ops@corp.example", "sec@corp.example"}, nil},
		{"foreign head to the operators, whatever the preferences", notify.KindForeignHead, notify.Data{Project: "config/bindings"},
			func(context.Context, string, notify.Kind) (bool, error) { return false, nil }, nil, []string{"ops@corp.example", "sec@corp.example"}, nil},
		{"review to the reviewers", notify.KindReviewAssigned, notify.Data{Reviewers: []string{"bob", "rita"}},
			nil, nil, []string{"bob@corp.example", "rita@corp.example"}, nil},
		{"in effect to the requester and the holder", notify.KindRequestInEffect, notify.Data{Requester: "alice", Subject: "bob"},
			nil, nil, []string{"alice@corp.example", "bob@corp.example"}, nil},
		{"a rejection to the requester alone", notify.KindRequestRejected, notify.Data{Requester: "alice", Subject: "bob"},
			nil, nil, []string{"alice@corp.example"}, nil},
		{"a person who turned the kind off is left out", notify.KindRequestInEffect, notify.Data{Requester: "alice", Subject: "bob"},
			offForAlice, nil, []string{"bob@corp.example"}, nil},
		{"nobody with an address", notify.KindAccessExpiring, notify.Data{Requester: "carol", Subject: "carol"},
			nil, nil, nil, notify.ErrNotForThisChannel},
		{"an address that is not one", notify.KindAccessRemoved, notify.Data{Requester: "x"},
			nil, func(context.Context, string) (string, bool, error) { return "not an address", true, nil }, nil, notify.ErrNotForThisChannel},
		{"a failing directory is retried", notify.KindRequestFailed, notify.Data{Requester: "alice"},
			nil, func(context.Context, string) (string, bool, error) { return "", false, failing }, nil, failing},
		{"failing preferences are retried", notify.KindRequestFailed, notify.Data{Requester: "alice"},
			func(context.Context, string, notify.Kind) (bool, error) { return false, failing }, nil, nil, failing},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Clear()
			m := newMailer(t, mail.Settings{Host: host, Port: port}, mail.Options{Operators: ops, Allowed: tt.allowed, Lookup: tt.lookup})
			err := m.Send(context.Background(), event(tt.kind, "w"+string(rune('a'+i)), tt.data))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || len(srv.Messages()) != 0 {
					t.Fatalf("err %v, want %v; %d messages", err, tt.wantErr, len(srv.Messages()))
				}
				if tt.wantErr != notify.ErrNotForThisChannel && errors.Is(err, notify.ErrNotForThisChannel) {
					t.Fatal("a failure to look up is not 'nobody to tell'")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			msgs := srv.Messages()
			if len(msgs) != 1 || !slices.Equal(msgs[0].EnvelopeTo, tt.want) {
				t.Fatalf("sent to %v, want %v", msgs, tt.want)
			}
		})
	}
}

// TestWhichKindsMailCarries: submitted, approved and withdrawn send no
// mail; every other kind does; Types narrows further.
func TestWhichKindsMailCarries(t *testing.T) {
	m := newMailer(t, mail.Settings{Host: "smtp.corp.example"}, mail.Options{})
	for _, k := range notify.Kinds {
		none := k == notify.KindRequestSubmitted || k == notify.KindRequestApproved || k == notify.KindRequestWithdrawn
		if m.Wants(k) == none || mail.Carries(k) == none {
			t.Errorf("%s: wants %v", k, m.Wants(k))
		}
	}
	narrow := newMailer(t, mail.Settings{Host: "smtp.corp.example"}, mail.Options{Types: []notify.Kind{notify.KindAccessExpiring, notify.KindRequestSubmitted}})
	if !narrow.Wants(notify.KindAccessExpiring) || narrow.Wants(notify.KindRequestInEffect) || narrow.Wants(notify.KindRequestSubmitted) {
		t.Fatal("types narrow what mail carries, never widen it")
	}
	for _, bad := range []struct {
		s mail.Settings
		o mail.Options
	}{
		{mail.Settings{From: "x@corp.example"}, mail.Options{}},
		{mail.Settings{Host: "h", From: "not an address"}, mail.Options{}},
		{mail.Settings{Host: "h", From: "x@corp.example"}, mail.Options{Operators: []string{"ops"}}},
		{mail.Settings{Host: "h", From: "x@corp.example"}, mail.Options{Types: []notify.Kind{"request.nope"}}},
	} {
		if _, err := mail.New(bad.s, bad.o); err == nil {
			t.Errorf("accepted %+v %+v", bad.s, bad.o)
		}
	}
}

// TestEveryKindInWords: each kind mail carries has a subject in words,
// its summary, what to do when there is something to do, the renew link
// on a reminder and the page's link — and nothing of the event's
// machinery (no step, no internal state name).
func TestEveryKindInWords(t *testing.T) {
	srv, host, port := startSMTP(t, simmailOptions())
	m := newMailer(t, mail.Settings{Host: host, Port: port}, mail.Options{Operators: []string{"ops@corp.example"}})
	for _, k := range notify.Kinds {
		if !mail.Carries(k) {
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			srv.Clear()
			d := notify.Data{Summary: "What happened, in words.", WhatToDo: "Ask again after fixing the target.",
				Requester: "alice", Subject: "alice", TargetKey: "billing-dashboard", OperationID: "op-9",
				Reviewers: []string{"bob"}, Project: "config/bindings", MRIID: 12, BatchID: 3, Threshold: "24h",
				RenewLink: "https://changeflow.example/requests/op-9/renew"}
			if err := m.Send(context.Background(), event(k, "k-"+string(k), d)); err != nil {
				t.Fatal(err)
			}
			got := srv.Messages()[0]
			if got.Subject == "" || strings.Contains(got.Subject, string(k)) {
				t.Errorf("subject %q", got.Subject)
			}
			for _, want := range []string{d.Summary, d.WhatToDo, "https://changeflow.example/requests/op-1"} {
				if !strings.Contains(got.Text, want) || !strings.Contains(got.HTML, want) {
					t.Errorf("lacks %q:\n%s", want, got.Text)
				}
			}
			if k == notify.KindAccessExpiring && (!strings.Contains(got.Text, d.RenewLink) || !strings.Contains(got.HTML, `href="`+d.RenewLink+`"`)) {
				t.Errorf("no renew link:\n%s", got.HTML)
			}
			for _, machinery := range []string{"step", "IN_EFFECT", "APPROVAL_", string(k)} {
				if strings.Contains(got.Text, machinery) {
					t.Errorf("the text names %q:\n%s", machinery, got.Text)
				}
			}
		})
	}
}

// TestWithoutADirectoryOnlyOperatorsHear: a nil Lookup gives no person
// an address — their kinds are skipped, the operators' still sent.
func TestWithoutADirectoryOnlyOperatorsHear(t *testing.T) {
	srv, host, port := startSMTP(t, simmailOptions())
	m, err := mail.New(mail.Settings{Host: host, Port: port, From: "cf@corp.example"}, mail.Options{Operators: []string{"ops@corp.example"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Send(context.Background(), inEffect("nd-1")); !errors.Is(err, notify.ErrNotForThisChannel) {
		t.Fatalf("in effect without a directory: %v", err)
	}
	if err := m.Send(context.Background(), event(notify.KindBatchBlocked, "nd-2", notify.Data{Project: "config/bindings"})); err != nil {
		t.Fatal(err)
	}
	if msgs := srv.Messages(); len(msgs) != 1 || msgs[0].EnvelopeTo[0] != "ops@corp.example" {
		t.Fatalf("inbox %+v", msgs)
	}
}
