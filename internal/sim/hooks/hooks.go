// Package hooks simulates the receivers of changeflow's notifications: a
// webhook receiver per configured name that verifies the Standard
// Webhooks signature with its own secret, and a chat incoming webhook
// that records what it is posted. Every delivery is kept for the control
// API and the page, with faults (answer a status, answer late) to show
// retries, dead letters and a disabled endpoint (docs/simulators.md,
// "Notification receivers").
package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"changeflow/internal/sim/simhttp"
)

// DefaultKeep is how many deliveries the receiver keeps, oldest dropped
// first: enough for a local run's afternoon, bounded for a long one.
const DefaultKeep = 1000

// The channels a delivery came in on.
const (
	ChannelWebhook = "webhook"
	ChannelChat    = "chat"
)

// Options configures a Server.
type Options struct {
	// Receivers maps a webhook receiver's name to its secret; posts to a
	// name not here are answered 404. The control API changes it.
	Receivers map[string]string
	// Keep bounds the deliveries kept (≤ 0: DefaultKeep).
	Keep int
	// Now is the receiver's clock, for the timestamp tolerance (nil:
	// time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Delivery is one post the receiver got, whatever it answered.
type Delivery struct {
	Seq     int64  `json:"seq"`
	Channel string `json:"channel"` // webhook or chat
	Name    string `json:"name"`
	// ID and Type are the event's, read from webhook-id and the body's
	// "type" (empty for chat).
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
	// Verified says the signature checked out (always false for chat,
	// which is not signed).
	Verified bool `json:"verified"`
	// Duplicate says a verified delivery of this id reached this name
	// before: the sender retried one that had arrived (at least once).
	Duplicate bool `json:"duplicate"`
	// Status is what the receiver answered; Reason says why, when not
	// 200, and notes an answer the sender no longer waited for.
	Status     int       `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	ReceivedAt time.Time `json:"receivedAt"`
	Body       string    `json:"body"`
	// Text is a chat post's "text".
	Text string `json:"text,omitempty"`
}

// Server is the receivers' HTTP handler, mounted under /hooks.
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu         sync.Mutex
	receivers  map[string]string
	deliveries []Delivery
	seen       map[string]bool // name + "\x00" + id of verified deliveries
	seq        int64
	faults     Faults
}

// New returns a Server.
func New(o Options) (*Server, error) {
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: o, mux: http.NewServeMux(), receivers: map[string]string{}, seen: map[string]bool{}}
	for name, secret := range o.Receivers {
		if err := s.SetReceiver(name, secret); err != nil {
			return nil, err
		}
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("POST /{name}", s.handleWebhook)
	s.mux.HandleFunc("POST /chat/{name}", s.handleChat)
	s.mux.HandleFunc("GET /{$}", s.handlePage)
	s.controlRoutes()
}

// ServeHTTP serves the receivers and their control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// reservedNames cannot be receivers: they are the page's and the control
// API's paths.
var reservedNames = map[string]bool{"_control": true, "chat": true}

// SetReceiver configures (or changes) the webhook receiver name with
// secret.
func (s *Server) SetReceiver(name, secret string) error {
	if name == "" || reservedNames[name] {
		return fmt.Errorf("hooks: %q cannot be a receiver's name", name)
	}
	if secret == "" {
		return fmt.Errorf("hooks: receiver %s needs a secret", name)
	}
	if _, err := secretKey(secret); err != nil {
		return fmt.Errorf("hooks: receiver %s: %w", name, err)
	}
	s.mu.Lock()
	s.receivers[name] = secret
	s.mu.Unlock()
	return nil
}

// RemoveReceiver forgets a receiver; its posts are answered 404 again.
func (s *Server) RemoveReceiver(name string) {
	s.mu.Lock()
	delete(s.receivers, name)
	s.mu.Unlock()
}

// Receivers are the configured names, sorted.
func (s *Server) Receivers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.receivers))
	for n := range s.receivers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Deliveries are the kept deliveries, oldest first.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// Clear forgets every delivery (and which ids were seen).
func (s *Server) Clear() {
	s.mu.Lock()
	s.deliveries, s.seen = nil, map[string]bool{}
	s.mu.Unlock()
}

// handleWebhook is POST /{name}: the fault in force, else the signature
// verified with the receiver's secret — 200 when it checks out, 401 when
// it does not, 404 for a name nobody configured.
func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	d := Delivery{Channel: ChannelWebhook, Name: name, ID: r.Header.Get("webhook-id"), Body: string(body)}
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &ev) == nil {
		d.Type = ev.Type
	}
	if status, faulted := s.fault(r.Context(), w, name); faulted {
		d.Status, d.Reason = status, "fault"
		s.answer(w, d)
		return
	}
	s.mu.Lock()
	secret, known := s.receivers[name]
	s.mu.Unlock()
	switch {
	case !known:
		d.Status, d.Reason = http.StatusNotFound, "no receiver named "+name
	default:
		if err := verify(r.Header, body, secret, s.opts.Now()); err != nil {
			d.Status, d.Reason = http.StatusUnauthorized, err.Error()
		} else {
			d.Status, d.Verified = http.StatusOK, true
		}
		if r.Context().Err() != nil {
			// A delay outlasted the sender: received, but its answer is
			// lost and the sender will try again (a duplicate follows).
			d.Reason = "the sender gave up before the answer"
		}
	}
	s.answer(w, d)
}

// handleChat is POST /chat/{name}: a Slack or Mattermost incoming webhook.
// Those are not signed (their URL is the secret), so any name is taken
// and nothing is verified; the body must be JSON with a "text".
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	d := Delivery{Channel: ChannelChat, Name: name, Body: string(body)}
	if status, faulted := s.fault(r.Context(), w, ChannelChat+"/"+name); faulted {
		d.Status, d.Reason = status, "fault"
		s.answer(w, d)
		return
	}
	var msg struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Text == "" {
		d.Status, d.Reason = http.StatusBadRequest, `the body is not JSON with a "text"`
	} else {
		d.Status, d.Text = http.StatusOK, msg.Text
	}
	s.answer(w, d)
}

func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, simhttp.MaxBody+1))
	if err != nil || len(body) > simhttp.MaxBody {
		simhttp.WriteError(w, http.StatusRequestEntityTooLarge, "body unreadable or over 1 MiB")
		return nil, false
	}
	return body, true
}

// answer records d and writes its status.
func (s *Server) answer(w http.ResponseWriter, d Delivery) {
	d = s.record(d)
	s.opts.Logger.Info("notification received", "channel", d.Channel, "name", d.Name, "id", d.ID,
		"type", d.Type, "status", d.Status, "verified", d.Verified, "duplicate", d.Duplicate, "reason", d.Reason)
	if d.Status == http.StatusOK {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	simhttp.WriteError(w, d.Status, d.Reason)
}

func (s *Server) record(d Delivery) Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	d.Seq, d.ReceivedAt = s.seq, s.opts.Now().UTC()
	if d.Verified {
		key := d.Name + "\x00" + d.ID
		d.Duplicate = s.seen[key]
		s.seen[key] = true
	}
	s.deliveries = append(s.deliveries, d)
	if over := len(s.deliveries) - s.opts.Keep; over > 0 {
		s.deliveries = append([]Delivery(nil), s.deliveries[over:]...)
	}
	return d
}

// fault applies the faults in force for a post to target (a receiver's
// name, or "chat/"+name): a delay first, then a status to answer. It
// reports whether the post is answered by the fault (its Retry-After
// already on w).
func (s *Server) fault(ctx context.Context, w http.ResponseWriter, target string) (int, bool) {
	delay, status, retryAfterS := s.takeFaults(target)
	if status != 0 && retryAfterS > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterS))
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return status, status != 0
}
