package httpapi

import (
	"context"
	"fmt"

	"changeflow/internal/domain"
)

// AccessChecker tells where changeflow's records and a target's binding
// file on the default branch disagree (*repoaccess.Checker).
type AccessChecker interface {
	Discrepancies(ctx context.Context, target string) ([]domain.AccessDiscrepancy, error)
}

// accessCheck is what GET /ops/access and /ops/access/history by target
// add to their answer: the discrepancies between changeflow's records
// and the target's file on the default branch now, for a person to
// resolve. Both fields are left out when no check is wired (and for
// the by-subject question).
type accessCheck struct {
	Discrepancies []accessDiscrepancy `json:"discrepancies,omitzero"`
	// DiscrepanciesProblem says, in words, why the file could not be
	// compared just now; Discrepancies is then empty.
	DiscrepanciesProblem string `json:"discrepanciesProblem,omitempty"`
}

// accessDiscrepancy is one disagreement.
type accessDiscrepancy struct {
	Subject     string `json:"subject"`
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
		out.Discrepancies = append(out.Discrepancies, accessDiscrepancy{Subject: d.Subject, OperationID: d.OperationID,
			Kind: string(d.Kind), Message: discrepancyMessage(d)})
	}
	return out
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
