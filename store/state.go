package store

import "time"

// A State is what an Inspector reports about one lock.
type State struct {
	// Kind is the kind of lock the name is in use as (a read-write lock
	// is reported as Write, whoever holds it); InUse is false when nobody
	// holds it or waits in its queue, and Kind then means nothing. A free
	// lock whose queue has places is in use: its queue tells the kind.
	Kind  Kind
	InUse bool

	Holders   []Holder      // one for a mutex, any number of readers, or one writer
	TTL       time.Duration // the lock's remaining lease (its last holder's); < 0 when free
	LastToken uint64        // last fencing token issued; 0 when the store no longer knows it
	Queued    int           // live places in the queue (queued kinds)
	// QueuedReaders and QueuedWriters split Queued for a read-write lock.
	QueuedReaders, QueuedWriters int
	// Capacity, Used and QueuedPermits are a semaphore's permits: its
	// capacity (0 if not set), those held, those waited for.
	Capacity, Used, QueuedPermits int
	// Watchers is how many processes wait for a plain mutex's release
	// notice, where the store can tell (0 otherwise).
	Watchers int
}

// Locked reports whether anyone holds the lock.
func (s State) Locked() bool { return len(s.Holders) > 0 }

// Holder returns the holder of a mutex (the first holder of a read-write
// lock), or the zero Holder when the lock is free.
func (s State) Holder() Holder {
	if len(s.Holders) == 0 {
		return Holder{}
	}
	return s.Holders[0]
}

// A Holder is one owner that holds a lock.
type Holder struct {
	Owner   string // the owner id: secret, never shown (OwnerID is)
	Token   uint64
	Holds   int
	Writes  int    // of the holds, those on the write side of a read-write lock
	Permits int    // a semaphore's permits held (1 for the other kinds)
	Value   string // an election's leader's value
	Host    string // the holder's host name and process id, as its store recorded them
	PID     int
	Since   time.Time     // when it took the lock, by its own clock
	TTL     time.Duration // what is left of the owner's lease
	Revoked bool          // revoked (Revoker): it is told to stop, and its renewals are refused
}

// A Record says that a job that runs once has run: in which period (0 for
// a job per key), by which holder of its lock, when, and how it ended.
type Record struct {
	Period uint64
	Token  uint64
	At     time.Time
	PID    int
	Host   string
	Err    string // the job's error, "" if it succeeded
}

// An Announcement is what a LeaderWatcher delivers: a new leader of an
// election, or, with Term 0, that nobody leads.
type Announcement struct {
	Term uint64
	// Ended is, when nobody leads, the term that ended; 0 when it is not
	// known.
	Ended uint64
	Value string
	ID    string // the leader's owner, as OwnerID shows it
	Host  string
	PID   int
	Since time.Time
}
