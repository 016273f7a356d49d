package notify

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// Describe fills in what d says in words and where it links, for a
// request of kind op, with base the web app's public URL
// (server.publicURL; "" leaves the links out). The outbox stores the
// facts of an event; the words are made when it is delivered, so a
// message always links to where the web app is now.
func Describe(d Data, op domain.OperationKind, base string) Data {
	who, what := d.Subject, d.TargetKey
	until := ""
	if d.Until != nil {
		until = " until " + When(*d.Until)
	}
	removal := op == domain.OperationRevoke
	switch d.Kind {
	case KindRequestSubmitted:
		d.Summary = fmt.Sprintf("%s asked for access to %s%s; it waits for its approval.", who, what, until)
	case KindRequestApproved:
		d.Summary = fmt.Sprintf("The request of %s for access to %s was approved; changeflow is putting it into effect.", who, what)
	case KindRequestRejected:
		d.Summary = fmt.Sprintf("The request of %s for access to %s was rejected.", who, what)
		d.WhatToDo = "Read the approver's comment; you may ask again with more detail."
	case KindRequestInEffect:
		d.Summary = fmt.Sprintf("Access of %s to %s is in effect%s.", who, what, until)
	case KindRenewalInEffect:
		d.Summary = fmt.Sprintf("Access of %s to %s is renewed: in effect%s.", who, what, until)
	case KindRequestFailed:
		if removal {
			d.Summary = fmt.Sprintf("Removing the access of %s to %s stopped on a failure; the access is still in effect.", who, what)
			d.WhatToDo = "An operator has been told and will retry or resolve it from the console; nothing is needed from you."
		} else {
			d.Summary = fmt.Sprintf("The request of %s for access to %s stopped on a failure.", who, what)
			d.WhatToDo = "An operator can retry it from the console; or withdraw it on its page and ask again."
		}
	case KindRequestWithdrawn:
		d.Summary = fmt.Sprintf("The request of %s for access to %s was withdrawn; nothing changed.", who, what)
	case KindAccessExpiring:
		ends := ""
		if d.Until != nil {
			ends = " on " + When(*d.Until)
		}
		d.Summary = fmt.Sprintf("Access of %s to %s ends%s, in less than %s.", who, what, ends, thresholdWords(d.Threshold))
		d.WhatToDo = "Renew it if you still need it; otherwise nothing is needed: it is removed when it ends."
	case KindAccessRemoved:
		d.Summary = fmt.Sprintf("Access of %s to %s was removed.", who, what)
	case KindBatchBlocked:
		d.Summary = fmt.Sprintf("Batch %d of project %s is blocked; its requests wait.", d.BatchID, d.Project)
		d.WhatToDo = "Open the batch in the console: retry it, or take out the request that blocks it."
	case KindReviewAssigned:
		d.Summary = fmt.Sprintf("An access review of %s waits for your decisions.", what)
		d.WhatToDo = "Keep or revoke each access before the review's due date."
	case KindForeignHead:
		d.Summary = "Someone other than changeflow pushed to one of its branches; changeflow stopped and approves nothing on it."
		if d.MRIID != 0 {
			d.Summary = fmt.Sprintf("Someone other than changeflow pushed to the branch of MR !%d; changeflow stopped and approves nothing on it.", d.MRIID)
		}
		d.WhatToDo = "Open the security events in the console and find who pushed."
	}
	if base = strings.TrimRight(base, "/"); base != "" {
		d.Link, d.RenewLink = links(d, base)
	}
	return d
}

// links are the page about d and, for a reminder, its one-click renewal.
func links(d Data, base string) (link, renew string) {
	switch {
	case d.Kind == KindBatchBlocked:
		return base + "/console/batches/" + strconv.FormatInt(d.BatchID, 10), ""
	case d.Kind == KindForeignHead:
		return base + "/console/security", ""
	case d.Kind == KindReviewAssigned:
		return base + "/reviews", ""
	case d.OperationID == "":
		return "", ""
	}
	link = base + "/requests/" + url.PathEscape(d.OperationID)
	if d.Kind == KindAccessExpiring && d.TargetKey != "" {
		renew = base + "/request/" + url.PathEscape(d.TargetKey) + "?renew=" + url.QueryEscape(d.OperationID)
	}
	return link, renew
}

// When is t as a message says it: minutes, in UTC, the zone named.
func When(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// thresholdWords is a reminder's threshold in words: "72h" → "72 hours".
func thresholdWords(th string) string {
	if d, err := time.ParseDuration(th); err == nil {
		switch {
		case d%time.Hour == 0:
			return plural(int(d/time.Hour), "hour")
		case d%time.Minute == 0:
			return plural(int(d/time.Minute), "minute")
		}
	}
	return th
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
