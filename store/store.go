package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"time"
)

// A Store keeps locks. The Client (package distlock) drives it: it
// decides when to try, wait, renew and give up; the store makes each of
// those one atomic step and delivers notices (releases and grants). A
// store serves one Client: the Client closes it, and a store that ignores
// its own releases (as it may, see Watch) would keep a second Client's
// waiters from hearing of the first one's.
//
// Every method must be safe for concurrent use. Errors that come from the
// store must wrap ErrBackend. A request may be applied even when its
// method returned an error (a lost reply), and even later (a request held
// up in the network): the Client counts on the guarantees below to make
// such late requests harmless. An error that also wraps ErrUnsent says
// that the request never reached the store, in any attempt: the Client
// then cleans nothing up after it.
//
// # Kinds
//
// A name is used by one Kind of lock at a time: a request of another kind
// than the lock in use fails with an error wrapping ErrWrongKind and leaves
// that lock untouched. Plain locks are raced for: a waiter retries when it
// is notified of a release. Queued kinds keep their waiters on the store,
// in places ordered by arrival, and the store grants the lock to the
// first place in line itself when the lock is freed (by a release, an
// abandonment, a force-unlock, or the end of the holder's lease seen by a
// refresh).
//
// # Places and grants
//
// A place lasts r.Queue after the last request of its owner that set or
// refreshed it, and is then dropped: a waiter that died, was paused or was
// cut off never stalls the queue longer than that. A grant makes the
// place's owner the holder, with its first hold (id 1) and a fresh token;
// the granted lock expires when the place would have, or r.Lease after the
// grant if that is sooner, so a grantee that died stalls the queue no
// longer than a place would. A grant reports the Seq of the place's last
// applied request and a Lease such that the lock expires no earlier than
// Lease after that request was applied (min(r.Lease, r.Queue)); the Client
// renews a granted lease to r.Lease at its first renewal. A grant is told
// to the grantee's Watch as a Notice, and to its next refresh. A store that
// sees a place go (it expired, or was deleted) may tell its Watch too (a
// Notice with Gone): the Client then queues its waiter again at once,
// rather than at the place's next refresh.
type Store interface {
	// Acquire makes one attempt to take the lock for r.Owner, or to add
	// hold r.Hold to it if r.Owner holds it already. It is idempotent:
	// repeating a request that succeeded changes nothing. It never takes
	// the lock for an owner that was abandoned (see Abandon), and with
	// r.Reenter it never takes a free lock.
	//
	// For a queued kind, Acquire takes the lock only if it is free and
	// nobody waits for it (or r.Owner is first in line), setting the lease
	// r.Lease. Otherwise, if r.Queue > 0, it gives r.Owner a place at the
	// back of the queue (Grant.Queued; a repeated request keeps the place
	// it has), recording r.Seq; with r.Queue 0 (a TryLock) it never
	// queues.
	Acquire(ctx context.Context, r Request) (Grant, error)

	// AcquireAll takes the plain mutexes of rs (each for its own r.Owner,
	// hold 1, lease r.Lease) together, in rs's order, in as few round trips
	// as the store allows: the members that the store can take in one
	// atomic step are all taken or none. It returns a grant per request
	// tried: all of them Acquired, or ending with the member held by
	// another owner, not Acquired, with its holder's remaining lease (the
	// members after it are not tried; the members before it in the same
	// step are not Acquired; those a separate step took are, and the
	// Client abandons them). A member of another kind stops it with an
	// error wrapping ErrWrongKind, beside the grants so far. Repeating a
	// request that succeeded changes nothing.
	AcquireAll(ctx context.Context, rs []Request) ([]Grant, error)

	// Release removes hold r.Hold of r.Owner and frees the lock when no
	// hold is left, notifying waiters or granting the lock to the first in
	// line; r.Hold 0 removes every hold of the owner at once, and its
	// place in a queue. It is idempotent.
	Release(ctx context.Context, r Request) (Release, error)

	// Abandon gives up owner r.Owner for good: it removes every hold of
	// the owner (freeing the lock as Release does) and its place in a
	// queue, and makes every Acquire and refresh of r.Owner that reaches
	// the store within r.Lease from now fail. It reports whether it freed
	// the lock.
	Abandon(ctx context.Context, r Request) (freed bool, err error)

	// Renew keeps leases and places alive, in as few round trips as the
	// store allows: a request with r.Queue > 0 refreshes a place, any
	// other sets the lease of a held lock. It calls report once for each
	// request, as soon as its outcome is known (possibly from several
	// goroutines at once), and returns after the last call. It must not
	// keep rs: the caller reuses it once Renew has returned.
	//
	// A lease is set to r.Lease if the lock is still owned by r.Owner.
	// err is nil when the lease was set (by this request, or by an earlier
	// copy of it); an error wrapping ErrNotHeld when the lock is not owned
	// by r.Owner (nothing changed); ErrSuperseded when a request of the
	// owner with a higher r.Seq was applied before (nothing changed); any
	// other error when the outcome is unknown. A renewal never lowers the
	// Seq of the last applied request, so a late one cannot undo a later
	// one.
	//
	// A place is made to last r.Queue from now, and records r.Seq (unless
	// a higher one was applied). If r.Owner holds the lock (granted, or
	// taken by this refresh: the lock was free and the place first in
	// line), the Grant is Acquired, with the token, Seq and Lease of the
	// grant (see Notice). Otherwise it is Queued, and its TTL is the
	// holder's remaining lease if the place is first in line (else -1).
	// An error wrapping ErrNotHeld means the place is gone (it expired, or
	// the owner was abandoned): a refresh never makes a place.
	Renew(ctx context.Context, rs []Request, report func(i int, g Grant, err error))

	// Watch delivers the notices of the named lock that concern this
	// process to wake, until the returned stop is called: for a plain
	// kind, releases (a zero Notice); for a queued kind, grants to owners
	// of this Store, and the end of their places if the store sees it. It returns once notices are flowing, so one sent
	// after Watch returns is never missed. wake gets a zero Notice when
	// notices may have been lost (a reconnection). Releases made through
	// this Store itself are not delivered (the Client hands those over
	// to its waiters directly when the call returns); grants always are,
	// and so is a release that frees the lock after the call returned (a
	// quorum's late member). wake must not block.
	Watch(ctx context.Context, name string, kind Kind, wake func(Notice)) (stop func(), err error)

	// Close releases what the store itself holds (subscriptions,
	// connections it opened), once the Client has released its locks and
	// stopped its requests. It does not close clients the caller passed to
	// the store's constructor.
	Close() error
}

// A RevokeWatcher is a Store that tells holders when their lock was deleted
// (a force-unlock), so that a hold ends at once rather than at its next
// renewal. The Client uses it when its Store implements it.
type RevokeWatcher interface {
	// WatchRevoked delivers to fn, until stop is called, the name of each
	// lock deleted from an owner that may be of this Client, with that
	// owner's GranteeID; fn must not block. It returns once notices are
	// flowing. Notices may be lost (the holder then learns at its next
	// renewal) or concern owners of other Clients.
	WatchRevoked(ctx context.Context, fn func(name, grantee string)) (stop func(), err error)
}

// A GrantConfirmer is a Store whose grants count only once the grantee
// itself has confirmed them. A grant that reaches a waiter through a
// Notice or a refresh was written by someone else's request (a release,
// an abandonment, the refresh that found it), which the store could not
// vouch for on the grantee's behalf: before the Client hands such a lock
// out, it renews the lease (Renew, to the hold's lease) and waits for that
// renewal's outcome. If the renewal is not confirmed, the lock is given up
// (Abandon: the next in line is granted it) and the acquisition fails with
// the renewal's error. A lock taken by the grantee's own Acquire needs no
// confirmation: Acquire answers for it.
//
// The Redis store confirms grants under replica acknowledgement: the
// renewal is the grantee's own write, and the WAIT that follows it on the
// same connection covers the grant, written before it in the one
// replication stream.
type GrantConfirmer interface {
	// ConfirmGrants reports whether grants must be confirmed.
	ConfirmGrants() bool
}

// A Kind is a kind of lock. Kinds never mix: a name is used by one kind at
// a time. Plain is distlock's Mutex, Fair its FairMutex, Read and Write
// the two sides of its RWMutex; String gives the names distlock.Kind
// uses.
type Kind int

const (
	// Plain is a mutex whose waiters race for it when it is freed.
	Plain Kind = iota
	// Fair is a mutex whose waiters queue on the store and are granted
	// the lock in arrival order.
	Fair
	// Read and Write are the two sides of a read-write lock (one kind of
	// lock for the store): any number of owners read, or one writes. Their
	// waiters share one queue, in arrival order: a reader that arrives
	// after a waiting writer waits behind it.
	Read
	Write
	// Election is a fair mutex whose holder leads, with Request.Value: the
	// store tells the election's observers of each new leader.
	Election
	// Semaphore is a lock of Request.Capacity permits, of which each owner
	// holds Request.Permits. Waiters queue in arrival order, and a release
	// lets in the first ones whose permits fit, in order. It is not
	// re-entrant: every acquisition is an owner of its own.
	Semaphore
)

// Queued reports whether waiters of the kind keep places in a queue on the
// store.
func (k Kind) Queued() bool { return k != Plain }

// String names the kind as package distlock's Kind does (a side of a
// read-write lock by its side: "read" or "write").
func (k Kind) String() string {
	switch k {
	case Plain:
		return "mutex"
	case Fair:
		return "fair-mutex"
	case Read:
		return "read"
	case Write:
		return "write"
	case Election:
		return "election"
	case Semaphore:
		return "semaphore"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// A Notice tells waiters that a lock was released (the zero Notice) or
// granted. A grant names its grantee by GranteeID (the owner id itself is
// secret and never sent), the fencing token, the Seq of the grantee's last
// request that the store applied before the grant, and a Lease: the
// granted lock expires no earlier than Lease after the store applied
// request Seq (it bounds the lease from below). A Notice with Gone says
// instead that the grantee's place is gone without a grant: its next
// refresh would fail with ErrNotHeld.
type Notice struct {
	Grantee string
	Token   uint64
	Seq     uint64
	Lease   time.Duration
	Gone    bool
}

// GranteeID is how a Notice names the owner of a grant: the hex SHA-1 of
// the owner id.
func GranteeID(owner string) string {
	sum := sha1.Sum([]byte(owner))
	return hex.EncodeToString(sum[:])
}

// OwnerID is how an owner is shown to people (inspection, announcements,
// status): the first 16 hex digits of the SHA-1 of its id, so that
// showing it does not let anyone release the lock.
func OwnerID(owner string) string {
	sum := sha1.Sum([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

// AbandonFor is how long a store must refuse an abandoned owner's late
// requests (Store.Abandon is called with this lease): a request held up
// in the network, or in a frozen server, for longer than that can still
// take the lock, for one lease, in the name of an owner that no one
// tracks.
func AbandonFor(lease time.Duration) time.Duration {
	return max(2*lease, time.Minute)
}

// AcquireEach is AcquireAll for a store that takes one lock at a time:
// each request with Acquire, in order, until one is not acquired or
// fails.
func AcquireEach(ctx context.Context, s Store, rs []Request) ([]Grant, error) {
	gs := make([]Grant, 0, len(rs))
	for _, r := range rs {
		g, err := s.Acquire(ctx, r)
		if err != nil {
			return gs, err
		}
		gs = append(gs, g)
		if !g.Acquired {
			break
		}
	}
	return gs, nil
}

// A Request names one hold of one lock, or one place in its queue.
type Request struct {
	Name  string // lock name, already validated
	Kind  Kind
	Owner string // owner id, unique per acquisition
	Hold  uint64 // hold id, unique within the owner
	// Lease is the lease to set (Acquire of a free lock, Renew, and, for a
	// place, the lease its grant leads to); in Abandon, how long to refuse
	// the owner.
	Lease time.Duration
	// Queue is how long a place in the queue of a queued kind lasts
	// without a refresh; 0 never queues (TryLock). In Renew, a request
	// with Queue > 0 refreshes a place.
	Queue time.Duration
	// Seq numbers the requests of an owner that set a lease or a place:
	// increasing, from 1 (the acquisition of a queued kind; its refreshes
	// and renewals continue the count).
	Seq uint64
	// Value is an Election candidate's value, the leader's once it leads.
	Value string
	// Permits is how many permits of a Semaphore the request is for, and
	// Capacity the semaphore's capacity as the caller knows it: the store
	// keeps the capacity it has (set by its first user, or by an operator)
	// and reports it in the Grant.
	Permits, Capacity int
	// Reenter makes Acquire only add a hold to a lock the owner already
	// holds, never take a free one. Kind is then the kind of the new hold:
	// Read in a Write hold adds a read hold (the owner still reads once its
	// write holds are released); Write in an owner that holds no write hold
	// any more is refused with an error wrapping ErrDeadlock.
	Reenter bool
}

// A Grant is the outcome of one Acquire attempt, or of a place's refresh.
type Grant struct {
	Acquired bool
	Queued   bool   // not Acquired: the owner has a place in the queue
	Token    uint64 // fencing token of the owner's hold, when Acquired
	Holds    int    // the owner's hold count, when Acquired by Acquire
	// Seq and Lease describe a grant reported by Renew: see Notice.
	Seq   uint64
	Lease time.Duration
	TTL   time.Duration // the holder's remaining lease when not Acquired; < 0 when unknown or unbounded
	// Capacity is a semaphore's capacity as the store has it (0 when not
	// said).
	Capacity int
}

// Release is the outcome of a Release.
type Release int

const (
	// Freed: that was the last hold; the lock is free (or granted to the
	// next in line) and waiters were told.
	Freed Release = iota
	// Remaining: the hold was removed; the owner has other holds.
	Remaining
	// NotOwner: the owner does not hold the lock (expired or taken over).
	NotOwner
	// AlreadyReleased: the owner holds the lock but not this hold: an
	// earlier attempt of the same release already removed it.
	AlreadyReleased
)
