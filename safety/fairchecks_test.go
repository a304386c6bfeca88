//go:build linux

package safety

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fair mutex's own checks, and the key-hygiene checks that cover both
// kinds: every key of the lock server has a TTL within its bound while the
// run goes on, and nothing but the fencing counters (and, in short runs,
// the abandonment marks, whose TTL is then checked) outlives it.

// fairReport holds the fair mutex's figures and verdicts.
type fairReport struct {
	Names                         []string
	Acquisitions, TryAcquisitions int            // successful fair Lock and TryLock
	Enqueues                      map[string]int // acquisition calls of queued kinds the clients recorded, by script and reply
	Places                        int            // places made in the queues of every queued kind (MONITOR)
	PlaceEnds                     map[string]int // granted, expired, dropped (given up by its owner), cut (Redis restart)
	ExpiredQuiet                  int            // expired places of a process with no fault on it or on Redis within two queue timeouts
	ExpiredQuietDetail            []string
	Grants                        map[string]int // tenures of fair names, by the script that wrote them ("+grant": another owner's script)
	WrongKind                     int            // acquisitions refused with ErrWrongKind: must be 0 (names never change kind)
	KindMismatch                  int            // tenures of the other kind than their name's: must be 0
	FIFO                          struct {
		Grants, Checked, Unknown int // tenures of fair names; with the grantee's send time known; without
		Ahead                    int // places live in the queue at a grant (ahead of or behind the grantee)
		Ordered                  int // granted pairs (A, B): A acknowledged before B was sent and still waiting then
		Violations               int // a grant while a place acknowledged before the grantee's request was sent was live: must be 0
		Detail                   []string
	}
}

// enqueue is what the clients recorded of one place's fair_acquire.lua
// calls (see recordEnqueue): the first call's start, and the reply that
// acknowledged the place (or took the lock at once).
type enqueue struct {
	client             int
	sent, sentWall     int64
	ack, ackWall       int64 // 0: never acknowledged
	try                bool
	firstRes, finalRes string
}

func collectEnqueues(recs map[string]*enqueue, rec record) {
	e := recs[rec.Place]
	if e == nil {
		e = &enqueue{client: rec.Client, sent: rec.Call, sentWall: rec.CallWall, try: rec.Try, firstRes: rec.Res}
		recs[rec.Place] = e
	}
	e.sent, e.sentWall = min(e.sent, rec.Call), min(e.sentWall, rec.CallWall)
	if (rec.Res == "queued" || rec.Res == "acquired") && e.ack == 0 {
		e.ack, e.ackWall = rec.Ret, rec.Wall
	}
	e.finalRes = rec.Res
}

func (r *chaosRun) isFair(name string) bool { _, ok := r.fair[name]; return ok }

// queueTimeout is the queue timeout of the queued name (0 for a plain
// one).
func (r *chaosRun) queueTimeout(name string) time.Duration {
	switch r.kindOf(name) {
	case "fair":
		return r.fair[name]
	case "elect":
		return r.elect[name]
	case "rw":
		return r.rw[name]
	case "sem":
		return r.semQueue
	}
	return 0
}

// checkFair runs the fair mutex's checks.
//
// FIFO. The rule the fair mutex promises, as far as a client can see it:
// if waiter A's enqueue was acknowledged (its reply read) before waiter B's
// enqueue was sent, A is served before B. The acknowledgement means A's
// place was in the queue on the server before B's request was even sent,
// so B's place, if it gets one, is behind A's (places are ordered by
// arrival). So whenever the lock is given to B (granted inside someone's
// release, taken by B's own request, a TryLock's included), no place of
// such an A may still be live in the queue. A place does leave the queue
// legitimately without being served: its owner gave up (a Lock whose
// context ended, Close), or it expired because its owner did not refresh
// it within the queue timeout (paused, killed, cut off by the network or a
// frozen Redis), or a Redis restart lost the queue. All of these remove
// the place (MONITOR shows it, or its deadline has passed), so the check
// holds under every fault: it is asserted. The times compared are
// CLOCK_MONOTONIC readings of the clients (one machine), taken outside the
// go-redis call (before the first attempt, after the last retry), so
// retries and delays only make the precondition rarer, never wrong. A
// place is matched to the client's record by a digest of its owner id; a
// place made again for the same owner after its first one ended (a late
// copy of the request after a restart lost the abandonment mark) is
// recognised by its ZADD coming after the acknowledgement, and left out.
//
// What FIFO does not promise, and is not asserted: the waiting time
// (a dead grantee holds the lock for up to the queue timeout), or that a
// live waiter never loses its place (a process starved of CPU on a loaded
// machine can miss its refreshes: such expirations are counted as
// ExpiredQuiet, with details).
func (r *chaosRun) checkFair(rep *chaosReport, enq map[string]*enqueue, mon monitors) {
	f := &rep.Fair
	f.PlaceEnds, f.Grants = map[string]int{}, map[string]int{}
	places, grants, srv := mon.fair()
	rep.Server = srv
	for name := range r.fair {
		f.Names = append(f.Names, name)
	}
	for name := range r.elect {
		f.Names = append(f.Names, name)
	}
	slices.Sort(f.Names)

	// Kinds never mix: every tenure of a name is of the name's kind. The
	// monitor makes tenures of mutexes only (see monitor): one on a read-
	// write lock's or a semaphore's name is a mutex's owner and token
	// written to its hash.
	mon.each(func(key string, token uint64, t tenure) {
		name, _, _ := r.splitKey(key)
		want := map[string]string{"fair": "fair", "elect": "elect"}[r.kindOf(name)]
		if t.Kind != want || r.isShared(name) {
			f.KindMismatch++
			rep.Server.note("%s: token %d written as a mutex (kind %q) to a name of kind %s", key, token, t.Kind, r.kindOf(name))
		}
		if t.Fair {
			by := t.By
			if t.Granted {
				by += "+grant"
			}
			f.Grants[by]++
		}
	})

	// How places ended, and which expirations had no fault near them.
	now := wall()
	pidProc := map[int]*clientProc{}
	for _, p := range r.procs {
		pidProc[p.cmd.Process.Pid] = p
	}
	offset := wall() - mono() // CLOCK_REALTIME - CLOCK_MONOTONIC, to place faults on the server's clock
	f.Places = len(places)
	for _, p := range places {
		how := p.How
		if p.Ended == 0 {
			how = "expired" // its keys expired with it: nobody looked at the queue again
			if p.Deadline > now {
				how = "queued"
			}
		}
		f.PlaceEnds[how]++
		if how != "expired" {
			continue
		}
		q := r.queueTimeout(p.Name)
		from, to := p.Deadline-2*int64(q)-offset, p.Deadline-offset
		if proc := pidProc[p.PID]; proc == nil || !r.faultedAround(proc, from, to) {
			f.ExpiredQuiet++
			if len(f.ExpiredQuietDetail) < 10 {
				f.ExpiredQuietDetail = append(f.ExpiredQuietDetail, fmt.Sprintf("%s: place %s of pid %d expired at %d (queue timeout %v) with no fault near",
					p.Name, placeID(p.Owner), p.PID, p.Deadline, q))
			}
		}
	}

	// FIFO at every grant.
	fifo := &f.FIFO
	type granted struct {
		e     *enqueue
		token uint64
		at    int64
	}
	byName := map[string][]granted{}
	for _, g := range grants {
		fifo.Grants++
		eb := enq[placeID(g.Owner)]
		if eb == nil {
			fifo.Unknown++ // its process was killed before it wrote the record
			continue
		}
		fifo.Checked++
		fifo.Ahead += len(g.Ahead)
		byName[g.Name] = append(byName[g.Name], granted{eb, g.Token, g.At})
		for _, a := range g.Ahead {
			ea := enq[placeID(a.Owner)]
			if ea == nil || ea.ack == 0 || ea.ack >= eb.sent || a.Added > ea.ackWall {
				continue
			}
			fifo.Violations++
			if len(fifo.Detail) < 10 {
				fifo.Detail = append(fifo.Detail, fmt.Sprintf("%s: token %d given by %s to place %s (client %d, sent at %d) while place %s (client %d, acknowledged at %d, %v earlier) was live in the queue",
					g.Name, g.Token, g.By, placeID(g.Owner), eb.client, eb.sent, placeID(a.Owner), ea.client, ea.ack, time.Duration(eb.sent-ea.ack)))
			}
		}
	}
	// The pairs the rule was about: both served, A acknowledged before B
	// was sent and not yet served then (so that they waited together).
	for _, gs := range byName {
		slices.SortFunc(gs, func(a, b granted) int { return cmp.Compare(a.e.sent, b.e.sent) })
		for i, b := range gs {
			for _, a := range gs[:i] {
				if a.e.ack != 0 && a.e.ack < b.e.sent && a.at > b.e.sentWall {
					fifo.Ordered++
				}
			}
		}
	}
}

// faultedAround says whether a fault that can cost a waiter its place
// touched the process p, or Redis, in [from, to] (CLOCK_MONOTONIC).
func (r *chaosRun) faultedAround(p *clientProc, from, to int64) bool {
	if p.killAt != 0 && p.killAt < to || p.pausedDuring(from, to) {
		return true
	}
	for _, f := range r.faults {
		if f.Start >= to || f.End <= from || f.Kind == faultScriptFlush {
			continue
		}
		if f.Client == p.id || f.Kind == faultRedisPause || f.Kind == faultRedisRestart {
			return true
		}
	}
	return false
}

// keyBound names the kind of a key of the lock server and bounds its TTL:
// a lock hash lives at most its lease (Extend in the chaos run goes up to
// three leases), and so does the holders' set of a read-write lock or a
// semaphore (it expires with its last holder's lease, as the hash does); a
// fencing counter its retention, a semaphore's capacity the longest of
// that, a holder's lease and a place's queue timeout; a queue's keys (of
// a fair mutex, an election, a read-write lock or a semaphore) its queue
// timeout; the record of a job run once its keep; an abandonment mark
// max(2 leases, 1 min) (the engine's abandonFor, of a lease of at most
// three). Anything else is unknown, among which a queue or holders' key
// of a name of another kind.
func (r *chaosRun) keyBound(key string) (kind string, bound time.Duration) {
	name, suffix, ok := r.splitKey(key)
	if !ok {
		return "unknown", 0
	}
	of := r.kindOf(name)
	queue := suffix == ":q" || suffix == ":qt" || suffix == ":qi"
	switch {
	case suffix == "":
		return "lock", r.maxLockTTL()
	case suffix == ":fence":
		return "fence", r.retention
	case of != "plain" && queue:
		return "queue", r.queueTimeout(name)
	case (of == "rw" || of == "sem") && suffix == ":h":
		return "holders", r.maxLockTTL()
	case of == "sem" && suffix == ":cap":
		// It outlives every holder's lease and every place.
		return "cap", max(r.retention, r.maxLockTTL(), r.semQueue)
	case r.isOnce(name) && suffix == ":done":
		return "done", r.onceKeep()
	case strings.HasPrefix(suffix, ":abandoned:"):
		return "mark", max(6*r.lease, time.Minute)
	}
	return "unknown", 0
}

// splitKey splits a key under the run's prefix into the lock name and
// what follows the name's braces ("" for the lock hash, ":q", ":fence",
// ...), as the monitor does.
func (r *chaosRun) splitKey(key string) (name, suffix string, ok bool) {
	return (&monitor{prefix: r.prefix}).splitKey(key)
}

// ttlReport is what the sampler saw during the run.
type ttlReport struct {
	Samples, Skipped int            // rounds, and rounds a frozen or restarting Redis did not answer
	Keys             map[string]int // key observations, by kind
	MaxMs            map[string]int64
	NoTTL            int // must be 0
	OverBound        int // must be 0
	Unknown          int // keys of no known kind (a queue key of a plain name included): must be 0
	// The semaphores' capacity (capSample): samples, samples a frozen or
	// restarting Redis did not answer, samples with a live holder or
	// place, and those of them without the capacity key: must be 0.
	CapSamples, CapSkipped, CapInUse, CapMissing int
	Detail                                       []string
}

func (t *ttlReport) note(format string, args ...any) {
	if len(t.Detail) < 10 {
		t.Detail = append(t.Detail, fmt.Sprintf(format, args...))
	}
}

// ttlSampler lists every key of the lock server(s) every half lease during
// the run and checks its TTL: scripts create and expire keys atomically, so
// no key is ever seen without a TTL, or with one above its bound.
type ttlSampler struct {
	r     *chaosRun
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	rep   ttlReport
}

func (r *chaosRun) startTTLSampler() *ttlSampler {
	s := &ttlSampler{r: r, stopc: make(chan struct{}), done: make(chan struct{}),
		rep: ttlReport{Keys: map[string]int{}, MaxMs: map[string]int64{}}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(r.lease / 2)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *ttlSampler) stop() ttlReport {
	close(s.stopc)
	<-s.done
	return s.rep
}

func (s *ttlSampler) sample() {
	for _, n := range s.r.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), s.r.lease/2)
		keys, ttls, err := keyTTLs(ctx, n, s.r.prefix)
		cancel()
		if err != nil {
			s.rep.Skipped++
			continue
		}
		s.rep.Samples++
		for i, k := range keys {
			s.r.checkTTL(&s.rep, k, ttls[i])
		}
	}
	if s.r.sentinel == nil && s.r.redlock == nil {
		s.capSample()
	}
}

// keyTTLs lists the keys under prefix and their PTTLs (-2 for a key that
// went in between).
func keyTTLs(ctx context.Context, n *redis.Client, prefix string) ([]string, []int64, error) {
	keys, err := n.Keys(ctx, globEscape(prefix)+"*").Result()
	if err != nil {
		return nil, nil, err
	}
	pipe := n.Pipeline()
	cmds := make([]*redis.DurationCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.PTTL(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && len(keys) > 0 {
		return nil, nil, err
	}
	ttls := make([]int64, len(keys))
	for i, c := range cmds {
		switch d := c.Val(); d {
		case -1, -2:
			ttls[i] = int64(d) // go-redis keeps the special values as they are
		default:
			ttls[i] = d.Milliseconds()
		}
	}
	return keys, ttls, nil
}

// globEscape escapes the glob characters of s for KEYS and SCAN.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// checkTTL checks one key's PTTL (ms, or -1 none, -2 gone) against its
// kind's bound.
func (r *chaosRun) checkTTL(rep *ttlReport, key string, ttl int64) {
	if ttl == -2 {
		return
	}
	kind, bound := r.keyBound(key)
	rep.Keys[kind]++
	rep.MaxMs[kind] = max(rep.MaxMs[kind], ttl)
	switch {
	case kind == "unknown":
		rep.Unknown++
		rep.note("unknown key %s (PTTL %d)", key, ttl)
	case ttl == -1:
		rep.NoTTL++
		rep.note("%s %s has no TTL", kind, key)
	case ttl > bound.Milliseconds():
		rep.OverBound++
		rep.note("%s %s: PTTL %d ms above its bound %v", kind, key, ttl, bound)
	}
}

// The FIFO checker flags a grant made while a place acknowledged before
// the grantee's request was sent is live, and only that.
func TestFIFOCheckerFlagsAJump(t *testing.T) {
	const sec = int64(time.Second)
	for _, c := range []struct {
		what      string
		ackA      int64 // A's acknowledgement (mono); B is sent at 10 s
		addedA    int64 // A's ZADD (wall)
		endedA    int64 // when A left the queue, 0 if it did not
		violation bool
	}{
		{"A acknowledged first, still queued", 5 * sec, 4 * sec, 0, true},
		{"A acknowledged after B was sent", 11 * sec, 4 * sec, 0, false},
		{"A acknowledged first, gone before the grant", 5 * sec, 4 * sec, 12 * sec, false},
		{"A's place made again after its acknowledgement", 5 * sec, 6 * sec, 0, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			r := &chaosRun{t: t, lease: time.Second, prefix: "distlock:", fair: map[string]time.Duration{"f": time.Second}}
			m := newMonitor("", "distlock:")
			a := &place{Name: "f", Owner: "A", Added: c.addedA, Deadline: 100 * sec, Ended: c.endedA, How: "dropped"}
			if c.endedA == 0 {
				a.How = ""
			}
			m.allPlace = []*place{a}
			g := grantEvent{Name: "f", Owner: "B", Token: 7, At: 20 * sec, By: "release", Place: true}
			if a.live(g.At) {
				g.Ahead = []placeRef{{a.Owner, a.Added}}
			}
			m.grants = []grantEvent{g}
			enq := map[string]*enqueue{
				placeID("A"): {client: 1, sent: 3 * sec, sentWall: 3 * sec, ack: c.ackA, ackWall: c.ackA, firstRes: "queued"},
				placeID("B"): {client: 2, sent: 10 * sec, sentWall: 10 * sec, ack: 10*sec + 1, ackWall: 10*sec + 1, firstRes: "queued"},
			}
			rep := &chaosReport{}
			r.checkFair(rep, enq, monitors{m})
			if got := rep.Fair.FIFO.Violations == 1; got != c.violation || rep.Fair.FIFO.Checked != 1 {
				t.Errorf("violations %d, checked %d; want a violation: %v (%v)", rep.Fair.FIFO.Violations, rep.Fair.FIFO.Checked, c.violation, rep.Fair.FIFO.Detail)
			}
			if flagged := strings.Contains(strings.Join(rep.violations(), "\n"), "FIFO:"); flagged != c.violation {
				t.Errorf("the run's verdicts %q; want a FIFO violation: %v", rep.violations(), c.violation)
			}
		})
	}
}
