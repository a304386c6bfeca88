package engine

import (
	"errors"
	"time"
)

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
	WaitEnded                        // a wait that Waiting reported is over, acquired or not
	// Ended: a hold that Acquired reported (Holds 1) is over, for any
	// reason, as its lease contexts are cancelled: before the release is
	// sent (and so before Released), and before Lost and Expired. Err is
	// nil for a release, the loss's cause for a loss.
	Ended
)

// Event describes one thing that happened to one lock.
type Event struct {
	Kind    EventKind
	Name    string
	Lock    Kind          // the kind the lock was taken or awaited as
	Hold    uint64        // the hold's id, unique in the process, for Acquired, Renewed, RenewFailed, Lost, Released, Expired and Ended
	Token   uint64        // fencing token, when held
	Holds   int           // hold count after Acquired
	Wait    time.Duration // how long Acquired waited; the lease for Renewed
	Latency time.Duration // Renewed and RenewFailed: from the renewal's send to its answer (or the give-up)
	Held    time.Duration // Ended: from the acquisition's return to the hold's end
	Reason  LossReason    // Lost, Expired, and Ended by either: why
	Err     error         // the cause of RenewFailed, Lost, Expired and Ended
}

// A LossReason says why a hold ended before its release: see
// distlock.LossReason, which names the same values.
type LossReason string

// The reasons, as distlock documents them.
const (
	LossGone          LossReason = "gone"           // the store no longer has the lock for this owner
	LossRevoked       LossReason = "revoked"        // an operator revoked or force-unlocked it
	LossRenewalFailed LossReason = "renewal-failed" // the lease deadline passed unconfirmed
	LossExpired       LossReason = "expired"        // a fixed lease ran its course (Expired, not Lost)
)

// A lostError is the cause of a loss: it wraps ErrLockLost and says why.
type lostError struct {
	reason LossReason
	msg    string
}

func (e *lostError) Error() string { return ErrLockLost.Error() + ": " + e.msg }
func (e *lostError) Unwrap() error { return ErrLockLost }

// lostErr is the cause of a loss for reason, described by msg.
func lostErr(reason LossReason, msg string) error { return &lostError{reason: reason, msg: msg} }

// ReasonOf is the reason of the loss or expiry whose cause is err, "" if
// err is neither.
func ReasonOf(err error) LossReason {
	if err == nil { // a release: no allocation on the common path
		return ""
	}
	var le *lostError
	switch {
	case errors.As(err, &le):
		return le.reason
	case errors.Is(err, ErrLeaseExpired):
		return LossExpired
	}
	return ""
}
