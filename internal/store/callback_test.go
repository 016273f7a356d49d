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
				return s.DeployCallbackInsert(ctx, store.DeployCallbackParams{DeliveryKey: "dep-1", ProjectID: 1, MRIID: 7, Status: "SUCCESS"})
			}, []bool{true, false}},
			{"a deploy callback without a delivery id is always recorded", func() (bool, error) {
				return s.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: 1, MRIID: 8, Status: "SUCCESS"})
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
