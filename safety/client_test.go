package safety

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
)

// clientConfig configures one chaos client process.
type clientConfig struct {
	ID          int
	LockAddr    string // the lock server, through this client's toxiproxy
	StoreAddr   string // the fenced store, direct
	Names       []string
	Lease       time.Duration
	Workers     int
	Seed        int64
	History     string
	PoolSize    int
	PoolTimeout time.Duration
	WorkMax     time.Duration
	CancelRate  float64 // share of acquisitions whose context is cancelled mid-way (see work)
	TryRate     float64 // share of acquisitions made with TryLock
	ExtendRate  float64 // share of holds that call Extend, to a lease of 0.1 to 3 leases
	Cluster     bool    // LockAddr is a comma-separated list of cluster nodes
	// Redlock: LockAddr is a comma-separated list of independent masters
	// (each through its toxiproxy), locked on a store of redisstore.NewRedlock.
	Redlock bool
	// SentinelAddrs and MasterName: the lock server is a Sentinel group,
	// reached with go-redis's failover client (LockAddr is unused).
	SentinelAddrs []string
	MasterName    string
	// AckReplicas and AckTimeout: WithReplicaAck(AckReplicas, AckTimeout)
	// if AckReplicas > 0 (plain mutexes only).
	AckReplicas int
	AckTimeout  time.Duration
	// Fair maps the names locked with FairMutex to their queue timeout;
	// the other names are plain mutexes. A name is one kind for the whole
	// run: kinds never mix (ErrWrongKind).
	Fair map[string]time.Duration
	// Elect maps the elections' names to their queue timeout: a worker
	// campaigns (Campaign), leads as an exclusive holder, and resigns
	// (Unlock).
	Elect map[string]time.Duration
	// RW maps the names locked with RWMutex to their queue timeout, and
	// Sem the semaphores' names to their capacity (their queue timeout
	// is SemQueue). Readers and permit holders share their lock: they do
	// not do the fenced read-modify-write, they only hold.
	RW       map[string]time.Duration
	Sem      map[string]int
	SemQueue time.Duration
	// Prefix is the key prefix (WithPrefix); Retention the fencing
	// retention (WithFenceRetention), the default if 0.
	Prefix    string
	Retention time.Duration
	// OnceRate is the share of iterations that run a job once (see
	// runOnce): with OncePer on the name OncePer, every OncePeriod, or
	// with Once on the key OnceKey + " " + the number of the current
	// OnceWindow of the wall clock, recorded for OnceKeep.
	OnceRate   float64
	OncePer    string
	OncePeriod time.Duration
	OnceKey    string
	OnceWindow time.Duration
	OnceKeep   time.Duration
	// Etcd: the lock store is etcd (etcdstore), reached at these
	// endpoints (this client's proxies to the members; LockAddr is
	// unused). MultiRate is the share of iterations that take two plain
	// names with a MultiMutex (workMulti). ExtendMin is the shortest
	// Extend, in leases (0: 0.1; etcd refuses leases below 2 s).
	Etcd      []string
	MultiRate float64
	ExtendMin float64
	// LongRate is the share of holds that outlive the lease (0: 5 %),
	// whose renewals meet the faults.
	LongRate float64
	// SQL: the lock store is sqlstore, on the database of this DSN
	// (through this client's proxy; LockAddr is unused), of SQLFlavor
	// "postgres" or "mariadb" (sqlclient_test.go).
	SQL       string
	SQLFlavor string
}

// chaosClient is the state of one client process.
type chaosClient struct {
	cfg   clientConfig
	h     *historyWriter
	locks *distlock.Client
	rdb   redis.UniversalClient   // the lock server's client; nil in the Redlock mode
	rdbs  []redis.UniversalClient // every lock server's client: rdb, or one per Redlock master
	store *redis.Client
	etcd  *clientv3.Client // the etcd mode's client, nil otherwise
	seq   atomic.Int64

	stopping  atomic.Bool
	cancelTil atomic.Int64 // mono: until then every acquisition is cancelled mid-way

	renewed, renewFailed, lost atomic.Int64

	extras sync.WaitGroup // the holders and waiters made for Close (queueBeforeClose)

	sqlClose func() // closes the SQL mode's pool or database, nil otherwise

	mu          sync.Mutex
	owners      map[string]int64 // name/token -> owner, for the Lost event
	waitingAt   map[string]int64 // name -> the last EventWaiting (mono)
	enqueuedAt  map[string]int64 // name -> when the last call that may queue was sent (mono)
	queueNotify chan struct{}    // closed at the next of either
}

// runChaosClient is the body of a client process: workers loop acquire ->
// fenced read -> work -> fenced write -> release until the parent says
// "stop" on stdin (or closes it). Commands: "hog MS" exhausts the go-redis
// pool for MS ms; "cancel MS" cancels every acquisition mid-way for MS ms.
func runChaosClient(cfgJSON string) int {
	var cfg clientConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	h, err := newHistoryWriter(cfg.History)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := &chaosClient{cfg: cfg, h: h, owners: map[string]int64{}, waitingAt: map[string]int64{}, enqueuedAt: map[string]int64{},
		queueNotify: make(chan struct{})}
	c.seq.Store(int64(cfg.ID) * 1_000_000)
	switch {
	case len(cfg.Etcd) > 0 || cfg.SQL != "":
		// No Redis client: the etcd client or SQL pool is made with the
		// locks, below.
	case len(cfg.SentinelAddrs) > 0:
		c.rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    cfg.MasterName,
			SentinelAddrs: cfg.SentinelAddrs,
			PoolSize:      cfg.PoolSize,
			PoolTimeout:   cfg.PoolTimeout,
			DialTimeout:   cfg.Lease / 2,
			ReadTimeout:   cfg.Lease / 2,
			WriteTimeout:  cfg.Lease / 2,
			MaxRetries:    1,
		})
	default:
		opt := &redis.UniversalOptions{
			Addrs:         strings.Split(cfg.LockAddr, ","),
			IsClusterMode: cfg.Cluster,
			PoolSize:      cfg.PoolSize,
			PoolTimeout:   cfg.PoolTimeout,
			DialTimeout:   cfg.Lease / 2,
			ReadTimeout:   cfg.Lease / 2,
			WriteTimeout:  cfg.Lease / 2,
			MaxRetries:    1,
			MaxRedirects:  3,
		}
		if cfg.Redlock {
			// One client per master, with the same options.
			for _, addr := range opt.Addrs {
				o := *opt
				o.Addrs = []string{addr}
				c.rdbs = append(c.rdbs, redis.NewClient(o.Simple()))
			}
		} else {
			c.rdb = redis.NewUniversalClient(opt)
		}
	}
	if c.rdb != nil {
		c.rdbs = []redis.UniversalClient{c.rdb}
	}
	for _, rdb := range c.rdbs {
		rdb.AddHook(scriptRecorder{c})
	}
	c.store = redis.NewClient(&redis.Options{Addr: cfg.StoreAddr, PoolSize: 2 * cfg.Workers})
	opts := []distlock.Option{distlock.WithLogger(nil), distlock.WithEventHandler(c.onEvent)}
	var sopts []redisstore.Option
	if cfg.Prefix != "" {
		sopts = append(sopts, redisstore.WithPrefix(cfg.Prefix))
	}
	if cfg.Retention > 0 {
		sopts = append(sopts, redisstore.WithFenceRetention(cfg.Retention))
	}
	if cfg.AckReplicas > 0 {
		sopts = append(sopts, redisstore.WithReplicaAck(cfg.AckReplicas, cfg.AckTimeout))
	}
	switch {
	case len(cfg.Etcd) > 0:
		if err := c.newEtcdLocks(opts); err != nil {
			fmt.Fprintln(os.Stderr, "etcd client:", err)
			return 2
		}
	case cfg.SQL != "":
		if err := c.newSQLLocks(opts); err != nil {
			fmt.Fprintln(os.Stderr, "sql client:", err)
			return 2
		}
	case cfg.Redlock:
		c.locks = distlock.New(redisstore.NewRedlock(c.rdbs, sopts...), opts...)
	default:
		c.locks = distlock.New(redisstore.New(c.rdb, sopts...), opts...)
	}
	h.write(record{K: "start", Client: cfg.ID, PID: os.Getpid(), T: mono()})

	stats := make(chan struct{})
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				c.writeStats("stats", 0, "")
			case <-stats:
				return
			}
		}
	}()
	hogs := &sync.WaitGroup{}
	cmdDone := make(chan struct{})
	go func() {
		defer close(cmdDone)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			if f[0] == "stop" {
				break
			}
			ms, _ := strconv.Atoi(f[len(f)-1])
			d := time.Duration(ms) * time.Millisecond
			switch f[0] {
			case "close":
				c.closeUnderLoad(len(f) > 1 && f[1] == "inflight")
			case "hog":
				hogs.Add(1)
				go func() { defer hogs.Done(); c.hog(d) }()
			case "cancel":
				c.cancelTil.Store(mono() + d.Nanoseconds())
			}
			if c.stopping.Load() {
				break
			}
		}
		c.stopping.Store(true)
	}()

	var wg sync.WaitGroup
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(rand.New(rand.NewSource(cfg.Seed*131 + int64(cfg.ID)*17 + int64(w))))
		}()
	}
	wg.Wait()
	<-cmdDone
	hogs.Wait()
	c.extras.Wait()
	close(stats)
	<-statsDone
	c.locks.Close()
	for _, rdb := range c.rdbs {
		rdb.Close()
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.sqlClose != nil {
		c.sqlClose()
	}
	c.store.Close()
	var leakText string
	leaks := 0
	if err := findLeaks(); err != nil {
		leakText = err.Error()
		leaks = strings.Count(leakText, "Goroutine ")
		if leaks == 0 {
			leaks = 1
		}
	}
	c.writeStats("done", leaks, leakText)
	h.close()
	return 0
}

// unlockInner unlocks the re-entered lease in and describes the outcome.
func (c *chaosClient) unlockInner(in *distlock.Lease, owner int64, name string) record {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.cfg.Lease)
	defer cancel()
	call := mono()
	err := in.Unlock(ctx)
	return record{K: "reli", Client: c.cfg.ID, Owner: owner, Name: name, Token: in.Token(), Call: call, Ret: mono(),
		Res: classifyRelease(err), Err: errString(err), LostCause: lostCause(in)}
}

// lostCause says whether the lease's context ended as a loss.
func lostCause(l *distlock.Lease) bool {
	return errors.Is(context.Cause(l.Context()), distlock.ErrLockLost)
}

// closeUnderLoad closes the lock client while the workers are acquiring,
// holding and releasing, records when Close returned and with what, and
// makes the process stop: a Close that returns nil must leave no lock and
// no place in a queue of this process on the server, and nothing may be
// granted to its owners after it (checked from the MONITOR feed).
//
// So that Close meets waiters of every queued kind, it first makes one of
// each wait (queueBeforeClose), and records which of them were seen
// waiting, or, with inflight, whose acquisition call was on its way.
func (c *chaosClient) closeUnderLoad(inflight bool) {
	held, queued := c.queueBeforeClose(rand.New(rand.NewSource(c.cfg.Seed+int64(c.cfg.ID))), inflight)
	call := mono()
	err := c.locks.Close()
	c.h.write(record{K: "close", Client: c.cfg.ID, PID: os.Getpid(), Call: call, Ret: mono(), Wall: wall(), Res: classify(err), Err: errString(err),
		Held: held, Kinds: queued, Inflight: inflight})
	c.stopping.Store(true)
}

// queueBeforeClose makes a waiter of each queued kind the run has (fair
// mutex, election, read-write lock, semaphore), on a name of that kind:
// two owners of this process ask for it at once (a writer and a reader or
// writer, 2 and 2 permits of a semaphore of 3), so that one of them at
// least waits, behind the other or behind other processes. Both are left
// to Close: a lease ends with it, a waiting call returns ErrClosed. It
// waits, three leases at most, until a waiter of each is seen waiting
// (EventWaiting since they started; a worker's waiter of the same name
// counts too), or, with inflight, only until a call of one of them that
// may queue has been sent (on its way when Close is called: Close racing
// a queued acquisition). It returns the kinds of which one
// of them held, and those whose waiter (or call in flight) was seen.
// Replies may be delayed (the close fault's latency): queueing takes a
// few round trips.
func (c *chaosClient) queueBeforeClose(rng *rand.Rand, inflight bool) (held, queued []string) {
	seen := c.waitingAt
	if inflight {
		seen = c.enqueuedAt
	}
	pick := func(names map[string]time.Duration) string {
		var all []string
		for n := range names {
			all = append(all, n)
		}
		if len(all) == 0 {
			return ""
		}
		slices.Sort(all)
		return all[rng.Intn(len(all))]
	}
	type pair struct {
		kind, name string
		lockers    [2]locker
		start      int64
		held       atomic.Bool
	}
	var pairs []*pair
	add := func(kind, name string, a, b locker) {
		pairs = append(pairs, &pair{kind: kind, name: name, lockers: [2]locker{a, b}})
	}
	lease := distlock.WithTTL(c.cfg.Lease)
	if n := pick(c.cfg.Fair); n != "" {
		m := c.locks.FairMutex(n, lease, distlock.WithQueueTimeout(c.cfg.Fair[n]))
		l := locker{exclusive: true, fair: true, acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) { return m.Lock(ctx) }}
		add("fair", n, l, l)
	}
	if n := pick(c.cfg.Elect); n != "" {
		e := c.locks.Election(n, lease, distlock.WithQueueTimeout(c.cfg.Elect[n]))
		l := locker{exclusive: true, acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) { return e.Campaign(ctx, "closing") }}
		add("elect", n, l, l)
	}
	if n := pick(c.cfg.RW); n != "" {
		m := c.locks.RWMutex(n, lease, distlock.WithQueueTimeout(c.cfg.RW[n]))
		w := locker{mode: "w", exclusive: true, acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) { return m.Lock(ctx) }}
		r := locker{mode: "r", acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) { return m.RLock(ctx) }}
		if rng.Intn(2) == 0 {
			r = w
		}
		add("rw", n, w, r)
	}
	sems := map[string]time.Duration{}
	for n := range c.cfg.Sem {
		sems[n] = 0
	}
	if n := pick(sems); n != "" {
		s := c.locks.Semaphore(n, c.cfg.Sem[n], lease, distlock.WithQueueTimeout(c.cfg.SemQueue))
		l := locker{n: 2, acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) { return s.Acquire(ctx, 2) }}
		add("sem", n, l, l)
	}
	for _, p := range pairs {
		p.start = mono()
		for _, m := range p.lockers {
			c.extras.Add(1)
			go func() {
				defer c.extras.Done()
				c.holdUntilClosed(p.name, m, func() { p.held.Store(true) })
			}()
		}
	}
	deadline := time.NewTimer(3 * c.cfg.Lease)
	defer deadline.Stop()
	for {
		queued = queued[:0]
		c.mu.Lock()
		for _, p := range pairs {
			if seen[p.name] >= p.start {
				queued = append(queued, p.kind)
			}
		}
		notify := c.queueNotify
		c.mu.Unlock()
		if len(queued) == len(pairs) || inflight && len(queued) > 0 {
			break
		}
		select {
		case <-notify:
			continue
		case <-deadline.C:
		}
		break
	}
	for _, p := range pairs {
		if p.held.Load() {
			held = append(held, p.kind)
		}
	}
	return held, queued
}

// holdUntilClosed acquires name with m for a new owner, waiting until
// Close (which comes within three leases), and holds a lease it got,
// telling held, until its context ends (Close, or a loss), then unlocks
// it. Both are recorded as a worker's acquisitions and releases are.
func (c *chaosClient) holdUntilClosed(name string, m locker, held func()) {
	owner := c.seq.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*c.cfg.Lease)
	l, _ := c.acquire(ctx, m, name, owner, false, false)
	cancel()
	if l == nil {
		return
	}
	held()
	<-l.Context().Done()
	c.release(l, name, owner, nil)
}

// noteQueue records in at (waitingAt or enqueuedAt) that name was waited
// for or asked for just now, and tells queueBeforeClose.
func (c *chaosClient) noteQueue(at map[string]int64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at[name] = mono()
	close(c.queueNotify)
	c.queueNotify = make(chan struct{})
}

func (c *chaosClient) writeStats(kind string, leaks int, text string) {
	c.h.write(record{K: kind, Client: c.cfg.ID, T: mono(), Renewed: c.renewed.Load(),
		RenewFailed: c.renewFailed.Load(), Lost: c.lost.Load(), Leaks: leaks, LeakText: text})
}

func holdKey(name string, token uint64) string { return name + "/" + strconv.FormatUint(token, 10) }

// onEvent runs synchronously on the engine's goroutine, right after a lease
// context was cancelled for a loss: the closest reading of the loss signal.
func (c *chaosClient) onEvent(e distlock.Event) {
	switch e.Kind {
	case distlock.EventWaiting:
		c.noteQueue(c.waitingAt, e.Name)
	case distlock.EventRenewed:
		c.renewed.Add(1)
	case distlock.EventRenewFailed:
		c.renewFailed.Add(1)
	case distlock.EventLost:
		t, w := mono(), wall()
		c.lost.Add(1)
		c.mu.Lock()
		owner := c.owners[holdKey(e.Name, e.Token)]
		c.mu.Unlock()
		msg := ""
		if e.Err != nil {
			msg = e.Err.Error()
		}
		c.h.write(record{K: "lost", Client: c.cfg.ID, Owner: owner, Name: e.Name, Token: e.Token, T: t, Wall: w, Err: msg})
	}
}

// classify names the outcome of a call for the checkers.
func classify(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, distlock.ErrLockLost):
		return "lost"
	case errors.Is(err, distlock.ErrNotHeld):
		return "notheld"
	case errors.Is(err, distlock.ErrClosed):
		return "closed"
	case errors.Is(err, distlock.ErrWrongKind):
		return "wrongkind"
	case errors.Is(err, distlock.ErrNotReplicated):
		return "notrepl" // applied by the master, not acknowledged by enough replicas in time (WithReplicaAck)
	case errors.Is(err, distlock.ErrInvalidOption):
		return "invalid" // a semaphore's capacity shrunk below the permits asked for (the set-permits fault)
	case errors.Is(err, distlock.ErrNotAcquired) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return "ctx"
	case errors.Is(err, distlock.ErrNotAcquired):
		return "notacq"
	case errors.Is(err, distlock.ErrBackend):
		return "backend"
	}
	return "other"
}

// classifyRelease is classify for Unlock, whose error may also be the end of
// the caller's own context (the release was not confirmed in time).
func classifyRelease(err error) string {
	if k := classify(err); k != "other" || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return k
	}
	return "ctx"
}

// locker is one acquisition attempt of work: the lock of the name's kind,
// how to acquire it, and how (if at all) its owner re-enters it.
type locker struct {
	acquire   func(ctx context.Context, try bool) (*distlock.Lease, error)
	reenter   func(ctx context.Context) (*distlock.Lease, error) // nil: no re-entry (a semaphore)
	exclusive bool                                               // the holder alone holds the lock: it does the fenced read-modify-write
	noTry     bool                                               // acquire cannot try (an election has no TryCampaign)
	fair      bool
	mode      string // an RWMutex's side: r or w
	n         int    // a Semaphore's permits
}

// lockerFor picks what this attempt on name does: a plain or fair mutex
// (exclusive, re-entered with Lock), an election's Campaign (exclusive, not
// re-entered, never a try), an RWMutex's read side (60%, re-entered with
// RLock) or write side (exclusive; re-entered with Lock, or with RLock: a
// downgrade), or 1 or 2 permits of a semaphore (not re-entrant).
func (c *chaosClient) lockerFor(rng *rand.Rand, name string) locker {
	lease := c.cfg.Lease
	if queue, ok := c.cfg.RW[name]; ok {
		m := c.locks.RWMutex(name, distlock.WithTTL(lease), distlock.WithQueueTimeout(queue))
		if rng.Float64() < 0.6 {
			return locker{mode: "r", reenter: m.RLock, acquire: func(ctx context.Context, try bool) (*distlock.Lease, error) {
				if try {
					return m.TryRLock(ctx)
				}
				return m.RLock(ctx)
			}}
		}
		reenter := m.Lock
		if rng.Intn(2) == 0 {
			reenter = m.RLock // a downgrade: the owner reads once it unlocks its write lease
		}
		return locker{mode: "w", exclusive: true, reenter: reenter, acquire: func(ctx context.Context, try bool) (*distlock.Lease, error) {
			if try {
				return m.TryLock(ctx)
			}
			return m.Lock(ctx)
		}}
	}
	if capacity, ok := c.cfg.Sem[name]; ok {
		s := c.locks.Semaphore(name, capacity, distlock.WithTTL(lease), distlock.WithQueueTimeout(c.cfg.SemQueue))
		n := 1 + rng.Intn(2)
		return locker{n: n, acquire: func(ctx context.Context, try bool) (*distlock.Lease, error) {
			if try {
				return s.TryAcquire(ctx, n)
			}
			return s.Acquire(ctx, n)
		}}
	}
	if queue, ok := c.cfg.Elect[name]; ok {
		e := c.locks.Election(name, distlock.WithTTL(lease), distlock.WithQueueTimeout(queue))
		value := fmt.Sprintf("client %d", c.cfg.ID)
		return locker{exclusive: true, noTry: true, acquire: func(ctx context.Context, _ bool) (*distlock.Lease, error) {
			return e.Campaign(ctx, value)
		}}
	}
	m := c.locks.Mutex(name, distlock.WithTTL(lease))
	queue, fair := c.cfg.Fair[name]
	if fair {
		m = c.locks.FairMutex(name, distlock.WithTTL(lease), distlock.WithQueueTimeout(queue))
	}
	return locker{exclusive: true, fair: fair, reenter: m.Lock, acquire: func(ctx context.Context, try bool) (*distlock.Lease, error) {
		if try {
			return m.TryLock(ctx)
		}
		return m.Lock(ctx)
	}}
}

func (c *chaosClient) work(rng *rand.Rand) {
	lease := c.cfg.Lease
	for !c.stopping.Load() {
		if rng.Float64() < c.cfg.OnceRate {
			c.runOnce(rng)
			continue
		}
		if c.cfg.MultiRate > 0 && rng.Float64() < c.cfg.MultiRate {
			c.workMulti(rng)
			continue
		}
		name := c.cfg.Names[rng.Intn(len(c.cfg.Names))]
		owner := c.seq.Add(1)
		m := c.lockerFor(rng, name)
		try := rng.Float64() < c.cfg.TryRate && !m.noTry
		cancelMid := rng.Float64() < c.cfg.CancelRate || mono() < c.cancelTil.Load()
		var ctx context.Context
		var cancel context.CancelFunc
		switch {
		case cancelMid && rng.Intn(2) == 0:
			// While its request is on its way.
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.Intn(3000))*time.Microsecond)
		case cancelMid:
			// While it waits in a queue (a queued kind), racing the
			// grants of the holders' releases.
			ctx, cancel = context.WithTimeout(context.Background(), 3*time.Millisecond+time.Duration(rng.Int63n(int64(lease/2))))
		default:
			ctx, cancel = context.WithTimeout(context.Background(), 3*lease)
		}
		l, rec := c.acquire(ctx, m, name, owner, try, cancelMid)
		cancel()
		if l == nil {
			if rec.Res == "other" || rec.Res == "backend" || rec.Res == "notrepl" || rec.Res == "closed" {
				// Redis unreachable: do not spin (the scheduler's faults
				// last a fraction of a lease).
				time.Sleep(time.Duration(10+rng.Intn(40)) * time.Millisecond)
			}
			continue
		}
		c.guarded(rng, l, name, owner, m.exclusive)
		// Sometimes a second lease of the same owner (re-entry): either
		// held and unlocked together with the outer one, both at once,
		// or a re-entry racing the outer Unlock. A semaphore is not
		// re-entrant.
		var innerRes chan record // the re-entered lease's Unlock outcome
		x := rng.Float64()
		if m.reenter == nil {
			x = 1
		}
		switch {
		case x < 0.05:
			if in, err := m.reenter(l.Context()); err == nil {
				innerRes = make(chan record, 1)
				go func() { innerRes <- c.unlockInner(in, owner, name) }()
			}
		case x < 0.10:
			innerRes = make(chan record, 1)
			go func() {
				in, err := m.reenter(l.Context())
				if err != nil {
					innerRes <- record{}
					return
				}
				innerRes <- c.unlockInner(in, owner, name)
			}()
		}
		c.release(l, name, owner, innerRes)
	}
}

// ownerKey is the context key of the acquisition's owner number in the
// history (its record's Owner), which the scriptRecorder reads when
// go-redis hands it the caller's context.
type ownerKey struct{}

// acquire makes one acquisition attempt of m on name for owner (a number
// of the history) and records it: the lease, or nil and the record of the
// failure.
func (c *chaosClient) acquire(ctx context.Context, m locker, name string, owner int64, try, cancelMid bool) (*distlock.Lease, record) {
	ctx = context.WithValue(ctx, ownerKey{}, owner)
	call := mono()
	l, err := m.acquire(ctx, try)
	ret, retWall := mono(), wall()
	rec := record{K: "acq", Client: c.cfg.ID, Owner: owner, Name: name, Try: try, Call: call, Ret: ret, Wall: retWall, Res: classify(err), Cancel: cancelMid,
		Fair: m.fair, Mode: m.mode, N: m.n}
	if err != nil {
		rec.Err = err.Error()
		c.h.write(rec)
		return nil, rec
	}
	rec.Token = l.Token()
	c.mu.Lock()
	c.owners[holdKey(name, l.Token())] = owner
	c.mu.Unlock()
	c.h.write(rec)
	context.AfterFunc(l.Context(), func() {
		t := mono()
		c.h.write(record{K: "cancel", Client: c.cfg.ID, Owner: owner, Name: name, Token: rec.Token, T: t, Err: fmt.Sprint(context.Cause(l.Context()))})
	})
	return l, rec
}

// release unlocks l and records it; innerRes, if not nil, gives the
// outcome of the Unlock of a re-entered lease of the same owner, made at
// the same time.
func (c *chaosClient) release(l *distlock.Lease, name string, owner int64, innerRes chan record) {
	uctx, ucancel := context.WithTimeout(context.Background(), 2*c.cfg.Lease)
	call, callWall := mono(), wall()
	err := l.Unlock(uctx)
	ret := mono()
	ucancel()
	rel := record{K: "rel", Client: c.cfg.ID, Owner: owner, Name: name, Token: l.Token(), Call: call, Wall: callWall, Ret: ret, Res: classifyRelease(err),
		LostCause: lostCause(l)}
	if err != nil {
		rel.Err = err.Error()
	}
	if innerRes != nil {
		// The lock is free once both leases are unlocked: the release
		// ends when the later Unlock returns, and is known only if
		// both outcomes are.
		in := <-innerRes
		if in.K != "" {
			c.h.write(in)
			rel.Ret = max(rel.Ret, in.Ret)
			if in.Res != "ok" && rel.Res == "ok" {
				rel.Res = "backend"
			}
			if (in.Res == "ok") != (classifyRelease(err) == "ok") {
				rel.Pair = in.Res
			}
		}
	}
	c.h.write(rel)
	c.mu.Lock()
	delete(c.owners, holdKey(name, l.Token()))
	c.mu.Unlock()
}

// guarded is the work done under the lock: a fenced read, some work, and a
// fenced write of read+1. A third of the holders do not look at the lease
// context before writing (the check-then-act gap of real code), so holders
// that outlived their lease do try stale writes and the store must refuse
// them. Holders of a shared lock (readers, permit holders) are not
// exclusive: they only hold for the same work time, with the same Extend
// calls, and touch no register.
func (c *chaosClient) guarded(rng *rand.Rand, l *distlock.Lease, name string, owner int64, exclusive bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tok := l.Token()
	var val int64
	if exclusive {
		call := mono()
		v, ok, err := fencedRead(ctx, c.store, name, tok, owner)
		c.h.write(record{K: "op", Client: c.cfg.ID, Owner: owner, Name: name, Token: tok, Op: "r", Call: call, Ret: mono(), Acc: ok, Err: errString(err)})
		if err != nil || !ok {
			return
		}
		val = v
	}
	extending := rng.Float64() < c.cfg.ExtendRate
	if extending {
		c.extend(rng, l, name, owner)
	}
	work := time.Duration(rng.Int63n(int64(c.cfg.WorkMax) + 1))
	if rng.Float64() < c.longRate() || extending && rng.Intn(3) == 0 {
		work = c.cfg.Lease + time.Duration(rng.Int63n(int64(c.cfg.Lease))) // outlives the lease: renewals
	}
	careful := rng.Intn(3) != 0
	t := time.NewTimer(work)
	// A long hold that extends does so about every third of a lease, so
	// that its Extend calls meet the faults.
	var tick <-chan time.Time
	if extending && work > c.cfg.Lease/3 {
		tk := time.NewTicker(c.cfg.Lease / 3)
		defer tk.Stop()
		tick = tk.C
	}
wait:
	for {
		select {
		case <-t.C:
			break wait
		case <-tick:
			c.extend(rng, l, name, owner)
		case <-l.Context().Done():
			if careful {
				t.Stop()
				return
			}
			<-t.C
			break wait
		}
	}
	if !exclusive || careful && l.Context().Err() != nil {
		return
	}
	call := mono()
	ok, err := fencedWrite(ctx, c.store, name, tok, owner, val)
	c.h.write(record{K: "op", Client: c.cfg.ID, Owner: owner, Name: name, Token: tok, Op: "w", Call: call, Ret: mono(), Acc: ok, Err: errString(err)})
}

// longRate is the share of holds that outlive the lease.
func (c *chaosClient) longRate() float64 {
	if c.cfg.LongRate > 0 {
		return c.cfg.LongRate
	}
	return 0.05
}

// extend calls Extend with a lease of 0.1 (ExtendMin) to 3 leases
// (shortening or lengthening it) under a deadline of a quarter lease, so that under faults
// some calls fail with an unknown outcome and their request may land later.
func (c *chaosClient) extend(rng *rand.Rand, l *distlock.Lease, name string, owner int64) {
	lo := 0.1
	if c.cfg.ExtendMin > 0 {
		lo = c.cfg.ExtendMin
	}
	ttl := time.Duration((lo + (3-lo)*rng.Float64()) * float64(c.cfg.Lease)).Round(time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Lease/4)
	defer cancel()
	call := mono()
	err := l.Extend(ctx, ttl)
	c.h.write(record{K: "ext", Client: c.cfg.ID, Owner: owner, Name: name, Token: l.Token(), Call: call, Ret: mono(), Res: classifyRelease(err), Err: errString(err), TTLms: ttl.Milliseconds()})
}

// hog exhausts the lock client's connection pool for d: every connection
// is taken and held, so renewals and acquisitions wait PoolTimeout and fail.
func (c *chaosClient) hog(d time.Duration) {
	end := time.Now().Add(d)
	rdb, ok := c.rdb.(*redis.Client)
	if !ok {
		return // the cluster mode has no pool-exhaustion fault
	}
	var conns []*redis.Conn
	for len(conns) < c.cfg.PoolSize && time.Now().Before(end) {
		cn := rdb.Conn()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PoolTimeout)
		err := cn.Ping(ctx).Err()
		cancel()
		if err != nil {
			cn.Close()
			continue
		}
		conns = append(conns, cn)
	}
	if wait := time.Until(end); wait > 0 {
		time.Sleep(wait) // the fault's own length
	}
	for _, cn := range conns {
		cn.Close()
	}
}

// scriptRecorder watches every call of distlock's scripts this process
// sends (see recordEnqueue and recordScriptError), as go-redis sends it:
// from before its first attempt is written to after its reply is read
// (after go-redis's retries).
type scriptRecorder struct{ c *chaosClient }

func (e scriptRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (e scriptRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		sc, ok := e.c.parseCall(cmd)
		if !ok {
			return next(ctx, cmd)
		}
		e.c.sending(sc)
		call, callWall := mono(), wall()
		err := next(ctx, cmd)
		owner, _ := ctx.Value(ownerKey{}).(int64)
		e.c.recordScript(sc, owner, call, callWall)
		return err
	}
}

func (e scriptRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var scs []scriptCall
		for _, cmd := range cmds {
			if sc, ok := e.c.parseCall(cmd); ok {
				e.c.sending(sc)
				scs = append(scs, sc)
			}
		}
		call, callWall := mono(), wall()
		err := next(ctx, cmds)
		for _, sc := range scs {
			e.c.recordScript(sc, 0, call, callWall) // a pipeline's context is none of its callers'
		}
		return err
	}
}

// leakGrace is how long a client process lets goroutines end after it
// closed everything before it calls them leaked: go-redis's pool, when a
// dial failed shortly before Close (a Sentinel failover, a restart),
// leaves a prober (ConnPool.tryDial) that sleeps a second between dials
// and sees the pool closed only when it wakes (a CI run caught one).
const leakGrace = 10 * time.Second

// findLeaks is goleak.Find, tried again until leakGrace has passed.
func findLeaks() error {
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find() // which retries for about a second itself
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// A scriptCall is a call of one of distlock's scripts: the script's name,
// the lock name of its first key, its arguments, and the command.
type scriptCall struct {
	script, name string
	argv         []string
	cmd          redis.Cmder
}

// parseCall reads cmd as a call of one of distlock's scripts, or reports
// that it is not one.
func (c *chaosClient) parseCall(cmd redis.Cmder) (scriptCall, bool) {
	script, keys, argv, ok := redisbackend.ScriptCall(cmd.Args())
	if !ok {
		return scriptCall{}, false
	}
	sc := scriptCall{script: script, argv: argv, cmd: cmd}
	if len(keys) > 0 {
		sc.name, _, _ = strings.Cut(strings.TrimPrefix(keys[0], c.cfg.Prefix+"{"), "}")
	}
	return sc, true
}

// waitArg is the index of the queue timeout among the arguments of the
// acquisition scripts of the queued kinds ('0': never queues; see their
// headers).
var waitArg = map[string]int{"fair_acquire": 5, "rw_acquire": 7, "sem_acquire": 7}

// sending notes, for queueBeforeClose, an acquisition call that may
// queue (a queued kind's, not a try) about to be sent.
// It writes an abs record for a call of abandon.lua: the give-up check
// excuses an owner whose clean-up was sent, and not confirmed, by the
// time its call returned.
func (c *chaosClient) sending(sc scriptCall) {
	if wait, ok := waitArg[sc.script]; ok && len(sc.argv) > wait && sc.argv[wait] != "0" {
		c.noteQueue(c.enqueuedAt, sc.name)
	}
	if sc.script == "abandon" && len(sc.argv) > 0 {
		c.h.write(record{K: "abs", Client: c.cfg.ID, Name: sc.name, Place: placeID(sc.argv[0]), Wall: wall()})
	}
}

// recordScript records what the checks need of a call.
func (c *chaosClient) recordScript(sc scriptCall, owner, call, callWall int64) {
	if _, ok := waitArg[sc.script]; ok {
		c.recordEnqueue(sc, owner, call, callWall)
	}
	c.recordScriptError(sc)
	c.recordAbandon(sc)
}

// recordAbandon writes, for a call of abandon.lua, an abok record if it
// succeeded (the clean-up of the owner's attempt is confirmed), or an abf
// record if it failed (not NOSCRIPT, which the backend follows with
// EVAL): the engine retries it in the background. A call that gives up
// returns once the clean-up's first attempt has ended, confirmed or not,
// or after giveUpWait: the give-up check leaves out the calls whose
// clean-up failed first, and excuses those whose clean-up was not
// confirmed by their return.
func (c *chaosClient) recordAbandon(sc scriptCall) {
	if sc.script != "abandon" || len(sc.argv) == 0 {
		return
	}
	switch err := sc.cmd.Err(); {
	case err == nil:
		c.h.write(record{K: "abok", Client: c.cfg.ID, Name: sc.name, Place: placeID(sc.argv[0]), Wall: wall()})
	case !strings.Contains(err.Error(), "NOSCRIPT"):
		c.h.write(record{K: "abf", Client: c.cfg.ID, Name: sc.name, Place: placeID(sc.argv[0]), Wall: wall(), Err: err.Error()})
	}
}

// recordScriptError writes a serr record for each error of the call that
// the script itself raised: a Lua error, or a command the script ran that
// Redis refused, either for the whole call (Redis reports it with
// '@user_script') or for one item of a batch (refresh.lua, renew.lua and
// shared_renew.lua answer an error in the item's place), unless it is
// about the server's state (serverState: a failover's replica refuses
// writes). The chaos run's faults never cause one otherwise (they cut
// connections, delay them, stop or empty Redis, flush its scripts): a
// script error is a bug of a script, such as a record it cannot read (a
// name with a space).
func (c *chaosClient) recordScriptError(sc scriptCall) {
	var texts []string
	if err := sc.cmd.Err(); err != nil && strings.Contains(err.Error(), "user_script") && !serverState(err.Error()) {
		texts = append(texts, err.Error())
	}
	if rc, ok := sc.cmd.(*redis.Cmd); ok && rc.Err() == nil {
		if items, ok := rc.Val().([]any); ok && (sc.script == "refresh" || sc.script == "renew" || sc.script == "shared_renew") {
			for _, v := range items {
				if err, ok := v.(error); ok && !serverState(err.Error()) {
					texts = append(texts, err.Error())
				}
			}
		}
	}
	for _, t := range texts {
		c.h.write(record{K: "serr", Client: c.cfg.ID, Name: sc.name, Script: sc.script, T: mono(), Err: t})
	}
}

// serverState says whether a script's error is about the server's state,
// not the script: a replica that refuses writes (a failover), a server
// loading its data, a refused command (ACL).
func serverState(text string) bool {
	for _, s := range []string{"READONLY", "LOADING", "MASTERDOWN", "NOREPLICAS", "OOM", "BUSY", "NOSCRIPT", "NOPERM"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// The enqueue records: every acquisition call of a queued kind this
// process sends (fair_acquire.lua for a fair mutex or an election,
// rw_acquire.lua, sem_acquire.lua: a Lock's enqueue, or a TryLock), with
// its times, what the reply was, and a digest of the owner id (placeID).
// The FIFO checker compares these times across processes
// (CLOCK_MONOTONIC) and finds the places on the server (MONITOR) by that
// digest; the give-up checker finds which acquisition of the history each
// owner id was for: the one whose number the caller's context carries,
// when go-redis hands the hook the caller's context (a call sent on its
// own), or else the acquisitions of the name that were under way when it
// was sent.

// recordEnqueue writes the enq record of an acquisition call of a queued
// kind (see scriptRecorder) made for the history's acquisition owner (0:
// unknown). Res is acquired, queued, refused (a TryLock, or an abandoned
// owner), wrongkind, toobig (a semaphore's permits above its capacity),
// deadlock (a read-write lock's upgrade) or error (no reply, or an error
// reply: the request may or may not have been applied).
func (c *chaosClient) recordEnqueue(sc scriptCall, owner, call, callWall int64) {
	ret, retWall := mono(), wall()
	wait, reenter := waitArg[sc.script], -1
	if sc.script == "rw_acquire" {
		reenter = 11 // the re-entry flag
	}
	if len(sc.argv) <= max(wait, reenter) {
		return
	}
	res := "error"
	if rc, ok := sc.cmd.(*redis.Cmd); ok && rc.Err() == nil {
		if v, err := rc.Slice(); err == nil && len(v) > 0 {
			code, _ := v[0].(int64)
			res = map[int64]string{1: "acquired", 2: "queued", 0: "refused", -1: "wrongkind", -3: "deadlock", -4: "toobig"}[code]
		}
	}
	c.h.write(record{K: "enq", Client: c.cfg.ID, Owner: owner, Name: sc.name, Place: placeID(sc.argv[0]), Try: sc.argv[wait] == "0",
		Reenter: reenter > 0 && sc.argv[reenter] == "1", Script: sc.script,
		Call: call, Ret: ret, CallWall: callWall, Wall: retWall, Res: res, Err: errString(sc.cmd.Err())})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
