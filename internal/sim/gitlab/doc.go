// Package gitlab is the GitLab simulator: a subset of GitLab's REST API v4
// (branches, multi-file commits, files, merge requests, approvals, merge,
// rebase, MR pipelines, webhooks) backed by real bare Git repositories and
// driven by the git CLI, with a control API under /_control/ that injects
// the faults the changeflow workflow must survive. Status codes and error
// bodies follow GitLab's own source and API documentation; docs/simulators.md lists
// the endpoints, the control API and every deviation from real GitLab.
package gitlab
