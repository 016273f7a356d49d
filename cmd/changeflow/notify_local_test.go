package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/identity"
	"changeflow/internal/notify"
	"changeflow/internal/sim/simtoken"
)

// TestNotifyChannelsOfTheLocalProfileReachTheSimulators: the local
// profile, on free ports, builds a webhook to the embedded simulators'
// receiver /hooks/local, signed so it verifies, and a mail channel to
// their SMTP server, on the free port it got (notify.smtp.host unset);
// mail finds the requester's address in the directory and the operators'.
func TestNotifyChannelsOfTheLocalProfileReachTheSimulators(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	local, err := localFiles.ReadFile("local/changeflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dirFile, err := localFiles.ReadFile("local/directory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "directory.yaml"), dirFile, 0o644); err != nil {
		t.Fatal(err)
	}
	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	doc := string(local)
	for old, repl := range map[string]string{
		"127.0.0.1:8090":     simAddr,
		"var/directory.yaml": filepath.Join(dir, "directory.yaml"),
	} {
		if !strings.Contains(doc, old) {
			t.Fatalf("local profile no longer contains %q", old)
		}
		doc = strings.ReplaceAll(doc, old, repl)
	}
	snap := notifySnapshot(t, doc)
	if fb := snap.FellBack(); len(fb) > 0 {
		t.Fatalf("the local profile falls back: %v", fb)
	}
	if got := snap.NotifyWebhooks(); len(got) != 1 || got[0].URL != "http://"+simAddr+"/hooks/local" || got[0].Secret != simtoken.NotifyWebhook {
		t.Fatalf("notify.webhooks = %+v", got)
	}
	if got := embeddedSMTPListen(snap); got != "" {
		t.Fatalf("embedded SMTP listens on %q, want a free port", got)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sims, err := startEmbeddedSim(ctx, snap, "http://127.0.0.1:1", logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sims.Close() })
	if sims.SMTPAddr() == "" {
		t.Fatal("the simulators' SMTP server does not listen")
	}

	fd, err := identity.OpenDirectory(filepath.Join(dir, "directory.yaml"), identity.FileDirectoryOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	chs, err := buildChannels(snap, sims.SMTPAddr(), directoryEmails(fd), storePreferences(fakePreferences{}, func() *config.Snapshot { return snap }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := channelNames(chs); !slices.Equal(got, []string{"webhook:local", "mail"}) {
		t.Fatalf("channels %v", got)
	}
	event := func(id string, k notify.Kind) notify.Event {
		return notify.Event{SpecVersion: notify.SpecVersion, ID: id, Source: "http://127.0.0.1:8080", Type: k.Type(),
			Subject: "op-1", Time: time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC), DataContentType: "application/json",
			Data: notify.Data{Kind: k, Summary: "Access of alice to billing-dashboard is in effect.", OperationID: "op-1",
				Requester: "alice", Subject: "alice", TargetKey: "billing-dashboard"}}
	}
	for _, c := range chs {
		if err := c.Send(ctx, event("e1", notify.KindRequestInEffect)); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
	}
	if err := chs[1].Send(ctx, event("e2", notify.KindBatchBlocked)); err != nil {
		t.Fatalf("mail to the operators: %v", err)
	}

	ds := sims.Hooks.Deliveries()
	if len(ds) != 1 || ds[0].Name != "local" || ds[0].ID != "e1" || !ds[0].Verified {
		t.Fatalf("webhook deliveries: %+v", ds)
	}
	ms := sims.Mail.Messages()
	if len(ms) != 2 || !slices.Equal(ms[0].EnvelopeTo, []string{"alice@corp.example"}) || !slices.Equal(ms[1].EnvelopeTo, []string{"olivia@corp.example"}) {
		var to [][]string
		for _, m := range ms {
			to = append(to, m.EnvelopeTo)
		}
		t.Fatalf("mail went to %v", to)
	}
}
