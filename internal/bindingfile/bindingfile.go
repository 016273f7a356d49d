// Package bindingfile is the model of a binding file in the config repo
// (docs/workflow.md): a YAML list of {subject, expiresAt, operationId} sorted by
// subject, one entry per subject. The change a request makes adds the
// subject's entry or replaces it. Output is deterministic — the same
// entries always render the same bytes — so a retried commit of the same
// request is a no-op and a preview shows exactly what the MR will change.
//
// The preview endpoint uses it now; the workflow's create step uses it to
// build the commit.
package bindingfile

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Entry is one subject's binding in the file.
type Entry struct {
	// Subject is the canonical account, e.g. alice.
	Subject string
	// ExpiresAt is when the binding lapses, kept in UTC at second
	// precision (the file's resolution).
	ExpiresAt time.Time
	// OperationID is the request that wrote the entry.
	OperationID string
}

// File is a parsed binding file: entries sorted by subject, subjects
// unique.
type File struct {
	Entries []Entry
}

// yamlEntry is an entry as written: the time as RFC 3339 text, so that
// no YAML library's timestamp rendering can change the bytes.
type yamlEntry struct {
	Subject     string `yaml:"subject"`
	ExpiresAt   string `yaml:"expiresAt"`
	OperationID string `yaml:"operationId"`
}

// ErrInvalid marks content that is not a binding file.
var ErrInvalid = errors.New("invalid binding file")

// Parse reads a binding file. Empty content (a file that does not exist
// yet) is an empty file. Entries are sorted on the way in; a subject that
// appears twice, a blank subject or an unreadable expiry is an error
// wrapping ErrInvalid — the file is hand-editable, and a broken one must
// be noticed rather than silently rewritten.
func Parse(content []byte) (File, error) {
	if len(bytes.TrimSpace(content)) == 0 {
		return File{}, nil
	}
	var raw []yamlEntry
	if err := yaml.Unmarshal(content, &raw); err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	f := File{Entries: make([]Entry, 0, len(raw))}
	seen := make(map[string]bool, len(raw))
	for i, r := range raw {
		subject := strings.TrimSpace(r.Subject)
		if subject == "" {
			return File{}, fmt.Errorf("%w: entry %d has no subject", ErrInvalid, i+1)
		}
		if seen[subject] {
			return File{}, fmt.Errorf("%w: subject %q appears twice", ErrInvalid, subject)
		}
		seen[subject] = true
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(r.ExpiresAt))
		if err != nil {
			return File{}, fmt.Errorf("%w: entry %q: expiresAt %q is not RFC 3339", ErrInvalid, subject, r.ExpiresAt)
		}
		f.Entries = append(f.Entries, Entry{Subject: subject, ExpiresAt: at.UTC(), OperationID: strings.TrimSpace(r.OperationID)})
	}
	sortEntries(f.Entries)
	return f, nil
}

// With returns a copy of f with e added, or replacing the entry of
// e.Subject: the change one request makes.
func (f File) With(e Entry) File {
	e.ExpiresAt = e.ExpiresAt.UTC().Truncate(time.Second)
	out := File{Entries: make([]Entry, 0, len(f.Entries)+1)}
	for _, x := range f.Entries {
		if x.Subject != e.Subject {
			out.Entries = append(out.Entries, x)
		}
	}
	out.Entries = append(out.Entries, e)
	sortEntries(out.Entries)
	return out
}

// Without returns a copy of f without subject's entry.
func (f File) Without(subject string) File {
	out := File{Entries: make([]Entry, 0, len(f.Entries))}
	for _, x := range f.Entries {
		if x.Subject != subject {
			out.Entries = append(out.Entries, x)
		}
	}
	return out
}

// WithoutEntryOf returns a copy of f without subject's entry if — and only
// if — that entry was written by operationID: the change a revocation
// makes. An entry of the subject written by anyone else (by hand, by an
// older release, by a later request) is kept; removed reports whether
// anything was removed.
func (f File) WithoutEntryOf(subject, operationID string) (out File, removed bool) {
	e, ok := f.Entry(subject)
	if !ok || e.OperationID != operationID {
		return f, false
	}
	return f.Without(subject), true
}

// Entry returns subject's entry; ok is false when there is none.
func (f File) Entry(subject string) (Entry, bool) {
	for _, x := range f.Entries {
		if x.Subject == subject {
			return x, true
		}
	}
	return Entry{}, false
}

// Marshal renders f: a header comment, then the sorted list ("[]" when
// empty), two-space indentation, times in UTC RFC 3339, a final newline.
func (f File) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(header)
	if len(f.Entries) == 0 {
		b.WriteString("[]\n")
		return b.Bytes()
	}
	entries := slices.Clone(f.Entries)
	sortEntries(entries)
	for _, e := range entries {
		b.WriteString("- subject: " + scalar(e.Subject) + "\n")
		b.WriteString("  expiresAt: " + scalar(e.ExpiresAt.UTC().Truncate(time.Second).Format(time.RFC3339)) + "\n")
		b.WriteString("  operationId: " + scalar(e.OperationID) + "\n")
	}
	return b.Bytes()
}

// header opens every file the service writes.
const header = "# Managed by changeflow: one entry per subject, sorted by subject.\n"

// scalar renders s as a double-quoted YAML scalar. Always quoting keeps
// the output independent of what a value looks like (a subject "yes", an
// id "0123", a time YAML would read as a timestamp).
func scalar(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Subject, b.Subject) })
}
