package engine

import (
	"context"
	"testing"
	"time"
)

func TestRequestDeadlines(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	var d requestDeadlines
	const limit = 16 * time.Second
	within := func(ctx context.Context, start time.Time) {
		t.Helper()
		end, ok := ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if end.After(time.Now().Add(limit)) || end.Before(start.Add(limit-limit/shareWindow)) {
			t.Fatalf("deadline %v from the start, want between %v and %v", end.Sub(start), limit-limit/shareWindow, limit)
		}
	}
	start := time.Now()
	a := d.get(parent, limit)
	within(a, start)
	if b := d.get(parent, limit); b != a {
		t.Fatal("a request right after another with the same limit got a context of its own")
	}
	other := d.get(parent, time.Second)
	if other == a {
		t.Fatal("two limits share a context")
	}
	// More limits than slots: each still gets a context within its limit.
	for i := range 2 * len(d.slots) {
		l := time.Duration(i+2) * time.Second
		s := time.Now()
		ctx := d.get(parent, l)
		end, _ := ctx.Deadline()
		if end.After(time.Now().Add(l)) || end.Before(s.Add(l-l/shareWindow)) {
			t.Fatalf("limit %v: deadline %v from the start", l, end.Sub(s))
		}
	}
	// A context that has ended is not handed out again.
	short := d.get(parent, time.Millisecond)
	<-short.Done()
	if again := d.get(parent, time.Millisecond); again == short {
		t.Fatal("a request got a context that had already ended")
	}
	cancel()
	<-a.Done()
	if a.Err() != context.Canceled {
		t.Fatalf("after the parent ended: %v", a.Err())
	}
}
