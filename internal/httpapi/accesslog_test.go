package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// accessLine is the one access-log line of a request, decoded.
func accessLine(t *testing.T, logs *bytes.Buffer) map[string]any {
	t.Helper()
	var found map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "log line %s", l)
		if m["msg"] == "http request" {
			require.Nil(t, found, "one access-log line per request")
			found = m
		}
	}
	require.NotNil(t, found, "no access-log line in %s", logs)
	return found
}

// The access log writes one line per request with the request id, method,
// path, status, bytes and milliseconds, typed as before it moved to
// LogAttrs (numbers as JSON numbers); a panicking request still has its
// line, as a 500 without bytes.
func TestAccessLogLine(t *testing.T) {
	t.Run("a request", func(t *testing.T) {
		h, logs := newTestServer(t, fakeReady{})
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		r.Header.Set("X-Request-Id", "trace-1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code)
		line := accessLine(t, logs)
		require.Equal(t, "INFO", line["level"])
		require.Equal(t, "trace-1", line["id"])
		require.Equal(t, "GET", line["method"])
		require.Equal(t, "/healthz", line["path"])
		require.Equal(t, float64(http.StatusOK), line["status"])
		require.Equal(t, float64(rec.Body.Len()), line["bytes"])
		require.IsType(t, float64(0), line["ms"])
		require.Len(t, line, 9, "time, level, msg and the six fields: %v", line)
	})
	t.Run("a panicking request", func(t *testing.T) {
		h, logs := newTestServer(t, fakeReady{}, route{pattern: "GET /boom", handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic("boom")
		})})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
		require.Equal(t, http.StatusInternalServerError, rec.Code)
		line := accessLine(t, logs)
		require.Equal(t, float64(http.StatusInternalServerError), line["status"])
		require.Equal(t, "/boom", line["path"])
		require.NotContains(t, line, "bytes")
		require.IsType(t, float64(0), line["ms"])
	})
}
