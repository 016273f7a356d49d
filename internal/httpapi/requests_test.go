package httpapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

func submitBodyFor(target, reason string, extra string) string {
	return fmt.Sprintf(`{"targetKey":%q,"reason":%q%s}`, target, reason, extra)
}

func TestSubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()

		t.Run("submit202", func(t *testing.T) {
			t.Run("approve-first: key in the header, binding APPROVAL_SENDING, expiry now+maxDays", func(t *testing.T) {
				r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "quarterly audit", ""),
					header: map[string]string{"Idempotency-Key": "k-af-1"}})
				r.want(t, 202, "ACCEPTED")
				if r.data["operationId"] != "k-af-1" {
					t.Fatalf("data: %v", r.data)
				}
				op, err := st.OperationGet(ctx, "k-af-1")
				if err != nil {
					t.Fatal(err)
				}
				b, err := st.BindingGetByOperation(ctx, "k-af-1")
				if err != nil {
					t.Fatal(err)
				}
				if op.Flow != "APPROVE_FIRST" || domain.StepStatus(op.Step) != domain.StepCreateApprovalSubmitting || b.Status != domain.BindingApprovalSending ||
					op.NextAction != flow.ActionSubmitApproval || op.DueAt.IsZero() {
					t.Fatalf("flow %s step %d binding %s", op.Flow, op.Step, b.Status)
				}
				if want := worldNow.Add(30 * 24 * time.Hour); !op.ExpiresAt.Equal(want) || op.Subject != "alice" || op.Days != 30 {
					t.Fatalf("expires %v want %v, subject %s, days %d", op.ExpiresAt, want, op.Subject, op.Days)
				}
			})
			t.Run("legacy: operationId in the body, binding MR_CREATING, step CREATE_STARTED, days given", func(t *testing.T) {
				w.load(map[string]any{"workflow.approveFirst": false})
				defer w.load(nil)
				r := w.do(req{method: "POST", path: "/api/requests", user: "bob@corp.example",
					body: submitBodyFor(tOpen, "debug", `,"days":3,"operationId":"k-legacy-1","unknownField":true`)})
				r.want(t, 202, "ACCEPTED")
				op, _ := st.OperationGet(ctx, "k-legacy-1")
				b, _ := st.BindingGetByOperation(ctx, "k-legacy-1")
				if op.Flow != "LEGACY" || domain.StepStatus(op.Step) != domain.StepCreateStarted || b.Status != domain.BindingMRCreating ||
					op.NextAction != flow.ActionCreateMR {
					t.Fatalf("flow %s step %d binding %s", op.Flow, op.Step, b.Status)
				}
				if op.Subject != "bob" || !op.ExpiresAt.Equal(worldNow.Add(72*time.Hour)) {
					t.Fatalf("subject %s expires %v", op.Subject, op.ExpiresAt)
				}
			})
			t.Run("no key: a random UUID, no timestamp in it", func(t *testing.T) {
				r := w.do(req{method: "POST", path: "/api/requests", user: "E10023", body: submitBodyFor("billing-less", "x", "")})
				r.want(t, 400, "INVALID_ARGUMENT") // unknown target first
				r = w.do(req{method: "POST", path: "/api/requests", user: "E10023", body: submitBodyFor("billing-dashboard", "x", "")})
				r.want(t, 202, "ACCEPTED")
				id, _ := r.data["operationId"].(string)
				if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
					t.Fatalf("operationId %q is not a random UUID", id)
				}
				if _, err := st.OperationGet(ctx, id); err != nil {
					t.Fatal(err)
				}
			})
		})

		t.Run("submit400", func(t *testing.T) {
			for name, c := range map[string]struct {
				body   string
				header map[string]string
			}{
				"malformed JSON":                         {body: `{"targetKey":`},
				"not an object":                          {body: `[1,2]`},
				"trailing data":                          {body: submitBodyFor(tOpen, "r", "") + `{}`},
				"Idempotency-Key and operationId differ": {body: submitBodyFor(tOpen, "r", `,"operationId":"a"`), header: map[string]string{"Idempotency-Key": "b"}},
				"missing target":                         {body: `{"reason":"r"}`},
				"unknown target":                         {body: submitBodyFor("nope", "r", "")},
				"blank reason":                           {body: submitBodyFor(tOpen, "   ", "")},
				"reason over 500 characters":             {body: submitBodyFor(tOpen, strings.Repeat("é", 501), "")},
				"days 0":                                 {body: submitBodyFor(tOpen, "r", `,"days":0`)},
				"days over maxDays":                      {body: submitBodyFor(tOpen, "r", `,"days":31`)},
				"days not a number":                      {body: submitBodyFor(tOpen, "r", `,"days":"3"`)},
				"operationId with a space":               {body: submitBodyFor(tOpen, "r", `,"operationId":"a b"`)},
				"operationId over 64 characters":         {body: submitBodyFor(tOpen, "r", `,"operationId":"`+strings.Repeat("x", 65)+`"`)},
				// A request squatting a revocation's derived id would stop
				// that grant's access from ever being removed.
				"operationId of a revocation":         {body: submitBodyFor(tOpen, "r", `,"operationId":"bob-grant~revoke"`)},
				"Idempotency-Key of a revocation":     {body: submitBodyFor(tOpen, "r", ""), header: map[string]string{"Idempotency-Key": "bob-grant~revoke"}},
				"operationId of a repo entry removal": {body: submitBodyFor(tOpen, "r", `,"operationId":"review-item-1~remove"`)},
			} {
				t.Run(name, func(t *testing.T) {
					r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: c.body, header: c.header})
					r.want(t, 400, "INVALID_ARGUMENT")
				})
			}
		})

		t.Run("submit401", func(t *testing.T) {
			t.Run("no login, even with a malformed body", func(t *testing.T) {
				w.do(req{method: "POST", path: "/api/requests", body: `{not json`}).want(t, 401, "UNAUTHENTICATED")
			})
			t.Run("no login, valid body", func(t *testing.T) {
				w.do(req{method: "POST", path: "/api/requests", body: submitBodyFor(tOpen, "r", "")}).want(t, 401, "UNAUTHENTICATED")
			})
		})

		t.Run("submit403", func(t *testing.T) {
			for _, c := range []struct {
				target, why string
				reason      domain.Reason
			}{
				{tClosed, "access mode CLOSED", domain.ReasonTargetClosed},
				{tWindow, "outside the test window", domain.ReasonOutsideWindow},
			} {
				t.Run(c.target, func(t *testing.T) {
					key := "k-closed-" + c.target
					r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(c.target, "r", `,"days":1`),
						header: map[string]string{"Idempotency-Key": key}})
					r.wantRefused(t, 403, "TARGET_NOT_OPEN", c.reason)
					if !strings.Contains(r.env.Message, c.why) {
						t.Fatalf("message %q does not say why (%s)", r.env.Message, c.why)
					}
					// The refusal released the key: once open, the same key proceeds.
					w.load(map[string]any{"targets." + c.target + ".accessMode": "OPEN"})
					defer w.load(nil)
					w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(c.target, "r", `,"days":1`),
						header: map[string]string{"Idempotency-Key": key}}).want(t, 202, "ACCEPTED")
				})
			}
		})

		t.Run("submit409", func(t *testing.T) {
			t.Run("REQUEST_IN_PROGRESS: the binding is in flight", func(t *testing.T) {
				w.do(req{method: "POST", path: "/api/requests", user: "olivia", body: submitBodyFor(tOpen, "r", ""),
					header: map[string]string{"Idempotency-Key": "k-409-a"}}).want(t, 202, "ACCEPTED")
				r := w.do(req{method: "POST", path: "/api/requests", user: "olivia", body: submitBodyFor(tOpen, "again", ""),
					header: map[string]string{"Idempotency-Key": "k-409-b"}})
				r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonInProgress)
				// The refusal names the caller's request it is about.
				if r.data["operationId"] != "k-409-a" {
					t.Fatalf("409 data %v, want operationId k-409-a", r.env.Data)
				}
				if _, err := st.OperationGet(ctx, "k-409-b"); err == nil {
					t.Fatal("a refused submission left an operation behind")
				}
				// The key was released: it is free for another request.
				res, err := st.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: "k-409-b", Subject: "olivia", RequestHash: "h", OperationID: "k-409-b", TTL: time.Hour, Lease: time.Hour})
				if err != nil || res.Outcome != store.IdempotencyFresh {
					t.Fatalf("key not released: %v %v", res.Outcome, err)
				}
			})
			t.Run("ALREADY_IN_EFFECT: the message says until when", func(t *testing.T) {
				until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
				if _, err := st.BindingApply(ctx, store.BindingApplyParams{Subject: "adam", TargetKey: tOpen, OperationID: "seed-adam",
					Status: domain.BindingValidated, ExpiresAt: until}); err != nil {
					t.Fatal(err)
				}
				r := w.do(req{method: "POST", path: "/api/requests", user: "adam", body: submitBodyFor(tOpen, "r", "")})
				r.wantRefused(t, 409, "ALREADY_IN_EFFECT", domain.ReasonInEffect)
				if !strings.Contains(r.env.Message, until.Format(time.RFC3339)) {
					t.Fatalf("message %q lacks %s", r.env.Message, until.Format(time.RFC3339))
				}
				if r.data["operationId"] != "seed-adam" || r.data["expiresAt"] != until.Format(time.RFC3339) {
					t.Fatalf("409 data %v, want operationId seed-adam and expiresAt %s", r.env.Data, until.Format(time.RFC3339))
				}
			})
			t.Run("IDEMPOTENCY_IN_FLIGHT: the first is still being processed", func(t *testing.T) {
				body := submitBodyFor(tOpen, "held", "")
				sub, err := validateSubmit(submitBody{TargetKey: tOpen, Reason: "held"}, nil, w.cfg.Current())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.IdempotencyBegin(ctx, store.IdempotencyBeginParams{Key: "k-held", Subject: "alice",
					RequestHash: requestHash("alice", sub), OperationID: "k-held", TTL: time.Hour, Lease: time.Hour}); err != nil {
					t.Fatal(err)
				}
				r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: body, header: map[string]string{"Idempotency-Key": "k-held"}})
				r.want(t, 409, "IDEMPOTENCY_IN_FLIGHT")
			})
		})

		t.Run("submit422", func(t *testing.T) {
			t.Run("same key, different body", func(t *testing.T) {
				h := map[string]string{"Idempotency-Key": "k-422"}
				w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor("legacy-ftp", "r", ""), header: h}).want(t, 403, "TARGET_NOT_OPEN")
				w.load(map[string]any{"targets.legacy-ftp.accessMode": "OPEN"})
				defer w.load(nil)
				w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor("legacy-ftp", "r", ""), header: h}).want(t, 202, "ACCEPTED")
				w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor("legacy-ftp", "other reason", ""), header: h}).want(t, 422, "IDEMPOTENCY_KEY_REUSED")
			})
			// Another subject's use of the key is not a reuse: keys are
			// scoped per caller (TestSubmitKeysAreScopedPerCaller).
		})

		t.Run("replay is the original status and data, DUPLICATE_SUBMIT, Idempotent-Replayed", func(t *testing.T) {
			h := map[string]string{"Idempotency-Key": "k-replay"}
			body := submitBodyFor(tReplay, "replay me", "")
			first := w.do(req{method: "POST", path: "/api/requests", user: "E10024", body: body, header: h})
			first.want(t, 202, "ACCEPTED")
			if first.header.Get(headerReplayed) != "" {
				t.Fatal("the original is not a replay")
			}
			// Same request with reordered fields and whitespace, and the key in the body.
			again := w.do(req{method: "POST", path: "/api/requests", user: "bob", body: ` { "reason":"replay me", "operationId":"k-replay", "targetKey":"` + tReplay + `" }`})
			again.want(t, 202, "DUPLICATE_SUBMIT")
			if again.header.Get(headerReplayed) != "true" {
				t.Fatalf("header %q", again.header.Get(headerReplayed))
			}
			if fmt.Sprint(first.data) != fmt.Sprint(again.data) {
				t.Fatalf("data %v != %v", again.data, first.data)
			}
		})

		t.Run("concurrent duplicates: one ACCEPTED, the rest DUPLICATE_SUBMIT or IN_FLIGHT, one operation", func(t *testing.T) {
			const n = 16
			var wg sync.WaitGroup
			codes := make([]string, n)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r := w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tRace, "race", ""),
						header: map[string]string{"Idempotency-Key": "k-race"}})
					codes[i] = fmt.Sprintf("%d %s", r.status, r.env.Code)
				}()
			}
			close(start)
			wg.Wait()
			count := map[string]int{}
			for _, c := range codes {
				count[c]++
			}
			if count["202 ACCEPTED"] != 1 || count["202 ACCEPTED"]+count["202 DUPLICATE_SUBMIT"]+count["409 IDEMPOTENCY_IN_FLIGHT"] != n {
				t.Fatalf("outcomes %v", count)
			}
			page, err := st.OperationListBySubject(ctx, store.OperationListBySubjectParams{Subject: "bob", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			rows := 0
			for _, op := range page.Items {
				if op.TargetKey == tRace {
					rows++
				}
			}
			if rows != 1 {
				t.Fatalf("%d operation rows for %s, outcomes %v", rows, tRace, count)
			}
		})
	})
}

func TestSubmitRateLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOverlay(map[string]any{"ratelimit.apply.limit": 1}))
		h := map[string]string{"Idempotency-Key": "k-rl"}
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""), header: h}).want(t, 202, "ACCEPTED")
		t.Run("submit429", func(t *testing.T) {
			for name, body := range map[string]string{
				"malformed body over quota":           `{not json`,
				"a duplicate over quota gets 429 too": submitBodyFor(tOpen, "r", ""),
			} {
				t.Run(name, func(t *testing.T) {
					r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: body, header: h})
					r.want(t, 429, "RATE_LIMITED")
					if r.env.Message != submitMessage || r.header.Get("Retry-After") == "" {
						t.Fatalf("message %q, Retry-After %q", r.env.Message, r.header.Get("Retry-After"))
					}
				})
			}
		})
		t.Run("another caller has their own quota", func(t *testing.T) {
			w.do(req{method: "POST", path: "/api/requests", user: "bob", body: `{}`}).want(t, 400, "INVALID_ARGUMENT")
		})
	})
}

// TestSubmitStorageFailureReleasesKey: a submission that fails in storage
// after taking its key answers the generic 500 and releases the key, so
// the retry proceeds.
func TestSubmitStorageFailureReleasesKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		failing := &failingSubmit{RequestStore: st}
		failing.fail.Store(true)
		w := newBizWorld(t, st, func(_ *bizWorld, d *Deps) { d.Business.Requests = failing })
		call := func() resp {
			return w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""),
				header: map[string]string{"Idempotency-Key": "k-fail"}})
		}
		r := call()
		r.want(t, 500, "INTERNAL_ERROR")
		if r.env.Message != domain.GenericMessage || strings.Contains(r.raw, "injected") {
			t.Fatalf("leaked: %s", r.raw)
		}
		failing.fail.Store(false)
		call().want(t, 202, "ACCEPTED")
	})
}

type failingSubmit struct {
	RequestStore
	fail atomic.Bool
}

func (f *failingSubmit) OperationSubmit(ctx context.Context, p store.OperationSubmitParams) (store.OperationSubmitResult, error) {
	if f.fail.Load() {
		return store.OperationSubmitResult{}, fmt.Errorf("injected: %w", context.DeadlineExceeded)
	}
	return f.RequestStore.OperationSubmit(ctx, p)
}

// recordingWork is a WorkSubmitter that records what it was offered.
type recordingWork struct {
	mu  sync.Mutex
	ids []string
	err error
}

func (r *recordingWork) Submit(_ context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return r.err == nil, r.err
}

// TestSubmitHandsWorkToThePool: an accepted request is offered to the
// workflow's pool at once; a refusal there does not change the 202 (the
// engine persisted the failure), and a replay is not offered again.
func TestSubmitHandsWorkToThePool(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		work := &recordingWork{err: fmt.Errorf("run: %w", errors.New("worker pool full"))}
		w := newBizWorld(t, st, func(_ *bizWorld, d *Deps) { d.Business.Work = work })
		h := map[string]string{"Idempotency-Key": "k-work"}
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""), header: h}).want(t, 202, "ACCEPTED")
		w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "r", ""), header: h}).want(t, 202, "DUPLICATE_SUBMIT")
		if fmt.Sprint(work.ids) != "[k-work]" {
			t.Fatalf("offered %v", work.ids)
		}
	})
}
