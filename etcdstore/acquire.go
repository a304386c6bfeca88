package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distlock/distlock/store"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Acquire implements store.Store. A new owner's key is made only when it
// holds the lock at once, or, with r.Queue > 0, as its place at the back
// of the queue; the key's create revision is the owner's token.
//
// Every put is a transaction whose compares make it apply only in the
// state it was decided on, and never for an abandoned owner (its mark
// exists), so a copy of the request that arrives late takes nothing.
func (s *Store) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	return s.acquire(ctx, r, false)
}

// acquire is Acquire; member says r is a member of a multi-lock.
func (s *Store) acquire(ctx context.Context, r store.Request, member bool) (store.Grant, error) {
	if err := s.Validate(r.Kind, r.Lease, r.Queue); err != nil {
		return store.Grant{}, err
	}
	if r.Reenter {
		return s.reenter(ctx, r)
	}
	a := acquisition{s: s, r: r, member: member, start: time.Now(), letter: letters[r.Kind], dir: s.lockDir(r.Name),
		key: s.bindKey(r.Name, r.Kind, r.Owner), mark: s.markKey(r.Owner, r.Name), h: s.newHolding(r),
		hold: s.class(leaseTTL(r.Lease))}
	for {
		g, err := a.run(ctx)
		if err == nil && !g.Acquired && !g.Queued || refused(err) {
			// Nothing taken, nothing left: the owner is done with.
			s.unbind(r.Owner, r.Name)
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return g, err
		}
		// The store's lease expired (this process was cut off or paused
		// for a whole TTL): nothing was put; another one is granted.
	}
}

// refused reports whether err refuses a request that wrote nothing.
func refused(err error) bool {
	return errors.Is(err, store.ErrWrongKind) || errors.Is(err, store.ErrInvalidOption) || errors.Is(err, store.ErrDeadlock)
}

// An acquisition is one Acquire of a new owner.
type acquisition struct {
	s      *Store
	r      store.Request
	member bool      // of a multi-lock: taken when free, whoever waits in its line
	start  time.Time // before any request of it was sent
	letter byte
	dir    string // the lock's directory
	key    string // the owner's
	mark   string // the owner's abandonment mark
	h      holding
	hold   *classLease // the lease of a hold taken at once
}

func (a *acquisition) run(ctx context.Context) (store.Grant, error) {
	s, r := a.s, a.r
	if r.Queue > 0 && r.Kind != store.Semaphore {
		// Asked to queue: the lock was found taken (a Client tries
		// without queueing first, unless its own callers wait already).
		// So the place is put at once: a first transaction that would
		// find the lock taken again is a write of etcd's log for nothing.
		// A place that finds the keys before it gone holds the lock.
		// Anything the put's compares refuse (the owner abandoned, a key
		// of its own or of another kind) takes the steps below.
		if g, done, err := a.queue(ctx, nil, 0); done || err != nil {
			return g, err
		}
	}
	lease, err := s.lease(ctx, a.hold)
	if err != nil {
		return store.Grant{}, err
	}
	if r.Kind == store.Plain && !a.member {
		if l := s.lineOf(r.Name); l != nil {
			return a.fromLine(ctx, l, lease)
		}
	}
	for {
		// The common case first: nothing of the name exists. The
		// keep-alive that the hold needs goes out beside the put.
		var cs []contender
		if r.Kind != store.Semaphore || r.Permits <= r.Capacity {
			ka := a.keepAlive(ctx, a.hold, lease)
			resp, err := s.wire.txn(ctx, a.freeTxn(lease))
			if err != nil {
				return store.Grant{}, a.putErr(lease, err)
			}
			if resp.Succeeded {
				return a.kept(ka, store.Grant{Acquired: true, Token: uint64(resp.Header.Revision),
					Holds: 1, Seq: r.Seq, Lease: r.Lease, Capacity: a.capacity(r.Capacity)})
			}
			if resp.Responses[1].GetResponseRange().Count > 0 {
				return store.Grant{TTL: -1}, nil // abandoned: never taken for this owner
			}
			cs = contenders(a.dir, resp.Responses[0].GetResponseRange().Kvs)
			if len(cs) == 0 && len(resp.Responses) > 2 && resp.Responses[2].GetResponseRange().Count > 0 {
				return store.Grant{TTL: -1}, nil // free, but others wait in its line
			}
		} else {
			resp, err := s.cli.Txn(ctx).Then(rangeOp(a.dir), clientv3.OpGet(a.mark, clientv3.WithCountOnly())).Commit()
			if err != nil {
				return store.Grant{}, backendErr(err)
			}
			if resp.Responses[1].GetResponseRange().Count > 0 {
				return store.Grant{TTL: -1}, nil
			}
			cs = contenders(a.dir, resp.Responses[0].GetResponseRange().Kvs)
		}
		g, done, err := a.decide(ctx, cs, lease)
		if done || err != nil {
			return g, err
		}
	}
}

// freeTxn is the transaction that takes the lock if nothing of its name
// exists and the owner is not abandoned, putting the owner's key on
// lease; else it reads the lock's keys and counts the owner's mark.
//
// A plain mutex's also compares that nobody waits in its line (line.go),
// and counts the line's keys if it fails; a multi-lock's member's does
// not.
func (a *acquisition) freeTxn(lease clientv3.LeaseID) *pb.TxnRequest {
	var lineDir string
	if a.r.Kind == store.Plain && !a.member {
		lineDir = a.s.lineDir(a.r.Name)
	}
	// One buffer holds every key and the value.
	b := make([]byte, 0, 2*len(a.dir)+2*len(lineDir)+len(a.mark)+len(a.key)+256)
	b, dir := carve(b, func(b []byte) []byte { return append(b, a.dir...) })
	b, end := carve(b, func(b []byte) []byte { return prefixEnd(append(b, a.dir...), len(b)) })
	b, mark := carve(b, func(b []byte) []byte { return append(b, a.mark...) })
	b, key := carve(b, func(b []byte) []byte { return append(b, a.key...) })
	b, value := carve(b, a.h.appendJSON)
	t := &pb.TxnRequest{
		Compare: []*pb.Compare{createdEquals(dir, end, 0), createdEquals(mark, nil, 0)},
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
			Key: key, Value: value, Lease: int64(lease)}}}},
		Failure: []*pb.RequestOp{queueRange(dir, end),
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: mark, CountOnly: true}}}},
	}
	if lineDir != "" {
		b, line := carve(b, func(b []byte) []byte { return append(b, lineDir...) })
		_, lineEnd := carve(b, func(b []byte) []byte { return prefixEnd(append(b, lineDir...), len(b)) })
		t.Compare = append(t.Compare, createdEquals(line, lineEnd, 0))
		t.Failure = append(t.Failure, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{
			Key: line, RangeEnd: lineEnd, CountOnly: true}}})
	}
	return t
}

// putErr is the error of a put on lease that failed: the lease's own
// expiry (the caller tries again on another), or an outcome unknown.
func (a *acquisition) putErr(lease clientv3.LeaseID, err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		a.hold.expired(lease)
		return err
	}
	return backendErr(err)
}

// keepAlive sends, in the background, a keep-alive of lease of c that
// counts for a request begun at a.start.
func (a *acquisition) keepAlive(ctx context.Context, c *classLease, lease clientv3.LeaseID) <-chan error {
	return a.s.keepAliveAsync(ctx, c, lease, a.start)
}

// kept returns g once the keep-alive ka of the lease of the key just put
// is answered: the key then lasts its lease's TTL from the request's
// start at least.
func (a *acquisition) kept(ka <-chan error, g store.Grant) (store.Grant, error) {
	if err := <-ka; err != nil {
		// The key may be gone with its lease, or it may not: unknown.
		return store.Grant{}, fmt.Errorf("%w: etcd: the keep-alive of a lock's lease: %w", store.ErrBackend, err)
	}
	return g, nil
}

// capacity is c for a semaphore, 0 for the other kinds.
func (a *acquisition) capacity(c int) int {
	if a.r.Kind == store.Semaphore {
		return c
	}
	return 0
}

// decide goes on from the contenders cs read in the same transaction as
// the mark (not set): it reports done when g is the outcome, and false
// when the state changed meanwhile and the caller should start again.
func (a *acquisition) decide(ctx context.Context, cs []contender, lease clientv3.LeaseID) (g store.Grant, done bool, err error) {
	s, r := a.s, a.r
	if i := find(cs, r.Owner); i >= 0 {
		// An earlier copy of this request made the key.
		return a.earlier(cs, i), true, nil
	}
	if otherKind(cs, a.letter) {
		return store.Grant{}, true, store.ErrWrongKind
	}
	capacity := capacityOf(cs, r.Capacity)
	if r.Kind == store.Semaphore {
		a.h.Capacity = capacity
		if r.Permits > capacity {
			return store.Grant{Capacity: capacity}, true,
				fmt.Errorf("%w: more permits than the semaphore's %d", store.ErrInvalidOption, capacity)
		}
	}
	if len(cs) == 0 {
		return store.Grant{}, false, nil // freed meanwhile: try again
	}
	last := cs[len(cs)-1].kv.CreateRevision
	if fitsNow(cs, a.h, a.letter, capacity) {
		// Held at once beside the holders (readers, permits), if no key
		// joined since they were read (a key that left only lets in more).
		ka := a.keepAlive(ctx, a.hold, lease)
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(a.dir).WithPrefix(), "<", last+1),
				clientv3.Compare(clientv3.CreateRevision(a.mark), "=", 0)).
			Then(clientv3.OpPut(a.key, a.h.encode(), clientv3.WithLease(lease))).
			Commit()
		switch {
		case err != nil:
			return store.Grant{}, true, a.putErr(lease, err)
		case resp.Succeeded:
			g, err := a.kept(ka, store.Grant{Acquired: true, Token: uint64(resp.Header.Revision),
				Holds: 1, Seq: r.Seq, Lease: r.Lease, Capacity: a.capacity(capacity)})
			return g, true, err
		}
		return store.Grant{}, false, nil
	}
	if r.Queue <= 0 {
		// A TryLock: held by others, or others wait.
		g := store.Grant{TTL: s.leaseLeft(ctx, cs[0].kv.Lease)}
		if r.Kind == store.Semaphore {
			g.Capacity = capacity
		}
		return g, true, nil
	}
	return a.queue(ctx, cs, capacity)
}

// earlier is the outcome of a request whose earlier copy made the owner's
// key cs[i].
func (a *acquisition) earlier(cs []contender, i int) store.Grant {
	capacity := capacityOf(cs, a.r.Capacity)
	var g store.Grant
	switch {
	case admitted(cs, i, capacity):
		// Held: taken by that copy, or granted since. Seq is the last
		// request whose lease was confirmed (a place's refreshes), and the
		// engine assumes the least lease.
		g = store.Grant{Acquired: true, Token: cs[i].token(), Holds: len(cs[i].Holds), Seq: max(a.s.placeSeq(a.r.Owner), 1)}
	case a.r.Queue > 0:
		g = store.Grant{Queued: true, TTL: -1}
	default:
		g = store.Grant{TTL: -1}
	}
	if a.r.Kind == store.Semaphore {
		g.Capacity = capacity
	}
	return g
}

// queue puts the owner's key at the back of the queue, on a lease of its
// own that lasts the queue timeout: it holds the lock if the keys before
// it let it (they may have left meanwhile), and waits otherwise. cs (the
// queue as read) and capacity matter to a semaphore only.
func (a *acquisition) queue(ctx context.Context, cs []contender, capacity int) (store.Grant, bool, error) {
	s, r := a.s, a.r
	queue := s.class(leaseTTL(r.Queue))
	lease, err := s.lease(ctx, queue)
	if err != nil {
		return store.Grant{}, true, err
	}
	p := s.addPlace(r, a.key)
	ka := a.keepAlive(ctx, queue, lease)
	conds := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(a.mark), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(a.key), "=", 0),
		// No key of another kind: the ranges before and after this kind's.
		clientv3.Compare(clientv3.CreateRevision(a.dir).WithRange(s.kindDir(r.Name, r.Kind)), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.kindDir(r.Name, r.Kind)[:len(a.dir)+1]+"0").
			WithRange(clientv3.GetPrefixRangeEnd(a.dir)), "=", 0),
	}
	if r.Kind == store.Semaphore {
		// The capacity copied is the oldest key's, if it is still there.
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(string(cs[0].kv.Key)), "=", cs[0].kv.CreateRevision))
	}
	// The range sees the put: for a lock that admits one key at a time,
	// the last two keys are the place's and the one before it.
	var read []clientv3.OpOption
	if oneAtATime(r.Kind) {
		read = lastTwo
	}
	resp, err := s.cli.Txn(ctx).
		If(conds...).
		Then(clientv3.OpPut(a.key, a.h.encode(), clientv3.WithLease(lease)), rangeOp(a.dir, read...)).
		Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.dropPlace(r.Owner, p)
		queue.expired(lease)
		return store.Grant{}, false, nil
	}
	if err != nil {
		return store.Grant{}, true, backendErr(err) // the engine abandons the owner: p goes with it
	}
	if !resp.Succeeded {
		s.dropPlace(r.Owner, p)
		return store.Grant{}, false, nil
	}
	if _, err := a.kept(ka, store.Grant{}); err != nil {
		return store.Grant{}, true, err
	}
	rev := resp.Header.Revision
	rr := resp.Responses[1].GetResponseRange()
	cs = contenders(a.dir, rr.Kvs)
	if rr.More && len(cs) < len(rr.Kvs) {
		// An unreadable key among the last two hides those before it.
		if cs, rev, err = s.queue(ctx, r.Name); err != nil {
			return store.Grant{}, true, err // the engine abandons the owner: p goes with it
		}
	}
	i := find(cs, r.Owner)
	if i < 0 {
		// Gone already (a force-unlock): the engine's first refresh says so.
		return store.Grant{Queued: true, TTL: -1, Capacity: capacity}, true, nil
	}
	if admitted(cs, i, capacity) {
		// The keys before it left meanwhile: held, on the place's lease
		// (the engine renews it to the hold's length at once).
		s.dropPlace(r.Owner, p)
		g := store.Grant{Acquired: true, Token: cs[i].token(), Holds: 1, Seq: r.Seq, Lease: min(r.Lease, r.Queue)}
		if r.Kind == store.Semaphore {
			g.Capacity = capacity
		}
		return g, true, nil
	}
	s.follow(p, cs[i].token(), cs, rev)
	g := store.Grant{Queued: true, TTL: -1}
	if r.Kind == store.Semaphore {
		g.Capacity = capacity
	}
	return g, true, nil
}

// reenter adds hold r.Hold to the lock r.Owner holds.
func (s *Store) reenter(ctx context.Context, r store.Request) (store.Grant, error) {
	key := s.ownKey(r.Name, r.Kind, r.Owner)
	for {
		kv, h, err := s.get(ctx, key, r.Owner)
		if err != nil {
			return store.Grant{}, err
		}
		if kv == nil {
			return store.Grant{TTL: -1}, nil
		}
		if slices.Contains(h.Holds, r.Hold) {
			return store.Grant{Acquired: true, Token: uint64(kv.CreateRevision), Holds: len(h.Holds)}, nil
		}
		if r.Kind == store.Write {
			if !h.writes() {
				return store.Grant{}, fmt.Errorf("%w: the owner only reads now", store.ErrDeadlock)
			}
			h.Writes = append(h.Writes, r.Hold)
		}
		h.Holds = append(h.Holds, r.Hold)
		ok, err := s.update(ctx, key, kv, h)
		if err != nil {
			return store.Grant{}, err
		}
		if ok {
			return store.Grant{Acquired: true, Token: uint64(kv.CreateRevision), Holds: len(h.Holds)}, nil
		}
	}
}

// AcquireAll implements store.Store: one member after another. Each
// member is taken if it is free at that moment, even while processes wait
// in its line (line.go): a multi-lock must find all its members free at
// once, and, made to wait its turn in every line, it would hardly ever
// do so while the lines stay full. A process at the front of a line whose
// try finds the lock taken that way keeps its place.
func (s *Store) AcquireAll(ctx context.Context, rs []store.Request) ([]store.Grant, error) {
	return store.AcquireEach(ctx, members{s}, rs)
}

// members is the store as a multi-lock's members are acquired from it.
type members struct{ *Store }

func (m members) Acquire(ctx context.Context, r store.Request) (store.Grant, error) {
	return m.acquire(ctx, r, true)
}
