package bindingfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 30, 10, 0, 0, 0, time.UTC)

func TestWithAddsOrReplacesAndSorts(t *testing.T) {
	f := File{}.
		With(Entry{Subject: "carol", ExpiresAt: t0, OperationID: "op-c"}).
		With(Entry{Subject: "alice", ExpiresAt: t0, OperationID: "op-a1"}).
		With(Entry{Subject: "alice", ExpiresAt: t0.Add(time.Hour), OperationID: "op-a2"})
	if len(f.Entries) != 2 || f.Entries[0].Subject != "alice" || f.Entries[1].Subject != "carol" {
		t.Fatalf("entries: %+v", f.Entries)
	}
	if e, _ := f.Entry("alice"); e.OperationID != "op-a2" || !e.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("alice not replaced: %+v", e)
	}
}

func TestMarshalIsDeterministicAndRoundTrips(t *testing.T) {
	a := File{}.With(Entry{Subject: "bob", ExpiresAt: t0, OperationID: "op-b"}).With(Entry{Subject: "alice", ExpiresAt: t0.In(time.FixedZone("x", 3600)), OperationID: "op-a"})
	b := File{}.With(Entry{Subject: "alice", ExpiresAt: t0, OperationID: "op-a"}).With(Entry{Subject: "bob", ExpiresAt: t0, OperationID: "op-b"})
	if string(a.Marshal()) != string(b.Marshal()) {
		t.Fatalf("same entries, different bytes:\n%s\n%s", a.Marshal(), b.Marshal())
	}
	want := header + "- subject: \"alice\"\n  expiresAt: \"2026-12-30T10:00:00Z\"\n  operationId: \"op-a\"\n" +
		"- subject: \"bob\"\n  expiresAt: \"2026-12-30T10:00:00Z\"\n  operationId: \"op-b\"\n"
	if got := string(a.Marshal()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	back, err := Parse(a.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Marshal()) != want {
		t.Fatalf("round trip changed the bytes:\n%s", back.Marshal())
	}
	if got := string(File{}.Marshal()); got != header+"[]\n" {
		t.Fatalf("empty file: %q", got)
	}
}

func TestParse(t *testing.T) {
	t.Run("empty content is an empty file", func(t *testing.T) {
		for _, c := range []string{"", "  \n", header + "[]\n"} {
			f, err := Parse([]byte(c))
			if err != nil || len(f.Entries) != 0 {
				t.Fatalf("%q: %+v %v", c, f, err)
			}
		}
	})
	t.Run("hand-written unsorted file is sorted", func(t *testing.T) {
		f, err := Parse([]byte("- subject: zed\n  expiresAt: 2026-12-30T10:00:00Z\n  operationId: z\n- subject: amy\n  expiresAt: '2026-12-30T11:00:00+01:00'\n  operationId: a\n"))
		if err != nil {
			t.Fatal(err)
		}
		if f.Entries[0].Subject != "amy" || !f.Entries[0].ExpiresAt.Equal(t0) {
			t.Fatalf("%+v", f.Entries)
		}
	})
	for name, c := range map[string]string{
		"not a list":        "subject: alice\n",
		"duplicate subject": "- {subject: a, expiresAt: 2026-12-30T10:00:00Z}\n- {subject: a, expiresAt: 2026-12-30T10:00:00Z}\n",
		"blank subject":     "- {subject: ' ', expiresAt: 2026-12-30T10:00:00Z}\n",
		"unreadable expiry": "- {subject: a, expiresAt: tomorrow}\n",
		"malformed yaml":    "- [\n",
	} {
		t.Run("invalid: "+name, func(t *testing.T) {
			if _, err := Parse([]byte(c)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	t.Run("values that look like other YAML types survive", func(t *testing.T) {
		f := File{}.With(Entry{Subject: "yes", ExpiresAt: t0, OperationID: "0123"}).With(Entry{Subject: `we"ird\`, ExpiresAt: t0, OperationID: "x"})
		back, err := Parse(f.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := back.Entry("yes"); !ok || e.OperationID != "0123" {
			t.Fatalf("%+v", back)
		}
		if _, ok := back.Entry(`we"ird\`); !ok {
			t.Fatalf("%+v", back)
		}
	})
}

func TestDiff(t *testing.T) {
	before := File{}.With(Entry{Subject: "alice", ExpiresAt: t0, OperationID: "a"}).With(Entry{Subject: "carol", ExpiresAt: t0, OperationID: "c"})
	after := before.With(Entry{Subject: "bob", ExpiresAt: t0, OperationID: "b"})
	lines := Diff(before.Marshal(), after.Marshal())
	var added, removed []string
	for _, l := range lines {
		switch l.Op {
		case OpAdd:
			added = append(added, l.Text)
		case OpRemove:
			removed = append(removed, l.Text)
		}
	}
	if len(removed) != 0 || len(added) != 3 || !strings.Contains(added[0], `"bob"`) {
		t.Fatalf("added %q removed %q", added, removed)
	}
	if d := Diff(nil, after.Marshal()); len(d) != len(strings.Split(strings.TrimSpace(string(after.Marshal())), "\n")) {
		t.Fatalf("diff from nothing: %v", d)
	}
}

func TestWithoutEntryOfRemovesOnlyTheOwnersEntry(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f := File{}.With(Entry{Subject: "alice", ExpiresAt: at, OperationID: "op-a"}).
		With(Entry{Subject: "bob", ExpiresAt: at, OperationID: "by-hand"})
	out, removed := f.WithoutEntryOf("alice", "op-a")
	if !removed || len(out.Entries) != 1 || out.Entries[0].Subject != "bob" {
		t.Fatalf("owned entry: removed=%v %+v", removed, out.Entries)
	}
	for _, c := range []struct{ subject, op string }{{"bob", "op-b"}, {"carol", "op-c"}, {"bob", ""}} {
		out, removed := f.WithoutEntryOf(c.subject, c.op)
		if removed || !bytes.Equal(out.Marshal(), f.Marshal()) {
			t.Fatalf("%s/%s: an entry changeflow did not write was touched", c.subject, c.op)
		}
	}
}
