package repoaccess

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
)

// CheckStore is what Discrepancies reads of the store besides Store.
type CheckStore interface {
	Store
	DatabaseNow(ctx context.Context) (time.Time, error)
	AccessAtTarget(ctx context.Context, target string, at time.Time) ([]store.AccessInterval, error)
	BindingGet(ctx context.Context, subject, targetKey string) (store.Binding, error)
	BindingListBySubject(ctx context.Context, subject string) ([]store.Binding, error)
}

// ErrUnreadable marks a file Discrepancies could not compare: GitLab did
// not give it, or it does not parse. The cause is wrapped.
var ErrUnreadable = errors.New("the binding file could not be read")

// Checker tells where changeflow's records and the default branch
// disagree (domain.AccessDiscrepancies).
type Checker struct {
	Store    CheckStore
	History  gitlab.History
	Settings func() Settings
}

// Discrepancies compares target's binding file as it is on the default
// branch now (one file read) with changeflow's open periods of the
// target now (database clock), for the subjects whose binding is at rest
// (one binding read per subject compared). An unknown target has none;
// a file GitLab will not give, or that does not parse, is an error
// wrapping ErrUnreadable.
func (c Checker) Discrepancies(ctx context.Context, target string) ([]domain.AccessDiscrepancy, error) {
	return c.compare(ctx, target, "")
}

// SubjectDiscrepancies is Discrepancies for one person across targets:
// every configured target subject has a binding on (one read), each
// compared for subject alone (domain.SubjectOnly: one file read and at
// most one binding read per target). A binding row exists for every
// target changeflow ever handled for the subject, and a discrepancy
// needs an entry of changeflow's or a period of its, both of which have
// one, so no target is missed. A target whose file cannot be compared
// is named in unreadable and the others are still compared; err is any
// other failure. Sorted by target (domain.SortTargetDiscrepancies).
func (c Checker) SubjectDiscrepancies(ctx context.Context, subject string) (found []domain.TargetDiscrepancy, unreadable []string, err error) {
	bs, err := c.Store.BindingListBySubject(ctx, subject)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range bs {
		ds, err := c.compare(ctx, b.TargetKey, subject)
		if errors.Is(err, ErrUnreadable) {
			unreadable = append(unreadable, b.TargetKey)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, d := range ds {
			found = append(found, domain.TargetDiscrepancy{TargetKey: b.TargetKey, AccessDiscrepancy: d})
		}
	}
	domain.SortTargetDiscrepancies(found)
	return found, unreadable, nil
}

// compare is Discrepancies of target, for only that subject when only
// is not "" (domain.SubjectOnly).
func (c Checker) compare(ctx context.Context, target, only string) ([]domain.AccessDiscrepancy, error) {
	s := c.Settings()
	var file string
	for _, t := range s.Targets {
		if t.Key == target {
			file = t.File
		}
	}
	if file == "" || s.Project == "" {
		return nil, nil
	}
	onMain, err := c.onMain(ctx, s.Project, file, s.Ref)
	if err != nil {
		return nil, err
	}
	now, err := c.Store.DatabaseNow(ctx)
	if err != nil {
		return nil, err
	}
	periods, err := c.Store.AccessAtTarget(ctx, target, now)
	if err != nil {
		return nil, err
	}
	var open []domain.OpenAccess
	for _, p := range periods {
		if p.Source == store.AccessSourceChangeflow {
			open = append(open, domain.OpenAccess{Subject: p.Subject, OperationID: p.OperationID})
		}
	}
	if only != "" {
		onMain, open = domain.SubjectOnly(only, onMain, open)
	}
	r := Reader{opts: Options{Store: c.Store}}
	owned, err := r.ownership(ctx, target, [][]domain.RepoEntry{onMain})
	if err != nil {
		return nil, err
	}
	rest, err := c.atRest(ctx, target, onMain, owned, open)
	if err != nil {
		return nil, err
	}
	return domain.AccessDiscrepancies(onMain, owned, open, func(subject string) bool { return rest[subject] }), nil
}

// onMain reads the file's entries at ref (none when it does not exist).
func (c Checker) onMain(ctx context.Context, project, file, ref string) ([]domain.RepoEntry, error) {
	f, err := c.History.GetFile(ctx, project, file, ref)
	var ge *gitlab.Error
	if errors.As(err, &ge) && ge.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	parsed, err := bindingfile.Parse(f.Content)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	out := make([]domain.RepoEntry, 0, len(parsed.Entries))
	for _, e := range parsed.Entries {
		out = append(out, domain.RepoEntry{Subject: e.Subject, OperationID: e.OperationID})
	}
	return out, nil
}

// atRest reads, for every subject of changeflow's entries on main and
// of open, whether its binding on target is at rest
// (domain.BindingAtRest; never applied for: at rest). Hand entries are
// never compared, so their subjects are not read.
func (c Checker) atRest(ctx context.Context, target string, onMain []domain.RepoEntry, owned func(domain.RepoEntry) bool, open []domain.OpenAccess) (map[string]bool, error) {
	rest := map[string]bool{}
	look := func(subject string) error {
		if _, done := rest[subject]; done {
			return nil
		}
		b, err := c.Store.BindingGet(ctx, subject, target)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			rest[subject] = true
		case err != nil:
			return err
		default:
			rest[subject] = domain.BindingAtRest(b.Status)
		}
		return nil
	}
	for _, e := range onMain {
		if !owned(e) {
			continue
		}
		if err := look(e.Subject); err != nil {
			return nil, err
		}
	}
	for _, p := range open {
		if err := look(p.Subject); err != nil {
			return nil, err
		}
	}
	return rest, nil
}
