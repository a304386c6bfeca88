package etcdbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// The libraries. Concurrency is the baseline every ratio refers to.
const (
	// Concurrency is go.etcd.io/etcd/client/v3/concurrency's Mutex, one
	// Session (default TTL, 60 s) per goroutine, as its documentation
	// says.
	Concurrency = "concurrency"
	// ConcurrencyRev1 is a diagnostic copy of concurrency.Mutex whose wait
	// watches from the Get's revision + 1 instead of the revision itself
	// (the only change): its watcher starts synced. Hand-over only.
	ConcurrencyRev1 = "concurrency-rev1"
	// Distlock is distlock's Mutex on etcdstore, library defaults (lease
	// 30 s).
	Distlock = "distlock"
	// DistlockFair is distlock's FairMutex on etcdstore, library defaults.
	DistlockFair = "distlock-fair"
)

// Libs are the libraries of the rate and contention scenarios, in report
// order; HandoverLibs those of the hand-over.
var (
	Libs         = []string{Concurrency, Distlock, DistlockFair}
	HandoverLibs = []string{Concurrency, ConcurrencyRev1, Distlock, DistlockFair}
)

// Title is how a library is named in reports.
func Title(lib string) string {
	switch lib {
	case Concurrency:
		return "concurrency.Mutex"
	case ConcurrencyRev1:
		return "concurrency.Mutex, watch from rev+1 (diagnostic)"
	case Distlock:
		return "distlock Mutex"
	case DistlockFair:
		return "distlock FairMutex"
	}
	return lib
}

// ErrUnsupported is returned by NewLocker for a kind the store does not
// serve yet (distlock.ErrUnsupported).
var ErrUnsupported = distlock.ErrUnsupported

// An Unlock releases a lock.
type Unlock func(ctx context.Context) error

// A Locker is one library's client: its own etcd client (its own
// connections). Its Workers are what one goroutine uses.
type Locker interface {
	// Worker returns what one goroutine locks with: for concurrency, a
	// Session of its own; for distlock, the shared Client.
	Worker() (Worker, error)
	// Waiting receives when one of this Locker's Lock calls found the lock
	// taken (nil if the library does not say).
	Waiting() <-chan struct{}
	// Client is the etcd client.
	Client() *clientv3.Client
	Close() error
}

// A Worker takes locks for one goroutine.
type Worker interface {
	Lock(ctx context.Context, key string) (Unlock, error)
	Close() error
}

// Dial returns an etcd client of endpoints, without logging.
func Dial(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Options tune a distlock Locker.
type Options struct {
	// Events is passed to distlock.WithEventHandler (beside the Waiting
	// signal).
	Events func(distlock.Event)
	// TTL, if set, is passed with distlock.WithTTL; otherwise the
	// library's default lease.
	TTL time.Duration
}

// NewLocker returns a Locker of lib on a new etcd client of endpoints. A
// distlock kind the store does not serve fails with an error matching
// ErrUnsupported (it is probed with one Lock).
func NewLocker(lib string, endpoints []string, o Options) (Locker, error) {
	cli, err := Dial(endpoints)
	if err != nil {
		return nil, err
	}
	switch lib {
	case Concurrency, ConcurrencyRev1:
		return &concLocker{cli: cli, rev1: lib == ConcurrencyRev1}, nil
	case Distlock, DistlockFair:
		d := &distLocker{cli: cli, fair: lib == DistlockFair, waiting: make(chan struct{}, 1)}
		if o.TTL > 0 {
			d.opts = append(d.opts, distlock.WithTTL(o.TTL))
		}
		d.c = distlock.New(etcdstore.New(cli), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
			if e.Kind == distlock.EventWaiting {
				select {
				case d.waiting <- struct{}{}:
				default:
				}
			}
			if o.Events != nil {
				o.Events(e)
			}
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u, err := d.Lock(ctx, "probe/"+lib)
		if err == nil {
			err = u(ctx)
		}
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("%s: %w", Title(lib), err)
		}
		return d, nil
	}
	_ = cli.Close()
	return nil, fmt.Errorf("unknown library %q", lib)
}

// --- distlock on etcdstore.

type distLocker struct {
	cli     *clientv3.Client
	c       *distlock.Client
	fair    bool
	opts    []distlock.MutexOption
	waiting chan struct{}
}

func (d *distLocker) Lock(ctx context.Context, key string) (Unlock, error) {
	m := d.c.Mutex(key, d.opts...)
	if d.fair {
		m = d.c.FairMutex(key, d.opts...)
	}
	l, err := m.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *distLocker) Worker() (Worker, error)    { return sharedWorker{d}, nil }
func (d *distLocker) Waiting() <-chan struct{}   { return d.waiting }
func (d *distLocker) Client() *clientv3.Client   { return d.cli }
func (d *distLocker) Distlock() *distlock.Client { return d.c }
func (d *distLocker) Close() error               { return errors.Join(d.c.Close(), d.cli.Close()) }

// sharedWorker is the distlock Client itself: every goroutine of a process
// shares it (closing a worker closes nothing).
type sharedWorker struct{ d *distLocker }

func (w sharedWorker) Lock(ctx context.Context, key string) (Unlock, error) {
	return w.d.Lock(ctx, key)
}
func (w sharedWorker) Close() error { return nil }

// --- concurrency.Mutex: a Session per Worker.

type concLocker struct {
	cli  *clientv3.Client
	rev1 bool
	mu   sync.Mutex
	ss   []*concurrency.Session
}

func (c *concLocker) Worker() (Worker, error) {
	s, err := concurrency.NewSession(c.cli)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.ss = append(c.ss, s)
	c.mu.Unlock()
	return &concWorker{s: s, rev1: c.rev1}, nil
}

func (c *concLocker) Waiting() <-chan struct{} { return nil }
func (c *concLocker) Client() *clientv3.Client { return c.cli }

func (c *concLocker) Close() error {
	c.mu.Lock()
	ss := c.ss
	c.ss = nil
	c.mu.Unlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, s.Close())
	}
	return errors.Join(errors.Join(errs...), c.cli.Close())
}

type concWorker struct {
	s    *concurrency.Session
	rev1 bool
}

// Lock takes the lock named key (concurrency's prefix key + "/").
func (w *concWorker) Lock(ctx context.Context, key string) (Unlock, error) {
	if w.rev1 {
		return lockRev1(ctx, w.s, key+"/")
	}
	m := concurrency.NewMutex(w.s, key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (w *concWorker) Close() error { return nil } // the Locker closes its sessions

// lockRev1 is concurrency.Mutex.Lock (v3.7.3: mutex.go, key.go) with one
// change: waitDelete watches from the Get's header revision + 1, not from
// the revision itself. A delete that waitDelete waits for comes after
// that Get, so it has a higher revision: nothing is missed. The watch
// starts at a revision the store has not reached, so the server puts it
// in the synced set at once (watchable_store.go: startRev > currentRev).
func lockRev1(ctx context.Context, s *concurrency.Session, pfx string) (Unlock, error) {
	cli := s.Client()
	myKey := fmt.Sprintf("%s%x", pfx, s.Lease())
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(myKey), "=", 0)).
		Then(clientv3.OpPut(myKey, "", clientv3.WithLease(s.Lease())), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
		Else(clientv3.OpGet(myKey), clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		return nil, err
	}
	myRev := resp.Header.Revision
	if !resp.Succeeded {
		myRev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	unlock := func(ctx context.Context) error {
		_, err := cli.Delete(ctx, myKey)
		return err
	}
	owner := resp.Responses[1].GetResponseRange().Kvs
	if len(owner) == 0 || owner[0].CreateRevision == myRev {
		return unlock, nil
	}
	fail := func(err error) (Unlock, error) {
		_ = unlock(cli.Ctx())
		return nil, err
	}
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(myRev-1))
	for {
		g, err := cli.Get(ctx, pfx, opts...)
		if err != nil {
			return fail(err)
		}
		if len(g.Kvs) == 0 {
			break
		}
		if err := waitDeleteFrom(ctx, cli, string(g.Kvs[0].Key), g.Header.Revision+1); err != nil {
			return fail(err)
		}
	}
	g, err := cli.Get(ctx, myKey)
	if err != nil {
		return fail(err)
	}
	if len(g.Kvs) == 0 {
		return nil, concurrency.ErrSessionExpired
	}
	return unlock, nil
}

func waitDeleteFrom(ctx context.Context, cli *clientv3.Client, key string, rev int64) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wr clientv3.WatchResponse
	for wr = range cli.Watch(cctx, key, clientv3.WithRev(rev)) {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := wr.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("lost watcher waiting for delete")
}
