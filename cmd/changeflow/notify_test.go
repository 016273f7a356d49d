package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/identity"
	"changeflow/internal/notify"
	"changeflow/internal/notify/mail"
)

// notifySnapshot loads one YAML document as the configuration.
func notifySnapshot(t *testing.T, doc string) *config.Snapshot {
	t.Helper()
	file := filepath.Join(t.TempDir(), "changeflow.yaml")
	writeConfig(t, file, doc)
	cfg, err := config.Load(context.Background(), config.Options{File: file, Getenv: func(string) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cfg.Close() })
	return cfg.Current()
}

func channelNames(chs []notify.Channel) []string {
	var out []string
	for _, c := range chs {
		out = append(out, c.Name())
	}
	return out
}

func TestBuildChannels(t *testing.T) {
	const hooks = "notify:\n  webhooks:\n" +
		"    - {name: audit, url: 'https://audit.corp.example/in', secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, types: [request.in_effect]}\n" +
		"    - {name: siem, url: 'http://siem.corp.example/in', secret: siem-secret}\n" +
		"  chat:\n    - {name: audit, url: 'https://hooks.slack.example/T/B/X', types: [batch.blocked, security.foreign_head]}\n"
	const smtp = "  smtp:\n    host: smtp.corp.example\n    from: changeflow <changeflow@corp.example>\n  operators: [ops@corp.example]\n"
	cases := []struct {
		name string
		doc  string
		want []string
		// wants and refuses are kinds the channel of that name carries
		// and does not.
		wants, refuses map[string][]notify.Kind
	}{
		{name: "nothing configured", doc: "log:\n  level: info\n"},
		{name: "webhooks and chat, mail off without a host", doc: hooks,
			want: []string{"webhook:audit", "webhook:siem", "chat:audit"},
			wants: map[string][]notify.Kind{"webhook:audit": {notify.KindRequestInEffect}, "webhook:siem": notify.Kinds,
				"chat:audit": {notify.KindBatchBlocked, notify.KindForeignHead}},
			refuses: map[string][]notify.Kind{"webhook:audit": {notify.KindRequestFailed}, "chat:audit": {notify.KindRequestInEffect}}},
		{name: "mail when the host is set", doc: hooks + smtp,
			want:    []string{"webhook:audit", "webhook:siem", "chat:audit", "mail"},
			wants:   map[string][]notify.Kind{"mail": {notify.KindRequestInEffect, notify.KindBatchBlocked, notify.KindAccessExpiring}},
			refuses: map[string][]notify.Kind{"mail": {notify.KindRequestSubmitted}}},
		{name: "mail alone", doc: "notify:\n" + smtp, want: []string{"mail"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chs, err := buildChannels(notifySnapshot(t, tc.doc), "", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := channelNames(chs); !slices.Equal(got, tc.want) {
				t.Fatalf("channels %v, want %v", got, tc.want)
			}
			for _, c := range chs {
				for _, k := range tc.wants[c.Name()] {
					if !c.Wants(k) {
						t.Errorf("%s does not carry %s", c.Name(), k)
					}
				}
				for _, k := range tc.refuses[c.Name()] {
					if c.Wants(k) {
						t.Errorf("%s carries %s", c.Name(), k)
					}
				}
			}
		})
	}
}

// TestNotifySMTPPortIsTheMailChannelsDefault: the configuration's
// default port is the one the mail channel documents.
func TestNotifySMTPPortIsTheMailChannelsDefault(t *testing.T) {
	if config.DefaultNotifySMTPPort != mail.DefaultPort {
		t.Fatalf("notify.smtp.port defaults to %d, the mail channel to %d", config.DefaultNotifySMTPPort, mail.DefaultPort)
	}
	if got := notifySnapshot(t, "log:\n  level: info\n").NotifySMTP().Port; got != mail.DefaultPort {
		t.Fatalf("notify.smtp.port is %d", got)
	}
}

func TestNotifyDirectoryEmails(t *testing.T) {
	dir, problems := identity.NewDirectory([]identity.Entry{
		{Account: "alice", Email: "Alice@Corp.example"}, {Account: "bob"},
	})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	lookup := directoryEmails(dir)
	for _, tc := range []struct {
		account, want string
		ok            bool
	}{
		{"alice", "alice@corp.example", true},
		{" Alice ", "alice@corp.example", true},
		{"bob", "", false},   // in the directory, without an address
		{"carol", "", false}, // not in it
		{"", "", false},
	} {
		got, ok, err := lookup(context.Background(), tc.account)
		if err != nil || got != tc.want || ok != tc.ok {
			t.Errorf("lookup(%q) = %q, %t, %v; want %q, %t", tc.account, got, ok, err, tc.want, tc.ok)
		}
	}
	if _, ok, err := directoryEmails(nil)(context.Background(), "alice"); ok || err != nil {
		t.Fatalf("no directory found alice: %t, %v", ok, err)
	}
}

// fakePreferences is the store's NotifyPreferences over a map.
type fakePreferences struct {
	sets map[string]map[string]bool
	err  error
}

func (f fakePreferences) NotifyPreferences(_ context.Context, account string) (map[string]bool, error) {
	return f.sets[account], f.err
}

func TestNotifyStorePreferences(t *testing.T) {
	ps := fakePreferences{sets: map[string]map[string]bool{
		"alice": {string(notify.KindRequestInEffect): false, string(notify.KindAccessExpiring): false, string(notify.KindRequestFailed): true},
	}}
	locked := notifySnapshot(t, "log:\n  level: info\n")
	optOut := notifySnapshot(t, "notify:\n  allowSafetyOptOut: true\n")
	for _, tc := range []struct {
		name    string
		snap    *config.Snapshot
		account string
		kind    notify.Kind
		want    bool
	}{
		{"turned off", locked, "alice", notify.KindRequestInEffect, false},
		{"turned on", locked, "alice", notify.KindRequestFailed, true},
		{"never chosen", locked, "alice", notify.KindRequestRejected, true},
		{"nobody chose anything", locked, "bob", notify.KindRequestInEffect, true},
		{"a safety message stays on", locked, "alice", notify.KindAccessExpiring, true},
		{"unless opting out is allowed", optOut, "alice", notify.KindAccessExpiring, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := storePreferences(ps, func() *config.Snapshot { return tc.snap })(context.Background(), tc.account, tc.kind)
			if err != nil || got != tc.want {
				t.Fatalf("allowed = %t, %v; want %t", got, err, tc.want)
			}
		})
	}
	boom := errors.New("database is gone")
	_, err := storePreferences(fakePreferences{err: boom}, func() *config.Snapshot { return locked })(context.Background(), "alice", notify.KindRequestFailed)
	if !errors.Is(err, boom) {
		t.Fatalf("error %v does not wrap the store's", err)
	}
}

// roundTripFunc is an http.RoundTripper over a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBuildChannelsPostThroughTheGivenClient: the HTTP channels send with
// the client buildChannels is given (its transport: proxies, TLS roots).
func TestBuildChannelsPostThroughTheGivenClient(t *testing.T) {
	var hosts []string
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hosts = append(hosts, r.URL.Host)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})}
	snap := notifySnapshot(t, "notify:\n  webhooks:\n    - {name: a, url: 'http://hook.invalid/in', secret: s}\n"+
		"  chat:\n    - {name: a, url: 'https://chat.invalid/T/B/X'}\n")
	chs, err := buildChannels(snap, "", nil, nil, client)
	if err != nil {
		t.Fatal(err)
	}
	e := notify.Event{SpecVersion: notify.SpecVersion, ID: "e1", Source: "http://127.0.0.1:8080", Type: notify.KindRequestFailed.Type(),
		DataContentType: "application/json", Data: notify.Data{Kind: notify.KindRequestFailed, Summary: "Failed."}}
	for _, c := range chs {
		if err := c.Send(context.Background(), e); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
	if !slices.Equal(hosts, []string{"hook.invalid", "chat.invalid"}) {
		t.Fatalf("posted to %v", hosts)
	}
}
