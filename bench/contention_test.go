package bench_test

import (
	"slices"
	"testing"
	"time"

	"github.com/distlock/distlock/bench/internal/harness"
)

// TestContention checks what a Contention tallies: acquisitions and owner
// changes before the stop only, a holder entering while another is inside
// as a violation, and the hold of every holder.
func TestContention(t *testing.T) {
	c := harness.NewContention(2, time.Now().Add(time.Hour))
	c.Exit(c.Enter(0))
	c.Exit(c.Enter(0))
	t1 := c.Enter(1)
	t0 := c.Enter(0) // while 1 is inside
	c.Exit(t0)
	c.Exit(t1)
	r := c.Result(time.Second)
	if !slices.Equal(r.Counts, []int64{3, 1}) || r.AcqPerS != 4 || r.ChangesPerS != 3 || r.Violations != 1 {
		t.Errorf("result %+v, want counts [3 1], 4 acquisitions/s, 3 owner changes/s, 1 violation", r)
	}
	late := harness.NewContention(1, time.Now())
	e := late.Enter(0)
	time.Sleep(time.Millisecond)
	late.Exit(e)
	if r := late.Result(time.Second); r.Counts[0] != 0 || r.ChangesPerS != 0 || r.HoldMean < time.Millisecond {
		t.Errorf("after the stop: %+v, want no acquisition counted but the hold", r)
	}
}
