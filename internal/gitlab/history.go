package gitlab

import (
	"context"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// History reads a file's history on a branch, for the repository part of
// the access history (docs/api.md, "Access history"). It is its own port,
// not part of GitLab, because only the periodic reader of binding files
// needs it and every fake of GitLab would otherwise have to grow it.
type History interface {
	// ListFileCommits lists one page of the commits of ref's first-parent
	// line that changed path, committed at or after since (zero: the
	// whole history), newest first as GitLab lists them (GET
	// …/repository/commits?ref_name&path&since&first_parent=true). next
	// is the next page's number, 0 on the last page.
	ListFileCommits(ctx context.Context, project, ref, path string, since time.Time, page int) (commits []Commit, next int, err error)
	// GetFile reads a file at ref (a sha here); missing → 404.
	GetFile(ctx context.Context, project, path, ref string) (File, error)
}

// historyPerPage is the largest page GitLab gives.
const historyPerPage = 100

// ListFileCommits implements History. first_parent keeps the list to the
// commits of the branch itself — for a branch that takes merges, the
// merge commits, whose committed date is when the change reached it —
// and not the commits of merged branches, whose dates are their authors'.
func (c *Client) ListFileCommits(ctx context.Context, project, ref, path string, since time.Time, page int) ([]Commit, int, error) {
	opt := &gl.ListCommitsOptions{
		ListOptions: gl.ListOptions{Page: int64(max(page, 1)), PerPage: historyPerPage},
		RefName:     gl.Ptr(ref), Path: gl.Ptr(path), FirstParent: gl.Ptr(true),
	}
	if !since.IsZero() {
		opt.Since = gl.Ptr(since.UTC())
	}
	var (
		out  []Commit
		next int
	)
	err := c.call(ctx, "ListFileCommits", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cms, resp, err := cl.Commits.ListCommits(project, opt, gl.WithContext(ctx))
		if err != nil {
			return resp, err
		}
		for _, cm := range cms {
			if cm != nil {
				out = append(out, toCommit(cm))
			}
		}
		if resp != nil {
			next = int(resp.NextPage)
		}
		return resp, nil
	})
	return out, next, err
}
