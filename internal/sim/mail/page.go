package mail

import (
	"html/template"
	"net/http"
	"slices"
)

// The inbox at /mail/ and one message at /mail/messages/{seq}. Every
// header and body is a sender's text, escaped by html/template; the HTML
// part is shown rendered only inside a sandboxed frame (no scripts, no
// same origin, no forms) beside its escaped source, so a hostile message
// cannot act on the simulators' pages.

const pageStyle = `<style>
body{font:15px/1.45 system-ui,sans-serif;margin:24px;color:#1d2733;max-width:1100px}
table{border-collapse:collapse;width:100%;margin-top:12px}th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #d9dee5;vertical-align:top}
th{font-weight:600;color:#5b6673}.mono{font-family:ui-monospace,monospace;font-size:13px}.muted{color:#5b6673}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;padding:10px;border-radius:6px}
iframe{width:100%;height:420px;border:1px solid #d9dee5;border-radius:6px}h2{font-size:17px;margin:18px 0 6px}
</style>`

var inboxTmpl = template.Must(template.New("inbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mail simulator</title>
<meta name="viewport" content="width=device-width, initial-scale=1">` + pageStyle + `</head><body>
<h1>Inbox</h1>
<p class="muted">Every message changeflow sent to the simulated SMTP server{{with .Addr}} (<span class="mono">{{.}}</span>){{end}}, newest first (docs/simulators.md). JSON: <a href="_control/messages">_control/messages</a>.</p>
<p><a href="./">Refresh</a></p>
{{if not .Items}}<p class="muted">No mail yet.</p>{{else}}
<table data-testid="messages"><thead><tr><th>#</th><th>Received</th><th>To</th><th>Subject</th></tr></thead><tbody>
{{range .Items}}<tr><td>{{.Seq}}</td><td class="mono">{{.ReceivedAt.Format "2006-01-02 15:04:05"}}</td>
<td>{{range $i, $a := .EnvelopeTo}}{{if $i}}, {{end}}{{$a}}{{end}}</td><td><a href="messages/{{.Seq}}">{{.Subject}}</a></td></tr>{{end}}
</tbody></table>{{end}}
</body></html>
`))

var messageTmpl = template.Must(template.New("message").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Subject}}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">` + pageStyle + `</head><body>
<p><a href="../">← Inbox</a></p>
<h1 data-testid="subject">{{.Subject}}</h1>
<table><tbody>
<tr><th>From</th><td>{{.From}}</td></tr>
<tr><th>To</th><td>{{range $i, $a := .To}}{{if $i}}, {{end}}{{$a}}{{end}}</td></tr>
<tr><th>Date</th><td>{{.Date}}</td></tr>
<tr><th>Message-ID</th><td class="mono">{{.MessageID}}</td></tr>
<tr><th>Transport</th><td>{{if .TLS}}STARTTLS{{else}}plain{{end}}{{with .AuthUser}}, AUTH as {{.}}{{end}}</td></tr>
</tbody></table>
{{if .HTML}}<h2>HTML</h2>
<iframe sandbox="" referrerpolicy="no-referrer" title="the HTML part" srcdoc="{{.HTML}}"></iframe>{{end}}
<h2>Plain text</h2>
<pre data-testid="text">{{.Text}}</pre>
{{if .HTML}}<h2>HTML source</h2><pre class="mono">{{.HTML}}</pre>{{end}}
{{with .ParseError}}<p class="muted">Could not read all of it: {{.}}</p>{{end}}
</body></html>
`))

func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request) {
	items := s.Messages()
	slices.Reverse(items)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = inboxTmpl.Execute(w, map[string]any{"Items": items, "Addr": s.Addr()})
}

func (s *Server) handleMessagePage(w http.ResponseWriter, r *http.Request) {
	m, ok := s.message(r.PathValue("seq"))
	if !ok {
		http.Error(w, "no such message", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page's own content is static; the frame's srcdoc inherits this
	// policy, so the message's HTML loads nothing either (no tracking
	// pixels, no scripts).
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'")
	_ = messageTmpl.Execute(w, m)
}
