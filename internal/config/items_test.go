package config

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fallbackCase is one misconfiguration of one item and what it must
// resolve to.
type fallbackCase struct {
	name     string
	yaml     string // YAML source of the value; "<missing>" = key absent
	want     string // expected Resolution.Value
	fellBack bool
	reason   string // substring of Reason; every case needs a non-empty Reason unless reason == "-"
}

const missing = "<missing>"

// durationCases derives the cases of a duration item from its row. The
// expectations are computed from the documented default, minimum and unit,
// so every duration row is held to the same contract.
func durationCases(it item) []fallbackCase {
	def := it.def
	minimum := time.Duration(it.min)
	clamp := func(d time.Duration) string { return fmtDur(max(d, minimum)) }
	return []fallbackCase{
		{"missing is the built-in default", missing, def, false, reasonBuiltin},
		{"empty string falls back to default", `""`, def, true, "empty → default " + def},
		{"null falls back to default", ``, def, true, "empty → default"},
		{"whitespace falls back to default", `"   "`, def, true, "empty → default"},
		{"upper-case unit is accepted", `"90S"`, clamp(90 * time.Second), 90*time.Second < minimum, "-"},
		{"misspelled unit falls back to default", `"90sec"`, def, true, "not a duration → default " + def},
		{"negative is clamped to the minimum", `"-5s"`, fmtDur(minimum), true, "negative → clamped to " + fmtDur(minimum)},
		{"negative bare integer is clamped", `-3`, fmtDur(minimum), true, "negative → clamped"},
		{"non-numeric falls back to default", `abc`, def, true, "value 'abc' not a duration → default " + def},
		{"bare integer counts the documented unit", `7`, clamp(7 * it.unit), 7*it.unit < minimum, "-"},
		{"a list is malformed", `[1, 2]`, def, true, "not a duration"},
		{"a boolean is malformed", `true`, def, true, "not a duration"},
	}
}

func intCases(it item) []fallbackCase {
	def := it.def
	cs := []fallbackCase{
		{"missing is the built-in default", missing, def, false, reasonBuiltin},
		{"empty string falls back to default", `""`, def, true, "empty → default " + def},
		{"null falls back to default", ``, def, true, "empty → default"},
		{"whitespace falls back to default", `"  "`, def, true, "empty → default"},
		{"padded number is accepted", `" 7 "`, strconv.FormatInt(min(max(7, it.min), maxOr(it.max, 7)), 10), 7 < it.min || (it.max > 0 && 7 > it.max), "-"},
		{"misspelled number falls back to default", `"7x"`, def, true, "not a number → default " + def},
		{"negative is clamped to the minimum", `-3`, strconv.FormatInt(it.min, 10), true, fmt.Sprintf("value '-3' negative → clamped to %d", it.min)},
		{"non-numeric falls back to default", `abc`, def, true, "value 'abc' not a number → default " + def},
		{"fraction falls back to default", `2.5`, def, true, "not a whole number"},
		{"a boolean is malformed", `true`, def, true, "not a number"},
	}
	if it.min > 0 {
		cs = append(cs, fallbackCase{"zero is raised to the minimum", `0`, strconv.FormatInt(it.min, 10), true, "below minimum"})
	}
	if it.max > 0 {
		cs = append(cs, fallbackCase{"above the maximum is clamped", strconv.FormatInt(it.max+1, 10), strconv.FormatInt(it.max, 10), true, "above maximum"})
	}
	return cs
}

func maxOr(m, v int64) int64 {
	if m == 0 {
		return v
	}
	return m
}

func boolCases(it item) []fallbackCase {
	def := it.def
	return []fallbackCase{
		{"missing is the built-in default", missing, def, false, reasonBuiltin},
		{"empty string falls back to default", `""`, def, true, "empty → default " + def},
		{"null falls back to default", ``, def, true, "empty → default"},
		{"whitespace falls back to default", `"  "`, def, true, "empty → default"},
		{"upper-case TRUE is accepted", `"TRUE"`, "true", false, "-"},
		{"mixed-case False is accepted", `"False"`, "false", false, "-"},
		{"yes and no are accepted", `"yes"`, "true", false, "-"},
		{"misspelled value falls back to default", `"ture"`, def, true, "value 'ture' not a boolean → default " + def},
		{"negative number falls back to default", `-1`, def, true, "not a boolean"},
		{"non-numeric falls back to default", `abc`, def, true, "not a boolean"},
		{"two is not a boolean", `2`, def, true, "not a boolean"},
	}
}

// pairPartner is the other half of a related pair (minAge < maxAge,
// heartbeatInterval < liveAfter) and the value the matrix gives it.
type pairPartner struct {
	partner, value string
	conflicts      func(time.Duration) bool
}

// pairPartners maps each half of a pair to its partner.
func pairPartners() map[string]pairPartner {
	return map[string]pairPartner{
		KeyReconcileMinAge:           {KeyReconcileMaxAge, "100000h", func(d time.Duration) bool { return d >= 100000*time.Hour }},
		KeyReconcileMaxAge:           {KeyReconcileMinAge, "0s", func(d time.Duration) bool { return d <= 0 }},
		KeyInstanceHeartbeatInterval: {KeyInstanceLiveAfter, "100000h", func(d time.Duration) bool { return d >= 100000*time.Hour }},
		KeyInstanceLiveAfter:         {KeyInstanceHeartbeatInterval, "1ms", func(d time.Duration) bool { return d <= time.Millisecond }},
	}
}

// TestEveryGenericItemFallsBackAsDocumented runs the misconfiguration
// matrix (missing, empty, whitespace, wrong case, misspelled, negative,
// non-numeric, malformed) against every duration, integer and boolean row
// of the item table.
func TestEveryGenericItemFallsBackAsDocumented(t *testing.T) {
	t.Parallel()
	items := itemTable("testhost-42")
	covered := 0
	for _, it := range items {
		var cases []fallbackCase
		switch {
		case strings.HasPrefix(it.typ, "duration"):
			cases = durationCases(it)
		case it.typ == "integer":
			cases = intCases(it)
		case it.typ == "boolean":
			cases = boolCases(it)
		default:
			continue
		}
		covered++
		t.Run(it.key, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					kv := map[string]string{"log.level": "info"}
					if c.yaml != missing {
						kv[it.key] = c.yaml
					}
					if p, ok := pairPartners()[it.key]; ok {
						// Keep the related item out of the way, so the
						// pair rule fires only where this value alone
						// breaks it.
						kv[p.partner] = p.value
						if got, _ := parseDuration(c.want, time.Second); p.conflicts(got) {
							c.want, c.fellBack, c.reason = it.def, true, "both defaults"
						}
					}
					s := loadYAML(t, yamlDoc(kv))
					r, ok := s.Resolution(it.key)
					require.True(t, ok)
					require.Equal(t, c.want, r.Value, "reason: %s", r.Reason)
					require.Equal(t, c.fellBack, r.FellBack, "reason: %s", r.Reason)
					if c.reason != "-" {
						require.NotEmpty(t, r.Reason)
						require.Contains(t, r.Reason, c.reason)
					}
					if c.yaml == missing {
						require.Equal(t, SourceDefault, r.Source)
					} else {
						require.Equal(t, SourceFile, r.Source, "a fall-back names the layer holding the bad value")
					}
				})
			}
		})
	}
	require.Greater(t, covered, 40, "the matrix must cover the generic rows")
}

// TestDocumentedDefaults pins the defaults the spec and the brief name, so a
// change to the table is a visible decision.
func TestDocumentedDefaults(t *testing.T) {
	s := loadYAML(t, "{}\n")
	durations := map[string]time.Duration{
		KeyRateLimitWindow:       60 * time.Second,
		KeyApprovalBackoff:       500 * time.Millisecond,
		KeyReconcileMinAge:       2 * time.Minute,
		KeyReconcileMaxAge:       24 * time.Hour,
		KeyServerReadTimeout:     30 * time.Second,
		KeyWorkflowLeaseDuration: 30 * time.Second,
	}
	for k, want := range durations {
		got, r := s.Duration(k)
		require.Equal(t, want, got, k)
		require.Equal(t, SourceDefault, r.Source, k)
	}
	ints := map[string]int{KeyApprovalMaxRetries: 3, KeyBatchMaxRequests: 50}
	for k, want := range ints {
		got, _ := s.Int(k)
		require.Equal(t, want, got, k)
	}
	for _, k := range []string{KeyWorkflowApproveFirst, KeyApprovalCheckItemsEnabled, KeySimEmbedded, KeyRateLimitGlobalEnabled} {
		got, _ := s.Bool(k)
		require.False(t, got, k)
	}
	require.Equal(t, "127.0.0.1:8080", s.Server().Listen)
	require.Equal(t, DriverSQLite, s.Database().Driver)
	require.Equal(t, defaultSQLiteDSN, s.Database().DSN)
	require.Equal(t, "testhost-42", s.Instance().ID)
	limit, window, r := s.RateLimit(BucketApply)
	require.Equal(t, 10, limit)
	require.Equal(t, time.Minute, window)
	require.Equal(t, SourceDefault, r.Source)
}

func TestApprovalBackoffBareIntegerIsMilliseconds(t *testing.T) {
	s := loadYAML(t, "approval:\n  backoffMs: 750\n")
	require.Equal(t, 750*time.Millisecond, s.Approval().Backoff)
	s = loadYAML(t, "approval:\n  backoffMs: 2s\n")
	require.Equal(t, 2*time.Second, s.Approval().Backoff)
}

func TestDurationsAcceptDays(t *testing.T) {
	s := loadYAML(t, "idempotency:\n  ttl: 7d\n")
	require.Equal(t, 7*24*time.Hour, s.Idempotency().TTL)
}

func TestInvertedPairsFallBackToBothDefaults(t *testing.T) {
	for _, c := range []struct {
		name, doc  string
		lo, hi     string
		wantLo     time.Duration
		wantHi     time.Duration
		reasonPart string
	}{
		{"reconcile minAge equal to maxAge", "reconcile:\n  minAge: 1h\n  maxAge: 1h\n", KeyReconcileMinAge, KeyReconcileMaxAge, 2 * time.Minute, 24 * time.Hour, "≥ reconcile.maxAge"},
		{"reconcile minAge above maxAge", "reconcile:\n  minAge: 48h\n  maxAge: 1h\n", KeyReconcileMinAge, KeyReconcileMaxAge, 2 * time.Minute, 24 * time.Hour, "both defaults"},
		{"liveAfter not above heartbeat", "instance:\n  heartbeatInterval: 30s\n  liveAfter: 10s\n", KeyInstanceHeartbeatInterval, KeyInstanceLiveAfter, 10 * time.Second, 30 * time.Second, "both defaults"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadYAML(t, c.doc)
			lo, rlo := s.Duration(c.lo)
			hi, rhi := s.Duration(c.hi)
			require.Equal(t, c.wantLo, lo)
			require.Equal(t, c.wantHi, hi)
			require.True(t, rlo.FellBack)
			require.True(t, rhi.FellBack)
			require.Contains(t, rlo.Reason, c.reasonPart)
			require.Equal(t, rlo.Reason, rhi.Reason)
		})
	}
	t.Run("a valid pair is kept", func(t *testing.T) {
		s := loadYAML(t, "reconcile:\n  minAge: 5m\n  maxAge: 2h\n")
		require.Equal(t, Reconcile{Interval: time.Minute, MinAge: 5 * time.Minute, MaxAge: 2 * time.Hour, Inference: true}, s.Reconcile())
	})
	t.Run("inference: on by default, off only by a valid false", func(t *testing.T) {
		require.False(t, loadYAML(t, "reconcile:\n  inference: false\n").Reconcile().Inference)
		require.True(t, loadYAML(t, "reconcile:\n  inference: nope\n").Reconcile().Inference, "malformed → the default")
	})
}

// TestApprovalVerifyDecisionsDefaultsToReadingBack: verifying is the safe
// side, so only a valid false turns it off.
func TestApprovalVerifyDecisionsDefaultsToReadingBack(t *testing.T) {
	require.True(t, loadYAML(t, "approval: {}\n").Approval().VerifyDecisions, "default")
	require.True(t, loadYAML(t, "approval:\n  verifyDecisions: nope\n").Approval().VerifyDecisions, "malformed → the default")
	require.True(t, loadYAML(t, "approval:\n  verifyDecisions: \"\"\n").Approval().VerifyDecisions, "empty → the default")
	require.False(t, loadYAML(t, "approval:\n  verifyDecisions: false\n").Approval().VerifyDecisions)
}

func TestKeysAreMatchedCaseInsensitively(t *testing.T) {
	s := loadYAML(t, "WORKFLOW:\n  approvefirst: true\nBatch:\n  MAXREQUESTS: 7\n")
	require.True(t, s.Workflow().ApproveFirst)
	require.Equal(t, 7, s.Batch().MaxRequests)
	require.Empty(t, s.Unknown())
}

func TestMisspelledKeysAreReportedAndIgnored(t *testing.T) {
	s := loadYAML(t, "workflow:\n  aproveFirst: true\ntargets:\n  x:\n    acessMode: OPEN\n")
	approve, r := s.Bool(KeyWorkflowApproveFirst)
	require.False(t, approve, "a misspelled key is missing, so the default applies")
	require.Equal(t, SourceDefault, r.Source)
	require.Equal(t, []string{"file: targets.x.acessMode", "file: workflow.aproveFirst"}, s.Unknown())
	// The target exists (it was named), but its access mode is missing → TEST_WINDOW.
	tg, ok := s.Target("x")
	require.True(t, ok)
	require.Equal(t, "TEST_WINDOW", string(tg.AccessMode))
}
