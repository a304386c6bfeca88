package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// exampleRedis starts a throwaway redis-server for the examples; in your
// code, rdb is your own go-redis client.
func exampleRedis() (*redis.Client, func()) {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	return rdb, func() { rdb.Close(); srv.Stop() }
}

func Example() {
	rdb, done := exampleRedis()
	defer done()

	locks := distlock.New(rdb) // one per process
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)

	// Do the work under lease.Context(): it is cancelled if the lock is
	// lost, before anyone else can take it.
	work := lease.Context()
	fmt.Println("holding", lease.Name(), work.Err() == nil)
	// Output: holding nightly-report true
}

// Run a job on one node of many: TryLock gives up at once if another node
// runs it.
func ExampleMutex_TryLock() {
	rdb, done := exampleRedis()
	defer done()
	nodeA, nodeB := distlock.New(rdb), distlock.New(rdb)
	defer nodeA.Close()
	defer nodeB.Close()
	ctx := context.Background()

	lease, err := nodeA.Mutex("cron:cleanup").TryLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)

	_, err = nodeB.Mutex("cron:cleanup").TryLock(ctx)
	fmt.Println("node B skips:", errors.Is(err, distlock.ErrNotAcquired))
	// Output: node B skips: true
}

// Bound the wait with the context, and the lease with WithFixedLease
// (Redisson's tryLock(waitTime, leaseTime)).
func ExampleMutex_Lock_waitAndLease() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(rdb)
	defer locks.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // wait at most 2 s
	defer cancel()
	lease, err := locks.Mutex("import", distlock.WithFixedLease(10*time.Second)).Lock(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		fmt.Println("busy, try later")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	fmt.Println("importing")
	// Output: importing
}

// Locking again with the lease's context re-enters the lock.
func ExampleMutex_Lock_reentrant() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(rdb)
	defer locks.Close()
	ctx := context.Background()
	account := locks.Mutex("account:42")

	outer, _ := account.Lock(ctx)
	inner, _ := account.Lock(outer.Context()) // same owner: does not wait
	info, _ := account.Inspect(ctx)
	fmt.Println("holds:", info.Holds, "same token:", inner.Token() == outer.Token())
	inner.Unlock(ctx)
	outer.Unlock(ctx)
	// Output: holds: 2 same token: true
}

// A store that keeps the highest fencing token it has seen and refuses
// older ones makes a holder that outlived its lease harmless.
func ExampleLease_Token() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(rdb)
	defer locks.Close()
	ctx := context.Background()

	// Write value only if token is at least the last token seen.
	fencedSet := redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1`)

	first, _ := locks.Mutex("stock").Lock(ctx)
	first.Unlock(ctx) // ... or its lease ran out during a long pause
	second, _ := locks.Mutex("stock").Lock(ctx)
	defer second.Unlock(ctx)

	ok2, _ := fencedSet.Run(ctx, rdb, []string{"inventory"}, second.Token(), "new").Int()
	ok1, _ := fencedSet.Run(ctx, rdb, []string{"inventory"}, first.Token(), "stale").Int()
	fmt.Println("new holder's write:", ok2, "stale holder's write:", ok1)
	// Output: new holder's write: 1 stale holder's write: 0
}

// Events feed metrics or logs without touching the engine.
func ExampleWithEventHandler() {
	rdb, done := exampleRedis()
	defer done()
	lost := make(chan string, 1)
	locks := distlock.New(rdb, distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventLost {
			lost <- e.Name
		}
	}), distlock.WithLogger(nil))
	defer locks.Close()
	ctx := context.Background()

	lease, _ := locks.Mutex("job", distlock.WithTTL(300*time.Millisecond)).Lock(ctx)
	rdb.Del(ctx, "distlock:{job}") // someone deletes the lock
	fmt.Println("lost:", <-lost, errors.Is(context.Cause(lease.Context()), distlock.ErrLockLost))
	// Output: lost: job true
}
