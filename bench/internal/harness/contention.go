package harness

import (
	"sync"
	"sync/atomic"
	"time"
)

// A Contention tallies the goroutines of one process that contend for
// one lock until a stop, as sqlbench's and etcdbench's scenario c do:
// their acquisitions before the stop, the owner changes among those, the
// holders that entered while another was inside (a guard in memory), and
// the time held. lockbench's scenarios, whose holders may be other
// processes, use a Guard.
type Contention struct {
	stop   time.Time
	counts []int64 // per goroutine

	inside, viol, changes, held, heldFor atomic.Int64

	mu   sync.Mutex
	last int // the goroutine that acquired last before the stop, or -1
}

// NewContention returns a Contention of goroutines goroutines (numbered
// from 0) until stop.
func NewContention(goroutines int, stop time.Time) *Contention {
	return &Contention{stop: stop, counts: make([]int64, goroutines), last: -1}
}

// Enter records that goroutine g has acquired the lock, right after it
// has, and returns the time, for Exit.
func (c *Contention) Enter(g int) time.Time {
	if !c.inside.CompareAndSwap(0, 1) {
		c.viol.Add(1)
		c.inside.Add(1)
	}
	t := time.Now()
	if t.Before(c.stop) {
		c.counts[g]++
		c.mu.Lock()
		if c.last != g {
			c.changes.Add(1)
			c.last = g
		}
		c.mu.Unlock()
	}
	return t
}

// Exit records that a holder that entered at entered is about to
// release the lock.
func (c *Contention) Exit(entered time.Time) {
	c.heldFor.Add(int64(time.Since(entered)))
	c.held.Add(1)
	c.inside.Add(-1)
}

// ContentionResult is what a Contention tallied over a run of d.
type ContentionResult struct {
	AcqPerS     float64 // acquisitions per second before the stop
	ChangesPerS float64 // owner changes per second (an acquisition by another goroutine than the previous holder)
	Jain        float64 // Jain's index over the acquisitions per goroutine before the stop
	Counts      []int64 // acquisitions per goroutine before the stop
	// Violations counts the holders that entered the critical section
	// while another was inside.
	Violations int64
	HoldMean   time.Duration // the mean time from Enter to Exit, of every holder
}

// Result is what c tallied, as rates over d, once its goroutines are done.
func (c *Contention) Result(d time.Duration) ContentionResult {
	r := ContentionResult{
		AcqPerS:     float64(Sum(c.counts)) / d.Seconds(),
		ChangesPerS: float64(c.changes.Load()) / d.Seconds(),
		Jain:        Jain(c.counts),
		Counts:      c.counts,
		Violations:  c.viol.Load(),
	}
	if n := c.held.Load(); n > 0 {
		r.HoldMean = time.Duration(c.heldFor.Load() / n)
	}
	return r
}
