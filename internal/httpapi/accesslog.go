package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"
)

// accessLog logs one structured line per request and tags the response
// with a request id (the client's X-Request-Id when it is a sane token, so
// a trace can cross the proxy; a fresh one otherwise).
func accessLog(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Request-Id")
			if !saneRequestID(id) {
				id = newRequestID()
			}
			w.Header().Set("X-Request-Id", id)
			tw, ok := w.(*trackingWriter)
			if !ok {
				tw = &trackingWriter{ResponseWriter: w}
			}
			start := time.Now()
			defer func() {
				// Logged from a defer so a panicking request still leaves
				// its line; the recovery handler above turns it into a 500.
				// LogAttrs with typed attributes writes the same line as
				// Info with key-value pairs, without boxing each value: this
				// runs on every request.
				status := tw.Status()
				if v := recover(); v != nil {
					logger.LogAttrs(r.Context(), slog.LevelInfo, "http request", slog.String("id", id),
						slog.String("method", r.Method), slog.String("path", r.URL.Path),
						slog.Int("status", http.StatusInternalServerError), slog.Float64("ms", millis(time.Since(start))))
					panic(v)
				}
				logger.LogAttrs(r.Context(), slog.LevelInfo, "http request", slog.String("id", id),
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
					slog.Int64("bytes", tw.bytes), slog.Float64("ms", millis(time.Since(start))))
			}()
			next.ServeHTTP(tw, r)
		})
	}
}

func saneRequestID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// millis renders a duration as fractional milliseconds, the unit people
// read latency in; slog would otherwise print integer nanoseconds.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
