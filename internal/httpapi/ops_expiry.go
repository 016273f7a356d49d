package httpapi

import (
	"fmt"
	"net/http"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/workflow/lifecycle"
)

// handleOpsExpiryScan is POST /ops/expiry/scan: one expiry scan now, the
// same ScanOnce the instances run every expiry.interval. It may overlap
// the scheduled scans of every instance and other manual runs: each
// revocation is created once (store.RevocationCreate), so the answer
// counts only the revocations this call created — a grant another scan
// took first is read but not counted. Like every ops write it is audited
// (opsWrite) and has no bucket of its own: the callers hold ops.write, and
// a scan costs one read per chunk however often it is asked for.
func (s *Server) handleOpsExpiryScan() http.Handler {
	return s.opsWrite(config.RouteOpsExpiryScan, nil,
		func(r *http.Request, _ identity.Identity, _ map[string]any) (string, domain.Code, any, error) {
			acts := s.deps.Business.OpsActions
			if acts == nil {
				return "", "", nil, domain.Internal("ops expiry scan: no workflow wired", nil)
			}
			res, err := acts.ExpiryScan(r.Context())
			if err != nil {
				// Chunks before the failure are committed and stay; the
				// next scan (scheduled or manual) reads the rest again.
				return "", "", nil, domain.Internal("ops expiry scan", err)
			}
			return "", domain.CodeOK, worded{message: expiryScanWords(res), data: res}, nil
		})
}

// expiryScanWords is a scan's answer in words: how many revocations it
// created, and why the rest of what it read was not; then how many
// renewals of expired grants, with a merge request of their own, it
// withdrew.
func expiryScanWords(res lifecycle.ExpiryResult) string {
	msg := expiryRevocationWords(res)
	if res.Lapsed > 0 {
		msg += fmt.Sprintf(" Withdrew %s not yet in effect when the access they renew expired; that access is revoked by a later scan once their merge requests are closed (a renewal whose merge request merged first is in effect instead).",
			count(res.Lapsed, "renewal", "renewals"))
	}
	return msg
}

// expiryRevocationWords is the revocations' part of expiryScanWords.
func expiryRevocationWords(res lifecycle.ExpiryResult) string {
	const took = "another scan or a give-back took "
	switch {
	case res.Scanned == 0:
		return "No revocation created: no granted access has expired."
	case res.Revoked == 0 && res.Scanned == 1:
		return "No revocation created: the 1 expired grant read was being revoked already (" + took + "it first)."
	case res.Revoked == 0:
		return fmt.Sprintf("No revocation created: the %d expired grants read were being revoked already (%sthem first).", res.Scanned, took)
	}
	msg := fmt.Sprintf("Created %s of the %s read.", count(res.Revoked, "revocation", "revocations"),
		count(res.Scanned, "expired grant", "expired grants"))
	switch other := res.Scanned - res.Revoked; {
	case other == 1:
		msg += " The other one was being revoked already (" + took + "it first)."
	case other > 1:
		msg += fmt.Sprintf(" The other %d were being revoked already (%sthem first).", other, took)
	}
	return msg
}

// count is n with the singular or plural word.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
