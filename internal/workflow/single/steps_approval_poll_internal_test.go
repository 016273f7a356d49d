package single

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
)

// TestPolledDeliveryKey: a polled decision is recorded under its
// callback's own requestId when the approval system reports one (so the
// callback is a duplicate delivery), else under a key derived from the
// approval id and the decision that fits the inbox column.
func TestPolledDeliveryKey(t *testing.T) {
	a := approval.Approval{ApprovalID: "APR-000007", Status: approval.Approved, CallbackRequestID: "cb-APR-000007"}
	require.Equal(t, "cb-APR-000007", polledDeliveryKey(a))

	a.CallbackRequestID = ""
	require.Equal(t, "poll:APR-000007:APPROVED", polledDeliveryKey(a))
	a.Status = approval.Rejected
	require.Equal(t, "poll:APR-000007:REJECTED", polledDeliveryKey(a), "another decision, another row")

	long := approval.Approval{ApprovalID: strings.Repeat("x", 200), Status: approval.Approved, CallbackRequestID: strings.Repeat("y", 129)}
	k := polledDeliveryKey(long)
	require.LessOrEqual(t, len(k), 128)
	require.True(t, strings.HasPrefix(k, "poll:"), "an over-long requestId is not usable as the key")
	require.Equal(t, k, polledDeliveryKey(long), "stable")
	long.Status = approval.Withdrawn
	require.NotEqual(t, k, polledDeliveryKey(long))
}
