package workflow_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/auditchain"
	"changeflow/internal/auditlog"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/review"
)

// reviewReport is a review-report record's params as the export holds
// them.
type reviewReport struct {
	domain.ReviewReportHeader
	Entries []domain.ReviewReportItem `json:"entries"`
}

// TestAuditExportCarriesTheReviewReport: a campaign over three accesses
// — kept, revoked by the owner, left to the default (revoke) — closes at
// its due date. The export made afterwards verifies with the public key
// (what changeflow audit verify runs) and holds one review-report
// record, in seq order after the campaign's close, carrying every item:
// subject, source, grant, decision, who and when, comment, and its
// removal — the owner's started (its operationId), the default's pending
// at the close; that removal's own steps follow in the export, naming
// the item's grant. The files on main say what the database says.
func TestAuditExportCarriesTheReviewReport(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ctx := t.Context()
		w.granted("rr-keep", "amy", tSingle)
		w.granted("rr-gone", "ben", tSingle)
		w.granted("rr-late", "cleo", tSingle)
		rv := wakingRevoker{Revoker: revoker(w.deps), wake: w.eng.Wake}
		pass := &review.Reviews{Store: st, Revoker: rv, Config: w.cfg.Load}
		c, err := st.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: tSingle, DueAt: time.Now().Add(time.Hour),
			Default: domain.ReviewRevoke, OpenedBy: "ops-olga"})
		require.NoError(t, err)
		items, err := st.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		require.Len(t, items, 3)
		item := map[string]store.ReviewItem{}
		for _, it := range items {
			item[it.Subject] = it
		}
		_, err = st.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: item["amy"].ID, Decision: domain.ReviewKeep,
			By: "olga", Comment: "still on call"})
		require.NoError(t, err)
		_, err = st.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: item["ben"].ID, Decision: domain.ReviewRevoke,
			By: "olga", Comment: "left the team"})
		require.NoError(t, err)
		res, err := pass.PassOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Removals, "ben's removal")
		w.until(domain.RevocationID("rr-gone"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))

		_, err = st.DB().ExecContext(ctx, "UPDATE review_campaign SET due_at = ? WHERE id = ?",
			st.Dialect().Time(time.Now().Add(-time.Minute)), c.ID)
		require.NoError(t, err)
		res, err = pass.PassOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, review.PassResult{Closed: 1, Defaulted: 1, Removals: 1}, res)
		w.until(domain.RevocationID("rr-late"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		items, err = st.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		for _, it := range items {
			item[it.Subject] = it
		}

		shiftRecords(t, st)
		key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
		chain := auditlog.New(auditlog.Options{Store: st, Settings: func() auditlog.Settings { return auditlog.Settings{SigningKey: key} }})
		var out bytes.Buffer
		now := time.Now()
		require.NoError(t, chain.Export(ctx, &out, auditlog.ExportParams{From: now.Add(-time.Hour), To: now.Add(time.Hour), Format: auditchain.FormatJSONL}))
		_, err = auditchain.Verify(bytes.NewReader(out.Bytes()), key.Public().(ed25519.PublicKey))
		require.NoError(t, err, "the export verifies")

		var (
			reports          []map[string]any
			kinds            []string
			lateRemovalSteps int
		)
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &r))
			kind, _ := r["kind"].(string)
			kinds = append(kinds, kind)
			if kind == domain.ReviewReportAction {
				reports = append(reports, r)
			}
			if r["source"] == store.ChainSourceStep && r["grantOperationId"] == "rr-late" && strings.HasPrefix(kind, "revoke.") {
				lateRemovalSteps++
			}
		}
		require.Len(t, reports, 1, "one report")
		requireInOrder(t, "the campaign", kinds, "review-close", domain.ReviewReportAction)
		require.Positive(t, lateRemovalSteps, "the default's removal is chained on its own, naming the grant")
		r := reports[0]
		require.Equal(t, store.ChainSourceAudit, r["source"])
		require.Equal(t, domain.ReviewActor(c.ID), r["actor"])
		require.Equal(t, domain.ReviewActor(c.ID), r["resource"])
		var rep reviewReport
		require.NoError(t, json.Unmarshal([]byte(r["params"].(string)), &rep))
		got, err := st.ReviewCampaignGet(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, domain.ReviewReportHeader{Campaign: c.ID, TargetKey: tSingle, OpenedAt: got.OpenedAt.UTC().Format(time.RFC3339Nano),
			OpenedBy: "ops-olga", DueAt: got.DueAt.UTC().Format(time.RFC3339Nano), DefaultDecision: "revoke", Items: 3, Part: 1, Parts: 1},
			rep.ReviewReportHeader)
		want := func(subject, grant, decision, by, comment, removal, removalOp string, byDefault bool) domain.ReviewReportItem {
			it := item[subject]
			require.Equal(t, grant, it.GrantOperationID)
			require.NotEmpty(t, it.ApprovalID)
			return domain.ReviewReportItem{Subject: subject, Source: store.AccessSourceChangeflow, GrantOperationID: grant,
				ApprovalID: it.ApprovalID, From: it.From.UTC().Format(time.RFC3339Nano), Until: it.ExpiresAt.UTC().Format(time.RFC3339Nano),
				Decision: decision, DecidedBy: by, DecidedAt: it.DecidedAt.UTC().Format(time.RFC3339Nano), ByDefault: byDefault,
				Comment: comment, Removal: removal, RemovalOperationID: removalOp}
		}
		byIDs := map[string]domain.ReviewReportItem{}
		for _, e := range rep.Entries {
			byIDs[e.Subject] = e
		}
		require.Len(t, rep.Entries, 3)
		require.Equal(t, want("amy", "rr-keep", "keep", "olga", "still on call", domain.ReviewRemovalNone, "", false), byIDs["amy"])
		require.Equal(t, want("ben", "rr-gone", "revoke", "olga", "left the team", domain.ReviewRemovalStarted, domain.RevocationID("rr-gone"), false), byIDs["ben"])
		require.Equal(t, want("cleo", "rr-late", "revoke", domain.ReviewActor(c.ID), "", domain.ReviewRemovalPending, "", true), byIDs["cleo"],
			"the default's revoke: its removal starts right after the close")
		require.Equal(t, domain.RevocationID("rr-late"), item["cleo"].RevocationID, "and was started")

		w.filesExact("rr-keep", "rr-gone", "rr-late")
	})
}
