package deploy

import (
	"time"
)

// run deploys queued merges one at a time, in order: each waits for its
// delay (counted from its merge) and for any pause, and the next starts
// only when this one's callback has been answered 2xx — so callbacks
// reach the service in merge order, which the reconciler's watermark
// relies on.
func (s *Server) run() {
	defer close(s.done)
	for {
		d, wait, ok := s.head()
		if !ok || wait > 0 {
			var t *time.Timer
			var timer <-chan time.Time
			if ok {
				t = time.NewTimer(wait)
				timer = t.C
			}
			select {
			case <-s.ctx.Done():
			case <-s.kick:
			case <-timer:
			}
			if t != nil {
				t.Stop()
			}
			if s.ctx.Err() != nil {
				return
			}
			continue
		}
		s.deploy(d)
		if s.ctx.Err() != nil {
			return
		}
	}
}

// head returns the next deployment and how long it must still wait;
// ok is false when nothing can run (empty queue or paused).
func (s *Server) head() (d *Deployment, wait time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 || s.faults.Paused {
		return nil, 0, false
	}
	d = s.queue[0]
	// The delay counts from the merge (a manual trigger merges "now").
	ready := d.MergedAt.Add(time.Duration(s.faults.DelayMs) * time.Millisecond)
	return d, time.Until(ready), true
}

// deploy takes the head off the queue and calls back for it.
func (s *Server) deploy(d *Deployment) {
	s.mu.Lock()
	s.queue = s.queue[1:]
	drop, dup := false, false
	switch {
	case s.faults.DropNext > 0:
		s.faults.DropNext--
		drop = true
	case s.faults.DuplicateNext > 0:
		s.faults.DuplicateNext--
		dup = true
	}
	now := time.Now().UTC()
	d.DeployedAt = &now
	d.Status = Deploying
	if drop {
		d.Status = Dropped
	}
	c := *d
	s.mu.Unlock()
	if drop {
		s.logger.Info("deployment callback dropped by fault", "id", c.ID, "mrIid", c.MRIID)
		return
	}
	rc := s.send(c)
	err := rc.Wait(s.ctx)
	if dup && err == nil {
		// The copy goes after the original is answered and before the next
		// deployment, so even duplicates keep merge order.
		err = s.send(c).Wait(s.ctx)
	}
	s.mu.Lock()
	if err == nil {
		d.Status = CalledBack
	} else {
		d.Status = Abandoned
	}
	s.mu.Unlock()
	s.logger.Info("deployment called back", "id", c.ID, "project", c.Project, "mrIid", c.MRIID, "err", err)
}
