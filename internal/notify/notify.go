// Package notify is what people hear from changeflow: the events of the
// outbox (docs/notifications.md) and the channels that carry them —
// webhooks, e-mail and chat.
//
// The outbox writes an event in the same transaction as the change it
// tells of; any instance then delivers it at least once, with an id that
// stays the same across retries, so a receiver deduplicates by id. This
// file is the contract between the outbox and the channels: the event as
// it is delivered (a CloudEvents 1.0 structured JSON document) and the
// Channel a delivery goes through.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Kind is an event's kind; its CloudEvents type is TypePrefix + kind.
type Kind string

// The kinds of event changeflow emits.
const (
	KindRequestSubmitted Kind = "request.submitted"
	KindRequestApproved  Kind = "request.approved"
	KindRequestRejected  Kind = "request.rejected"
	KindRequestInEffect  Kind = "request.in_effect"
	KindRequestFailed    Kind = "request.failed"
	KindRequestWithdrawn Kind = "request.withdrawn"
	KindAccessExpiring   Kind = "access.expiring"
	KindAccessRemoved    Kind = "access.removed"
	KindRenewalInEffect  Kind = "renewal.in_effect"
	KindBatchBlocked     Kind = "batch.blocked"
	KindReviewAssigned   Kind = "review.assigned"
	KindForeignHead      Kind = "security.foreign_head"
)

// Kinds lists every kind, in the order docs/notifications.md tells them.
var Kinds = []Kind{
	KindRequestSubmitted, KindRequestApproved, KindRequestRejected,
	KindRequestInEffect, KindRequestFailed, KindRequestWithdrawn,
	KindAccessExpiring, KindAccessRemoved, KindRenewalInEffect,
	KindBatchBlocked, KindReviewAssigned, KindForeignHead,
}

// TypePrefix prefixes a kind to make its CloudEvents type.
const TypePrefix = "dev.changeflow."

// SpecVersion is the CloudEvents version of every event.
const SpecVersion = "1.0"

// Type is k's CloudEvents type, e.g. "dev.changeflow.request.in_effect".
func (k Kind) Type() string { return TypePrefix + string(k) }

// Valid says whether k is one of Kinds.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if v == k {
			return true
		}
	}
	return false
}

// Event is one outbox event as every channel receives it: the CloudEvents
// 1.0 structured JSON document a webhook posts, field for field.
type Event struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject,omitempty"` // the operationId, when the event is about a request
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            Data      `json:"data"`
}

// Kind is the event's kind, from its type.
func (e Event) Kind() Kind {
	if len(e.Type) > len(TypePrefix) && e.Type[:len(TypePrefix)] == TypePrefix {
		return Kind(e.Type[len(TypePrefix):])
	}
	return ""
}

// JSON is the event's structured-mode body.
func (e Event) JSON() ([]byte, error) { return json.Marshal(e) }

// Data is what an event tells. Every field is in words or an identifier a
// person can look up; none carries a secret, a token or an internal code.
// Fields that do not apply to a kind are left out.
type Data struct {
	Kind Kind `json:"kind"`
	// Summary is one line in words, e.g. "Access of alice to
	// billing-dashboard is in effect until 2026-12-31 18:00 UTC."
	Summary string `json:"summary"`
	// WhatToDo is the way out of a failure or a block, in words.
	WhatToDo string `json:"whatToDo,omitempty"`

	OperationID string     `json:"operationId,omitempty"`
	Requester   string     `json:"requester,omitempty"` // the account that asked
	Subject     string     `json:"subject,omitempty"`   // who the binding is for
	TargetKey   string     `json:"targetKey,omitempty"`
	Until       *time.Time `json:"until,omitempty"`
	// Comment is the approver's or reviewer's comment (a rejection's
	// reason); untrusted text, escaped by whoever renders it.
	Comment string `json:"comment,omitempty"`
	// Threshold is an expiry reminder's threshold, e.g. "72h".
	Threshold string `json:"threshold,omitempty"`

	BatchID  int64  `json:"batchId,omitempty"`
	Project  string `json:"project,omitempty"`
	MRIID    int64  `json:"mrIid,omitempty"`
	ReviewID string `json:"reviewId,omitempty"`
	// Reviewers are the accounts a review.assigned event asks to decide.
	Reviewers []string `json:"reviewers,omitempty"`

	// Link is the page a person opens about the event (the request's page,
	// the review page, the console's batch page); RenewLink, on
	// access.expiring, renews in one click after the person signs in.
	Link      string `json:"link,omitempty"`
	RenewLink string `json:"renewLink,omitempty"`
}

// Channel carries events to one destination (a webhook endpoint, the SMTP
// server, a chat incoming webhook). Send delivers one event; the outbox
// calls it at least once per event and channel, never twice at the same
// time for the same event, and for one request in the order of its events.
//
// Send returns nil when the destination took the event. An error is
// retried with backoff up to notify.maxAttempts, then dead-lettered; an
// error that wraps ErrGone disables the destination until an operator
// turns it back on, and one that wraps ErrNotForThisChannel records the
// delivery as skipped (nobody on this channel is to hear of the event).
type Channel interface {
	// Name is the channel's configured name, unique among channels; the
	// outbox keys deliveries by it.
	Name() string
	// Wants says whether the channel carries events of kind k (its
	// configured types; empty means all).
	Wants(k Kind) bool
	Send(ctx context.Context, e Event) error
}

var (
	// ErrGone: the destination said it is gone for good (an HTTP 410).
	ErrGone = errors.New("notify: destination is gone")
	// ErrNotForThisChannel: the channel has nobody to send the event to
	// (no address for the requester, or the person turned the kind off).
	ErrNotForThisChannel = errors.New("notify: nobody on this channel is to hear of the event")
)
