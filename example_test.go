package distlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// exampleRedis starts a throwaway redis-server for the examples; in your
// code, rdb is your own go-redis client.
func exampleRedis() (*redis.Client, func()) {
	srv, err := redistest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	return rdb, func() { rdb.Close(); srv.Stop() }
}

func Example() {
	rdb, done := exampleRedis()
	defer done()

	locks := distlock.New(redisstore.New(rdb)) // one per process
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
	nodeA, nodeB := distlock.New(redisstore.New(rdb)), distlock.New(redisstore.New(rdb))
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

// Take a stuck job's lock away without letting the next node in before the
// job has stopped: Revoke cancels the holder's lease context, and the lock
// stays held until the holder's Unlock (or the end of its lease).
func ExampleMutex_Revoke() {
	rdb, done := exampleRedis()
	defer done()
	worker := distlock.New(redisstore.New(rdb))   // the node that runs the job
	operator := distlock.New(redisstore.New(rdb)) // the operator's tool
	next := distlock.New(redisstore.New(rdb))     // the node that runs it next
	defer worker.Close()
	defer operator.Close()
	defer next.Close()
	ctx := context.Background()
	opts := distlock.WithTTL(3 * time.Second)

	lease, err := worker.Mutex("import", opts).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { // the job: it works until its lease context ends
		defer close(stopped)
		<-lease.Context().Done()
		err := lease.Unlock(ctx) // releases the revoked lock
		fmt.Println("job stopped, lock lost:", errors.Is(err, distlock.ErrLockLost))
	}()

	if _, err := operator.Mutex("import").Revoke(ctx); err != nil {
		log.Fatal(err)
	}
	l, err := next.Mutex("import", opts).Lock(ctx) // waits for the job's Unlock
	if err != nil {
		log.Fatal(err)
	}
	defer l.Unlock(ctx)
	<-stopped
	fmt.Println("next holder's token is higher:", l.Token() > lease.Token())
	// Output:
	// job stopped, lock lost: true
	// next holder's token is higher: true
}

// Bound the wait with the context, and the lease with WithFixedLease
// (Redisson's tryLock(waitTime, leaseTime)).
func ExampleMutex_Lock_waitAndLease() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
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

// A fixed lease ends by itself: its context carries the deadline, so
// work started under it stops in time, and the end is ErrLeaseExpired, not
// a loss. ValidUntil says until when the lock is certainly held.
func ExampleLease_ValidUntil() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	lease, err := locks.Mutex("report", distlock.WithFixedLease(100*time.Millisecond)).Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	deadline, _ := lease.Context().Deadline()
	fmt.Println("deadline is ValidUntil:", deadline.Equal(lease.ValidUntil()))
	<-lease.Context().Done() // the work would run here, under lease.Context()
	fmt.Println("expired:", errors.Is(context.Cause(lease.Context()), distlock.ErrLeaseExpired))
	fmt.Println("unlock:", errors.Is(lease.Unlock(ctx), distlock.ErrLeaseExpired))
	// Output:
	// deadline is ValidUntil: true
	// expired: true
	// unlock: true
}

// Locking again with the lease's context re-enters the lock.
func ExampleMutex_Lock_reentrant() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
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

// A resource that keeps the highest fencing token it has seen and refuses
// older ones makes a holder that outlived its lease harmless.
func ExampleLease_Token() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
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
	locks := distlock.New(redisstore.New(rdb), distlock.WithEventHandler(func(e distlock.Event) {
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

// A fair mutex serves waiters in the order their requests reached Redis,
// across every process: here three clients (three processes, say) queue
// behind a holder and get the lock in turn, each from the release of the
// one before.
func ExampleClient_FairMutex() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	holder := distlock.New(redisstore.New(rdb))
	defer holder.Close()
	lease, err := holder.FairMutex("deploy").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	order := make(chan string, 3)
	for _, name := range []string{"first", "second", "third"} {
		queued := make(chan struct{})
		c := distlock.New(redisstore.New(rdb), distlock.WithEventHandler(func(e distlock.Event) {
			if e.Kind == distlock.EventWaiting {
				close(queued)
			}
		}))
		defer c.Close()
		go func() {
			l, err := c.FairMutex("deploy").Lock(ctx)
			if err != nil {
				log.Fatal(err)
			}
			order <- name
			l.Unlock(ctx)
		}()
		<-queued // in line before the next one asks
	}
	lease.Unlock(ctx)
	fmt.Println(<-order, <-order, <-order)
	// Output: first second third
}

// A read-write lock: any number of readers at once, in any process, or one
// writer. A writer that also takes the read side (downgrade) keeps reading
// after it unlocks the write side, with no writer in between; asking for
// the write side while holding only the read side fails at once.
func ExampleRWMutex() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()
	catalog := locks.RWMutex("catalog")

	// Rebuild the catalog, then keep reading it while others may read too.
	w, err := catalog.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r, err := catalog.RLock(w.Context()) // downgrade: the same owner reads
	if err != nil {
		log.Fatal(err)
	}
	w.Unlock(ctx)

	other, err := catalog.RLock(ctx) // another reader gets in at once
	if err != nil {
		log.Fatal(err)
	}
	info, _ := catalog.Inspect(ctx)
	fmt.Println(info.Mode, len(info.Readers), "readers")

	_, err = catalog.Lock(r.Context()) // an upgrade would wait for itself
	fmt.Println("upgrade:", errors.Is(err, distlock.ErrDeadlock))
	r.Unlock(ctx)
	other.Unlock(ctx)
	// Output:
	// read 2 readers
	// upgrade: true
}

// At most 3 calls at once to a rate-limited partner API, across every pod:
// each call holds a permit of a semaphore shared through Redis. A pod that
// dies holding permits gives them back when their lease ends.
func ExampleSemaphore() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()

	var mu sync.Mutex
	inside, most := 0, 0
	callPartner := func() {
		mu.Lock()
		inside++
		most = max(most, inside)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inside--
		mu.Unlock()
	}

	var wg sync.WaitGroup
	for pod := 0; pod < 4; pod++ { // four pods, four Clients
		pods := distlock.New(redisstore.New(rdb))
		defer pods.Close()
		partner := pods.Semaphore("partner-api", 3)
		for range 5 {
			wg.Go(func() {
				lease, err := partner.Acquire(ctx, 1)
				if err != nil {
					log.Fatal(err)
				}
				defer lease.Unlock(ctx)
				callPartner()
			})
		}
	}
	wg.Wait()
	fmt.Println("never more than 3 calls at once:", most <= 3)
	// Output: never more than 3 calls at once: true
}

// Transfer between two accounts holding both at once: a MultiMutex takes
// every member or none, and callers that list them in another order never
// deadlock.
func ExampleMultiMutex() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	err := distlock.Do(ctx, locks.MultiMutex([]string{"account:42", "account:7"}),
		func(ctx context.Context, token uint64) error {
			fmt.Println("both accounts held")
			return nil // debit one, credit the other, passing token to the database
		})
	fmt.Println(err)
	// Output:
	// both accounts held
	// <nil>
}

// One node of many leads; the others wait as candidates, and anyone can
// watch who leads.
func ExampleElection() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()
	election := locks.Election("scheduler")

	lease, err := election.Campaign(ctx, "node-a:8080") // blocks until this node leads
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := election.Leader(ctx)
	fmt.Println("leader:", leader.Value, leader.Term == lease.Token())
	// Lead under lease.Context(): it ends if the leadership is lost. Pass
	// the term (lease.Token()) with every write the leader makes.
	lease.Unlock(ctx) // resign
	// Output: leader: node-a:8080 true
}

// A job that cron starts every minute on every node: one node runs it per
// minute, the others are told who did.
func ExampleClient_OncePer() {
	rdb, done := exampleRedis()
	defer done()
	ctx := context.Background()
	report := func(ctx context.Context, token uint64) error { return nil }

	nodeA, nodeB := distlock.New(redisstore.New(rdb)), distlock.New(redisstore.New(rdb))
	defer nodeA.Close()
	defer nodeB.Close()
	a, _ := nodeA.OncePer(ctx, "nightly-report", time.Minute, report)
	b, _ := nodeB.OncePer(ctx, "nightly-report", time.Minute, report)
	// At a minute's boundary, both could fall in different minutes: then
	// each runs it, once per minute.
	fmt.Println(a.State == distlock.RanHere, b.State == distlock.AlreadyDone || a.Period != b.Period)
	// Output: true true
}

// The job of a period knows which period it runs for, to name what it
// makes the same way on whichever node runs it.
func ExampleRunPeriod() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	var file string
	run, _ := locks.OncePer(ctx, "hourly-export", time.Hour, func(ctx context.Context, token uint64) error {
		period, _ := distlock.RunPeriod(ctx)
		file = fmt.Sprintf("export-%d.csv", period)
		return nil
	})
	fmt.Println(file == fmt.Sprintf("export-%d.csv", run.Period))
	// Output: true
}

// One-time initialisation, or a request id processed once: the first
// caller runs it, the others are told it was done (and wait for it while
// it runs).
func ExampleClient_Once() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()
	initConfig := func(ctx context.Context, token uint64) error { return nil }

	first, _ := locks.Once(ctx, "config:init", 24*time.Hour, initConfig)
	again, _ := locks.Once(ctx, "config:init", 24*time.Hour, initConfig)
	fmt.Println(first.State, "/", again.State)
	// Output: ran here / already done
}

// Do takes any lock, runs the job under it and unlocks: the job gets the
// lease's context (cancelled if the lock is lost) and its fencing token.
func ExampleDo() {
	rdb, done := exampleRedis()
	defer done()
	locks := distlock.New(redisstore.New(rdb))
	defer locks.Close()
	ctx := context.Background()

	decrement := func(ctx context.Context, token uint64) error {
		// Fenced by the token: the row refuses a token lower than the highest
		// it has seen (a former holder's), and takes an equal one (this
		// holder may write several times with its token; a later holder
		// always has a higher one):
		// UPDATE stock SET n = n - 1, fence = $token WHERE sku = $sku AND fence <= $token
		return nil
	}
	fmt.Println(distlock.Do(ctx, locks.Mutex("sku:1234"), decrement))
	catalog := locks.RWMutex("catalog")
	fmt.Println(distlock.Do(ctx, catalog.RLocker(), func(context.Context, uint64) error { return nil }))
	// Output:
	// <nil>
	// <nil>
}

// A lock held on a majority of independent Redis masters (Redlock), with
// a store of redisstore.NewRedlock: the same Mutex and Lease as on one
// Redis. Losing one master of three does not lose the lock.
func Example_redlock() {
	var masters []redis.UniversalClient
	for range 3 {
		rdb, done := exampleRedis()
		defer done()
		masters = append(masters, rdb)
	}
	locks := distlock.New(redisstore.NewRedlock(masters))
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("payout:42").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("holding", lease.Name(), "with token", lease.Token() > 0)

	_, err = locks.FairMutex("queue").Lock(ctx)
	fmt.Println(errors.Is(err, distlock.ErrUnsupported))
	// Output:
	// holding payout:42 with token true
	// true
}
