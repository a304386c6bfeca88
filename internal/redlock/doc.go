// Package redlock implements the engine's Backend over N independent Redis
// masters (N odd, at least 3) with the Redlock algorithm, so that the
// engine's waiting, watchdog, lease contexts, re-entry and clean-ups work
// unchanged over a quorum of N/2+1 masters. Each master is driven by a
// redisbackend.Backend of its own.
//
// Files: redlock.go (the Backend), fanout.go (one request to every master),
// acquire.go, renew.go, release.go (and Abandon), watch.go, inspect.go, and
// unsupported.go (the kinds a quorum cannot serve).
//
// # The algorithm
//
//   - Acquire sends one request to every master at once, each bounded by a
//     timeout small against the lease (a tenth of it, 10 ms to 1 s). The
//     lock is held once a quorum took it; the engine measured the lease
//     from before the first request was sent and subtracts a margin for
//     clock drift (lease/50 + 5 ms), and drops a grant whose reply comes
//     after that deadline. Otherwise the owner is abandoned on every
//     master, including those that did not answer (a late request then
//     takes nothing), and the engine tries again: when it is woken by a
//     release, or after the holders' remaining leases plus a random delay.
//   - Waiting is pushed: waiters watch the release channel on every master
//     (a release that frees the lock reaches a quorum, and two quorums
//     meet, so a watch confirmed by a quorum hears it).
//   - The watchdog renews on every master in one batch per master; a
//     renewal counts once a quorum confirmed it. If none is confirmed
//     before the local deadline, the lease context is cancelled, before the
//     lease can end on a quorum.
//   - Releases go to every master; Release waits for a quorum's answer, and
//     the rest still release when they answer.
//
// # Fencing tokens
//
// A holder's token is the same on every master, and tokens of one name
// increase with each holder. The client proposes a token (its clock in µs,
// or above the highest token it has seen), and a master takes the lock
// only with a token above its fencing counter, which it sets to that token
// in the same step (quorum_acquire.lua); a master whose counter is not
// below refuses with its counter, and the client proposes again above it.
//
// Why tokens increase: let A and B be two holders of a name, with tokens
// a and b. Their quorums meet in some master m, and m had them one after
// the other, never both at once; say A first. A took the lock on m by
// setting m's counter to a, and B took it there later, so with a token
// above m's counter: b > a. Whenever B acquires after A released the lock
// or lost it (A's lease ran out on the masters, even while A, paused,
// still acts), A had m first, so B's token is the higher one, and a
// resource that keeps the highest token it has seen refuses A. This uses
// neither clocks nor leases. It rests on the masters keeping their data:
// a master that restarts without it forgets its counter (and its locks,
// see below), and then only the clock in the proposal keeps tokens
// increasing, as far as the clients' clocks agree.
//
// # What it rests on
//
// Mutual exclusion rests on the leases: on bounded clock drift between the
// client and each master (a master whose clock jumps forward expires keys
// early), on bounded process pauses and network delays within a lease (the
// lease context is cancelled at the local deadline, but a process paused
// past it still acts), and on masters that keep their data: a master
// restarted empty while a lock is held lets a second holder take a quorum
// with it unless it stays down for a lease after restarting (the Redis
// documentation's "delayed restarts"), or persists every write (AOF with
// fsync always). Fencing tokens are what protect a resource when those
// assumptions fail.
package redlock
