package mail

import (
	"bytes"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
)

// The two parts of a message, from one view. The HTML is escaped by
// html/template (a comment's "<script>" is text), its links pass
// html/template's URL filter (a javascript: link becomes "#ZgotmplZ"),
// and it uses inline styles only: mail clients drop <style> and never run
// scripts.

var textTmpl = texttemplate.Must(texttemplate.New("text").Funcs(texttemplate.FuncMap{"quote": quote}).Parse(
	`{{.Heading}}

{{.Summary}}
{{with .Details}}
{{range .}}{{.Label}}: {{.Value}}
{{end}}{{end}}{{with .Comment}}
{{$.CommentLabel}}:
{{quote .}}
{{end}}{{with .WhatToDo}}
What to do: {{.}}
{{end}}{{with .Action}}
{{.Label}}:
{{.URL}}
{{end}}{{with .Link}}
{{.Label}}:
{{.URL}}
{{end}}
-- 
{{.Footer}}
`))

var htmlTmpl = htmltemplate.Must(htmltemplate.New("html").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Subject}}</title></head>
<body style="font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:15px;line-height:1.5;color:#1d2733;margin:0;padding:24px">
<div style="max-width:600px">
<h1 style="font-size:20px;margin:0 0 12px">{{.Heading}}</h1>
<p style="margin:0 0 16px">{{.Summary}}</p>
{{with .Details}}<table style="border-collapse:collapse;margin:0 0 16px">{{range .}}
<tr><td style="padding:2px 16px 2px 0;color:#5b6673">{{.Label}}</td><td style="padding:2px 0">{{.Value}}</td></tr>{{end}}
</table>{{end}}
{{with .Comment}}<p style="margin:0 0 4px;color:#5b6673">{{$.CommentLabel}}:</p>
<blockquote style="margin:0 0 16px;padding:8px 12px;border-left:3px solid #d9dee5;white-space:pre-wrap">{{.}}</blockquote>{{end}}
{{with .WhatToDo}}<p style="margin:0 0 16px"><strong>What to do:</strong> {{.}}</p>{{end}}
{{with .Action}}<p style="margin:0 0 16px"><a href="{{.URL}}" style="display:inline-block;padding:8px 16px;background:#2b5d9b;color:#ffffff;border-radius:4px;text-decoration:none">{{.Label}}</a></p>{{end}}
{{with .Link}}<p style="margin:0 0 16px"><a href="{{.URL}}" style="color:#2b5d9b">{{.Label}}</a></p>{{end}}
<p style="margin:24px 0 0;font-size:13px;color:#5b6673">{{.Footer}}</p>
</div></body></html>
`))

func render(v view) (text, html string, err error) {
	var t, h bytes.Buffer
	if err := textTmpl.Execute(&t, v); err != nil {
		return "", "", err
	}
	if err := htmlTmpl.Execute(&h, v); err != nil {
		return "", "", err
	}
	return t.String(), h.String(), nil
}

// quote indents a comment's lines as a mail quote ("> ").
func quote(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}
