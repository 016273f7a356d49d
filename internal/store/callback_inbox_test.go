package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestApprovalCallbackListIsTheInboxNewestFirst: the console's view of an
// operation's approval inbox lists its deliveries newest first, bounded,
// and its first entry is the one ApprovalCallbackLatest (the replay) reads.
func TestApprovalCallbackListIsTheInboxNewestFirst(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for _, p := range []store.ApprovalCallbackParams{
			{DeliveryKey: "req-1", OperationID: "op-1", ApprovalID: "ap-1", Result: "REJECTED"},
			{DeliveryKey: "req-other", OperationID: "op-2", ApprovalID: "ap-2", Result: "APPROVED"},
			{DeliveryKey: "req-2", OperationID: "op-1", ApprovalID: "ap-3", Result: "APPROVED"},
		} {
			ok, err := s.ApprovalCallbackInsert(ctx, p)
			require.NoError(t, err)
			require.True(t, ok)
		}

		all, err := s.ApprovalCallbackList(ctx, "op-1", 10)
		require.NoError(t, err)
		require.Len(t, all, 2)
		require.Equal(t, []string{"req-2", "req-1"}, []string{all[0].DeliveryKey, all[1].DeliveryKey})
		require.Equal(t, "ap-3", all[0].ApprovalID)
		require.Equal(t, "APPROVED", all[0].Result)
		require.Equal(t, "op-1", all[0].OperationID)
		require.False(t, all[0].ReceivedAt.IsZero())

		latest, ok, err := s.ApprovalCallbackLatest(ctx, "op-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, all[0], latest)

		one, err := s.ApprovalCallbackList(ctx, "op-1", 1)
		require.NoError(t, err)
		require.Equal(t, all[:1], one)

		none, err := s.ApprovalCallbackList(ctx, "op-none", 10)
		require.NoError(t, err)
		require.Empty(t, none)

		_, err = s.ApprovalCallbackList(ctx, "op-1", 0)
		require.Error(t, err)
	})
}

// TestApprovalCallbackKeepsWhoDecided: the inbox keeps the approver and
// their comment a delivery reports, clipped, so a replay applies them
// again and the audit chain names the approver of the decision.
func TestApprovalCallbackKeepsWhoDecided(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		long := strings.Repeat("é", domain.MaxApproverCommentRunes+40)
		for _, p := range []store.ApprovalCallbackParams{
			{DeliveryKey: "req-named", OperationID: "op-1", ApprovalID: "ap-1", Result: "REJECTED", DecidedBy: "jane.doe", Comment: long},
			{DeliveryKey: "req-anon", OperationID: "op-2", ApprovalID: "ap-2", Result: "APPROVED"},
		} {
			ok, err := s.ApprovalCallbackInsert(ctx, p)
			require.NoError(t, err)
			require.True(t, ok)
		}
		named, ok, err := s.ApprovalCallbackLatest(ctx, "op-1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "jane.doe", named.DecidedBy)
		require.Equal(t, string([]rune(long)[:domain.MaxApproverCommentRunes]), named.Comment)
		anon, _, err := s.ApprovalCallbackLatest(ctx, "op-2")
		require.NoError(t, err)
		require.Empty(t, anon.DecidedBy)
		require.Empty(t, anon.Comment)

		_, err = s.AuditChainAppend(ctx, store.AuditChainParams{Grace: 0, Lookback: 15 * time.Minute, Limit: 10})
		require.NoError(t, err)
		st, err := s.AuditChainState(ctx)
		require.NoError(t, err)
		entries, err := s.AuditChainPage(ctx, st.AnchorSeq+1, st.HeadSeq, 10)
		require.NoError(t, err)
		require.Len(t, entries, 2)
		var byKey = map[string]map[string]any{}
		for _, e := range entries {
			var f map[string]any
			require.NoError(t, json.Unmarshal(e.Record, &f))
			byKey[f["deliveryKey"].(string)] = f
		}
		require.Equal(t, "jane.doe", byKey["req-named"]["decidedBy"])
		require.NotEmpty(t, byKey["req-named"]["comment"])
		require.NotContains(t, byKey["req-anon"], "decidedBy", "nobody named: left out")
	})
}
