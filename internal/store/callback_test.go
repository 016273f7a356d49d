package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestDeliveriesAreRecordedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		tests := []struct {
			name    string
			deliver func() (bool, error)
			want    []bool // inserted, per delivery
		}{
			{"an approval callback", func() (bool, error) {
				return s.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{DeliveryKey: "req-1", OperationID: "op-1", ApprovalID: "ap-1", Result: "APPROVED"})
			}, []bool{true, false, false}},
			{"a deploy callback with a delivery id", func() (bool, error) {
				r, err := s.DeployCallbackInsert(ctx, store.DeployCallbackParams{DeliveryKey: "dep-1", ProjectID: 1, MRIID: 7, Status: "SUCCESS"})
				return r.Inserted, err
			}, []bool{true, false}},
			{"a deploy callback without a delivery id is always recorded", func() (bool, error) {
				r, err := s.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: 1, MRIID: 8, Status: "SUCCESS"})
				return r.Inserted, err
			}, []bool{true, true}},
			{"a GitLab webhook", func() (bool, error) {
				return s.GitLabEventInsert(ctx, "3f0c-uuid", "pipeline")
			}, []bool{true, false}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				for i, want := range tt.want {
					got, err := tt.deliver()
					require.NoError(t, err, "delivery %d", i)
					require.Equal(t, want, got, "delivery %d", i)
				}
			})
		}
		require.Equal(t, 3, count(t, s.DB(), "SELECT COUNT(*) FROM deploy_callback"))
	})
}

func TestDeliveriesRefuseBadInput(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{OperationID: "op", Result: "APPROVED"})
		require.Error(t, err, "no delivery key")
		_, err = s.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{DeliveryKey: "r", OperationID: "op", Result: "MAYBE"})
		require.Error(t, err, "the CHECK constraint refuses an unknown result")
		_, err = s.GitLabEventInsert(ctx, "", "pipeline")
		require.Error(t, err)
	})
}

// TestApprovalInboxKeepsDispositions: the inbox row of a decision starts
// RECORDED, counts later deliveries of its key, takes the disposition the
// workflow notes (overwritten by a later act), and is listed newest first
// with its source.
func TestApprovalInboxKeepsDispositions(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		ins := func(key, source string) {
			t.Helper()
			_, err := s.ApprovalCallbackInsert(ctx, store.ApprovalCallbackParams{
				DeliveryKey: key, OperationID: "op-in", ApprovalID: "APR-1", Result: "APPROVED", Source: source})
			require.NoError(t, err)
		}
		ins("cb-1", "")
		ins("cb-1", "")
		ins("cb-1", store.InboxSourcePoll) // a poll of the same decision: counted, not a second row
		ins("poll:APR-1:APPROVED", store.InboxSourcePoll)

		latest, ok, err := s.ApprovalCallbackLatest(ctx, "op-in")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "poll:APR-1:APPROVED", latest.DeliveryKey)
		require.Equal(t, store.InboxSourcePoll, latest.Source)
		require.Equal(t, store.InboxRecorded, latest.Disposition)

		require.NoError(t, s.ApprovalCallbackDisposition(ctx, "cb-1", store.InboxStale, "first"))
		require.NoError(t, s.ApprovalCallbackDisposition(ctx, "cb-1", store.InboxApplied, "moved on"))
		require.NoError(t, s.ApprovalCallbackDisposition(ctx, "no-such-key", store.InboxApplied, "nothing to note"))

		list, err := s.ApprovalCallbackList(ctx, "op-in", 10)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, "poll:APR-1:APPROVED", list[0].DeliveryKey, "newest first")
		first := list[1]
		require.Equal(t, "cb-1", first.DeliveryKey)
		require.Equal(t, store.InboxSourceCallback, first.Source, "\"\" is a callback")
		require.Equal(t, store.InboxApplied, first.Disposition)
		require.Equal(t, "moved on", first.Reason)
		require.Equal(t, 2, first.Duplicates)
		require.False(t, first.ReceivedAt.IsZero())

		none, err := s.ApprovalCallbackList(ctx, "op-other", 10)
		require.NoError(t, err)
		require.Empty(t, none)
	})
}
