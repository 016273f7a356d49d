package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestReviewReportOfALargeCampaignIsWrittenInParts: a campaign of 60
// items, each decided with a comment of 1,024 characters, has a report
// longer than audit_log.params holds on MariaDB (a TEXT column, 65,535
// bytes). Its close succeeds and writes the report as parts, each within
// domain.ReviewReportMaxBytes, numbered 1..N and together holding every
// item once, in order, with its comment whole.
func TestReviewReportOfALargeCampaignIsWrittenInParts(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		const n = 60
		mustValidated(t, s, "big", "t-big", n, time.Now().Add(time.Hour))
		c, err := s.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: "t-big", DueAt: time.Now().Add(time.Hour), Default: domain.ReviewKeep, OpenedBy: "olivia"})
		require.NoError(t, err)
		items, err := s.ReviewItems(ctx, c.ID)
		require.NoError(t, err)
		require.Len(t, items, n)
		for i, it := range items {
			_, err := s.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: it.ID, Decision: domain.ReviewKeep,
				By: "olivia", Comment: fmt.Sprintf("%02d", i) + strings.Repeat("é", 1022)})
			require.NoError(t, err)
		}
		mustDueNow(t, s, c.ID)
		_, err = s.ReviewClose(ctx, c.ID)
		require.NoError(t, err)

		recs, err := s.AuditListByResource(ctx, domain.ReviewActor(c.ID), 100)
		require.NoError(t, err)
		var subjects []string
		parts := 0
		for _, r := range recs {
			if r.Action != domain.ReviewReportAction {
				continue
			}
			parts++
			require.LessOrEqual(t, len(r.Params), domain.ReviewReportMaxBytes, "part %d", parts)
			var p struct {
				domain.ReviewReportHeader
				Entries []domain.ReviewReportItem `json:"entries"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.Params), &p))
			require.Equal(t, parts, p.Part)
			require.Equal(t, n, p.Items)
			require.True(t, p.KeepByDefault)
			for _, e := range p.Entries {
				require.Equal(t, 1024, len([]rune(e.Comment)), "the comment whole")
				subjects = append(subjects, e.Subject)
			}
		}
		require.Greater(t, parts, 1, "more than one part")
		var want []string
		for _, it := range items {
			want = append(want, it.Subject)
		}
		require.Equal(t, want, subjects, "every item once, in order")
	})
}
