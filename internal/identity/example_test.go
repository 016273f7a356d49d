package identity

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestExampleDirectoryLoads: docs/directory.example.yaml, the file
// docs/deploy.md points identity.directoryFile at, loads through the
// loader serve uses (OpenDirectory) without a single entry left out, and
// every login form it lists — account, email, employee ID — resolves to
// that entry's account. An example that silently drops a person would
// teach the first deployment to lose people.
func TestExampleDirectoryLoads(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "directory.example.yaml")
	var logs bytes.Buffer
	f, err := OpenDirectory(path, FileDirectoryOptions{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("OpenDirectory(%s): %v", path, err)
	}
	if strings.Contains(logs.String(), "level=WARN") || strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("loading the example logged a problem:\n%s", logs.String())
	}

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		t.Fatal(err)
	}
	d := f.Directory()
	if len(entries) == 0 || d.Len() != len(entries) {
		t.Fatalf("the example lists %d people, the directory holds %d", len(entries), d.Len())
	}
	for _, e := range entries {
		if e.Email == "" || e.EmployeeID == "" || e.DisplayName == "" {
			t.Errorf("%s: an example entry should show every field: %+v", e.Account, e)
		}
		for _, login := range []string{e.Account, e.Email, e.EmployeeID} {
			got, ok := d.Lookup(Normalize(login))
			if !ok || got.Account != e.Account || got.DisplayName != e.DisplayName {
				t.Errorf("login %q resolves to %+v (found %v), want account %q", login, got, ok, e.Account)
			}
		}
	}
}
