package httpapi

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// lapseKey ends the lease of subject's record of key by the DB clock: its
// request died a while ago.
func lapseKey(t *testing.T, st *store.Store, subject, key string) {
	t.Helper()
	expr, arg := st.Dialect().NowMinus(time.Second)
	res, err := st.DB().ExecContext(t.Context(),
		"UPDATE idempotency_record SET lease_until = "+expr+" WHERE subject = ? AND idem_key = ?", arg, subject, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("lapse %s/%s: %d rows", subject, key, n)
	}
}

// countRows runs a COUNT(*) query.
func countRows(t *testing.T, st *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSubmitKeysAreScopedPerCaller performs the probe of issue 13 finding
// 9: bob submits with the key alice used. He must get what an unused key
// gives (not 422), his own unique operationId, and nothing of alice's.
func TestSubmitKeysAreScopedPerCaller(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		submit := func(user, target, key string) resp {
			return w.do(req{method: "POST", path: "/api/requests", user: user, body: submitBodyFor(target, "same words", ""),
				header: map[string]string{"Idempotency-Key": key}})
		}
		alice := submit("alice", tOpen, "k-shared")
		alice.want(t, 202, "ACCEPTED")
		if alice.data["operationId"] != "k-shared" {
			t.Fatalf("alice: %v", alice.data)
		}
		w.do(req{method: "GET", path: "/api/requests/k-shared", user: "bob"}).want(t, 404, "NOT_FOUND")

		used := submit("bob", tRace, "k-shared")
		unused := submit("bob", tReplay, "k-never-used")
		used.want(t, 202, "ACCEPTED")
		unused.want(t, 202, "ACCEPTED")
		if used.env.Message != unused.env.Message || len(used.data) != len(unused.data) ||
			used.header.Get(headerReplayed) != unused.header.Get(headerReplayed) {
			t.Fatalf("alice's key answers bob unlike an unused one:\n used   %s\n unused %s", used.raw, unused.raw)
		}
		bobsID, _ := used.data["operationId"].(string)
		if bobsID == "" || bobsID == "k-shared" {
			t.Fatalf("bob's operationId %q is not unique", bobsID)
		}
		op, err := st.OperationGet(t.Context(), bobsID)
		if err != nil || op.Subject != "bob" || op.TargetKey != tRace {
			t.Fatalf("bob's operation %+v, %v", op, err)
		}
		if op, err := st.OperationGet(t.Context(), "k-shared"); err != nil || op.Subject != "alice" || op.TargetKey != tOpen {
			t.Fatalf("alice's operation changed: %+v, %v", op, err)
		}
		got := w.do(req{method: "GET", path: "/api/requests/" + bobsID, user: "bob"})
		got.want(t, 200, "OK")

		// Each caller's retry is a replay of their own request.
		again := submit("bob", tRace, "k-shared")
		again.want(t, 202, "DUPLICATE_SUBMIT")
		if again.data["operationId"] != bobsID {
			t.Fatalf("bob's replay %v, want %s", again.data, bobsID)
		}
		aliceAgain := submit("alice", tOpen, "k-shared")
		aliceAgain.want(t, 202, "DUPLICATE_SUBMIT")
		if aliceAgain.data["operationId"] != "k-shared" {
			t.Fatalf("alice's replay %v", aliceAgain.data)
		}
		// Bob reusing his own key for another body is still 422.
		submit("bob", tOpen, "k-shared").want(t, 422, "IDEMPOTENCY_KEY_REUSED")
		if n := countRows(t, st, "SELECT COUNT(*) FROM operation"); n != 3 {
			t.Fatalf("%d operations, want alice's, bob's and bob's unused-key one", n)
		}
	})
}

// TestSubmitTakesOverALapsedKey: a request that took its key and died
// (kill -9) before storing anything, or after storing the operation but
// before its response, does not hold the key for idempotency.ttl: within
// idempotency.inFlightLease a retry gets 409, after it the retry converges
// to one request (issue 12 item 4).
func TestSubmitTakesOverALapsedKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		noComplete := &dyingAfterSubmit{RequestStore: st}
		w := newBizWorld(t, st, func(_ *bizWorld, d *Deps) { d.Business.Requests = noComplete })
		w.load(map[string]any{"idempotency.inFlightLease": "7s"})
		submit := func(target, key string) resp {
			return w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(target, "lease", ""),
				header: map[string]string{"Idempotency-Key": key}})
		}

		t.Run("died before storing the operation", func(t *testing.T) {
			sub, err := validateSubmit(submitBody{TargetKey: tRace, Reason: "lease"}, nil, w.cfg.Current())
			if err != nil {
				t.Fatal(err)
			}
			// What the dead request left: the key taken, nothing else.
			if _, err := st.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: "k-died", Subject: "alice",
				RequestHash: requestHash("alice", sub), OperationID: "k-died", TTL: time.Hour, Lease: time.Hour}); err != nil {
				t.Fatal(err)
			}
			submit(tRace, "k-died").want(t, 409, "IDEMPOTENCY_IN_FLIGHT")
			lapseKey(t, st, "alice", "k-died")
			r := submit(tRace, "k-died")
			r.want(t, 202, "ACCEPTED")
			if r.data["operationId"] != "k-died" {
				t.Fatalf("data %v", r.data)
			}
			submit(tRace, "k-died").want(t, 202, "DUPLICATE_SUBMIT")
			if n := countRows(t, st, "SELECT COUNT(*) FROM operation WHERE target_key = ?", tRace); n != 1 {
				t.Fatalf("%d operations", n)
			}
		})

		t.Run("died after storing the operation, before its response", func(t *testing.T) {
			noComplete.dying.Store(true)
			submit(tReplay, "k-half").want(t, 202, "ACCEPTED") // the response the dead process never stored
			noComplete.dying.Store(false)
			// The lease the handler took is idempotency.inFlightLease (7s).
			lo, loArg := st.Dialect().NowAdd(5 * time.Second)
			hi, hiArg := st.Dialect().NowAdd(7 * time.Second)
			if n := countRows(t, st, "SELECT COUNT(*) FROM idempotency_record WHERE idem_key = 'k-half' AND state = 'IN_FLIGHT' AND lease_until > "+lo+" AND lease_until <= "+hi, loArg, hiArg); n != 1 {
				t.Fatal("the key's lease is not idempotency.inFlightLease")
			}
			submit(tReplay, "k-half").want(t, 409, "IDEMPOTENCY_IN_FLIGHT")
			lapseKey(t, st, "alice", "k-half")
			r := submit(tReplay, "k-half")
			r.want(t, 202, "DUPLICATE_SUBMIT")
			if r.data["operationId"] != "k-half" || r.header.Get(headerReplayed) != "true" {
				t.Fatalf("%v %v", r.data, r.header)
			}
			if n := countRows(t, st, "SELECT COUNT(*) FROM idempotency_record WHERE idem_key = 'k-half' AND state = 'DONE'"); n != 1 {
				t.Fatal("the recovered response was not stored")
			}
			submit(tReplay, "k-half").want(t, 202, "DUPLICATE_SUBMIT")
			if n := countRows(t, st, "SELECT COUNT(*) FROM operation WHERE target_key = ?", tReplay); n != 1 {
				t.Fatalf("%d operations", n)
			}
		})
	})
}

// dyingAfterSubmit drops IdempotencyComplete while dying is set: the
// process died between storing the operation and storing its response.
type dyingAfterSubmit struct {
	RequestStore
	dying atomic.Bool
}

func (d *dyingAfterSubmit) IdempotencyComplete(ctx context.Context, p store.IdempotencyCompleteParams) error {
	if d.dying.Load() {
		return nil
	}
	return d.RequestStore.IdempotencyComplete(ctx, p)
}

// TestSubmitSlowFirstAttemptAndItsTakerMakeOneRequest: the first attempt
// is not dead but stuck between taking the key and storing its operation
// longer than the lease; the client's retry takes the key over. Whichever
// of the two stores the operation first, the other answers as its replay:
// one operation, both answers name it.
func TestSubmitSlowFirstAttemptAndItsTakerMakeOneRequest(t *testing.T) {
	for _, firstStoresFirst := range []bool{false, true} {
		name := "the taker stores first"
		if firstStoresFirst {
			name = "the slow first attempt stores first"
		}
		t.Run(name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, st *store.Store) {
				held := &holdingSubmit{RequestStore: st, entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
				held.releaseOnTakeOver = firstStoresFirst
				w := newBizWorld(t, st, func(_ *bizWorld, d *Deps) { d.Business.Requests = held })
				submit := func() resp {
					return w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tRace, "slow", ""),
						header: map[string]string{"Idempotency-Key": "k-slow"}})
				}
				var first resp
				go func() {
					defer close(held.done)
					first = submit()
				}()
				<-held.entered // the first attempt holds the key, its operation not stored
				lapseKey(t, st, "alice", "k-slow")
				second := submit()
				if !firstStoresFirst {
					close(held.release)
				}
				<-held.done
				codes := map[string]bool{string(first.env.Code): true, string(second.env.Code): true}
				if first.status != 202 || second.status != 202 || !codes["ACCEPTED"] || !codes["DUPLICATE_SUBMIT"] {
					t.Fatalf("first %s\nsecond %s", first.raw, second.raw)
				}
				if first.data["operationId"] != "k-slow" || second.data["operationId"] != "k-slow" {
					t.Fatalf("first %v second %v", first.data, second.data)
				}
				if n := countRows(t, st, "SELECT COUNT(*) FROM operation WHERE target_key = ?", tRace); n != 1 {
					t.Fatalf("%d operations", n)
				}
			})
		})
	}
}

// holdingSubmit holds the first OperationSubmit until release. With
// releaseOnTakeOver, a takeover releases the held attempt and waits for
// it to finish before the taker goes on.
type holdingSubmit struct {
	RequestStore
	once                   sync.Once
	entered, release, done chan struct{}
	releaseOnTakeOver      bool
}

func (h *holdingSubmit) IdempotencyBegin(ctx context.Context, p store.IdempotencyBeginParams) (store.IdempotencyResult, error) {
	res, err := h.RequestStore.IdempotencyBegin(ctx, p)
	if err == nil && res.TakenOver && h.releaseOnTakeOver {
		close(h.release)
		<-h.done
	}
	return res, err
}

func (h *holdingSubmit) OperationSubmit(ctx context.Context, p store.OperationSubmitParams) (store.OperationSubmitResult, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		close(h.entered)
		<-h.release
	}
	return h.RequestStore.OperationSubmit(ctx, p)
}
