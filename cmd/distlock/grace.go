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

// defaultGrace is the --kill-grace of a run that does not set it: 10s,
// or maxGrace(ttl) if that is shorter.
func defaultGrace(ttl time.Duration) time.Duration { return min(10*time.Second, maxGrace(ttl)) }

// maxGrace is the longest --kill-grace that a lease of ttl allows.
func maxGrace(ttl time.Duration) time.Duration { return ttl / 3 }

// killMargin is how long before ValidUntil the SIGKILL is sent: time for
// distlock to be scheduled and for the kernel to end the processes.
func killMargin(ttl time.Duration) time.Duration { return ttl / 20 }
