package quorumbench

import (
	"testing"
	"time"

	"github.com/distlock/distlock/redistest"
)

// Each library takes and releases locks over three masters, and hands a
// lock over to a waiter.
func TestLibraries(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redistest.Start(t).Addr())
	}
	for _, lib := range Libs {
		t.Run(lib, func(t *testing.T) {
			l, err := New(lib, addrs)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			w, err := New(lib, addrs)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, g := range []int{1, 4} {
				rate, err := Uncontended(l, g, 100*time.Millisecond)
				if err != nil || rate <= 0 {
					t.Fatalf("%d goroutines: %v pairs/s, %v", g, rate, err)
				}
			}
			ds, err := Handover(l, w, 2, time.Millisecond)
			if err != nil || len(ds) != 2 {
				t.Fatalf("hand-over: %v, %v", ds, err)
			}
		})
	}
	if _, err := New("nope", addrs); err == nil {
		t.Error("an unknown library was accepted")
	}
}

func TestPercentileAndMedian(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if p := Percentile(ds, 50); p != 3 {
		t.Errorf("p50 = %v, want 3", p)
	}
	if p := Percentile(ds, 90); p != 5 {
		t.Errorf("p90 = %v, want 5", p)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
}
