package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leases. A store keeps one etcd lease per TTL (in whole seconds): in
// practice one for its holds and one for its places. Every key of the
// store with that TTL is on it, so a thousand held locks cost one lease
// and one keep-alive per renewal round, not a thousand.
//
// The send-time rule: a request that puts or keeps a key on a lease counts
// only once a keep-alive of that lease, sent at most keepAliveSlack before
// the request began, was answered. The leader then set the lease's expiry
// to its own now plus the TTL, and the TTL is the request's lease plus
// keepAliveSlack (rounded up to whole seconds): so the key lasts at least
// its lease from the request's start, which the Client counts its lease
// from. Without the rule, a key put on a lease last kept alive a while ago
// would have less than its lease left. With the slack, a store that takes
// or renews locks often sends about one keep-alive a second per lease, and
// most requests need none of their own.
//
// A lease that is not kept alive by anyone expires, and every key on it
// with it: when the store's process dies, is paused or cut off, its locks
// go after their TTL. While the process lives, a key that its Client
// stops renewing (a fixed lease that ran its course, a hold whose renewal
// was not confirmed in time) lives on with the others until the Client's
// clean-up deletes it, which the Client starts at the hold's deadline and
// retries for store.AbandonFor its lease; Close revokes the leases, and
// whatever is left on them goes.

// A classLease is the store's lease for one TTL.
type classLease struct {
	ttl int64

	grant sync.Mutex // held while a lease is granted

	mu        sync.Mutex
	id        clientv3.LeaseID // 0: none; granted at the next use
	cur, next *kaRound         // the keep-alive in flight, and the one to send after it
	kept      time.Time        // when the last keep-alive of id that was answered was sent
}

// keepAliveSlack is how long before a request a keep-alive answered for
// its lease may have been sent, and how much longer than the requests'
// leases the store's leases are.
const keepAliveSlack = time.Second

// leaseTTL is the TTL of the store's lease for keys that must last d.
func leaseTTL(d time.Duration) int64 { return ttlOf(d + keepAliveSlack) }

// A kaRound is one keep-alive of a lease, shared by every request that
// waits for a keep-alive sent after it began.
type kaRound struct {
	id   clientv3.LeaseID
	sent time.Time // when it was sent (monotonic)
	done chan struct{}
	err  error // nil: answered with a TTL > 0
}

// errLeaseExpired is the outcome of a keep-alive of a lease that has
// expired (or was revoked): every key that was on it is gone.
var errLeaseExpired = fmt.Errorf("%w: etcd: the lease has expired", store.ErrNotHeld)

// class returns the store's lease for TTL ttl.
func (s *Store) class(ttl int64) *classLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.classes[ttl]
	if c == nil {
		c = &classLease{ttl: ttl}
		s.classes[ttl] = c
	}
	return c
}

// lease returns the id of the lease of c, granting one if it has none.
func (s *Store) lease(ctx context.Context, c *classLease) (clientv3.LeaseID, error) {
	c.mu.Lock()
	id := c.id
	c.mu.Unlock()
	if id != 0 {
		return id, nil
	}
	c.grant.Lock()
	defer c.grant.Unlock()
	c.mu.Lock()
	id = c.id
	c.mu.Unlock()
	if id != 0 {
		return id, nil // granted meanwhile
	}
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, c.ttl)
	if err != nil {
		return 0, backendErr(err)
	}
	c.mu.Lock()
	c.id, c.kept = resp.ID, sent // a grant sets the expiry as a keep-alive does
	c.mu.Unlock()
	return resp.ID, nil
}

// expired forgets the lease id of c, found expired: the next use grants
// another.
func (c *classLease) expired(id clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == id {
		c.id, c.kept = 0, time.Time{}
	}
}

// keepAlive returns once a keep-alive of lease id of c sent at or after
// since minus keepAliveSlack has been answered (at once if one was); or with errLeaseExpired if the lease has expired, or another error if the
// outcome is unknown. Keep-alives are paced: one in flight per lease, and
// every request that began before it was sent waits for it; those that
// began after wait for the next, sent when it returns.
func (s *Store) keepAlive(ctx context.Context, c *classLease, id clientv3.LeaseID, since time.Time) error {
	since = since.Add(-keepAliveSlack)
	c.mu.Lock()
	if c.id != id {
		c.mu.Unlock()
		return errLeaseExpired
	}
	if !c.kept.Before(since) {
		c.mu.Unlock()
		return nil
	}
	var r *kaRound
	switch {
	case c.cur == nil:
		r = s.sendKeepAlive(c, &kaRound{id: id, done: make(chan struct{})})
	case c.cur.id == id && !c.cur.sent.Before(since):
		r = c.cur
	default:
		if n := c.next; n != nil && n.id != id {
			// Queued for a lease that has been replaced since: its keys
			// are gone.
			n.err = errLeaseExpired
			close(n.done)
			c.next = nil
		}
		if c.next == nil {
			c.next = &kaRound{id: id, done: make(chan struct{})}
		}
		r = c.next
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return backendErr(ctx.Err())
	}
}

// keepAliveAsync is keepAlive in the background: its outcome comes on the
// channel returned.
func (s *Store) keepAliveAsync(ctx context.Context, c *classLease, id clientv3.LeaseID, since time.Time) <-chan error {
	if c.keptSince(id, since) {
		return noError // the common case: no goroutine, no channel
	}
	ch := make(chan error, 1)
	go func() { ch <- s.keepAlive(ctx, c, id, since) }()
	return ch
}

// keptSince reports whether a keep-alive of lease id of c, the lease it
// has, sent at or after since minus keepAliveSlack has been answered.
func (c *classLease) keptSince(id clientv3.LeaseID, since time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id == id && !c.kept.Before(since.Add(-keepAliveSlack))
}

// noError is a closed channel: it yields nil at once.
var noError = func() chan error {
	ch := make(chan error)
	close(ch)
	return ch
}()

// sendKeepAlive sends r now, as the keep-alive in flight of c, and
// returns it. c.mu must be held.
func (s *Store) sendKeepAlive(c *classLease, r *kaRound) *kaRound {
	r.sent = time.Now()
	c.cur = r
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(s.watches), keepAliveTimeout)
		_, err := s.cli.KeepAliveOnce(ctx, r.id)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			r.err = errLeaseExpired
			c.expired(r.id)
		case err != nil:
			r.err = backendErr(err)
		}
		c.mu.Lock()
		c.cur = nil
		if r.err == nil && r.id == c.id && r.sent.After(c.kept) {
			c.kept = r.sent
		}
		if n := c.next; n != nil {
			c.next = nil
			if s.watches.Err() == nil {
				s.sendKeepAlive(c, n)
			} else {
				n.err = store.ErrClosed
				close(n.done)
			}
		}
		c.mu.Unlock()
		close(r.done)
	}()
	return r
}

// keepAliveTimeout bounds one keep-alive round: its waiters give up at
// their own deadlines, the round at this one.
const keepAliveTimeout = 10 * time.Second

// A markLease is a lease for abandonment marks, which are never kept
// alive: one granted with TTL a+w serves the marks of a for w after its
// grant was sent, so that each lasts a at least.
type markLease struct {
	id   clientv3.LeaseID
	sent time.Time // when its grant was sent
}

// markLeaseFor returns a lease under which a mark put now lasts at least
// a.
func (s *Store) markLeaseFor(ctx context.Context, a time.Duration) (clientv3.LeaseID, error) {
	w := max(10*time.Second, a/10)
	ttl := ttlOf(a + w)
	s.mu.Lock()
	m := s.marks[ttl]
	s.mu.Unlock()
	if m != nil && time.Since(m.sent) < w {
		return m.id, nil
	}
	sent := time.Now()
	resp, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, backendErr(err)
	}
	s.mu.Lock()
	s.marks[ttl] = &markLease{id: resp.ID, sent: sent}
	s.mu.Unlock()
	return resp.ID, nil
}

// revokeLeases revokes every lease of the store (Close): the keys left on
// them go at once.
func (s *Store) revokeLeases() {
	s.mu.Lock()
	var ids []clientv3.LeaseID
	for _, c := range s.classes {
		c.mu.Lock()
		if c.id != 0 {
			ids = append(ids, c.id)
			c.id = 0
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range ids {
		_, _ = s.cli.Revoke(ctx, id)
	}
}
