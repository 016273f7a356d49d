package gitlab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// Fault kinds.
const (
	// faultDrop applies the call, then loses the response: mode "close"
	// (default) hijacks the connection and closes it without a byte, which
	// a Go client sees as an EOF transport error and does not retry for
	// POST/PUT; mode "502" answers 502 instead, which client-go's default
	// retry policy retries (so the call is applied twice).
	faultDrop = "drop"
	// faultDelay holds the response for Delay: after applying the call
	// (phase "after", the default) or before (phase "before").
	faultDelay = "delay"
	// faultStatus answers Status with {"message": Message} without applying
	// the call.
	faultStatus = "status"
)

// Duration is a time.Duration in JSON: "250ms", "2s", or a number of
// milliseconds.
type Duration time.Duration

// MarshalJSON writes the Go duration string, e.g. "250ms".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts a Go duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want \"2s\" or milliseconds: %w", err)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

// Fault is one armed fault rule of the control API. Method "" matches any
// method; Path is a path.Match pattern over the path after /api/v4 (e.g.
// "/projects/1/merge_requests/*/merge"); Count is how many matching calls
// it hits (default 1; -1 until cleared).
type Fault struct {
	ID      int      `json:"id"`
	Method  string   `json:"method"`
	Path    string   `json:"path"`
	Kind    string   `json:"kind"`
	Count   int      `json:"count"`
	Status  int      `json:"status,omitempty"`
	Message string   `json:"message,omitempty"`
	Delay   Duration `json:"delay,omitempty"`
	Mode    string   `json:"mode,omitempty"`
	Phase   string   `json:"phase,omitempty"`
	Hits    int      `json:"hits"`
}

func (f *Fault) validate() error {
	switch f.Kind {
	case faultDrop:
		if f.Mode == "" {
			f.Mode = "close"
		}
		if f.Mode != "close" && f.Mode != "502" {
			return fmt.Errorf("mode must be close or 502")
		}
	case faultDelay:
		if f.Delay <= 0 {
			return fmt.Errorf("delay must be positive")
		}
		if f.Phase == "" {
			f.Phase = "after"
		}
		if f.Phase != "after" && f.Phase != "before" {
			return fmt.Errorf("phase must be before or after")
		}
	case faultStatus:
		if f.Status < 100 || f.Status > 599 {
			return fmt.Errorf("status must be an HTTP status")
		}
		if f.Message == "" {
			f.Message = strconv.Itoa(f.Status) + " " + http.StatusText(f.Status)
		}
	default:
		return fmt.Errorf("kind must be drop, delay or status")
	}
	f.Path = strings.TrimPrefix(f.Path, "/api/v4")
	if f.Path == "" {
		f.Path = "*"
	}
	if _, err := path.Match(f.Path, "/"); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	f.Method = strings.ToUpper(f.Method)
	if f.Count == 0 {
		f.Count = 1
	}
	return nil
}

// matchFault consumes one hit of the first fault matching the call.
func (s *Server) matchFault(r *http.Request) *Fault {
	// The escaped path, so "*" matches "config%2Fbindings" as one segment.
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4")
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Method != "" && f.Method != r.Method {
			continue
		}
		if ok, _ := path.Match(f.Path, p); !ok && f.Path != "*" {
			continue
		}
		f.Hits++
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		cp := *f
		return &cp
	}
	return nil
}

// withFaults applies armed faults to REST calls.
func (s *Server) withFaults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := s.matchFault(r)
		if f == nil {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Info("fault", "kind", f.Kind, "method", r.Method, "path", r.URL.Path)
		switch f.Kind {
		case faultStatus:
			if f.Status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "1")
				w.Header().Set("RateLimit-Reset", strconv.FormatInt(s.now().Add(time.Second).Unix(), 10))
			}
			writeError(w, f.Status, f.Message)
		case faultDelay:
			if f.Phase == "before" && !s.wait(r, time.Duration(f.Delay)) {
				return
			}
			rec := newRecorder()
			next.ServeHTTP(rec, r)
			if f.Phase == "after" && !s.wait(r, time.Duration(f.Delay)) {
				return
			}
			rec.replay(w)
		case faultDrop:
			rec := newRecorder()
			next.ServeHTTP(rec, r)
			if f.Mode == "502" {
				writeError(w, http.StatusBadGateway, "502 Bad Gateway")
				return
			}
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
	})
}

// wait blocks for d, or until POST /_control/faults/release (true), the
// client goes away or the server closes (false).
func (s *Server) wait(r *http.Request, d time.Duration) bool {
	s.mu.Lock()
	if s.released == nil {
		s.released = make(chan struct{})
	}
	release := s.released
	s.held++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-release:
		return true
	case <-r.Context().Done():
		return false
	case <-s.ctx.Done():
		return false
	}
}

// recorder buffers a response so a fault can hold or discard it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) replay(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
