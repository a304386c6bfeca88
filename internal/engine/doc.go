// Package engine is the backend-independent core of distlock: it waits for
// locks (push wake-ups with a lease-bounded fallback for plain kinds; places
// in a queue on the store and grants for queued kinds), keeps held leases
// and places alive in batches, cancels lease contexts before a lease can run
// out on the server, and hands re-entrant acquisitions to the hold that a
// context carries. Backends (Redis today) implement the Backend interface.
//
// Files: engine.go (the Engine, Acquire, Close), attempt.go (one
// acquisition request), plain.go and wait.go (waiting for a plain kind),
// queued.go and place.go (waiting in a queue, grants and their bound),
// hold.go (holds and leases), renew.go (the watchdog), reenter.go,
// release.go, cleanup.go (abandoning an owner), revoke.go (holds told of a
// force-unlock), call.go (bounding a request by its caller's context).
//
// # The rule: an unknown outcome counts as possibly applied, now or later
//
// A request whose reply was lost or late (a read timeout, a cancelled
// context, a frozen server, a network that delays it) may have been applied,
// and may still be applied after the engine has moved on. Every part of the
// engine keeps the lease guarantee either way:
//
//   - Requests are bounded by the caller's context here, in the engine, not
//     by the backend's client (go-redis bounds socket reads by its own
//     ReadTimeout unless ContextTimeoutEnabled is set); the request itself
//     runs on under a context of its own, and its late outcome is handled.
//   - Local deadlines take the worst case: a renewal or Extend whose outcome
//     is unknown may land later with its lease, so the deadline is the
//     earliest end that any request not yet superseded could leave on the
//     server. Renewals carry sequence numbers and the backend refuses an
//     older one, so a confirmed request supersedes every earlier one.
//   - Clean-ups make late requests harmless: an acquisition attempt whose
//     outcome is not used is abandoned (Backend.Abandon), which releases
//     whatever it took and makes the backend refuse it if it lands later.
//     A caller that returns an error waits for that clean-up, and for
//     those of the earlier owners its call queued as (giveUpWait at most
//     for each): nothing of its call is left when it returns, and a grant
//     that raced it has gone to the next in line. A request that never
//     reached the store (an error wrapping ErrUnsent) needs none.
//   - Anything that gives a lock up cancels the lease context before the
//     release is sent (Unlock, Close), so once another owner can take the
//     lock, no context of the old hold is live.
//   - Close waits for every request and clean-up still under way, within its
//     context, and reports those it had to abandon. It abandons, rather than
//     releases, the owners still waiting in a queue: their acquisition may
//     still be on its way.
//
// What this does not cover: a request that reaches the backend later than
// the abandonment lasts (AbandonFor: two leases, one minute at least) can
// still take a free lock, for one lease, in the name of an owner nobody
// tracks; nobody acts under it. A client library's own retry of a request
// that succeeded (go-redis retries after a read timeout, MaxRetries) can
// land after the lock was released, with the same effect.
package engine
