package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// A locker is the lock that run takes: a mutex, plain or fair, one side
// of a read-write lock, or permits of a semaphore.
type locker interface {
	Name() string
	// Err is the error that the lock's name or options make every method
	// return, found without contacting Redis.
	Err() error
	// Lock waits for the lock, TryLock tries once.
	Lock(ctx context.Context) (*distlock.Lease, error)
	TryLock(ctx context.Context) (*distlock.Lease, error)
	// kind is the kind of lock it is.
	kind() lockKind
	// describe reads who holds the lock and who waits for it.
	describe(ctx context.Context) (lockDesc, error)
}

// A mutexLocker is a plain or a fair mutex.
type mutexLocker struct {
	*distlock.Mutex
	fair bool
}

func (m mutexLocker) kind() lockKind {
	if m.fair {
		return kindFairMutex
	}
	return kindMutex
}

func (m mutexLocker) describe(ctx context.Context) (lockDesc, error) {
	info, err := m.Inspect(ctx)
	if err != nil {
		return lockDesc{}, err
	}
	return describeMutex(info), nil
}

// An rwLocker is the read side of a read-write lock if shared, else its
// write side.
type rwLocker struct {
	rw     *distlock.RWMutex
	shared bool
}

func (l rwLocker) Name() string   { return l.rw.Name() }
func (l rwLocker) Err() error     { return l.rw.Err() }
func (l rwLocker) kind() lockKind { return kindRWMutex }

func (l rwLocker) Lock(ctx context.Context) (*distlock.Lease, error) {
	if l.shared {
		return l.rw.RLock(ctx)
	}
	return l.rw.Lock(ctx)
}

func (l rwLocker) TryLock(ctx context.Context) (*distlock.Lease, error) {
	if l.shared {
		return l.rw.TryRLock(ctx)
	}
	return l.rw.TryLock(ctx)
}

func (l rwLocker) describe(ctx context.Context) (lockDesc, error) {
	info, err := l.rw.Inspect(ctx)
	if err != nil {
		return lockDesc{}, err
	}
	return describeRW(info), nil
}

// A semLocker is permits of a semaphore: Lock and TryLock take that many.
type semLocker struct {
	sem     *distlock.Semaphore
	permits int
}

func (l semLocker) Name() string   { return l.sem.Name() }
func (l semLocker) Err() error     { return l.sem.Err() }
func (l semLocker) kind() lockKind { return kindSemaphore }

func (l semLocker) Lock(ctx context.Context) (*distlock.Lease, error) {
	return l.sem.Acquire(ctx, l.permits)
}

func (l semLocker) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return l.sem.TryAcquire(ctx, l.permits)
}

func (l semLocker) describe(ctx context.Context) (lockDesc, error) {
	info, err := l.sem.Inspect(ctx)
	if err != nil {
		return lockDesc{}, err
	}
	return describeSem(info), nil
}

// A lockDesc says who holds a lock and who waits for it, for the messages
// of run: "held by web-1/4242", then, if one owner holds it, how long
// ago it took the lock and its remaining lease, then who waits.
type lockDesc struct {
	name    string
	free    bool
	holders string        // "held by HOST/PID", "held shared by 3 readers", ...
	one     bool          // one owner holds the lock, since ... with ttl
	since   time.Time     // when it took the lock
	ttl     time.Duration // what is left of its lease
	queue   string        // ", 2 queued", ", with 1 reader and 1 writer queued", or ""
	id      string        // changes when the holders change
}

// progress describes the lock while run waits for it:
// "held by web-1/4242, ttl 18s, 3 queued".
func (d lockDesc) progress() string {
	if d.free {
		return "it is free, acquiring" + d.queue
	}
	s := d.holders
	if d.one {
		s += ", ttl " + formatTTL(d.ttl)
	}
	return s + d.queue
}

// message describes the lock when run did not get it:
// "held by web-1/4242 for 3m12s, ttl 27s, 3 queued".
func (d lockDesc) message() string {
	if d.free {
		return "free again now" + d.queue
	}
	s := d.holders
	if d.one {
		s += fmt.Sprintf(" for %s, ttl %s", formatAge(d.since), formatTTL(d.ttl))
	}
	return s + d.queue
}

// describeMutex describes the state of a plain or fair mutex.
func describeMutex(info distlock.LockInfo) lockDesc {
	d := lockDesc{name: info.Name, free: !info.Locked}
	if info.Locked {
		d.holders = "held by " + holderString(info.Holder)
		d.one, d.since, d.ttl, d.id = true, info.Holder.Since, info.TTL, info.Holder.ID
	}
	if info.Queued > 0 {
		d.queue = fmt.Sprintf(", %d queued", info.Queued)
	}
	return d
}

// describeRW describes the state of a read-write lock.
func describeRW(info distlock.RWLockInfo) lockDesc {
	d := lockDesc{name: info.Name}
	switch {
	case info.Writer != nil:
		w := info.Writer
		d.holders = "held exclusively by " + holderString(w.Holder)
		d.one, d.since, d.ttl, d.id = true, w.Since, w.TTL, "w "+w.ID
	case len(info.Readers) == 1:
		r := info.Readers[0]
		d.holders = "held shared by " + holderString(r.Holder)
		d.one, d.since, d.ttl, d.id = true, r.Since, r.TTL, "r "+r.ID
	case len(info.Readers) > 1:
		d.holders = fmt.Sprintf("held shared by %d readers", len(info.Readers))
		ids := make([]string, len(info.Readers))
		for i, r := range info.Readers {
			ids[i] = r.ID
		}
		d.id = "r " + strings.Join(ids, " ")
	default:
		d.free = true
	}
	if q := queuedRW(info.QueuedReaders, info.QueuedWriters); q != "" {
		d.queue = ", with " + q + " queued"
	}
	return d
}

// describeSem describes the state of a semaphore: "held with 2/3 permits
// in use by 2 holders, 1 queued for 2 permits".
func describeSem(info distlock.SemaphoreInfo) lockDesc {
	d := lockDesc{name: info.Name}
	switch len(info.Holders) {
	case 0:
		d.free = true
	case 1:
		h := info.Holders[0]
		d.holders = fmt.Sprintf("held with %s in use by %s", permitsInUse(info), holderString(h.Holder))
		d.one, d.since, d.ttl = true, h.Since, h.TTL
	default:
		d.holders = fmt.Sprintf("held with %s in use by %d holders", permitsInUse(info), len(info.Holders))
	}
	ids := make([]string, len(info.Holders))
	for i, h := range info.Holders {
		ids[i] = h.ID
	}
	d.id = strings.Join(ids, " ")
	if info.Queued > 0 {
		d.queue = fmt.Sprintf(", %d queued for %s", info.Queued, plural(info.QueuedPermits, "permit"))
	}
	return d
}

// permitsInUse says how many of a semaphore's permits are in use: "2/3
// permits", or "2 permits" if Redis keeps no capacity (it has expired).
func permitsInUse(info distlock.SemaphoreInfo) string {
	if info.Capacity == 0 {
		return plural(permitsHeld(info), "permit")
	}
	return fmt.Sprintf("%d/%d permits", permitsHeld(info), info.Capacity)
}

// permitsHeld is the number of a semaphore's permits that its holders
// hold. It is not info.InUse, which still counts the permits of a holder
// whose lease has ended until the semaphore is next acquired or released
// (Inspect leaves such a holder out of info.Holders).
func permitsHeld(info distlock.SemaphoreInfo) int {
	n := 0
	for _, h := range info.Holders {
		n += h.Permits
	}
	return n
}

// queuedRW says how many readers and writers wait for a read-write lock:
// "1 reader and 2 writers", "3 readers", or "" if none.
func queuedRW(readers, writers int) string {
	switch {
	case readers > 0 && writers > 0:
		return plural(readers, "reader") + " and " + plural(writers, "writer")
	case readers > 0:
		return plural(readers, "reader")
	case writers > 0:
		return plural(writers, "writer")
	}
	return ""
}

// plural says "1 reader" or "2 readers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
