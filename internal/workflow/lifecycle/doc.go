// Package lifecycle is the flow after "in effect": the expiry scan that
// ends access when it lapses, and giving access back or revoking it
// early (Revoker), both through one revocation per grant. A renewal is
// cut off here when its grant ends first: ending the access wins over
// extending it. The removal itself then runs the grant's own machinery
// (the single-request steps, or the project's batch rounds).
package lifecycle
