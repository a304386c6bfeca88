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
	within := func(s *sharedDeadline, l time.Duration, start time.Time) {
		t.Helper()
		end, ok := s.ctx.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if end.After(time.Now().Add(l)) || end.Before(start.Add(l-l/shareWindow)) {
			t.Fatalf("limit %v: deadline %v from the start, want between %v and %v", l, end.Sub(start), l-l/shareWindow, l)
		}
	}
	start := time.Now()
	a := d.get(parent, limit)
	within(a, limit, start)
	if b := d.get(parent, limit); b != a {
		t.Fatal("a request right after another with the same limit got a context of its own")
	}
	d.put(a)
	d.put(a)
	other := d.get(parent, time.Second)
	if other == a {
		t.Fatal("two limits share a context")
	}
	d.put(other)

	// More limits than slots: each still gets a context within its limit,
	// and a context pushed out of its slot is cancelled once its last
	// request has ended, not before.
	held := d.get(parent, limit) // still a's slot
	if held != a {
		t.Fatal("the context of a limit was not shared")
	}
	for i := range 2 * len(d.slots) {
		l := time.Duration(i+2) * time.Minute
		s := time.Now()
		sd := d.get(parent, l)
		within(sd, l, s)
		d.put(sd)
	}
	if a.ctx.Err() != nil {
		t.Fatal("a context was cancelled while a request used it")
	}
	d.put(held)
	if a.ctx.Err() == nil {
		t.Fatal("a context pushed out of its slot lives on after its last request")
	}
	for _, s := range d.slots {
		if s.users != 0 {
			t.Fatalf("a slot counts %d users after every request ended", s.users)
		}
	}

	// A context that has ended is not handed out again.
	short := d.get(parent, time.Millisecond)
	d.put(short)
	<-short.ctx.Done()
	if again := d.get(parent, time.Millisecond); again == short {
		t.Fatal("a request got a context that had already ended")
	}
	live := d.get(parent, limit)
	cancel()
	<-live.ctx.Done()
	if live.ctx.Err() != context.Canceled {
		t.Fatalf("after the parent ended: %v", live.ctx.Err())
	}
}
