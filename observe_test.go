package distlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strconv"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
)

// next receives the next value of an Observe channel, failing t if none
// comes within 10 s or the channel is closed.
func next(t *testing.T, ch <-chan distlock.Leader) distlock.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("the Observe channel was closed")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("nothing observed within 10 s")
	}
	return distlock.Leader{}
}

// Observe's first value says who leads now, a zero Leader when nobody does.
func TestObserveFirstSaysNobodyLeads(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ctx := testCtx(t)
	ch := c.Election("nobody").Observe(ctx)
	if l := next(t, ch); l != (distlock.Leader{}) {
		t.Fatalf("first value %+v with nobody leading, want a zero Leader", l)
	}
}

// Observe's channel is closed when its Client closes, and its goroutine is
// gone by the time Close returns (TestMain checks for leaked goroutines).
func TestObserveEndsAtClose(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	ch := c.Election("closing").Observe(context.Background())
	next(t, ch)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case l, ok := <-ch:
		if ok {
			t.Fatalf("observed %+v after Close, want the channel closed", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Observe channel is still open 10 s after Close")
	}
}

// Two Observe calls on one Client, for one election, both see every
// leader.
func TestObserveTwiceOnOneClient(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	e := c.Election("twice")
	first, second := e.Observe(ctx), e.Observe(ctx)
	next(t, first)
	next(t, second)
	lease, err := other.Election("twice").Campaign(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range []<-chan distlock.Leader{first, second} {
		if l := next(t, ch); l.Term != lease.Token() || l.Value != "leader" {
			t.Fatalf("observer %d saw %+v, want the leader of term %d", i+1, l, lease.Token())
		}
	}
}

// A vacancy is announced with the term that ended.
func TestElectionVacancyCarriesTerm(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	ctx := testCtx(t)
	sub := rdb.Subscribe(ctx, redisstore.DefaultPrefix+"{term}:leader")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	lease, err := c.Election("term").Campaign(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var vacancy map[string]string
	for vacancy == nil || vacancy["term"] != "" {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		vacancy = nil
		if err := json.Unmarshal([]byte(m.Payload), &vacancy); err != nil {
			t.Fatalf("announcement %q: %v", m.Payload, err)
		}
	}
	if vacancy["ended"] != strconv.FormatUint(lease.Token(), 10) {
		t.Fatalf("vacancy announced as %v, want the term that ended, %d", vacancy, lease.Token())
	}
}

// An announcement delivered late, after Observe has seen a newer leader
// (a look read the state before the message of the change came), is not
// sent: the channel never goes back in time. Here stale vacancies are
// published by hand while a leader leads, in the format of this version
// (with the term that ended) and in that of older ones ('{}'); then the
// leader resigns to a waiting candidate, with no vacancy in between.
func TestObserveNeverGoesBack(t *testing.T) {
	srv := redistest.Start(t)
	c, rdb := newClient(t, srv)
	other, _ := newClient(t, srv)
	ctx := testCtx(t)
	e := other.Election("back")
	leader, err := e.Campaign(ctx, "c0")
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Election("back").Observe(ctx)
	if l := next(t, ch); l.Term != leader.Token() {
		t.Fatalf("observed %+v, want term %d", l, leader.Token())
	}
	channel := redisstore.DefaultPrefix + "{back}:leader"
	for i := 1; i <= 2; i++ {
		campaigned := make(chan *distlock.Lease, 1)
		go func() {
			l, err := e.Campaign(ctx, "c"+strconv.Itoa(i))
			if err != nil {
				t.Error(err)
			}
			campaigned <- l
		}()
		waitFor(t, func() bool { return rdb.ZCard(ctx, redisstore.DefaultPrefix+"{back}:q").Val() == 1 })
		rdb.Publish(ctx, channel, `{"ended":"`+strconv.FormatUint(leader.Token()-1, 10)+`"}`)
		rdb.Publish(ctx, channel, `{}`)
		if err := leader.Unlock(ctx); err != nil { // hands over to the candidate
			t.Fatal(err)
		}
		leader = <-campaigned
		if leader == nil {
			t.FailNow()
		}
		if l := next(t, ch); l.Term != leader.Token() || l.Value != "c"+strconv.Itoa(i) {
			t.Fatalf("observed %+v after a hand-over, want c%d with term %d", l, i, leader.Token())
		}
	}
}

// Observe started while Redis is down keeps its channel open, reports the
// failures to the event handler, and says who leads once Redis is back.
func TestObserveWaitsForRedis(t *testing.T) {
	srv := redistest.Start(t)
	failures := make(chan distlock.Event, 100)
	c, _ := newClient(t, srv, distlock.WithEventHandler(func(ev distlock.Event) {
		if ev.Kind == distlock.EventObserveFailed {
			select {
			case failures <- ev:
			default:
			}
		}
	}))
	ctx := testCtx(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ch := c.Election("down").Observe(ctx)
	select {
	case ev := <-failures:
		if ev.Name != "down" || ev.Err == nil {
			t.Fatalf("failure event %+v, want the election's name and an error", ev)
		}
	case l, ok := <-ch:
		t.Fatalf("observed %+v (open %v) with Redis down", l, ok)
	case <-time.After(10 * time.Second):
		t.Fatal("no failure reported within 10 s")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if l := next(t, ch); l != (distlock.Leader{}) {
		t.Fatalf("first value %+v once Redis is back, want a zero Leader", l)
	}
	lease, err := c.Election("down").Campaign(ctx, "back")
	if err != nil {
		t.Fatal(err)
	}
	if l := next(t, ch); l.Term != lease.Token() {
		t.Fatalf("observed %+v, want term %d", l, lease.Token())
	}
}

// Follow who leads: the first value says who leads now (nobody, here),
// then each change.
func ExampleElection_Observe() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // closes the channel

	e := locks.Election("scheduler")
	leaders := e.Observe(ctx)
	fmt.Printf("leader: %q\n", (<-leaders).Value)
	lease, err := e.Campaign(ctx, "node-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	l := <-leaders
	fmt.Printf("leader: %q, term %v\n", l.Value, l.Term == lease.Token())
	lease.Unlock(ctx) // resign
	fmt.Printf("leader: %q\n", (<-leaders).Value)
	// Output:
	// leader: ""
	// leader: "node-a:8080", term true
	// leader: ""
}

// TestObserveUnsupported: on a store that serves elections but cannot tell
// of leaders (no store.LeaderWatcher), Observe's channel closes at once,
// and the failure is reported, wrapping ErrUnsupported, instead of being
// retried for ever.
func TestObserveUnsupported(t *testing.T) {
	srv := redistest.Start(t)
	failed := make(chan error, 1)
	// Embedding the interface hides the store's optional ones.
	c := distlock.New(struct{ store.Store }{redisstore.New(srv.Client(t))}, distlock.WithLogger(nil),
		distlock.WithEventHandler(func(ev distlock.Event) {
			if ev.Kind == distlock.EventObserveFailed {
				select {
				case failed <- ev.Err:
				default:
				}
			}
		}))
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)
	l, err := c.Election("unobservable").Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign on the store without LeaderWatcher: %v", err)
	}
	select {
	case _, ok := <-c.Election("unobservable").Observe(ctx):
		if ok {
			t.Error("Observe's channel sent a leader; want it closed at once")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe's channel still open 5 s later (it retries a watch the store cannot make)")
	}
	select {
	case err := <-failed:
		if !errors.Is(err, distlock.ErrUnsupported) {
			t.Errorf("EventObserveFailed: %v, want ErrUnsupported", err)
		}
	default:
		t.Error("no EventObserveFailed")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
