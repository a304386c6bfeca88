package etcdstore

import (
	"context"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A place is the key of one of this store's owners waiting in a queue,
// as the store tracks it in memory: a store serves one Client, so every
// place of its owners goes through it.
type place struct {
	owner, name, key string
	kind             store.Kind
	lease, queue     time.Duration
	capacity         int
	// seq is the owner's last request whose lease the store confirmed: a
	// keep-alive of the place's lease sent after the request began was
	// answered. A grant reports it (store.Notice).
	seq uint64
	// stop ends the goroutine that follows the place (follow).
	stop context.CancelFunc
	// held is the place's key as read when it was seen to hold the lock
	// (nil before): its first renewal as a hold starts from it, without
	// reading the queue again (a key that holds keeps holding).
	held *mvccpb.KeyValue

	// What follow and the shared watch of its key (ownkeys.go) know: the
	// key's create revision (0 until follow starts), the revision of the
	// last delete of the key seen, and the watches of the place.
	token   int64
	deleted int64
	ws      *watchSet
}

// A waker is one Watch of a queued kind: grants to the store's owners on
// the lock go to its wake.
type waker struct{ wake func(store.Notice) }

// addPlace tracks the place of r's owner, before its key is put.
func (s *Store) addPlace(r store.Request, key string) *place {
	p := &place{owner: r.Owner, name: r.Name, key: key, kind: r.Kind, lease: r.Lease, queue: r.Queue,
		capacity: r.Capacity, seq: r.Seq, stop: func() {}}
	s.mu.Lock()
	if old := s.places[r.Owner]; old != nil {
		old.stop()
		if s.keys[old.key] == old {
			delete(s.keys, old.key)
		}
	}
	s.places[r.Owner] = p
	s.keys[key] = p
	s.mu.Unlock()
	return p
}

// dropPlace stops tracking the place of owner (p, or any if p is nil).
func (s *Store) dropPlace(owner string, p *place) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.places[owner]; q != nil && (p == nil || q == p) {
		q.stop()
		delete(s.places, owner)
		if s.keys[q.key] == q {
			delete(s.keys, q.key)
		}
	}
}

// placeSeq is the owner's last request whose lease was confirmed, or 0.
func (s *Store) placeSeq(owner string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.places[owner]; p != nil {
		return p.seq
	}
	return 0
}

// sawHeld records that the place of owner was seen to hold the lock, as
// kv.
func (s *Store) sawHeld(owner string, kv *mvccpb.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.places[owner]; p != nil {
		p.held = kv
	}
}

// heldPlace returns the key of the place of owner as read when it was seen
// to hold the lock, or nil.
func (s *Store) heldPlace(owner string) *mvccpb.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.places[owner]; p != nil {
		return p.held
	}
	return nil
}

// confirmed records that the lease of the owner's request seq was
// confirmed.
func (s *Store) confirmed(owner string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.places[owner]; p != nil {
		p.seq = max(p.seq, seq)
	}
}

// follow waits, in the background, until the place p (its key made at
// revision token, and cs the queue read at revision rev) holds the lock,
// and then tells the Watches of its lock (store.Notice). It watches only
// what can let it in: the key just before it (a writer, a fair mutex, an
// election), the last writer before it (a reader), or every delete of the
// semaphore's keys. Its own key's end, which it tells the Watches too (a
// Notice with Gone: the waiter queues again at once), comes through the
// store's shared watch of its owners' keys on the lock (ownkeys.go), or
// through a watch of the place's own while that one does not cover it. A
// watch that fails (a member lost, no leader) is made again after a fresh
// read.
//
// Its watches start at the server's current revision, not at that of the
// read they follow: a watch whose start revision is already past is
// served by etcd's resync of lagging watchers, every 100 ms, so under
// contention (other keys changing between the read and the watch) every
// wait would cost up to 100 ms. So the watches are made first, and the
// queue is read again as of the revision they start after, unless it is
// the one read already: every change after it comes through them.
//
// A place reads only what can keep it out (ahead): at the hand-over,
// when it comes first, that is its own key rather than the whole queue.
func (s *Store) follow(p *place, token uint64, cs []contender, rev int64) {
	s.mu.Lock()
	if s.places[p.owner] != p {
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.watches))
	p.stop = cancel
	p.token = int64(token)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer cancel()
		var ws *watchSet
		defer func() { ws.stop() }()
		var changed int64 // the revision of the change that the watches just reported, or 0
		for ctx.Err() == nil {
			if cs == nil {
				var err error
				if cs, rev, err = s.queueAfter(ctx, p.name, changed, p.kind, token); err != nil {
					pause(ctx, 100*time.Millisecond)
					continue
				}
			}
			changed = 0
			i := find(cs, p.owner)
			if i < 0 || cs[i].token() != token {
				s.notify(p, store.Notice{Grantee: store.GranteeID(p.owner), Gone: true})
				return
			}
			if admitted(cs, i, capacityOf(cs, p.capacity)) {
				s.granted(p, cs[i])
				return
			}
			want := before(cs, i)
			own := s.ownKeysSince(p)
			covered := own > 0 && own <= rev // its own key's end comes through the shared watch
			if !covered {
				want = append(want, watched{key: p.key})
			}
			if ws.covers(want) {
				if changed = ws.await(ctx, rev); changed > 0 || ctx.Err() != nil {
					cs = nil // a change after the read: read again (or stop)
					continue
				}
				// A watch ended: events may have been lost.
			}
			ws.stop()
			var err error
			if ws, err = s.watchAll(ctx, want); err != nil {
				pause(ctx, 100*time.Millisecond)
				cs = nil
				continue
			}
			deleted, broken := s.attach(p, ws, covered, own)
			if ws.since > rev || deleted > rev || broken {
				// The store changed between the read and the watches, or
				// the place's key went meanwhile, or the shared watch that
				// the place counted on broke: read again as of the
				// revision the watches start after (or of the delete).
				cs, changed = nil, max(ws.since, deleted)
			}
		}
	}()
}

// ownKeysSince is ownKeysSinceLocked for a caller without s.mu.
func (s *Store) ownKeysSince(p *place) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownKeysSinceLocked(p)
}

// attach makes ws the watches of p, to which the shared watch of p's key
// hands its deletes, and returns the revision of the last delete of the
// key seen so far (0 if none), and whether the shared watch broke since
// p, covered by it, read own as its revision.
func (s *Store) attach(p *place, ws *watchSet, covered bool, own int64) (deleted int64, broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.ws = ws
	return p.deleted, covered && s.ownKeysSinceLocked(p) != own
}

// queueAfter reads the contenders of the lock name that can keep out a
// place of kind made at revision token (ahead), and the revision read
// at, after its watches reported a change at revision changed, or started
// after it (0: none; the read is then linearizable, as a read that the
// watches must follow).
//
// After a change, the queue is read as of that change's revision, from
// whichever member the client asks, without a round through the leader
// (a serializable read at a revision a member has applied is the same on
// every member), and the watches cover every change after it. A place's
// admission only grows with revisions: every key made later is behind it,
// and the keys before it can only leave, or turn from writers into
// readers. So a place admitted as of the change is admitted now, unless
// its own key has gone since, which its watches report. A member that has
// not applied the revision yet, or has compacted it, refuses the read; the
// queue is then read as it is now, through the leader.
func (s *Store) queueAfter(ctx context.Context, name string, changed int64, kind store.Kind, token uint64) ([]contender, int64, error) {
	dir, opts := s.lockDir(name), ahead(kind, token)
	if changed > 0 {
		resp, err := s.cli.Do(ctx, rangeOp(dir, append(opts, clientv3.WithRev(changed), clientv3.WithSerializable())...))
		if err == nil {
			if cs, ok := readAhead(dir, resp.Get()); ok {
				return cs, changed, nil
			}
		}
	}
	resp, err := s.cli.Do(ctx, rangeOp(dir, opts...))
	if err != nil {
		return nil, 0, backendErr(err)
	}
	if cs, ok := readAhead(dir, resp.Get()); ok {
		return cs, resp.Get().Header.Revision, nil
	}
	return s.queue(ctx, name, clientv3.WithMaxCreateRev(int64(token))) // every key up to its own
}

// granted tells the Watches of p's lock that p holds it as c.
func (s *Store) granted(p *place, c contender) {
	s.mu.Lock()
	p.held = c.kv
	n := store.Notice{Grantee: store.GranteeID(p.owner), Token: c.token(), Seq: p.seq, Lease: min(p.lease, p.queue)}
	s.mu.Unlock()
	s.notify(p, n)
}

// notify hands n, a notice of the place p, to the Watches of p's lock.
func (s *Store) notify(p *place, n store.Notice) {
	s.mu.Lock()
	ws := make([]*waker, 0, len(s.wakers[p.name]))
	for w := range s.wakers[p.name] {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.wake(n)
	}
}

// pause waits for d or the end of ctx.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
