// Package engine is changeflow's durable step engine: the next action of
// every in-flight operation and when it is due live in its row; engines on
// every instance claim due rows under a lease, run one registered Step
// each in a bounded pool, and record the step's Outcome together with its
// checked state transition. Steps never sleep: waiting is an outcome
// (WaitUntil, RetryAfter) the engine persists. Retries, the bound on
// claims, exhaustion and the safety net for errors and panics are the
// engine's; what a step does, and which flow it belongs to, is not: the
// flows register their steps (internal/workflow) and watch what the
// engine committed through OnCommit. docs/workflow.md describes the
// design.
//
// Its log and error messages keep the "workflow:" prefix they had when
// the engine lived in internal/workflow, so log searches and alerts that
// match them keep working.
package engine
