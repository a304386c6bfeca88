// Package distlock provides distributed locks on Redis: a re-entrant,
// fenced, self-renewing mutex with push wake-ups, built on an engine that
// later primitives (fair and read-write locks, semaphores, Redlock) share.
//
// A Client wraps your go-redis client; Client.Mutex names a lock; Lock and
// TryLock return a Lease:
//
//	locks := distlock.New(rdb)
//	defer locks.Close()
//	lease, err := locks.Mutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Unlock(ctx)
//	doWork(lease.Context(), lease.Token())
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
// cancelled with ErrLockLost. Because the server's lease starts when it
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
//     survive failover needs more (replica acknowledgement or Redlock, on
//     the roadmap).
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
// Tokens come from a counter key, incremented by the acquire script. When
// the counter does not exist (first use, or expired WithFenceRetention —
// default one hour — after the lock's last acquisition, or lost with the
// data) it starts at the Redis server's time in microseconds. Every
// acquisition takes more than a microsecond of server time, so a counter
// never runs ahead of the server clock, and a new counter starts above every
// token issued before. So names used once do not leak keys, and tokens
// survive the loss of the counter. Monotonicity breaks only if the server
// clock goes back (a step, or failover to a server whose clock is behind)
// by more than the time since the last token was issued while the counter
// is missing. Tokens are ordered, not secret.
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
// A waiter subscribes to the lock's release channel before it retries, so a
// release cannot slip between its attempt and its wait. All waiters of a
// Client share one subscription connection; a release wakes one waiter per
// process. A waiter never sleeps longer than the holder's remaining lease,
// so a lost notification (or a holder that died) costs at most that.
//
// Waiters of one Client are served first come, first served: a release wakes
// the one that has waited longest, and a Lock call made while others of the
// Client wait lines up behind them instead of trying at once (TryLock always
// tries at once). Across processes there is no order: whichever process's
// attempt reaches Redis first after a release wins.
//
// # Keys
//
// For a lock named N and the default prefix "distlock:", the state is the
// hash distlock:{N}, the fencing counter distlock:{N}:fence and the release
// channel distlock:{N}:released: all in the Redis Cluster slot of N. Names
// may not contain braces.
package distlock
