package mail

import (
	"context"
	"fmt"
	netmail "net/mail"
	"strings"

	"changeflow/internal/notify"
)

// audience is who hears of a kind by e-mail.
type audience int

const (
	nobody audience = iota
	// requester: the account that asked and, for kinds about the access
	// itself, the person it is for when that is someone else.
	requester
	reviewers
	operators
)

// audiences is the one table of who hears what. A request's submission,
// its approval and its withdrawal send no mail: the person did the first
// and the last themselves, and an approval is a step on the way to "in
// effect", which follows within minutes and is what they wait for; the
// page shows all three (and a webhook or chat channel may carry them).
var audiences = map[notify.Kind]audience{
	notify.KindRequestInEffect: requester,
	notify.KindRequestRejected: requester,
	notify.KindRequestFailed:   requester,
	notify.KindAccessExpiring:  requester,
	notify.KindAccessRemoved:   requester,
	notify.KindRenewalInEffect: requester,
	notify.KindReviewAssigned:  reviewers,
	notify.KindBatchBlocked:    operators,
	notify.KindForeignHead:     operators,
}

// aboutTheAccess are the kinds the holder of the access hears of too
// when someone else asked for it: it is their access that starts, ends or
// is renewed.
var aboutTheAccess = map[notify.Kind]bool{
	notify.KindRequestInEffect: true, notify.KindAccessExpiring: true,
	notify.KindAccessRemoved: true, notify.KindRenewalInEffect: true,
}

// Carries says whether e-mail has recipients for kind k at all.
func Carries(k notify.Kind) bool { return audiences[k] != nobody }

// recipients are e's addresses, each once, in the order found.
func (m *Mailer) recipients(ctx context.Context, e notify.Event) ([]string, error) {
	k := e.Kind()
	switch audiences[k] {
	case operators:
		return dedupe(m.o.Operators), nil
	case reviewers:
		return m.people(ctx, k, e.Data.Reviewers)
	case requester:
		accounts := []string{e.Data.Requester}
		if aboutTheAccess[k] && e.Data.Subject != e.Data.Requester {
			accounts = append(accounts, e.Data.Subject)
		}
		return m.people(ctx, k, accounts)
	}
	return nil, nil
}

// people are the addresses of the accounts that have one and allow k. A
// look-up or preference that fails is an error (the outbox retries): a
// person must not miss a message because the directory blinked.
func (m *Mailer) people(ctx context.Context, k notify.Kind, accounts []string) ([]string, error) {
	var out []string
	for _, acct := range accounts {
		if acct == "" || m.o.Lookup == nil {
			continue
		}
		if m.o.Allowed != nil {
			ok, err := m.o.Allowed(ctx, acct, k)
			if err != nil {
				return nil, fmt.Errorf("preferences of %s: %w", acct, err)
			}
			if !ok {
				continue
			}
		}
		addr, ok, err := m.o.Lookup(ctx, acct)
		if err != nil {
			return nil, fmt.Errorf("address of %s: %w", acct, err)
		}
		// An address that does not parse would fail every attempt; the
		// person is left out, as one without an address is.
		if !ok || strings.TrimSpace(addr) == "" {
			continue
		}
		if _, err := netmail.ParseAddress(addr); err != nil {
			continue
		}
		out = append(out, addr)
	}
	return dedupe(out), nil
}

func dedupe(addrs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range addrs {
		if k := strings.ToLower(strings.TrimSpace(a)); k != "" && !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}
