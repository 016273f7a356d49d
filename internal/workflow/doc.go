// Package workflow holds changeflow's business flows on the step engine
// (internal/engine): the single request's merge request lifecycle in both
// flows, batch rounds, revocation, renewal, withdrawal, reconciliation and
// the callbacks. Each flow registers its steps on an *engine.Engine and
// tells what its commits changed to one Observer (Env.Observer).
// docs/workflow.md describes every flow.
package workflow
