//go:build linux

package safety

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/etcdtest"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd chaos run (TestChaosEtcd): the workload of TestChaos on
// etcdstore, over 3 etcd members that etcdtest runs inside the test
// process, from client processes (re-executions of the test binary, so
// that they can be stopped with SIGSTOP) that each reach the members
// through proxies of their own (etcdtest.NewProxy, one per member the
// client uses): a client's proxies are its network, which a fault can
// freeze without touching anyone else's. Clients 0, 1 and 2 (modulo 4) use
// one member each (m0, m1, m2: "the member a holder is connected to"),
// client 3 all three (the etcd client's balancer picks among them).
//
// Faults, on a seeded schedule (first each kind once, in a seeded order,
// with one quiet stretch of 3.5–4.5 leases in the middle of that round for
// the linearizability check; then kinds at random):
//
//   - etcd-leader-kill, etcd-follower-kill: the leader, or a follower,
//     killed (etcdtest Member.Kill: no goodbye, its clients' connections
//     reset), a new leader awaited, the member restarted from its data
//     directory once it has been down 0.5–1.5 leases (Restart awaits it
//     ready);
//   - etcd-leader-transfer: the leadership moved to another member;
//   - etcd-isolate-holder-member: the member a holder's client uses cut off
//     from the other two (Cluster.Isolate: Raft traffic both ways; its
//     clients still reach it) for 1–2 leases, then healed;
//   - etcd-compaction: one client cut off (its proxies paused) for
//     0.3–0.6 lease while the others go on, the keyspace compacted
//     (Compact) at the current revision, then the cut-off client's
//     connections reset (Proxy.Cut) and its proxies resumed: the etcd
//     client resumes its watches (a waiter's watch of the lock it waits
//     for among them) from the revision after the last it received,
//     which is compacted by then (the run counts the Lock calls under way
//     at each compaction, the cut-off client's apart);
//   - etcd-client-cut-off: every proxy of one client (a holder's, if one
//     holds) paused for 0.5–1.5 leases: its requests and watches hang;
//   - holder-sigstop, holder-sigkill, ctx-cancel-storm: as in TestChaos
//     (the holder found by the pid in its lock key's value).
//
// The lease is 2 s (-chaos.etcd.lease; etcdstore's floor, MinLease), so
// that leases run out during the run; Extend goes to 1–3 leases.
//
// The server's own timeline replaces MONITOR: a watch of the store's
// whole prefix (locks, abandonment marks, revocation notices) from the
// revision before the first client started, on each member (merged by
// revision: a member that is down, cut off or compacted past leaves gaps
// the others fill), with each event's first receipt (CLOCK_MONOTONIC), and
// a sampler that reads the store's revision every 25 ms with a
// linearizable read (when it was sent, when the reply came). etcd keeps no
// time per revision, so the checks on it compare revisions: "revision R
// was certainly committed before t" (a watcher received it, or a read that
// returned by t saw R or later) and "certainly after t" (a read sent at t
// or later saw a revision below R). What cannot be decided either way is
// counted, not failed.
//
// A "lock key" below is one owner's key in a lock's directory
// (<prefix>lock/{<name>}/<kind>/<owner>: its hold, or its place in a
// queue): its owner is in its value, and its create revision is that
// owner's token.
//
// What is checked (the test fails otherwise): every checker of TestChaos
// that rests on the clients' histories (linearizability on windows
// without a disruptive fault, validity intervals of different owners
// never overlapping, the fenced register, token order, typed errors
// only, released leases never reported lost, no goroutine leak in the
// clients), and on the timeline: every key the store writes is on a
// lease; each acquisition's token is the create revision of a lock key
// written for one of that call's owners; every loss of an unpaused holder
// was signalled before its lock key's deletion was committed (certainly
// late fails); nothing of a call that gave up is left (no lock key of its
// owners created after it returned, none still there after it); every lock
// key is gone once the clients have closed and the leases have run out.
//
// Not checked here: FIFO, Close under load, jobs run once, the
// semaphores' set-permits (none of them runs in this mode), and the
// per-tenure checks of MONITOR that etcd makes true by construction (a
// lock key is created only if it does not exist, and revisions only
// grow).

// Fault kinds of the etcd mode.
const (
	faultEtcdLeaderKill   = "etcd-leader-kill"
	faultEtcdFollowerKill = "etcd-follower-kill"
	faultEtcdTransfer     = "etcd-leader-transfer"
	faultEtcdIsolate      = "etcd-isolate-holder-member"
	faultEtcdCompact      = "etcd-compaction"
	faultEtcdCutOff       = "etcd-client-cut-off"
)

// etcdFaultKinds are the etcd run's faults.
var etcdFaultKinds = []string{faultEtcdLeaderKill, faultEtcdFollowerKill, faultEtcdTransfer, faultEtcdIsolate,
	faultEtcdCompact, faultEtcdCutOff, faultHolderPause, faultHolderKill, faultCancelStorm}

// etcdChaosKinds are the lock kinds the etcd run exercises: "plain"
// (Mutex), "multi" (MultiMutex of two plain names), and the queued kinds
// "fair", "elect", "rw", "sem" (their numbers of names are -chaos.fair,
// -chaos.elect, -chaos.rw and -chaos.sem, as in TestChaos). A kind listed
// here that the store refuses with ErrUnsupported is left out of the run
// (and logged); a kind the store serves that is not listed is logged as
// ready to join.
var etcdChaosKinds = []string{"plain", "multi", "fair", "elect", "rw", "sem"}

var (
	flagEtcdLease = flag.Duration("chaos.etcd.lease", etcdstore.MinLease, "lease (TTL) of TestChaosEtcd's locks (etcdstore's floor is 2s)")
)

const (
	etcdMembers   = 3
	etcdMultiRate = 0.15 // the share of iterations that take a MultiMutex of two names
	// etcdLongRate is the share of holds that outlive the lease (5 % in
	// the Redis modes): with a lease of 2 s and faults of 1 to 5 s, a
	// loss needs a hold that lasts through a fault.
	etcdLongRate = 0.2
	// etcdSampleEvery is the pace of the revision sampler.
	etcdSampleEvery = 25 * time.Millisecond
)

// TestChaosEtcd is TestChaos on etcdstore over 3 etcd members, with
// member kills and restarts, leader changes, a holder's member cut off
// from the others, compactions and clients cut off or stopped among the
// faults (see etcd_chaos_test.go).
func TestChaosEtcd(t *testing.T) { runChaosEtcd(t, chaosDuration(40*time.Second)) }

// etcdRun is the etcd mode's part of a chaosRun.
type etcdRun struct {
	cl      *etcdtest.Cluster
	members []*etcdtest.Member
	ctl     *clientv3.Client    // the scheduler's, on every member directly
	proxies [][]*etcdtest.Proxy // by slot: the slot's proxies
	home    []int               // by slot: the member its client uses, or -1: all of them
	tl      *etcdTimeline
	kinds   []string
	report  etcdReport
}

// endpoints are the etcd endpoints of the client in slot: its proxies.
func (e *etcdRun) endpoints(slot int) []string {
	var eps []string
	for _, p := range e.proxies[slot] {
		eps = append(eps, "http://"+p.Addr())
	}
	return eps
}

func runChaosEtcd(t *testing.T, dur time.Duration) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("chaos: seed %d, duration %v (replay: go test -race -run '%s$' -seed=%d -chaos.duration=%v)", seed, dur, t.Name(), seed, dur)
	lease := *flagEtcdLease
	r := &chaosRun{t: t, rng: rand.New(rand.NewSource(seed)), seed: seed, lease: lease, unit: lease, dir: t.TempDir(), dur: dur,
		clients: *flagClients, prefix: etcdPrefix}
	r.fair, r.elect, r.rw, r.sem, r.semQueue = map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}, map[string]int{}, 2*lease
	for i := 0; i < *flagNames; i++ {
		r.names = append(r.names, chaosName("chaos", i))
	}
	r.kinds = etcdFaultKinds

	e := &etcdRun{cl: etcdtest.Start(t, etcdMembers)}
	r.etcd = e
	e.members = e.cl.Members()
	e.ctl = etcdtest.Dial(t, e.cl.Endpoints()...)
	e.kinds = r.etcdKinds()
	e.report.Members, e.report.Kinds = etcdMembers, e.kinds
	r.storeSrv = redistest.Start(t)
	store := r.storeSrv.Client(t)

	// The proxies: each slot's client reaches its member(s) through
	// proxies of its own.
	for slot := 0; slot < r.clients; slot++ {
		home := slot % (etcdMembers + 1)
		if home == etcdMembers {
			home = -1
		}
		e.home = append(e.home, home)
		var ps []*etcdtest.Proxy
		for i, m := range e.members {
			if home != -1 && i != home {
				continue
			}
			p, err := etcdtest.NewProxy(strings.TrimPrefix(m.Endpoint(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		e.proxies = append(e.proxies, ps)
	}
	defer func() {
		for _, ps := range e.proxies {
			for _, p := range ps {
				p.Resume()
				_ = p.Close()
			}
		}
	}()

	// The server's timeline, from the revision before the first client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resp, err := e.ctl.Get(ctx, "safety/start")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var watchClis []*clientv3.Client
	for _, m := range e.members {
		watchClis = append(watchClis, etcdtest.Dial(t, m.Endpoint()))
	}
	e.tl = startTimeline(etcdPrefix, resp.Header.Revision+1, watchClis, e.ctl)
	defer e.tl.stop()

	r.start = mono()
	r.current = make([]*clientProc, r.clients)
	for i := range r.current {
		r.spawn(i)
	}
	r.scheduleEtcd(time.Now().Add(dur))
	runEnd := mono()
	r.stopClients()
	r.awaitEtcdOrphans()
	// Every event up to now in the timeline, then stop following.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	if resp, err := e.ctl.Get(ctx, "safety/end"); err != nil {
		e.report.note("the last revision: %v", err)
	} else if !e.tl.awaitProgress(ctx, resp.Header.Revision) {
		e.report.note("the timeline did not reach the last revision %d within 10s", resp.Header.Revision)
	}
	cancel()
	e.tl.stop()

	rep := r.check(store, nil, runEnd)
	rep.Etcd = &e.report
	rep.Seed, rep.Duration = seed, dur.String()
	rep.Command = fmt.Sprintf("cd safety && go test -race -count=1 -timeout 30m -run '%s$' -seed=%d -chaos.duration=%v -chaos.clients=%d -chaos.workers=%d -chaos.names=%d -chaos.marks=%v -chaos.etcd.lease=%v -chaos.work=%v -v .",
		t.Name(), seed, dur, r.clients, *flagWorkers, *flagNames, *flagMarks, r.lease, *flagWork)
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
	if t.Failed() {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-etcd-%d-%d", seed, os.Getpid()))
		if err := os.CopyFS(keep, os.DirFS(r.dir)); err == nil {
			t.Logf("the histories are kept in %s", keep)
		}
	}
}

// etcdKinds probes which kinds etcdstore serves and adds the names of
// those of etcdChaosKinds (probeKinds), and returns those kinds.
func (r *chaosRun) etcdKinds() []string {
	e := r.etcd
	kinds, unsupported, nowServed := r.probeKinds(etcdstore.New(e.ctl), "etcd", "etcdChaosKinds (etcd_chaos_test.go)", etcdChaosKinds, etcdstore.MinLease)
	e.report.Unsupported, e.report.NowServed = unsupported, nowServed
	return kinds
}

// probeKinds probes which kinds the store st serves (a try of each on a
// name of its own: an unsupported kind is refused with ErrUnsupported
// before any request), adds the names of the kinds of listed that it
// serves (a queue timeout no shorter than minQueue, the store's floor),
// and returns those kinds, the listed kinds it refuses, and those it
// serves that are not listed (where, in list, names the list).
func (r *chaosRun) probeKinds(st store.Store, mode, list string, listed []string, minQueue time.Duration) (kinds, unsupported, nowServed []string) {
	admin := distlock.New(st, distlock.WithLogger(nil))
	defer func() {
		if err := admin.Close(); err != nil {
			r.t.Errorf("the probe's client: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ttl := distlock.WithTTL(r.lease)
	probes := map[string]func() (*distlock.Lease, error){
		"fair": func() (*distlock.Lease, error) { return admin.FairMutex("safety-probe fair", ttl).TryLock(ctx) },
		"elect": func() (*distlock.Lease, error) {
			c, cancel := context.WithTimeout(ctx, r.lease)
			defer cancel()
			return admin.Election("safety-probe elect", ttl).Campaign(c, "probe")
		},
		"rw": func() (*distlock.Lease, error) { return admin.RWMutex("safety-probe rw", ttl).TryLock(ctx) },
		"sem": func() (*distlock.Lease, error) {
			return admin.Semaphore("safety-probe sem", semCapacity, ttl).TryAcquire(ctx, 1)
		},
	}
	served := map[string]bool{"plain": true, "multi": true}
	for _, k := range []string{"elect", "fair", "rw", "sem"} {
		l, err := probes[k]()
		switch {
		case errors.Is(err, distlock.ErrUnsupported):
			continue
		case err != nil:
			r.t.Logf("%s: the probe of %s failed (%v): counted as served", mode, k, err)
		default:
			_ = l.Unlock(ctx)
		}
		served[k] = true
	}
	for _, k := range listed {
		if !served[k] {
			unsupported = append(unsupported, k)
			r.t.Logf("%s: %s is listed in %s but the store refuses it with ErrUnsupported: left out", mode, k, list)
			continue
		}
		kinds = append(kinds, k)
	}
	for _, k := range []string{"elect", "fair", "rw", "sem"} {
		if served[k] && !slices.Contains(listed, k) {
			nowServed = append(nowServed, k)
			r.t.Logf("%s: the store serves %s now: add it to %s to run it here", mode, k, list)
		}
	}
	if slices.Contains(kinds, "fair") {
		for i := 0; i < *flagFair; i++ {
			name := chaosName("fair", i)
			r.names = append(r.names, name)
			// The store's floor: a queue timeout of half a lease
			// (TestChaos's even names) may be refused.
			r.fair[name] = []time.Duration{max(r.lease/2, minQueue), 2 * r.lease}[i%2]
		}
	}
	if slices.Contains(kinds, "elect") {
		for i := 0; i < *flagElect; i++ {
			name := chaosName("elect", i)
			r.names = append(r.names, name)
			r.elect[name] = 2 * r.lease
		}
	}
	if slices.Contains(kinds, "rw") {
		for i := 0; i < *flagRW; i++ {
			name := chaosName("rw", i)
			r.names = append(r.names, name)
			r.rw[name] = 2 * r.lease
		}
	}
	if slices.Contains(kinds, "sem") {
		for i := 0; i < *flagSem; i++ {
			name := chaosName("sem", i)
			r.names = append(r.names, name)
			r.sem[name] = semCapacity
		}
	}
	return kinds, unsupported, nowServed
}

// scheduleEtcd injects faults until end (scheduleRounds).
func (r *chaosRun) scheduleEtcd(end time.Time) { r.scheduleRounds(end, r.injectEtcd) }

// scheduleRounds injects faults with inject until end: every kind once in
// a seeded order, with one quiet stretch of 3.5–4.5 leases in the middle
// of that round (a window for the linearizability check, which leaves out
// two leases after every disruptive fault), then kinds at random, one
// quiet stretch in four; between faults 0.15–0.5 lease. The etcd and SQL
// modes' schedule.
func (r *chaosRun) scheduleRounds(end time.Time, inject func(kind string, frac func(lo, hi float64) time.Duration)) {
	rng, L := r.rng, r.lease
	frac := func(lo, hi float64) time.Duration {
		return time.Duration((lo + rng.Float64()*(hi-lo)) * float64(L))
	}
	order := slices.Clone(r.kinds)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	pace := func(d time.Duration) bool {
		if time.Now().Add(d).After(end) {
			return false
		}
		time.Sleep(d) // the scheduler's own pacing
		return true
	}
	if !pace(frac(0.5, 1)) {
		return
	}
	for n := 0; ; n++ {
		kind := r.kinds[rng.Intn(len(r.kinds))]
		if n < len(order) {
			kind = order[n]
		}
		if time.Now().Add(2 * L).After(end) {
			return
		}
		inject(kind, frac)
		gap := frac(0.15, 0.5)
		if n == len(order)/2 || n >= len(order) && rng.Intn(4) == 0 {
			gap = frac(3.5, 4.5)
		}
		if !pace(gap) {
			return
		}
	}
}

// etcdHolderSlot finds a slot whose client holds a lock now (the pid in a
// lock key's value), among the slots that use one member only if homed,
// or a random slot (of those); it reports which it found.
func (r *chaosRun) etcdHolderSlot(homed bool) (int, string) {
	e := r.etcd
	ctx, cancel := context.WithTimeout(context.Background(), r.lease/2)
	defer cancel()
	var pids []int
	if resp, err := e.ctl.Get(ctx, etcdPrefix+"lock/", clientv3.WithPrefix()); err == nil {
		for _, kv := range resp.Kvs {
			if h, ok := decodeHolding(kv.Value); ok {
				pids = append(pids, h.PID)
			}
		}
	}
	slices.Sort(pids)
	r.rng.Shuffle(len(pids), func(i, j int) { pids[i], pids[j] = pids[j], pids[i] })
	for _, pid := range pids {
		for i, p := range r.current {
			if p.cmd.Process.Pid == pid && (!homed || e.home[i] >= 0) {
				return i, "holder"
			}
		}
	}
	var slots []int
	for i := range r.current {
		if !homed || e.home[i] >= 0 {
			slots = append(slots, i)
		}
	}
	return slots[r.rng.Intn(len(slots))], "random"
}

// injectEtcd injects one fault of the etcd mode and records it.
func (r *chaosRun) injectEtcd(kind string, frac func(lo, hi float64) time.Duration) {
	t, e := r.t, r.etcd
	f := fault{Kind: kind, Slot: -1, Client: -1, Node: -1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	index := func(m *etcdtest.Member) int { return slices.Index(e.members, m) }
	switch kind {
	case faultHolderKill:
		slot, what := r.etcdHolderSlot(false)
		r.killClient(&f, slot, what)
	case faultHolderPause:
		slot, what := r.etcdHolderSlot(false)
		r.pauseClient(&f, slot, what, frac(1.2, 2.5))
	case faultCancelStorm:
		r.storm(&f, kind, frac)
	case faultEtcdLeaderKill, faultEtcdFollowerKill:
		lead, err := e.cl.Leader(ctx)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		m, role := lead, "leader"
		if kind == faultEtcdFollowerKill {
			var followers []*etcdtest.Member
			for _, o := range e.members {
				if o != lead {
					followers = append(followers, o)
				}
			}
			m, role = followers[r.rng.Intn(len(followers))], "follower"
		}
		down := frac(0.5, 1.5)
		f.Node = index(m)
		f.Start = mono()
		killed := time.Now()
		m.Kill()
		newLead, err := e.cl.Leader(ctx)
		if err != nil {
			t.Fatalf("%s: no leader after %s was killed: %v", kind, m.Name(), err)
		}
		elected := time.Since(killed)
		if rest := down - time.Since(killed); rest > 0 {
			time.Sleep(rest) // the member's time down
		}
		downFor := time.Since(killed)
		if err := m.Restart(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f.End = mono()
		f.Detail = fmt.Sprintf("%s (%s) killed; leader %s agreed %v after the kill began; restarted after %v, ready %v later",
			m.Name(), role, newLead.Name(), elected.Round(time.Millisecond), downFor.Round(time.Millisecond), (time.Since(killed) - downFor).Round(time.Millisecond))
	case faultEtcdTransfer:
		lead, err := e.cl.Leader(ctx)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var others []*etcdtest.Member
		for _, o := range e.members {
			if o != lead {
				others = append(others, o)
			}
		}
		to := others[r.rng.Intn(len(others))]
		f.Node = index(to)
		f.Start = mono()
		begin := time.Now()
		if err := e.cl.TransferLeader(ctx, to); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f.End = mono()
		f.Detail = fmt.Sprintf("%s -> %s in %v", lead.Name(), to.Name(), time.Since(begin).Round(time.Millisecond))
	case faultEtcdIsolate:
		slot, what := r.etcdHolderSlot(true)
		m := e.members[e.home[slot]]
		lead, _ := e.cl.Leader(ctx)
		d := frac(1, 2)
		f.Slot, f.Client, f.Node = slot, r.current[slot].id, index(m)
		f.Start = mono()
		if err := e.cl.Isolate(m); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		time.Sleep(d) // the partition's length
		if err := e.cl.Heal(m); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		healed := time.Now()
		after, err := e.cl.Leader(ctx)
		if err != nil {
			t.Fatalf("%s: no leader agreed after the heal: %v", kind, err)
		}
		f.End = mono()
		role := "follower"
		if m == lead {
			role = "leader"
		}
		f.Detail = fmt.Sprintf("%s (%s, the member of a %s's client %d) isolated for %v; leader %s, agreed %v after the heal",
			m.Name(), role, what, r.current[slot].id, d.Round(time.Millisecond), after.Name(), time.Since(healed).Round(time.Millisecond))
	case faultEtcdCompact:
		slot := r.rng.Intn(len(r.current))
		cut := frac(0.3, 0.6)
		f.Slot, f.Client = slot, r.current[slot].id
		f.Start = mono()
		for _, p := range e.proxies[slot] {
			p.Pause()
		}
		time.Sleep(cut) // the others go on: the revision moves past the cut-off client's
		resp, err := e.ctl.Get(ctx, "safety/compact")
		switch {
		case err != nil:
			f.Detail = fmt.Sprintf("not compacted: reading the revision: %v", err)
		case !e.tl.awaitProgress(ctx, resp.Header.Revision):
			// The timeline must hold every event before it is compacted
			// away.
			f.Detail = fmt.Sprintf("not compacted: the timeline did not reach revision %d", resp.Header.Revision)
		default:
			at := mono()
			if _, err := e.ctl.Compact(ctx, resp.Header.Revision); err != nil {
				f.Detail = fmt.Sprintf("compaction at revision %d: %v", resp.Header.Revision, err)
				e.report.note("compaction at revision %d failed: %v", resp.Header.Revision, err)
			} else {
				f.Detail = fmt.Sprintf("at revision %d, %v after client %d was cut off (then its connections reset)",
					resp.Header.Revision, time.Duration(at-f.Start).Round(time.Millisecond), f.Client)
			}
		}
		for _, p := range e.proxies[slot] {
			p.Cut()
			p.Resume()
		}
		f.End = mono()
	case faultEtcdCutOff:
		slot, what := r.etcdHolderSlot(false)
		d := frac(0.5, 1.5)
		f.Slot, f.Client = slot, r.current[slot].id
		f.Detail = fmt.Sprintf("%s's proxies (%d) paused for %v", what, len(e.proxies[slot]), d.Round(time.Millisecond))
		f.Start = mono()
		for _, p := range e.proxies[slot] {
			p.Pause()
		}
		time.Sleep(d) // the fault's length
		for _, p := range e.proxies[slot] {
			p.Resume()
		}
		f.End = mono()
	}
	r.record(f)
}

// awaitEtcdOrphans waits, once every client has closed, until no lock
// key is left (the leases of killed holders run out by themselves), for
// the longest lease (3 leases, Extend's most) and 10 s at most, following
// the timeline; then counts what is left.
func (r *chaosRun) awaitEtcdOrphans() {
	e := r.etcd
	o := &e.report.Orphans
	ctx, cancel := context.WithTimeout(context.Background(), 3*r.lease+10*time.Second)
	defer cancel()
	begin := time.Now()
	for {
		changed := e.tl.changes()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := e.ctl.Get(cctx, etcdPrefix+"lock/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		ccancel()
		if err == nil && resp.Count == 0 {
			break
		}
		if err == nil && o.AtClose == 0 {
			o.AtClose = int(resp.Count)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if err == nil {
				o.Left = int(resp.Count)
			}
			e.report.note("lock keys left %v after the clients closed: %d (%v)", time.Since(begin).Round(time.Millisecond), o.Left, err)
			return
		}
	}
	o.Waited = time.Since(begin).Round(time.Millisecond).String()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if resp, err := e.ctl.Get(ctx2, etcdPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
		o.OtherKeys = int(resp.Count) // marks and notices, on leases of their own (checked on the timeline)
	}
}

// etcdReport is the etcd mode's part of the chaos report.
type etcdReport struct {
	Members     int
	Kinds       []string // the lock kinds run
	Unsupported []string // listed in etcdChaosKinds, refused by the store
	NowServed   []string // served by the store, not listed yet
	Multi       struct {
		Calls, Acquired int
	}
	Faults   []string // each fault of the cluster, with what happened
	Timeline struct {
		Events, Puts, Deletes, LockTenures, Samples int
		WatchRestarts, CompactedRestarts            int
		NoLease                                     int // a key written on no lease: must be 0
		// ClientWatchesCompacted: watch responses of the clients that
		// said their watch was compacted past (etcdWatchRecorder).
		ClientWatchesCompacted int
		Detail                 []string
	}
	Compactions []string // each compaction, and the Lock calls under way at it
	// Tokens: each successful acquisition's token is the create
	// revision of a lock key of one of its call's owners.
	Tokens struct {
		Checked, Matched, Unmatched, OtherOwner int
		Detail                                  []string
	}
	// LossSignal: every loss of an unpaused holder signalled before the
	// lock key's deletion was committed.
	LossSignal struct {
		Losses, Checked, First, Late, Undecided, NotEnded int
		ExcludedPaused, Unmatched, NeverHandedOut, Shared int
		Detail                                            []string
	}
	// GiveUp: nothing of a call that returned an error is left.
	GiveUp struct {
		Owners, Unlinked, OfSuccesses, Checked, ExcludedCleanup int
		Unconfirmed                                             int // keys left after the return by owners whose abandonment was not confirmed by it
		TakenAfter, LeftAfter, Undecided                        int
		Detail                                                  []string
	}
	Orphans struct {
		AtClose, Left, OtherKeys int
		Waited                   string
	}
	Errors []string // the harness's own failures
}

func (e *etcdReport) note(format string, args ...any) {
	if len(e.Errors) < 20 {
		e.Errors = append(e.Errors, fmt.Sprintf(format, args...))
	}
}

func appendDetail(d *[]string, format string, args ...any) {
	if len(*d) < 10 {
		*d = append(*d, fmt.Sprintf(format, args...))
	}
}

func (e *etcdReport) violations() []string {
	var v []string
	if n := e.Timeline.NoLease; n > 0 {
		v = append(v, fmt.Sprintf("etcd: %d keys written on no lease: %v", n, e.Timeline.Detail))
	}
	if n := e.Tokens.OtherOwner; n > 0 {
		v = append(v, fmt.Sprintf("etcd: %d acquisitions whose token is the create revision of another owner's lock key: %v", n, e.Tokens.Detail))
	}
	if n := e.LossSignal.Late; n > 0 {
		v = append(v, fmt.Sprintf("etcd: %d losses signalled after the lock key's deletion was committed: %v", n, e.LossSignal.Detail))
	}
	if g := e.GiveUp; g.TakenAfter+g.LeftAfter > 0 {
		v = append(v, fmt.Sprintf("etcd: give-ups: %d lock keys of an owner of a failed call created after it returned, %d still there after it: %v", g.TakenAfter, g.LeftAfter, g.Detail))
	}
	if e.Orphans.Left > 0 {
		v = append(v, fmt.Sprintf("etcd: %d lock keys left after the clients closed and every lease could have run out", e.Orphans.Left))
	}
	if len(e.Errors) > 0 {
		v = append(v, fmt.Sprintf("etcd: harness: %q", e.Errors))
	}
	return v
}

func (e *etcdReport) log(t *testing.T) {
	t.Logf("etcd: %d members; kinds %v (listed but unsupported %v, served but not listed %v); multi-mutex calls %d, %d acquired",
		e.Members, e.Kinds, e.Unsupported, e.NowServed, e.Multi.Calls, e.Multi.Acquired)
	for _, f := range e.Faults {
		t.Logf("etcd fault: %s", f)
	}
	tl := e.Timeline
	t.Logf("etcd timeline: %d events (%d puts, %d deletes), %d lock tenures, %d revision samples, %d watch restarts (%d past a compaction); %d keys on no lease (must be 0); the clients' watches compacted past: %d",
		tl.Events, tl.Puts, tl.Deletes, tl.LockTenures, tl.Samples, tl.WatchRestarts, tl.CompactedRestarts, tl.NoLease, tl.ClientWatchesCompacted)
	for _, c := range e.Compactions {
		t.Logf("etcd compaction: %s", c)
	}
	tk := e.Tokens
	t.Logf("etcd tokens: %d acquisitions checked against the lock keys' create revisions: %d matched, %d of another owner's key (must be 0), %d not in the timeline",
		tk.Checked, tk.Matched, tk.OtherOwner, tk.Unmatched)
	ls := e.LossSignal
	t.Logf("etcd loss signal: %d losses, %d checked: %d certainly before the deletion was committed, %d certainly after (must be 0), %d undecided, %d not ended in the feed; excluded %d paused, %d unmatched, %d never handed out, %d of shared kinds",
		ls.Losses, ls.Checked, ls.First, ls.Late, ls.Undecided, ls.NotEnded, ls.ExcludedPaused, ls.Unmatched, ls.NeverHandedOut, ls.Shared)
	g := e.GiveUp
	t.Logf("etcd give-ups: %d owners of acquisition transactions (%d tied to no call, %d to successful calls); %d of failed calls checked (%d left out: a clean-up request failed by the return): %d lock keys created after the return, %d still there after it (must be 0), %d undecided; %d keys there after the return excused (their owner's abandonment was not confirmed by the return: the call returned after giveUpWait, as the engine documents)",
		g.Owners, g.Unlinked, g.OfSuccesses, g.Checked, g.ExcludedCleanup, g.TakenAfter, g.LeftAfter, g.Undecided, g.Unconfirmed)
	o := e.Orphans
	t.Logf("etcd orphans: %d lock keys when the clients had closed, gone after %s, %d left (must be 0); %d other keys (marks, notices: on leases)", o.AtClose, o.Waited, o.Left, o.OtherKeys)
	if len(e.Errors) > 0 {
		t.Logf("etcd harness errors: %q", e.Errors)
	}
}

// checkEtcd runs the checks on the etcd timeline (see the top of this
// file) with the histories: the acquisitions by name, the losses, the
// acquisition transactions' records (enq), the failed clean-ups' (abf)
// and the other failed requests (rpcerr).
func (r *chaosRun) checkEtcd(rep *chaosReport, byName map[string][]*acquisition, losses []record, byToken map[string]*acquisition, reqs []record) {
	e := r.etcd
	er := &e.report
	for _, f := range r.faults {
		switch f.Kind {
		case faultEtcdLeaderKill, faultEtcdFollowerKill, faultEtcdTransfer, faultEtcdIsolate, faultEtcdCompact, faultEtcdCutOff:
			er.Faults = append(er.Faults, fmt.Sprintf("%s at %.1fs: %s", f.Kind, float64(f.Start-r.start)/1e9, f.Detail))
		}
	}
	tl := e.tl
	tl.mu.Lock()
	defer tl.mu.Unlock()
	ten := tl.tenures()
	er.Timeline.LockTenures = len(ten)
	er.Timeline.Samples = len(tl.samples)
	er.Timeline.WatchRestarts, er.Timeline.CompactedRestarts = tl.restarts, tl.compacted
	for _, ev := range tl.events {
		er.Timeline.Events++
		if !ev.Put {
			er.Timeline.Deletes++
			continue
		}
		er.Timeline.Puts++
		if ev.Lease == 0 {
			er.Timeline.NoLease++
			appendDetail(&er.Timeline.Detail, "%s at revision %d", redactKey(ev.Key), ev.Rev)
		}
	}

	// The acquisition transactions, by owner (placeID): the first, and
	// the calls they are for.
	oc := tieOwners(byName, reqs)
	er.Multi.Calls, er.Multi.Acquired = oc.multiCalls, oc.multiAcquired
	placesOf := oc.placesOf
	for _, q := range reqs {
		if q.K == "wcomp" {
			er.Timeline.ClientWatchesCompacted++
		}
	}

	// Tokens: the create revision of a lock key of one of the call's
	// owners.
	for name, as := range byName {
		for _, a := range as {
			if !a.ok() {
				continue
			}
			er.Tokens.Checked++
			t, ok := ten[tenureID{name, int64(a.acq.Token)}]
			switch {
			case !ok:
				er.Tokens.Unmatched++
			case slices.Contains(placesOf[a], placeID(t.Owner)):
				er.Tokens.Matched++
			case len(placesOf[a]) == 0:
				er.Tokens.Unmatched++ // its transactions were not tied to it (a killed process)
			default:
				er.Tokens.OtherOwner++
				appendDetail(&er.Tokens.Detail, "%s token %d (owner %d, client %d): the key of that revision is owner %s's, not one of the call's %v",
					name, a.acq.Token, a.acq.Owner, a.proc.id, placeID(t.Owner), placesOf[a])
			}
		}
	}

	// The loss signal, against the deletion of the lock key.
	ls := &er.LossSignal
	ls.Losses = len(losses)
	for _, l := range losses {
		if r.isShared(l.Name) {
			ls.Shared++
			continue
		}
		a := byToken[holdKey(l.Name, l.Token)]
		if a == nil {
			ls.NeverHandedOut++
			continue
		}
		believed := l.T
		if a.rel != nil && a.rel.Call < believed {
			believed = a.rel.Call
		}
		if a.proc.pausedDuring(a.acq.Call, believed) {
			ls.ExcludedPaused++
			continue
		}
		t, ok := ten[tenureID{l.Name, int64(l.Token)}]
		if !ok {
			ls.Unmatched++
			continue
		}
		ls.Checked++
		switch {
		case t.DeleteRev == 0:
			ls.NotEnded++
		case tl.before(t.DeleteRev, believed):
			ls.Late++
			appendDetail(&ls.Detail, "%s token %d (client %d): signalled at %d (%q), its key deleted at revision %d, committed by %d (received at %d)",
				l.Name, l.Token, l.Client, believed, l.Err, t.DeleteRev, tl.committedBy(t.DeleteRev), t.DeletedAt)
		case tl.after(t.DeleteRev, believed):
			ls.First++
		default:
			ls.Undecided++
		}
	}

	// Give-ups: nothing of a failed call's owners after it returned.
	g := &er.GiveUp
	byOwner := map[string][]*etcdTenure{}
	for _, t := range ten {
		id := placeID(t.Owner)
		byOwner[id] = append(byOwner[id], t)
	}
	for _, id := range oc.ids() {
		g.Owners++
		a, verdict, after, unconfirmed := oc.giveUp(id)
		switch verdict {
		case giveUpUnlinked:
			g.Unlinked++
			continue
		case giveUpSuccess:
			g.OfSuccesses++
			continue
		case giveUpCleanup:
			g.ExcludedCleanup++
			continue
		}
		ret := a.acq.Ret
		g.Checked++
		for _, t := range byOwner[id] {
			switch {
			case unconfirmed && (tl.after(t.CreateRev, after) || t.DeleteRev == 0 || !tl.before(t.DeleteRev, after)):
				g.Unconfirmed++
			case tl.after(t.CreateRev, after):
				g.TakenAfter++
				appendDetail(&g.Detail, "%s: owner %s of client %d's call (owner %d, %s, returned at %d) took the lock at revision %d (token), after the return",
					t.Name, id, a.proc.id, a.acq.Owner, a.acq.Err, ret, t.CreateRev)
			case t.DeleteRev == 0 || tl.after(t.DeleteRev, after):
				g.LeftAfter++
				appendDetail(&g.Detail, "%s: lock key of owner %s of client %d's call (owner %d, %s, returned at %d), created at revision %d, deleted at revision %d (0: never), after the return",
					t.Name, id, a.proc.id, a.acq.Owner, a.acq.Err, ret, t.CreateRev, t.DeleteRev)
			case !tl.before(t.DeleteRev, after):
				g.Undecided++
			}
		}
	}

	// The Lock calls under way at each compaction.
	for _, f := range r.faults {
		if f.Kind != faultEtcdCompact {
			continue
		}
		waiting, cutOff := 0, 0
		for _, as := range byName {
			for _, a := range as {
				if !a.acq.Try && a.acq.Call < f.Start && a.acq.Ret > f.End {
					waiting++
					if a.proc.id == f.Client {
						cutOff++
					}
				}
			}
		}
		er.Compactions = append(er.Compactions, fmt.Sprintf("%s; %d Lock calls under way throughout (%d of the cut-off client)", f.Detail, waiting, cutOff))
	}
}

// callKey names an acquisition call of the histories: the owner number
// its context carried (a MultiMutex's: its first member's, Group) and the
// lock name.
type callKey struct {
	owner int64
	name  string
}

// ownerCalls ties the owner ids of the store's acquisition requests, as
// the clients recorded them (enq records: the owner's placeID and the
// number the caller's context carried), to the calls of the histories;
// with the clean-ups the clients saw fail (abf) or confirmed (abok), and
// the other failed requests of each process (rpcerr). The etcd and SQL
// modes' timeline checks rest on it.
type ownerCalls struct {
	calls    map[callKey]*acquisition
	first    map[string]record // each owner's first acquisition request
	placesOf map[*acquisition][]string
	abf      map[string][]int64
	abok     map[string][]int64
	mayHold  map[string]bool // owners with an acquisition request that may have taken or queued
	errsOf   map[int][]record
	// multiCalls, multiAcquired count the MultiMutex calls, and those
	// that succeeded.
	multiCalls, multiAcquired int
}

func tieOwners(byName map[string][]*acquisition, reqs []record) *ownerCalls {
	o := &ownerCalls{calls: map[callKey]*acquisition{}, first: map[string]record{}, placesOf: map[*acquisition][]string{},
		abf: map[string][]int64{}, abok: map[string][]int64{}, mayHold: map[string]bool{}, errsOf: map[int][]record{}}
	for name, as := range byName {
		for _, a := range as {
			k := callKey{a.acq.Owner, name}
			if a.acq.Multi {
				k.owner = a.acq.Group
				if a.acq.Owner == a.acq.Group {
					o.multiCalls++
					if a.ok() {
						o.multiAcquired++
					}
				}
			}
			o.calls[k] = a
		}
	}
	for _, q := range reqs {
		switch q.K {
		case "abf":
			o.abf[q.Place] = append(o.abf[q.Place], q.T)
		case "abok":
			o.abok[q.Place] = append(o.abok[q.Place], q.T)
		case "rpcerr":
			o.errsOf[q.Client] = append(o.errsOf[q.Client], q)
		case "enq":
			// Refused, never sent (the SQL mode's ErrUnsent) or of
			// another kind: nothing taken, no place.
			if q.Res != "refused" && q.Res != "unsent" && q.Res != "wrongkind" {
				o.mayHold[q.Place] = true
			}
			if f, ok := o.first[q.Place]; !ok || q.Call < f.Call {
				o.first[q.Place] = q
			}
		}
	}
	for id, q := range o.first {
		if a := o.calls[callKey{q.Owner, q.Name}]; q.Owner != 0 && a != nil {
			o.placesOf[a] = append(o.placesOf[a], id)
		}
	}
	return o
}

// ids returns the owners recorded, sorted.
func (o *ownerCalls) ids() []string {
	ids := make([]string, 0, len(o.first))
	for id := range o.first {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// The give-up check's verdicts on an owner (ownerCalls.giveUp).
const (
	giveUpUnlinked = "unlinked" // tied to no call of the histories
	giveUpSuccess  = "success"  // its call succeeded: not a give-up
	giveUpCleanup  = "cleanup"  // a clean-up or other request of its process failed by the return: left out
	giveUpChecked  = "checked"
)

// giveUp ties owner id to its call a and says whether the give-up check
// applies to it (verdict), from when (after: the call's return and
// giveUpMargin), and whether its abandonment was not confirmed by then
// (unconfirmed: the engine returns without its clean-up's confirmation
// once giveUpWait has passed, a store slow to answer, and the clean-up
// goes on: what such an owner left after the return is excused,
// counted).
func (o *ownerCalls) giveUp(id string) (a *acquisition, verdict string, after int64, unconfirmed bool) {
	q := o.first[id]
	a = o.calls[callKey{q.Owner, q.Name}]
	switch {
	case q.Owner == 0 || a == nil:
		return a, giveUpUnlinked, 0, false
	case a.ok():
		return a, giveUpSuccess, 0, false
	}
	after = a.acq.Ret + int64(giveUpMargin)
	if slices.ContainsFunc(o.abf[id], func(at int64) bool { return at <= after }) ||
		slices.ContainsFunc(o.errsOf[a.proc.id], func(e record) bool { return e.Ret >= a.acq.Call && e.Ret <= after }) {
		return a, giveUpCleanup, after, false
	}
	unconfirmed = o.mayHold[id] && !slices.ContainsFunc(o.abok[id], func(at int64) bool { return at <= after })
	return a, giveUpChecked, after, unconfirmed
}

// redactKey replaces the owner id in a mark key (a secret) by its
// placeID.
func redactKey(key string) string {
	if rest, ok := strings.CutPrefix(key, etcdPrefix+"mark/"); ok {
		if owner, name, ok := strings.Cut(rest, "/"); ok {
			return etcdPrefix + "mark/" + placeID(owner) + "/" + name
		}
	}
	return key
}

// An etcdEvent is one change of a key under the prefix, as the watchers
// saw it.
type etcdEvent struct {
	Rev       int64
	Key       string
	Put       bool
	Create    bool  // a put that created the key
	CreateRev int64 // the key's create revision (of the previous value, for a delete)
	Lease     int64
	Owner     string // a lock key's owner (secret: reported as its placeID)
	At        int64  // CLOCK_MONOTONIC: the first receipt by a watcher
}

type evKey struct {
	rev int64
	key string
}

type tenureID struct {
	name string
	rev  int64 // the create revision: the token
}

// An etcdTenure is one life of a lock key: from its creation to its
// deletion.
type etcdTenure struct {
	Name                 string
	Owner                string
	CreateRev, DeleteRev int64 // 0: not deleted in the feed
	CreatedAt, DeletedAt int64 // first receipts
}

// A revSample is one read of the store's revision: sent at Send, its
// reply at Recv, the revision Rev.
type revSample struct{ Send, Recv, Rev int64 }

// etcdTimeline is the server's timeline of the etcd mode: the merged
// watches of every member, and the revision samples.
type etcdTimeline struct {
	prefix string
	clis   []*clientv3.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu        sync.Mutex
	events    map[evKey]*etcdEvent
	progress  int64 // every event up to this revision has been received
	changed   chan struct{}
	samples   []revSample
	restarts  int
	compacted int
	firstAt   map[int64]int64 // the first receipt of each revision, once the timeline has stopped (committedBy)
}

// startTimeline starts a watch of prefix from revision from on each of
// clis (one per member) and the sampler on ctl.
func startTimeline(prefix string, from int64, clis []*clientv3.Client, ctl *clientv3.Client) *etcdTimeline {
	tl := &etcdTimeline{prefix: prefix, clis: clis, events: map[evKey]*etcdEvent{}, changed: make(chan struct{}), progress: from - 1}
	tl.ctx, tl.cancel = context.WithCancel(context.Background())
	for _, cli := range clis {
		tl.wg.Add(1)
		go func() { defer tl.wg.Done(); tl.follow(cli, from) }()
	}
	tl.wg.Add(1)
	go func() { defer tl.wg.Done(); tl.sample(ctl) }()
	return tl
}

func (tl *etcdTimeline) stop() {
	tl.once.Do(func() {
		tl.cancel()
		tl.wg.Wait()
	})
}

// watchCtx is the context of every watch, and of the progress requests
// to their streams (the stream is chosen by the context's metadata).
func (tl *etcdTimeline) watchCtx() context.Context { return clientv3.WithRequireLeader(tl.ctx) }

// follow watches the prefix on cli from revision from, and again from
// where it stopped when the watch ends (its member down or cut off from
// the leader), or from the compaction's revision if it was compacted past
// (the other members' watches have the events it missed).
func (tl *etcdTimeline) follow(cli *clientv3.Client, from int64) {
	next := from
	for tl.ctx.Err() == nil {
		w := cli.Watch(tl.watchCtx(), tl.prefix, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
		for resp := range w {
			if resp.CompactRevision != 0 {
				tl.mu.Lock()
				tl.compacted++
				tl.mu.Unlock()
				next = max(next, resp.CompactRevision)
				break
			}
			if resp.Err() != nil {
				break
			}
			at := mono()
			tl.mu.Lock()
			for _, ev := range resp.Events {
				kv := ev.Kv
				k := evKey{kv.ModRevision, string(kv.Key)}
				next = max(next, kv.ModRevision+1)
				if _, ok := tl.events[k]; ok {
					continue
				}
				x := &etcdEvent{Rev: kv.ModRevision, Key: string(kv.Key), Put: ev.Type == clientv3.EventTypePut, Lease: kv.Lease, At: at}
				if x.Put {
					x.Create, x.CreateRev = ev.IsCreate(), kv.CreateRevision
					if h, ok := decodeHolding(kv.Value); ok {
						x.Owner = h.Owner
					}
				} else if ev.PrevKv != nil {
					x.CreateRev = ev.PrevKv.CreateRevision
					if h, ok := decodeHolding(ev.PrevKv.Value); ok {
						x.Owner = h.Owner
					}
				}
				tl.events[k] = x
			}
			if resp.IsProgressNotify() {
				next = max(next, resp.Header.Revision+1)
			}
			if next-1 > tl.progress {
				tl.progress = next - 1
			}
			close(tl.changed)
			tl.changed = make(chan struct{})
			tl.mu.Unlock()
		}
		select {
		case <-tl.ctx.Done():
			return
		case <-time.After(100 * time.Millisecond): // the member down or cut off: try again
		}
		tl.mu.Lock()
		tl.restarts++
		tl.mu.Unlock()
	}
}

// sample reads the store's revision (a linearizable read) every
// etcdSampleEvery until the timeline stops.
func (tl *etcdTimeline) sample(ctl *clientv3.Client) {
	tick := time.NewTicker(etcdSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-tl.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(tl.ctx, time.Second)
		send := mono()
		resp, err := ctl.Get(ctx, "safety/sample", clientv3.WithCountOnly())
		recv := mono()
		cancel()
		if err != nil {
			continue
		}
		tl.mu.Lock()
		tl.samples = append(tl.samples, revSample{send, recv, resp.Header.Revision})
		tl.mu.Unlock()
	}
}

// changes returns a channel closed at the next watch response.
func (tl *etcdTimeline) changes() <-chan struct{} {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.changed
}

// awaitProgress waits until the timeline holds every event up to
// revision rev (asking the watchers for progress notifications), or ctx
// ends (10 s at most); it reports whether it did.
func (tl *etcdTimeline) awaitProgress(ctx context.Context, rev int64) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		tl.mu.Lock()
		done, changed := tl.progress >= rev, tl.changed
		tl.mu.Unlock()
		if done {
			return true
		}
		for _, cli := range tl.clis {
			pctx, pcancel := context.WithTimeout(tl.watchCtx(), 200*time.Millisecond)
			_ = cli.RequestProgress(pctx)
			pcancel()
		}
		select {
		case <-changed:
		case <-time.After(200 * time.Millisecond): // a progress request lost on a member going down: ask again
		case <-ctx.Done():
			return false
		}
	}
}

// tenures rebuilds the lock keys' lives from the events (tl.mu held).
func (tl *etcdTimeline) tenures() map[tenureID]*etcdTenure {
	evs := make([]*etcdEvent, 0, len(tl.events))
	for _, ev := range tl.events {
		if strings.HasPrefix(ev.Key, tl.prefix+"lock/") {
			evs = append(evs, ev)
		}
	}
	slices.SortFunc(evs, func(a, b *etcdEvent) int { return int(a.Rev - b.Rev) })
	out := map[tenureID]*etcdTenure{}
	for _, ev := range evs {
		name, _ := etcdLockName(ev.Key)
		id := tenureID{name, ev.CreateRev}
		t := out[id]
		if t == nil {
			t = &etcdTenure{Name: name, Owner: ev.Owner, CreateRev: ev.CreateRev}
			out[id] = t
		}
		switch {
		case ev.Put && ev.Create:
			t.CreatedAt = ev.At
		case !ev.Put:
			t.DeleteRev, t.DeletedAt = ev.Rev, ev.At
		}
	}
	return out
}

// before says whether revision rev was certainly committed before t
// (CLOCK_MONOTONIC): a watcher received it by then, or a read that
// returned by then saw it or a later one (tl.mu held).
func (tl *etcdTimeline) before(rev, t int64) bool {
	return tl.committedBy(rev) <= t
}

// committedBy is the earliest time by which revision rev is known to
// have been committed (math.MaxInt64 if never; tl.mu held).
func (tl *etcdTimeline) committedBy(rev int64) int64 {
	by := int64(1<<63 - 1)
	if tl.firstAt == nil {
		tl.firstAt = map[int64]int64{}
		for _, ev := range tl.events {
			if at, ok := tl.firstAt[ev.Rev]; !ok || ev.At < at {
				tl.firstAt[ev.Rev] = ev.At
			}
		}
	}
	if at, ok := tl.firstAt[rev]; ok {
		by = at
	}
	// The samples' revisions grow with their (sequential) reads: the
	// first sample whose revision reached rev.
	i := sort.Search(len(tl.samples), func(i int) bool { return tl.samples[i].Rev >= rev })
	if i < len(tl.samples) {
		by = min(by, tl.samples[i].Recv)
	}
	return by
}

// after says whether revision rev was certainly not committed before t:
// a linearizable read sent at t or later saw an earlier revision (tl.mu
// held).
func (tl *etcdTimeline) after(rev, t int64) bool {
	i := sort.Search(len(tl.samples), func(i int) bool { return tl.samples[i].Send >= t })
	return i < len(tl.samples) && tl.samples[i].Rev < rev
}
