package store

// IdempotencyBeginHooks returns p with beforeInsert run just before the
// INSERT and beforeReread just before the re-read of the winner (either
// may be nil), for tests that interleave a concurrent request.
func IdempotencyBeginHooks(p IdempotencyBeginParams, beforeInsert, beforeReread func()) IdempotencyBeginParams {
	p.beforeInsert, p.beforeReread = beforeInsert, beforeReread
	return p
}

// IdempotencyTakeOverHook returns p with beforeTakeOver run just before
// the guarded takeover of a record whose lease has ended.
func IdempotencyTakeOverHook(p IdempotencyBeginParams, beforeTakeOver func()) IdempotencyBeginParams {
	p.beforeTakeOver = beforeTakeOver
	return p
}
