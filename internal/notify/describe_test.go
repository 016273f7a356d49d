package notify_test

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
)

// TestDescribe: every kind is told in words, with the page to open and,
// for a reminder, the one-click renewal; no link without a public URL.
func TestDescribe(t *testing.T) {
	until := time.Date(2026, 12, 31, 18, 0, 0, 0, time.FixedZone("CET", 3600))
	base := notify.Data{OperationID: "op 1", Subject: "alice", Requester: "alice", TargetKey: "billing", Until: &until}
	for _, c := range []struct {
		kind      notify.Kind
		op        domain.OperationKind
		summary   string
		whatToDo  string
		link      string
		renewLink string
	}{
		{notify.KindRequestInEffect, domain.OperationGrant, "Access of alice to billing is in effect until 2026-12-31 17:00 UTC.", "", "https://cf/requests/op%201", ""},
		{notify.KindRenewalInEffect, domain.OperationRenew, "Access of alice to billing is renewed: in effect until 2026-12-31 17:00 UTC.", "", "https://cf/requests/op%201", ""},
		{notify.KindRequestRejected, domain.OperationGrant, "The request of alice for access to billing was rejected.", "Read the approver's comment", "https://cf/requests/op%201", ""},
		{notify.KindRequestFailed, domain.OperationGrant, "stopped on a failure.", "withdraw it on its page and ask again", "https://cf/requests/op%201", ""},
		{notify.KindRequestFailed, domain.OperationRevoke, "the access is still in effect.", "nothing is needed from you", "https://cf/requests/op%201", ""},
		{notify.KindAccessExpiring, domain.OperationGrant, "Access of alice to billing ends on 2026-12-31 17:00 UTC, in less than 24 hours.", "Renew it", "https://cf/requests/op%201", "https://cf/request/billing?renew=op+1"},
		{notify.KindAccessRemoved, domain.OperationRevoke, "Access of alice to billing was removed.", "", "https://cf/requests/op%201", ""},
		{notify.KindRequestSubmitted, domain.OperationGrant, "alice asked for access to billing", "", "https://cf/requests/op%201", ""},
		{notify.KindRequestApproved, domain.OperationGrant, "was approved", "", "https://cf/requests/op%201", ""},
		{notify.KindRequestWithdrawn, domain.OperationGrant, "was withdrawn; nothing changed.", "", "https://cf/requests/op%201", ""},
		{notify.KindBatchBlocked, "", "Batch 9 of project cfg is blocked", "retry it", "https://cf/console/batches/9", ""},
		{notify.KindReviewAssigned, "", "An access review of billing waits", "before the review's due date", "https://cf/reviews", ""},
		{notify.KindForeignHead, "", "pushed to the branch of MR !12", "security events", "https://cf/console/security", ""},
	} {
		t.Run(string(c.kind)+"/"+string(c.op), func(t *testing.T) {
			d := base
			d.Kind, d.BatchID, d.Project, d.Threshold, d.MRIID = c.kind, 9, "cfg", "24h", 12
			if c.kind == notify.KindBatchBlocked || c.kind == notify.KindForeignHead {
				d.OperationID = ""
			}
			got := notify.Describe(d, c.op, "https://cf/")
			if !strings.Contains(got.Summary, c.summary) {
				t.Errorf("summary %q, want it to hold %q", got.Summary, c.summary)
			}
			if c.whatToDo == "" && got.WhatToDo != "" || !strings.Contains(got.WhatToDo, c.whatToDo) {
				t.Errorf("whatToDo %q, want %q", got.WhatToDo, c.whatToDo)
			}
			if got.Link != c.link || got.RenewLink != c.renewLink {
				t.Errorf("links %q %q, want %q %q", got.Link, got.RenewLink, c.link, c.renewLink)
			}
			if bare := notify.Describe(d, c.op, ""); bare.Link != "" || bare.RenewLink != "" {
				t.Errorf("links without a public URL: %q %q", bare.Link, bare.RenewLink)
			}
		})
	}
	for _, k := range notify.Kinds {
		d := base
		d.Kind = k
		if notify.Describe(d, domain.OperationGrant, "").Summary == "" {
			t.Errorf("%s has no words", k)
		}
	}
}
