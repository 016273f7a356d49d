package flow

import (
	"changeflow/internal/engine"
	"slices"
	"sync"
	"time"
)

// RoundTrigger carries "project P has requests waiting for a round" from
// the code that puts them there — an approval applied to a batching target
// (admission), a batch settled (its slot free again, failed members
// re-admitted) — to this process's Rounds, which runs P's round when it is
// due. One trigger is shared by every flow of a process (Env.RoundTrigger).
//
// The due time is kept in memory, on the instance that admitted: no
// database read is added to an idle instance (every instance already
// polls for due steps; a second poll per instance per second for rounds
// would double the idle statements). The cost is a crash: a round due on
// an instance killed before it ran is run by the batch.interval safety net
// of any instance (the waiting set itself is durable), so that burst waits
// up to batch.interval — as every burst did before rounds were triggered.
type RoundTrigger struct {
	clock engine.Clock

	mu  sync.Mutex
	due map[int64]time.Time
	// wake has room for one signal: Schedule never blocks, and the loop
	// recomputes its timer once however many schedules came meanwhile.
	wake chan struct{}
}

// NewRoundTrigger returns an empty trigger reading clock (nil: the wall
// clock).
func NewRoundTrigger(clock engine.Clock) *RoundTrigger {
	if clock == nil {
		clock = engine.SystemClock()
	}
	return &RoundTrigger{clock: clock, due: map[int64]time.Time{}, wake: make(chan struct{}, 1)}
}

// Schedule makes projectID's round due after from now, unless it is due
// sooner already: the first admission of a burst fixes the time, and the
// admissions that follow within batch.gatherWindow join that round instead
// of pushing it back (a steady trickle still gets a round every window).
func (t *RoundTrigger) Schedule(projectID int64, after time.Duration) {
	if t == nil || projectID <= 0 {
		return
	}
	at := t.clock.Now().Add(max(after, 0))
	t.mu.Lock()
	if cur, ok := t.due[projectID]; !ok || at.Before(cur) {
		t.due[projectID] = at
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Due reports when projectID's round is due, if one is scheduled.
func (t *RoundTrigger) Due(projectID int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.due[projectID]
	return at, ok
}

// Take removes and returns the projects whose round is due at now (in
// project order, so a test sees a stable order), and the earliest due time
// left (zero when none).
func (t *RoundTrigger) Take(now time.Time) (due []int64, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, at := range t.due {
		if !at.After(now) {
			due = append(due, p)
			delete(t.due, p)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	slices.Sort(due)
	return due, next
}

// Next is the earliest due time (zero when none).
func (t *RoundTrigger) Next() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next time.Time
	for _, at := range t.due {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// RoundAfterAdmission schedules projectID's round batch.gatherWindow from
// now (an admission). Nil-safe: an Env without a trigger leaves the round
// to batch.interval.
func (env Env) RoundAfterAdmission(projectID int64) {
	if env.RoundTrigger == nil {
		return
	}
	env.RoundTrigger.Schedule(projectID, env.Config().Batch().GatherWindow)
}

// RoundNow schedules projectID's round at once: a batch settled, so its
// slot is free and whatever waits (members re-admitted by a failure, the
// next half of a bisection, admissions that met the occupied slot) has
// waited long enough.
func (env Env) RoundNow(projectID int64) {
	env.RoundTrigger.Schedule(projectID, 0)
}

// Clock is the clock t reads.
func (t *RoundTrigger) Clock() engine.Clock { return t.clock }

// Woken receives once after a Schedule since the last receive: the loop
// that runs the rounds recomputes its timer then.
func (t *RoundTrigger) Woken() <-chan struct{} { return t.wake }
