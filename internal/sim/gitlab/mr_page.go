package gitlab

import (
	"context"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The MR page: GET /<project path>/-/merge_requests/<iid>, the web_url the
// API hands out. changeflow shows that link to people; in the local run it
// must lead somewhere that answers "what did this MR change and where does
// it stand". It is a plain HTML page, not GitLab's UI: title, state,
// description, the diff of the MR's files, its pipelines and approvals.
// Like the rest of the simulator it needs no login (the local world is on
// loopback); everything from the MR is escaped by html/template, so a
// description or a file containing markup is shown, never run.

// mrPage is what the template renders.
type mrPage struct {
	Project, Title, State, Description string
	IID                                int64
	Author, Source, Target             string
	MergedBy, ClosedBy                 string
	CreatedAt, MergedAt, ClosedAt      string
	MergeError                         string
	Files                              []changedFile
	Diff                               []diffLine
	DiffNote                           string
	Pipelines                          []mrPagePipeline
	Approvers                          []string
	Required                           int
}

type mrPagePipeline struct {
	ID     int64
	SHA    string
	Status string
	Head   bool
}

// diffLine is one line of the unified diff with its kind, for colouring.
type diffLine struct {
	Kind string // add, del, hunk, meta or ""
	Text string
}

var mrPageTemplate = template.Must(template.New("mr").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>!{{.IID}} {{.Title}} · {{.Project}} · GitLab simulator</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;padding:1rem;max-width:60rem;color:#222}
h1{font-size:1.35rem;margin:.2rem 0 .6rem}.state{display:inline-block;padding:.1rem .5rem;border-radius:.8rem;color:#fff;font-size:.85rem}
.opened{background:#1f75cb}.merged{background:#6b4fbb}.closed{background:#c91c00}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{color:#666}dd{margin:0}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word}
.diff{white-space:pre;font:13px/1.35 ui-monospace,monospace;padding:0}.diff span{display:block;padding:0 .6rem}
.add{background:#e6ffed}.del{background:#ffeef0}.hunk{background:#f1f8ff;color:#555}.meta{color:#666;font-weight:600}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2rem .6rem;text-align:left}
.note{color:#666}footer{margin-top:2rem;color:#888;font-size:.85rem}
</style></head><body>
<p class="note">{{.Project}} · merge request !{{.IID}}</p>
<h1>{{.Title}} <span class="state {{.State}}">{{.State}}</span></h1>
<dl>
<dt>Author</dt><dd>{{.Author}}</dd>
<dt>Branches</dt><dd><code>{{.Source}}</code> → <code>{{.Target}}</code></dd>
<dt>Opened</dt><dd>{{.CreatedAt}}</dd>
{{if .MergedAt}}<dt>Merged</dt><dd>{{.MergedAt}}{{if .MergedBy}} by {{.MergedBy}}{{end}}</dd>{{end}}
{{if .ClosedAt}}<dt>Closed</dt><dd>{{.ClosedAt}}{{if .ClosedBy}} by {{.ClosedBy}}{{end}}</dd>{{end}}
{{if .MergeError}}<dt>Merge error</dt><dd>{{.MergeError}}</dd>{{end}}
</dl>
<h2>Description</h2>
{{if .Description}}<pre>{{.Description}}</pre>{{else}}<p class="note">No description.</p>{{end}}
<h2>Approvals ({{len .Approvers}} of {{.Required}})</h2>
{{if .Approvers}}<ul>{{range .Approvers}}<li>{{.}}</li>{{end}}</ul>{{else}}<p class="note">Not approved yet.</p>{{end}}
<h2>Pipelines</h2>
{{if .Pipelines}}<table><tr><th>#</th><th>commit</th><th>status</th></tr>
{{range .Pipelines}}<tr><td>{{.ID}}</td><td><code>{{.SHA}}</code></td><td>{{.Status}}{{if .Head}} (head){{end}}</td></tr>
{{end}}</table>{{else}}<p class="note">No pipeline.</p>{{end}}
<h2>Changes</h2>
{{if .Files}}<ul>{{range .Files}}<li><code>{{.Path}}</code> ({{.Status}})</li>{{end}}</ul>{{end}}
{{if .Diff}}<pre class="diff">{{range .Diff}}<span class="{{.Kind}}">{{.Text}}</span>{{end}}</pre>{{end}}
{{if .DiffNote}}<p class="note">{{.DiffNote}}</p>{{end}}
<footer>changeflow's GitLab simulator — the API is under /api/v4, the control API under /_control (docs/simulators.md).</footer>
</body></html>
`))

// mrPagePath splits "/config/bindings/-/merge_requests/7" into the
// project path and the IID; ok is false for any other path.
func mrPagePath(path string) (project string, iid int64, ok bool) {
	const sep = "/-/merge_requests/"
	i := strings.Index(path, sep)
	if i <= 1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(path[i+len(sep):], "/"), 10, 64)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return strings.Trim(path[:i], "/"), n, true
}

// handleMRPage renders the MR page, or GitLab's 404 page for an unknown
// project or MR.
func (s *Server) handleMRPage(w http.ResponseWriter, r *http.Request, path string, iid int64) {
	notFound := func() {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!doctype html><title>404</title><p>404 Not Found: no such merge request in the GitLab simulator.</p>\n"))
	}
	p, err := s.project(path)
	if err != nil {
		notFound()
		return
	}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		notFound()
		return
	}
	m := p.mr(iid)
	if m == nil {
		p.mu.Unlock()
		notFound()
		return
	}
	page := s.mrPageData(r.Context(), p, m)
	p.mu.Unlock()

	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page has no script of its own; forbid any.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := mrPageTemplate.Execute(w, page); err != nil {
		s.log.Warn("render MR page", "project", path, "mr", iid, "err", err)
	}
}

// mrPageData collects the page under the project's lock. The diff is the
// MR's change as it stands: for an open or closed MR from the merge base
// with its target to its head; for a merged MR the merge commit against
// its first parent, which is what the merge put on the target (the merge
// base has moved to the head by then, so base..head would be empty).
func (s *Server) mrPageData(ctx context.Context, p *project, m *mergeRequest) mrPage {
	name := func(u *user) string {
		if u == nil {
			return ""
		}
		return u.Name + " (@" + u.Username + ")"
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	page := mrPage{
		Project: p.Path, IID: m.IID, Title: m.Title, State: m.State, Description: m.Description,
		Author: name(m.Author), Source: m.SourceBranch, Target: m.TargetBranch,
		MergedBy: name(m.MergedBy), ClosedBy: name(m.ClosedBy),
		CreatedAt: at(m.CreatedAt), MergedAt: at(m.MergedAt), ClosedAt: at(m.ClosedAt),
		MergeError: m.MergeError, Required: s.settings().ApprovalsRequired,
	}
	for _, a := range m.Approvals {
		page.Approvers = append(page.Approvers, name(a.User)+" at "+at(a.At))
	}
	head := p.headPipeline(m)
	for _, id := range m.Pipelines {
		if pl := p.pipelines[id]; pl != nil {
			page.Pipelines = append(page.Pipelines, mrPagePipeline{ID: pl.ID, SHA: short(pl.SHA), Status: pl.Status, Head: pl == head})
		}
	}

	var base, tip string
	switch {
	case m.State == stateMerged && m.MergeCommitSHA != "":
		base, tip = m.MergeCommitSHA+"^1", m.MergeCommitSHA
	case m.SHA != "":
		if target, err := p.repo.branchHead(ctx, m.TargetBranch); err == nil && target != "" {
			base, _ = p.repo.mergeBase(ctx, target, m.SHA)
		}
		tip = m.SHA
	}
	if base == "" || tip == "" {
		page.DiffNote = "The diff is not available (the source branch or its target is gone)."
		return page
	}
	page.Files, _ = p.repo.diffNames(ctx, base, tip)
	out, err := p.repo.git(ctx, nil, nil, "diff", "--no-color", "--no-renames", base, tip)
	if err != nil {
		page.DiffNote = "The diff is not available: " + err.Error()
		return page
	}
	const maxLines = 2000 // a page, not a dump: a huge batch file is cut
	for i, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if i == maxLines {
			page.DiffNote = "The diff is cut after " + strconv.Itoa(maxLines) + " lines."
			break
		}
		page.Diff = append(page.Diff, diffLine{Kind: diffKind(l), Text: l})
	}
	if len(page.Files) == 0 {
		page.Diff, page.DiffNote = nil, "No changes."
	}
	return page
}

func diffKind(l string) string {
	switch {
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "), strings.HasPrefix(l, "index "):
		return "meta"
	case strings.HasPrefix(l, "@@"):
		return "hunk"
	case strings.HasPrefix(l, "+"):
		return "add"
	case strings.HasPrefix(l, "-"):
		return "del"
	}
	return ""
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}
