package httpapi

import (
	"context"
	"fmt"
	"strings"

	"changeflow/internal/domain"
)

// AccessChecker tells where changeflow's records and a target's binding
// file on the default branch disagree (*repoaccess.Checker): for one
// target, or for one subject across the targets it has a binding on
// (unreadable names the targets whose file could not be compared).
type AccessChecker interface {
	Discrepancies(ctx context.Context, target string) ([]domain.AccessDiscrepancy, error)
	SubjectDiscrepancies(ctx context.Context, subject string) (found []domain.TargetDiscrepancy, unreadable []string, err error)
}

// accessCheck is what GET /ops/access (by target or by subject) and
// /ops/access/history add to their answer: the discrepancies between
// changeflow's records and the files on the default branch now, for a
// person to resolve. Both fields are left out when no check is wired.
type accessCheck struct {
	Discrepancies []accessDiscrepancy `json:"discrepancies,omitzero"`
	// DiscrepanciesProblem says, in words, why the file could not be
	// compared just now; Discrepancies is then empty.
	DiscrepanciesProblem string `json:"discrepanciesProblem,omitempty"`
}

// accessDiscrepancy is one disagreement.
type accessDiscrepancy struct {
	Subject string `json:"subject"`
	// TargetKey is the target whose file disagrees (the asked one by
	// target; by subject, each of the person's).
	TargetKey   string `json:"targetKey"`
	OperationID string `json:"operationId"`
	// Kind is ON_MAIN_NOT_IN_EFFECT or IN_EFFECT_NOT_ON_MAIN.
	Kind string `json:"kind"`
	// Message says in words what disagrees and what to do.
	Message string `json:"message"`
}

// accessCheckUnreadable is the problem when the file cannot be compared
// (the cause is logged).
const accessCheckUnreadable = "The binding file on the default branch could not be read or does not parse just now, so it was not compared with changeflow's records; try again in a moment."

// accessCheckOf runs the check for target. A failure is logged and
// answered as DiscrepanciesProblem: the periods themselves are still
// the answer.
func (s *Server) accessCheckOf(ctx context.Context, target string) accessCheck {
	c := s.deps.Business.AccessCheck
	if c == nil {
		return accessCheck{}
	}
	found, err := c.Discrepancies(ctx, target)
	if err != nil {
		s.deps.Logger.Warn("access history: comparing the binding file with the records failed", "target", target, "err", err)
		return accessCheck{Discrepancies: []accessDiscrepancy{}, DiscrepanciesProblem: accessCheckUnreadable}
	}
	out := accessCheck{Discrepancies: make([]accessDiscrepancy, 0, len(found))}
	for _, d := range found {
		out.Discrepancies = append(out.Discrepancies, discrepancyOf(target, d))
	}
	return out
}

// accessCheckOfSubject runs the check for subject across its targets. A
// target whose file could not be compared is named in
// DiscrepanciesProblem beside the others' discrepancies; any other
// failure is logged and answered as the problem alone.
func (s *Server) accessCheckOfSubject(ctx context.Context, subject string) accessCheck {
	c := s.deps.Business.AccessCheck
	if c == nil {
		return accessCheck{}
	}
	found, unreadable, err := c.SubjectDiscrepancies(ctx, subject)
	if err != nil {
		s.deps.Logger.Warn("access history: comparing the binding files with the records failed", "subject", subject, "err", err)
		return accessCheck{Discrepancies: []accessDiscrepancy{}, DiscrepanciesProblem: accessCheckSubjectFailed}
	}
	out := accessCheck{Discrepancies: make([]accessDiscrepancy, 0, len(found))}
	for _, d := range found {
		out.Discrepancies = append(out.Discrepancies, discrepancyOf(d.TargetKey, d.AccessDiscrepancy))
	}
	if len(unreadable) > 0 {
		s.deps.Logger.Warn("access history: some binding files could not be compared", "subject", subject, "targets", unreadable)
		out.DiscrepanciesProblem = fmt.Sprintf(accessCheckSomeUnreadable, strings.Join(unreadable, ", "))
	}
	return out
}

// The by-subject problems, in words.
const (
	accessCheckSubjectFailed  = "The binding files on the default branch could not be compared with changeflow's records just now; try again in a moment."
	accessCheckSomeUnreadable = "The binding files of %s on the default branch could not be read or do not parse just now, so they were not compared with changeflow's records (the other targets were); try again in a moment."
)

// discrepancyOf is d, on target's file, in the API's form.
func discrepancyOf(target string, d domain.AccessDiscrepancy) accessDiscrepancy {
	return accessDiscrepancy{Subject: d.Subject, TargetKey: target, OperationID: d.OperationID,
		Kind: string(d.Kind), Message: discrepancyMessage(d)}
}

// discrepancyMessage is d in words.
func discrepancyMessage(d domain.AccessDiscrepancy) string {
	if d.Kind == domain.DiscrepancyOnMainNotInEffect {
		return fmt.Sprintf("%s's entry (request %s) is on the default branch, but changeflow's records say this access ended: "+
			"it was put back by hand or its removal was reverted. Until the entry is removed, %s has access the history does not show.",
			d.Subject, d.OperationID, d.Subject)
	}
	return fmt.Sprintf("changeflow's records say %s has this access (request %s), but the default branch holds no entry of changeflow's for %s: "+
		"it was removed or replaced by hand. Check the file's history; give the access back through changeflow, or ask again.",
		d.Subject, d.OperationID, d.Subject)
}
