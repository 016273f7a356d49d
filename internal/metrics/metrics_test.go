package metrics

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"changeflow/internal/domain"
)

func TestLabel(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"plain value kept", "GET /healthz", "GET /healthz", true},
		{"surrounding space trimmed", "  apply ", "apply", true},
		{"empty skipped", "", "", false},
		{"whitespace only skipped", " \t ", "", false},
		{"invalid utf-8 skipped", "a\xffb", "", false},
		{"long value truncated to 128 bytes", strings.Repeat("x", 300), strings.Repeat("x", 128), true},
		{"truncation keeps whole runes", strings.Repeat("x", 127) + "é", strings.Repeat("x", 127), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Label(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("Label(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRequestCompletedCountsSucceededOnlyFor2xx(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	m.RequestCompleted("GET /x", "GET", 200, time.Millisecond)
	m.RequestCompleted("GET /x", "GET", 204, time.Millisecond)
	m.RequestCompleted("GET /x", "GET", 403, time.Millisecond)
	m.RequestCompleted("GET /x", "GET", 500, time.Millisecond)
	if got := testutil.ToFloat64(m.httpSucceeded.WithLabelValues("GET /x", "GET")); got != 2 {
		t.Fatalf("succeeded = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.httpCompleted.WithLabelValues("GET /x", "GET", "403")); got != 1 {
		t.Fatalf("completed{403} = %v, want 1", got)
	}
}

func TestInvalidLabelSkipsEmission(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	m.RequestReceived("", "GET")
	m.RequestCompleted("  ", "GET", 200, time.Millisecond)
	if n := testutil.CollectAndCount(m.httpReceived); n != 0 {
		t.Fatalf("received series = %d, want 0", n)
	}
	if n := testutil.CollectAndCount(m.httpCompleted); n != 0 {
		t.Fatalf("completed series = %d, want 0", n)
	}
}

func TestGuardSwallowsPanics(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	m.guard("boom", func() { panic("collector exploded") }) // must not panic
}

func TestRequestValidatedCountsPerTarget(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	m.RequestValidated("payments-db-readonly")
	m.RequestValidated("payments-db-readonly")
	m.RequestValidated("")
	if got := testutil.ToFloat64(m.validated.WithLabelValues("payments-db-readonly")); got != 2 {
		t.Fatalf("validated = %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.validated); n != 1 {
		t.Fatalf("series = %d, want 1 (the empty target is skipped)", n)
	}
}

func TestSabotagedRecordersPanicInsideTheGuardOnly(t *testing.T) {
	var logs strings.Builder
	m := New(slog.New(slog.NewTextHandler(&logs, nil)), "test")
	m.Sabotage()
	m.RequestReceived("GET /x", "GET")
	m.RequestCompleted("GET /x", "GET", 200, time.Millisecond)
	m.RequestValidated("t")
	if n := strings.Count(logs.String(), "metric failed"); n != 3 {
		t.Fatalf("want 3 logged metric failures, got %d:\n%s", n, logs.String())
	}
}

func TestMethodIsAClosedSet(t *testing.T) {
	for in, want := range map[string]string{
		"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PATCH": "PATCH", "DELETE": "DELETE",
		"XMETHOD1": OtherMethod, "get": OtherMethod, "": OtherMethod, "GET ": OtherMethod,
	} {
		if got := Method(in); got != want {
			t.Errorf("Method(%q) = %q, want %q", in, got, want)
		}
	}
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	for i := range 50 {
		m.RequestReceived("GET /x", "XMETHOD"+strings.Repeat("Z", i))
	}
	if n := testutil.CollectAndCount(m.httpReceived); n != 1 {
		t.Fatalf("50 custom methods made %d series, want 1", n)
	}
}

func TestRequestWithdrawnIsAClosedSet(t *testing.T) {
	m := New(slog.New(slog.DiscardHandler), "test")
	m.RequestWithdrawn("approval")
	m.RequestWithdrawn("batch_set")
	m.RequestWithdrawn("batch_set")
	m.RequestWithdrawn("mr")
	m.RequestWithdrawn("somewhere-else")
	m.RequestWithdrawn("")
	if got := testutil.ToFloat64(m.withdrawn.WithLabelValues("batch_set")); got != 2 {
		t.Fatalf("batch_set = %v, want 2", got)
	}
	if n := testutil.CollectAndCount(m.withdrawn); n != 3 {
		t.Fatalf("%d series, want the 3 places only", n)
	}
}

func TestRevocationSeriesHaveClosedLabels(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	m.RevocationCreated("EXPIRED")
	m.RevocationCreated("GIVEN_BACK")
	m.RevocationCreated("EXPIRED")
	m.RevocationCreated("<script>") // not a reason: dropped
	m.RevocationDone("EXPIRED", 90*time.Second)
	m.RevocationDone("GIVEN_BACK", -time.Hour) // given back before expiry: no lag
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"changeflow_revocations_total,reason=EXPIRED":      2,
		"changeflow_revocations_total,reason=GIVEN_BACK":   1,
		"changeflow_revocation_lag_seconds,reason=EXPIRED": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "revocation") && want[k] == 0 {
			t.Errorf("unexpected series %s", k)
		}
	}
}

// The renewal series counts each outcome it is given, drops anything
// outside the closed set, and its set is the domain's outcomes exactly.
func TestRenewalSeriesHaveClosedLabels(t *testing.T) {
	m := New(slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	for _, o := range domain.RenewalOutcomes() {
		if !renewalOutcomes[string(o)] {
			t.Errorf("outcome %s is not a label of the renewal series", o)
		}
		m.RenewalEnded(string(o))
	}
	if len(renewalOutcomes) != len(domain.RenewalOutcomes()) {
		t.Errorf("the series has %d outcomes, the domain %d", len(renewalOutcomes), len(domain.RenewalOutcomes()))
	}
	m.RenewalEnded("IN_EFFECT")
	m.RenewalEnded("<script>") // not an outcome: dropped
	want := map[string]float64{"IN_EFFECT": 2, "REJECTED": 1, "CLOSED": 1, "EXPIRED": 1}
	for o, v := range want {
		if got := testutil.ToFloat64(m.renewals.WithLabelValues(o)); got != v {
			t.Errorf("changeflow_renewals_total{outcome=%s} = %v, want %v", o, got, v)
		}
	}
	if n := testutil.CollectAndCount(m.renewals); n != len(want) {
		t.Fatalf("%d series, want the %d outcomes only", n, len(want))
	}
}
