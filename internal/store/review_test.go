package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mustDueNow moves campaign id's due date into the past behind the
// store's back (a campaign cannot be opened already due).
func mustDueNow(t *testing.T, s *store.Store, id int64) {
	t.Helper()
	require.Equal(t, int64(1), mustExec(t, s.DB(), "UPDATE review_campaign SET due_at = ? WHERE id = ?",
		s.Dialect().Time(time.Now().Add(-time.Minute)), id))
}

func TestReviewOpenHoldsTheGrantsInEffect(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		later := time.Now().Add(48 * time.Hour)
		ids := mustValidated(t, s, "rv", "t-rev", 2, later)
		mustValidated(t, s, "other", "t-other", 1, later)
		// Not in effect: still being granted.
		mustSubmit(t, s, "rv-merging", "m-s0", "t-rev", domain.BindingMRCreating)

		c, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-rev", DueAt: later, Default: domain.ReviewRevoke, OpenedBy: "olivia"})
		require.NoError(t, err)
		require.Equal(t, domain.ReviewOpen, c.Status)
		require.Equal(t, 2, c.Items)
		require.False(t, c.Scheduled)
		items, err := s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		require.Len(t, items, 2)
		for i, it := range items {
			require.Equal(t, ids[i], it.GrantOperationID)
			require.Equal(t, "rv-s"+string(rune('0'+i)), it.Subject)
			require.WithinDuration(t, later, it.ExpiresAt, time.Second)
			require.Empty(t, it.Decision)
		}

		// A second open campaign for the target: refused, nothing written.
		_, err = s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-rev", DueAt: later, Default: domain.ReviewKeep, OpenedBy: "adam"})
		require.ErrorIs(t, err, store.ErrReviewOpen)
		list, err := s.ReviewCampaigns(ctx, "", 10)
		require.NoError(t, err)
		require.Len(t, list, 1)
	})
}

func TestReviewDecideOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustValidated(t, s, "dc", "t-dec", 2, time.Now().Add(time.Hour))
		c, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-dec", DueAt: time.Now().Add(time.Hour), Default: domain.ReviewRevoke, OpenedBy: "olivia"})
		require.NoError(t, err)
		items, err := s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)

		it, err := s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[0].ID, Decision: domain.ReviewKeep, By: "olivia", Comment: "still on call"})
		require.NoError(t, err)
		require.Equal(t, domain.ReviewKeep, it.Decision)
		require.Equal(t, "olivia", it.DecidedBy)
		require.Equal(t, "still on call", it.Comment)
		require.False(t, it.DecidedAt.IsZero())

		_, err = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[0].ID, Decision: domain.ReviewRevoke, By: "adam"})
		require.ErrorIs(t, err, store.ErrReviewDecided)
		_, err = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID + 1, ItemID: items[0].ID, Decision: domain.ReviewRevoke, By: "adam"})
		require.ErrorIs(t, err, domain.ErrNotFound, "an item of another campaign")

		open, err := s.ReviewOpenItems(ctx, 0)
		require.NoError(t, err)
		require.Len(t, open, 1)
		require.Equal(t, items[1].ID, open[0].ID)
		require.Equal(t, "t-dec", open[0].TargetKey)

		// Many deciders race for the other item: one wins.
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[1].ID, Decision: domain.ReviewRevoke, By: "olivia"})
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.ErrorIs(t, err, store.ErrReviewDecided)
			}
		}
		require.Equal(t, 1, won)

		// Due, not yet closed by the pass: the default decides, not a
		// late reviewer, and the item is no longer listed.
		mustExec(t, s.DB(), "UPDATE review_item SET decision = NULL WHERE id = ?", items[1].ID)
		mustDueNow(t, s, c.ID)
		_, err = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[1].ID, Decision: domain.ReviewKeep, By: "olivia"})
		require.ErrorIs(t, err, store.ErrReviewClosed)
		open, err = s.ReviewOpenItems(ctx, 0)
		require.NoError(t, err)
		require.Empty(t, open)
		// Closed: no decision is taken any more.
		n, err := s.ReviewClose(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mustExec(t, s.DB(), "UPDATE review_item SET decision = NULL WHERE id = ?", items[1].ID)
		_, err = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[1].ID, Decision: domain.ReviewKeep, By: "olivia"})
		require.ErrorIs(t, err, store.ErrReviewClosed)
	})
}

func TestReviewCloseAppliesTheDefaultOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		ctx := t.Context()
		const instances = 3
		stores := make([]*store.Store, instances)
		for i := range stores {
			stores[i] = storetest.OpenDSN(t, driver, dsn)
		}
		_, err := stores[0].Migrate(ctx)
		require.NoError(t, err)
		s := stores[0]
		mustValidated(t, s, "df", "t-def", 3, time.Now().Add(time.Hour))
		c, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-def", DueAt: time.Now().Add(time.Hour), Default: domain.ReviewRevoke, OpenedBy: "olivia"})
		require.NoError(t, err)
		items, err := s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		_, err = s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: items[0].ID, Decision: domain.ReviewKeep, By: "olivia"})
		require.NoError(t, err)

		// Not due yet: nothing closes.
		_, err = s.ReviewClose(ctx, c.ID)
		require.ErrorIs(t, err, domain.ErrPreempted)
		mustDueNow(t, s, c.ID)
		due, err := s.ReviewDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{c.ID}, due)

		var wg sync.WaitGroup
		defaulted := make([]int, instances)
		errs := make([]error, instances)
		for i, st := range stores {
			wg.Go(func() { defaulted[i], errs[i] = st.ReviewClose(ctx, c.ID) })
		}
		wg.Wait()
		closed, total := 0, 0
		for i, err := range errs {
			if err == nil {
				closed++
				total += defaulted[i]
			} else {
				require.ErrorIs(t, err, domain.ErrPreempted)
			}
		}
		require.Equal(t, 1, closed, "closed once")
		require.Equal(t, 2, total, "the two undecided items took the default once")
		recs, err := s.AuditListByResource(ctx, fmt.Sprintf("review:%d", c.ID), 10)
		require.NoError(t, err)
		require.Len(t, recs, 2, "the close and its report are audited once each")
		require.Equal(t, "review-close", recs[0].Action)
		require.Equal(t, domain.ReviewActor(c.ID), recs[0].Actor)
		require.JSONEq(t, `{"defaulted":2,"defaultDecision":"revoke"}`, recs[0].Params)
		require.Equal(t, domain.ReviewReportAction, recs[1].Action)
		require.Equal(t, domain.ReviewActor(c.ID), recs[1].Actor)
		var report struct {
			domain.ReviewReportHeader
			Entries []domain.ReviewReportItem `json:"entries"`
		}
		require.NoError(t, json.Unmarshal([]byte(recs[1].Params), &report))
		require.Equal(t, 3, report.Items)
		require.Equal(t, []int{1, 1}, []int{report.Part, report.Parts})
		var removals []string
		for _, e := range report.Entries {
			removals = append(removals, e.Decision+"/"+e.Removal)
		}
		require.Equal(t, []string{"keep/none", "revoke/pending", "revoke/pending"}, removals, "the report as the close left the items")

		got, err := s.ReviewCampaignGet(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, domain.ReviewClosed, got.Status)
		require.Equal(t, 3, got.Decided)
		items, err = s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, domain.ReviewKeep, items[0].Decision)
		require.False(t, items[0].ByDefault)
		for _, it := range items[1:] {
			require.Equal(t, domain.ReviewRevoke, it.Decision)
			require.True(t, it.ByDefault)
			require.Equal(t, domain.ReviewActor(c.ID), it.DecidedBy)
		}

		// The two removals to start, recorded once each.
		pending, err := s.ReviewPendingRemovals(ctx, 10)
		require.NoError(t, err)
		require.Len(t, pending, 2)
		require.Equal(t, "t-def", pending[0].TargetKey)
		require.NoError(t, s.ReviewRecordRemoval(ctx, pending[0].ID, domain.RevocationID(pending[0].GrantOperationID), ""))
		require.ErrorIs(t, stores[1].ReviewRecordRemoval(ctx, pending[0].ID, "x~revoke", ""), domain.ErrPreempted)
		require.NoError(t, s.ReviewRecordRemoval(ctx, pending[1].ID, "", "the access had ended already"))
		pending, err = s.ReviewPendingRemovals(ctx, 10)
		require.NoError(t, err)
		require.Empty(t, pending)

		// A closed campaign frees the target for the next one.
		_, err = s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-def", DueAt: time.Now().Add(time.Hour), Default: domain.ReviewKeep, OpenedBy: "olivia"})
		require.NoError(t, err)
	})
}

func TestReviewScheduledOpenOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		ctx := t.Context()
		const instances = 3
		stores := make([]*store.Store, instances)
		for i := range stores {
			stores[i] = storetest.OpenDSN(t, driver, dsn)
		}
		_, err := stores[0].Migrate(ctx)
		require.NoError(t, err)
		mustValidated(t, stores[0], "sc", "t-sched", 2, time.Now().Add(time.Hour))

		race := func(after int64) int64 {
			var wg sync.WaitGroup
			ids := make([]int64, instances)
			errs := make([]error, instances)
			for i, st := range stores {
				wg.Go(func() {
					c, err := st.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-sched", DueAt: time.Now().Add(time.Hour),
						Default: domain.ReviewRevoke, OpenedBy: "schedule", ScheduledAfter: &after})
					ids[i], errs[i] = c.ID, err
				})
			}
			wg.Wait()
			var won int64
			for i, err := range errs {
				if err == nil {
					require.Zero(t, won, "opened twice")
					won = ids[i]
				} else {
					require.True(t, errors.Is(err, store.ErrReviewOpen), "%v", err)
				}
			}
			require.NotZero(t, won)
			return won
		}
		first := race(0)
		recs, err := stores[0].AuditListByResource(ctx, fmt.Sprintf("review:%d", first), 10)
		require.NoError(t, err)
		require.Len(t, recs, 1, "the scheduled opening is audited once")
		require.Equal(t, "review-open-scheduled", recs[0].Action)
		require.Equal(t, "schedule", recs[0].Actor)
		last, _, open, err := stores[1].ReviewLast(ctx, "t-sched")
		require.NoError(t, err)
		require.Equal(t, first, last)
		require.True(t, open)

		// Closed, the campaign after it opens once too — and a slow
		// instance still holding "after 0" cannot open a second.
		mustDueNow(t, stores[0], first)
		_, err = stores[0].ReviewClose(ctx, first)
		require.NoError(t, err)
		zero := int64(0)
		_, err = stores[2].ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-sched", DueAt: time.Now().Add(time.Hour),
			Default: domain.ReviewRevoke, OpenedBy: "schedule", ScheduledAfter: &zero})
		require.ErrorIs(t, err, store.ErrReviewOpen)
		second := race(first)
		c, err := stores[0].ReviewCampaignGet(ctx, second)
		require.NoError(t, err)
		require.True(t, c.Scheduled)
		require.Equal(t, 2, c.Items)
		list, err := stores[0].ReviewCampaigns(ctx, "t-sched", 10)
		require.NoError(t, err)
		require.Len(t, list, 2)
	})
}
