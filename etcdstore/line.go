package etcdstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/store"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The line of a plain mutex.
//
// A plain mutex's waiters put no places (a fair mutex's do): the engine
// lines them up in their process, and one of them at a time tries when
// the lock is freed. Were the waiting processes all to try at each
// release, they would race: each losing try is a transaction with a put,
// so a Raft write, and the process whose requests reach the leader first
// wins more often.
//
// So the processes that wait for a plain mutex take turns. Each keeps one
// key, P line/{name}/<store id>, while its Watch of the lock lasts, on an
// etcd lease of its own (lineTTL) kept alive by the client's keep-alive
// stream: the line is the order of those keys' mod revisions. Only the
// process at the front tries when it sees the lock free, and its
// acquisition puts its line key again in the same transaction, which
// moves it to the back. That transaction applies only if the lock's
// directory is empty, the line key is as the process last saw it, and no
// line key is older; an acquisition of a process without a line key (the
// lock looked free, or TryLock) applies only if no line key exists. So
// nobody passes those who wait, and an owner change costs two writes, the
// release and the next acquisition, as in a fair mutex's queue.
//
// Each process sees the line and the lock's keys through two watches, of
// the lock's directory and of the line, and wakes its waiters when, as it
// last saw them, the lock is free and its key is the oldest; otherwise a
// try sends nothing. Its view may lag: a try that the state refuses costs
// a write and changes nothing, and whatever makes the process the front
// later comes through a watch and wakes it.
//
// What bounds the wait behind a front process that does not try (paused,
// cut off from etcd): its line key goes with its lease, at most lineTTL
// after its last keep-alive; a process whose waiters all leave revokes its
// lease at once. A process whose line key went while it waited (its lease
// expired: it was paused) puts it again, at the back.
//
// The line orders processes, not goroutines: within a process the engine
// serves its waiters first come, first served. A multi-lock's members are
// the exception to "nobody passes those who wait" (AcquireAll): each is
// taken if it is free when the multi-lock tries, for made to wait its
// turn in every line, it would hardly ever find them all free at once
// while the lines stay full. Its process waits in the line of the member
// that refused it, so it tries again at its turn there; the front of a
// line whose try it beat keeps its place.

// lineTTL is the TTL of a line key's lease, in seconds.
const lineTTL = 5

// lineDir is the prefix of the line keys of the lock name.
func (s *Store) lineDir(name string) string { return s.prefix + "line/{" + name + "}/" }

// A line is this store's key in the line of one plain mutex, and its view
// of the line and of the lock, shared by the store's Watches of the lock.
type line struct {
	s      *Store
	name   string
	key    string // this store's line key
	dir    string // the lock's directory
	prefix string // the line's keys
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}       // closed once the key is put and the view read, or that failed
	wakers map[*waker]struct{} // guarded by s.mu

	mu      sync.Mutex
	err     error            // why the first put failed (read after ready)
	at      int64            // the revision the view was read at; 0: being read again
	pending []lineEvent      // events that came while it was read
	lock    map[string]int64 // the lock's keys: their mod revisions
	keys    map[string]int64 // the line's keys: their mod revisions
	seen    [2]int64         // the last revision each watch (lock, line) reported
	claimed int64            // the revision of this store's last acquisition from the line
	lease   clientv3.LeaseID // of the key; 0: none yet
	stopKA  func()           // ends the keep-alives of lease
	put     bool             // the key must be put (again)
	todo    chan struct{}    // capacity 1: the goroutine has work
}

// joinLine adds wake to the Watches of the line of the plain mutex name,
// putting this store's key in it first if it has none, and returns once
// the line has been read; the returned stop removes wake, and revokes the
// key when no Watch is left.
func (s *Store) joinLine(ctx context.Context, name string, wake func(store.Notice)) (func(), error) {
	w := &waker{wake: wake}
	s.mu.Lock()
	l := s.lines[name]
	if l == nil {
		l = s.newLine(name)
		s.lines[name] = l
		s.wg.Add(1)
		go l.run()
	}
	l.wakers[w] = struct{}{}
	s.mu.Unlock()
	select {
	case <-l.ready:
	case <-ctx.Done():
		s.leaveLine(l, w)
		return nil, backendErr(ctx.Err())
	}
	l.mu.Lock()
	err := l.err
	l.mu.Unlock()
	if err != nil {
		s.leaveLine(l, w)
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { s.leaveLine(l, w) }) }, nil
}

// newLine returns the line of name, its key to be put by its goroutine.
func (s *Store) newLine(name string) *line {
	ctx, cancel := context.WithCancel(s.watches)
	l := &line{s: s, name: name, key: s.lineDir(name) + s.slots.id, dir: s.lockDir(name), prefix: s.lineDir(name),
		ctx: ctx, cancel: cancel, ready: make(chan struct{}), wakers: map[*waker]struct{}{},
		put: true, todo: make(chan struct{}, 1), stopKA: func() {}}
	l.todo <- struct{}{}
	return l
}

// leaveLine removes w from the Watches of l; the last one ends l.
func (s *Store) leaveLine(l *line, w *waker) {
	s.mu.Lock()
	delete(l.wakers, w)
	last := len(l.wakers) == 0 && s.lines[l.name] == l
	if last {
		delete(s.lines, l.name)
	}
	s.mu.Unlock()
	if last {
		l.cancel() // its goroutine revokes the lease once its requests are done
	}
}

// lineOf returns the store's line of the plain mutex name, if it has one.
func (s *Store) lineOf(name string) *line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines[name]
}

// run keeps l: it watches the lock and the line, puts the key (again)
// when it must, reads the view again after a watch broke, and at the end
// revokes the key's lease.
func (l *line) run() {
	s := l.s
	defer s.wg.Done()
	defer func() {
		l.mu.Lock()
		lease, stopKA := l.lease, l.stopKA
		l.mu.Unlock()
		stopKA()
		if lease != 0 {
			// Revoked after every request of l has ended: a put still on
			// its way would find the lease gone.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = s.cli.Revoke(ctx, lease)
			cancel()
		}
		l.mu.Lock()
		select {
		case <-l.ready:
		default:
			l.err = store.ErrClosed
			close(l.ready)
		}
		l.mu.Unlock()
	}()
	for i, dir := range []string{l.dir, l.prefix} {
		stop, _, err := s.watch(l.ctx, dir, []clientv3.OpOption{clientv3.WithPrefix()},
			func(evs []*clientv3.Event) { l.events(i, evs) }, func(int64) { l.lost() })
		if err != nil {
			l.fail(err)
			return
		}
		defer stop()
	}
	delay := 10 * time.Millisecond
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.todo:
		}
		if err := l.read(); err != nil {
			l.fail(err)
			if l.ctx.Err() != nil {
				return
			}
			pause(l.ctx, delay)
			delay = min(2*delay, time.Second)
			l.again()
			continue
		}
		delay = 10 * time.Millisecond
	}
}

// fail records err as the outcome of the first put, if it has none yet.
func (l *line) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.ready:
	default:
		l.err = err
		close(l.ready)
	}
}

// again asks l's goroutine to read (and put, if it must) again.
func (l *line) again() {
	select {
	case l.todo <- struct{}{}:
	default:
	}
}

// lost is told that a watch of l broke: events may have been missed, so
// the view is read again.
func (l *line) lost() {
	l.mu.Lock()
	l.at = 0
	l.mu.Unlock()
	l.again()
}

// read reads the view again, putting the key first if it must, and wakes
// the Watches if it is this store's turn.
func (l *line) read() error {
	s := l.s
	l.mu.Lock()
	l.at = 0 // events buffer until the read is in
	put, lease := l.put, l.lease
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.ctx, keepAliveTimeout)
	defer cancel()
	if put && lease == 0 {
		var err error
		if lease, err = l.grant(ctx); err != nil {
			return err
		}
	}
	ops := []clientv3.Op{clientv3.OpGet(l.dir, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(l.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	if put {
		ops = append(ops, clientv3.OpPut(l.key, "", clientv3.WithLease(lease)))
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		l.mu.Lock()
		if l.lease == lease {
			l.stopKA()
			l.lease, l.stopKA = 0, func() {}
		}
		l.mu.Unlock()
		return backendErr(err)
	}
	if err != nil {
		return backendErr(err)
	}
	rev := resp.Header.Revision
	l.mu.Lock()
	if put {
		l.put = false
	}
	l.lock = revisions(resp.Responses[0].GetResponseRange().Kvs)
	l.keys = revisions(resp.Responses[1].GetResponseRange().Kvs)
	if put {
		l.keys[l.key] = rev
	}
	l.at, l.seen = rev, [2]int64{rev, rev}
	pending := l.pending
	l.pending = nil
	for _, w := range pending {
		l.apply(w.i, w.ev)
	}
	turn := l.turnLocked() > 0
	select {
	case <-l.ready:
	default:
		close(l.ready)
	}
	l.mu.Unlock()
	if turn {
		l.wake()
	}
	return nil
}

// grant grants the key a lease and keeps it alive until l ends or the
// lease is replaced.
func (l *line) grant(ctx context.Context) (clientv3.LeaseID, error) {
	s := l.s
	resp, err := s.cli.Grant(ctx, lineTTL)
	if err != nil {
		return 0, backendErr(err)
	}
	kctx, stop := context.WithCancel(l.ctx)
	ka, err := s.cli.KeepAlive(kctx, resp.ID)
	if err != nil {
		stop()
		return 0, backendErr(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for range ka {
		}
	}()
	l.mu.Lock()
	l.stopKA()
	l.lease, l.stopKA = resp.ID, stop
	l.mu.Unlock()
	return resp.ID, nil
}

// revisions maps each key of kvs to its mod revision.
func revisions(kvs []*mvccpb.KeyValue) map[string]int64 {
	m := make(map[string]int64, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.ModRevision
	}
	return m
}

// A lineEvent is an event of watch i (0: the lock's, 1: the line's).
type lineEvent struct {
	i  int
	ev *clientv3.Event
}

// events takes the events of watch i.
func (l *line) events(i int, evs []*clientv3.Event) {
	l.mu.Lock()
	for _, ev := range evs {
		if l.at == 0 {
			l.pending = append(l.pending, lineEvent{i, ev})
		} else {
			l.apply(i, ev)
		}
	}
	turn := l.turnLocked() > 0
	l.mu.Unlock()
	if turn {
		l.wake()
	}
}

// apply applies ev, of watch i, to the view, unless the view was read
// after it (l.mu held).
func (l *line) apply(i int, ev *clientv3.Event) {
	rev := ev.Kv.ModRevision
	if rev <= l.at {
		return
	}
	l.seen[i] = max(l.seen[i], rev)
	key := string(ev.Kv.Key)
	m := l.lock
	if i == 1 {
		m = l.keys
	}
	switch {
	case ev.Type == mvccpb.PUT:
		m[key] = rev
	default:
		delete(m, key)
		if key == l.key && l.ctx.Err() == nil {
			l.put = true // gone with its lease, or deleted: it goes to the back
			l.again()
		}
	}
}

// turnLocked is the mod revision of this store's key if it is its turn
// as the view has it: the lock free, the key the oldest in the line, and
// the watches past this store's last acquisition from the line; else 0.
func (l *line) turnLocked() int64 {
	mine := l.keys[l.key]
	if l.at == 0 || mine == 0 || len(l.lock) > 0 || min(l.seen[0], l.seen[1]) < l.claimed {
		return 0
	}
	for k, rev := range l.keys {
		if rev < mine && k != l.key {
			return 0
		}
	}
	return mine
}

// turn is turnLocked for a caller.
func (l *line) turn() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turnLocked()
}

// took records that this store acquired the lock from the line at
// revision rev: until both watches have reported it, the view is not to
// be trusted (it would show the lock free and the key at the front).
func (l *line) took(rev int64) {
	l.mu.Lock()
	l.claimed = max(l.claimed, rev)
	l.mu.Unlock()
}

// wake wakes the Watches of l.
func (l *line) wake() {
	l.s.mu.Lock()
	ws := make([]*waker, 0, len(l.wakers))
	for w := range l.wakers {
		ws = append(ws, w)
	}
	l.s.mu.Unlock()
	for _, w := range ws {
		w.wake(store.Notice{})
	}
}

// fromLine is the acquisition of a plain mutex by a store that waits in
// its line: it tries only if it is the store's turn as its view has it,
// and its transaction moves the store's key to the back of the line.
func (a *acquisition) fromLine(ctx context.Context, l *line, lease clientv3.LeaseID) (store.Grant, error) {
	mine := l.turn()
	if mine == 0 {
		return store.Grant{TTL: -1}, nil // taken, or others are before it
	}
	r := a.r
	ka := a.keepAlive(ctx, a.hold, lease)
	resp, err := a.s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(a.dir).WithPrefix(), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(a.mark), "=", 0),
			clientv3.Compare(clientv3.ModRevision(l.key), "=", mine),
			clientv3.Compare(clientv3.ModRevision(l.prefix).WithPrefix(), ">", mine-1)).
		Then(clientv3.OpPut(a.key, a.h.encode(), clientv3.WithLease(lease)),
			clientv3.OpPut(l.key, "", clientv3.WithIgnoreLease())).
		Else(clientv3.OpGet(a.mark, clientv3.WithCountOnly()),
			clientv3.OpGet(a.dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))).
		Commit()
	switch {
	case err != nil:
		return store.Grant{}, a.putErr(lease, err)
	case resp.Succeeded:
		rev := resp.Header.Revision
		l.took(rev)
		return a.kept(ka, store.Grant{Acquired: true, Token: uint64(rev), Holds: 1, Seq: r.Seq, Lease: r.Lease})
	case resp.Responses[0].GetResponseRange().Count > 0:
		return store.Grant{TTL: -1}, nil // abandoned: never taken for this owner
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if letterOf(a.dir, string(kv.Key)) != a.letter {
			return store.Grant{}, store.ErrWrongKind
		}
	}
	return store.Grant{TTL: -1}, nil // its view was behind: a watch will tell
}
