// Package batch is the batch path: rounds that claim a project's
// waiting requests into one batch MR (at most one active batch per
// project, the database's slot), the batch steps that drive it on its
// first member (reusing the single-request handling steps), and the
// settlement that ends it — merged wins, else the members go back to the
// waiting set.
package batch
