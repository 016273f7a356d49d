package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestStatusReadThroughput measures GET /api/requests/{operationId}
// through the whole server (outer chain, identity, authorization, metrics,
// the handler and its database reads, on SQLite) against a bare net/http
// handler returning the same bytes, side by side in one run, with every
// core busy (RunParallel), and counts the statements per read with the
// counting connector (docs/benchmarks.md, "Status read"). A measurement,
// not an assertion on time: it runs with CHANGEFLOW_BENCH_STATUS=1.
//
//	CHANGEFLOW_BENCH_STATUS=1 go test ./internal/httpapi -run TestStatusReadThroughput -v -count=1 [-cpuprofile cpu.out]
func TestStatusReadThroughput(t *testing.T) {
	if os.Getenv("CHANGEFLOW_BENCH_STATUS") != "1" {
		t.Skip("a measurement: runs with CHANGEFLOW_BENCH_STATUS=1 (docs/benchmarks.md)")
	}
	st, counter, err := store.OpenCounting(t.Context(), store.DriverSQLite, storetest.NewDatabase(t, store.DriverSQLite))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	quiet := func(_ *bizWorld, d *Deps) { d.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil)) }
	w := newBizWorld(t, st, quiet)
	w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "bench", ""),
		header: map[string]string{"Idempotency-Key": "bench-1"}}).want(t, 202, "ACCEPTED")

	read := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/api/requests/bench-1", nil)
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set(identity.HeaderUser, "alice")
		rec := httptest.NewRecorder()
		w.h.ServeHTTP(rec, r)
		return rec
	}
	first := read()
	if first.Code != http.StatusOK {
		t.Fatalf("status read: %d %s", first.Code, first.Body)
	}
	body := bytes.Clone(first.Body.Bytes())
	bare := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json; charset=utf-8")
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write(body)
	})

	s0, _, _ := counter.Snapshot()
	const counted = 100
	start := time.Now()
	for range counted {
		if rec := read(); rec.Code != http.StatusOK {
			t.Fatalf("status read: %d", rec.Code)
		}
	}
	seq := time.Since(start) / counted
	s1, _, _ := counter.Snapshot()
	start = time.Now()
	for range counted {
		if _, err := st.OperationGet(t.Context(), "bench-1"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("one read after another: %v per status read, %v per OperationGet alone", seq, time.Since(start)/counted)

	bareRes := testing.Benchmark(func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			r := httptest.NewRequest(http.MethodGet, "/api/requests/bench-1", nil)
			for pb.Next() {
				bare.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	})
	fullRes := testing.Benchmark(func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if rec := read(); rec.Code != http.StatusOK {
					b.Errorf("status read: %d", rec.Code)
					return
				}
			}
		})
	})
	ratio := float64(bareRes.NsPerOp()) / float64(fullRes.NsPerOp())
	t.Logf("STATUS READ bare %d ns/op (%.0f/s), full chain %d ns/op (%.0f/s): %.1f %% of bare; %.1f statements per read",
		bareRes.NsPerOp(), 1e9/float64(bareRes.NsPerOp()), fullRes.NsPerOp(), 1e9/float64(fullRes.NsPerOp()),
		100*ratio, float64(s1-s0)/counted)
}
