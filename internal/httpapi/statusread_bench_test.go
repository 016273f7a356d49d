package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// statusReadWorld is the whole server over a store that counts its
// statements (store.OpenCounting), with one submitted request, bench-1,
// owned by alice; logs go to a JSON handler on io.Discard, so the access
// log does all its work but the write.
type statusReadWorld struct {
	w       *bizWorld
	counter *store.StmtCount
}

func newStatusReadWorld(tb testing.TB, driver string, opts ...worldOpt) statusReadWorld {
	tb.Helper()
	st, counter, err := store.OpenCounting(tb.Context(), driver, storetest.NewDatabase(tb, driver))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	if _, err := st.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	quiet := func(_ *bizWorld, d *Deps) { d.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil)) }
	w := newBizWorld(tb, st, append([]worldOpt{quiet}, opts...)...)
	w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "bench", ""),
		header: map[string]string{"Idempotency-Key": "bench-1"}}).want(tb, http.StatusAccepted, "ACCEPTED")
	return statusReadWorld{w: w, counter: counter}
}

// read is GET /api/requests/bench-1 as alice, through the whole server.
func (sw statusReadWorld) read() *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/api/requests/bench-1", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set(identity.HeaderUser, "alice")
	rec := httptest.NewRecorder()
	sw.w.h.ServeHTTP(rec, r)
	return rec
}

// The status read issues one statement: the operation and its binding in
// one prepared, joined read (store.OperationViewGet), for a request
// whose blocker needs no read of its own (it waits for its approval).
func TestStatusReadIsOneStatement(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			sw := newStatusReadWorld(t, driver)
			first := sw.read()
			if first.Code != http.StatusOK || !bytes.Contains(first.Body.Bytes(), []byte(`"kind":"APPROVAL"`)) {
				t.Fatalf("status read: %d %s", first.Code, first.Body)
			}
			s0, p0, tx0 := sw.counter.Snapshot()
			const reads = 20
			for range reads {
				if rec := sw.read(); rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), first.Body.Bytes()) {
					t.Fatalf("status read: %d %s", rec.Code, rec.Body)
				}
			}
			s1, p1, tx1 := sw.counter.Snapshot()
			if s1-s0 != reads || p1-p0 != 0 || tx1-tx0 != 0 {
				t.Fatalf("%d reads issued %d statements, %d prepares, %d transactions; want %d, 0, 0",
					reads, s1-s0, p1-p0, tx1-tx0, reads)
			}
		})
	}
}

// BenchmarkStatusRead is GET /api/requests/{operationId} through the whole
// server — outer chain, identity, authorization, API metrics, the handler
// and its database read, statements counted at the driver — against a
// bare net/http handler writing the same bytes, on each database
// (docs/benchmarks.md, "Status read"). In process, without a network:
// the load comparison over loopback is cmd/changeflow's TestStatusReadLoad.
//
//	./scripts/test-services.sh go test ./internal/httpapi -run '^$' -bench StatusRead -benchmem -count 6 > read.txt
//	go run golang.org/x/perf/cmd/benchstat@latest -col /handler read.txt
func BenchmarkStatusRead(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run("db="+driver, func(b *testing.B) {
			sw := newStatusReadWorld(b, driver)
			first := sw.read()
			if first.Code != http.StatusOK {
				b.Fatalf("status read: %d %s", first.Code, first.Body)
			}
			body := bytes.Clone(first.Body.Bytes())
			bare := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				rw.Header().Set("Content-Type", "application/json; charset=utf-8")
				rw.WriteHeader(http.StatusOK)
				_, _ = rw.Write(body)
			})
			b.Run("handler=bare", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					r := httptest.NewRequest(http.MethodGet, "/api/requests/bench-1", nil)
					for pb.Next() {
						bare.ServeHTTP(httptest.NewRecorder(), r)
					}
				})
				b.ReportMetric(0, "stmts/op")
			})
			b.Run("handler=full", func(b *testing.B) {
				b.ReportAllocs()
				s0, p0, _ := sw.counter.Snapshot()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if rec := sw.read(); rec.Code != http.StatusOK {
							b.Errorf("status read: %d", rec.Code)
							return
						}
					}
				})
				s1, p1, _ := sw.counter.Snapshot()
				b.ReportMetric(float64(s1-s0)/float64(b.N), "stmts/op")
				b.ReportMetric(float64(p1-p0)/float64(b.N), "prepares/op")
			})
		})
	}
}
