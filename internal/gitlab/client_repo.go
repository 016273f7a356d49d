package gitlab

import (
	"context"
	"encoding/base64"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// GetBranch implements GitLab.
func (c *Client) GetBranch(ctx context.Context, project, branch string) (Branch, error) {
	var out Branch
	err := c.call(ctx, "GetBranch", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		b, resp, err := cl.Branches.GetBranch(project, branch, gl.WithContext(ctx))
		if err == nil {
			out = toBranch(b)
		}
		return resp, err
	})
	return out, err
}

// CreateBranch implements GitLab.
func (c *Client) CreateBranch(ctx context.Context, project, branch, ref string) (Branch, error) {
	var out Branch
	err := c.call(ctx, "CreateBranch", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		b, resp, err := cl.Branches.CreateBranch(project, &gl.CreateBranchOptions{Branch: gl.Ptr(branch), Ref: gl.Ptr(ref)}, gl.WithContext(ctx))
		if err == nil {
			out = toBranch(b)
		}
		return resp, err
	})
	return out, err
}

// CreateCommit implements GitLab.
func (c *Client) CreateCommit(ctx context.Context, project string, r CommitRequest) (Commit, error) {
	opt := &gl.CreateCommitOptions{Branch: gl.Ptr(r.Branch), CommitMessage: gl.Ptr(r.Message)}
	if r.StartBranch != "" {
		opt.StartBranch = gl.Ptr(r.StartBranch)
	}
	if r.StartSHA != "" {
		opt.StartSHA = gl.Ptr(r.StartSHA)
	}
	if r.Force {
		opt.Force = gl.Ptr(true)
	}
	for _, a := range r.Actions {
		act := &gl.CommitActionOptions{Action: gl.Ptr(gl.FileActionValue(a.Action)), FilePath: gl.Ptr(a.Path)}
		if a.Action != ActionDelete {
			act.Content = gl.Ptr(a.Content)
		}
		opt.Actions = append(opt.Actions, act)
	}
	var out Commit
	err := c.callPaced(ctx, "CreateCommit", Committer, project, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Commits.CreateCommit(project, opt, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

// GetCommit implements GitLab.
func (c *Client) GetCommit(ctx context.Context, project, sha string) (Commit, error) {
	var out Commit
	err := c.call(ctx, "GetCommit", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Commits.GetCommit(project, sha, nil, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

func toCommit(cm *gl.Commit) Commit {
	out := Commit{ID: cm.ID, Title: cm.Title, Message: cm.Message, ParentIDs: cm.ParentIDs,
		AuthorName: cm.AuthorName, AuthorEmail: cm.AuthorEmail}
	if cm.CommittedDate != nil {
		out.CommittedDate = cm.CommittedDate.UTC()
	}
	return out
}

// CurrentUser implements GitLab; an answer is cached per token.
func (c *Client) CurrentUser(ctx context.Context, bot Bot) (User, error) {
	s := c.out.Settings()
	key := clientKey{s.apiBase(), s.Tokens.token(bot)}
	c.mu.Lock()
	cached, ok := c.users[key]
	c.mu.Unlock()
	if ok {
		return cached, nil
	}
	var out User
	err := c.call(ctx, "CurrentUser", bot, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		u, resp, err := cl.Users.CurrentUser(gl.WithContext(ctx))
		if err == nil && u != nil {
			out = User{ID: u.ID, Username: u.Username, Email: u.Email}
		}
		return resp, err
	})
	if err == nil && out.Username != "" {
		c.mu.Lock()
		c.users[key] = out
		c.mu.Unlock()
	}
	return out, err
}

// MergeBase implements GitLab.
func (c *Client) MergeBase(ctx context.Context, project, a, b string) (Commit, error) {
	var out Commit
	err := c.call(ctx, "MergeBase", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cm, resp, err := cl.Repositories.MergeBase(project, &gl.MergeBaseOptions{Ref: &[]string{a, b}}, gl.WithContext(ctx))
		if err == nil && cm != nil {
			out = toCommit(cm)
		}
		return resp, err
	})
	return out, err
}

// Compare implements GitLab. straight=true: from..to exactly, so the
// caller chooses the base (the merge base it read) instead of GitLab
// computing another one in between.
func (c *Client) Compare(ctx context.Context, project, from, to string) (Comparison, error) {
	var out Comparison
	err := c.call(ctx, "Compare", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		cmp, resp, err := cl.Repositories.Compare(project, &gl.CompareOptions{From: gl.Ptr(from), To: gl.Ptr(to), Straight: gl.Ptr(true)}, gl.WithContext(ctx))
		if err != nil || cmp == nil {
			return resp, err
		}
		out = Comparison{Timeout: cmp.CompareTimeout}
		for _, cm := range cmp.Commits {
			if cm != nil {
				out.Commits = append(out.Commits, toCommit(cm))
			}
		}
		for _, d := range cmp.Diffs {
			if d == nil {
				continue
			}
			out.Paths = append(out.Paths, d.NewPath)
			if d.OldPath != d.NewPath && d.OldPath != "" {
				out.Paths = append(out.Paths, d.OldPath)
			}
		}
		return resp, nil
	})
	return out, err
}

// GetFile implements GitLab.
func (c *Client) GetFile(ctx context.Context, project, path, ref string) (File, error) {
	var out File
	err := c.call(ctx, "GetFile", Committer, func(ctx context.Context, cl *gl.Client) (*gl.Response, error) {
		f, resp, err := cl.RepositoryFiles.GetFile(project, path, &gl.GetFileOptions{Ref: gl.Ptr(ref)}, gl.WithContext(ctx))
		if err != nil {
			return resp, err
		}
		content := []byte(f.Content)
		if f.Encoding == "base64" {
			if content, err = base64.StdEncoding.DecodeString(f.Content); err != nil {
				// An answer arrived: the outcome is known, the body unusable.
				return resp, &gl.ErrorResponse{Response: resp.Response, Message: "decode file content: " + err.Error()}
			}
		}
		out = File{Path: f.FilePath, Content: content, BlobID: f.BlobID, CommitID: f.CommitID, LastCommitID: f.LastCommitID}
		return resp, nil
	})
	return out, err
}

func toBranch(b *gl.Branch) Branch {
	if b == nil {
		return Branch{}
	}
	out := Branch{Name: b.Name}
	if b.Commit != nil {
		out.CommitID = b.Commit.ID
	}
	return out
}
