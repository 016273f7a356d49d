package review

import (
	"context"
	"errors"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/lifecycle"
)

// fakeStore records what StartRemoval writes.
type fakeStore struct {
	Store
	recorded map[int64][2]string // item → {revocation, note}
	err      error
}

func (f *fakeStore) ReviewRecordRemoval(_ context.Context, item int64, revocation, note string) error {
	if f.err != nil {
		return f.err
	}
	if _, ok := f.recorded[item]; ok {
		return domain.ErrPreempted
	}
	f.recorded[item] = [2]string{revocation, note}
	return nil
}

type fakeRevoker struct {
	res  lifecycle.RevokeResult
	err  error
	got  []string // grant, text, actor of each call
	kind domain.RevokeReason
}

func (f *fakeRevoker) Revoke(_ context.Context, grant string, reason domain.RevokeReason, text, actor string) (lifecycle.RevokeResult, error) {
	f.got = append(f.got, grant, text, actor)
	f.kind = reason
	return f.res, f.err
}

func TestStartRemoval(t *testing.T) {
	item := store.ReviewPendingRemoval{TargetKey: "db", ReviewItem: store.ReviewItem{ID: 5, CampaignID: 2, Subject: "ben",
		GrantOperationID: "g-ben", Decision: domain.ReviewRevoke, DecidedBy: "olga", Comment: "left"}}
	for _, c := range []struct {
		name       string
		item       store.ReviewPendingRemoval
		revoke     error
		storeErr   error
		started    bool
		wantErr    bool
		recorded   [2]string
		noRecord   bool
		noRevoking bool
	}{
		{name: "started and recorded", item: item, started: true, recorded: [2]string{"g-ben~revoke", ""}},
		{name: "the access had ended: a note", item: item, revoke: lifecycle.ErrNotInEffect,
			recorded: [2]string{"", "the access was no longer in effect when the review revoked it"}},
		{name: "unknown grant: a note", item: item, revoke: domain.ErrNotFound,
			recorded: [2]string{"", "the access was no longer in effect when the review revoked it"}},
		{name: "a renewal under way: left for the next pass", item: item, revoke: &lifecycle.RenewalUnderWayError{Renewal: "r"}, noRecord: true},
		{name: "a failure: left, with the error", item: item, revoke: errors.New("gitlab down"), wantErr: true, noRecord: true},
		{name: "another instance recorded it first", item: item, storeErr: domain.ErrPreempted, noRecord: true},
		{name: "an entry changeflow did not write: nothing to start", item: store.ReviewPendingRemoval{ReviewItem: store.ReviewItem{ID: 6, Decision: domain.ReviewRevoke}},
			noRecord: true, noRevoking: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{recorded: map[int64][2]string{}, err: c.storeErr}
			rv := &fakeRevoker{res: lifecycle.RevokeResult{OperationID: "g-ben~revoke", Created: true}, err: c.revoke}
			r := &Reviews{Store: st, Revoker: rv}
			started, err := r.StartRemoval(t.Context(), c.item)
			if started != c.started || (err != nil) != c.wantErr {
				t.Fatalf("started %v err %v", started, err)
			}
			got, ok := st.recorded[c.item.ID]
			if ok == c.noRecord || (ok && got != c.recorded) {
				t.Fatalf("recorded %v %v", got, ok)
			}
			if c.noRevoking {
				if len(rv.got) != 0 {
					t.Fatalf("revoked %v", rv.got)
				}
				return
			}
			if rv.got[0] != "g-ben" || rv.got[1] != "access review 2 of db: revoked by olga (left)" || rv.got[2] != "olga" || rv.kind != domain.RevokeOperator {
				t.Fatalf("revoke %v %s", rv.got, rv.kind)
			}
		})
	}
}

func TestStartRemovalByDefaultNamesTheCampaign(t *testing.T) {
	st := &fakeStore{recorded: map[int64][2]string{}}
	rv := &fakeRevoker{res: lifecycle.RevokeResult{OperationID: "g~revoke", Created: true}}
	r := &Reviews{Store: st, Revoker: rv, Now: func() time.Time { return time.Time{} }}
	_, err := r.StartRemoval(t.Context(), store.ReviewPendingRemoval{TargetKey: "db", ReviewItem: store.ReviewItem{ID: 1, CampaignID: 9,
		GrantOperationID: "g", Decision: domain.ReviewRevoke, DecidedBy: domain.ReviewActor(9), ByDefault: true}})
	if err != nil || rv.got[2] != "review:9" || rv.got[1] != "access review 9 of db: not decided by its due date, revoked by the campaign's default" {
		t.Fatalf("%v %v", rv.got, err)
	}
}
