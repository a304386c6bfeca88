//go:build linux

package safety

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/redis/go-redis/v9"
)

// The set-permits fault and what it is checked by. The scheduler shrinks a
// semaphore's capacity (SetPermits to 1 or 2 of its 3) while the workers
// hold and wait for its permits, and grows it back after 1 to 2 leases.
// Shrinking revokes nothing: holders keep their permits, and the permits
// in use may stay above the new capacity until they are released (the
// documented behaviour); waiters that ask for more than the new capacity
// fail with ErrInvalidOption. So the semaphore check (checkShared) holds
// every admission to the capacity that can have been in force when it
// was made (capacityBound); and the sampler checks that the capacity key
// never disappears while permits are held or waited for, which the
// clients' short fencing retention (chaosRetention) would otherwise let
// happen to holds and places longer than it.

// A capChange is one SetPermits call of the scheduler: the capacity it
// set, when it was called and when it returned (CLOCK_MONOTONIC), and
// whether it failed (its outcome is then unknown).
type capChange struct {
	name      string
	value     int
	call, ret int64
	failed    bool
}

// setPermits runs one set-permits fault on a semaphore of the run: its
// capacity shrunk for 1 to 2 leases, then set back. It describes what it
// did.
func (r *chaosRun) setPermits(frac func(lo, hi float64) time.Duration) string {
	var names []string
	for _, n := range r.names {
		if r.kindOf(n) == "sem" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "no semaphore"
	}
	name := names[r.rng.Intn(len(names))]
	n := 1 + r.rng.Intn(semCapacity-1)
	d := frac(1, 2)
	s := r.admin.Semaphore(name, semCapacity, distlock.WithTTL(r.lease), distlock.WithQueueTimeout(r.semQueue))
	set := func(v int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := capChange{name: name, value: v, call: mono()}
		err := s.SetPermits(ctx, v)
		c.ret, c.failed = mono(), err != nil
		r.mu.Lock()
		r.caps = append(r.caps, c)
		r.mu.Unlock()
		return err
	}
	detail := fmt.Sprintf("%s: %d -> %d for %v", name, semCapacity, n, d)
	if err := set(n); err != nil {
		detail += fmt.Sprintf(" (failed: %v)", err)
	}
	time.Sleep(d) // the fault's length
	if err := set(semCapacity); err != nil {
		detail += fmt.Sprintf("; set back failed: %v", err)
	}
	return detail
}

// capacityBound is the largest capacity of the semaphore name that can
// have been in force at some moment of [from, to] (CLOCK_MONOTONIC): the
// one the last change confirmed before from set (the clients' before
// any), and that of every change made, or whose outcome is unknown, within
// the span; the clients' again after a Redis restart, which loses the
// capacity, or after a lapse (see capacityLapses): the next acquisition
// then sets it from its own argument.
func (r *chaosRun) capacityBound(name string, lapses []lapse, from, to int64) int {
	bound := r.sem[name]
	var first int64
	for _, c := range r.caps {
		if c.name != name {
			continue
		}
		if first == 0 {
			first = c.call
		}
		switch {
		case c.call > to:
		case c.ret <= from && !c.failed:
			bound = c.value // in force from before the span on
		case c.ret > from || c.failed:
			bound = max(bound, c.value)
		}
	}
	if first == 0 {
		return bound
	}
	reverted := r.restartDuring(first, to)
	for _, l := range lapses {
		reverted = reverted || l.from < to && l.to > first
	}
	if reverted {
		bound = max(bound, r.sem[name])
	}
	return bound
}

// A lapse is a span during which a semaphore's capacity may have expired.
type lapse struct{ from, to int64 }

// capacityLapses returns the spans during which the capacity of a
// semaphore whose acquisitions are as may have expired, as documented: it
// is kept while any permit is held or waited for, and for the fencing
// retention after the last acquisition or SetPermits. So it may have
// expired once the retention has passed since the last of them, and no
// acquisition is under way and no permit held: from retention after the
// start of such a quiet span to its end. The spans are taken from the
// histories (an acquisition from its call to its reply, a hold from its
// reply to its release call or the end of its validity), which can only
// make them longer than the server's: the check that follows is lenient
// where the capacity may have lapsed, and the sampler checks that it
// never does while it is held or waited for.
func (r *chaosRun) capacityLapses(name string, as []*acquisition, runEnd int64) []lapse {
	var busy []lapse
	for _, a := range as {
		busy = append(busy, lapse{a.acq.Call, a.acq.Ret})
		if a.ok() {
			busy = append(busy, lapse{a.acq.Ret, a.validEnd(runEnd)})
		}
	}
	for _, c := range r.caps {
		if c.name == name {
			busy = append(busy, lapse{c.call, c.ret})
		}
	}
	slices.SortFunc(busy, func(a, b lapse) int { return cmp.Compare(a.from, b.from) })
	var out []lapse
	end := r.start
	for _, b := range busy {
		if b.from-end > int64(r.retention) {
			out = append(out, lapse{end + int64(r.retention), b.from})
		}
		end = max(end, b.to)
	}
	if runEnd-end > int64(r.retention) {
		out = append(out, lapse{end + int64(r.retention), runEnd})
	}
	return out
}

// shrunkBelow says whether the capacity of name can have been below n at
// some moment of [from, to]: a change to less than n made before to, and
// not set back (confirmed) before from.
func (r *chaosRun) shrunkBelow(name string, n int, from, to int64) bool {
	for i, c := range r.caps {
		if c.name != name || c.value >= n || c.call > to {
			continue
		}
		back := int64(-1) // when a later change set it back, confirmed
		for _, d := range r.caps[i+1:] {
			if d.name == name && !d.failed && d.value >= n {
				back = d.ret
				break
			}
		}
		if back < 0 || back >= from {
			return true
		}
	}
	return false
}

// capSample reads, in one script (atomically), whether each semaphore's
// capacity key exists and whether any permit is held (a holder's lease
// still running, by the server's clock) or waited for (a place's deadline
// not passed), and counts the samples where the capacity was missing
// while they were: the capacity must outlive its holders and waiters.
func (s *ttlSampler) capSample() {
	r := s.r
	for _, name := range r.names {
		if r.kindOf(name) != "sem" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.lease/2)
		k := r.key(name)
		res, err := capScript.Run(ctx, r.ctl, []string{k + ":cap", k + ":h", k + ":qt"}).Int64Slice()
		cancel()
		if err != nil || len(res) != 3 {
			s.rep.CapSkipped++
			continue
		}
		s.rep.CapSamples++
		if res[1]+res[2] == 0 {
			continue
		}
		s.rep.CapInUse++
		if res[0] == 0 {
			s.rep.CapMissing++
			s.rep.note("%s: no capacity key while %d holders and %d places were live", name, res[1], res[2])
		}
	}
}

// capScript returns {whether KEYS[1] exists, how many members of the
// sorted sets KEYS[2] and KEYS[3] have a score (ms) more than 2 ms above
// the server's clock}: a semaphore's capacity, live holders and live
// places (the margin covers the rounding of TTLs to the millisecond).
var capScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 2
return {redis.call('EXISTS', KEYS[1]), redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'),
  redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')}
`)

// checkInvalid checks that every acquisition refused with ErrInvalidOption
// was a semaphore's, for more permits than a capacity that can have been
// in force during the call (a set-permits fault): the workload asks for
// nothing else that is invalid.
func (r *chaosRun) checkInvalid(rep *chaosReport, byName map[string][]*acquisition) {
	sm := &rep.Shared.Sem
	for name, as := range byName {
		for _, a := range as {
			if a.acq.Res != "invalid" {
				continue
			}
			if r.kindOf(name) == "sem" && r.shrunkBelow(name, a.acq.N, a.acq.Call, a.acq.Ret) {
				sm.InvalidExplained++
				continue
			}
			sm.InvalidUnexplained++
			if len(sm.Detail) < 10 {
				sm.Detail = append(sm.Detail, fmt.Sprintf("%s: owner %d (client %d) refused with ErrInvalidOption, no capacity below its %d permits: %s",
					name, a.acq.Owner, a.proc.id, a.acq.N, a.acq.Err))
			}
		}
	}
}

// The semaphore checker holds each admission to the capacity that can have
// been in force when it was made: an admission that takes the permits in
// use above a shrunk capacity is flagged; holders kept above it after a
// shrink, an admission after the capacity grew back, or after it may have
// lapsed (nobody held or asked for a permit for the retention), are not. A refusal
// with ErrInvalidOption passes only while the capacity can have been below
// the permits asked for.
func TestSemaphoreCheckerCapacityInForce(t *testing.T) {
	proc := &clientProc{id: 1}
	acq := func(n int, from, to int64, res string) *acquisition {
		return &acquisition{acq: record{K: "acq", Res: res, N: n, Call: from - 5, Ret: from}, proc: proc, rel: &record{K: "rel", Call: to}}
	}
	// 3 permits, shrunk to 1 over [1000, 1010], set back over [5000, 5010].
	caps := []capChange{{name: "s", value: 1, call: 1000, ret: 1010}, {name: "s", value: 3, call: 5000, ret: 5010}}
	for _, c := range []struct {
		what    string
		as      []*acquisition
		flagged bool
	}{
		{"2 held across the shrink", []*acquisition{acq(2, 100, 6000, "ok")}, false},
		{"1 more admitted while shrunk", []*acquisition{acq(2, 100, 6000, "ok"), acq(1, 2000, 3000, "ok")}, true},
		{"1 more admitted once grown back", []*acquisition{acq(2, 100, 6000, "ok"), acq(1, 5100, 5200, "ok")}, false},
		{"1 more admitted while the shrink was on its way", []*acquisition{acq(2, 100, 6000, "ok"), acq(1, 1005, 3000, "ok")}, false},
		{"2 admitted while shrunk", []*acquisition{acq(1, 100, 1200, "ok"), acq(2, 1500, 2500, "ok")}, true},
		{"2 admitted after the shrunk capacity lapsed", []*acquisition{acq(1, 100, 1200, "ok"), acq(2, 2000, 2500, "ok")}, false},
		{"2 refused as invalid while shrunk", []*acquisition{acq(2, 2000, 2000, "invalid")}, false},
		{"2 refused as invalid with no shrink", []*acquisition{acq(2, 7000, 7000, "invalid")}, true},
	} {
		t.Run(c.what, func(t *testing.T) {
			r := &chaosRun{t: t, names: []string{"s"}, sem: map[string]int{"s": 3}, caps: caps, retention: 500}
			rep := &chaosReport{}
			r.checkShared(rep, map[string][]*acquisition{"s": c.as}, 10_000)
			r.checkInvalid(rep, map[string][]*acquisition{"s": c.as})
			sm := rep.Shared.Sem
			if got := sm.Exceeded+sm.InvalidUnexplained > 0; got != c.flagged {
				t.Errorf("exceeded %d, invalid unexplained %d; want flagged %v: %v", sm.Exceeded, sm.InvalidUnexplained, c.flagged, sm.Detail)
			}
			if flagged := strings.Contains(strings.Join(rep.violations(), "\n"), "semaphores:"); flagged != c.flagged {
				t.Errorf("the run's verdicts %q; want a semaphore violation: %v", rep.violations(), c.flagged)
			}
		})
	}
}
