package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestClustercheckNeedsTheNodesDSN(t *testing.T) {
	err := run(t.Context(), []string{"changeflow", "clustercheck"}, func(string) string { return "" }, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), clustercheckDSNEnv) {
		t.Fatalf("want a usage error naming --dsn and %s, got %v", clustercheckDSNEnv, err)
	}
}

// A plain MariaDB server is refused at start: a check that always answered
// 200 for it would keep a non-cluster server in an HA proxy's rotation.
func TestClustercheckRefusesAServerThatIsNotAGaleraNode(t *testing.T) {
	dsn := storetest.NewDatabase(t, store.DriverMySQL)
	err := run(t.Context(), []string{"changeflow", "clustercheck", "--dsn", dsn, "--listen", "127.0.0.1:0"},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a Galera node") {
		t.Fatalf("want 'not a Galera node', got %v", err)
	}
	if strings.Contains(err.Error(), "@tcp") && !strings.Contains(err.Error(), "xxxxx") {
		t.Fatalf("the password is not masked: %v", err)
	}
}

// A node that does not answer is 503, never 200: the proxy must route
// around it.
func TestClustercheckAnswers503WhenTheNodeDoesNotAnswer(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Timeout = "tcp", "127.0.0.1:1", "nobody", 200*time.Millisecond
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	h := clustercheckHandler(db, time.Second, slog.New(slog.DiscardHandler))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d, want 503", method, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d, want 405", rec.Code)
	}
}

// Against a Synced node of the test cluster: 200 with the state in words,
// and a clean stop when its context ends.
func TestClustercheckAnswers200ForASyncedNode(t *testing.T) {
	dsns := storetest.GaleraDSNs(t)
	ctx, cancel := context.WithCancel(t.Context())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changeflow", "clustercheck", "--listen", "127.0.0.1:0"},
			func(k string) string {
				if k == clustercheckDSNEnv {
					return dsns[1]
				}
				return ""
			}, out, io.Discard)
	}()
	addr := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	waitFor(t, 20*time.Second, "clustercheck listening", func() bool {
		select {
		case err := <-done:
			t.Fatalf("clustercheck ended: %v", err)
		default:
		}
		return addr.MatchString(out.String())
	})
	if strings.Contains(out.String(), "changeflow:changeflow@") {
		t.Fatalf("the start-up line shows the password: %s", out.String())
	}
	// The node may be catching up after another test's node loss; the
	// check answers what the node says, and a Synced node is the steady
	// state.
	url := addr.FindString(out.String()) + "/"
	var body string
	waitFor(t, time.Minute, "200 from a Synced node", func() bool {
		resp, err := procClient.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.HasPrefix(body, "serving: Synced in the Primary component of ") {
		t.Fatalf("body %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stop: %v", err)
	}
}
