package httpapi

import (
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// httpSeries returns the changeflow_http_* series lines of a /metrics
// scrape (one line per label set and histogram bucket).
func httpSeries(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "changeflow_http_") {
			out = append(out, line[:strings.LastIndexByte(line, ' ')])
		}
	}
	return out
}

// TestRandomMethodsAndPathsAddNoMetricSeries performs the cardinality
// attack: unauthenticated requests with made-up methods (XMETHOD1…) and
// made-up paths, first once to create every label set the attack can
// reach, then many more times with fresh random values. The number of
// series on /metrics must not grow, and no client-chosen value may appear
// as a label.
func TestRandomMethodsAndPathsAddNoMetricSeries(t *testing.T) {
	h, _ := newTestServer(t, fakeReady{})
	rnd := rand.New(rand.NewPCG(1, 2))
	attack := func(round int) {
		for i := range 20 {
			token := fmt.Sprintf("X%dR%d", i, rnd.IntN(1<<30))
			for _, req := range []struct{ method, path string }{
				{"XMETHOD" + token, "/healthz"},             // a route, a custom method
				{"XMETHOD" + token, "/api/" + token},        // an unknown API path
				{"XMETHOD" + token, "/" + token},            // an app path
				{"GET", "/api/" + token},                    // unmatched, standard method
				{"GET", "/ops/" + token + "/x"},             // unmatched under /ops
				{"POST", "/callbacks/" + token},             // unmatched under /callbacks
				{"GET", "/" + token},                        // a client route of the app
				{"DELETE", "/healthz"},                      // 405 on a route
				{strings.ToLower("get" + token), "/readyz"}, // case games
			} {
				rec := httptest.NewRecorder()
				r := httptest.NewRequest("GET", req.path, nil)
				r.Method = req.method
				h.ServeHTTP(rec, r)
			}
		}
	}
	attack(0)
	rec, _ := do(t, h, "GET", "/metrics", nil)
	before := httpSeries(t, rec.Body.String())
	for round := 1; round <= 5; round++ {
		attack(round)
	}
	rec, _ = do(t, h, "GET", "/metrics", nil)
	after := httpSeries(t, rec.Body.String())
	if len(after) != len(before) {
		t.Fatalf("series grew from %d to %d under random methods and paths", len(before), len(after))
	}
	methods := map[string]bool{"GET": true, "POST": true, "DELETE": true, "OTHER": true}
	routes := map[string]bool{"GET /healthz": true, "GET /readyz": true, "unmatched": true, webPagesRoute: true}
	label := regexp.MustCompile(`(method|route)="([^"]*)"`)
	for _, s := range after {
		for _, m := range label.FindAllStringSubmatch(s, -1) {
			if m[1] == "method" && !methods[m[2]] || m[1] == "route" && !routes[m[2]] {
				t.Fatalf("a client-chosen value became a label: %s", s)
			}
		}
	}
	if !strings.Contains(strings.Join(after, "\n"), `method="OTHER",route="unmatched"`) {
		t.Errorf("custom methods are not counted under OTHER:\n%s", strings.Join(after, "\n"))
	}
}
