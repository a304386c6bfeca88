package distlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// An RWMutex is a read-write lock shared by every process that uses the
// same name (and key prefix) on the same Redis: any number of owners hold
// its read side at once, or one owner holds its write side, never both.
// Client.RWMutex returns it.
//
// Waiters of both sides, in every process, queue in Redis in the order
// their requests arrived (the fair mutex's queue), so no writer starves: a
// reader that arrives while a writer waits queues behind it. A release
// lets in the first writer alone, or every reader at the head of the
// queue up to the next writer. Each acquisition is an owner of its own,
// with its own lease renewed by the watchdog (in the same batches as the
// mutexes): a reader that dies delays the writers by no more than its own
// lease, whatever the other readers do.
//
// Re-entry follows contexts, as for Mutex: calling RLock with a Lease's
// Context adds a read hold to that owner, Lock with a write Lease's Context
// a write hold. A writer may take the read side with its write lease's
// context (downgrade): once it unlocks its write leases it still reads,
// and no writer gets in between; readers waiting at the head of the queue
// join it then. The reverse, Lock with a context that holds only the read
// side (upgrade), could never be granted, since the caller's own read hold
// keeps writers out: it fails at once with ErrDeadlock.
//
// Fencing tokens: every acquisition, of either side, gets a token strictly
// greater than every token issued before for the name. So a writer's token
// is above the token of every earlier reader and writer, and a reader's
// token is above that of every writer that held the lock before it read: a
// resource that has seen a read with token t can refuse a write with a
// token below t (that writer's lease had ended before the read began).
// Holds added by re-entry, including a downgrade's read hold, share their
// owner's token.
type RWMutex struct {
	lock
	read, write engine.Spec
}

// RWMutex returns the named read-write lock. It is cheap and does not
// contact Redis. A name is used by one kind of lock at a time: acquiring
// it as a Mutex or FairMutex while it is used as an RWMutex, or the
// reverse, fails with ErrWrongKind. The options are those of a mutex:
// WithTTL or WithFixedLease set the lease of each acquisition,
// WithQueueTimeout how long a waiter keeps its place without refreshing it.
func (c *Client) RWMutex(name string, opts ...MutexOption) *RWMutex {
	lk, spec := c.lock(name, engine.Write, opts)
	m := &RWMutex{lock: lk, write: spec, read: spec}
	m.read.Kind = engine.Read
	return m
}

// Name is the name of the lock.
func (m *RWMutex) Name() string { return m.name }

// Err returns, without contacting the store, the error every method of m
// returns because its name or an option is invalid, or nil.
func (m *RWMutex) Err() error { return m.check("rwmutex") }

// Lock takes the write side: it blocks until no one else holds either
// side, in its turn in the queue, or until ctx ends (the error then wraps
// ErrNotAcquired and the context's cause). With a context that holds the
// write side, it re-enters; with one that holds only the read side, it
// fails at once with ErrDeadlock.
func (m *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "lock", m.write, true)
}

// TryLock takes the write side if no one holds either side and no one
// waits; otherwise it fails with ErrNotAcquired. It never queues.
func (m *RWMutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try-lock", m.write, false)
}

// RLock takes the read side: it blocks until no one holds the write side
// and no writer waits ahead of it, or until ctx ends. With a context that
// holds either side, it adds a read hold to that owner at once (a writer
// that reads too: see the downgrade above).
func (m *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "rlock", m.read, true)
}

// TryRLock takes the read side if no one holds the write side and no one
// waits; otherwise it fails with ErrNotAcquired. It never queues, and
// never passes a waiting writer.
func (m *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return m.acquire(ctx, "try-rlock", m.read, false)
}

// RWLockInfo is a snapshot of a read-write lock's state.
type RWLockInfo struct {
	Name string
	// Mode is "write" while an owner holds the write side, "read" while
	// only readers hold it, and "" when it is free.
	Mode string
	// Writer is the owner that holds the write side, when Mode is "write";
	// it may hold read holds too.
	Writer *RWHolder
	// Readers are the owners that hold the read side only (a writer that
	// unlocked its write leases after a downgrade is one of them).
	Readers []RWHolder
	// LastToken is the last fencing token issued for this name, 0 if its
	// counter has expired (see redisstore.WithFenceRetention).
	LastToken uint64
	// QueuedReaders and QueuedWriters count the waiters in the queue
	// (places that have not expired), in any process.
	QueuedReaders, QueuedWriters int
	// Kind is the kind of lock the name is in use as: KindRWMutex or KindFree.
	// If it is another kind (a mutex, a semaphore), the fields above are
	// zero but for Name and LastToken.
	Kind Kind
}

// An RWHolder is one owner that holds a read-write lock.
type RWHolder struct {
	Holder
	Token uint64
	Holds int           // its holds (re-entries), of both sides
	TTL   time.Duration // what is left of its lease
}

// Inspect reads the lock's state in one round trip.
func (m *RWMutex) Inspect(ctx context.Context) (RWLockInfo, error) {
	st, err := m.state(ctx)
	if err != nil {
		return RWLockInfo{}, opErr("inspect", m.name, err)
	}
	info := RWLockInfo{Name: m.name, LastToken: st.LastToken, Kind: kindOf(st)}
	if info.Kind != KindRWMutex && info.Kind != KindFree {
		return info, nil
	}
	info.QueuedReaders, info.QueuedWriters = st.QueuedReaders, st.QueuedWriters
	for _, h := range st.Holders {
		rh := RWHolder{Holder: holder(h), Token: h.Token, Holds: h.Holds, TTL: h.TTL}
		if h.Writes > 0 {
			info.Writer = &rh
		} else {
			info.Readers = append(info.Readers, rh)
		}
	}
	switch {
	case info.Writer != nil:
		info.Mode = "write"
	case len(info.Readers) > 0:
		info.Mode = "read"
	}
	return info, nil
}

// ForceUnlock deletes the lock whoever holds it, every reader and the
// writer, and lets the next in the queue in. It is for operators. Each
// holder's process is told, and its lease context is cancelled with
// ErrLockLost within about one round trip (if that notice is lost, at its
// next renewal); until the holders' code stops, they may overlap the next
// holder. It reports whether anyone held the lock.
func (m *RWMutex) ForceUnlock(ctx context.Context) (bool, error) { return m.forceUnlock(ctx) }

// Revoke takes the lock away from every reader and the writer without
// letting anyone else in before they have stopped, as Mutex.Revoke does:
// their lease contexts are cancelled with ErrLockLost within about one
// round trip, their renewals are refused, and the lock is let go to the
// next in the queue once each holder has released it or its lease has run
// out. It returns the longest remaining lease of a holder, 0 if nobody
// held the lock.
func (m *RWMutex) Revoke(ctx context.Context) (time.Duration, error) { return m.revoke(ctx) }
