package sqlstore

import (
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/store"
)

// A lockState is one lock as its row's state column keeps it (JSON): its
// holders, the places of its queue, and the owners abandoned on it. It is
// read and written only inside a transaction that holds the row locked
// (FOR UPDATE), so each of its methods is one atomic step of the store,
// as a Lua script is on Redis. Times are the database clock's, in
// microseconds since the epoch, read in that transaction: the expiries
// are the database's, never a client's.
type lockState struct {
	// Kind is the kind of lock the name is in use as while anyone holds
	// it or waits for it ("" otherwise): kindName's names.
	Kind    string    `json:"kind,omitempty"`
	Holders []*holder `json:"holders,omitempty"`
	Queue   []*place  `json:"queue,omitempty"`
	// Marks are the owners given up on this lock (Abandon), with when
	// their mark ends: until then, none of their requests takes anything.
	Marks map[string]int64 `json:"marks,omitempty"`
	// Capacity is a semaphore's, kept until CapacityUntil: no earlier than
	// the last lease or place that counts on it, and the token retention
	// after its last use.
	Capacity      int   `json:"capacity,omitempty"`
	CapacityUntil int64 `json:"capacity_until,omitempty"`
	// Waited is, for a plain mutex, until when a waiter refused by its
	// holder may wait without trying again: its release is told (a
	// NOTIFY costs every committing transaction of the database a global
	// lock) only while that is to come.
	Waited int64 `json:"waited,omitempty"`
}

// A holder is one owner that holds the lock.
type holder struct {
	Owner   string `json:"owner"`
	Token   uint64 `json:"token"`
	Holds   []hold `json:"holds"`
	Permits int    `json:"permits,omitempty"`
	Until   int64  `json:"until"` // the lease ends
	// Seq is the owner's last request applied (its taking, a renewal):
	// a renewal numbered below it changes nothing.
	Seq uint64 `json:"seq"`
	// GSeq and GLease say how the holder got the lock: the lock lasts at
	// least GLease after the store applied the owner's request GSeq.
	GSeq    uint64        `json:"gseq"`
	GLease  time.Duration `json:"glease"`
	Value   string        `json:"value,omitempty"`
	Host    string        `json:"host,omitempty"`
	PID     int           `json:"pid,omitempty"`
	Since   int64         `json:"since"` // when it took the lock, ms, database clock
	Revoked bool          `json:"revoked,omitempty"`
}

// A hold is one acquisition by a holder: its id, and its side of a
// read-write lock ('r' or 'w'; 'm' for the other kinds).
type hold struct {
	ID   uint64 `json:"id"`
	Side byte   `json:"side"`
}

// A place is one owner waiting in the queue of a queued kind.
type place struct {
	Owner   string        `json:"owner"`
	Side    byte          `json:"side"` // 'f' fair mutex, 'e' election, 'r', 'w', 's' semaphore
	Permits int           `json:"permits,omitempty"`
	Seq     uint64        `json:"seq"`
	Lease   time.Duration `json:"lease"` // asked for when it is granted
	Wait    time.Duration `json:"wait"`  // how long it lasts after a refresh
	Until   int64         `json:"until"`
	Value   string        `json:"value,omitempty"`
	Host    string        `json:"host,omitempty"`
	PID     int           `json:"pid,omitempty"`
}

// A step is the context of one step on a lock's state: the database's
// time, the row's fencing counter, and what the step has to tell (grants,
// releases, leaders, revocations), sent when its transaction commits.
type step struct {
	name    string
	now     int64   // µs
	token   *uint64 // the row's last token
	notices []notice
	// quiet is an owner not told of its own grant (it learns it from the
	// step's outcome).
	quiet string
	// retention is how long a semaphore's capacity outlives its last use.
	retention time.Duration
	// relaxed says that the step only gives up what its owner held (a
	// release that grants nothing): a crash that loses it leaves the lock
	// held until the lease ends, which is safe, so its commit need not
	// wait for the disk. A grant or an acquisition must: lost, it would
	// let a second holder in.
	relaxed bool
}

// mint returns a new fencing token: above the row's last one, and no
// lower than the database clock in microseconds, so that tokens keep
// increasing even if the row were deleted and made again.
func (s *step) mint() uint64 {
	t := max(*s.token+1, uint64(max(s.now, 0)))
	*s.token = t
	return t
}

func (s *step) tell(n notice) { s.notices = append(s.notices, n) }

// micros is d in microseconds.
func micros(d time.Duration) int64 { return d.Microseconds() }

// family is the name a request's kind makes the lock: both sides of a
// read-write lock are one lock.
func family(k store.Kind) string {
	if k == store.Read {
		k = store.Write
	}
	switch k {
	case store.Write:
		return "rwmutex"
	}
	return k.String()
}

func sideOf(k store.Kind) byte {
	switch k {
	case store.Read:
		return 'r'
	case store.Write:
		return 'w'
	case store.Fair:
		return 'f'
	case store.Election:
		return 'e'
	case store.Semaphore:
		return 's'
	}
	return 'm'
}

func (l *lockState) holder(owner string) *holder {
	for _, h := range l.Holders {
		if h.Owner == owner {
			return h
		}
	}
	return nil
}

func (l *lockState) place(owner string) (int, *place) {
	for i, p := range l.Queue {
		if p.Owner == owner {
			return i, p
		}
	}
	return -1, nil
}

func (l *lockState) dropPlace(owner string) bool {
	i, _ := l.place(owner)
	if i < 0 {
		return false
	}
	l.Queue = slices.Delete(l.Queue, i, i+1)
	return true
}

func (l *lockState) dropHolder(owner string) *holder {
	for i, h := range l.Holders {
		if h.Owner == owner {
			l.Holders = slices.Delete(l.Holders, i, i+1)
			return h
		}
	}
	return nil
}

func (l *lockState) abandoned(owner string, now int64) bool {
	return l.Marks[owner] > now
}

// tidy forgets the kind of a lock nobody holds or waits for, and a
// semaphore capacity past its time.
func (l *lockState) tidy(now int64) {
	if len(l.Holders) == 0 && len(l.Queue) == 0 {
		l.Kind = ""
	}
	if l.Capacity > 0 && l.CapacityUntil <= now {
		l.Capacity, l.CapacityUntil = 0, 0
	}
	if l.Waited <= now {
		l.Waited = 0
	}
}

// purge removes the marks, places and holders whose time has passed: a
// dead waiter costs at most its queue timeout, a dead holder its lease.
func (l *lockState) purge(now int64) {
	for o, until := range l.Marks {
		if until <= now {
			delete(l.Marks, o)
		}
	}
	l.Queue = slices.DeleteFunc(l.Queue, func(p *place) bool { return p.Until <= now })
	l.Holders = slices.DeleteFunc(l.Holders, func(h *holder) bool { return h.Until <= now })
	l.tidy(now)
}

// ttl is the lock's remaining lease (its last holder's) in a Grant's
// terms: -1 when nobody holds it.
func (l *lockState) ttl(now int64) time.Duration {
	var last int64
	for _, h := range l.Holders {
		last = max(last, h.Until)
	}
	if last <= now {
		return -1
	}
	return time.Duration(last-now) * time.Microsecond
}

// until is when the last holder's lease ends, 0 if nobody holds the lock.
func (l *lockState) until() int64 {
	var last int64
	for _, h := range l.Holders {
		last = max(last, h.Until)
	}
	return last
}

func (h *holder) grant(capacity int) store.Grant {
	return store.Grant{Acquired: true, Token: h.Token, Holds: len(h.Holds), Seq: h.GSeq, Lease: h.GLease,
		Capacity: capacity}
}

func (h *holder) writes() int {
	n := 0
	for _, x := range h.Holds {
		if x.Side == 'w' {
			n++
		}
	}
	return n
}

func (h *holder) hasHold(id uint64) int {
	for i, x := range h.Holds {
		if x.ID == id {
			return i
		}
	}
	return -1
}

// take makes r's owner a holder with a fresh token, a lease that ends in
// expire, and seq, lease as its GSeq and GLease.
func (l *lockState) take(s *step, owner string, side byte, holdID uint64, permits int, expire int64, seq uint64,
	lease time.Duration, value, host string, pid int) *holder {
	h := &holder{Owner: owner, Token: s.mint(), Holds: []hold{{ID: max(holdID, 1), Side: side}}, Permits: permits,
		Until: expire, Seq: seq, GSeq: seq, GLease: lease, Value: value, Host: host, PID: pid, Since: s.now / 1000}
	if side == 's' {
		l.CapacityUntil = max(l.CapacityUntil, expire)
	}
	l.Holders = append(l.Holders, h)
	if side == 'e' {
		s.tell(notice{Type: noticeLeader, Name: s.name, Term: h.Token, Value: value, ID: store.OwnerID(owner),
			Host: host, PID: pid, Since: h.Since})
	}
	return h
}

// used is the permits a semaphore's holders hold.
func (l *lockState) used() int {
	n := 0
	for _, h := range l.Holders {
		n += h.Permits
	}
	return n
}

// admits reports whether the lock takes a new owner of side for n permits
// now, its queue aside.
func (l *lockState) admits(side byte, n int) bool {
	switch side {
	case 's':
		return l.Capacity > 0 && l.used()+n <= l.Capacity
	case 'r':
		for _, h := range l.Holders {
			if h.writes() > 0 {
				return false
			}
		}
		return true
	}
	return len(l.Holders) == 0
}

// settle grants the lock to as many places at the head of the queue as it
// admits now: a fair mutex or an election to the first if nobody holds
// it; a read-write lock to the first writer if nobody holds it, or to the
// readers in a row at the head if nobody writes; a semaphore to the
// places in a row at the head whose permits fit. A lock is never left
// free while someone waits, as of the last step that looked at it.
func (l *lockState) settle(s *step) {
	for len(l.Queue) > 0 {
		p := l.Queue[0]
		if p.Side == 's' && l.Capacity > 0 && p.Permits > l.Capacity {
			l.Queue = l.Queue[1:] // could never be granted: it would block the queue
			continue
		}
		if !l.admits(p.Side, p.Permits) {
			return
		}
		l.grantPlace(s, p)
		if p.Side != 'r' && p.Side != 's' {
			return
		}
	}
}

// grantPlace gives the lock to the place p, first in line. The lock
// expires when the place would have, or after the lease asked for if that
// is sooner: a grantee that died holds it no longer than its place would
// have lasted.
func (l *lockState) grantPlace(s *step, p *place) {
	l.dropPlace(p.Owner)
	glease := min(p.Lease, p.Wait)
	expire := max(min(s.now+micros(p.Lease), p.Until), s.now+1)
	h := l.take(s, p.Owner, p.Side, 1, p.Permits, expire, p.Seq, glease, p.Value, p.Host, p.PID)
	if p.Owner != s.quiet {
		s.tell(notice{Type: noticeGrant, Name: s.name, Grantee: store.GranteeID(p.Owner), Token: h.Token,
			Seq: p.Seq, Lease: glease})
	}
}

// freed hands on a lock whose holder went: a plain mutex's waiters are
// told, a queued kind goes to the first in line, and an election that
// nobody leads now says so.
func (l *lockState) freed(s *step, kind string, by string) {
	switch kind {
	case "mutex":
		if l.Waited > s.now {
			s.tell(notice{Type: noticeRelease, Name: s.name, Store: by})
		}
		l.Waited = 0
	default:
		l.settle(s)
		if kind == "election" && len(l.Holders) == 0 {
			s.tell(notice{Type: noticeLeader, Name: s.name, Ended: *s.token})
		}
	}
	l.tidy(s.now)
}

// acquire is Store.Acquire on the lock.
func (l *lockState) acquire(s *step, r store.Request, host string, pid int) (store.Grant, error) {
	l.purge(s.now)
	if l.abandoned(r.Owner, s.now) {
		return store.Grant{TTL: -1}, nil
	}
	side := sideOf(r.Kind)
	if h := l.holder(r.Owner); h != nil {
		// A repeated request, or a re-entry.
		if h.hasHold(r.Hold) < 0 {
			if side == 'w' && h.writes() == 0 {
				return store.Grant{}, errOnlyReads
			}
			h.Holds = append(h.Holds, hold{ID: r.Hold, Side: side})
		}
		return h.grant(l.Capacity), nil
	}
	if r.Reenter {
		return store.Grant{TTL: l.ttl(s.now)}, nil
	}
	kind := family(r.Kind)
	if l.Kind != "" && l.Kind != kind {
		return store.Grant{}, store.ErrWrongKind
	}
	if kind == "mutex" {
		if len(l.Holders) > 0 {
			// The refused caller may wait: until it tries again, at the
			// end of the holder's lease as it is now, the release is told.
			if until := l.until() + micros(time.Second); l.Waited < until {
				l.Waited = until
			}
			return store.Grant{TTL: l.ttl(s.now)}, nil
		}
		l.Kind = kind
		return l.take(s, r.Owner, side, r.Hold, 0, s.now+micros(r.Lease), r.Seq, r.Lease, "", host, pid).grant(0), nil
	}
	permits := 1
	if side == 's' {
		permits = r.Permits
		if l.Capacity == 0 {
			l.Capacity = r.Capacity
			l.dropOversized()
		}
		l.CapacityUntil = max(l.CapacityUntil, s.now+micros(s.retention))
		if permits > l.Capacity {
			return store.Grant{Capacity: l.Capacity}, fmt.Errorf("%w: more permits than the semaphore's %d", store.ErrInvalidOption, l.Capacity)
		}
	}
	_, mine := l.place(r.Owner)
	if l.admits(side, permits) && (len(l.Queue) == 0 || mine == l.Queue[0]) {
		l.dropPlace(r.Owner)
		l.Kind = kind
		h := l.take(s, r.Owner, side, r.Hold, permits, s.now+micros(r.Lease), r.Seq, r.Lease, r.Value, host, pid)
		l.settle(s) // readers or permits behind it may go too
		return h.grant(l.Capacity), nil
	}
	s.quiet = r.Owner
	l.settle(s) // the first waiters may go now: this owner may be among them
	if h := l.holder(r.Owner); h != nil {
		return h.grant(l.Capacity), nil
	}
	if mine == nil {
		if r.Queue <= 0 {
			return store.Grant{TTL: l.ttl(s.now), Capacity: l.Capacity}, nil
		}
		mine = &place{Owner: r.Owner, Side: side, Permits: permits, Seq: r.Seq, Lease: r.Lease, Wait: r.Queue,
			Until: s.now + micros(r.Queue), Value: r.Value, Host: host, PID: pid}
		l.Queue = append(l.Queue, mine)
		l.Kind = kind
		if side == 's' {
			l.CapacityUntil = max(l.CapacityUntil, mine.Until)
		}
	}
	return l.queued(s, r.Owner), nil
}

// queued is the Grant of owner, which has a place: the lock's remaining
// lease if it is first in line, else -1.
func (l *lockState) queued(s *step, owner string) store.Grant {
	g := store.Grant{Queued: true, TTL: -1, Capacity: l.Capacity}
	if len(l.Queue) > 0 && l.Queue[0].Owner == owner {
		g.TTL = l.ttl(s.now)
	}
	return g
}

// dropOversized removes the places that ask for more permits than the
// semaphore's capacity: they could never be granted.
func (l *lockState) dropOversized() {
	l.Queue = slices.DeleteFunc(l.Queue, func(p *place) bool { return p.Side == 's' && p.Permits > l.Capacity })
}

// release is Store.Release on the lock; by is the releasing store's id.
func (l *lockState) release(s *step, r store.Request, by string) store.Release {
	l.purge(s.now)
	h := l.holder(r.Owner)
	if h == nil {
		if r.Hold == 0 && l.dropPlace(r.Owner) {
			l.settle(s) // it may have been first in line
			l.tidy(s.now)
		}
		return store.NotOwner
	}
	if r.Hold != 0 {
		i := h.hasHold(r.Hold)
		if i < 0 {
			return store.AlreadyReleased
		}
		side := h.Holds[i].Side
		h.Holds = slices.Delete(h.Holds, i, i+1)
		if len(h.Holds) > 0 {
			if side == 'w' && h.writes() == 0 {
				l.settle(s) // the writer only reads now: readers at the head join it
			}
			return store.Remaining
		}
	}
	kind := l.Kind
	l.dropHolder(r.Owner)
	l.freed(s, kind, by)
	return store.Freed
}

// abandon is Store.Abandon on the lock: r.Owner is marked for r.Lease,
// and loses its holds and its place.
func (l *lockState) abandon(s *step, r store.Request, by string) bool {
	l.purge(s.now)
	if l.Marks == nil {
		l.Marks = map[string]int64{}
	}
	l.Marks[r.Owner] = s.now + micros(r.Lease)
	placed := l.dropPlace(r.Owner)
	kind := l.Kind
	if l.dropHolder(r.Owner) != nil {
		l.freed(s, kind, by)
		return true
	}
	if placed {
		l.settle(s)
		l.tidy(s.now)
	}
	return false
}

// renew sets the lease of r's owner (a request without Queue).
func (l *lockState) renew(s *step, r store.Request) error {
	h := l.holder(r.Owner)
	if h == nil || h.Until <= s.now || h.Revoked {
		return store.ErrNotHeld
	}
	if h.Seq >= r.Seq {
		if h.Seq == r.Seq {
			return nil
		}
		return store.ErrSuperseded
	}
	h.Seq = r.Seq
	h.Until = s.now + micros(r.Lease)
	if h.Permits > 0 {
		l.CapacityUntil = max(l.CapacityUntil, h.Until)
	}
	return nil
}

// refresh keeps the place of r's owner (a request with Queue), and tells
// whether the owner holds the lock now.
func (l *lockState) refresh(s *step, r store.Request) (store.Grant, error) {
	l.purge(s.now)
	if r.Capacity > 0 && l.Capacity == 0 {
		l.Capacity = r.Capacity // lost: set again as the waiter knows it
		l.CapacityUntil = s.now + micros(s.retention)
		l.dropOversized()
	}
	if h := l.holder(r.Owner); h != nil {
		return h.grant(l.Capacity), nil
	}
	_, p := l.place(r.Owner)
	if p == nil || l.abandoned(r.Owner, s.now) {
		return store.Grant{}, errPlaceGone
	}
	if r.Seq > p.Seq {
		p.Seq, p.Lease, p.Wait, p.Until = r.Seq, r.Lease, r.Queue, s.now+micros(r.Queue)
		if p.Side == 's' {
			l.CapacityUntil = max(l.CapacityUntil, p.Until)
		}
	}
	s.quiet = r.Owner
	l.settle(s) // the lock may admit waiters now
	if h := l.holder(r.Owner); h != nil {
		return h.grant(l.Capacity), nil
	}
	return l.queued(s, r.Owner), nil
}

// forceUnlock deletes every holder and hands the lock on; it reports
// whether there were any.
func (l *lockState) forceUnlock(s *step) bool {
	l.purge(s.now)
	if len(l.Holders) == 0 {
		return false
	}
	kind := l.Kind
	for _, h := range l.Holders {
		s.tell(notice{Type: noticeRevoked, Name: s.name, Grantee: store.GranteeID(h.Owner)})
	}
	l.Holders = nil
	l.freed(s, kind, "")
	return true
}

// revoke marks every holder revoked and returns how long their leases
// may still last.
func (l *lockState) revoke(s *step) time.Duration {
	l.purge(s.now)
	var left time.Duration
	for _, h := range l.Holders {
		h.Revoked = true
		left = max(left, time.Duration(h.Until-s.now)*time.Microsecond)
		s.tell(notice{Type: noticeRevoked, Name: s.name, Grantee: store.GranteeID(h.Owner)})
	}
	return left
}

// setPermits sets a semaphore's capacity and lets in the waiters that fit.
func (l *lockState) setPermits(s *step, n int) (before, held int, err error) {
	l.purge(s.now)
	if l.Kind != "" && l.Kind != "semaphore" {
		return 0, 0, store.ErrWrongKind
	}
	before = l.Capacity
	l.Capacity = n
	l.CapacityUntil = max(l.CapacityUntil, s.now+micros(s.retention), l.until())
	for _, p := range l.Queue {
		l.CapacityUntil = max(l.CapacityUntil, p.Until)
	}
	l.dropOversized()
	l.settle(s)
	l.tidy(s.now)
	return before, l.used(), nil
}

// inspect reports the lock's state.
func (l *lockState) inspect(now int64, token uint64) store.State {
	l.purge(now)
	st := store.State{InUse: l.Kind != "", TTL: l.ttl(now), LastToken: token, Queued: len(l.Queue),
		Capacity: l.Capacity, Used: l.used()}
	if st.InUse {
		st.Kind = kindOf(l.Kind)
	}
	for _, p := range l.Queue {
		switch p.Side {
		case 'r':
			st.QueuedReaders++
		case 'w':
			st.QueuedWriters++
		case 's':
			st.QueuedPermits += p.Permits
		}
	}
	for _, h := range l.Holders {
		permits := h.Permits
		if permits == 0 {
			permits = 1
		}
		st.Holders = append(st.Holders, store.Holder{Owner: h.Owner, Token: h.Token, Holds: len(h.Holds),
			Writes: h.writes(), Permits: permits, Value: h.Value, Host: h.Host, PID: h.PID,
			Since: time.UnixMilli(h.Since), TTL: time.Duration(h.Until-now) * time.Microsecond, Revoked: h.Revoked})
	}
	return st
}

// leader is an election's live leader, or nil.
func (l *lockState) leader(now int64) *holder {
	if l.Kind != "election" {
		return nil
	}
	for _, h := range l.Holders {
		if h.Until > now {
			return h
		}
	}
	return nil
}

// kindOf is the store.Kind of a lock's kind name.
func kindOf(name string) store.Kind {
	switch name {
	case "fair-mutex":
		return store.Fair
	case "rwmutex":
		return store.Write
	case "election":
		return store.Election
	case "semaphore":
		return store.Semaphore
	}
	return store.Plain
}
