package engine

import (
	"time"
)

// PollTier is a polling schedule: ShortAttempts polls ShortInterval
// apart, then LongInterval apart, until the scheduled intervals add up to
// Timeout (zero: no timeout). It has the fields of PollTier, so
// a flow converts the configured tier (PollTier(cfg.Polling(name)))
// and the engine needs no configuration package.
type PollTier struct {
	ShortInterval time.Duration
	ShortAttempts int
	LongInterval  time.Duration
	Timeout       time.Duration
}

// NextPoll returns how long to wait before poll number attempt+1, after
// poll number attempt (1-based) found the remote state unsettled, and
// whether the poll timed out instead: the first ShortAttempts
// polls are followed by ShortInterval, later ones by LongInterval, and
// once the intervals scheduled so far add up to Timeout the poll is over.
//
// The budget counts scheduled intervals, not wall time, so it needs no
// stored start time and survives crashes: real elapsed time is at least
// the scheduled sum (each poll waits its interval, plus the step's own run
// time and any queueing), so a timeout is never early — it can be late by
// those. An expired lease also counts as an attempt, which only brings the
// timeout forward by that interval.
func NextPoll(tier PollTier, attempt int) (wait time.Duration, timedOut bool) {
	waited := scheduled(tier, attempt-1)
	if tier.Timeout > 0 && waited >= tier.Timeout {
		return 0, true
	}
	if attempt <= tier.ShortAttempts {
		return tier.ShortInterval, false
	}
	return tier.LongInterval, false
}

// Waited is how long a poll on its attempt-th run has waited by the
// schedule: the intervals scheduled after polls 1..attempt-1 (the same
// crash-proof count NextPoll's timeout uses).
func Waited(tier PollTier, attempt int) time.Duration { return scheduled(tier, attempt-1) }

// scheduled is the sum of the intervals scheduled after polls 1..n.
func scheduled(tier PollTier, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	short := min(n, tier.ShortAttempts)
	return time.Duration(short)*tier.ShortInterval + time.Duration(n-short)*tier.LongInterval
}

// PollAgain is a polling step's outcome when the remote state is still
// unsettled: WaitUntil the next tier time (writing t, e.g. the running
// step, zero to write nothing), or TimedOut into pending once the tier's
// budget is spent. The step is rescheduled, never slept.
func PollAgain(tier PollTier, w Work, t Transition, pending Failure, reason string) Outcome {
	wait, timedOut := NextPoll(tier, w.Attempt)
	if timedOut {
		return TimedOut(pending.Step, pending.Binding, reason)
	}
	return WaitUntil(w.Now.Add(wait), t)
}
