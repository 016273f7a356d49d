package domain

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestReviewRemovalOf(t *testing.T) {
	tests := []struct {
		name             string
		decision         ReviewDecision
		revocation, note string
		want             string
	}{
		{"kept", ReviewKeep, "", "", ReviewRemovalNone},
		{"revoked, removal recorded", ReviewRevoke, "g~revoke", "", ReviewRemovalStarted},
		{"revoked, the access had ended", ReviewRevoke, "", "no longer in effect", ReviewRemovalEnded},
		{"revoked, not started yet", ReviewRevoke, "", "", ReviewRemovalPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReviewRemovalOf(tt.decision, tt.revocation, tt.note); got != tt.want {
				t.Fatalf("ReviewRemovalOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReviewReportParams: the report's parts hold every item once, in
// order, each part within the bound and carrying the header with its
// number; a campaign with no items is one empty part.
func TestReviewReportParams(t *testing.T) {
	h := ReviewReportHeader{Campaign: 7, TargetKey: "payments-db", OpenedAt: "2026-03-01T09:00:00Z", OpenedBy: "olga",
		DueAt: "2026-03-15T09:00:00Z", DefaultDecision: "revoke"}
	item := func(i int, comment string) ReviewReportItem {
		return ReviewReportItem{Subject: "u" + strings.Repeat("x", i%5), Source: "changeflow", GrantOperationID: "g",
			Decision: "keep", DecidedBy: "olga", DecidedAt: "2026-03-02T09:00:00Z", Comment: comment, Removal: ReviewRemovalNone}
	}
	many := func(n int, comment string) []ReviewReportItem {
		out := make([]ReviewReportItem, n)
		for i := range out {
			out[i] = item(i, comment)
		}
		return out
	}
	tests := []struct {
		name      string
		items     []ReviewReportItem
		max       int
		wantParts int
	}{
		{"no items: one empty part", nil, ReviewReportMaxBytes, 1},
		{"a few: one part", many(3, "ok"), ReviewReportMaxBytes, 1},
		{"long comments: several parts", many(200, strings.Repeat("c", 1024)), ReviewReportMaxBytes, 5},
		{"an item alone above the bound gets a part of its own", many(3, strings.Repeat("c", 600)), 500, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts, err := ReviewReportParams(h, tt.items, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != tt.wantParts {
				t.Fatalf("%d parts, want %d", len(parts), tt.wantParts)
			}
			var all []ReviewReportItem
			for i, p := range parts {
				var got reviewReportPart
				if err := json.Unmarshal([]byte(p), &got); err != nil {
					t.Fatal(err)
				}
				if got.Entries == nil {
					t.Fatalf("part %d: entries is not a list: %s", i+1, p)
				}
				if len(p) > tt.max && len(got.Entries) > 1 {
					t.Fatalf("part %d is %d bytes with %d entries, bound %d", i+1, len(p), len(got.Entries), tt.max)
				}
				want := h
				want.Items, want.Part, want.Parts = len(tt.items), i+1, len(parts)
				if got.ReviewReportHeader != want {
					t.Fatalf("part %d header %+v, want %+v", i+1, got.ReviewReportHeader, want)
				}
				all = append(all, got.Entries...)
			}
			if len(tt.items) == 0 {
				tt.items = nil
			}
			if len(all) == 0 {
				all = nil
			}
			if !reflect.DeepEqual(all, tt.items) {
				t.Fatalf("the parts hold %d items, want the %d in order", len(all), len(tt.items))
			}
		})
	}
}
