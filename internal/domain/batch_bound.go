package domain

// The adaptive batch bound (docs/workflow.md, "How big a round is"): how
// many waiting requests a project's next full round takes. A batch that
// merges says the checks are passing, so rounds grow back towards the
// ceiling; a batch whose checks failed holds a change that breaks them,
// and is bisected — so the rounds after it are smaller, and a second bad
// change arriving soon costs a smaller bisection. The bound is computed
// from the project's recent batches each round, not stored: every instance
// reads the same history and gets the same bound, and a restart loses
// nothing.

// BatchRound is one finished batch as the bound sees it.
type BatchRound struct {
	// Depth is its split depth: 0 for a round claimed from the head of the
	// queue, more for a half of a bisection.
	Depth int
	// Merged: its MR merged. ChecksFailed: its check pipeline failed (it
	// is bisected). A batch that failed otherwise (a conflict, a timeout,
	// a withdrawal) says nothing about the checks and leaves the bound.
	Merged, ChecksFailed bool
}

// BatchBoundHistory is how many of a project's newest batches the bound
// is computed from: enough to halve from any ceiling to one and grow back
// part of the way, few enough to read in one page.
const BatchBoundHistory = 24

// AdaptiveBatchBound is the bound of the next full round after rounds
// (oldest first) under ceiling (batch.maxRequests, at least 1): it starts
// at the ceiling; a round of depth 0 that merged grows it by an eighth of
// the ceiling (at least one) up to the ceiling; one whose checks failed
// halves it (at least one). The halves of a bisection change nothing:
// they are sized by the bisection, and their outcome is the failed
// round's, already counted.
func AdaptiveBatchBound(rounds []BatchRound, ceiling int) int {
	ceiling = max(ceiling, 1)
	step := max(1, ceiling/8)
	bound := ceiling
	for _, r := range rounds {
		if r.Depth != 0 {
			continue
		}
		switch {
		case r.Merged:
			bound = min(ceiling, bound+step)
		case r.ChecksFailed:
			bound = max(1, bound/2)
		}
	}
	return bound
}
