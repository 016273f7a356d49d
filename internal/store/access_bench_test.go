package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// accessNow is "now" for the history seedAccess writes: its year ends
// an hour before.
var accessNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// seedAccess writes the access history of target over the year before
// accessNow: subjects people, each with periods back-to-back closed
// periods of one year / periods (the last ending an hour before
// accessNow), and open of them with a period still open since then; in
// multi-row statements.
func seedAccess(tb testing.TB, s *store.Store, target string, people, periods, open int) {
	tb.Helper()
	d := s.Dialect()
	start := accessNow.Add(-365*24*time.Hour - time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(periods)
	var rows []string
	var vals []any
	flush := func() {
		if len(rows) == 0 {
			return
		}
		mustExec(tb, s.DB(), "INSERT INTO access_interval (subject, target_key, from_at, until_at, source, operation_id, approval_id, mr_iid) VALUES "+
			strings.Join(rows, ", "), vals...)
		rows, vals = rows[:0], vals[:0]
	}
	add := func(subject string, from, until time.Time, op string) {
		rows = append(rows, "(?, ?, ?, ?, 'changeflow', ?, ?, ?)")
		vals = append(vals, subject, target, d.Time(from), d.Time(until), op, "appr-"+op, 1)
		if len(rows) == 500 {
			flush()
		}
	}
	for p := range people {
		subject := fmt.Sprintf("%s-p%d", target, p)
		// Staggered by subject, so the periods of a target do not all
		// start at one instant.
		off := time.Duration(p) * time.Minute
		for k := range periods {
			from := start.Add(time.Duration(k)*step + off)
			until := from.Add(step)
			if k == periods-1 {
				until = accessNow.Add(-time.Hour)
			}
			add(subject, from, until, fmt.Sprintf("%s-%d-%d", target, p, k))
		}
		if p < open {
			add(subject, accessNow.Add(-time.Hour), time.Time{}, fmt.Sprintf("%s-%d-open", target, p))
		}
	}
	flush()
	if s.Dialect().IsMySQL() {
		mustExec(tb, s.DB(), "ANALYZE TABLE access_interval")
	} else {
		mustExec(tb, s.DB(), "ANALYZE")
	}
}

// BenchmarkAccessAt measures GET /ops/access's read (store.AccessAtTarget)
// for a target with 10,000 past periods (100 people × 100 periods over a
// year, 10 of them with access now) against a baseline target with 10
// past periods (10 people × 1, 1 with access now), in the same database,
// at three instants: now, the middle of the year, its first day. And the
// history of the whole year (store.AccessHistory, at most 1,000 answered).
//
//	periods/op  the periods the read answered
func BenchmarkAccessAt(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s := storetest.Open(b, driver)
			seedAccess(b, s, "busy", 100, 100, 10)
			seedAccess(b, s, "quiet", 10, 1, 1)
			for _, c := range []struct {
				name string
				at   time.Time
			}{
				{"now", accessNow}, {"mid-year", accessNow.Add(-182 * 24 * time.Hour)}, {"year-start", accessNow.Add(-364 * 24 * time.Hour)},
			} {
				for _, target := range []string{"busy", "quiet"} {
					b.Run(target+"/"+c.name, func(b *testing.B) {
						var n int
						for range b.N {
							items, err := s.AccessAtTarget(b.Context(), target, c.at)
							require.NoError(b, err)
							n = len(items)
						}
						b.ReportMetric(float64(n), "periods/op")
					})
				}
			}
			for _, target := range []string{"busy", "quiet"} {
				b.Run(target+"/history-year", func(b *testing.B) {
					var n int
					for range b.N {
						items, _, err := s.AccessHistory(b.Context(), target, accessNow.Add(-366*24*time.Hour), accessNow, store.MaxAccessHistory)
						require.NoError(b, err)
						n = len(items)
					}
					b.ReportMetric(float64(n), "periods/op")
				})
			}
		})
	}
}

// TestAccessReadsUseTheirIndex: the "at" reads and the history read are
// one range of their index on either database — no table scan — as the
// planner reports it for the statements the store sends, over the
// history BenchmarkAccessAt reads; and they answer what that history
// holds.
func TestAccessReadsUseTheirIndex(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		seedAccess(t, s, "busy", 20, 50, 5)
		seedAccess(t, s, "quiet", 10, 1, 1)
		d := s.Dialect()
		mid := accessNow.Add(-182 * 24 * time.Hour)
		for _, c := range []struct {
			q     string
			index string
			args  []any
		}{
			{s.AccessAtTargetQuery(), "idx_access_interval_target", []any{"busy", d.Time(mid), d.Time(mid)}},
			{s.AccessAtSubjectQuery(), "idx_access_interval_subject", []any{"busy-p3", d.Time(mid), d.Time(mid)}},
			{s.AccessHistoryQuery(), "idx_access_interval_target", []any{"busy", d.Time(mid), d.Time(accessNow), 1001}},
		} {
			plan := explain(t, s, c.q, c.args...)
			t.Logf("plan: %s", plan)
			if d.IsMySQL() {
				require.Contains(t, plan, "key="+c.index)
				require.Contains(t, plan, "type=range")
				require.NotContains(t, plan, "type=ALL")
			} else {
				require.Contains(t, plan, "USING INDEX "+c.index)
				require.NotContains(t, plan, "SCAN access_interval")
			}
		}
		now, err := s.AccessAtTarget(t.Context(), "busy", accessNow)
		require.NoError(t, err)
		require.Len(t, now, 5, "the open periods")
		at, err := s.AccessAtTarget(t.Context(), "busy", mid)
		require.NoError(t, err)
		require.Len(t, at, 20, "one period per person")
		hist, more, err := s.AccessHistory(t.Context(), "busy", accessNow.Add(-366*24*time.Hour), accessNow, store.MaxAccessHistory)
		require.NoError(t, err)
		require.True(t, more, "1,005 periods in the year")
		require.Len(t, hist, store.MaxAccessHistory)
		for i := 1; i < len(hist); i++ {
			require.False(t, hist[i].From.Before(hist[i-1].From), "oldest first")
		}
	})
}

// BenchmarkAccessBackfill measures the statement with which migration
// 00016 rebuilds the access history of an existing database from its step
// history: 20,000 grants of 200 people on 100 targets, each with the nine
// step rows of a request's life (one its confirmation) and half of them
// removed (a revocation with three rows, one its confirmation) — 230,000
// step rows, 20,000 periods rebuilt.
//
//	periods/op  the periods the statement wrote
func BenchmarkAccessBackfill(b *testing.B) {
	const grants = 20_000
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s := storetest.Open(b, driver)
			seedStepHistory(b, s, grants)
			q, err := store.AccessBackfillSQL(driver)
			require.NoError(b, err)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				mustExec(b, s.DB(), "DELETE FROM access_interval")
				b.StartTimer()
				mustExec(b, s.DB(), q)
			}
			b.StopTimer()
			require.Equal(b, grants/2, count(b, s.DB(), "SELECT COUNT(*) FROM access_interval WHERE until_at IS NOT NULL AND end_operation_id LIKE '%~revoke'"),
				"every removed grant's period ends at its removal")
			b.ReportMetric(float64(count(b, s.DB(), "SELECT COUNT(*) FROM access_interval")), "periods/op")
		})
	}
}

// seedStepHistory writes n grants' operations and step rows, and a
// revocation of every other one, in multi-row statements.
func seedStepHistory(b *testing.B, s *store.Store, n int) {
	b.Helper()
	type step struct {
		from, to   int
		fromB, toB any
	}
	life := []step{{0, 10001, nil, "MR_CREATING"}, {10001, 10002, nil, nil}, {10002, 10003, nil, nil}, {10003, 10004, "MR_CREATING", "MR_CREATED"},
		{10004, 10101, "MR_CREATED", "MERGING"}, {10101, 10102, nil, nil}, {10102, 10107, nil, nil}, {10107, 10108, "MERGING", "MERGED"},
		{10108, 10301, "MERGED", "VALIDATED"}}
	removal := []step{{0, 10601, "VALIDATED", "REVOKING"}, {10601, 10108, nil, nil}, {10108, 10602, "REVOKING", "REVOKED"}}
	for start := 0; start < n; start += 500 {
		var ops, steps []string
		var oa, sa []any
		add := func(id string, st []step) {
			for _, x := range st {
				steps = append(steps, "(?, ?, ?, ?, ?)")
				var from any
				if x.from != 0 {
					from = x.from
				}
				sa = append(sa, id, from, x.to, x.fromB, x.toB)
			}
		}
		for i := start; i < min(start+500, n); i++ {
			id := fmt.Sprintf("bf-%06d", i)
			subject, target := fmt.Sprintf("p%03d", i%200), fmt.Sprintf("t%03d", (i/200)%100)
			ops = append(ops, "(?, ?, ?, 1, 'LEGACY', 10301, ?, 'GRANT', NULL)")
			oa = append(oa, id, subject, target, "appr-"+id)
			add(id, life)
			if i%2 == 0 {
				ops = append(ops, "(?, ?, ?, 1, 'APPROVE_FIRST', 10602, NULL, 'REVOKE', ?)")
				oa = append(oa, id+"~revoke", subject, target, id)
				add(id+"~revoke", removal)
			}
		}
		mustExec(b, s.DB(), "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, approval_id, kind, grant_operation_id) VALUES "+
			strings.Join(ops, ", "), oa...)
		mustExec(b, s.DB(), "INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES "+
			strings.Join(steps, ", "), sa...)
	}
}
