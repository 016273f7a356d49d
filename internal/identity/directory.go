package identity

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
)

// Entry is one person in the identity directory (identity.directoryFile):
// every login form of the person, and the one canonical account they all
// resolve to.
type Entry struct {
	Account     string `yaml:"account"`
	Email       string `yaml:"email"`
	EmployeeID  string `yaml:"employeeId"`
	DisplayName string `yaml:"displayName"`
}

// Directory maps email-style accounts, employee IDs and accounts to the
// canonical Entry. It is immutable; FileDirectory swaps whole directories.
type Directory struct {
	byAccount  map[string]Entry
	byEmail    map[string]Entry
	byEmployee map[string]Entry
}

// DirectorySource yields the directory in force. *Directory is its own
// source; *FileDirectory reloads its file when it changes.
type DirectorySource interface {
	Directory() *Directory
}

// Directory returns d itself.
func (d *Directory) Directory() *Directory { return d }

// NewDirectory builds a directory from entries, normalizing every field
// with the rules login values go through. It never fails: an entry it
// cannot use is left out and reported in problems. An email or employee ID
// claimed by two different accounts is left out for both — which of the
// two people logs in with it cannot be known, and guessing would hand one
// person the other's permissions; both can still log in with their
// account. A repeated account keeps its first entry.
func NewDirectory(entries []Entry) (d *Directory, problems []string) {
	d = &Directory{byAccount: map[string]Entry{}, byEmail: map[string]Entry{}, byEmployee: map[string]Entry{}}
	ambiguous := map[string]bool{}
	claim := func(idx map[string]Entry, key string, e Entry, what string) {
		if ambiguous[what+key] {
			return
		}
		if prev, ok := idx[key]; ok && prev.Account != e.Account {
			delete(idx, key)
			ambiguous[what+key] = true
			problems = append(problems, fmt.Sprintf("%s %q belongs to both %q and %q: left out", what, key, prev.Account, e.Account))
			return
		}
		idx[key] = e
	}
	for i, in := range entries {
		acct, ok := normalizeAccount(in.Account)
		if !ok {
			problems = append(problems, fmt.Sprintf("entry %d: account %q is not a valid account name: left out", i+1, in.Account))
			continue
		}
		if _, dup := d.byAccount[acct]; dup {
			problems = append(problems, fmt.Sprintf("entry %d: account %q repeats an earlier entry: left out", i+1, acct))
			continue
		}
		e := Entry{Account: acct, DisplayName: in.DisplayName}
		if in.Email != "" {
			if l := Normalize(in.Email); l.Kind == KindEmail {
				e.Email = l.Value
			} else {
				problems = append(problems, fmt.Sprintf("entry %d (%s): email %q is not an email: ignored", i+1, acct, in.Email))
			}
		}
		if in.EmployeeID != "" {
			if l := Normalize(in.EmployeeID); l.Kind == KindEmployeeID {
				e.EmployeeID = l.Value
			} else {
				problems = append(problems, fmt.Sprintf("entry %d (%s): employeeId %q is not an employee ID: ignored", i+1, acct, in.EmployeeID))
			}
		}
		d.byAccount[acct] = e
		if e.Email != "" {
			claim(d.byEmail, e.Email, e, "email")
		}
		if e.EmployeeID != "" {
			claim(d.byEmployee, e.EmployeeID, e, "employeeId")
		}
	}
	return d, problems
}

// Len is the number of accounts in the directory.
func (d *Directory) Len() int { return len(d.byAccount) }

// Lookup finds the person a normalized login value belongs to. An
// employee-ID-shaped value is also tried as an account, since nothing
// forbids an account name of that shape. A nil directory finds nobody.
func (d *Directory) Lookup(l Login) (Entry, bool) {
	if d == nil {
		return Entry{}, false
	}
	var e Entry
	var ok bool
	switch l.Kind {
	case KindEmail:
		e, ok = d.byEmail[l.Value]
	case KindEmployeeID:
		if e, ok = d.byEmployee[l.Value]; !ok {
			e, ok = d.byAccount[normalizedLower(l.Value)]
		}
	case KindAccount:
		e, ok = d.byAccount[l.Value]
	}
	return e, ok
}

// LookupField finds the person whose field f equals the normalized value,
// looking at that one field only (oidc.accountField). An
// employee-ID-shaped value is looked up as an account on FieldAccount. A
// nil directory finds nobody.
func (d *Directory) LookupField(f Field, l Login) (Entry, bool) {
	if d == nil || l.Kind == KindInvalid {
		return Entry{}, false
	}
	var e Entry
	var ok bool
	switch f {
	case FieldEmail:
		if l.Kind == KindEmail {
			e, ok = d.byEmail[l.Value]
		}
	case FieldEmployeeID:
		if l.Kind == KindEmployeeID {
			e, ok = d.byEmployee[l.Value]
		}
	default:
		if l.Kind == KindAccount || l.Kind == KindEmployeeID {
			e, ok = d.byAccount[normalizedLower(l.Value)]
		}
	}
	return e, ok
}

func normalizedLower(s string) string { a, _ := normalizeAccount(s); return a }

// ParseDirectory reads the YAML list of {account, email, employeeId,
// displayName}. Unknown fields are an error: a misspelled "employeID"
// would silently stop mapping someone.
func ParseDirectory(r io.Reader) (*Directory, []string, error) {
	var entries []Entry
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("parse identity directory: %w", err)
	}
	d, problems := NewDirectory(entries)
	return d, problems, nil
}

// FileDirectoryOptions configures a FileDirectory.
type FileDirectoryOptions struct {
	// CheckEvery is how often the file's size and modification time are
	// looked at (default 2s); it bounds how late an edit applies.
	CheckEvery time.Duration
	// Now is the clock (default time.Now); tests inject one.
	Now    func() time.Time
	Logger *slog.Logger
}

// FileDirectory is the directory read from identity.directoryFile,
// re-read when the file changes. The check is a stat done inline by at
// most one request at a time (the others keep using the directory in
// force), so it needs no goroutine and no watcher. A file that becomes
// unreadable or invalid keeps the last good directory and logs why:
// dropping everyone from the directory would make every login untrusted
// and every email-style login a different account.
type FileDirectory struct {
	path   string
	opts   FileDirectoryOptions
	logger *slog.Logger

	cur       atomic.Pointer[Directory]
	nextCheck atomic.Int64 // unix nanos

	mu      sync.Mutex // one reload at a time; guards the fields below
	modTime time.Time
	size    int64
}

// OpenDirectory reads path once. Unlike a reload, a file that is missing
// or invalid at startup is an error: the deployment named a directory, and
// starting without it would quietly resolve nobody.
func OpenDirectory(path string, opts FileDirectoryOptions) (*FileDirectory, error) {
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &FileDirectory{path: path, opts: opts, logger: logger}
	if err := f.reload(true); err != nil {
		return nil, err
	}
	f.nextCheck.Store(opts.Now().Add(opts.CheckEvery).UnixNano())
	return f, nil
}

// Directory returns the directory in force, first re-reading the file if
// it is time to check and it changed.
func (f *FileDirectory) Directory() *Directory {
	now := f.opts.Now()
	if now.UnixNano() >= f.nextCheck.Load() && f.mu.TryLock() {
		f.nextCheck.Store(now.Add(f.opts.CheckEvery).UnixNano())
		if err := f.reloadLocked(false); err != nil {
			f.logger.Error("identity: directory reload failed; keeping the last good directory", "file", f.path, "err", err)
		}
		f.mu.Unlock()
	}
	return f.cur.Load()
}

func (f *FileDirectory) reload(force bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloadLocked(force)
}

func (f *FileDirectory) reloadLocked(force bool) error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("identity directory: %w", err)
	}
	if !force && st.ModTime().Equal(f.modTime) && st.Size() == f.size {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("identity directory: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 && f.cur.Load() != nil {
		// An editor's truncate-then-write caught half way.
		return fmt.Errorf("identity directory %s is empty (partial write?)", f.path)
	}
	d, problems, err := ParseDirectory(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	for _, p := range problems {
		f.logger.Warn("identity: directory entry problem", "file", f.path, "problem", p)
	}
	f.modTime, f.size = st.ModTime(), st.Size()
	f.cur.Store(d)
	f.logger.Info("identity: directory loaded", "file", f.path, "accounts", d.Len())
	return nil
}
