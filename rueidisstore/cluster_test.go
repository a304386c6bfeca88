package rueidisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/redis/rueidis"
)

// A waiter on a Cluster whose lock's slot moves to another master while
// it waits: the old master ends its sharded subscription, the store
// subscribes on the new master, and the release there wakes the waiter
// (the holder's lease is a minute, the wait bounded by 20 s).
func TestClusterMigratedSubscription(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const name = "migrated-sub"
	slot := redisbackend.Slot(name)
	from, err := cl.SlotMaster(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := cl.Servers[0]
	if to == from {
		to = cl.Servers[1]
	}
	holder := distlock.New(redisstore.New(cl.Client(t)), distlock.WithLogger(nil))
	closeAtEnd(t, holder)
	held, err := holder.Mutex(name, distlock.WithTTL(holdLong)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	waiter := distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()})),
		distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
			if e.Kind == distlock.EventWaiting {
				select {
				case waiting <- struct{}{}:
				default:
				}
			}
		}))
	closeAtEnd(t, waiter)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Mutex(name).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the waiter never reported waiting")
	}
	if err := cl.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	// Subscribing again takes a moment and nothing signals it: poll.
	for {
		info, err := holder.Mutex(name).Inspect(ctx)
		if err == nil && info.Waiters == 1 {
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the waiter did not subscribe on the slot's new master: %+v, %v", info, err)
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}

// A lock held on a Cluster keeps being renewed after its master is
// killed and its replica (which had the lock) promoted: a renewal that
// cannot reach the dead master has the store read the slot map again,
// and a later one reaches the new master, with the same token. With
// replicas, as many as ask is above 0, acknowledging every renewal
// (WithReplicaAck), the promoted master's: each master has two replicas,
// and the one not promoted follows the new master.
func TestClusterKilledMaster(t *testing.T) {
	for _, ack := range []int{0, 1} {
		t.Run(fmt.Sprintf("ack%d", ack), func(t *testing.T) {
			cl := redistest.StartCluster(t, 3, redistest.WithReplicas(ack+1), redistest.WithArgs("--cluster-node-timeout", "1000"))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			const name = "killed-master"
			slot := redisbackend.Slot(name)
			master, err := cl.SlotMaster(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			var opts []redisstore.Option
			if ack > 0 {
				opts = append(opts, redisstore.WithReplicaAck(ack, 500*time.Millisecond))
			}
			renewed := make(chan struct{}, 100)
			c := distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()}), opts...),
				distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
					switch e.Kind {
					case distlock.EventRenewFailed:
						t.Logf("%v renewal failed: %v", time.Now().Format("15:04:05.000"), e.Err)
					case distlock.EventRenewed:
						select {
						case renewed <- struct{}{}:
						default:
						}
					}
				}))
			closeAtEnd(t, c)
			l, err := c.Mutex(name, distlock.WithTTL(8*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Another client, which takes a lock of the slot before the
			// failover and none after it until the end: nothing of its own
			// tells it that the master changed.
			other := distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()}), opts...),
				distlock.WithLogger(nil))
			closeAtEnd(t, other)
			sameSlot := ""
			for i := 0; sameSlot == ""; i++ {
				if n := fmt.Sprint(name, "-", i); redisbackend.Slot(n) == slot {
					sameSlot = n
				}
			}
			if o, err := other.Mutex(sameSlot).Lock(ctx); err != nil {
				t.Fatal(err)
			} else if err := o.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := master.Client(t).Wait(ctx, ack+1, 5000).Result(); err != nil || n != int64(ack+1) {
				t.Fatalf("WAIT %d on the master: %d, %v", ack+1, n, err)
			}
			if err := master.Kill(); err != nil {
				t.Fatal(err)
			}
			promoted, err := cl.AwaitSlotMaster(ctx, slot, master)
			if err != nil {
				t.Fatal(err)
			}
			for range len(renewed) { // the renewals before the promotion
				<-renewed
			}
			for i := 0; i < 2; i++ { // two renewals after it
				select {
				case <-renewed:
				case <-l.Context().Done():
					t.Fatalf("the lock was lost across the failover: %v", context.Cause(l.Context()))
				case <-ctx.Done():
					t.Fatal("no renewal after the failover")
				}
			}
			info, err := c.Mutex(name).Inspect(ctx)
			if err != nil || !info.Locked || info.Token != l.Token() {
				t.Fatalf("after the failover to %s: %+v, %v; want held with token %d", promoted.Addr(), info, err, l.Token())
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if o, err := other.Mutex(sameSlot).TryLock(ctx); err != nil {
				t.Fatalf("the other client, after the failover: TryLock %s: %v", sameSlot, err)
			} else if err := o.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// WithReplicaAck on a Cluster through rueidis: WAIT goes to the master of
// the lock's slot, on the script's connection. With the one replica each
// master has, locks of every master are taken; asking for two, an
// acquisition fails with ErrNotReplicated and leaves nothing behind.
func TestClusterReplicaAck(t *testing.T) {
	cl := redistest.StartCluster(t, 3, redistest.WithReplicas(1))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	newStore := func(replicas int) *distlock.Client {
		c := distlock.New(rueidisstore.New(newClient(t, rueidis.ClientOption{InitAddress: cl.Addrs()}),
			redisstore.WithReplicaAck(replicas, 200*time.Millisecond)), distlock.WithLogger(nil))
		closeAtEnd(t, c)
		return c
	}
	one, two := newStore(1), newStore(2)
	masters := map[string]bool{}
	for i := 0; len(masters) < 3; i++ {
		name := fmt.Sprint("acked-", i)
		m, err := cl.SlotMaster(ctx, redisbackend.Slot(name))
		if err != nil {
			t.Fatal(err)
		}
		if masters[m.Addr()] {
			continue
		}
		masters[m.Addr()] = true
		l, err := one.FairMutex(name, distlock.WithTTL(2*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatalf("%s on %s: Lock, one replica asked: %v", name, m.Addr(), err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("%s: Unlock: %v", name, err)
		}
	}
	refusedUnacked(t, ctx, one, two)
}
