package deliver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// run delivers one item: wait out its delay, then attempt targets in turn
// until one answers 2xx or the Deliverer closes.
func (d *Deliverer) run(it *item) {
	if it.delay > 0 {
		t := time.NewTimer(it.delay)
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
			d.finish(it, it.entry, StateAbandoned, ErrClosed)
			return
		}
	}
	d.mu.Lock()
	start := d.rr
	d.rr = (d.rr + 1) % len(d.targets)
	d.mu.Unlock()

	backoff := d.opts.BackoffMin
	failedInRow := 0
	for n := 0; ; n++ {
		if d.ctx.Err() != nil {
			d.finish(it, it.entry, StateAbandoned, ErrClosed)
			return
		}
		target := d.targets[(start+n)%len(d.targets)]
		status, err := d.attempt(target, it)
		it.entry.addAttempt(Attempt{Target: target, Status: status, Error: errString(err), At: time.Now().UTC()})
		if err == nil && status >= 200 && status < 300 {
			d.finish(it, it.entry, StateDelivered, nil)
			return
		}
		d.logger.Debug("delivery attempt failed", "id", it.id, "path", it.path, "target", target, "status", status, "err", err)
		// Failover: the next attempt goes to the next target at once;
		// only when every target failed in a row do we back off, so a
		// dead instance costs one connection error, not a backoff.
		failedInRow++
		if failedInRow < len(d.targets) {
			continue
		}
		failedInRow = 0
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-d.ctx.Done():
			t.Stop()
			d.finish(it, it.entry, StateAbandoned, ErrClosed)
			return
		}
		backoff = min(backoff*2, d.opts.BackoffMax)
	}
}

// attempt sends one POST and returns the status (0 when no response).
func (d *Deliverer) attempt(target string, it *item) (int, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.opts.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+it.path, bytes.NewReader(it.body))
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	req.Header = it.header.Clone()
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Drain (bounded) so the connection can be reused; the body itself is
	// not the deliverer's business.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
