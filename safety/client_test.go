package safety

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/redis/go-redis/v9"
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
	CancelRate  float64 // share of acquisitions whose context is cancelled after 0-3 ms
	TryRate     float64 // share of acquisitions made with TryLock
	ExtendRate  float64 // share of holds that call Extend, to a lease of 0.1 to 3 leases
	Cluster     bool    // LockAddr is a comma-separated list of cluster nodes
	// Redlock: LockAddr is a comma-separated list of independent masters
	// (each through its toxiproxy), locked with distlock.NewRedlock.
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
	// RW maps the names locked with RWMutex to their queue timeout, and
	// Sem the semaphores' names to their capacity (their queue timeout
	// is SemQueue). Readers and permit holders share their lock: they do
	// not do the fenced read-modify-write, they only hold.
	RW       map[string]time.Duration
	Sem      map[string]int
	SemQueue time.Duration
}

// chaosClient is the state of one client process.
type chaosClient struct {
	cfg   clientConfig
	h     *historyWriter
	locks *distlock.Client
	rdb   redis.UniversalClient   // the lock server's client; nil in the Redlock mode
	rdbs  []redis.UniversalClient // every lock server's client: rdb, or one per Redlock master
	store *redis.Client
	seq   atomic.Int64

	stopping  atomic.Bool
	cancelTil atomic.Int64 // mono: until then every acquisition is cancelled mid-way

	renewed, renewFailed, lost atomic.Int64

	mu     sync.Mutex
	owners map[string]int64 // name/token -> owner, for the Lost event
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
	c := &chaosClient{cfg: cfg, h: h, owners: map[string]int64{}}
	c.seq.Store(int64(cfg.ID) * 1_000_000)
	if len(cfg.SentinelAddrs) > 0 {
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
	} else {
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
		rdb.AddHook(enqueueRecorder{c})
	}
	c.store = redis.NewClient(&redis.Options{Addr: cfg.StoreAddr, PoolSize: 2 * cfg.Workers})
	opts := []distlock.Option{distlock.WithLogger(nil), distlock.WithEventHandler(c.onEvent)}
	if cfg.AckReplicas > 0 {
		opts = append(opts, distlock.WithReplicaAck(cfg.AckReplicas, cfg.AckTimeout))
	}
	if cfg.Redlock {
		c.locks = distlock.NewRedlock(c.rdbs, opts...)
	} else {
		c.locks = distlock.New(c.rdb, opts...)
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
				c.closeUnderLoad()
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
	close(stats)
	<-statsDone
	c.locks.Close()
	for _, rdb := range c.rdbs {
		rdb.Close()
	}
	c.store.Close()
	var leakText string
	leaks := 0
	if err := goleak.Find(); err != nil {
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
// makes the process stop: a Close that returns nil must leave no lock of
// this process on the server (checked from the MONITOR feed).
func (c *chaosClient) closeUnderLoad() {
	call := mono()
	err := c.locks.Close()
	c.h.write(record{K: "close", Client: c.cfg.ID, PID: os.Getpid(), Call: call, Ret: mono(), Wall: wall(), Res: classify(err), Err: errString(err)})
	c.stopping.Store(true)
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
	fair      bool
	mode      string // an RWMutex's side: r or w
	n         int    // a Semaphore's permits
}

// lockerFor picks what this attempt on name does: a plain or fair mutex
// (exclusive, re-entered with Lock), an RWMutex's read side (60%, re-entered
// with RLock) or write side (exclusive; re-entered with Lock, or with RLock:
// a downgrade), or 1 or 2 permits of a semaphore (not re-entrant).
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
		name := c.cfg.Names[rng.Intn(len(c.cfg.Names))]
		owner := c.seq.Add(1)
		m := c.lockerFor(rng, name)
		try := rng.Float64() < c.cfg.TryRate
		cancelMid := rng.Float64() < c.cfg.CancelRate || mono() < c.cancelTil.Load()
		var ctx context.Context
		var cancel context.CancelFunc
		if cancelMid {
			ctx, cancel = context.WithTimeout(context.Background(), time.Duration(rng.Intn(3000))*time.Microsecond)
		} else {
			ctx, cancel = context.WithTimeout(context.Background(), 3*lease)
		}
		call := mono()
		l, err := m.acquire(ctx, try)
		ret := mono()
		cancel()
		rec := record{K: "acq", Client: c.cfg.ID, Owner: owner, Name: name, Try: try, Call: call, Ret: ret, Res: classify(err), Cancel: cancelMid,
			Fair: m.fair, Mode: m.mode, N: m.n}
		if err != nil {
			rec.Err = err.Error()
			c.h.write(rec)
			if rec.Res == "other" || rec.Res == "backend" || rec.Res == "notrepl" || rec.Res == "closed" {
				// Redis unreachable: do not spin (the scheduler's faults
				// last a fraction of a lease).
				time.Sleep(time.Duration(10+rng.Intn(40)) * time.Millisecond)
			}
			continue
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
		uctx, ucancel := context.WithTimeout(context.Background(), 2*lease)
		call, callWall := mono(), wall()
		err = l.Unlock(uctx)
		ret = mono()
		ucancel()
		rel := record{K: "rel", Client: c.cfg.ID, Owner: owner, Name: name, Token: rec.Token, Call: call, Wall: callWall, Ret: ret, Res: classifyRelease(err),
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
		delete(c.owners, holdKey(name, rec.Token))
		c.mu.Unlock()
	}
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
	if rng.Float64() < 0.05 || extending && rng.Intn(3) == 0 {
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

// extend calls Extend with a lease of 0.1 to 3 leases (shortening or
// lengthening it) under a deadline of a quarter lease, so that under faults
// some calls fail with an unknown outcome and their request may land later.
func (c *chaosClient) extend(rng *rand.Rand, l *distlock.Lease, name string, owner int64) {
	ttl := time.Duration((0.1 + 2.9*rng.Float64()) * float64(c.cfg.Lease)).Round(time.Millisecond)
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

// enqueueRecorder records every fair_acquire.lua call this process sends
// (a fair Lock's enqueue, or a fair TryLock), as go-redis sends it: when
// the call started (before its first attempt was written) and when its
// reply was read (after go-redis's retries), and what the reply was. The
// FIFO checker compares these times across processes (CLOCK_MONOTONIC)
// and finds the places on the server (MONITOR) by placeID of the owner.
type enqueueRecorder struct{ c *chaosClient }

func (e enqueueRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (e enqueueRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isEnqueue(cmd) {
			return next(ctx, cmd)
		}
		call, callWall := mono(), wall()
		err := next(ctx, cmd)
		e.c.recordEnqueue(cmd, call, callWall)
		return err
	}
}

func (e enqueueRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var enq []redis.Cmder
		for _, cmd := range cmds {
			if isEnqueue(cmd) {
				enq = append(enq, cmd)
			}
		}
		if len(enq) == 0 {
			return next(ctx, cmds)
		}
		call, callWall := mono(), wall()
		err := next(ctx, cmds)
		for _, cmd := range enq {
			e.c.recordEnqueue(cmd, call, callWall)
		}
		return err
	}
}

func isEnqueue(cmd redis.Cmder) bool {
	name, _, _, ok := redisbackend.ScriptCall(cmd.Args())
	return ok && name == "fair_acquire"
}

// recordEnqueue writes the enq record of a fair_acquire.lua call (see
// enqueueRecorder). Res is acquired, queued, refused (a TryLock, or an
// abandoned owner), wrongkind, or error (no reply, or an error reply: the
// request may or may not have been applied).
func (c *chaosClient) recordEnqueue(cmd redis.Cmder, call, callWall int64) {
	ret, retWall := mono(), wall()
	_, keys, argv, _ := redisbackend.ScriptCall(cmd.Args())
	if len(keys) == 0 || len(argv) < 6 {
		return
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(keys[0], "distlock:{"), "}")
	res := "error"
	if rc, ok := cmd.(*redis.Cmd); ok && rc.Err() == nil {
		if v, err := rc.Slice(); err == nil && len(v) > 0 {
			code, _ := v[0].(int64)
			res = map[int64]string{1: "acquired", 2: "queued", 0: "refused", -1: "wrongkind"}[code]
		}
	}
	c.h.write(record{K: "enq", Client: c.cfg.ID, Name: name, Place: placeID(argv[0]), Try: argv[5] == "0",
		Call: call, Ret: ret, CallWall: callWall, Wall: retWall, Res: res, Err: errString(cmd.Err())})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
