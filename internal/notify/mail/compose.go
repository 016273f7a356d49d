package mail

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	gomail "github.com/wneessen/go-mail"

	"changeflow/internal/notify"
)

// The headers that carry the event, so a redelivery (same id) is
// recognisable by a person's filter as well as by the Message-ID.
const (
	HeaderEventID   = "X-Changeflow-Event-Id"
	HeaderEventType = "X-Changeflow-Event-Type"
)

// view is one message in words, rendered as plain text and as HTML from
// the same fields. Every field is text: html/template escapes it in the
// HTML part, and nothing in it is a secret, a token or an internal code
// (an event's data carries none; the operationId is the reference a
// person quotes to support).
type view struct {
	Subject string
	Heading string
	Summary string
	Details []detail
	// CommentLabel introduces Comment, someone's own words (untrusted).
	CommentLabel string
	Comment      string
	WhatToDo     string
	// Action is the one thing to do (renew), Link the page to open.
	Action, Link *link
	Footer       string
}

type detail struct{ Label, Value string }

type link struct{ Label, URL string }

// viewOf puts event e in words.
func viewOf(e notify.Event) view {
	d := e.Data
	target := orDefault(d.TargetKey, "the target")
	v := view{Summary: oneLine(d.Summary), WhatToDo: oneLine(d.WhatToDo),
		Footer: "changeflow sent this message automatically; replies are not read."}
	if d.Link != "" {
		v.Link = &link{Label: "Open the request", URL: d.Link}
	}
	switch d.Kind {
	case notify.KindRequestInEffect:
		v.Subject = "Your access to " + target + " is in effect"
	case notify.KindRenewalInEffect:
		v.Subject = "Your access to " + target + " is renewed"
	case notify.KindRequestRejected:
		v.Subject = "Your request for " + target + " was rejected"
		v.CommentLabel = "The approver wrote"
	case notify.KindRequestFailed:
		v.Subject = "Your request for " + target + " did not go through"
	case notify.KindAccessExpiring:
		v.Subject = "Your access to " + target + " ends soon"
		if d.RenewLink != "" {
			v.Action = &link{Label: "Renew it in one click (after signing in)", URL: d.RenewLink}
		}
	case notify.KindAccessRemoved:
		v.Subject = "Your access to " + target + " was removed"
	case notify.KindReviewAssigned:
		v.Subject = "An access review waits for your decision"
		v.CommentLabel = "Note"
		if d.Link != "" {
			v.Link.Label = "Open the review"
		}
	case notify.KindBatchBlocked:
		v.Subject = "Blocked: a batch of changes to " + orDefault(d.Project, "a repository")
		if d.Link != "" {
			v.Link.Label = "Open the batch in the console"
		}
	case notify.KindForeignHead:
		v.Subject = "Security: a commit changeflow did not write, on " + orDefault(d.Project, "a repository")
		if d.Link != "" {
			v.Link.Label = "Open it in the console"
		}
	default:
		v.Subject = orDefault(v.Summary, "A notification from changeflow")
	}
	v.Heading = v.Subject
	v.Details = details(d)
	if v.CommentLabel == "" && d.Comment != "" {
		v.CommentLabel = "Comment"
	}
	v.Comment = clean(d.Comment)
	return v
}

// details are the facts a person looks for, those the event has.
func details(d notify.Data) []detail {
	var out []detail
	add := func(label, value string) {
		if value != "" {
			out = append(out, detail{label, oneLine(value)})
		}
	}
	add("Target", d.TargetKey)
	if d.Subject != "" && d.Subject != d.Requester {
		add("For", d.Subject)
	}
	add("Asked by", d.Requester)
	if d.Until != nil {
		add("Until", d.Until.UTC().Format("Monday 2 January 2006, 15:04 UTC"))
	}
	add("Reminder", d.Threshold)
	add("Repository", d.Project)
	if d.MRIID > 0 {
		add("Merge request", fmt.Sprintf("!%d", d.MRIID))
	}
	if d.BatchID > 0 {
		add("Batch", fmt.Sprintf("%d", d.BatchID))
	}
	add("Request", d.OperationID)
	return out
}

// compose builds the go-mail message of e to the addresses to.
func (m *Mailer) compose(e notify.Event, to []string) (*gomail.Msg, error) {
	v := viewOf(e)
	text, html, err := render(v)
	if err != nil {
		return nil, err
	}
	msg := gomail.NewMsg()
	msg.FromMailAddress(m.from)
	if err := msg.To(to...); err != nil {
		return nil, fmt.Errorf("recipients: %w", err)
	}
	msg.Subject(clip(v.Subject, 180))
	msg.SetMessageIDWithValue(messageID(e.ID, m.from.Address))
	msg.SetDateWithValue(time.Now())
	msg.SetGenHeader(gomail.Header(HeaderEventID), e.ID)
	msg.SetGenHeader(gomail.Header(HeaderEventType), e.Type)
	// RFC 3834: an automatic message, which vacation responders leave alone.
	msg.SetGenHeader(gomail.Header("Auto-Submitted"), "auto-generated")
	msg.SetBodyString(gomail.TypeTextPlain, text)
	msg.AddAlternativeString(gomail.TypeTextHTML, html)
	return msg, nil
}

// messageID is the Message-ID of event id: the same for every delivery
// of the event, at the sender's domain. Characters a msg-id cannot hold
// become "-".
func messageID(id, from string) string {
	domain := "changeflow.invalid"
	if _, d, ok := strings.Cut(from, "@"); ok && d != "" {
		domain = d
	}
	local := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".-_", r)) {
			return r
		}
		return '-'
	}, id)
	return "changeflow-event-" + local + "@" + domain
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return oneLine(s)
}

// oneLine is s with every run of white space (newlines included) one
// space, and control characters dropped.
func oneLine(s string) string { return strings.Join(strings.Fields(clean(s)), " ") }

// clean drops control characters but line breaks and tabs: a comment
// keeps its paragraphs, loses terminal escapes.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, strings.ReplaceAll(s, "\r\n", "\n"))
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
