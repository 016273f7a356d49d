package gitlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// zeroOID is what update-ref takes as the expected old value of a ref that
// must not exist yet.
const zeroOID = "0000000000000000000000000000000000000000"

// errRefMoved reports a failed update-ref compare-and-swap: somebody moved
// the branch between our read and our write.
var errRefMoved = errors.New("ref moved concurrently")

// repo is a bare Git repository driven by the git CLI. go-git cannot merge
// or rebase (databases.md), so every write goes through plumbing commands
// that need no worktree: hash-object, update-index on a private index file,
// write-tree, commit-tree, merge-tree --write-tree and update-ref with an
// expected old value.
//
// Reads a merge request's JSON makes on every poll (a branch's head, a
// merge base) are remembered, since each git command is a process: the
// process tests' serve instances poll dozens of MRs every 50 ms, and the
// git processes behind those polls were most of their CPU. A merge base
// of two commits never changes; a branch head is forgotten whenever
// updateRef or deleteRef, the only writers of refs/heads, runs.
type repo struct {
	dir string

	mu      sync.Mutex
	refsGen uint64            // bumped before and after every ref write
	heads   map[string]string // branch → head ("" = no such branch), valid for refsGen
	bases   map[[2]string]string
}

// signature is a commit author or committer.
type signature struct {
	Name  string
	Email string
	When  time.Time
}

// gitError carries git's exit code and stderr.
type gitError struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.Args, " "), e.Code, strings.TrimSpace(e.Stderr))
}

// exitCode returns git's exit code from err, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.Code
	}
	return -1
}

func initRepo(ctx context.Context, dir string) (*repo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create repo dir: %w", err)
	}
	r := &repo{dir: dir, heads: map[string]string{}, bases: map[[2]string]string{}}
	if _, err := r.git(ctx, nil, nil, "init", "--bare", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	return r, nil
}

// git runs one git command in the repository and returns its stdout.
func (r *repo) git(ctx context.Context, stdin []byte, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.dir
	cmd.Env = append([]string{
		"GIT_DIR=" + r.dir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.dir,
	}, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), &gitError{Args: args, Code: ee.ExitCode(), Stderr: errb.String()}
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return out.String(), nil
}

func sigEnv(author, committer signature) []string {
	date := func(t time.Time) string { return fmt.Sprintf("%d +0000", t.Unix()) }
	return []string{
		"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email, "GIT_AUTHOR_DATE=" + date(author.When),
		"GIT_COMMITTER_NAME=" + committer.Name, "GIT_COMMITTER_EMAIL=" + committer.Email, "GIT_COMMITTER_DATE=" + date(committer.When),
	}
}

// resolve returns the commit id of rev, or "" when it does not exist.
func (r *repo) resolve(ctx context.Context, rev string) (string, error) {
	out, err := r.git(ctx, nil, nil, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// branchHead returns the commit a branch points at, or "".
func (r *repo) branchHead(ctx context.Context, branch string) (string, error) {
	r.mu.Lock()
	head, ok := r.heads[branch]
	gen := r.refsGen
	r.mu.Unlock()
	if ok {
		return head, nil
	}
	head, err := r.resolve(ctx, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	// A ref write that overlapped the read may have made it stale.
	if r.refsGen == gen {
		r.heads[branch] = head
	}
	r.mu.Unlock()
	return head, nil
}

// writingRefs forgets every remembered branch head; updateRef and
// deleteRef call it before and after their write, so that no read
// overlapping the write is remembered.
func (r *repo) writingRefs() {
	r.mu.Lock()
	r.refsGen++
	clear(r.heads)
	r.mu.Unlock()
}

// branches lists every branch with its head.
func (r *repo) branches(ctx context.Context) (map[string]string, error) {
	out, err := r.git(ctx, nil, nil, "for-each-ref", "--format=%(objectname) %(refname:lstrip=2)", "refs/heads/")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok {
			m[name] = sha
		}
	}
	return m, nil
}

// updateRef moves a branch from old to next atomically; old "" means the
// branch must not exist. It is the compare-and-swap that makes concurrent
// writers safe even without the project mutex.
func (r *repo) updateRef(ctx context.Context, branch, next, old string) error {
	if old == "" {
		old = zeroOID
	}
	r.writingRefs()
	defer r.writingRefs()
	if _, err := r.git(ctx, nil, nil, "update-ref", "refs/heads/"+branch, next, old); err != nil {
		if exitCode(err) == 128 || exitCode(err) == 1 {
			return fmt.Errorf("update %s: %w (%v)", branch, errRefMoved, err)
		}
		return err
	}
	return nil
}

// deleteRef deletes a branch if it still points at old.
func (r *repo) deleteRef(ctx context.Context, branch, old string) error {
	r.writingRefs()
	defer r.writingRefs()
	if _, err := r.git(ctx, nil, nil, "update-ref", "-d", "refs/heads/"+branch, old); err != nil {
		return fmt.Errorf("delete %s: %w (%v)", branch, errRefMoved, err)
	}
	return nil
}
