package gitlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// treeEntry is one blob in a tree listing.
type treeEntry struct {
	Mode string
	Blob string
}

// listTree returns every file path of rev's tree.
func (r *repo) listTree(ctx context.Context, rev string) (map[string]treeEntry, error) {
	m := map[string]treeEntry{}
	if rev == "" {
		return m, nil
	}
	out, err := r.git(ctx, nil, nil, "ls-tree", "-r", "-z", rev)
	if err != nil {
		return nil, err
	}
	for _, rec := range strings.Split(out, "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) == 3 && f[1] == "blob" {
			m[p] = treeEntry{Mode: f[0], Blob: f[2]}
		}
	}
	return m, nil
}

// readFile returns the content and blob id of path at rev; ok is false when
// the file does not exist there.
func (r *repo) readFile(ctx context.Context, rev, path string) (content []byte, blob string, ok bool, err error) {
	out, err := r.git(ctx, nil, nil, "rev-parse", "--verify", "--quiet", rev+":"+path)
	if err != nil {
		if exitCode(err) == 1 || exitCode(err) == 128 {
			return nil, "", false, nil
		}
		return nil, "", false, err
	}
	blob = strings.TrimSpace(out)
	typ, err := r.git(ctx, nil, nil, "cat-file", "-t", blob)
	if err != nil || strings.TrimSpace(typ) != "blob" {
		return nil, "", false, err
	}
	data, err := r.git(ctx, nil, nil, "cat-file", "blob", blob)
	if err != nil {
		return nil, "", false, err
	}
	return []byte(data), blob, true, nil
}

// lastCommitFor returns the last commit at rev that touched path.
func (r *repo) lastCommitFor(ctx context.Context, rev, path string) (string, error) {
	out, err := r.git(ctx, nil, nil, "log", "-1", "--format=%H", rev, "--", path)
	return strings.TrimSpace(out), err
}

// fileChange is one prepared tree edit: content nil means delete.
type fileChange struct {
	Path    string
	Content []byte
	Delete  bool
	Mode    string
}

// writeCommit builds a commit on parent ("" for a root commit) with the
// given changes applied, without moving any ref. A private index file keeps
// concurrent builders apart.
func (r *repo) writeCommit(ctx context.Context, parent string, changes []fileChange, msg string, author, committer signature) (string, error) {
	idx := filepath.Join(r.dir, "sim-index-"+randomHex(8))
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if parent != "" {
		if _, err := r.git(ctx, nil, env, "read-tree", parent); err != nil {
			return "", err
		}
	} else if _, err := r.git(ctx, nil, env, "read-tree", "--empty"); err != nil {
		return "", err
	}
	var info strings.Builder
	for _, c := range changes {
		if c.Delete {
			fmt.Fprintf(&info, "0 %s\t%s\n", zeroOID, c.Path)
			continue
		}
		blob, err := r.git(ctx, c.Content, nil, "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		mode := c.Mode
		if mode == "" {
			mode = "100644"
		}
		fmt.Fprintf(&info, "%s %s\t%s\n", mode, strings.TrimSpace(blob), c.Path)
	}
	if info.Len() > 0 {
		if _, err := r.git(ctx, []byte(info.String()), env, "update-index", "--index-info"); err != nil {
			return "", err
		}
	}
	tree, err := r.git(ctx, nil, env, "write-tree")
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", strings.TrimSpace(tree), "-m", msg}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err := r.git(ctx, nil, sigEnv(author, committer), args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// mergeTree merges theirs into ours server-side. conflict is true (and
// files lists the conflicted paths) when the merge cannot be done cleanly.
func (r *repo) mergeTree(ctx context.Context, ours, theirs string) (tree string, conflict bool, files []string, err error) {
	out, err := r.git(ctx, nil, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil {
		if exitCode(err) == 1 {
			return "", true, lines[1:], nil
		}
		return "", false, nil, err
	}
	return lines[0], false, nil, nil
}

// mergeBase returns the best common ancestor of a and b.
func (r *repo) mergeBase(ctx context.Context, a, b string) (string, error) {
	key := [2]string{a, b}
	fixed := isObjectID(a) && isObjectID(b) // names of commits, not of refs
	if fixed {
		r.mu.Lock()
		base, ok := r.bases[key]
		r.mu.Unlock()
		if ok {
			return base, nil
		}
	}
	out, err := r.git(ctx, nil, nil, "merge-base", a, b)
	if err != nil {
		return "", err
	}
	base := strings.TrimSpace(out)
	if fixed {
		r.mu.Lock()
		r.bases[key] = base
		r.mu.Unlock()
	}
	return base, nil
}

// isObjectID reports whether s is a full SHA-1 object name, which names
// one commit for ever (a ref name can move).
func isObjectID(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// commitTree creates a commit object for tree with the given parents.
func (r *repo) commitTree(ctx context.Context, tree string, parents []string, msg string, author, committer signature) (string, error) {
	args := []string{"commit-tree", tree, "-m", msg}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := r.git(ctx, nil, sigEnv(author, committer), args...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// changedFile is one entry of a diff between two commits.
type changedFile struct {
	Status string // A, M, D
	Path   string
}

// diffNames lists the files that differ between base and head.
func (r *repo) diffNames(ctx context.Context, base, head string) ([]changedFile, error) {
	out, err := r.git(ctx, nil, nil, "diff", "--name-status", "--no-renames", "-z", base, head)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	var files []changedFile
	for i := 0; i+1 < len(parts); i += 2 {
		files = append(files, changedFile{Status: parts[i], Path: parts[i+1]})
	}
	return files, nil
}

// commitMeta is what the API shows of a commit.
type commitMeta struct {
	ID        string
	Parents   []string
	Author    signature
	Committer signature
	Message   string
}

func (r *repo) commitInfo(ctx context.Context, sha string) (commitMeta, error) {
	out, err := r.git(ctx, nil, nil, "show", "-s", "--format=%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B", sha)
	if err != nil {
		return commitMeta{}, err
	}
	m, err := parseCommitMeta(out)
	if err != nil {
		return commitMeta{}, fmt.Errorf("show %s: %w", sha, err)
	}
	return m, nil
}

// authorEmails returns the author emails of the commits in base..head.
func (r *repo) authorEmails(ctx context.Context, base, head string) ([]string, error) {
	out, err := r.git(ctx, nil, nil, "log", "--format=%ae", base+".."+head)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// rebase replays the commits of base..head onto onto without a worktree
// (databases.md recipe): for each commit C, a throwaway commit with onto's
// tree and parent C^ makes C^ the merge base of merge-tree, so the result
// is C's change applied on top of the new base. Authors and messages are
// kept. It moves no ref; conflict reports the first commit that did not
// apply.
func (r *repo) rebase(ctx context.Context, onto, head string, committer signature) (newHead string, conflict bool, err error) {
	base, err := r.mergeBase(ctx, onto, head)
	if err != nil {
		return "", false, err
	}
	if base == onto {
		return head, false, nil
	}
	out, err := r.git(ctx, nil, nil, "rev-list", "--reverse", "--no-merges", base+".."+head)
	if err != nil {
		return "", false, err
	}
	cur := onto
	for _, c := range strings.Fields(out) {
		meta, err := r.commitInfo(ctx, c)
		if err != nil {
			return "", false, err
		}
		parent := base
		if len(meta.Parents) > 0 {
			parent = meta.Parents[0]
		}
		tmp, err := r.git(ctx, nil, sigEnv(committer, committer), "commit-tree", cur+"^{tree}", "-p", parent, "-m", "tmp")
		if err != nil {
			return "", false, err
		}
		tree, conflicted, _, err := r.mergeTree(ctx, strings.TrimSpace(tmp), c)
		if err != nil {
			return "", false, err
		}
		if conflicted {
			return "", true, nil
		}
		cur, err = r.commitTree(ctx, tree, []string{cur}, meta.Message, meta.Author, committer)
		if err != nil {
			return "", false, err
		}
	}
	return cur, false, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
