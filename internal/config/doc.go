// Package config is changeflow's typed configuration: built-in defaults, a
// YAML file, CHANGEFLOW_* environment variables, an optional etcd key prefix
// and a program overlay are layered (later wins) into an immutable Snapshot
// that a Manager swaps atomically on every successful reload.
//
// Every item has a documented fallback chosen by the consequence of
// misconfiguration (docs/configuration.md): a rate limit that cannot be read
// stops limiting rather than blocking everyone, an unknown access mode closes
// the target, missing authorization rules deny, a broken switch keeps the old
// workflow, and counts and durations are clamped rather than going negative.
// Accessors return the value together with a Resolution that says where it
// came from and, when it fell back, why — the same text /ops/config and the
// startup log show. docs/configuration.md lists every item; its table is
// generated from the item table in items.go (see TestDocsTableIsCurrent).
package config
