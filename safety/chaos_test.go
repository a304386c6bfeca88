//go:build linux

package safety

import (
	"context"
	"encoding/json"
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
)

// faultKinds are the faults of a run on one redis-server behind a toxiproxy
// per client.
var faultKinds = []string{faultHolderKill, faultHolderPause, faultRedisPause, faultRedisRestart,
	faultLatency, faultTimeout, faultReset, faultScriptFlush, faultPoolHog, faultCancelStorm,
	faultLateRequest, faultLostReply, faultClientClose}

// clusterFaultKinds are the faults of a run on a Redis Cluster, which the
// clients reach directly (a proxy would hide the nodes' addresses from the
// redirections): redis-sigstop pauses one master, so only its slots stop.
// A restarted node comes back empty and without its slots, and the pool
// fault needs a single-node client, so both are left out.
var clusterFaultKinds = []string{faultHolderKill, faultHolderPause, faultRedisPause,
	faultScriptFlush, faultCancelStorm, faultClientClose}

// benign faults do not break the mutex model: windows that contain them are
// still checked for linearizability (SCRIPT FLUSH must be invisible, and
// cancelled acquisitions are in the model as operations of unknown outcome).
var benignFaults = map[string]bool{faultScriptFlush: true, faultCancelStorm: true}

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

	mu     sync.Mutex
	killAt int64      // mono, 0 if not killed
	pauses [][2]int64 // mono intervals during which it was stopped
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
	dir      string
	kinds    []string
	lockSrvs []*redistest.Server // the lock server, or the cluster's masters
	cluster  bool
	storeSrv *redistest.Server
	ctl      redis.UniversalClient // direct to the lock server(s), for the scheduler
	nodes    []*redis.Client       // one per lock server, direct
	proxies  []*toxiproxy.Proxy    // one per client slot; none in the cluster mode
	names    []string
	fair     map[string]time.Duration // the names locked with FairMutex, and their queue timeouts
	rw       map[string]time.Duration // the names locked with RWMutex, and their queue timeouts
	sem      map[string]int           // the semaphores' names, and their capacity
	semQueue time.Duration            // the semaphores' queue timeout

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
func TestChaos(t *testing.T) { runChaos(t, false, chaosDuration(40*time.Second)) }

// TestChaosCluster is TestChaos on a 3-master Redis Cluster that the
// clients reach directly; a paused master is among its faults.
func TestChaosCluster(t *testing.T) { runChaos(t, true, chaosDuration(20*time.Second)) }

func runChaos(t *testing.T, cluster bool, dur time.Duration) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("chaos: seed %d, duration %v (replay: go test -race -run '%s$' -seed=%d -chaos.duration=%v)", seed, dur, t.Name(), seed, dur)
	r := &chaosRun{t: t, rng: rand.New(rand.NewSource(seed)), seed: seed, lease: *flagLease, dir: t.TempDir(), dur: dur}
	for i := 0; i < *flagNames; i++ {
		r.names = append(r.names, fmt.Sprintf("chaos-%d", i))
	}
	// Fair names are fair for the whole run (kinds never mix), with a
	// queue timeout of half a lease (a grant's lease is then shorter than
	// the TTL, and the grantee renews it at once; every pause of a waiter
	// costs its place) or of two leases (places outlive short faults).
	r.fair = map[string]time.Duration{}
	for i := 0; i < *flagFair; i++ {
		name := fmt.Sprintf("fair-%d", i)
		r.names = append(r.names, name)
		r.fair[name] = []time.Duration{r.lease / 2, 2 * r.lease}[i%2]
	}
	// Read-write locks and semaphores are of their kind for the whole run
	// too. Their queue timeout is two leases.
	r.rw, r.sem, r.semQueue = map[string]time.Duration{}, map[string]int{}, 2*r.lease
	for i := 0; i < *flagRW; i++ {
		name := fmt.Sprintf("rw-%d", i)
		r.names = append(r.names, name)
		r.rw[name] = 2 * r.lease
	}
	for i := 0; i < *flagSem; i++ {
		name := fmt.Sprintf("sem-%d", i)
		r.names = append(r.names, name)
		r.sem[name] = semCapacity
	}
	r.cluster = cluster
	if r.cluster {
		r.kinds = clusterFaultKinds
		r.lockSrvs = redistest.StartClusterT(t, 3, redistest.WithArgs("--hz", "100")).Servers
	} else {
		r.kinds = faultKinds
		r.lockSrvs = []*redistest.Server{redistest.Start(t, redistest.WithArgs("--hz", "100"))}
	}
	r.storeSrv = redistest.Start(t)
	var addrs []string
	for _, s := range r.lockSrvs {
		opt := s.Options()
		opt.MaxRetries = -1
		r.nodes = append(r.nodes, redis.NewClient(opt))
		addrs = append(addrs, s.Addr())
	}
	r.ctl = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: r.cluster, MaxRetries: -1})
	defer func() {
		r.ctl.Close()
		for _, n := range r.nodes {
			n.Close()
		}
	}()
	store := r.storeSrv.Client(t)

	var mon monitors
	monCtx, monStop := context.WithCancel(context.Background())
	var monWG sync.WaitGroup
	defer func() { monStop(); monWG.Wait() }()
	for _, s := range r.lockSrvs {
		m := newMonitor(s.Addr(), "distlock:")
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

	if !r.cluster {
		tp := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		for i := 0; i < *flagClients; i++ {
			p := toxiproxy.NewProxy(tp, fmt.Sprintf("client-%d", i), "127.0.0.1:0", r.lockSrvs[0].Addr())
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
	r.current = make([]*clientProc, *flagClients)
	for i := range r.current {
		r.spawn(i)
	}
	sampler := r.startTTLSampler()
	r.schedule(time.Now().Add(dur))
	runEnd := mono()
	r.stopClients()
	for _, p := range r.proxies {
		p.Stop()
	}
	ttls := sampler.stop()

	rep := r.check(store, mon, runEnd)
	rep.TTL = ttls
	rep.Seed, rep.Duration = seed, dur.String()
	rep.Command = fmt.Sprintf("cd safety && go test -race -count=1 -timeout 30m -run '%s$' -seed=%d -chaos.duration=%v -chaos.clients=%d -chaos.workers=%d -chaos.names=%d -chaos.fair=%d -chaos.rw=%d -chaos.sem=%d -chaos.lease=%v -chaos.work=%v -v .",
		t.Name(), seed, dur, *flagClients, *flagWorkers, *flagNames, *flagFair, *flagRW, *flagSem, r.lease, *flagWork)
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
	if r.cluster {
		var addrs []string
		for _, s := range r.lockSrvs {
			addrs = append(addrs, s.Addr())
		}
		lockAddr = strings.Join(addrs, ",")
	} else {
		lockAddr = r.proxies[slot].Listen
	}
	cfg := clientConfig{
		ID:          id,
		LockAddr:    lockAddr,
		Cluster:     r.cluster,
		StoreAddr:   r.storeSrv.Addr(),
		Names:       r.names,
		Lease:       r.lease,
		Workers:     *flagWorkers,
		Seed:        r.seed,
		History:     filepath.Join(r.dir, fmt.Sprintf("client-%d.jsonl", id)),
		PoolSize:    4,
		PoolTimeout: r.lease / 4,
		WorkMax:     *flagWork,
		CancelRate:  0.05,
		TryRate:     0.2,
		ExtendRate:  0.15,
		Fair:        r.fair,
		RW:          r.rw,
		Sem:         r.sem,
		SemQueue:    r.semQueue,
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
// a quiet stretch of several leases for the linearizability windows.
func (r *chaosRun) schedule(end time.Time) {
	L := r.lease
	frac := func(lo, hi float64) time.Duration {
		return time.Duration((lo + r.rng.Float64()*(hi-lo)) * float64(L))
	}
	order := slices.Clone(r.kinds)
	r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	pace := func(d time.Duration) bool {
		if time.Now().Add(d).After(end) {
			return false
		}
		time.Sleep(d) // the scheduler's own pacing
		return true
	}
	if !pace(frac(1, 2)) {
		return
	}
	for n := 0; ; n++ {
		kind := r.kinds[r.rng.Intn(len(r.kinds))]
		if n < len(order) {
			kind = order[n]
		}
		if time.Now().Add(3 * L).After(end) {
			return
		}
		r.inject(kind, frac)
		gap := frac(0.3, 1)
		if r.rng.Intn(4) == 0 {
			gap = frac(4, 6)
		}
		if !pace(gap) {
			return
		}
	}
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
	if len(r.fair)+len(r.rw)+len(r.sem) > 0 && r.rng.Intn(2) == 0 {
		what = "waiter"
		for _, n := range r.names {
			if r.kindOf(n) == "plain" {
				continue
			}
			for _, v := range r.ctl.HVals(ctx, "distlock:{"+n+"}:qi").Val() {
				// kind n seq lease queue channel pid host (lib.lua, place_value)
				if f := strings.Fields(v); len(f) >= 7 {
					if pid, err := strconv.Atoi(f[6]); err == nil {
						pids = append(pids, pid)
					}
				}
			}
		}
	} else {
		for _, n := range r.names {
			// A mutex's holder is its pid field; a shared lock's holders
			// are its i:<owner> fields, 'pid since host' (lib.lua).
			for f, v := range r.ctl.HGetAll(ctx, "distlock:{"+n+"}").Val() {
				if f == "pid" || strings.HasPrefix(f, "i:") {
					if pid, err := strconv.Atoi(strings.Fields(v + " x")[0]); err == nil {
						pids = append(pids, pid)
					}
				}
			}
		}
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

func (r *chaosRun) inject(kind string, frac func(lo, hi float64) time.Duration) {
	t := r.t
	f := fault{Kind: kind, Slot: -1, Client: -1}
	switch kind {
	case faultHolderKill:
		slot, what := r.holderSlot()
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
	case faultHolderPause:
		slot, what := r.holderSlot()
		p := r.current[slot]
		f.Slot, f.Client = slot, p.id
		d := frac(1.2, 2.5)
		f.Detail = what + " for " + d.String()
		f.Start = mono()
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(d) // the fault's length
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		f.End = mono()
		p.mu.Lock()
		p.pauses = append(p.pauses, [2]int64{f.Start, f.End})
		p.mu.Unlock()
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
		var toxic string
		var d time.Duration
		switch kind {
		case faultLatency:
			lat := frac(0.1, 0.6)
			stream := []string{"downstream", "upstream"}[r.rng.Intn(2)]
			toxic = fmt.Sprintf(`{"name":"fault","type":"latency","stream":%q,"attributes":{"latency":%d,"jitter":%d}}`,
				stream, lat.Milliseconds(), lat.Milliseconds()/5)
			d = frac(1, 2)
			f.Detail = fmt.Sprintf("%v %s for %v", lat, stream, d)
		case faultTimeout:
			toxic = `{"name":"fault","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`
			d = frac(0.5, 1.5)
			f.Detail = "black hole for " + d.String()
		case faultReset:
			toxic = `{"name":"fault","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`
			d = frac(0.2, 0.6)
			f.Detail = "resets for " + d.String()
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
			f.Detail = fmt.Sprintf("%v %s for %v", lat, stream, d)
		}
		f.Start = mono()
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := p.Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
			t.Fatal(err)
		}
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
		slow := !r.cluster && r.rng.Intn(2) == 0
		f.Start = mono()
		if slow {
			// Replies on their way while Close runs: acquisitions,
			// renewals and releases in flight must be waited for.
			lat := frac(0.2, 0.6)
			f.Detail = fmt.Sprintf("replies delayed by %v", lat)
			toxic := fmt.Sprintf(`{"name":"fault","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":0}}`, lat.Milliseconds())
			if _, err := r.proxies[slot].Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(lat) // let requests pile up behind the delay
		}
		p.send("close")
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			t.Errorf("client %d did not stop within 60s of closing; killing it", p.id)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		p.stdin.Close()
		if slow {
			if err := r.proxies[slot].Toxics.RemoveToxic(context.Background(), "fault"); err != nil {
				t.Fatal(err)
			}
		}
		f.End = mono()
		r.spawn(slot)
	case faultPoolHog, faultCancelStorm:
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
	r.record(f)
}
