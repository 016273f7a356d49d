package workflow_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestApprovalCallbackAttacks performs the attacks on the approval
// callback a holder of the shared callback token could try (issue 13,
// finding 2). Each targets a request waiting for its approval; none may
// move it, none may change the approval id changeflow recorded, and the
// real decision afterwards must still apply — a rejection still rejects.
func TestApprovalCallbackAttacks(t *testing.T) {
	t.Parallel()
	type attack struct {
		name   string
		legacy bool
		// readBack: the attack is answered by the read-back, so it runs
		// only with approval.verifyDecisions on; the others run with both.
		readBack bool
		// forge returns the forged callback for the waiting request o;
		// decide, when set, decides in the approval system first with its
		// callback lost, so the read-back has a decision to report.
		forge  func(o store.Operation) map[string]any
		decide string
		// readFails makes the approval system answer the next read 503.
		readFails bool
		// answer, disposition and reason are what the forged callback gets.
		answer, disposition, reason string
		// after is the state the forged callback leaves (zero: still waiting).
		after domain.BindingStatus
	}
	other := func(result string) func(store.Operation) map[string]any {
		return func(o store.Operation) map[string]any {
			b := approvalBody("forged-"+o.OperationID, o.OperationID, result, mrOf(o))
			b["approvalId"] = "APR-999999"
			return b
		}
	}
	own := func(result, mrID string) func(store.Operation) map[string]any {
		return func(o store.Operation) map[string]any {
			if mrID == "own" {
				mrID = mrOf(o)
			}
			b := approvalBody("forged-"+o.OperationID, o.OperationID, result, mrID)
			b["approvalId"] = o.ApprovalID
			return b
		}
	}
	attacks := []attack{
		{name: "another approvalId approves a waiting request", forge: other("APPROVED"),
			answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "not the approval changeflow submitted"},
		{name: "another approvalId approves a waiting legacy request", legacy: true, forge: other("APPROVED"),
			answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "not the approval changeflow submitted"},
		{name: "a callback without approvalId", forge: func(o store.Operation) map[string]any {
			b := approvalBody("forged-"+o.OperationID, o.OperationID, "APPROVED", "")
			delete(b, "approvalId")
			return b
		}, answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "names no approvalId"},
		{name: "the right approval with a wrong ext.mrId (legacy)", legacy: true, forge: func(o store.Operation) map[string]any {
			return own("APPROVED", strconv.FormatInt(o.MRIID+100, 10))(o)
		}, answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "is not this request's MR"},
		{name: "the right approval without ext.mrId on a legacy request", legacy: true, forge: own("APPROVED", ""),
			answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "legacy flow with MR"},
		{name: "the right approval with an ext.mrId on an approve-first request", forge: own("APPROVED", "1"),
			answer: "IGNORED_STALE", disposition: store.InboxRejectedByGuard, reason: "has no MR"},
		{name: "a forged APPROVED whose read-back says PENDING", readBack: true, forge: own("APPROVED", ""),
			answer: "ACCEPTED", disposition: store.InboxUnconfirmed, reason: "still reports approval"},
		{name: "a forged APPROVED whose read-back says PENDING (legacy)", legacy: true, readBack: true, forge: own("APPROVED", "own"),
			answer: "ACCEPTED", disposition: store.InboxUnconfirmed, reason: "still reports approval"},
		{name: "a forged APPROVED while the read-back fails", readBack: true, forge: own("APPROVED", ""), readFails: true,
			answer: "ACCEPTED", disposition: store.InboxVerifyFailed, reason: "reading the approval back failed"},
		{name: "a forged APPROVED whose read-back says REJECTED", readBack: true, forge: own("APPROVED", ""), decide: "reject",
			answer: "OK", disposition: store.InboxApplied, reason: "reports REJECTED, the callback claimed APPROVED", after: domain.BindingRejected},
	}
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		// One world (one approval system) for both settings: a second
		// simulator would number its approvals, and so its callbacks'
		// delivery ids, from 1 again in the same database.
		w := newWorld(t, st)
		for _, verify := range []bool{true, false} {
			ov := e2eOverlay(w.simTS.URL)
			ov["approval.verifyDecisions"] = verify
			w.load(ov)
			for i, a := range attacks {
				if a.readBack && !verify {
					continue
				}
				t.Run(fmt.Sprintf("%s (verifyDecisions %v)", a.name, verify), func(t *testing.T) {
					op, subject := fmt.Sprintf("op-atk-%v-%d", verify, i), fmt.Sprintf("atk%v%d", verify, i)
					w.submit(op, subject, tSingle, !a.legacy)
					o, _ := w.until(op, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
					recorded := o.ApprovalID
					require.NotEmpty(t, recorded)
					if a.decide != "" {
						w.dropNextApprovalCallback()
						w.decide(op, a.decide)
					}

					if a.readFails {
						// Aimed at this request's approval and not spent by
						// one read: the earlier attacks' requests are still
						// in APPROVAL_SENT and their pollers read the same
						// simulator (an unaimed count of 1 was once spent by
						// one of them, and the read-back then succeeded).
						w.simJSON(http.MethodPost, "/approval/_control/faults", map[string]any{"failReadsNext": map[string]any{"status": 503, "count": 1000, "approvalId": recorded}}, nil)
					}
					answer := w.postCallback("/callbacks/approval", a.forge(o))
					if a.readFails {
						w.simJSON(http.MethodPost, "/approval/_control/faults", map[string]any{"failReadsNext": map[string]any{"count": 0}}, nil)
					}
					require.Equal(t, a.answer, answer)
					row := inboxOf(t, st, op)["forged-"+op]
					require.Equal(t, a.disposition, row.Disposition, row.Reason)
					require.Contains(t, row.Reason, a.reason)
					o, b := mustState(t, st, op)
					require.Equal(t, recorded, o.ApprovalID, "the recorded approval id is never overwritten")
					if a.after != "" {
						require.Equal(t, a.after, b.Status)
						w.until(op, "closed", func(o store.Operation, b store.Binding) bool {
							return b.Status == domain.BindingRejected && o.NextAction == ""
						})
						require.Zero(t, w.validations(op))
						if !a.legacy {
							require.Empty(t, w.mrsOf(op), "an approval read back as rejected created no MR")
						}
						return
					}
					require.Equal(t, domain.BindingApprovalSent, b.Status, "the forged callback moved nothing")
					require.Equal(t, int(domain.StepCreateApprovalSubmitted), o.Step)

					// The real decision still applies: the rejection rejects.
					w.decide(op, "reject")
					if a.legacy {
						w.until(op, "MR closed", at(domain.StepCloseMRClosed, domain.BindingRejected))
						require.Equal(t, "closed", w.mrsOf(op)[0]["state"])
					} else {
						w.until(op, "rejected", at(domain.StepCloseRejected, domain.BindingRejected))
						require.Empty(t, w.mrsOf(op))
					}
					require.Zero(t, w.validations(op))
				})
			}
		}
	})
}

// mrOf is o's MR iid as ext.mrId carries it ("" for none).
func mrOf(o store.Operation) string {
	if o.MRIID == 0 {
		return ""
	}
	return strconv.FormatInt(o.MRIID, 10)
}

// mustState reads op's operation and binding.
func mustState(t *testing.T, st *store.Store, op string) (store.Operation, store.Binding) {
	t.Helper()
	o, err := st.OperationGet(t.Context(), op)
	require.NoError(t, err)
	b, err := st.BindingGet(t.Context(), o.Subject, o.TargetKey)
	require.NoError(t, err)
	return o, b
}
