package deliver

import (
	"net/http"
	"sync"
	"time"
)

// State is where one delivery stands.
type State string

// The states of a delivery in the log.
const (
	StatePending   State = "pending"   // being attempted (or waiting out a delay)
	StateHeld      State = "held"      // held by a pause
	StateDelivered State = "delivered" // a target answered 2xx
	StateDropped   State = "dropped"   // dropped by a fault, never sent
	StateAbandoned State = "abandoned" // the deliverer closed first
)

// Attempt is one HTTP attempt of a delivery.
type Attempt struct {
	Target string    `json:"target"`
	Status int       `json:"status"` // 0: no response
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
}

// Entry is one delivery in the log. A duplicate has its own entry with the
// same Seq as the original and Duplicate set.
type Entry struct {
	Seq         uint64      `json:"seq"`
	Path        string      `json:"path"`
	Header      http.Header `json:"header"`
	Body        string      `json:"body"`
	Duplicate   bool        `json:"duplicate"`
	State       State       `json:"state"`
	Error       string      `json:"error,omitempty"`
	DelayMs     int64       `json:"delayMs"`
	Attempts    []Attempt   `json:"attempts"`
	SubmittedAt time.Time   `json:"submittedAt"`
	FinishedAt  *time.Time  `json:"finishedAt,omitempty"`
}

// entry is the log's mutable record of one delivery.
type entry struct {
	mu sync.Mutex
	e  Entry
}

func (e *entry) setState(s State) {
	e.mu.Lock()
	e.e.State = s
	e.mu.Unlock()
}

func (e *entry) addAttempt(a Attempt) {
	e.mu.Lock()
	e.e.Attempts = append(e.e.Attempts, a)
	e.mu.Unlock()
}

func (e *entry) finish(s State, err error) {
	now := time.Now().UTC()
	e.mu.Lock()
	e.e.State = s
	e.e.Error = errString(err)
	e.e.FinishedAt = &now
	e.mu.Unlock()
}

// snapshot copies the entry under its lock.
func (e *entry) snapshot() Entry {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.e
	c.Attempts = append([]Attempt(nil), e.e.Attempts...)
	return c
}

// record appends a log entry for it, trimming the log to LogSize.
func (d *Deliverer) record(it *item, duplicate bool) *entry {
	e := &entry{e: Entry{
		Seq: it.id, Path: it.path, Header: it.header, Body: string(it.body),
		Duplicate: duplicate, State: StatePending, DelayMs: it.delay.Milliseconds(),
		SubmittedAt: time.Now().UTC(),
	}}
	d.mu.Lock()
	d.log = append(d.log, e)
	if over := len(d.log) - d.opts.LogSize; over > 0 {
		d.log = append([]*entry(nil), d.log[over:]...)
	}
	d.mu.Unlock()
	return e
}

// Log returns a copy of the delivery log, oldest first.
func (d *Deliverer) Log() []Entry {
	d.mu.Lock()
	entries := append([]*entry(nil), d.log...)
	d.mu.Unlock()
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = e.snapshot()
	}
	return out
}

// ClearLog empties the delivery log.
func (d *Deliverer) ClearLog() {
	d.mu.Lock()
	d.log = nil
	d.mu.Unlock()
}
