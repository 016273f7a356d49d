package hooks

import (
	"html/template"
	"net/http"
	"slices"
)

// The page at /hooks/: the receivers and every delivery, newest first,
// with its verdict and body. html/template escapes the bodies, which are
// whatever a sender posted.
var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Notification receivers</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:24px;color:#1d2733;max-width:1100px}
table{border-collapse:collapse;width:100%;margin-top:12px}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #d9dee5;vertical-align:top}
th{font-weight:600;color:#5b6673}.mono{font-family:ui-monospace,monospace;font-size:13px}
pre{white-space:pre-wrap;word-break:break-all;margin:0;max-height:12em;overflow:auto}
.muted{color:#5b6673}.ok{color:#1f7a3a;font-weight:600}.bad{color:#a8321f;font-weight:600}
</style></head><body>
<h1>Notification receivers</h1>
<p class="muted">Webhook receivers that verify changeflow's signatures, and a chat incoming webhook (docs/simulators.md). JSON: <a href="_control/deliveries">_control/deliveries</a>.</p>
<p>Webhook receivers: {{if .Receivers}}{{range $i, $n := .Receivers}}{{if $i}}, {{end}}<span class="mono">/hooks/{{$n}}</span>{{end}}{{else}}<span class="muted">none configured</span>{{end}}; chat: <span class="mono">/hooks/chat/&lt;name&gt;</span>.</p>
<p><a href="./">Refresh</a></p>
{{if not .Items}}<p class="muted">Nothing received yet.</p>{{else}}
<table data-testid="deliveries"><thead><tr><th>#</th><th>Received</th><th>Channel</th><th>Name</th><th>Event</th><th>Answer</th><th>Body</th></tr></thead><tbody>
{{range .Items}}<tr data-id="{{.ID}}">
<td>{{.Seq}}</td><td class="mono">{{.ReceivedAt.Format "2006-01-02 15:04:05"}}</td><td>{{.Channel}}</td><td class="mono">{{.Name}}</td>
<td class="mono">{{.Type}}<br>{{.ID}}</td>
<td>{{if eq .Status 200}}<span class="ok">200{{if .Verified}} verified{{end}}</span>{{if .Duplicate}} <span class="muted">(duplicate)</span>{{end}}{{else}}<span class="bad">{{.Status}}</span> {{.Reason}}{{end}}</td>
<td>{{if .Text}}{{.Text}}{{else}}<pre class="mono">{{.Body}}</pre>{{end}}</td>
</tr>{{end}}
</tbody></table>{{end}}
</body></html>
`))

// handlePage is GET /.
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	items := s.Deliveries()
	slices.Reverse(items)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pageTmpl.Execute(w, map[string]any{"Items": items, "Receivers": s.Receivers()})
}
