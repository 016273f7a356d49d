package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// handleListCommits: GET /projects/:id/repository/commits with
// ref_name (default: the default branch), path, since, until,
// first_parent and order (default|topo) → 200 [Commit], newest first,
// paged with GitLab's headers (paginate). As lib/api/commits.rb: a
// ref_name that does not exist is an empty list, not a 404; a since or
// until that is not an ISO 8601 time is Grape's 400; since and until
// compare the committer date ("on or after", "on or before").
//
// The list is git log over the simulator's real repository, so path
// limiting and first_parent are git's own: with first_parent, a merge
// is listed when it differs from its first parent on path — for a
// branch that takes merges, the commit at which the change reached it.
func (s *Server) handleListCommits(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, ok1 := queryTime(q.Get("since"))
	until, ok2 := queryTime(q.Get("until"))
	switch {
	case !ok1:
		writeParamError(w, "since is invalid")
		return
	case !ok2:
		writeParamError(w, "until is invalid")
		return
	case q.Get("order") != "" && q.Get("order") != "default" && q.Get("order") != "topo":
		writeParamError(w, "order does not have a valid value")
		return
	}
	p := s.lockProject(w, r)
	if p == nil {
		return
	}
	defer p.mu.Unlock()
	ref := q.Get("ref_name")
	if ref == "" {
		ref = p.DefaultBranch
	}
	ctx := r.Context()
	head, err := p.repo.resolve(ctx, ref)
	if err != nil {
		s.internal(w, err)
		return
	}
	var list []commitMeta
	if head != "" {
		opts := logOptions{path: q.Get("path"), firstParent: q.Get("first_parent") == "true", topo: q.Get("order") == "topo"}
		if list, err = p.repo.log(ctx, head, opts); err != nil {
			s.internal(w, err)
			return
		}
	}
	out := make([]any, 0, len(list))
	for _, c := range paginate(w, r, inWindow(list, since, until)) {
		out = append(out, s.commitJSON(p, c))
	}
	writeJSON(w, http.StatusOK, out)
}

// queryTime reads an optional ISO 8601 time parameter.
func queryTime(v string) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// inWindow keeps the commits committed in [since, until] (zero: open).
func inWindow(list []commitMeta, since, until time.Time) []commitMeta {
	out := list[:0:0]
	for _, c := range list {
		at := c.Committer.When
		if (!since.IsZero() && at.Before(since.Truncate(time.Second))) || (!until.IsZero() && at.After(until)) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// logOptions are git log's selection for handleListCommits.
type logOptions struct {
	path              string
	firstParent, topo bool
}

// log lists the commits reachable from head, newest first, with what the
// API shows of each: one git log, fields NUL-separated, records ended by
// an ASCII record separator (neither occurs in a commit's fields).
func (r *repo) log(ctx context.Context, head string, o logOptions) ([]commitMeta, error) {
	args := []string{"log", "--format=%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct%x00%B%x1e"}
	if o.firstParent {
		args = append(args, "--first-parent")
	}
	if o.topo {
		args = append(args, "--topo-order")
	}
	args = append(args, head, "--")
	if o.path != "" {
		args = append(args, o.path)
	}
	out, err := r.git(ctx, nil, nil, args...)
	if err != nil {
		return nil, err
	}
	var list []commitMeta
	for rec := range strings.SplitSeq(out, "\x1e") {
		rec = strings.TrimLeft(rec, "\n")
		if rec == "" {
			continue
		}
		c, err := parseCommitMeta(rec)
		if err != nil {
			return nil, err
		}
		list = append(list, c)
	}
	return list, nil
}

// parseCommitMeta reads one record of commitInfo's format.
func parseCommitMeta(rec string) (commitMeta, error) {
	f := strings.SplitN(rec, "\x00", 9)
	if len(f) != 9 {
		return commitMeta{}, fmt.Errorf("git log: unexpected record %q", rec)
	}
	unix := func(s string) time.Time {
		var n int64
		fmt.Sscan(s, &n)
		return time.Unix(n, 0).UTC()
	}
	return commitMeta{
		ID:        f[0],
		Parents:   strings.Fields(f[1]),
		Author:    signature{Name: f[2], Email: f[3], When: unix(f[4])},
		Committer: signature{Name: f[5], Email: f[6], When: unix(f[7])},
		Message:   strings.TrimRight(f[8], "\n"),
	}, nil
}
