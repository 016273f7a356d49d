package workflow

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/gitlab"
)

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
