//go:build linux

package safety

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/redis/go-redis/v9"
)

// The Redlock chaos run (TestChaosRedlock): the workload of TestChaos, on
// plain mutexes, from client processes that each lock with
// redisstore.NewRedlock over redlockMasters independent redis-server
// masters, every client reaching each master through that master's
// toxiproxy. The faults are the masters' own, each on one master: SIGSTOP
// (some longer than the lease), SIGKILL with a delayed restart, and the
// proxy faults of TestChaos (latency, black hole, resets, late requests,
// lost replies); besides them SCRIPT FLUSH, the holder faults (SIGKILL,
// SIGSTOP) and cancel storms.
//
// Redlock's mutual exclusion holds while a quorum of masters keeps the
// locks it granted, so the run keeps within that:
//
//   - at most redlockMasters-quorum masters are faulty at any time (down,
//     paused, or behind a faulty proxy): the masters' faults run in the
//     background, each on a master it reserves, and wait for one to be
//     free again when that many are faulty;
//   - a killed master comes back empty (redistest servers have no
//     persistence) only once it has been down for longer than the longest
//     lease of the run (maxLockTTL): the Redis documentation's delayed
//     restart. Every key it held would have expired by then, so it votes
//     for nobody that a quorum does not already allow.
//
// Once per run, a no-quorum phase faults a majority at once (paused, or
// killed with a delayed restart; at least one paused, so that a majority
// is back when the pauses end): acquisitions must fail with ErrBackend,
// neither succeed nor hang, and leave nothing behind.
//
// What the run does not do, on purpose: restart a master without the
// delay, which lets a second holder take a quorum that includes the
// restarted master while the first still holds its own (the Redis
// documentation's counter-example, shown deterministically by the root
// package's TestRedlockRestartedMaster), and step the clocks.

const (
	// redlockMasters: five masters tolerate two faulty ones, so two
	// faults at once (a pause during a restart delay, a proxy fault on
	// top) stay within the claim; with three only one master could be
	// faulty at a time.
	redlockMasters = 5
	// redlockClients is the number of client processes of the Redlock
	// run, unless -chaos.clients is given.
	redlockClients = 3
	// redlockProbe is the lock name of the no-quorum phase's probe (and,
	// with "-try", of its TryLock), which no worker uses; redlockProbeHeld
	// the name of the lock the probe holds when the phase begins.
	redlockProbe     = "redlock-probe"
	redlockProbeHeld = "redlock-probe-held"
)

// redlockFaultKinds are the Redlock run's faults of the client processes;
// the masters' faults (redlockMasterKinds) have a schedule of their own,
// at the same time. Pool exhaustion (one client's pool of one master) and
// Close under load (its check is about the one server that holds a lock)
// are left out, and so is the restart without delay (see above).
var redlockFaultKinds = []string{faultHolderKill, faultHolderPause, faultCancelStorm}

// redlockMasterKinds are the faults of the masters: of one master at a
// time (redlockNodeFaults), which the run keeps to a minority of the
// masters at once, and the no-quorum phase, once per run. The phase and
// a kill come first, so that a short run has both.
var (
	redlockMasterKinds = []string{faultNoQuorum, faultNodeKill, faultRedisPause, faultLatency, faultTimeout,
		faultReset, faultLateRequest, faultLostReply, faultScriptFlush}
	redlockMasterFirst = []string{faultNoQuorum, faultNodeKill}
	redlockNodeFaults  = map[string]bool{faultRedisPause: true, faultNodeKill: true, faultLatency: true,
		faultTimeout: true, faultReset: true, faultLateRequest: true, faultLostReply: true, faultScriptFlush: true}
)

// TestChaosRedlock is TestChaos over 5 independent masters locked with
// redisstore.NewRedlock by 3 client processes, with faults of the masters
// (at most 2 at once, restarts delayed beyond every lease) and one
// no-quorum phase; see redlock_chaos_test.go and docs/safety.md.
func TestChaosRedlock(t *testing.T) { runChaos(t, modeRedlock, chaosDuration(20*time.Second)) }

// maxLockTTL is the longest lease a lock of the run can have: Extend goes
// up to three leases.
func (r *chaosRun) maxLockTTL() time.Duration { return 3 * r.lease }

// redlockRun keeps the Redlock run's faults of masters to a minority: each
// reserves its master while it lasts.
type redlockRun struct {
	masters, quorum int
	rng             *rand.Rand // the masters' schedule's
	end             time.Time  // of the masters' schedule

	mu     sync.Mutex
	busy   []bool
	faulty int
	freed  chan struct{} // closed, and replaced, when a master is freed
	wg     sync.WaitGroup
	phases []noQuorumPhase
}

func newRedlockRun(masters int, seed int64) *redlockRun {
	return &redlockRun{masters: masters, quorum: masters/2 + 1, busy: make([]bool, masters), freed: make(chan struct{}),
		rng: rand.New(rand.NewSource(seed + 1))}
}

// schedule injects the masters' faults until end (see redlockMasterKinds),
// and returns once they are all over.
func (rl *redlockRun) schedule(r *chaosRun, end time.Time) {
	rl.end = end
	r.scheduleKinds(end, rl.rng, redlockMasterKinds, redlockMasterFirst, r.injectRedlock)
	rl.wait()
}

// minority is how many masters may be faulty at once.
func (rl *redlockRun) minority() int { return rl.masters - rl.quorum }

// reserve waits until fewer than a minority of masters are faulty, then
// takes a free master at random; false if the schedule's end came first.
func (rl *redlockRun) reserve() (int, bool) {
	return rl.take(rl.minority(), func(free []int) []int { return free[rl.rng.Intn(len(free)):][:1] })
}

// reserveAll waits until no master is faulty, then takes them all (the
// no-quorum phase); false if the schedule's end came first.
func (rl *redlockRun) reserveAll() bool {
	_, ok := rl.take(1, func(free []int) []int { return free })
	return ok
}

// take waits until fewer than limit masters are faulty, then marks the
// masters pick chooses among the free ones, and returns the first.
func (rl *redlockRun) take(limit int, pick func(free []int) []int) (int, bool) {
	timeout := time.NewTimer(time.Until(rl.end))
	defer timeout.Stop()
	for {
		rl.mu.Lock()
		if rl.faulty < limit {
			var free []int
			for i, b := range rl.busy {
				if !b {
					free = append(free, i)
				}
			}
			chosen := pick(free)
			for _, i := range chosen {
				rl.busy[i] = true
			}
			rl.faulty += len(chosen)
			rl.mu.Unlock()
			return chosen[0], true
		}
		freed := rl.freed
		rl.mu.Unlock()
		select {
		case <-freed:
		case <-timeout.C:
			return -1, false
		}
	}
}

// release frees master i.
func (rl *redlockRun) release(i int) {
	rl.mu.Lock()
	rl.busy[i] = false
	rl.faulty--
	close(rl.freed)
	rl.freed = make(chan struct{})
	rl.mu.Unlock()
}

// wait waits for the faults still running in the background.
func (rl *redlockRun) wait() { rl.wg.Wait() }

// injectRedlock injects a fault of one master, in the background, or the
// no-quorum phase (the first time it is drawn; later draws do nothing).
func (r *chaosRun) injectRedlock(kind string, frac func(lo, hi float64) time.Duration) {
	rl := r.redlock
	if kind == faultNoQuorum {
		if len(rl.phases) == 0 {
			r.noQuorum(frac)
		}
		return
	}
	node, ok := rl.reserve()
	if !ok {
		return
	}
	if kind == faultNodeKill {
		r.killMaster(node, r.restartDelay(frac))
		return
	}
	f := fault{Kind: kind, Slot: -1, Client: -1, Node: node}
	var run func() error
	switch kind {
	case faultRedisPause:
		d := frac(0.3, 2.5) // some longer than the lease
		f.Detail = fmt.Sprintf("master %d for %v", node, d)
		srv := r.lockSrvs[node]
		run = func() error {
			if err := srv.Pause(); err != nil {
				return err
			}
			time.Sleep(d) // the fault's length
			return srv.Resume()
		}
	case faultScriptFlush:
		f.Detail = fmt.Sprintf("master %d", node)
		run = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return r.nodes[node].ScriptFlush(ctx).Err()
		}
	default:
		toxic, d, detail := proxyFault(rl.rng, kind, frac)
		f.Detail = fmt.Sprintf("master %d: %s", node, detail)
		run = func() error { r.applyToxic(r.proxies[node], toxic, d); return nil }
	}
	rl.wg.Add(1)
	go func() {
		defer rl.wg.Done()
		defer rl.release(node)
		f.Start = mono()
		if err := run(); err != nil {
			r.t.Errorf("%s on master %d: %v", kind, node, err)
		}
		f.End = mono()
		r.record(f)
	}()
}

// restartDelay draws how long a killed master stays down: longer than the
// longest lease, by 0.1 to 1 lease.
func (r *chaosRun) restartDelay(frac func(lo, hi float64) time.Duration) time.Duration {
	return r.maxLockTTL() + frac(0.1, 1)
}

// killMaster kills master i (reserved by the caller) and restarts it, empty,
// in the background once it has been down for d: a delayed restart. The
// master is freed once it is up again.
func (r *chaosRun) killMaster(i int, d time.Duration) {
	rl := r.redlock
	f := fault{Kind: faultNodeKill, Slot: -1, Client: -1, Node: i, Detail: fmt.Sprintf("master %d down for %v", i, d)}
	f.Start = mono()
	if err := r.lockSrvs[i].Kill(); err != nil {
		r.t.Errorf("kill master %d: %v", i, err)
	}
	back := time.Now().Add(d)
	rl.wg.Add(1)
	go func() {
		defer rl.wg.Done()
		defer rl.release(i)
		time.Sleep(time.Until(back)) // the delayed restart
		if err := r.lockSrvs[i].Restart(); err != nil {
			r.t.Errorf("restart master %d: %v", i, err)
		}
		f.End = mono()
		r.record(f)
	}()
}

// A noQuorumPhase is one time a majority of the masters was faulty at
// once, and what the probe, a Redlock client of the test process on the
// masters directly, saw meanwhile. Times are CLOCK_MONOTONIC ns.
type noQuorumPhase struct {
	Begin      int64 // the first master of the majority faulted
	Start, End int64 // every master of the majority faulty
	Masters    []int
	Killed     []int // the others were paused
	// The probe's TryLock and Lock (their context ends with the phase),
	// on redlockProbe-try and redlockProbe: how they ended, and how long
	// they took.
	Try, Lock probeCall
	// Held is the lock the probe took on every master before the phase:
	// its lease context must be cancelled (ErrLockLost) before its hold on
	// a quorum of masters can end (checked against MONITOR, as the
	// workers' losses are).
	Held        heldProbe
	CloseErr    string
	CloseMs     float64
	probe       *distlock.Client
	probeRdbs   []*redis.Client
	probeCtx    context.Context
	probeCancel context.CancelFunc
	lease       time.Duration
}

// heldProbe is the lock the probe holds when a no-quorum phase begins.
type heldProbe struct {
	Token    uint64
	Err      string // of the acquisition before the phase
	Lost     bool   // the lease context ended with ErrLockLost within the phase
	Cause    string
	LostWall int64   // CLOCK_REALTIME of its EventLost, 0 if none
	LeadMs   float64 // before the end of its hold on a quorum (MONITOR)
}

// A probeCall is one acquisition of the no-quorum phase's probe.
type probeCall struct {
	Err     string
	Backend bool // the error wraps ErrBackend
	Hung    bool // it returned because its context ended (the phase's end)
	Ms      float64
}

func (p *noQuorumPhase) call(name string, try bool) probeCall {
	m := p.probe.Mutex(name, distlock.WithTTL(p.lease))
	acquire := m.Lock
	if try {
		acquire = m.TryLock
	}
	call := mono()
	l, err := acquire(p.probeCtx)
	pc := probeCall{Ms: float64(mono()-call) / 1e6, Err: "nil: acquired without a quorum"}
	if err == nil {
		_ = l.Unlock(context.Background())
		return pc
	}
	pc.Err, pc.Backend = err.Error(), errors.Is(err, distlock.ErrBackend)
	pc.Hung = p.probeCtx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
	return pc
}

// noQuorum runs the no-quorum phase: once no master is faulty, a majority
// is faulted for 1.5 to 2.5 leases, each master paused or killed (at most
// a minority killed, so that a majority is back when the pauses end; a
// killed one comes back with a delayed restart, later). Meanwhile the probe
// tries TryLock and Lock. After the phase the probe client is closed.
func (r *chaosRun) noQuorum(frac func(lo, hi float64) time.Duration) {
	rl := r.redlock
	if !rl.reserveAll() {
		return
	}
	d := frac(1.5, 2.5)
	members := rl.rng.Perm(rl.masters)[:rl.quorum]
	killed := members[:rl.rng.Intn(rl.minority()+1)]
	delays := make([]time.Duration, len(killed))
	for i := range killed {
		// Down for the whole phase: a master back within it would give
		// the workers a quorum (a delayed restart alone can be shorter
		// than the phase).
		delays[i] = max(r.restartDelay(frac), d+r.unit)
	}
	p := &noQuorumPhase{Masters: slices.Sorted(slices.Values(members)), Killed: slices.Sorted(slices.Values(killed)), lease: r.lease}
	var rdbs []redis.UniversalClient
	for _, s := range r.lockSrvs {
		opt := s.Options()
		// As the workers' clients: a paused master costs half a lease.
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.MaxRetries = r.lease/2, r.lease/2, r.lease/2, 1
		c := redis.NewClient(opt)
		p.probeRdbs = append(p.probeRdbs, c)
		rdbs = append(rdbs, c)
	}
	var lostWall atomic.Int64
	p.probe = distlock.New(redisstore.NewRedlock(rdbs), distlock.WithLogger(nil), distlock.WithEventHandler(func(e distlock.Event) {
		if e.Kind == distlock.EventLost && e.Name == redlockProbeHeld {
			lostWall.CompareAndSwap(0, wall()) // in the engine, as the cancellation happens
		}
	}))
	// Every master is up: the probe holds a lock on all of them. Its
	// clients are new: their connections are made first, so that the
	// lock's requests are not given up while dialling on a loaded machine
	// (a request's node timeout, a tenth of the lease, includes the dial;
	// a Lock that a majority did not answer in time fails, and the phase
	// would have no held lock to check). The same for a first attempt that
	// failed all the same: this is the phase's set-up, not one of its
	// checks.
	hctx, hcancel := context.WithTimeout(context.Background(), 5*r.lease)
	for _, c := range p.probeRdbs {
		_ = c.Ping(hctx).Err()
	}
	var held *distlock.Lease
	var err error
	for {
		held, err = p.probe.Mutex(redlockProbeHeld, distlock.WithTTL(r.lease)).Lock(hctx)
		if err == nil || hctx.Err() != nil || !errors.Is(err, distlock.ErrBackend) {
			break
		}
		time.Sleep(r.lease / 10) // a majority did not answer in time: let the dials finish
	}
	hcancel()
	if err != nil {
		p.Held.Err = err.Error()
	} else {
		p.Held.Token = held.Token()
	}

	p.Begin = mono()
	for i, m := range killed {
		r.killMaster(m, delays[i])
	}
	for _, m := range members[len(killed):] {
		if err := r.lockSrvs[m].Pause(); err != nil {
			r.t.Errorf("no-quorum phase: pause master %d: %v", m, err)
		}
	}
	p.Start = mono()
	phaseEnd := time.Now().Add(d)
	p.probeCtx, p.probeCancel = context.WithDeadline(context.Background(), phaseEnd)
	// At once, on names of their own (a Lock would find the name held
	// on the masters that are up by the TryLock's attempt, and wait), so
	// that each has the phase to fail in.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.Try = p.call(redlockProbe+"-try", true) }()
	go func() { defer wg.Done(); p.Lock = p.call(redlockProbe, false) }()
	if held != nil {
		select {
		case <-held.Context().Done():
		case <-time.After(time.Until(phaseEnd)):
		}
		if cause := context.Cause(held.Context()); cause != nil {
			p.Held.Lost, p.Held.Cause = errors.Is(cause, distlock.ErrLockLost), cause.Error()
		}
	}
	// The phase ends on time, whether or not the probe's calls have
	// returned: a call that failed waits for the clean-up of its attempts
	// (abandon), which needs a quorum; keeping the majority faulty until
	// they return would stretch the phase until a killed master's delayed
	// restart, which gives the quorum back within it.
	time.Sleep(time.Until(phaseEnd)) // the phase's length
	p.End = mono()
	for _, m := range members[len(killed):] {
		if err := r.lockSrvs[m].Resume(); err != nil {
			r.t.Errorf("no-quorum phase: resume master %d: %v", m, err)
		}
	}
	wg.Wait()
	p.probeCancel()
	for i := range rl.masters {
		if !slices.Contains(killed, i) {
			rl.release(i) // the killed ones are freed once restarted
		}
	}
	if held != nil {
		_ = held.Unlock(context.Background()) // lost: ErrLockLost
	}
	p.Held.LostWall = lostWall.Load()
	call := mono()
	p.CloseErr = errString(p.probe.Close())
	p.CloseMs = float64(mono()-call) / 1e6
	for _, c := range p.probeRdbs {
		c.Close()
	}
	r.record(fault{Kind: faultNoQuorum, Slot: -1, Client: -1, Start: p.Start, End: p.End,
		Detail: fmt.Sprintf("masters %v for %v (killed %v, the others paused)", p.Masters, d, p.Killed)})
	rl.mu.Lock()
	rl.phases = append(rl.phases, *p)
	rl.mu.Unlock()
}

// redlockReport is the Redlock run's part of the figures and verdicts.
type redlockReport struct {
	Masters, Quorum int
	// MaxFaulty is the most masters faulty at once outside the no-quorum
	// phases: at most Masters-Quorum, or the run left Redlock's claim.
	MaxFaulty int
	// Restarts of killed masters, and how long they were down at least:
	// longer than the longest lease (ShortDowns: must be 0).
	Restarts, ShortDowns int
	MinDown              string
	Phases               []noQuorumPhase
	// PhaseOutcomes: the workers' acquisitions called and answered
	// within a no-quorum phase; FalseSuccesses among them acquired: must
	// be 0.
	PhaseOutcomes  map[string]int
	FalseSuccesses int
	// The probe's tenures on the masters (MONITOR): every one must be
	// ended by its owner's clean-up (Left: those that were not, must be
	// 0), except on a master killed (Cut).
	ProbeTenures, ProbeCleaned, ProbeCut, ProbeLeft int
	// LossesByMasters: the checked losses by how many masters held the
	// lock (the loss must precede the end of its hold on a quorum).
	LossesByMasters map[int]int
	Detail          []string
}

func (rr *redlockReport) note(format string, args ...any) {
	if len(rr.Detail) < 10 {
		rr.Detail = append(rr.Detail, fmt.Sprintf(format, args...))
	}
}

// checkRedlock checks what the Redlock run adds: that the faults stayed
// within the claim (a minority faulty, restarts delayed), and the
// no-quorum phases: no acquisition succeeded or hung, the probe's failed
// attempts were cleaned up on every master.
func (r *chaosRun) checkRedlock(rep *chaosReport, byName map[string][]*acquisition, mon monitors) {
	rl := r.redlock
	rr := rep.Redlock
	rr.Masters, rr.Quorum, rr.Phases = rl.masters, rl.quorum, rl.phases
	rr.PhaseOutcomes = map[string]int{}
	inPhase := func(from, to int64) bool {
		for _, p := range rl.phases {
			if from >= p.Start && to <= p.End {
				return true
			}
		}
		return false
	}
	nearPhase := func(at int64) bool {
		for _, p := range rl.phases {
			if at >= p.Begin && at <= p.End {
				return true
			}
		}
		return false
	}

	// The faults of masters, at the moments they began: how many were
	// faulty then (the count only grows at those moments).
	var minDown time.Duration
	for _, f := range r.faults {
		if f.Kind == faultNodeKill {
			rr.Restarts++
			down := time.Duration(f.End - f.Start)
			if minDown == 0 || down < minDown {
				minDown = down
			}
			if down <= r.maxLockTTL() {
				rr.ShortDowns++
				rr.note("master %d down for %v only, not longer than the longest lease %v", f.Node, down, r.maxLockTTL())
			}
		}
		if !redlockNodeFaults[f.Kind] || nearPhase(f.Start) {
			continue
		}
		n := 0
		for _, g := range r.faults {
			if redlockNodeFaults[g.Kind] && g.Start <= f.Start && g.End > f.Start {
				n++
			}
		}
		rr.MaxFaulty = max(rr.MaxFaulty, n)
	}
	rr.MinDown = minDown.Round(time.Millisecond).String()

	for name, as := range byName {
		for _, a := range as {
			if !inPhase(a.acq.Call, a.acq.Ret) {
				continue
			}
			rr.PhaseOutcomes[a.acq.Res]++
			if a.ok() {
				rr.FalseSuccesses++
				rr.note("%s: owner %d (client %d) acquired token %d within a no-quorum phase [%d, %d]", name, a.acq.Owner, a.proc.id, a.acq.Token, a.acq.Call, a.acq.Ret)
			}
		}
	}
	for i := range rr.Phases {
		p := &rr.Phases[i]
		for what, c := range map[string]probeCall{"TryLock": p.Try, "Lock": p.Lock} {
			if !c.Backend || c.Hung {
				rr.note("no-quorum phase over masters %v: the probe's %s returned %q after %.0f ms, want ErrBackend before the phase ended", p.Masters, what, c.Err, c.Ms)
			}
		}
		h := &p.Held
		ten, _, ok := mon.quorumLookup(r.key(redlockProbeHeld), h.Token, rl.quorum)
		switch {
		case !h.Lost || h.LostWall == 0:
			rr.note("no-quorum phase over masters %v: the probe's lock held on every master (token %d, %s) was not lost within the phase: %s", p.Masters, h.Token, h.Err, h.Cause)
		case !ok:
			rr.note("no-quorum phase over masters %v: the probe's lock (token %d) is not on a quorum of masters in the MONITOR feeds", p.Masters, h.Token)
		default:
			h.LeadMs = float64(ten.end()-h.LostWall) / 1e6
			if h.LeadMs <= 0 {
				rr.note("no-quorum phase over masters %v: the probe's lock (token %d) was lost %.1f ms after its hold on a quorum could end (%+v)", p.Masters, h.Token, -h.LeadMs, ten)
			}
		}
	}
	mon.each(func(key string, token uint64, t tenure) {
		if key != r.key(redlockProbe) && key != r.key(redlockProbe+"-try") {
			return
		}
		rr.ProbeTenures++
		switch {
		case t.Cut:
			rr.ProbeCut++
		case t.DelAt != 0:
			rr.ProbeCleaned++
		default:
			rr.ProbeLeft++
			rr.note("%s token %d: a tenure of the probe's failed attempt left to expire (%+v)", key, token, t)
		}
	})
}

// violations lists what the Redlock run must not have.
func (rr *redlockReport) violations() []string {
	var v []string
	if rr.MaxFaulty > rr.Masters-rr.Quorum || rr.ShortDowns > 0 {
		v = append(v, fmt.Sprintf("redlock: the faults left the claim: %d masters faulty at once (at most %d), %d restarts not delayed beyond the longest lease: %v",
			rr.MaxFaulty, rr.Masters-rr.Quorum, rr.ShortDowns, rr.Detail))
	}
	bad, late := 0, 0
	for _, p := range rr.Phases {
		for _, c := range []probeCall{p.Try, p.Lock} {
			if !c.Backend || c.Hung {
				bad++
			}
		}
		if p.Held.LeadMs <= 0 {
			late++
		}
	}
	if rr.FalseSuccesses+bad+late+rr.ProbeLeft > 0 {
		v = append(v, fmt.Sprintf("redlock: no-quorum phases: %d acquisitions succeeded, %d probe acquisitions did not fail with ErrBackend in time, %d held locks not lost before their quorum could expire them, %d tenures of failed attempts left: %v",
			rr.FalseSuccesses, bad, late, rr.ProbeLeft, rr.Detail))
	}
	if len(rr.Phases) == 0 {
		v = append(v, "redlock: the run had no no-quorum phase (a run shorter than its first round of faults?)")
	}
	return v
}

func (rr *redlockReport) log(t *testing.T) {
	t.Logf("redlock: %d masters, quorum %d; at most %d faulty at once outside the no-quorum phases; %d delayed restarts (down at least %s); losses checked by masters holding the lock %v",
		rr.Masters, rr.Quorum, rr.MaxFaulty, rr.Restarts, rr.MinDown, rr.LossesByMasters)
	for _, p := range rr.Phases {
		t.Logf("redlock: no-quorum phase over masters %v (killed %v) for %v: probe TryLock %.0f ms %q, Lock %.0f ms %q; held lock (token %d) lost %v (%s) %.1f ms before its quorum could expire it; Close %.0f ms (%q)",
			p.Masters, p.Killed, time.Duration(p.End-p.Start).Round(time.Millisecond), p.Try.Ms, p.Try.Err, p.Lock.Ms, p.Lock.Err,
			p.Held.Token, p.Held.Lost, p.Held.Cause, p.Held.LeadMs, p.CloseMs, p.CloseErr)
	}
	t.Logf("redlock: workers' acquisitions within the no-quorum phases %v, %d succeeded (must be 0); probe tenures on the masters %d: %d cleaned up, %d cut by a kill, %d left (must be 0)",
		rr.PhaseOutcomes, rr.FalseSuccesses, rr.ProbeTenures, rr.ProbeCleaned, rr.ProbeCut, rr.ProbeLeft)
	for _, d := range rr.Detail {
		t.Logf("redlock: %s", d)
	}
}
