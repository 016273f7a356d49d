package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/metrics"
	"changeflow/internal/store"
)

type fakeReady struct {
	pingErr     error
	cur, latest int64
	pending     bool
	statusErr   error
	cluster     store.ClusterState // zero: not a cluster, always serving
	clusterErr  error
}

func (f fakeReady) Ping(context.Context) error { return f.pingErr }
func (f fakeReady) MigrationStatus(context.Context) (int64, int64, bool, error) {
	return f.cur, f.latest, f.pending, f.statusErr
}
func (f fakeReady) ClusterReady(context.Context) (store.ClusterState, bool, error) {
	if f.clusterErr != nil {
		return store.ClusterState{}, false, f.clusterErr
	}
	return f.cluster, f.cluster == (store.ClusterState{}) || f.cluster.Serving(), nil
}

// newTestServer returns the server and the log it writes, so tests can
// check what reached the log and what reached the client.
func newTestServer(t *testing.T, ready Readiness, extra ...route) (http.Handler, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	d := Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: ready, Version: "test"}
	return newServer(d, extra...), &logs
}

func do(t *testing.T, h http.Handler, method, path string, body io.Reader) (*httptest.ResponseRecorder, Envelope) {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = io.ReadAll(body); err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, body)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	conformRecorded(t, req, raw, rec.Code, rec.Header(), rec.Body.Bytes())
	var env Envelope
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s %s: body is not an envelope: %v: %s", method, path, err, rec.Body.String())
		}
	}
	return rec, env
}

func TestHealthz(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	rec, env := do(t, h, "GET", "/healthz", nil)
	if rec.Code != 200 || env.Code != domain.CodeOK {
		t.Fatalf("healthz = %d %s, want 200 OK", rec.Code, env.Code)
	}
	if rec.Header().Get("X-Request-Id") == "" {
		t.Fatal("no X-Request-Id on the response")
	}
}

func TestReadyz(t *testing.T) {
	tests := []struct {
		name       string
		ready      fakeReady
		wantStatus int
		wantCode   domain.Code
	}{
		{"ready when database answers and schema is current", fakeReady{cur: 3, latest: 3}, 200, domain.CodeOK},
		{"not ready when database is unreachable", fakeReady{pingErr: errors.New("dial tcp 10.0.0.1: refused")}, 503, domain.CodeRetryLater},
		{"not ready when migrations are pending", fakeReady{cur: 2, latest: 3, pending: true}, 503, domain.CodeRetryLater},
		{"not ready when the schema is newer than expected", fakeReady{cur: 4, latest: 3}, 503, domain.CodeRetryLater},
		{"ready on a Synced Galera node of the primary component",
			fakeReady{cur: 3, latest: 3, cluster: store.ClusterState{Ready: true, State: "Synced", Status: "Primary", Size: 3}}, 200, domain.CodeOK},
		{"not ready while the Galera node is joining",
			fakeReady{cur: 3, latest: 3, cluster: store.ClusterState{Ready: false, State: "Joining", Status: "Primary", Size: 3}}, 503, domain.CodeRetryLater},
		{"not ready while the Galera node donates its state",
			fakeReady{cur: 3, latest: 3, cluster: store.ClusterState{Ready: true, State: "Donor/Desynced", Status: "Primary", Size: 3}}, 503, domain.CodeRetryLater},
		{"not ready when the Galera node lost the quorum",
			fakeReady{cur: 3, latest: 3, cluster: store.ClusterState{Ready: false, State: "Initialized", Status: "non-Primary", Size: 1}}, 503, domain.CodeRetryLater},
		{"not ready when the cluster state cannot be read",
			fakeReady{cur: 3, latest: 3, clusterErr: errors.New("Error 1047: WSREP has not yet prepared node 10.0.0.1")}, 503, domain.CodeRetryLater},
		{"not ready when migration status fails", fakeReady{statusErr: errors.New("Error 1146: table goose_db_version doesn't exist")}, 503, domain.CodeRetryLater},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestServer(t, tt.ready)
			rec, env := do(t, h, "GET", "/readyz", nil)
			if rec.Code != tt.wantStatus || env.Code != tt.wantCode {
				t.Fatalf("readyz = %d %s, want %d %s", rec.Code, env.Code, tt.wantStatus, tt.wantCode)
			}
			for _, leak := range []string{"10.0.0.1", "1146", "1047", "WSREP", "goose"} {
				if strings.Contains(rec.Body.String(), leak) {
					t.Fatalf("readyz body leaks %q: %s", leak, rec.Body.String())
				}
			}
		})
	}
}

func TestUnmatchedRequestsGetTheEnvelope(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	t.Run("unknown path is 404 NOT_FOUND", func(t *testing.T) {
		rec, env := do(t, h, "GET", "/no/such/thing", nil)
		if rec.Code != 404 || env.Code != domain.CodeNotFound {
			t.Fatalf("got %d %s", rec.Code, env.Code)
		}
	})
	t.Run("wrong method is 405 with Allow", func(t *testing.T) {
		rec, env := do(t, h, "POST", "/healthz", nil)
		if rec.Code != 405 || env.Code != domain.CodeMethodNotAllowed {
			t.Fatalf("got %d %s", rec.Code, env.Code)
		}
		if !strings.Contains(rec.Header().Get("Allow"), "GET") {
			t.Fatalf("Allow = %q", rec.Header().Get("Allow"))
		}
	})
}

func TestPanicsNeverLeak(t *testing.T) {
	secret := "password=hunter2 at db.internal:3306"
	h, logs := newTestServer(t, fakeReady{}, route{
		pattern: "GET /boom",
		metrics: true,
		handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(secret) }),
	}, route{
		pattern: "GET /fail",
		metrics: true,
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, slog.New(slog.NewTextHandler(io.Discard, nil)), errors.New(secret))
		}),
	})
	for _, path := range []string{"/boom", "/fail"} {
		t.Run(path, func(t *testing.T) {
			rec, env := do(t, h, "GET", path, nil)
			if rec.Code != 500 || env.Code != domain.CodeInternal || env.Message != domain.GenericMessage {
				t.Fatalf("got %d %s %q", rec.Code, env.Code, env.Message)
			}
			if strings.Contains(rec.Body.String(), "hunter2") || strings.Contains(rec.Body.String(), "goroutine") {
				t.Fatalf("response leaks internals: %s", rec.Body.String())
			}
		})
	}
	if !strings.Contains(logs.String(), "hunter2") || !strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("the panic value and stack belong in the log; log was: %s", logs.String())
	}
}

func TestClientErrorsMapToTheirStatus(t *testing.T) {
	tests := []struct {
		err        error
		wantStatus int
		wantMsg    string
	}{
		{domain.E(domain.CodeInvalidArgument, "days must be between 1 and 30"), 400, "days must be between 1 and 30"},
		{domain.E(domain.CodeUnauthenticated, "Please log in."), 401, "Please log in."},
		{domain.Errorf(domain.CodeAccessDenied, "you lack ops.write", "rule ops.write missing for %s", "bob"), 403, domain.AccessDeniedMessage},
		{domain.E(domain.CodeTargetNotOpen, "closed"), 403, "closed"},
		{domain.E(domain.CodeNotFound, "no such request"), 404, "no such request"},
		{domain.E(domain.CodeRequestInProgress, "in flight"), 409, "in flight"},
		{domain.E(domain.CodeAlreadyInEffect, "until"), 409, "until"},
		{domain.E(domain.CodeIdempotencyReused, "reused"), 422, "reused"},
		{domain.E(domain.CodeIdempotencyInFlight, "in flight"), 409, "in flight"},
		{domain.E(domain.CodeRateLimited, "slow down"), 429, "slow down"},
		{domain.E(domain.CodeRetryLater, "later"), 503, "later"},
		{&domain.Error{Code: "SOMETHING_NEW", Message: "leaky"}, 500, domain.GenericMessage},
	}
	for _, tt := range tests {
		t.Run(string(domain.ErrorCode(tt.err)), func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(rec, httptest.NewRequest("GET", "/", nil), slog.New(slog.NewTextHandler(io.Discard, nil)), tt.err)
			var env Envelope
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.wantStatus || env.Message != tt.wantMsg {
				t.Fatalf("got %d %q, want %d %q", rec.Code, env.Message, tt.wantStatus, tt.wantMsg)
			}
		})
	}
}

func TestMetricsEndpointExposesHTTPSeries(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	do(t, h, "GET", "/healthz", nil)
	rec, _ := do(t, h, "GET", "/metrics", nil)
	if rec.Code != 200 {
		t.Fatalf("metrics = %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`changeflow_http_requests_total{code="200",method="GET",route="GET /healthz"} 1`,
		`changeflow_http_requests_received_total{method="GET",route="GET /healthz"} 1`,
		`changeflow_build_info{version="test"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lacks %q", want)
		}
	}
}

// TestBusyIsRetryLater: an error the store marks busy — a lock wait that
// ran out, a Galera conflict that outlived the retries, a database node
// that is unreachable or not ready — reaches the client as 503
// RETRY_LATER with a Retry-After, not as a 500, with no driver text.
func TestBusyIsRetryLater(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"a bare busy error", fmt.Errorf("claim: %w", domain.ErrBusy)},
		{"busy wrapped as an internal error by a handler", domain.Internal("list requests", fmt.Errorf("%w: Error 1047: WSREP has not yet prepared node", domain.ErrBusy))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			rec := httptest.NewRecorder()
			writeError(rec, httptest.NewRequest("GET", "/api/requests", nil), logger, tt.err)
			require.Equal(t, 503, rec.Code)
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
			var env Envelope
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env))
			require.Equal(t, domain.CodeRetryLater, env.Code)
			require.NotContains(t, rec.Body.String(), "1047")
			require.NotContains(t, rec.Body.String(), "WSREP")
			require.Contains(t, logs.String(), "database busy", "the cause is in the log")
		})
	}
	t.Run("an error that is not busy stays a 500", func(t *testing.T) {
		rec := httptest.NewRecorder()
		writeError(rec, httptest.NewRequest("GET", "/x", nil), slog.New(slog.DiscardHandler), errors.New("boom"))
		require.Equal(t, 500, rec.Code)
		require.Empty(t, rec.Header().Get("Retry-After"))
	})
}
