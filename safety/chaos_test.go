//go:build linux

package safety

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Fault kinds injected by the scheduler.
const (
	faultHolderKill   = "holder-sigkill"
	faultHolderPause  = "holder-sigstop"
	faultRedisPause   = "redis-sigstop"
	faultRedisRestart = "redis-restart"
	faultLatency      = "proxy-latency"
	faultTimeout      = "proxy-timeout"
	faultReset        = "proxy-reset-peer"
	faultScriptFlush  = "script-flush"
	faultPoolHog      = "pool-exhaustion"
	faultCancelStorm  = "ctx-cancel-storm"
	faultLateRequest  = "proxy-late-request"
	faultLostReply    = "proxy-lost-reply"
	faultClientClose  = "client-close"
	faultSetPermits   = "set-permits"
	// Sentinel mode: the master is killed and the sentinels promote its
	// replica; a sentinel is asked for a failover; the replica's
	// replication is cut, then the master is killed (the promoted replica
	// misses what the master acknowledged during the cut).
	faultMasterKill       = "master-sigkill"
	faultSentinelFailover = "sentinel-failover"
	faultCutKill          = "cut-then-master-sigkill"
	// Redlock mode: a master killed and restarted empty once it has been
	// down for longer than any lease (a delayed restart); a majority of
	// the masters killed or paused at once (see redlock_chaos_test.go).
	faultNodeKill = "master-kill-delayed-restart"
	faultNoQuorum = "no-quorum"
)

// faultKinds are the faults of a run on one redis-server behind a toxiproxy
// per client.
var faultKinds = []string{faultHolderKill, faultHolderPause, faultRedisPause, faultRedisRestart,
	faultLatency, faultTimeout, faultReset, faultScriptFlush, faultPoolHog, faultCancelStorm,
	faultLateRequest, faultLostReply, faultClientClose, faultSetPermits}

// clusterFaultKinds are the faults of a run on a Redis Cluster, which the
// clients reach directly (a proxy would hide the nodes' addresses from the
// redirections): redis-sigstop pauses one master, so only its slots stop.
// A restarted node comes back empty and without its slots, and the pool
// fault needs a single-node client, so both are left out.
var clusterFaultKinds = []string{faultHolderKill, faultHolderPause, faultRedisPause,
	faultScriptFlush, faultCancelStorm, faultClientClose, faultSetPermits}

// sentinelFaultKinds are the faults of a run on a Sentinel group (a master,
// one replica, three sentinels), which the clients reach with go-redis's
// failover client: the failovers, and the holder faults. The server pause
// and restart, the proxies' faults, the pool fault and Close (whose check
// needs MONITOR) are left out: the point of the mode is failover.
var sentinelFaultKinds = []string{faultHolderKill, faultHolderPause, faultMasterKill,
	faultSentinelFailover, faultCutKill, faultCancelStorm}

// failoverFaults lose what the promoted replica had not received.
var failoverFaults = map[string]bool{faultMasterKill: true, faultSentinelFailover: true, faultCutKill: true}

// sentinelReplicas is the Sentinel mode's number of replicas: with one,
// the replica that acknowledged a write (WithReplicaAck(1, ...)) is the
// one the sentinels promote.
const sentinelReplicas = 1

// sentinelAckTimeout is the Sentinel mode's WAIT timeout with replica
// acknowledgement (the lease must be at least six times as long).
const sentinelAckTimeout = 150 * time.Millisecond

// benign faults do not break the mutex model: windows that contain them are
// still checked for linearizability (SCRIPT FLUSH must be invisible,
// cancelled acquisitions are in the model as operations of unknown
// outcome, and a semaphore's capacity is no mutex's).
// An etcd compaction drops old revisions only, which no lock operation
// reads.
var benignFaults = map[string]bool{faultScriptFlush: true, faultCancelStorm: true, faultSetPermits: true, faultEtcdCompact: true}

// A fault is one injected fault; times are CLOCK_MONOTONIC ns.
type fault struct {
	Kind       string
	Start, End int64
	Slot       int
	Client     int
	Node       int // the paused lock server (redis-sigstop)
	Detail     string
}

// clientProc is one chaos client process.
type clientProc struct {
	id      int
	slot    int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	history string
	stderr  string
	done    chan struct{}
	err     error

	mu      sync.Mutex
	killAt  int64      // mono, 0 if not killed
	closeAt int64      // mono, when it called Client.Close (the close fault), 0 if it did not
	pauses  [][2]int64 // mono intervals during which it was stopped
}

func (p *clientProc) send(line string) {
	_, _ = io.WriteString(p.stdin, line+"\n")
}

// chaosRun is the parent side of a chaos run.
type chaosRun struct {
	t        *testing.T
	rng      *rand.Rand
	seed     int64
	lease    time.Duration
	unit     time.Duration // the scheduler's pace: the lease, or less in the Sentinel mode
	dir      string
	kinds    []string
	lockSrvs []*redistest.Server // the lock server, or the cluster's masters
	cluster  bool
	sentinel *redistest.Sentinel // the Sentinel mode's group, nil otherwise
	ack      bool                // Sentinel mode with WithReplicaAck(1, sentinelAckTimeout)
	redlock  *redlockRun         // the Redlock mode's masters' faults, nil otherwise
	etcd     *etcdRun            // the etcd mode's cluster, proxies and timeline, nil otherwise (etcd_chaos_test.go)
	sql      *sqlRun             // the SQL mode's server, proxies and timeline, nil otherwise (sql_chaos_test.go)
	clients  int                 // client processes at any time
	storeSrv *redistest.Server
	ctl      redis.UniversalClient // direct to the lock server(s), for the scheduler
	nodes    []*redis.Client       // one per lock server, direct
	proxies  []*toxiproxy.Proxy    // one per client slot; one per master in the Redlock mode; none in the cluster and Sentinel modes
	prefix   string                // of every key and channel: distlock's default, or one with a space (the cluster mode)
	names    []string
	fair     map[string]time.Duration // the names locked with FairMutex, and their queue timeouts
	elect    map[string]time.Duration // the elections' names, and their queue timeouts
	rw       map[string]time.Duration // the names locked with RWMutex, and their queue timeouts
	sem      map[string]int           // the semaphores' names, and their capacity
	semQueue time.Duration            // the semaphores' queue timeout
	// retention is the clients' fencing retention (WithFenceRetention):
	// shorter than the longest holds in the single and cluster modes, so
	// that every key a holder or a waiter counts on must outlive it.
	retention time.Duration
	onceRate  float64          // the share of iterations that run a job once (oncechecks_test.go)
	admin     *distlock.Client // the scheduler's, for SetPermits (on ctl)
	caps      []capChange      // the set-permits faults' changes, in order

	mu      sync.Mutex
	procs   []*clientProc // every process ever started
	current []*clientProc // by slot
	nextID  int
	faults  []fault
	start   int64
	dur     time.Duration
}

// chaosDuration is the length of a run: the flag's, or short (which is
// what CI runs: short for the cluster run, which has fewer fault kinds).
func chaosDuration(short time.Duration) time.Duration {
	switch {
	case *flagDuration > 0:
		return *flagDuration
	case *flagLong:
		return 8 * time.Minute
	}
	return short
}

// TestChaos runs client processes that loop acquire -> fenced read -> work
// -> fenced write -> release on a few lock names while a seeded scheduler
// injects faults, then checks the recorded history (see checks_test.go).
// The lock server is one redis-server, reached through a toxiproxy per
// client.
func TestChaos(t *testing.T) { runChaos(t, modeSingle, chaosDuration(40*time.Second)) }

// TestChaosCluster is TestChaos on a 3-master Redis Cluster that the
// clients reach directly; a paused master is among its faults.
func TestChaosCluster(t *testing.T) { runChaos(t, modeCluster, chaosDuration(20*time.Second)) }

// TestChaosSentinel is TestChaos on a Sentinel group (a master, one
// replica, three sentinels) that the clients reach with go-redis's
// failover client, on plain mutexes only; its faults are master kills,
// SENTINEL FAILOVER and a replication cut before a master kill, besides
// the holder faults. Exclusion violations across a failover are expected
// (the seeds' failure): counted and reported, not failed; the fenced
// register and the token order must hold (see docs/safety.md).
func TestChaosSentinel(t *testing.T) {
	needSentinelFlag(t)
	runChaos(t, modeSentinel, chaosDuration(20*time.Second))
}

// needSentinelFlag skips the Sentinel chaos runs with
// -chaos.sentinel=false. They are in the default suite: on a loaded
// machine the Sentinels themselves sometimes fail a failover (NOGOODSLAVE,
// a failover accepted but not carried out, a second failover right after
// the first), and the harness recovers from each (see docs/safety.md,
// "Sentinel failover").
func needSentinelFlag(t *testing.T) {
	if !*flagSentinel {
		t.Skip("the Sentinel chaos runs are skipped with -chaos.sentinel=false")
	}
}

// TestChaosSentinelAck is TestChaosSentinel with WithReplicaAck(1, 150ms):
// every acquisition and renewal counts only once the replica acknowledged
// it, and no exclusion violation is expected, failovers included.
func TestChaosSentinelAck(t *testing.T) {
	needSentinelFlag(t)
	runChaos(t, modeSentinelAck, chaosDuration(20*time.Second))
}

// Modes of a chaos run.
const (
	modeSingle      = "single"
	modeCluster     = "cluster"
	modeSentinel    = "sentinel"
	modeSentinelAck = "sentinel-ack"
	modeRedlock     = "redlock"
)

func runChaos(t *testing.T, mode string, dur time.Duration) {
	cluster := mode == modeCluster
	sentinel := mode == modeSentinel || mode == modeSentinelAck
	redlock := mode == modeRedlock
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("chaos: seed %d, duration %v (replay: go test -race -run '%s$' -seed=%d -chaos.duration=%v)", seed, dur, t.Name(), seed, dur)
	r := &chaosRun{t: t, rng: rand.New(rand.NewSource(seed)), seed: seed, lease: *flagLease, unit: *flagLease, dir: t.TempDir(), dur: dur,
		clients: *flagClients}
	if sentinel {
		// Holders must outlive a failover (one to five seconds) for its
		// lost writes to make a second holder; the scheduler keeps the
		// pace of the other modes.
		r.lease, r.unit = *flagSentinelLease, min(*flagLease, *flagSentinelLease)
	}
	r.prefix, r.retention = "distlock:", redisstore.DefaultFenceRetention
	if cluster {
		r.prefix = chaosClusterPrefix
	}
	if mode == modeSingle || cluster {
		r.retention, r.onceRate = chaosRetention, onceRate
	}
	for i := 0; i < *flagNames; i++ {
		r.names = append(r.names, chaosName("chaos", i))
	}
	// Fair names are fair for the whole run (kinds never mix), with a
	// queue timeout of half a lease (a grant's lease is then shorter than
	// the TTL, and the grantee renews it at once; every pause of a waiter
	// costs its place) or of two leases (places outlive short faults).
	r.fair, r.elect = map[string]time.Duration{}, map[string]time.Duration{}
	nFair, nRW, nSem, nElect := *flagFair, *flagRW, *flagSem, *flagElect
	if mode == modeSentinel || redlock {
		// The point is failover: plain mutexes only without replica
		// acknowledgement (the queued kinds' places and grants are lost
		// with the rest). With it, every kind: a grant is confirmed by
		// the grantee's own acknowledged renewal. Redlock refuses them
		// (ErrUnsupported).
		nFair, nRW, nSem, nElect = 0, 0, 0, 0
	}
	for i := 0; i < nFair; i++ {
		name := chaosName("fair", i)
		r.names = append(r.names, name)
		r.fair[name] = []time.Duration{r.lease / 2, 2 * r.lease}[i%2]
	}
	// Elections are fair mutexes whose holder leads: candidates queue as
	// fair waiters do, with a queue timeout of two leases.
	for i := 0; i < nElect; i++ {
		name := chaosName("elect", i)
		r.names = append(r.names, name)
		r.elect[name] = 2 * r.lease
	}
	// Read-write locks and semaphores are of their kind for the whole run
	// too. Their queue timeout is two leases.
	r.rw, r.sem, r.semQueue = map[string]time.Duration{}, map[string]int{}, 2*r.lease
	for i := 0; i < nRW; i++ {
		name := chaosName("rw", i)
		r.names = append(r.names, name)
		r.rw[name] = 2 * r.lease
	}
	for i := 0; i < nSem; i++ {
		name := chaosName("sem", i)
		r.names = append(r.names, name)
		r.sem[name] = semCapacity
	}
	r.cluster = cluster
	switch {
	case r.cluster:
		r.kinds = clusterFaultKinds
		r.lockSrvs = redistest.StartCluster(t, 3, redistest.WithArgs("--hz", "100")).Servers
	case sentinel:
		r.kinds = sentinelFaultKinds
		r.ack = mode == modeSentinelAck
		r.sentinel = redistest.StartSentinel(t, sentinelReplicas, redistest.WithArgs("--hz", "100"))
		r.lockSrvs = r.sentinel.Servers()
		for _, sn := range r.sentinel.Sentinels() {
			sc := redis.NewClient(sn.Options())
			_ = sc.Do(context.Background(), "CONFIG", "SET", "loglevel", "verbose").Err()
			sc.Close()
		}
	case redlock:
		r.kinds = redlockFaultKinds
		for range redlockMasters {
			r.lockSrvs = append(r.lockSrvs, redistest.Start(t, redistest.WithArgs("--hz", "100")))
		}
		r.redlock = newRedlockRun(len(r.lockSrvs), seed)
		if !flagSet("chaos.clients") {
			r.clients = redlockClients
		}
	default:
		r.kinds = faultKinds
		r.lockSrvs = []*redistest.Server{redistest.Start(t, redistest.WithArgs("--hz", "100"))}
	}
	r.storeSrv = redistest.Start(t)
	if sentinel {
		// The scheduler, the TTL sampler and the orphan check follow the
		// master, as the clients do.
		opt := r.sentinel.FailoverOptions()
		opt.MaxRetries = -1
		r.ctl = redis.NewFailoverClient(opt)
		r.nodes = append(r.nodes, redis.NewFailoverClient(opt))
	} else {
		var addrs []string
		for _, s := range r.lockSrvs {
			opt := s.Options()
			opt.MaxRetries = -1
			r.nodes = append(r.nodes, redis.NewClient(opt))
			addrs = append(addrs, s.Addr())
		}
		if redlock {
			addrs = addrs[:1] // independent masters: r.nodes reach each of them
		}
		r.ctl = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: r.cluster, MaxRetries: -1})
	}
	r.admin = distlock.New(redisstore.New(r.ctl, redisstore.WithPrefix(r.prefix), redisstore.WithFenceRetention(r.retention)), distlock.WithLogger(nil))
	defer func() {
		if err := r.admin.Close(); err != nil {
			t.Errorf("the scheduler's client: %v", err)
		}
		r.ctl.Close()
		for _, n := range r.nodes {
			n.Close()
		}
	}()
	store := r.storeSrv.Client(t)

	// MONITOR follows one server: in the Sentinel mode it would miss
	// the promoted replica, so the checks that need it are skipped.
	var mon monitors
	monCtx, monStop := context.WithCancel(context.Background())
	var monWG sync.WaitGroup
	defer func() { monStop(); monWG.Wait() }()
	monitored := r.lockSrvs
	if sentinel {
		monitored = nil
	}
	for _, s := range monitored {
		m := newMonitor(s.Addr(), r.prefix)
		m.shared = r.sharedNames()
		mon = append(mon, m)
		ready := make(chan struct{})
		monWG.Add(1)
		go func() { defer monWG.Done(); m.run(monCtx, ready) }()
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			t.Fatal("MONITOR did not start")
		}
	}

	if !r.cluster && !sentinel {
		// A proxy per client in front of the lock server, or, in the
		// Redlock mode, one per master that every client goes through:
		// its faults are the master's.
		tp := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		name, upstream := "client-%d", func(int) string { return r.lockSrvs[0].Addr() }
		n := r.clients
		if redlock {
			name, upstream, n = "master-%d", func(i int) string { return r.lockSrvs[i].Addr() }, len(r.lockSrvs)
		}
		for i := 0; i < n; i++ {
			p := toxiproxy.NewProxy(tp, fmt.Sprintf(name, i), "127.0.0.1:0", upstream(i))
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			r.proxies = append(r.proxies, p)
		}
	}
	defer func() {
		for _, p := range r.proxies {
			p.Stop()
		}
	}()

	r.start = mono()
	r.current = make([]*clientProc, r.clients)
	for i := range r.current {
		r.spawn(i)
	}
	sampler := r.startTTLSampler()
	r.schedule(time.Now().Add(dur))
	if r.redlock != nil {
		r.redlock.wait() // the masters' faults still running: every master up again
	}
	runEnd := mono()
	r.stopClients()
	for _, p := range r.proxies {
		p.Stop()
	}
	ttls := sampler.stop()

	rep := r.check(store, mon, runEnd)
	rep.TTL = ttls
	rep.Seed, rep.Duration = seed, dur.String()
	rep.Command = fmt.Sprintf("cd safety && go test -race -count=1 -timeout 30m -run '%s$' -seed=%d -chaos.duration=%v -chaos.clients=%d -chaos.workers=%d -chaos.names=%d -chaos.fair=%d -chaos.rw=%d -chaos.sem=%d -chaos.elect=%d -chaos.marks=%v -chaos.lease=%v -chaos.work=%v -v .",
		t.Name(), seed, dur, r.clients, *flagWorkers, *flagNames, *flagFair, *flagRW, *flagSem, *flagElect, *flagMarks, r.lease, *flagWork)
	if sentinel {
		rep.Command = strings.Replace(rep.Command, " -v .", fmt.Sprintf(" -chaos.sentinel.lease=%v -v .", r.lease), 1)
	}
	rep.log(t)
	if *flagReport != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*flagReport, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, v := range rep.violations() {
		t.Error(v)
	}
}

// spawn starts a client process in slot.
func (r *chaosRun) spawn(slot int) *clientProc {
	r.mu.Lock()
	id := r.nextID
	r.nextID++
	r.mu.Unlock()
	lockAddr := ""
	switch {
	case r.cluster:
		var addrs []string
		for _, s := range r.lockSrvs {
			addrs = append(addrs, s.Addr())
		}
		lockAddr = strings.Join(addrs, ",")
	case r.redlock != nil:
		var addrs []string
		for _, p := range r.proxies {
			addrs = append(addrs, p.Listen)
		}
		lockAddr = strings.Join(addrs, ",")
	case r.etcd != nil, r.sql != nil:
		// The etcd client is given its proxies' endpoints (cfg.Etcd), the
		// SQL one its proxy's DSN (cfg.SQL).
	case r.sentinel == nil:
		lockAddr = r.proxies[slot].Listen
	}
	cfg := clientConfig{
		ID:          id,
		LockAddr:    lockAddr,
		Cluster:     r.cluster,
		Redlock:     r.redlock != nil,
		StoreAddr:   r.storeSrv.Addr(),
		Names:       r.names,
		Lease:       r.lease,
		Workers:     *flagWorkers,
		Seed:        r.seed,
		History:     filepath.Join(r.dir, fmt.Sprintf("client-%d.jsonl", id)),
		PoolSize:    4,
		PoolTimeout: r.lease / 4,
		WorkMax:     *flagWork,
		CancelRate:  0.07,
		TryRate:     0.2,
		ExtendRate:  0.15,
		Prefix:      r.prefix,
		Retention:   r.retention,
		Fair:        r.fair,
		Elect:       r.elect,
		RW:          r.rw,
		Sem:         r.sem,
		SemQueue:    r.semQueue,
		OnceRate:    r.onceRate,
		OncePer:     oncePerName,
		OncePeriod:  oncePeriod,
		OnceKey:     onceKeyBase,
		OnceWindow:  onceWindow,
		OnceKeep:    onceKeepFor,
	}
	if r.etcd != nil {
		cfg.Etcd, cfg.MultiRate, cfg.ExtendMin, cfg.LongRate = r.etcd.endpoints(slot), etcdMultiRate, 1, etcdLongRate
		if !slices.Contains(r.etcd.kinds, "multi") {
			cfg.MultiRate = 0
		}
	}
	if r.sql != nil {
		r.sql.configure(&cfg, slot)
	}
	if r.sentinel != nil {
		cfg.SentinelAddrs, cfg.MasterName = r.sentinel.SentinelAddrs(), r.sentinel.MasterName()
		if r.ack {
			cfg.AckReplicas, cfg.AckTimeout = 1, sentinelAckTimeout
		}
	}
	b, _ := json.Marshal(cfg)
	p := &clientProc{id: id, slot: slot, history: cfg.History, stderr: filepath.Join(r.dir, fmt.Sprintf("client-%d.stderr", id)), done: make(chan struct{})}
	errf, err := os.Create(p.stderr)
	if err != nil {
		r.t.Fatal(err)
	}
	defer errf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=chaos-client", configEnv+"="+string(b))
	cmd.Stdout = errf
	cmd.Stderr = errf
	// Killed with the test binary, so that a crashed run leaves nothing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.stdin, err = cmd.StdinPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p.cmd = cmd
	go func() { p.err = cmd.Wait(); close(p.done) }()
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.current[slot] = p
	r.mu.Unlock()
	return p
}

// stopClients asks every client to stop, and waits for them to finish
// their current round, release, close and check for leaks.
func (r *chaosRun) stopClients() {
	for _, p := range r.current {
		p.send("stop")
		p.stdin.Close()
	}
	deadline := time.After(60 * time.Second)
	for _, p := range r.current {
		select {
		case <-p.done:
		case <-deadline:
			r.t.Errorf("client %d did not stop within 60s; killing it", p.id)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// schedule injects faults until end: first every kind once in a seeded
// order, then kinds at random; between faults a short gap, and now and then
// a quiet stretch of several leases for the linearizability windows. The
// faults whose checks are about the queued kinds' give-ups (Close under
// load, a cancel storm, set-permits) come first, in a seeded order, after
// a paused master in the cluster mode, so that a short run, which may not
// reach every kind, has each of them. The
// Redlock mode's faults of masters have a schedule of their own, at the
// same time (redlockRun.schedule).
func (r *chaosRun) schedule(end time.Time) {
	if r.redlock != nil {
		done := make(chan struct{})
		go func() { defer close(done); r.redlock.schedule(r, end) }()
		defer func() { <-done }()
	}
	var first []string
	for _, k := range []string{faultClientClose, faultCancelStorm, faultSetPermits} {
		if slices.Contains(r.kinds, k) {
			first = append(first, k)
		}
	}
	r.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	if r.cluster {
		first = append([]string{faultRedisPause}, first...) // the cluster mode's own
	}
	r.scheduleKinds(end, r.rng, r.kinds, first, r.inject)
}

// scheduleKinds is a schedule of kinds, drawn with rng, whose first round
// begins with the kinds first (in that order); inject injects one fault.
func (r *chaosRun) scheduleKinds(end time.Time, rng *rand.Rand, kinds, first []string,
	inject func(kind string, frac func(lo, hi float64) time.Duration)) {
	L, U := r.lease, r.unit
	// frac is a fault's length, in leases; gap a pause between faults,
	// in units.
	frac := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(L))
	}
	gapFrac := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(U))
	}
	order := slices.Clone(kinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	if r.sentinel != nil {
		// A failover takes seconds: the three kinds come first, so that
		// a short run has each of them.
		slices.SortStableFunc(order, func(a, b string) int {
			return cmp.Compare(b2i(!failoverFaults[a]), b2i(!failoverFaults[b]))
		})
	}
	order = append(slices.Clone(first), slices.DeleteFunc(order, func(k string) bool { return slices.Contains(first, k) })...)
	pace := func(d time.Duration) bool {
		if time.Now().Add(d).After(end) {
			return false
		}
		time.Sleep(d) // the scheduler's own pacing
		return true
	}
	if !pace(gapFrac(1, 2)) {
		return
	}
	for n := 0; ; n++ {
		kind := kinds[rng.Intn(len(kinds))]
		if n < len(order) {
			kind = order[n]
		}
		if time.Now().Add(3 * U).After(end) {
			return
		}
		inject(kind, frac)
		gap := gapFrac(0.3, 1)
		if rng.Intn(4) == 0 {
			gap = gapFrac(4, 6)
		}
		if !pace(gap) {
			return
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *chaosRun) record(f fault) {
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}

// holderSlot finds a slot whose client holds a lock now (a mutex, or a
// share of a read-write lock or semaphore), or, half the time when there
// are queued names, one whose client waits in a queue (a paused or killed
// waiter loses its place, and the next in line must be served), or a
// random slot. It reports which it found.
func (r *chaosRun) holderSlot() (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.lease/2)
	defer cancel()
	var pids []int
	what := "holder"
	if len(r.fair)+len(r.elect)+len(r.rw)+len(r.sem) > 0 && r.rng.Intn(2) == 0 {
		what = "waiter"
		pids = r.waiterPIDs(ctx)
	} else {
		// A Redlock holder holds its lock on several masters: the pids
		// of all of them (a master that is down or paused gives none).
		lockServers := []redis.Cmdable{r.ctl}
		if r.redlock != nil {
			lockServers = nil
			for _, n := range r.nodes {
				lockServers = append(lockServers, n)
			}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, srv := range lockServers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, n := range r.names {
					// A mutex's holder is its i field, a shared lock's holders
					// are its i:<owner> fields: 'pid since host' (lib.lua).
					for f, v := range srv.HGetAll(ctx, r.key(n)).Val() {
						if f == "i" || strings.HasPrefix(f, "i:") {
							if pid, err := strconv.Atoi(strings.Fields(v + " x")[0]); err == nil {
								mu.Lock()
								pids = append(pids, pid)
								mu.Unlock()
							}
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	slices.Sort(pids)
	r.rng.Shuffle(len(pids), func(i, j int) { pids[i], pids[j] = pids[j], pids[i] })
	for _, pid := range pids {
		for i, p := range r.current {
			if p.cmd.Process.Pid == pid {
				return i, what
			}
		}
	}
	return r.rng.Intn(len(r.current)), "random"
}

// waiterPIDs returns the pids of the processes that have a place in a
// queue (of any queued kind) now.
func (r *chaosRun) waiterPIDs(ctx context.Context) []int {
	var pids []int
	for _, n := range r.names {
		if r.kindOf(n) == "plain" {
			continue
		}
		for _, v := range r.ctl.HVals(ctx, r.key(n)+":qi").Val() {
			if pid, ok := placePID(r.key(n), v); ok {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// key is the lock hash of name, under the run's prefix; its other keys
// follow it (":q", ":fence", ...).
func (r *chaosRun) key(name string) string { return r.prefix + "{" + name + "}" }

// chaosRetention is the fencing retention of the single and cluster
// modes' clients: a second, shorter than the longest holds (up to three
// leases with Extend) and places (two leases), so that whatever a holder
// or a waiter counts on (a semaphore's capacity above all) is kept by
// them, not by the retention.
const chaosRetention = time.Second

// chaosClusterPrefix is the key prefix of the cluster mode: it holds a
// space, as names do (the other modes keep distlock's default, what most
// users have).
const chaosClusterPrefix = "chaos lock:"

// nameMarks are what the run's names carry besides their kind and number:
// spaces, quotes, glob and format characters, brackets, a backslash and
// non-ASCII letters, everything the API accepts but braces and control
// characters. MONITOR quotes them (sdscatrepr), so its parser is tested too.
var nameMarks = []string{"", " 'x'", " *?%", " [0] ä", ` "q" \ é`}

// chaosName is the name of the i-th lock of kind (chaos for the plain
// mutexes, fair, elect, rw, sem): "chaos 0", "fair 'x' 0", "rw *?% 0",
// "sem [0] ä 0", ...; each kind starts at another mark, so that every kind
// meets the unusual ones. The number comes last: a word after the first
// space that is not a number is what broke the queued kinds' records once
// (a name "fair 1 x" was misread without an error). With
// -chaos.marks=false, names are plain: "chaos-0", "fair-0", ...
func chaosName(kind string, i int) string {
	if !*flagMarks {
		return fmt.Sprintf("%s-%d", kind, i)
	}
	offset := map[string]int{"chaos": 0, "fair": 1, "rw": 2, "sem": 3, "elect": 4}[kind]
	return fmt.Sprintf("%s%s %d", kind, nameMarks[(i+offset)%len(nameMarks)], i)
}

// killClient kills the client process in slot (SIGKILL), waits for it to
// end and starts another in its place: the fault f.
func (r *chaosRun) killClient(f *fault, slot int, what string) {
	p := r.current[slot]
	f.Slot, f.Client, f.Detail = slot, p.id, what
	f.Start = mono()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.mu.Lock()
	p.killAt = mono()
	p.mu.Unlock()
	<-p.done
	f.End = mono()
	r.spawn(slot)
}

// pauseClient stops the client process in slot (SIGSTOP) for d, then lets
// it go on: the fault f, recorded among the process's pauses.
func (r *chaosRun) pauseClient(f *fault, slot int, what string, d time.Duration) {
	p := r.current[slot]
	f.Slot, f.Client = slot, p.id
	f.Detail = what + " for " + d.String()
	f.Start = mono()
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d) // the fault's length
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	f.End = mono()
	p.mu.Lock()
	p.pauses = append(p.pauses, [2]int64{f.Start, f.End})
	p.mu.Unlock()
}

// storm has a random client process hog its connection pool
// (faultPoolHog) or cancel its calls' contexts (faultCancelStorm) for 1 to
// 2 leases: the fault f.
func (r *chaosRun) storm(f *fault, kind string, frac func(lo, hi float64) time.Duration) {
	slot := r.rng.Intn(len(r.current))
	p := r.current[slot]
	f.Slot, f.Client = slot, p.id
	d := frac(1, 2)
	f.Detail = d.String()
	f.Start = mono()
	if kind == faultPoolHog {
		p.send(fmt.Sprintf("hog %d", d.Milliseconds()))
		d += r.lease / 4 // PoolTimeout: a Ping may finish that late
	} else {
		p.send(fmt.Sprintf("cancel %d", d.Milliseconds()))
	}
	time.Sleep(d)
	f.End = mono()
}

func (r *chaosRun) inject(kind string, frac func(lo, hi float64) time.Duration) {
	t := r.t
	f := fault{Kind: kind, Slot: -1, Client: -1}
	switch kind {
	case faultHolderKill:
		slot, what := r.holderSlot()
		r.killClient(&f, slot, what)
	case faultHolderPause:
		slot, what := r.holderSlot()
		r.pauseClient(&f, slot, what, frac(1.2, 2.5))
	case faultRedisPause:
		d := frac(0.3, 1.5)
		node := r.rng.Intn(len(r.lockSrvs))
		srv := r.lockSrvs[node]
		f.Node = node
		f.Detail = d.String()
		if r.cluster {
			f.Detail = fmt.Sprintf("master %d for %v", node, d)
		}
		f.Start = mono()
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		f.End = mono()
	case faultRedisRestart:
		f.Start = mono()
		if err := r.lockSrvs[0].Restart(); err != nil {
			t.Fatal(err)
		}
		f.End = mono()
	case faultLatency, faultTimeout, faultReset, faultLateRequest, faultLostReply:
		slot := r.rng.Intn(len(r.proxies))
		p := r.proxies[slot]
		f.Slot, f.Client = slot, r.current[slot].id
		toxic, d, detail := proxyFault(r.rng, kind, frac)
		f.Detail = detail
		f.Start = mono()
		r.applyToxic(p, toxic, d)
		f.End = mono()
	case faultScriptFlush:
		f.Start = mono()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for _, n := range r.nodes {
			if err := n.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		f.End = mono()
	case faultClientClose:
		slot := r.rng.Intn(len(r.current))
		p := r.current[slot]
		f.Slot, f.Client = slot, p.id
		toxic, inflight := r.closeToxic(frac, &f.Detail)
		f.Start = mono()
		if toxic != "" {
			if _, err := r.proxies[slot].Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
				t.Fatal(err)
			}
		}
		if inflight {
			p.send("close inflight")
		} else {
			p.send("close")
		}
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			t.Errorf("client %d did not stop within 60s of closing; killing it", p.id)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.stdin.Close()
		if toxic != "" {
			if err := r.proxies[slot].Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
				t.Fatal(err)
			}
		}
		f.End = mono()
		r.spawn(slot)
	case faultSetPermits:
		f.Start = mono()
		f.Detail = r.setPermits(frac)
		f.End = mono()
	case faultMasterKill, faultSentinelFailover, faultCutKill:
		f.Start = mono()
		f.Detail = r.failover(kind, frac)
		f.End = mono()
	case faultPoolHog, faultCancelStorm:
		r.storm(&f, kind, frac)
	}
	r.record(f)
}

// closeToxic draws the toxic (named fault) of a close fault on the
// closing client's proxy, if it has one ("" for none), describes it in
// detail, and says whether Close is to race queued acquisitions in
// flight. Three times in four, half of the time each:
//
//   - Its replies are delayed while Close runs: acquisitions, renewals,
//     releases and the queues' places in flight must be waited for, or
//     abandoned, and Close is called once waiters of each queued kind
//     wait. The delay is mostly well below the client's read timeout
//     (half a lease): with requests pipelined behind the round trips in
//     flight, a call then waits about two of them, within the engine's
//     bound of a lease, so that the waiters queue and Close can confirm
//     what it does; now and then it is up to past the read timeout.
//   - Its requests are delayed, by 0.05 to 0.8 lease each (toxiproxy's
//     jitter), and Close is called as soon as an acquisition that may
//     queue is on its way: some land after go-redis gave up on them (the
//     read timeout), and requests reach Redis out of order across
//     connections, so that an acquisition sent before Close can land
//     after Close's own clean-up of its owner (Close racing a queued
//     acquisition).
func (r *chaosRun) closeToxic(frac func(lo, hi float64) time.Duration, detail *string) (toxic string, inflight bool) {
	if len(r.proxies) == 0 || r.rng.Intn(4) == 0 {
		return "", false
	}
	latency := func(stream string, lat, jitter time.Duration) string {
		return fmt.Sprintf(`{"name":"fault","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`,
			stream, lat.Milliseconds(), jitter.Milliseconds())
	}
	if r.rng.Intn(2) == 0 {
		lat := frac(0.1, 0.3)
		if r.rng.Intn(4) == 0 {
			lat = frac(0.3, 0.6)
		}
		*detail = fmt.Sprintf("replies delayed by %v", lat)
		return latency("downstream", lat, 0), false
	}
	lat, jitter := frac(0.35, 0.5), r.lease*3/10
	*detail = fmt.Sprintf("requests delayed by %v ± %v, racing acquisitions in flight", lat, jitter)
	return latency("upstream", lat, jitter), true
}

// proxyFault draws a toxiproxy fault of kind with rng and frac: the toxic
// (named "fault"), how long it stays, and the fault's detail.
func proxyFault(rng *rand.Rand, kind string, frac func(lo, hi float64) time.Duration) (toxic string, d time.Duration, detail string) {
	switch kind {
	case faultLatency:
		lat := frac(0.1, 0.6)
		stream := []string{"downstream", "upstream"}[rng.Intn(2)]
		toxic = fmt.Sprintf(`{"name":"fault","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`,
			stream, lat.Milliseconds(), lat.Milliseconds()/5)
		d = frac(1, 2)
		detail = fmt.Sprintf("%v %s for %v", lat, stream, d)
	case faultTimeout:
		toxic = `{"name":"fault","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`
		d = frac(0.5, 1.5)
		detail = "black hole for " + d.String()
	case faultReset:
		toxic = `{"name":"fault","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`
		d = frac(0.2, 0.6)
		detail = "resets for " + d.String()
	case faultLateRequest, faultLostReply:
		// Longer than the client's read timeout (half a lease): on
		// the way up, requests reach Redis after the caller gave
		// up on them; on the way down, requests are applied and
		// their replies never arrive in time.
		lat := frac(0.6, 1.2)
		stream := "upstream"
		if kind == faultLostReply {
			stream = "downstream"
		}
		toxic = fmt.Sprintf(`{"name":"fault","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":0}}`, stream, lat.Milliseconds())
		d = frac(1, 2)
		detail = fmt.Sprintf("%v %s for %v", lat, stream, d)
	}
	return toxic, d, detail
}

// applyToxic puts toxic on p for d (from the scheduler, or from a
// master's fault in the background: failures are errors, not fatal).
func (r *chaosRun) applyToxic(p *toxiproxy.Proxy, toxic string, d time.Duration) {
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
		r.t.Error(err)
		return
	}
	time.Sleep(d) // the fault's length
	if err := p.Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
		r.t.Error(err)
	}
}

// failover runs one failover fault of the Sentinel mode and returns once
// the group is whole again: a new master named by every sentinel, and the
// other data server its replica, in sync. A killed master is restarted
// (empty: persistence is off) and the sentinels make it a replica of the
// new master. It describes what happened.
func (r *chaosRun) failover(kind string, frac func(lo, hi float64) time.Duration) string {
	t, g := r.t, r.sentinel
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old, err := g.Master(ctx)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	begin := time.Now()
	var detail string
	switch kind {
	case faultSentinelFailover:
		// A sentinel refuses (NOGOODSLAVE) while its view of the replica
		// is stale, as it is just after a failover: wait until every
		// sentinel sees a replica in good standing, and retry a refusal.
		// A failover the sentinel accepted may also be aborted (once in
		// a 2-minute run the sentinels still named the old master a
		// minute later): ask again if no new master is named within
		// 10 s, five failover-timeouts.
		var m *redistest.Server
		for {
			if err := r.awaitReplicaSeen(ctx); err != nil {
				t.Fatalf("%s: %v\n%s", kind, err, r.sentinelLogs())
			}
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			m, err = g.Failover(actx)
			acancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %v\n%s", kind, err, r.sentinelLogs())
			}
			t.Logf("%s: not done, asking again: %v\n%s", kind, err, r.sentinelLogs())
			detail += fmt.Sprintf("asked again after %v (%v); ", time.Since(begin).Round(time.Millisecond), err)
		}
		detail += fmt.Sprintf("%s -> %s in %v", old.Addr(), m.Addr(), time.Since(begin).Round(time.Millisecond))
	case faultMasterKill, faultCutKill:
		var cut *redistest.Server
		if kind == faultCutKill {
			replicas, err := g.Replicas(ctx)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			cut = replicas[0]
			if err := g.CutReplication(ctx, cut); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			d := frac(0.3, 1)
			time.Sleep(d) // the cut's length: acquisitions and renewals the replica misses
			detail = fmt.Sprintf("replication of %s cut for %v, then ", cut.Addr(), d)
		}
		if err := old.Kill(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		m, err := g.AwaitMaster(ctx, old.Addr())
		if err != nil {
			t.Fatalf("%s: %v\n%s", kind, err, r.sentinelLogs())
		}
		detail += fmt.Sprintf("%s killed, %s promoted in %v", old.Addr(), m.Addr(), time.Since(begin).Round(time.Millisecond))
		if cut != nil {
			if err := g.RestoreReplication(ctx, cut); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		if err := old.Restart(); err != nil {
			t.Fatalf("%s: restart %s: %v", kind, old.Addr(), err)
		}
	}
	// The group is whole again once every other server is a replica of
	// the master the sentinels name, in sync. The restarted server is
	// empty and, if it was started as the first master, says it is a
	// master: it is made a replica at once (REPLICAOF), as an operator
	// would, rather than left to the sentinels' +convert-to-slave (0.8 s
	// or more; once it stayed a master for a minute). With down-after
	// 500 ms on a loaded machine the sentinels sometimes fail over again
	// right after a failover (a new master not answering their PINGs in
	// time), so the master is looked up again on every attempt, and the
	// fault lasts until the group is whole.
	for attempt := 0; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := g.AwaitMaster(actx, "")
		if err == nil {
			if m != old && m.Addr() != detailMaster(detail) {
				detail += fmt.Sprintf("; the sentinels moved the master to %s", m.Addr())
			}
			for _, s := range g.Servers() {
				if s == m || s.PID() == 0 {
					continue
				}
				sc := redis.NewClient(s.Options())
				info, _ := sc.Info(actx, "replication").Result()
				if !strings.Contains(info, "master_port:"+strconv.Itoa(m.Port())+"\r") {
					err = errors.Join(err, sc.SlaveOf(actx, "127.0.0.1", strconv.Itoa(m.Port())).Err())
				}
				sc.Close()
			}
			if err == nil {
				err = g.AwaitSync(actx)
			}
		}
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: %v\n%s", kind, err, r.sentinelLogs())
		}
		t.Logf("%s: group not whole yet (attempt %d): %v", kind, attempt+1, err)
	}
	return detail + fmt.Sprintf("; group in sync after %v", time.Since(begin).Round(time.Millisecond))
}

// awaitReplicaSeen waits until every sentinel lists a replica of the
// master whose flags are only "slave" (not down or disconnected) and whose
// link to the master is up, as a SENTINEL FAILOVER needs. The sentinels
// publish no event for that: their view is polled (every 50 ms).
func (r *chaosRun) awaitReplicaSeen(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		good := 0
		for _, s := range r.sentinel.Sentinels() {
			sc := redis.NewSentinelClient(s.Options())
			reps, err := sc.Replicas(ctx, r.sentinel.MasterName()).Result()
			sc.Close()
			if err != nil {
				last = err.Error()
				continue
			}
			for _, rp := range reps {
				if rp["flags"] == "slave" && rp["master-link-status"] == "ok" {
					good++
					break
				}
				last = fmt.Sprintf("%s: replica %s flags %s link %s", s.Addr(), rp["name"], rp["flags"], rp["master-link-status"])
			}
		}
		if good == len(r.sentinel.Sentinels()) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("sentinels do not see a good replica (%s): %w", last, ctx.Err())
		}
	}
}

// detailMaster returns the new master's address in a failover's detail
// ("... promoted in" or "-> addr in"), or "".
func detailMaster(detail string) string {
	f := strings.Fields(detail)
	for i := 1; i < len(f); i++ {
		if f[i] == "promoted" || f[i-1] == "->" {
			if f[i] == "promoted" {
				return f[i-1]
			}
			return f[i]
		}
	}
	return ""
}

// sentinelLogs returns the end of every sentinel's log, for a failure.
func (r *chaosRun) sentinelLogs() string {
	var b strings.Builder
	for i, s := range r.sentinel.Servers() {
		fmt.Fprintf(&b, "server %d: %s pid %d\n", i, s.Addr(), s.PID())
	}
	for _, s := range r.sentinel.Sentinels() {
		data, _ := os.ReadFile(s.LogPath())
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "--- sentinel %s ---\n%s\n", s.Addr(), strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}
