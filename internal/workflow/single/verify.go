package single

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/notify"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// The head check: the bots approve and merge an MR only at a head
// changeflow verified, and pass that head to GitLab as sha, so a push
// after the check is refused (409) and answered by a fresh check, never
// merged (docs/security.md, "Only what changeflow wrote"). Anyone who may
// push to the config repository can put commits on a changeflow/ branch;
// without the check the two bot approvals would carry them past the
// repository's two-person review.

// verdictKind is what a head check decided.
type verdictKind int

const (
	// headVerified: every commit since the merge base is the committer
	// bot's and the change is exactly the edit changeflow computes.
	headVerified verdictKind = iota + 1
	// headRebuild: only the bot's commits, but the result is not byte for
	// byte what changeflow writes from the base (a GitLab rebase that
	// merged around a person's edit on the target, a comparison GitLab
	// cut short). Not an attack: the branch is rewritten from a fresh
	// read, no alarm.
	headRebuild
	// headForeign: a commit by someone else, or a path changeflow did not
	// write. Never approved or merged; a security event.
	headForeign
)

// Security event kinds: the bounded label set of
// changeflow_security_events_total (docs/api.md).
const (
	// SecurityForeignHead: an MR changeflow opened has a head it did not
	// write (a push onto its source branch).
	SecurityForeignHead = "foreign_head"
	// SecurityForeignBranch: a changeflow/ branch changeflow was about to
	// build on holds commits it did not make (created in advance).
	SecurityForeignBranch = "foreign_branch"
	// SecurityForeignMR: an MR on a changeflow/ branch that the committer
	// bot did not open (adopting it was refused; the stray sweep leaves
	// it open and alerts).
	SecurityForeignMR = "foreign_mr"
)

// SecurityEventKinds is the closed set of security event kinds.
var SecurityEventKinds = []string{SecurityForeignHead, SecurityForeignBranch, SecurityForeignMR}

// headVerdict is a head check's decision; Why says what was found (an
// operator reads it in the audit record and the console).
type headVerdict struct {
	Kind verdictKind
	Why  string
}

// headFacts is everything a head check decides on, read from GitLab.
type headFacts struct {
	// BotEmail is the committer bot's email (GET /user): the author of
	// every commit changeflow makes through the commits API.
	BotEmail string
	// Base is the merge base of the target and the head.
	Base string
	// Commits are the commits base..head; Paths the paths their diff
	// touches; Timeout: GitLab cut the comparison short.
	Commits []gitlab.Commit
	Paths   []string
	Timeout bool
	// Want is every path changeflow's edit writes, with the content it
	// writes from Base; Head is the content of those paths at the head
	// (absent: the path does not exist there).
	Want map[string][]byte
	Head map[string][]byte
}

// judgeHead is the head check's decision, pure. Authors are checked
// before content: a foreign commit is an attack even when its content
// happens to match. Content is checked byte for byte against what
// changeflow writes from the same base, so even a forged author (the
// commits API lets a pusher name any author email) gets nothing merged
// that changeflow would not have written itself.
func judgeHead(f headFacts) headVerdict {
	if v, ok := judgeAuthors(f); !ok {
		return v
	}
	for _, p := range f.Paths {
		if _, ok := f.Want[p]; !ok {
			return headVerdict{headForeign, fmt.Sprintf("the change touches %s, which changeflow did not write", p)}
		}
	}
	if f.Timeout {
		return headVerdict{headRebuild, "GitLab cut the comparison short"}
	}
	if len(f.Commits) == 0 {
		return headVerdict{headRebuild, "the branch has no commit of its own on " + flow.Short(f.Base)}
	}
	paths := make([]string, 0, len(f.Want))
	for p := range f.Want {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		got, ok := f.Head[p]
		if !ok || !bytes.Equal(got, f.Want[p]) {
			return headVerdict{headRebuild, fmt.Sprintf("%s is not what changeflow writes on %s", p, flow.Short(f.Base))}
		}
	}
	return headVerdict{Kind: headVerified}
}

// judgeAuthors is judgeHead's first rule alone: every commit is the
// committer bot's (ok), else the foreign verdict.
func judgeAuthors(f headFacts) (headVerdict, bool) {
	for _, c := range f.Commits {
		if f.BotEmail == "" || !strings.EqualFold(c.AuthorEmail, f.BotEmail) {
			return headVerdict{headForeign, fmt.Sprintf("commit %s is by %s <%s>, not the committer bot", flow.Short(c.ID), c.AuthorName, c.AuthorEmail)}, false
		}
	}
	return headVerdict{}, true
}

// wantFunc computes the edit changeflow writes from base: every path with
// its content. A binding file that does not parse is bindingfile.ErrInvalid.
type wantFunc func(ctx context.Context, base string) (map[string][]byte, error)

// errNoBotAccount: GET /user did not name the committer bot's email, so
// no commit can be recognised as changeflow's.
var errNoBotAccount = errors.New("the committer bot's account has no email (GET /user)")

// Committer is the committer bot's account (GET /user on its token; the
// adapter caches it per token).
func (d Steps) Committer(ctx context.Context) (gitlab.User, error) {
	u, err := d.GitLab.CurrentUser(ctx, gitlab.Committer)
	if err != nil {
		return gitlab.User{}, err
	}
	if u.Email == "" || u.Username == "" {
		return gitlab.User{}, errNoBotAccount
	}
	return u, nil
}

// checkHead reads what judgeHead needs about head against targetBranch
// and decides: GET /user (cached), merge_base, compare, then one file
// read per path of the edit at the base (inside want) and at the head —
// four calls for a single request (docs/flows/single.md, "The head check").
func (d Steps) checkHead(ctx context.Context, project, targetBranch, head string, want wantFunc) (headVerdict, error) {
	bot, err := d.Committer(ctx)
	if err != nil {
		return headVerdict{}, err
	}
	base, err := d.GitLab.MergeBase(ctx, project, targetBranch, head)
	if err != nil {
		return headVerdict{}, fmt.Errorf("merge base: %w", err)
	}
	cmp, err := d.GitLab.Compare(ctx, project, base.ID, head)
	if err != nil {
		return headVerdict{}, fmt.Errorf("compare: %w", err)
	}
	f := headFacts{BotEmail: bot.Email, Base: base.ID, Commits: cmp.Commits, Paths: cmp.Paths, Timeout: cmp.Timeout, Head: map[string][]byte{}}
	// A foreign author decides without reading any file.
	if v, ok := judgeAuthors(f); !ok {
		return v, nil
	}
	f.Want, err = want(ctx, base.ID)
	if errors.Is(err, bindingfile.ErrInvalid) {
		// Nothing can be computed from a file that does not parse: the
		// rebuild reads afresh and stops for a person if it still fails.
		return headVerdict{headRebuild, err.Error()}, nil
	}
	if err != nil {
		return headVerdict{}, err
	}
	for p := range f.Want {
		file, err := d.GitLab.GetFile(ctx, project, p, head)
		if gitlab.IsNotFound(err) {
			continue
		}
		if err != nil {
			return headVerdict{}, fmt.Errorf("read %s at the head: %w", p, err)
		}
		f.Head[p] = file.Content
	}
	return judgeHead(f), nil
}

// singleWant is a single request's edit from base: its target's binding
// file with the subject's entry added or replaced (a grant) or the
// grant's entry removed (a revocation; nothing to remove leaves the file
// as it is, which only a rebuild can finish).
func (d Steps) singleWant(project string, op store.Operation) wantFunc {
	return func(ctx context.Context, base string) (map[string][]byte, error) {
		target, ok := d.Config().Target(op.TargetKey)
		if !ok {
			return nil, flow.ErrTargetGone
		}
		file, exists, err := d.ReadBindingFile(ctx, project, target.File, base)
		if err != nil {
			return nil, err
		}
		if op.Kind == domain.OperationRevoke {
			next, removed := file.WithoutEntryOf(op.Subject, op.GrantOperationID)
			if !removed {
				if !exists {
					return map[string][]byte{}, nil
				}
				return map[string][]byte{target.File: file.Marshal()}, nil
			}
			return map[string][]byte{target.File: next.Marshal()}, nil
		}
		return map[string][]byte{target.File: file.With(bindingfile.Entry{Subject: op.Subject, ExpiresAt: op.ExpiresAt, OperationID: op.OperationID}).Marshal()}, nil
	}
}

// BranchIsOwn reports whether every commit branch has since its merge base
// with the target is the committer bot's: only such a branch is built on
// (a pre-existing changeflow/ branch with anyone else's commit is not).
func (d Steps) BranchIsOwn(ctx context.Context, project, branch string) (own bool, why string, err error) {
	bot, err := d.Committer(ctx)
	if err != nil {
		return false, "", err
	}
	base, err := d.GitLab.MergeBase(ctx, project, d.MainBranch(), branch)
	if err != nil {
		return false, "", fmt.Errorf("merge base: %w", err)
	}
	cmp, err := d.GitLab.Compare(ctx, project, base.ID, branch)
	if err != nil {
		return false, "", fmt.Errorf("compare: %w", err)
	}
	for _, c := range cmp.Commits {
		if !strings.EqualFold(c.AuthorEmail, bot.Email) {
			return false, fmt.Sprintf("commit %s on %s is by %s <%s>, not the committer bot", flow.Short(c.ID), branch, c.AuthorName, c.AuthorEmail), nil
		}
	}
	return true, "", nil
}

// SecurityEvent is one security event as recorded (audit) and listed
// (GET /ops/security-events).
type SecurityEvent struct {
	Kind string
	// Resource is the operationId, or "batch-<id>" for a batch.
	Resource string
	MRIID    int64
	Branch   string
	SHA      string
	Why      string
}

// securityAction prefixes the audit action of every security event.
const securityAction = "security."

// RecordSecurityEvent records ev once: an audit record keyed by what was found
// (the same head or MR seen again by a retry, another instance or after a
// crash is one event), then — only when this call recorded it — the
// observer and a warn log. The audit write comes first so a crash after it
// loses at most a count, never the record an operator acts on.
func (d Steps) RecordSecurityEvent(ctx context.Context, ev SecurityEvent) error {
	key := fmt.Sprintf("security:%s:%s:%d:%s:%s", ev.Kind, ev.Resource, ev.MRIID, ev.Branch, ev.SHA)
	if len(key) > 128 {
		key = key[:128]
	}
	raw, err := json.Marshal(securityParams{MRIID: ev.MRIID, Branch: ev.Branch, SHA: ev.SHA, Why: flow.Clip(ev.Why, 600)})
	if err != nil {
		return fmt.Errorf("record security event: %w", err)
	}
	params := string(raw)
	// The operators hear of it (security.foreign_head): content someone
	// else wrote on changeflow's branches, whichever form it took.
	notice := store.OutboxNew{Kind: notify.KindForeignHead, OrderKey: "security:" + ev.Resource,
		Data: store.OutboxData{Data: notify.Data{MRIID: ev.MRIID}}}
	if id, ok := strings.CutPrefix(ev.Resource, "batch-"); ok {
		notice.Data.BatchID, _ = strconv.ParseInt(id, 10, 64)
	} else {
		notice.Data.OperationID = ev.Resource
	}
	inserted, err := d.Store.AuditInsert(ctx, store.AuditInsertParams{
		Key: key, Actor: "changeflow", Action: securityAction + ev.Kind, Resource: ev.Resource, Params: params, Outcome: "REFUSED",
		Notify: &notice,
	})
	if err != nil {
		return fmt.Errorf("record security event: %w", err)
	}
	if !inserted {
		return nil
	}
	d.Log().Warn("security event: content changeflow did not write on its branch namespace",
		"kind", ev.Kind, "resource", ev.Resource, "mr", ev.MRIID, "branch", ev.Branch, "sha", ev.SHA, "why", ev.Why)
	d.ObserverOrNop().SecurityEvent(ctx, ev.Kind)
	return nil
}

// securityParams is a security event's audit params (JSON).
type securityParams struct {
	MRIID  int64  `json:"mrIid,omitempty"`
	Branch string `json:"branch,omitempty"`
	SHA    string `json:"sha,omitempty"`
	Why    string `json:"why"`
}
