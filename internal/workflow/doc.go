// Package workflow is the home of changeflow's flows on the step engine
// (internal/engine), one package each: single (a request's merge request
// in both flows), batch (rounds and batch MRs), lifecycle (expiry, give
// back, revocation), withdraw, callbacks and reconcile, on the shared
// parts in flow (Env, action names, branch names and MR texts, the
// Observer). Each flow reads and writes through a store interface of its
// own, registers its steps on an *engine.Engine and tells what its
// commits changed to one flow.Observer. This package itself holds the
// end-to-end journeys across them (its tests); docs/architecture.md is
// the map and docs/flows/ describe every flow.
package workflow
