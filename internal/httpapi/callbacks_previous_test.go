package httpapi

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// rotation is one callback kind mid-rotation: the value its sender is
// being given (current) and the one being retired (previous).
type rotation struct {
	kind, path, header, current, previous string
	// body makes a fresh delivery n of this kind, so no answer is a
	// DUPLICATE of an earlier one.
	body func(n int) (string, map[string]string)
}

func rotations() []rotation {
	return []rotation{
		{kind: config.CallbackApproval, path: "/callbacks/approval", header: headerCallbackToken,
			current: "approval-new-0123456789abcdef0123456789", previous: "approval-old-0123456789abcdef0123456789",
			body: func(n int) (string, map[string]string) {
				return fmt.Sprintf(`{"requestId":"rot-a-%d","approvalId":"ap-%d","operationId":"op-rot-%d","result":"APPROVED"}`, n, n, n), nil
			}},
		{kind: config.CallbackDeploy, path: "/callbacks/deploy", header: headerCallbackToken,
			current: "deploy-new-0123456789abcdef0123456789ab", previous: "deploy-old-0123456789abcdef0123456789ab",
			body: func(n int) (string, map[string]string) {
				return fmt.Sprintf(`{"requestId":"rot-d-%d","project":1,"mrIid":%d,"status":"SUCCESS"}`, n, 100+n), nil
			}},
		{kind: config.CallbackGitLab, path: "/callbacks/gitlab", header: headerGitLabToken,
			current: "webhook-new-0123456789abcdef0123456789a", previous: "webhook-old-0123456789abcdef0123456789a",
			body: func(n int) (string, map[string]string) {
				return hookBody, map[string]string{headerIdempotencyKey: fmt.Sprintf("rot-g-%d", n)}
			}},
	}
}

// previousUses reads changeflow_callback_token_previous_total{callback=kind}
// from the world's /metrics scrape; -1 when the series is absent.
func previousUses(t *testing.T, w *bizWorld, kind string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	re := regexp.MustCompile(`(?m)^changeflow_callback_token_previous_total\{callback="` + regexp.QuoteMeta(kind) + `"\} (\S+)$`)
	m := re.FindStringSubmatch(rec.Body.String())
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCallbackTokenRotation: while callbacks.tokens.<kind>Previous is set,
// a callback is accepted with the current or the previous token, and each
// use of the previous one is counted for its kind alone; once it is unset
// the old value is refused, and a wrong token never passes.
func TestCallbackTokenRotation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		both := map[string]any{}
		for _, r := range rotations() {
			both["callbacks.tokens."+r.kind] = r.current
			both[config.CallbackPreviousKey(r.kind)] = r.previous
		}
		w := newBizWorld(t, st, withOverlay(both))
		n := 0
		send := func(r rotation, token string) resp {
			n++
			body, h := r.body(n)
			hdr := map[string]string{r.header: token}
			for k, v := range h {
				hdr[k] = v
			}
			return w.do(req{method: "POST", path: r.path, body: body, header: hdr})
		}
		uses := func(t *testing.T) map[string]float64 {
			out := map[string]float64{}
			for _, r := range rotations() {
				out[r.kind] = previousUses(t, w, r.kind)
			}
			return out
		}

		t.Run("every series exists at 0 before the first use", func(t *testing.T) {
			for kind, v := range uses(t) {
				if v != 0 {
					t.Fatalf("%s: %v, want 0", kind, v)
				}
			}
		})
		for _, r := range rotations() {
			t.Run(r.kind+": the current token is accepted and not counted", func(t *testing.T) {
				before := uses(t)
				send(r, r.current).want(t, 202, "ACCEPTED")
				if after := uses(t); after[r.kind] != before[r.kind] {
					t.Fatalf("the current token counted as the previous one: %v → %v", before, after)
				}
			})
			t.Run(r.kind+": the previous token is accepted while set, and counted for its kind", func(t *testing.T) {
				before := uses(t)
				send(r, r.previous).want(t, 202, "ACCEPTED")
				send(r, r.previous).want(t, 202, "ACCEPTED")
				after := uses(t)
				for kind := range before {
					want := before[kind]
					if kind == r.kind {
						want += 2
					}
					if after[kind] != want {
						t.Fatalf("%s: %v uses, want %v (before %v, after %v)", kind, after[kind], want, before, after)
					}
				}
			})
			t.Run(r.kind+": a wrong token is refused", func(t *testing.T) {
				before := uses(t)
				for _, tok := range []string{"", "nope", r.previous[:len(r.previous)-1], r.previous + "x", r.current + r.previous} {
					send(r, tok).want(t, 401, "UNAUTHENTICATED")
				}
				for _, other := range rotations() {
					if other.kind != r.kind {
						send(r, other.current).want(t, 401, "UNAUTHENTICATED")
						send(r, other.previous).want(t, 401, "UNAUTHENTICATED")
					}
				}
				if after := uses(t); after[r.kind] != before[r.kind] {
					t.Fatalf("a refused callback was counted: %v → %v", before, after)
				}
			})
		}

		t.Run("one warning per kind within the hour, naming the item and never the token", func(t *testing.T) {
			logs := w.logs.String()
			for _, r := range rotations() {
				want := `"item":"` + config.CallbackPreviousKey(r.kind) + `"`
				if c := strings.Count(logs, want); c != 1 {
					t.Fatalf("%s: %d warnings for two uses at one instant, want 1\n%s", r.kind, c, logs)
				}
				if strings.Contains(logs, r.previous) || strings.Contains(logs, r.current) {
					t.Fatalf("%s: the log carries a token", r.kind)
				}
			}
		})

		t.Run("once the previous tokens are unset, the old values are refused", func(t *testing.T) {
			cur := map[string]any{}
			for _, r := range rotations() {
				cur[config.CallbackPreviousKey(r.kind)] = nil
			}
			w.load(cur)
			for _, r := range rotations() {
				before := previousUses(t, w, r.kind)
				send(r, r.previous).want(t, 401, "UNAUTHENTICATED")
				send(r, r.current).want(t, 202, "ACCEPTED")
				if after := previousUses(t, w, r.kind); after != before {
					t.Fatalf("%s: %v → %v", r.kind, before, after)
				}
			}
		})

		t.Run("a previous token never stands in for an unset current one", func(t *testing.T) {
			kv := map[string]any{}
			for _, r := range rotations() {
				kv["callbacks.tokens."+r.kind] = ""
			}
			w.load(kv)
			for _, r := range rotations() {
				send(r, r.previous).want(t, 401, "UNAUTHENTICATED")
				send(r, r.current).want(t, 401, "UNAUTHENTICATED")
			}
		})
	})
}

// TestPreviousTokenWarningsAreRateLimited: the first use of a kind's
// previous token is logged at once, later ones at most once per
// previousWarnEvery, with the count of uses since the last line; kinds are
// limited apart.
func TestPreviousTokenWarningsAreRateLimited(t *testing.T) {
	var buf lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	p := newPreviousWarnings(func() time.Time { return now })
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	p.used(logger, "deploy", headerCallbackToken)
	for range 4 {
		now = now.Add(10 * time.Minute)
		p.used(logger, "deploy", headerCallbackToken)
	}
	p.used(logger, "approval", headerCallbackToken)
	if l := lines(); len(l) != 2 || !strings.Contains(l[0], `"callback":"deploy"`) || !strings.Contains(l[1], `"callback":"approval"`) {
		t.Fatalf("want the first deploy use and the first approval use, got:\n%s", buf.String())
	}
	now = now.Add(20 * time.Minute) // an hour after the first deploy line
	p.used(logger, "deploy", headerCallbackToken)
	l := lines()
	if len(l) != 3 || !strings.Contains(l[2], `"uses":5`) {
		t.Fatalf("the hourly line carries the 4 unlogged uses and this one:\n%s", buf.String())
	}
}

// TestPreviousTokenMetricKnowsEveryCallbackKind: the metric's closed label
// set is the configuration's callback kinds, so no kind's uses are dropped.
func TestPreviousTokenMetricKnowsEveryCallbackKind(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	rec, _ := do(t, h, "GET", "/metrics", nil)
	for _, kind := range []string{config.CallbackApproval, config.CallbackDeploy, config.CallbackGitLab} {
		if !strings.Contains(rec.Body.String(), `changeflow_callback_token_previous_total{callback="`+kind+`"} 0`) {
			t.Fatalf("no series for %s:\n%s", kind, rec.Body.String())
		}
	}
}
