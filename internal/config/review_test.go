package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTargetOwnersAndReview(t *testing.T) {
	for _, c := range []struct {
		name, doc  string
		owners     []string
		every, due time.Duration
		fellBack   []string // fields that fell back
	}{
		{"none configured", "targets:\n  db: {}\n", []string{}, 0, 14 * 24 * time.Hour, nil},
		{"list, lower-cased, deduplicated", "targets:\n  db:\n    owners: [Olivia, oscar, olivia]\n    review: {every: 90d, dueIn: 7d}\n",
			[]string{"olivia", "oscar"}, 90 * 24 * time.Hour, 7 * 24 * time.Hour, nil},
		{"comma-separated", "targets:\n  db:\n    owners: \"olivia, oscar\"\n", []string{"olivia", "oscar"}, 0, 14 * 24 * time.Hour, nil},
		{"not an account dropped", "targets:\n  db:\n    owners: [olivia, \"bob smith\", \"-x\"]\n", []string{"olivia"}, 0, 14 * 24 * time.Hour, []string{"owners"}},
		{"malformed every: no schedule", "targets:\n  db:\n    review: {every: soon}\n", []string{}, 0, 14 * 24 * time.Hour, []string{"review.every"}},
		{"negative every: no schedule", "targets:\n  db:\n    review: {every: -5d}\n", []string{}, 0, 14 * 24 * time.Hour, []string{"review.every"}},
		{"tiny every clamped", "targets:\n  db:\n    review: {every: 1m, dueIn: 1s}\n", []string{}, time.Hour, time.Hour, []string{"review.every", "review.dueIn"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadYAML(t, c.doc)
			tg, ok := s.Target("db")
			require.True(t, ok)
			require.Equal(t, c.owners, tg.Owners)
			require.Equal(t, c.every, tg.ReviewEvery)
			require.Equal(t, c.due, tg.ReviewDueIn)
			for _, f := range []string{"owners", "review.every", "review.dueIn"} {
				r, ok := s.Resolution("targets.db." + f)
				require.True(t, ok, f)
				want := false
				for _, fb := range c.fellBack {
					want = want || fb == f
				}
				require.Equal(t, want, r.FellBack, "%s: %s", f, r.Reason)
			}
		})
	}
}

func TestTargetReviewFromEnv(t *testing.T) {
	opts := testOptions(writeFile(t, t.TempDir(), "changeflow.yaml", "targets:\n  db: {}\n"))
	opts.Environ = []string{"CHANGEFLOW_TARGETS_DB_OWNERS=olivia,oscar", "CHANGEFLOW_TARGETS_DB_REVIEW_EVERY=30d", "CHANGEFLOW_TARGETS_DB_REVIEW_DUEIN=2d"}
	m := mustLoad(t, opts)
	tg, ok := m.Current().Target("db")
	require.True(t, ok)
	require.Equal(t, []string{"olivia", "oscar"}, tg.Owners)
	require.Equal(t, 30*24*time.Hour, tg.ReviewEvery)
	require.Equal(t, 2*24*time.Hour, tg.ReviewDueIn)
}
