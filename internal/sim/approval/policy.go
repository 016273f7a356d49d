package approval

import (
	"fmt"
	"slices"
)

// Mode says who decides approvals.
type Mode string

// The decision modes.
const (
	// Manual: nothing is decided until the control API says so.
	Manual Mode = "manual"
	// Auto: every approval is decided DelayMs after submission — rejected
	// when a reject rule matches, approved otherwise.
	Auto Mode = "auto"
)

// Policy is the automatic decision policy.
type Policy struct {
	Mode    Mode `json:"mode"`
	DelayMs int  `json:"delayMs"`
	// RejectRequesters rejects forms submitted by these requesters.
	RejectRequesters []string `json:"rejectRequesters,omitempty"`
	// RejectTargets rejects forms whose fields.targetKey (or fields.target)
	// is one of these.
	RejectTargets []string `json:"rejectTargets,omitempty"`
}

// LocalPolicy is the local world's policy: approve everything after 2 s.
func LocalPolicy() Policy { return Policy{Mode: Auto, DelayMs: 2000} }

func (p *Policy) validate() error {
	switch p.Mode {
	case "":
		p.Mode = Manual
	case Manual, Auto:
	default:
		return fmt.Errorf("policy mode %q is neither %q nor %q", p.Mode, Manual, Auto)
	}
	if p.DelayMs < 0 {
		return fmt.Errorf("policy delayMs %d is negative", p.DelayMs)
	}
	return nil
}

// decide is the automatic decision for a.
func (p Policy) decide(a *Approval) Result {
	if slices.Contains(p.RejectRequesters, a.Requester) {
		return Rejected
	}
	for _, k := range []string{"targetKey", "target"} {
		if v, ok := a.Fields[k].(string); ok && slices.Contains(p.RejectTargets, v) {
			return Rejected
		}
	}
	return Approved
}
