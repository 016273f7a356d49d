package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"changeflow/internal/domain"
)

// recoverPanics is the fallback handler: a panic anywhere below it becomes a
// 500 with the generic message, and the value and stack go to the log only.
// http.ErrAbortHandler is re-panicked because net/http uses it on purpose to
// abort a response, and swallowing it would turn an abort into a body.
func recoverPanics(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tw := &trackingWriter{ResponseWriter: w}
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logger.Error("panic serving request",
					"method", r.Method, "path", r.URL.Path,
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if tw.wroteHeader {
					// Too late for a clean error response; aborting the
					// connection is the honest signal to the client.
					panic(http.ErrAbortHandler)
				}
				writeError(tw, r, logger, domain.Internal(fmt.Sprintf("panic: %v", v), nil))
			}()
			next.ServeHTTP(tw, r)
		})
	}
}

// trackingWriter remembers the status a handler wrote, for the panic
// handler, the access log and the metrics.
type trackingWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bytes       int64
}

func (t *trackingWriter) WriteHeader(code int) {
	if !t.wroteHeader {
		t.status = code
		t.wroteHeader = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	if !t.wroteHeader {
		t.WriteHeader(http.StatusOK)
	}
	n, err := t.ResponseWriter.Write(b)
	t.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer (flush,
// deadlines) through this wrapper.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Status is the status written so far, 200 if the handler wrote nothing.
func (t *trackingWriter) Status() int {
	if !t.wroteHeader {
		return http.StatusOK
	}
	return t.status
}
