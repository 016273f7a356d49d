package gitlab

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// defaultRequestLogSize is how many API requests the log keeps when
// Options.RequestLogSize is 0: enough for a whole test or a local session's
// last minutes, small enough (a few hundred KB) never to matter.
const defaultRequestLogSize = 1000

// RequestRecord is one /api/v4 request as the request log shows it. It
// names the caller by the user its token belongs to, never by the token:
// the log is readable by anyone who can reach the control API.
type RequestRecord struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	// Path is the escaped path without the query string (a client may put
	// a private_token there).
	Path string `json:"path"`
	// User is the username of the token's user; "" when the request had no
	// token or one the simulator does not know (it was answered 401).
	User string `json:"user"`
	// Status is the answer's status code; 0 when no answer was sent (a
	// drop fault closed the connection, or the client went away first).
	Status     int   `json:"status"`
	DurationMS int64 `json:"duration_ms"`
}

// requestLog is a ring of the last size records. It has its own lock so
// recording never waits for the world's.
type requestLog struct {
	mu      sync.Mutex
	ring    []RequestRecord
	next    int   // where the next record goes
	full    bool  // the ring has wrapped
	seq     int64 // last seq handed out; never reset, so a reader can page by it
	dropped int64 // records overwritten since the last clear
}

func newRequestLog(size int) *requestLog {
	if size <= 0 {
		size = defaultRequestLogSize
	}
	return &requestLog{ring: make([]RequestRecord, size)}
}

func (l *requestLog) add(rec RequestRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	rec.Seq = l.seq
	if l.full {
		l.dropped++
	}
	l.ring[l.next] = rec
	l.next++
	if l.next == len(l.ring) {
		l.next, l.full = 0, true
	}
}

// list returns the kept records oldest first, filtered by user (when
// non-empty) and seq > after, at most limit of the newest (limit ≤ 0: all).
func (l *requestLog) list(user string, after int64, limit int) (out []RequestRecord, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, start := l.next, 0
	if l.full {
		n, start = len(l.ring), l.next
	}
	out = make([]RequestRecord, 0, n)
	for i := range n {
		rec := l.ring[(start+i)%len(l.ring)]
		if rec.Seq <= after || (user != "" && rec.User != user) {
			continue
		}
		out = append(out, rec)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, l.dropped
}

func (l *requestLog) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.ring)
	l.next, l.full, l.dropped = 0, false, 0
}

// statusWriter remembers the status written through it. It passes
// Hijack through, which the drop fault needs.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// withRequestLog records every API request, outside the faults, so an
// injected status or drop is logged as the client saw it. The record is
// written in a defer so a drop (which aborts the handler by panicking)
// is logged too, with status 0.
func (s *Server) withRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		sw := &statusWriter{ResponseWriter: w}
		user := ""
		if u, ok := s.world().byToken[requestToken(r)]; ok && u != nil {
			user = u.Username
		}
		defer func() {
			s.reqLog.add(RequestRecord{
				Time: start, Method: r.Method, Path: r.URL.EscapedPath(), User: user,
				Status: sw.status, DurationMS: s.now().Sub(start).Milliseconds(),
			})
		}()
		next.ServeHTTP(hijackable(sw), r)
	})
}

// hijackable keeps http.Hijacker visible on the wrapped writer when the
// server's writer has it (a drop fault closes the connection).
func hijackable(sw *statusWriter) http.ResponseWriter {
	if hj, ok := sw.ResponseWriter.(http.Hijacker); ok {
		return struct {
			*statusWriter
			http.Hijacker
		}{sw, hj}
	}
	return sw
}

// requestToken is the caller's token: PRIVATE-TOKEN, else a Bearer
// Authorization header.
func requestToken(r *http.Request) string {
	if tok := r.Header.Get("PRIVATE-TOKEN"); tok != "" {
		return tok
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(a)
	}
	return ""
}

// ctlListRequests lists the request log: ?user= one user's requests,
// ?after=seq only newer ones, ?limit=N at most the newest N.
func (s *Server) ctlListRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err1 := atoiOr(q.Get("after"))
	limit, err2 := atoiOr(q.Get("limit"))
	if err1 != nil || err2 != nil || after < 0 || limit < 0 {
		writeError(w, http.StatusBadRequest, "after and limit must be non-negative integers")
		return
	}
	out, dropped := s.reqLog.list(q.Get("user"), int64(after), limit)
	writeJSON(w, http.StatusOK, map[string]any{
		"capacity": len(s.reqLog.ring), "dropped": dropped, "requests": out,
	})
}

func (s *Server) ctlClearRequests(w http.ResponseWriter, r *http.Request) {
	s.reqLog.clear()
	w.WriteHeader(http.StatusNoContent)
}

func atoiOr(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	return strconv.Atoi(v)
}
