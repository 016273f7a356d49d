package single

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

func TestChooseOldMR(t *testing.T) {
	const branch = "changeflow/op-1-2"
	cases := []struct {
		name string
		old  gitlab.MR
		want oldMRChoice
	}{
		{"the row's MR is on the fresh branch already: a retrigger", gitlab.MR{SourceBranch: branch, State: gitlab.MRStateOpened}, oldMRRecorded},
		{"rebuilt MR recorded even when merged", gitlab.MR{SourceBranch: branch, State: gitlab.MRStateMerged}, oldMRRecorded},
		{"old MR merged meanwhile: merged wins", gitlab.MR{SourceBranch: "changeflow/op-1", State: gitlab.MRStateMerged}, oldMRMerged},
		{"old MR open: close it", gitlab.MR{SourceBranch: "changeflow/op-1", State: gitlab.MRStateOpened}, oldMRClose},
		{"old MR locked: close it", gitlab.MR{SourceBranch: "changeflow/op-1", State: gitlab.MRStateLocked}, oldMRClose},
		{"old MR closed already: build", gitlab.MR{SourceBranch: "changeflow/op-1", State: gitlab.MRStateClosed}, oldMRGone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := chooseOldMR(c.old, branch); got != c.want {
				t.Fatalf("chooseOldMR = %d, want %d", got, c.want)
			}
		})
	}
}

func TestChooseFoundMR(t *testing.T) {
	const bot = "committer"
	mr := func(author, state string) gitlab.MR { return gitlab.MR{AuthorUsername: author, State: state} }
	cases := []struct {
		name       string
		mr         gitlab.MR
		rebuilding bool
		want       foundMRChoice
	}{
		{"create: someone else's open MR is foreign", mr("mallory", gitlab.MRStateOpened), false, foundMRForeign},
		{"create: someone else's merged MR is foreign", mr("mallory", gitlab.MRStateMerged), false, foundMRForeign},
		{"create: the bot's open MR is adopted", mr(bot, gitlab.MRStateOpened), false, foundMRAdopt},
		{"create: the bot's merged MR is adopted", mr(bot, gitlab.MRStateMerged), false, foundMRAdopt},
		{"create: the bot's locked MR is adopted", mr(bot, gitlab.MRStateLocked), false, foundMRAdopt},
		{"create: the bot's closed MR fails", mr(bot, gitlab.MRStateClosed), false, foundMRClosed},
		{"rebuild: someone else's MR is foreign", mr("mallory", gitlab.MRStateClosed), true, foundMRForeign},
		{"rebuild: the bot's open MR is adopted", mr(bot, gitlab.MRStateOpened), true, foundMRAdopt},
		{"rebuild: the bot's closed MR is abandoned", mr(bot, gitlab.MRStateClosed), true, foundMRAbandon},
		{"rebuild: the bot's merged MR is abandoned", mr(bot, gitlab.MRStateMerged), true, foundMRAbandon},
		{"rebuild: the bot's locked MR is abandoned", mr(bot, gitlab.MRStateLocked), true, foundMRAbandon},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := chooseFoundMR(c.mr, bot, c.rebuilding); got != c.want {
				t.Fatalf("chooseFoundMR = %d, want %d", got, c.want)
			}
		})
	}
}

func TestRebuildEdit(t *testing.T) {
	exp := time.Date(2026, 12, 30, 10, 0, 0, 0, time.UTC)
	grant := store.Operation{OperationID: "op-new", Kind: domain.OperationGrant, Subject: "alice", TargetKey: "db", ExpiresAt: exp}
	removal := store.Operation{OperationID: "op-rm", Kind: domain.OperationRevoke, Subject: "alice", TargetKey: "db",
		GrantOperationID: "op-old", RevokeReason: domain.RevokeExpired}
	withAlice := func(opID string) bindingfile.File {
		return bindingfile.File{Entries: []bindingfile.Entry{
			{Subject: "alice", ExpiresAt: exp, OperationID: opID},
			{Subject: "bob", ExpiresAt: exp, OperationID: "op-bob"},
		}}
	}
	onlyBob := bindingfile.File{Entries: []bindingfile.Entry{{Subject: "bob", ExpiresAt: exp, OperationID: "op-bob"}}}
	cases := []struct {
		name    string
		op      store.Operation
		file    bindingfile.File
		ok      bool
		content bindingfile.File
		message string
	}{
		{"grant adds the subject's entry", grant, onlyBob, true, onlyBob.With(bindingfile.Entry{Subject: "alice", ExpiresAt: exp, OperationID: "op-new"}), flow.CommitMessage(grant)},
		{"grant replaces the subject's entry", grant, withAlice("op-old"), true, withAlice("op-new"), flow.CommitMessage(grant)},
		{"removal takes out its grant's entry", removal, withAlice("op-old"), true, onlyBob, flow.RemovalMessage(removal)},
		{"removal of an entry already gone: nothing to remove", removal, onlyBob, false, bindingfile.File{}, ""},
		{"removal of someone else's entry: nothing to remove", removal, withAlice("op-other"), false, bindingfile.File{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := rebuildEdit(c.op, c.file)
			if ok != c.ok {
				t.Fatalf("rebuildEdit ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if want := string(c.content.Marshal()); string(got.Content) != want {
				t.Fatalf("content:\n%s\nwant:\n%s", got.Content, want)
			}
			if got.Message != c.message || got.Title != c.message {
				t.Fatalf("message %q, title %q, want %q", got.Message, got.Title, c.message)
			}
			if !strings.Contains(got.Description, c.op.OperationID) {
				t.Fatalf("description %q has no trailer of %s", got.Description, c.op.OperationID)
			}
		})
	}
}

func TestGrantNeedsCommit(t *testing.T) {
	op := store.Operation{OperationID: "op-1", Subject: "alice"}
	file := func(opID string) bindingfile.File {
		return bindingfile.File{Entries: []bindingfile.Entry{{Subject: "alice", OperationID: opID}}}
	}
	cases := []struct {
		name string
		at   flow.Pin
		file bindingfile.File
		want bool
	}{
		{"no branch yet: commit", flow.Pin{BranchExists: false}, file("op-1"), true},
		{"branch without the subject's entry: commit", flow.Pin{BranchExists: true}, bindingfile.File{}, true},
		{"branch with another request's entry: commit", flow.Pin{BranchExists: true}, file("op-0"), true},
		{"branch holds this request's entry: a lost answer, no second commit", flow.Pin{BranchExists: true}, file("op-1"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := grantNeedsCommit(op, c.at, c.file); got != c.want {
				t.Fatalf("grantNeedsCommit = %v, want %v", got, c.want)
			}
		})
	}
}

func TestFileAction(t *testing.T) {
	if got := fileAction(true); got != gitlab.ActionUpdate {
		t.Fatalf("existing file: %s, want update", got)
	}
	if got := fileAction(false); got != gitlab.ActionCreate {
		t.Fatalf("missing file: %s, want create", got)
	}
}

func TestChangedEntries(t *testing.T) {
	exp := time.Date(2026, 12, 30, 10, 0, 0, 0, time.UTC)
	e := func(subject, opID string, at time.Time) bindingfile.Entry {
		return bindingfile.Entry{Subject: subject, ExpiresAt: at, OperationID: opID}
	}
	f := func(es ...bindingfile.Entry) bindingfile.File { return bindingfile.File{Entries: es} }
	cases := []struct {
		name          string
		before, after bindingfile.File
		want          []bindingfile.Entry
	}{
		{"identical files: nothing changed", f(e("a", "op-a", exp)), f(e("a", "op-a", exp)), nil},
		{"both empty: nothing changed", f(), f(), nil},
		{"an added entry", f(e("a", "op-a", exp)), f(e("a", "op-a", exp), e("b", "op-b", exp)), []bindingfile.Entry{e("b", "op-b", exp)}},
		{"a removed entry", f(e("a", "op-a", exp), e("b", "op-b", exp)), f(e("a", "op-a", exp)), []bindingfile.Entry{e("b", "op-b", exp)}},
		{"a replaced entry: the old and the new", f(e("a", "op-a", exp)), f(e("a", "op-a2", exp)), []bindingfile.Entry{e("a", "op-a", exp), e("a", "op-a2", exp)}},
		{"a new expiry is a replacement", f(e("a", "op-a", exp)), f(e("a", "op-a", exp.Add(time.Hour))), []bindingfile.Entry{e("a", "op-a", exp), e("a", "op-a", exp.Add(time.Hour))}},
		{"the same instant in another zone is the same entry", f(e("a", "op-a", exp)), f(e("a", "op-a", exp.In(time.FixedZone("x", 3600)))), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := changedEntries(c.before, c.after)
			if len(got) != len(c.want) {
				t.Fatalf("changedEntries = %v, want %v", got, c.want)
			}
			for i := range got {
				if !sameEntry(got[i], c.want[i]) {
					t.Fatalf("changedEntries[%d] = %v, want %v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestChooseMergeAnswer(t *testing.T) {
	status := func(s int) error { return &gitlab.Error{Op: "Merge", Status: s} }
	cases := []struct {
		name string
		got  gitlab.MR
		err  error
		want mergeAnswer
	}{
		{"merged", gitlab.MR{State: gitlab.MRStateMerged}, nil, mergeMerged},
		{"answered open: read again", gitlab.MR{State: gitlab.MRStateOpened}, nil, mergeOtherState},
		{"409: the head moved", gitlab.MR{}, status(http.StatusConflict), mergeHeadMoved},
		{"502: transient", gitlab.MR{}, status(http.StatusBadGateway), mergeTransient},
		{"no answer, maybe applied: transient", gitlab.MR{}, &gitlab.Error{Op: "Merge", Unknown: true}, mergeTransient},
		{"breaker open: transient", gitlab.MR{}, &gitlab.Error{Op: "Merge", BreakerOpen: true}, mergeTransient},
		{"403: fails", gitlab.MR{}, status(http.StatusForbidden), mergeFailed},
		{"an error without a status: fails", gitlab.MR{}, errors.New("boom"), mergeFailed},
		{"405: refused, rebase", gitlab.MR{}, status(http.StatusMethodNotAllowed), mergeRefused},
		{"406: refused, rebase", gitlab.MR{}, status(http.StatusNotAcceptable), mergeRefused},
		{"422: refused, rebase", gitlab.MR{}, status(http.StatusUnprocessableEntity), mergeRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := chooseMergeAnswer(c.got, c.err); got != c.want {
				t.Fatalf("chooseMergeAnswer = %d, want %d", got, c.want)
			}
		})
	}
}
