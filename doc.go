// Package distlock provides distributed locks on Redis: a re-entrant,
// fenced, self-renewing mutex with push wake-ups, a fair mutex that serves
// waiters in order across processes, a read-write lock (RWMutex), a
// semaphore whose permits are leases, a multi-lock (MultiMutex), leader
// election, and one-call helpers (Do, Once, OncePer), all built on one
// engine that every store shares.
//
// A Client works on a store: redisstore.New wraps your go-redis client
// (standalone, Sentinel or Cluster), redisstore.NewRedlock a quorum of
// independent masters, and any implementation of package store can take
// their place. Client.Mutex names a lock; Lock and TryLock return a Lease:
//
//	locks := distlock.New(redisstore.New(rdb))
//	defer locks.Close()
//	lease, err := locks.Mutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Unlock(ctx)
//	doWork(lease.Context(), lease.Token())
//
// What follows describes the locks as Redis keeps them (package
// redisstore); to write a store, start from package store's documentation.
//
// # What a lease guarantees, and what it rests on
//
// A lock is a Redis hash with a lease (PEXPIRE). Acquisition, re-entry,
// renewal and release are each one Lua script, so they are atomic on the
// server. While the lease is renewed (every TTL/6 to TTL/3, batched for all
// locks of a Client), no other owner can acquire the lock.
//
// The holder measures the lease from the moment it sent the request that
// set it, on its monotonic clock, and gives it up a margin earlier
// (TTL/50 + 5 ms). If renewals cannot be confirmed by then (Redis down or
// frozen, network partition, pool exhausted), the lease context is
// cancelled with ErrLockLost (a fixed lease that simply runs its course
// ends with ErrLeaseExpired, which wraps it). Lease.ValidUntil is that
// local deadline. Because the server's lease starts when it
// received that request, which is after it was sent, the cancellation comes
// before the server can expire the key — provided that
//
//   - the holder's process is running (a paused process cannot react to
//     anything; see fencing below),
//   - the two clocks run at the same rate to within the margin (they are
//     never compared, only their rates matter), and
//   - Redis keeps the key until it expires: no failover to a replica that
//     missed the write, no restart without persistence, no eviction, no
//     FLUSHALL. Replication in Redis is asynchronous; a lock that must
//     survive failover needs more (replica acknowledgement,
//     redisstore.WithReplicaAck, or Redlock, redisstore.NewRedlock).
//
// In Kleppmann's terms, this makes distlock an efficiency lock: it prevents
// duplicate work under the conditions above. For correctness under pauses
// and failover, use the fencing token.
//
// # Fencing tokens
//
// Every acquisition mints a token, Lease.Token, strictly greater than every
// token issued before for the same lock name, across owners, processes and
// unlock/relock. Pass it with each write to the protected resource and have
// the resource refuse tokens below the highest it has seen: then a holder
// that outlived its lease (a GC pause, a SIGSTOP) cannot overwrite its
// successor's work.
//
// Each token is the larger of the last token + 1 and the Redis server's
// time in microseconds, kept in a counter key that expires
// redisstore.WithFenceRetention (default one hour) after the lock's last
// acquisition.
// Every acquisition takes more than a microsecond of server time, so the
// counter never runs ahead of the server clock, and a counter that is
// missing (first use, expired, lost with the data) or behind (a replica
// promoted before the last tokens reached it) still mints above every
// token issued before. So names used once do not leak keys, and tokens
// survive the loss of the counter and a failover. Monotonicity breaks only
// if the minting server's clock is behind the clock of the server that
// issued the last token by more than the time elapsed since: a clock step
// back, or a failover faster than the clock skew between master and
// replica. Tokens are ordered, not secret.
//
// # Re-entrancy
//
// Ownership follows contexts, not goroutines: calling Lock with a lease's
// Context, or a context derived from it, adds a hold to the same lock and
// returns at once; any other context is a different owner, even in the same
// goroutine. The lock is free when every hold has been unlocked, in any
// order. Each hold has its own id on the server, so a retried Unlock never
// releases two holds.
//
// # Waiting
//
// A plain mutex's waiter subscribes to the lock's release channel before it
// retries, so a release cannot slip between its attempt and its wait. All
// waiters of a Client share one subscription connection; a release wakes
// one waiter per process. A waiter never sleeps longer than the holder's
// remaining lease, so a lost notification (or a holder that died) costs at
// most that.
//
// Waiters of one Client are served first come, first served: a release wakes
// the one that has waited longest, and a Lock or TryLock call made while
// others of the Client wait lines up behind them (TryLock fails) instead of
// trying at once. Across processes a plain mutex has no order: whichever
// process's attempt reaches Redis first after a release wins. For an order
// across processes, use a fair mutex.
//
// A call that gives up leaves nothing behind it. When an acquisition of any
// kind returns an error (its context ended, a request failed), it first
// releases whatever its requests may have taken and removes its place in a
// queue, and makes Redis refuse those requests if they arrive later (for a
// minute, or two leases if longer): a lock granted to it meanwhile has
// gone to the next in line by the time the error is returned, and no grant
// reaches a caller that has left. It waits for Redis to confirm that (up
// to 5 s, as Unlock does for a release when its context has ended); if
// Redis does not answer in time, or the clean-up fails (Redis down, no
// quorum of Redlock masters), the call returns all the same and the
// clean-up goes on in the background, what the requests may have taken
// expiring with its lease (or the queue timeout for a place). A request that never left the client (go-redis could not connect)
// needs no clean-up.
//
// # Fair mutex
//
// Client.FairMutex returns a Mutex whose waiters, in every process, are
// served in the order their requests reached Redis. Each waiter has a
// place in a queue kept in Redis, and the release script itself grants the
// lock to the first place in line: it sets the new owner, its fencing
// token and its lease, and publishes one message to that owner's process
// alone. No waiters race, none is woken for nothing, and a hand-over costs
// the release's round trip and one message.
//
// A waiter keeps its place alive by refreshing it every third of the
// queue timeout (WithQueueTimeout, 5 s by default) or of the TTL if
// shorter, in the same batches as the renewals. A waiter that died, was
// paused or was cut off loses its place within the queue timeout of its
// last refresh, and the next in line is served without anyone's
// intervention. If it had been granted the lock meanwhile, the lock is
// free again by then too: a granted lock expires when the grantee's place
// would have (or after the TTL, if sooner), until a live grantee's
// watchdog renews it to the full TTL at its first tick. When a holder dies
// without releasing, the first waiter takes the lock as its lease runs out
// (the waiter's refresh is due then). A waiter that missed the message of
// its grant finds the grant at its next refresh. Every key of the queue
// expires with its last place.
//
// TryLock never queues and never jumps the queue: it fails while anyone
// holds the lock or waits for it. A Lock whose context ends leaves the
// queue; if the lock was granted to it meanwhile, it goes to the next
// waiter. A name is used by one kind at a time: acquiring as a Mutex a
// name that is held as a FairMutex or has waiters in its queue fails with
// ErrWrongKind, and so does the reverse, and the lock in use is left
// untouched.
//
// A granted lease started at a moment the waiter did not see: inside
// another process's release. Its lease context must still end before the
// lease can run out in Redis. Every request of a place carries a number
// (the enqueue is 1, each refresh the next) and Redis records the highest
// it applied; the grant carries that number. The request with that number
// was sent before it was applied, and applied before the grant, so its
// send time comes before the lease started: the waiter measures the
// granted lease from it, as it measures every lease from the send of the
// request that set it. A granted lease thus looks shorter than it is by at
// most one refresh period and a round trip; the bound rests on clock rates
// alone, as every lease does, and on no bound on message delays.
//
// Choose the fair mutex when waiters must be served in order across
// processes (no process starves, waits are bounded by the queue ahead),
// or when many processes contend for one lock: a hand-over is one message
// to one process, where the plain mutex wakes a waiter in every process to
// race for it. The plain mutex is the lighter of the two when a lock is
// rarely contended: its waiters keep nothing in Redis.
//
// # Multi-lock, election, and jobs that run once
//
// MultiMutex takes several mutexes together, all or none, in one script
// where they share a Redis node, and never holds any while it waits, so
// callers that list the same names in any order cannot deadlock. Election
// is a fair queue of candidates whose holder leads: the term is the
// fencing token, and every change of leader is announced to Observe. Do
// runs a function under any Locker; Once runs a job once per key (the
// first caller runs it, the others are told who did), and OncePer once per
// period across nodes, counted on the Redis server's clock. Their run
// records are written only while the runner still holds the lock (fenced
// by its token).
//
// # Redlock
//
// A store of redisstore.NewRedlock holds mutexes on a majority of N
// independent Redis masters (N odd, at least 3), with the Redlock
// algorithm: every request goes to all masters at once, each bounded by a
// tenth of the lease (10 ms to 1 s), and counts once a quorum (N/2+1)
// confirmed it; the lease is measured from before the first request, less
// the drift margin, and an acquisition that does not reach a quorum within
// it is abandoned on every master (including those that did not answer)
// and tried again after the holders' remaining leases plus a random delay,
// or sooner when a release is heard. Waiting, the watchdog (renewals
// count once a quorum confirmed them; the lease context ends before a
// quorum's leases can), re-entry, lease contexts and clean-ups are the
// same engine's as for one Redis. So are the fencing tokens' promise: a
// holder's token is the same on every master, proposed by the client and
// taken by a master only above its counter, so a holder that acquires
// after another released or lost the lock gets the higher token, without
// relying on clocks. Mutual exclusion relies on the leases (bounded
// pauses and clock drift) and on masters that keep their data: a master
// restarted empty while a lock is held can let a second holder in, unless
// it stays out for a lease after restarting. The fair mutex, the
// read-write lock, the semaphore, the election and Once keep queues and
// records that a quorum of independent masters cannot keep in one order:
// they return ErrUnsupported. See docs/guarantees.md for when Redlock
// helps and when it does not.
//
// # Errors
//
// Every error is matched with errors.Is against the Err values (ErrWrongKind
// wraps ErrNotAcquired, ErrLeaseExpired wraps ErrLockLost, and so on), and
// every error about a lock reads as an *fs.PathError does, with the method
// that failed and the lock's name in front, "distlock:" once:
//
//	distlock: lock "jobs": not acquired: held by another owner (lease 29.8s left)
//	distlock: unlock "jobs": lock lost: renewal found it no longer held by this owner
//
// The cause of a lease context has the same shape, with op hold. Errors
// about no lock read "distlock: invalid option: ..." (Client.Err) or
// "distlock: close: ..." (Client.Close). See the Err values for the list
// of ops. Each is an *Error, whose Op and Name errors.As reads:
//
//	var e *distlock.Error
//	if errors.As(err, &e) {
//		log.Printf("%s of %s failed: %v", e.Op, e.Name, e.Err)
//	}
//
// # Observing
//
// An Observer (WithObserver) sees every call as it starts and ends, with
// an Outcome, and every Event: waits, renewals with their round trips,
// losses with their LossReason, and the end of every hold, once per hold
// (EventEnded), whatever ends it. The modules
// github.com/distlock/distlock/prometheus and .../otel turn them into
// Prometheus metrics and OpenTelemetry spans; a Client without observers
// does no work for them. See docs/observability.md.
//
// # Keys
//
// For a lock named N in Redis (package redisstore) and the default prefix
// "distlock:" (redisstore.WithPrefix sets another), the state is the
// hash distlock:{N}, the fencing counter distlock:{N}:fence and the release
// channel distlock:{N}:released; the queue of a fair mutex, a read-write
// lock or a semaphore adds distlock:{N}:q, distlock:{N}:qt and
// distlock:{N}:qi, the holders of a read-write lock or a semaphore
// distlock:{N}:h, a semaphore's capacity distlock:{N}:cap, a job's run
// record distlock:{N}:done; grants go to channels
// distlock:{N}:grant:<client id>, an election's announcements to
// distlock:{N}:leader. All of them are in the Redis Cluster slot
// of N, and all of them expire. Names may not contain braces.
package distlock
