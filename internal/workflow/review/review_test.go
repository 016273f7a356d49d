package review

import (
	"context"
	"errors"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flowtest"
	"changeflow/internal/workflow/lifecycle"
)

// fakeStore records what StartRemoval writes.
type fakeStore struct {
	Store
	recorded map[int64][2]string // item → {revocation, note}
	err      error
	repo     []store.RepoRemovalParams
	repoRes  store.RepoRemovalResult
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

func (f *fakeStore) RepoRemovalCreate(_ context.Context, p store.RepoRemovalParams) (store.RepoRemovalResult, error) {
	f.repo = append(f.repo, p)
	return f.repoRes, f.err
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
		name     string
		item     store.ReviewPendingRemoval
		revoke   error
		storeErr error
		started  bool
		wantErr  bool
		recorded [2]string
		noRecord bool
	}{
		{name: "started and recorded", item: item, started: true, recorded: [2]string{"g-ben~revoke", ""}},
		{name: "the access had ended: a note", item: item, revoke: lifecycle.ErrNotInEffect,
			recorded: [2]string{"", "the access was no longer in effect when the review revoked it"}},
		{name: "unknown grant: a note", item: item, revoke: domain.ErrNotFound,
			recorded: [2]string{"", "the access was no longer in effect when the review revoked it"}},
		{name: "a renewal under way: left for the next pass", item: item, revoke: &lifecycle.RenewalUnderWayError{Renewal: "r"}, noRecord: true},
		{name: "a failure: left, with the error", item: item, revoke: errors.New("gitlab down"), wantErr: true, noRecord: true},
		{name: "another instance recorded it first", item: item, storeErr: domain.ErrPreempted, noRecord: true},
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

// TestStartRemovalOfARepositoryEntry: an item without a grant is removed
// through store.RepoRemovalCreate (never the grant's revoker), with the
// campaign and the decider in the removal's reason, the target's
// batching and the config repo's project; the engine is woken only for a
// removal whose create_mr is due now.
func TestStartRemovalOfARepositoryEntry(t *testing.T) {
	cfg := flowtest.Config(t, flowtest.Targets(map[string]bool{"db": true, "solo": false}))
	repoItem := func(target string) store.ReviewPendingRemoval {
		return store.ReviewPendingRemoval{TargetKey: target, ReviewItem: store.ReviewItem{ID: 6, CampaignID: 3, Subject: "hank",
			Decision: domain.ReviewRevoke, DecidedBy: "olga", Comment: "unknown"}}
	}
	for _, c := range []struct {
		name     string
		target   string
		res      store.RepoRemovalResult
		err      error
		started  bool
		wantErr  bool
		batching bool
		woken    int
	}{
		{name: "batching target: created, joins the batch set", target: "db", res: store.RepoRemovalResult{OperationID: "review-item-6~remove", Batching: true},
			started: true, batching: true},
		{name: "single target: created and the engine woken", target: "solo", res: store.RepoRemovalResult{OperationID: "review-item-6~remove"},
			started: true, woken: 1},
		{name: "a request of the subject under way: left for a later pass", target: "db", res: store.RepoRemovalResult{Waiting: true}, batching: true},
		{name: "nothing to remove: the store recorded a note", target: "db", res: store.RepoRemovalResult{Note: "gone"}, batching: true},
		{name: "another instance started it first", target: "db", err: domain.ErrPreempted, batching: true},
		{name: "a failure: left, with the error", target: "db", err: errors.New("db down"), wantErr: true, batching: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{recorded: map[int64][2]string{}, repoRes: c.res, err: c.err}
			rv := &fakeRevoker{}
			woken := 0
			r := &Reviews{Store: st, Revoker: rv, Config: cfg, Wake: func() { woken++ }}
			started, err := r.StartRemoval(t.Context(), repoItem(c.target))
			if started != c.started || (err != nil) != c.wantErr || woken != c.woken {
				t.Fatalf("started %v err %v woken %d", started, err, woken)
			}
			if len(rv.got) != 0 {
				t.Fatalf("the grant revoker was called: %v", rv.got)
			}
			if len(st.repo) != 1 {
				t.Fatalf("repo removals %v", st.repo)
			}
			p := st.repo[0]
			if p.ItemID != 6 || p.ProjectID != 1 || p.Batching != c.batching || p.Actor != "olga" ||
				p.Text != "access review 3 of "+c.target+": revoked by olga (unknown)" || p.SingleAction == "" {
				t.Fatalf("params %+v", p)
			}
		})
	}
}
