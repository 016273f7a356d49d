package httpapi

import (
	"log/slog"
	"sync"
	"time"

	"changeflow/internal/config"
)

// previousWarnEvery is how often, at most, one callback kind's use of its
// previous token is logged. Every use is counted in
// changeflow_callback_token_previous_total; the log is there so an
// operator reading it learns which sender still has the old value, and a
// line per callback would bury everything else during a long rotation
// (a busy deployment pipeline sends hundreds a day). The cost: a sender
// that stops within the hour is seen in the metric, not in a new line.
const previousWarnEvery = time.Hour

// previousWarnings rate-limits the warning logged when a callback is
// authenticated with callbacks.tokens.<name>Previous: the first use of
// each kind is logged at once, later ones at most once per
// previousWarnEvery, carrying how many went unlogged since.
type previousWarnings struct {
	now    func() time.Time
	mu     sync.Mutex
	last   map[string]time.Time
	unseen map[string]int
}

func newPreviousWarnings(now func() time.Time) *previousWarnings {
	if now == nil {
		now = time.Now
	}
	return &previousWarnings{now: now, last: map[string]time.Time{}, unseen: map[string]int{}}
}

// used records one use of kind's previous token and logs the warning when
// it is due.
func (p *previousWarnings) used(logger *slog.Logger, kind, header string) {
	p.mu.Lock()
	now := p.now()
	last, seen := p.last[kind]
	if seen && now.Sub(last) < previousWarnEvery {
		p.unseen[kind]++
		p.mu.Unlock()
		return
	}
	uses := p.unseen[kind] + 1
	p.last[kind], p.unseen[kind] = now, 0
	p.mu.Unlock()
	logger.Warn("callback accepted with the previous token: its sender still has the old value",
		"callback", kind, "header", header, "item", config.CallbackPreviousKey(kind),
		"uses", uses, "next_warning_after", previousWarnEvery.String(),
		"fix", "give the sender callbacks.tokens."+kind+"; once changeflow_callback_token_previous_total{callback=\""+kind+"\"} stops rising, remove "+config.CallbackPreviousKey(kind))
}
