package main

import "time"

// The command must be gone before the server can expire the lock's key,
// or the next holder could run beside it. The library's lease context
// ends a margin before that moment, at Lease.ValidUntil; run plans from
// that instant backwards, and moves the plan forward with every renewal
// confirmed in time:
//
//	ValidUntil - killMargin:         SIGKILL to every process left
//	ValidUntil - killMargin - grace: SIGTERM to every process of the job
//
// A lease is renewed a third of its TTL after the last confirmed renewal
// at the latest, and ValidUntil is then about a TTL ahead. A grace of at
// most TTL/3 leaves about a quarter of the TTL (at least TTL - TTL/3 -
// TTL/50 - killMargin after the last renewal) for failed renewals to be
// retried before the command is asked to stop.
//
// That holds for a lease that reaches about a TTL ahead. A lease granted
// to a waiter of a fair lock, a read-write lock or a semaphore by someone
// else's release starts shorter: at most --queue-timeout (5s by default),
// until the watchdog renews it to the TTL, a third of that lease in. With
// the default --kill-grace of 10s, its SIGTERM would be due before the
// command started. So run starts the command only once the plan fits the
// lease (planFits), extending the lease to the TTL first if it does not
// (one round trip).

// defaultGrace is the --kill-grace of a run that does not set it: 10s,
// or maxGrace(ttl) if that is shorter.
func defaultGrace(ttl time.Duration) time.Duration { return min(10*time.Second, maxGrace(ttl)) }

// maxGrace is the longest --kill-grace that a lease of ttl allows.
func maxGrace(ttl time.Duration) time.Duration { return ttl / 3 }

// killMargin is how long before ValidUntil the SIGKILL is sent: time for
// distlock to be scheduled and for the kernel to end the processes.
func killMargin(ttl time.Duration) time.Duration { return ttl / 20 }

// planFits reports whether a lease valid until validUntil leaves the kill
// plan of ttl and grace sound at now: its SIGTERM comes half a TTL from
// now or later. Whatever the lease's length (the TTL, or less if it was
// granted), the watchdog renews it at the latest a third of that length
// after the request the lease is measured from, which was sent before
// now: within a third of the TTL from now. Half a TTL leaves at least a
// sixth of it for failed renewals to be retried before the command is
// asked to stop. A lease just taken by distlock's own request, of the
// TTL, fits unless that request took more than about a tenth of the TTL
// (grace is at most a third of it, the margins are TTL/50 and TTL/20).
func planFits(validUntil, now time.Time, ttl, grace time.Duration) bool {
	return validUntil.Sub(now)-killMargin(ttl)-grace >= ttl/2
}
