package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

// stallLease is the lease of the client that stalls in the fencing scene.
const stallLease = 300 * time.Millisecond

// fencingScene shows what fencing tokens are for. Client A takes the lock
// and stalls (as in a long GC pause) until its lease is over; client B
// then takes the lock and restocks the shop; A comes back and restocks
// too, with its now stale token, and the shop refuses the write.
func fencingScene(ctx context.Context, s *session, shop *shop, lock string) error {
	a := distlock.New(redisstore.New(s.rdb, redisstore.WithPrefix(s.prefix)), distlock.WithLogger(nil))
	defer a.Close()
	b := distlock.New(redisstore.New(s.rdb, redisstore.WithPrefix(s.prefix)), distlock.WithLogger(nil))
	defer b.Close()

	leaseA, err := a.Mutex(lock, distlock.WithFixedLease(stallLease)).Lock(ctx)
	if err != nil {
		return s.failure(err)
	}
	fmt.Printf("Client A takes the lock (token %d), then stalls (think of a GC pause) past its %v lease.\n",
		leaseA.Token(), stallLease)
	<-leaseA.Context().Done() // A's lease is over; A does not notice: it is stalled

	leaseB, err := b.Mutex(lock).Lock(ctx)
	if err != nil {
		return s.failure(err)
	}
	if err := shop.fencedWrite(ctx, leaseB.Token(), restock(ctx, shop, 20)); err != nil {
		return s.failure(err)
	}
	fmt.Printf("Client B takes the lock (token %d) and restocks 20 items: accepted.\n", leaseB.Token())
	if err := leaseB.Unlock(ctx); err != nil {
		return s.failure(err)
	}

	err = shop.fencedWrite(ctx, leaseA.Token(), restock(ctx, shop, 50))
	var stale *errStaleToken
	if !errors.As(err, &stale) {
		return exitf(exitFailure, "BUG: the stale write of token %d was not refused (%v)", leaseA.Token(), err)
	}
	left, err := s.rdb.Get(ctx, shop.stock).Int()
	if err != nil {
		return s.failure(err)
	}
	fmt.Printf("Client A wakes up and restocks 50 items with its token %d.\n", leaseA.Token())
	fmt.Printf("fencing: stale token %d REFUSED (the shop has seen %d); stock is %d\n", stale.token, stale.seen, left)
	return nil
}

// restock returns a write that sets the stock to n.
func restock(ctx context.Context, shop *shop, n int) func(redis.Pipeliner) {
	return func(p redis.Pipeliner) { p.Set(ctx, shop.stock, n, 0) }
}
