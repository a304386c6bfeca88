package engine

import "time"

// EventKind says what happened to a lock.
type EventKind int

// The events the engine reports.
const (
	Acquired    EventKind = iota + 1 // a hold was taken (Holds > 1: re-entry)
	Waiting                          // an acquirer found the lock taken and waits
	Renewed                          // the watchdog extended a lease
	RenewFailed                      // a renewal could not be confirmed; it is retried until the deadline
	Lost                             // the lock was lost; the lease context is cancelled
	Released                         // the lock was released by its holder
	Mismatch                         // the store's state disagrees with this client's (a semaphore's capacity); Err says how
	Expired                          // a fixed lease ran its course; the lease context is cancelled
)

// Event describes one thing that happened to one lock.
type Event struct {
	Kind  EventKind
	Name  string
	Token uint64        // fencing token, when held
	Holds int           // hold count after Acquired
	Wait  time.Duration // how long Acquired waited; the lease for Renewed
	Err   error         // the cause of RenewFailed, Lost and Expired
}
