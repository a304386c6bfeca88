package store

import (
	"context"
	"time"
)

// The interfaces below are what a Store may do beyond locking. Package
// distlock finds them by type assertion; a store that does not implement
// one makes the operations that need it fail with an error wrapping
// ErrUnsupported, before any request. A store that implements one but
// cannot serve a particular request returns an error wrapping
// ErrUnsupported from the method.

// A Validator says, before any request, what a store cannot serve.
type Validator interface {
	// Err returns the error that every request of the store fails with,
	// because it was made with invalid settings (wrapping
	// ErrInvalidOption), or nil.
	Err() error
	// Validate returns an error wrapping ErrUnsupported when the store
	// does not serve locks of kind at all, or ErrInvalidOption when it
	// cannot keep a lease of lease (or, for a queued kind, a place lasting
	// queue): too short for the store to renew it safely. An Extend is
	// checked with queue 0.
	Validate(kind Kind, lease, queue time.Duration) error
}

// An Inspector reads a lock's state, for operators and for the election's
// Leader.
type Inspector interface {
	Inspect(ctx context.Context, name string) (State, error)
}

// A Lister lists the locks that are held now.
type Lister interface {
	// List returns, in any order, the names of the locks held now that
	// match the glob pattern, read as Redis's SCAN MATCH reads it (as
	// the Client's List says): * matches any characters, / included,
	// ? one character, [abc] one of a class, and \ escapes the next one.
	List(ctx context.Context, pattern string) ([]string, error)
}

// A ForceUnlocker deletes a lock whoever holds it.
type ForceUnlocker interface {
	// ForceUnlock deletes the named lock whoever holds it (every holder)
	// and hands it on: a plain mutex's waiters are told, a queued kind
	// goes to the first in line. The holders' processes are told if the
	// store is a RevokeWatcher. It reports whether there was a lock to
	// delete.
	ForceUnlock(ctx context.Context, name string) (bool, error)
}

// A Revoker revokes a lock without freeing it.
type Revoker interface {
	// Revoke marks every holder of the named lock revoked: its process is
	// told (see RevokeWatcher), its renewals are refused from now on
	// (ErrNotHeld), and the lock stays held until they release it or
	// their leases run out. It returns how long that may take at most, or
	// 0 if the lock was not held.
	Revoke(ctx context.Context, name string) (time.Duration, error)
}

// A OnceKeeper keeps the records of the jobs that run once (Client.Once
// and Client.OncePer).
type OnceKeeper interface {
	// CheckOnce reads the record of the job name and the period the
	// store's clock is in, for periods of period (period 0: a job per
	// key, and the period returned is 0). ok is false when there is no
	// record.
	CheckOnce(ctx context.Context, name string, period time.Duration) (now uint64, rec Record, ok bool, err error)
	// RecordOnce records that the job name ran, as rec says, for keep, if
	// and only if the lock name is still held with token rec.Token (the
	// job's hold): it reports false, and records nothing, when it is
	// not. A record that the store applied but could not confirm durable
	// is reported true with an error.
	RecordOnce(ctx context.Context, name string, rec Record, keep time.Duration) (bool, error)
	// ForgetOnce deletes the record of the job name, and reports whether
	// it had one.
	ForgetOnce(ctx context.Context, name string) (bool, error)
}

// A PermitSetter changes a semaphore's capacity.
type PermitSetter interface {
	// SetPermits sets the capacity of the named semaphore to n: waiters
	// whose permits now fit are let in at once; permits held are never
	// revoked. It returns the capacity before (0 if it was not set) and
	// the permits held after those grants.
	SetPermits(ctx context.Context, name string, n int) (before, held int, err error)
}

// A LeaderWatcher tells of an election's leaders as they change.
type LeaderWatcher interface {
	// WatchLeader delivers the announcements of the named election to fn,
	// in the order the store made them, until the returned stop is
	// called; fn gets lost set (and a zero Announcement) when some may
	// have been lost (a reconnection). It returns once they are flowing.
	// fn must not block.
	WatchLeader(ctx context.Context, name string, fn func(a Announcement, lost bool)) (stop func(), err error)
}

// A SystemNamer names what a store keeps its locks in, for the metrics and
// traces of distlock's observers: "redis", "redlock", "etcd",
// "postgresql", "mysql" (MariaDB too). A store that does not implement
// it is reported as "other".
type SystemNamer interface {
	System() string
}
