package deliver

import "time"

// Faults are the delivery faults in force. Counters count down as
// deliveries are submitted; a delivery that is dropped is not also
// duplicated.
type Faults struct {
	// DropNext drops the next N deliveries: nothing is sent, the log says
	// "dropped".
	DropNext int `json:"dropNext"`
	// DuplicateNext sends each of the next N deliveries twice, byte for byte
	// (same headers, same body, so the same delivery id).
	DuplicateNext int `json:"duplicateNext"`
	// DelayMs delays every delivery's first attempt by this much.
	DelayMs int `json:"delayMs"`
	// DelayNextMs delays the next deliveries one value each, in order; it
	// overrides DelayMs while it lasts.
	DelayNextMs []int `json:"delayNextMs"`
	// Paused holds new deliveries until Resume.
	Paused bool `json:"paused"`
	// Reorder makes Resume release the held deliveries newest first.
	Reorder bool `json:"reorder"`
}

// FaultsPatch changes the fields that are set and leaves the others.
type FaultsPatch struct {
	DropNext      *int  `json:"dropNext"`
	DuplicateNext *int  `json:"duplicateNext"`
	DelayMs       *int  `json:"delayMs"`
	DelayNextMs   []int `json:"delayNextMs"`
	Paused        *bool `json:"paused"`
	Reorder       *bool `json:"reorder"`
}

// plan is what the faults decided for one submitted delivery.
type plan struct {
	drop, duplicate bool
	delay           time.Duration
}

// take consumes the counters for one delivery. Callers hold d.mu.
func (f *Faults) take() plan {
	var p plan
	switch {
	case f.DropNext > 0:
		f.DropNext--
		p.drop = true
		return p
	case f.DuplicateNext > 0:
		f.DuplicateNext--
		p.duplicate = true
	}
	ms := f.DelayMs
	if len(f.DelayNextMs) > 0 {
		ms = f.DelayNextMs[0]
		f.DelayNextMs = f.DelayNextMs[1:]
	}
	p.delay = time.Duration(max(ms, 0)) * time.Millisecond
	return p
}

// Faults returns a copy of the faults in force.
func (d *Deliverer) Faults() Faults {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.faults
	f.DelayNextMs = append([]int(nil), f.DelayNextMs...)
	return f
}

// SetFaults applies p. Setting Paused to false resumes (see Resume).
func (d *Deliverer) SetFaults(p FaultsPatch) Faults {
	d.mu.Lock()
	if p.DropNext != nil {
		d.faults.DropNext = max(*p.DropNext, 0)
	}
	if p.DuplicateNext != nil {
		d.faults.DuplicateNext = max(*p.DuplicateNext, 0)
	}
	if p.DelayMs != nil {
		d.faults.DelayMs = max(*p.DelayMs, 0)
	}
	if p.DelayNextMs != nil {
		d.faults.DelayNextMs = append([]int(nil), p.DelayNextMs...)
	}
	if p.Reorder != nil {
		d.faults.Reorder = *p.Reorder
	}
	resume := false
	if p.Paused != nil {
		resume = d.faults.Paused && !*p.Paused
		d.faults.Paused = *p.Paused
	}
	d.mu.Unlock()
	if resume {
		d.release(d.Faults().Reorder)
	}
	return d.Faults()
}

// ResetFaults switches every fault off and releases held deliveries.
func (d *Deliverer) ResetFaults() {
	off, no := false, 0
	d.SetFaults(FaultsPatch{DropNext: &no, DuplicateNext: &no, DelayMs: &no, DelayNextMs: []int{}, Reorder: &off, Paused: &off})
}

// Pause holds every delivery submitted from now on until Resume.
func (d *Deliverer) Pause() {
	on := true
	d.SetFaults(FaultsPatch{Paused: &on})
}

// Resume stops holding deliveries and releases the held ones one after
// another — each finishes before the next starts, so the receiver sees
// exactly the release order: oldest first, or newest first when reverse
// (or the Reorder fault) is set. It returns how many were released.
func (d *Deliverer) Resume(reverse bool) int {
	d.mu.Lock()
	d.faults.Paused = false
	reverse = reverse || d.faults.Reorder
	d.mu.Unlock()
	return d.release(reverse)
}

func (d *Deliverer) release(reverse bool) int {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return 0
	}
	held := d.held
	d.held = nil
	if len(held) > 0 {
		d.wg.Add(1)
	}
	d.mu.Unlock()
	if reverse {
		for i, j := 0, len(held)-1; i < j; i, j = i+1, j-1 {
			held[i], held[j] = held[j], held[i]
		}
	}
	if len(held) == 0 {
		return 0
	}
	go func() {
		defer d.wg.Done()
		for _, it := range held {
			it.entry.setState(StatePending)
			d.run(it)
		}
	}()
	return len(held)
}

// Held returns how many deliveries are held by a pause.
func (d *Deliverer) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}
