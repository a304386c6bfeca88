package rueidisstore

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/rueidis"
)

// A PubSub whose server goes down keeps one goroutine connecting again,
// backing off, not a growing crowd of connections and goroutines; once
// the server is back, it subscribes its channel again, and the
// confirmation comes as an event.
func TestPubSubAcrossAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ps := newConn(client).Subscribe(false)
	defer ps.Close()
	if err := ps.Subscribe(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	if e, err := ps.Receive(ctx, 0); err != nil || e.Kind != redisbackend.Subscribed {
		t.Fatalf("the confirmation: %+v, %v", e, err)
	}
	before := runtime.NumGoroutine()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the outage
	if n := runtime.NumGoroutine(); n > before+20 {
		t.Errorf("%d goroutines 2 s into the outage, %d before it", n, before)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	for {
		e, err := ps.Receive(ctx, 0)
		if err != nil {
			t.Fatalf("no confirmation after the outage: %v", err)
		}
		if e.Kind == redisbackend.Subscribed && e.Channel == "ch" {
			return
		}
	}
}
