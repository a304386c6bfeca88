package redisbackend

import (
	"testing"
	"time"
)

// Two watches of one channel each get its messages, with a confirmation
// of their own; stopping one leaves the other subscribed, and stopping the
// last unsubscribes.
func TestWatchSameChannelTwice(t *testing.T) {
	b := newBackend(t)
	ctx := t.Context()
	channel := b.cfg.Keys.Leader("twice")
	watch := func() (chan string, func()) {
		got := make(chan string, 10)
		stop, err := b.notify.watch(ctx, channel, func(payload string, lost bool) {
			if !lost {
				got <- payload
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, stop
	}
	receive := func(who string, got chan string, want string) {
		t.Helper()
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("%s received %q, want %q", who, p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s received nothing within 10 s, want %q", who, want)
		}
	}
	got1, stop1 := watch()
	got2, stop2 := watch()
	rdbOf(b).Publish(ctx, channel, "one")
	receive("the first watch", got1, "one")
	receive("the second watch", got2, "one")

	stop2()
	if n, _ := b.watchers(ctx, channel); n != 1 {
		t.Fatalf("%d subscribers once one of two watches stopped, want 1", n)
	}
	rdbOf(b).Publish(ctx, channel, "two")
	receive("the first watch", got1, "two")
	select {
	case p := <-got2:
		t.Fatalf("a stopped watch received %q", p)
	default:
	}
	stop1()
	stop1()             // idempotent
	for i := 0; ; i++ { // UNSUBSCRIBE is sent, not awaited
		n, _ := b.watchers(ctx, channel)
		if n == 0 {
			break
		}
		if i == 1000 {
			t.Fatalf("%d subscribers 10 s after both watches stopped, want 0", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
