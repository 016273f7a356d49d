package identity

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const localDirectory = `
- account: alice
  email: alice@corp.example
  employeeId: E10023
  displayName: Alice Example
- account: bob
  email: Bob@Corp.Example
  employeeId: e10024
`

func mustDirectory(t testing.TB, yaml string) *Directory {
	t.Helper()
	d, problems, err := ParseDirectory(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return d
}

func TestDirectoryLookup(t *testing.T) {
	d := mustDirectory(t, localDirectory)
	for _, raw := range []string{"alice", "ALICE", "alice@corp.example", " Alice@CORP.example", "E10023", "e10023"} {
		e, ok := d.Lookup(Normalize(raw))
		if !ok || e.Account != "alice" {
			t.Errorf("Lookup(%q) = %+v %v, want alice", raw, e, ok)
		}
	}
	if e, ok := d.Lookup(Normalize("bob@corp.example")); !ok || e.Account != "bob" || e.EmployeeID != "E10024" {
		t.Errorf("directory fields are normalized too: %+v %v", e, ok)
	}
	for _, raw := range []string{"carol", "alice@partner.example", "E99999", ""} {
		if _, ok := d.Lookup(Normalize(raw)); ok {
			t.Errorf("Lookup(%q) found someone", raw)
		}
	}
}

func TestDirectoryLeavesAmbiguousKeysOut(t *testing.T) {
	d, problems, err := ParseDirectory(strings.NewReader(`
- {account: alice, email: shared@corp.example, employeeId: E1000}
- {account: bob, email: shared@corp.example, employeeId: E1001}
- {account: alice, email: other@corp.example}
- {account: "not an account!", email: x@corp.example}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 3 {
		t.Fatalf("want 3 problems (shared email, repeated account, bad account), got %v", problems)
	}
	if e, ok := d.Lookup(Normalize("shared@corp.example")); ok {
		t.Fatalf("an email two people claim resolved to %q", e.Account)
	}
	if e, ok := d.Lookup(Normalize("E1001")); !ok || e.Account != "bob" {
		t.Fatalf("bob's own employee ID still resolves: %+v %v", e, ok)
	}
	if _, ok := d.Lookup(Normalize("other@corp.example")); ok {
		t.Fatal("a repeated account entry must be left out whole")
	}
}

func TestDirectoryRejectsUnknownFields(t *testing.T) {
	if _, _, err := ParseDirectory(strings.NewReader("- {account: alice, employeID: E1}\n")); err == nil {
		t.Fatal("a misspelled field must fail the file")
	}
}

// fakeClock is a settable clock for reload checks.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func writeFile(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestFileDirectoryReloadsOnChangeAndKeepsTheLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "directory.yaml")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	writeFile(t, path, localDirectory, base)
	clock := &fakeClock{now: base}
	f, err := OpenDirectory(path, FileDirectoryOptions{CheckEvery: time.Second, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	has := func(raw string) bool { _, ok := f.Directory().Lookup(Normalize(raw)); return ok }
	if !has("alice") || has("carol") {
		t.Fatal("initial directory wrong")
	}

	writeFile(t, path, localDirectory+"- {account: carol, employeeId: E10099}\n", base.Add(time.Minute))
	if has("E10099") {
		t.Fatal("checked before CheckEvery passed")
	}
	clock.Add(time.Second)
	if !has("E10099") {
		t.Fatal("a changed file must be re-read once CheckEvery passed")
	}

	for name, content := range map[string]string{"invalid YAML": "- [", "empty (partial write)": ""} {
		writeFile(t, path, content, base.Add(2*time.Minute))
		clock.Add(time.Second)
		if !has("E10099") || !has("alice") {
			t.Fatalf("%s: the last good directory must stay in force", name)
		}
		writeFile(t, path, localDirectory, base.Add(time.Minute)) // reset for the next case
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	if !has("alice") {
		t.Fatal("a deleted file must keep the last good directory")
	}
}

func TestOpenDirectoryFailsOnAMissingFile(t *testing.T) {
	if _, err := OpenDirectory(filepath.Join(t.TempDir(), "nope.yaml"), FileDirectoryOptions{}); err == nil {
		t.Fatal("want an error at startup")
	}
}
