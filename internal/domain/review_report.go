package domain

import (
	"encoding/json"
	"fmt"
)

// ReviewReportAction is the audit action of a closed campaign's report
// (docs/reviews.md, "In the audit export").
const ReviewReportAction = "review-report"

// ReviewReportMaxBytes bounds the params of one review-report audit
// record: audit_log.params is a TEXT column, 65,535 bytes on MariaDB,
// so a campaign whose report is longer is written as several parts,
// each well under that bound.
const ReviewReportMaxBytes = 48 << 10

// What became of an item's removal when its campaign closed
// (ReviewReportItem.Removal).
const (
	// ReviewRemovalNone: kept, nothing to remove.
	ReviewRemovalNone = "none"
	// ReviewRemovalStarted: the removal is recorded on the item
	// (RemovalOperationID).
	ReviewRemovalStarted = "started"
	// ReviewRemovalEnded: the access had ended before the review could
	// revoke it (RemovalNote says so).
	ReviewRemovalEnded = "ended"
	// ReviewRemovalPending: decided revoke, no removal recorded yet — the
	// default's revokes, which the review pass starts right after the
	// close, or one a failure left for the next pass. Its removal is
	// chained on its own (revoke.* records naming the item's grant).
	ReviewRemovalPending = "pending"
)

// ReviewRemovalOf is what became of the removal of an item decided
// decision, with revocation and note as recorded on it.
func ReviewRemovalOf(decision ReviewDecision, revocation, note string) string {
	switch {
	case revocation != "":
		return ReviewRemovalStarted
	case note != "":
		return ReviewRemovalEnded
	case decision == ReviewRevoke:
		return ReviewRemovalPending
	}
	return ReviewRemovalNone
}

// ReviewReportHeader is what every part of a campaign's report repeats:
// the campaign, and which part of how many this is.
type ReviewReportHeader struct {
	Campaign        int64  `json:"campaign"`
	TargetKey       string `json:"targetKey"`
	OpenedAt        string `json:"openedAt"`
	OpenedBy        string `json:"openedBy"`
	DueAt           string `json:"dueAt"`
	DefaultDecision string `json:"defaultDecision"`
	// KeepByDefault flags a campaign whose undecided items were kept.
	KeepByDefault bool `json:"keepByDefault"`
	// Items counts the campaign's items (all parts).
	Items int `json:"items"`
	Part  int `json:"part"`
	Parts int `json:"parts"`
}

// ReviewReportItem is one entry of the report: who, what was reviewed,
// the decision and its removal. Times are RFC 3339 in UTC, "" when
// unknown.
type ReviewReportItem struct {
	Subject string `json:"subject"`
	// Source is changeflow (a grant of changeflow's) or repo (an entry
	// changeflow did not write).
	Source             string `json:"source"`
	GrantOperationID   string `json:"grantOperationId,omitempty"`
	ApprovalID         string `json:"approvalId,omitempty"`
	From               string `json:"from,omitempty"`
	Until              string `json:"until,omitempty"`
	Decision           string `json:"decision"`
	DecidedBy          string `json:"decidedBy"`
	DecidedAt          string `json:"decidedAt"`
	ByDefault          bool   `json:"byDefault"`
	Comment            string `json:"comment"`
	Removal            string `json:"removal"`
	RemovalOperationID string `json:"removalOperationId,omitempty"`
	RemovalNote        string `json:"removalNote,omitempty"`
}

// reviewReportPart is one record's params.
type reviewReportPart struct {
	ReviewReportHeader
	Entries []ReviewReportItem `json:"entries"`
}

// ReviewReportParams is the report of a closed campaign as the params of
// its review-report audit records, in order: the items, in their order,
// packed into parts of at most maxBytes of JSON each (an item that alone
// exceeds it gets a part of its own), every part with the header and its
// number. A campaign without items has one part with none.
func ReviewReportParams(h ReviewReportHeader, items []ReviewReportItem, maxBytes int) ([]string, error) {
	h.Items = len(items)
	var groups [][]ReviewReportItem
	size := 0
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("review report item: %w", err)
		}
		if len(groups) == 0 || size+len(b)+1 > maxBytes {
			groups = append(groups, nil)
			size = reviewReportOverhead(h)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], it)
		size += len(b) + 1
	}
	if len(groups) == 0 {
		groups = [][]ReviewReportItem{{}}
	}
	out := make([]string, 0, len(groups))
	for i, g := range groups {
		hp := h
		hp.Part, hp.Parts = i+1, len(groups)
		b, err := json.Marshal(reviewReportPart{ReviewReportHeader: hp, Entries: g})
		if err != nil {
			return nil, fmt.Errorf("review report: %w", err)
		}
		out = append(out, string(b))
	}
	return out, nil
}

// reviewReportOverhead is the size of a part with no entries, with room
// for part and parts numbers of any size.
func reviewReportOverhead(h ReviewReportHeader) int {
	h.Part, h.Parts = 1<<30, 1<<30
	b, _ := json.Marshal(reviewReportPart{ReviewReportHeader: h, Entries: []ReviewReportItem{}})
	return len(b)
}
