//go:build linux

package safety

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared kinds' checks: the read-write lock and the semaphore of the
// chaos run, checked from the clients' histories on the same validity
// intervals as the mutexes (checkOverlap): from the acquisition's reply to
// the earliest of its release call, its lease context's end and its
// process's kill, leaving out holders that were paused (SIGSTOP) and
// holds that lived through a Redis restart (data loss). The token order
// (checkTokens) is checked on them as on the mutexes; the porcupine mutex
// model and the loss-signal check are the mutexes' only (the MONITOR
// reconstruction does not follow shared holders: see monitor), and the
// fenced register is written by exclusive holders only: the mutexes' and
// the read-write locks' writers.

// semCapacity is the capacity of the chaos run's semaphores; each
// acquisition asks for 1 or 2 permits of it.
const semCapacity = 3

// kindOf names the kind of a lock name of the run: plain, fair, elect, rw
// or sem. The names of jobs run once are plain mutexes.
func (r *chaosRun) kindOf(name string) string {
	switch {
	case r.isFair(name):
		return "fair"
	case r.elect[name] != 0:
		return "elect"
	case r.rw[name] != 0:
		return "rw"
	case r.sem[name] != 0:
		return "sem"
	}
	return "plain"
}

// isShared says whether name is a read-write lock or a semaphore.
func (r *chaosRun) isShared(name string) bool { k := r.kindOf(name); return k == "rw" || k == "sem" }

// sharedNames is the set of the run's read-write locks and semaphores.
func (r *chaosRun) sharedNames() map[string]bool {
	out := map[string]bool{}
	for n := range r.rw {
		out[n] = true
	}
	for n := range r.sem {
		out[n] = true
	}
	return out
}

// sharedReport holds the read-write locks' and semaphores' figures.
type sharedReport struct {
	RW struct {
		Names                                               []string
		Acquisitions, Readers, Writers, Try                 int // successful: of each side, by TryLock/TryRLock
		Intervals, Checked, ExcludedPaused, ExcludedRestart int
		// WriterOverlaps counts the pairs of checked intervals of a name,
		// one of them a writer's, that overlap: must be 0.
		WriterOverlaps int
		// WriterOverlapsExcluded counts those that involve an excluded
		// interval (a paused holder, a restart): expected, not failed.
		WriterOverlapsExcluded int
		// ReaderOverlaps counts the pairs of checked readers' intervals
		// that overlap: readers did share the lock.
		ReaderOverlaps int
		MaxReaders     int // most checked readers' intervals open at once
		Detail         []string
	}
	Sem struct {
		Names                                               []string
		Capacity                                            int
		Acquisitions, Try                                   int
		ByPermits                                           map[string]int // successful acquisitions by permits asked for
		Intervals, Checked, ExcludedPaused, ExcludedRestart int
		// Exceeded counts the acquisitions whose checked interval began
		// while the permits of the checked intervals open then, its own
		// included, added up to more than the capacity that can have been
		// in force at its admission (capacityBound): must be 0.
		Exceeded int
		// Shrunk counts the checked acquisitions admitted while the
		// capacity was shrunk (a set-permits fault): checked against the
		// smaller capacity, unless it may have lapsed since (Lapsed of
		// them: nobody held or asked for a permit for the retention).
		Shrunk, Lapsed int
		// InvalidExplained counts the acquisitions refused with
		// ErrInvalidOption while the capacity was shrunk below their
		// permits; InvalidUnexplained those refused otherwise: must be 0.
		InvalidExplained, InvalidUnexplained int
		MaxInUse                             int // most permits of checked intervals open at once: at most Capacity
		// MaxInUseAll is MaxInUse with the excluded intervals counted
		// too (it may exceed the capacity: a paused holder believes it
		// holds permits the server has given to others).
		MaxInUseAll int
		// LeftInUse is the permits the semaphores' lock hashes said were
		// in use once the clients had closed and the orphan check had
		// awaited the leases: must be 0.
		LeftInUse int
		Detail    []string
	}
}

// sharedInterval is the validity interval of one successful acquisition of
// a shared lock.
type sharedInterval struct {
	from, to int64
	a        *acquisition
	excluded bool
}

// sharedIntervals returns the validity intervals of the successful
// acquisitions of a name, sorted by start, with the exclusions of
// checkOverlap, and counts them.
func (r *chaosRun) sharedIntervals(as []*acquisition, runEnd int64, intervals, checked, paused, restart *int) []sharedInterval {
	var ivs []sharedInterval
	for _, a := range as {
		if !a.ok() {
			continue
		}
		x := sharedInterval{from: a.acq.Ret, to: a.validEnd(runEnd), a: a}
		*intervals++
		switch {
		case a.proc.pausedDuring(a.acq.Call, x.to):
			x.excluded = true
			*paused++
		case r.restartDuring(a.acq.Call, x.to):
			x.excluded = true
			*restart++
		default:
			*checked++
		}
		ivs = append(ivs, x)
	}
	slices.SortFunc(ivs, func(a, b sharedInterval) int { return cmp.Compare(a.from, b.from) })
	return ivs
}

// checkShared runs the read-write locks' and semaphores' checks.
//
// Read-write lock: a writer holds alone. No validity interval of a writer
// overlaps any other interval (a reader's or a writer's) of the same name;
// readers' intervals may overlap each other, and how often they did is
// counted, to show that readers did share the lock. The interval of a
// writer that downgraded (took the read side with its write lease's
// context) ends at its write lease's release call, where its exclusive
// hold may end.
//
// Semaphore: when an acquisition's interval begins, the permits of the
// checked intervals open then (its own included) add up to at most the
// capacity that can have been in force at its admission, which the
// set-permits fault changes (capacityBound, from the call of the
// acquisition to its reply: the admission came in between, after every
// other open interval's). A shrink revokes nothing, so permits in use above
// a new, smaller capacity are not flagged by themselves: only an admission
// that took them there is.
//
// Both rules are asserted over the checked intervals only; the overlaps
// that involve an excluded one are counted.
func (r *chaosRun) checkShared(rep *chaosReport, byName map[string][]*acquisition, runEnd int64) {
	s := &rep.Shared
	s.Sem.ByPermits = map[string]int{}
	s.Sem.Capacity = semCapacity
	for _, name := range r.names {
		as := byName[name]
		switch r.kindOf(name) {
		case "rw":
			rw := &s.RW
			rw.Names = append(rw.Names, name)
			for _, a := range as {
				if a.ok() {
					rw.Acquisitions++
					if a.acq.Try {
						rw.Try++
					}
					if a.acq.Mode == "w" {
						rw.Writers++
					} else {
						rw.Readers++
					}
				}
			}
			ivs := r.sharedIntervals(as, runEnd, &rw.Intervals, &rw.Checked, &rw.ExcludedPaused, &rw.ExcludedRestart)
			var open []int64 // ends of the checked readers' intervals open at the current start
			for i, x := range ivs {
				if !x.excluded && x.a.acq.Mode == "r" {
					open = slices.DeleteFunc(open, func(end int64) bool { return end <= x.from })
					open = append(open, x.to)
					rw.MaxReaders = max(rw.MaxReaders, len(open))
				}
				for _, y := range ivs[i+1:] {
					if y.from >= x.to {
						break
					}
					writer := x.a.acq.Mode == "w" || y.a.acq.Mode == "w"
					switch {
					case !writer && !x.excluded && !y.excluded:
						rw.ReaderOverlaps++
					case !writer:
					case x.excluded || y.excluded:
						rw.WriterOverlapsExcluded++
					default:
						rw.WriterOverlaps++
						if len(rw.Detail) < 10 {
							rw.Detail = append(rw.Detail, fmt.Sprintf("%s: %s of owner %d (client %d, token %d) [%d, %d] overlaps %s of owner %d (client %d, token %d) [%d, %d] by %v",
								name, x.a.acq.Mode, x.a.acq.Owner, x.a.proc.id, x.a.acq.Token, x.from, x.to,
								y.a.acq.Mode, y.a.acq.Owner, y.a.proc.id, y.a.acq.Token, y.from, y.to, time.Duration(min(x.to, y.to)-y.from)))
						}
					}
				}
			}
		case "sem":
			sm := &s.Sem
			sm.Names = append(sm.Names, name)
			for _, a := range as {
				if a.ok() {
					sm.Acquisitions++
					sm.ByPermits[strconv.Itoa(a.acq.N)]++
					if a.acq.Try {
						sm.Try++
					}
				}
			}
			ivs := r.sharedIntervals(as, runEnd, &sm.Intervals, &sm.Checked, &sm.ExcludedPaused, &sm.ExcludedRestart)
			lapses := r.capacityLapses(name, as, runEnd)
			// At each start, the permits of the intervals still open
			// (an interval that ends where another starts is closed).
			var open, all []sharedInterval
			for _, x := range ivs {
				gone := func(y sharedInterval) bool { return y.to <= x.from }
				open = slices.DeleteFunc(open, gone)
				all = slices.DeleteFunc(all, gone)
				all = append(all, x)
				sm.MaxInUseAll = max(sm.MaxInUseAll, permits(all))
				if x.excluded {
					continue
				}
				open = append(open, x)
				inUse := permits(open)
				sm.MaxInUse = max(sm.MaxInUse, inUse)
				capacity := r.capacityBound(name, lapses, x.a.acq.Call, x.from)
				if strict := r.capacityBound(name, nil, x.a.acq.Call, x.from); strict < r.sem[name] {
					sm.Shrunk++
					if capacity > strict {
						sm.Lapsed++
					}
				}
				if inUse > capacity {
					sm.Exceeded++
					if len(sm.Detail) < 10 {
						var who []string
						for _, y := range open {
							who = append(who, fmt.Sprintf("owner %d (client %d, token %d, %d permits) [%d, %d]", y.a.acq.Owner, y.a.proc.id, y.a.acq.Token, y.a.acq.N, y.from, y.to))
						}
						sm.Detail = append(sm.Detail, fmt.Sprintf("%s: %d permits of %d held at %d: %v", name, inUse, capacity, x.from, who))
					}
				}
			}
		}
	}
}

func permits(ivs []sharedInterval) int {
	n := 0
	for _, x := range ivs {
		n += x.a.acq.N
	}
	return n
}

// checkSemaphoresDrained reads, once the clients have closed and the
// orphan check has awaited every lease, the permits each semaphore's lock
// hash says are in use: none may be left (a leaked permit would keep the
// hash, and block the capacity, for good).
func (r *chaosRun) checkSemaphoresDrained(rep *chaosReport) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name := range r.sem {
		key := r.key(name)
		used, err := r.ctl.HGet(ctx, key, "used").Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			rep.Shared.Sem.Detail = append(rep.Shared.Sem.Detail, fmt.Sprintf("%s: %v", name, err))
			rep.Shared.Sem.LeftInUse++
			continue
		}
		holders, _ := r.ctl.ZCard(ctx, key+":h").Result()
		if used > 0 || holders > 0 {
			rep.Shared.Sem.LeftInUse += max(used, 1)
			rep.Shared.Sem.Detail = append(rep.Shared.Sem.Detail, fmt.Sprintf("%s: %d permits of %d holders left after the run", name, used, holders))
		}
	}
}

// The shared checkers flag a writer that overlaps a reader and a
// semaphore over its capacity, and only those: readers that overlap, and
// holders whose intervals only touch, pass; an overlap with a paused
// holder is counted, not failed.
func TestSharedCheckerFlagsOverlaps(t *testing.T) {
	proc, paused := &clientProc{id: 1}, &clientProc{id: 2, pauses: [][2]int64{{0, 100}}}
	acq := func(p *clientProc, mode string, n int, from, to int64) *acquisition {
		return &acquisition{acq: record{K: "acq", Res: "ok", Mode: mode, N: n, Call: from - 1, Ret: from}, proc: p, rel: &record{K: "rel", Call: to}}
	}
	for _, c := range []struct {
		what     string
		as       []*acquisition
		flagged  bool
		excluded bool
	}{
		{"readers overlap", []*acquisition{acq(proc, "r", 0, 10, 30), acq(proc, "r", 0, 20, 40)}, false, false},
		{"a writer after a reader", []*acquisition{acq(proc, "r", 0, 10, 30), acq(proc, "w", 0, 30, 40)}, false, false},
		{"a writer inside a reader", []*acquisition{acq(proc, "r", 0, 10, 30), acq(proc, "w", 0, 20, 25)}, true, false},
		{"a reader inside a writer", []*acquisition{acq(proc, "w", 0, 10, 30), acq(proc, "r", 0, 29, 50)}, true, false},
		{"a writer over a paused reader", []*acquisition{acq(paused, "r", 0, 10, 30), acq(proc, "w", 0, 20, 25)}, false, true},
	} {
		t.Run("rw/"+c.what, func(t *testing.T) {
			r := &chaosRun{t: t, names: []string{"rw"}, rw: map[string]time.Duration{"rw": time.Second}}
			rep := &chaosReport{}
			r.checkShared(rep, map[string][]*acquisition{"rw": c.as}, 1000)
			rw := rep.Shared.RW
			if got := rw.WriterOverlaps > 0; got != c.flagged || (rw.WriterOverlapsExcluded > 0) != c.excluded {
				t.Errorf("writer overlaps %d, excluded %d; want flagged %v, excluded %v", rw.WriterOverlaps, rw.WriterOverlapsExcluded, c.flagged, c.excluded)
			}
			if flagged := len(rep.violations()) > 1; flagged != c.flagged { // "no acquisition succeeded" is always there
				t.Errorf("verdicts %q; want flagged %v", rep.violations(), c.flagged)
			}
		})
	}
	for _, c := range []struct {
		what    string
		as      []*acquisition
		flagged bool
		max     int
	}{
		{"2+1 of 3", []*acquisition{acq(proc, "", 2, 10, 30), acq(proc, "", 1, 20, 40)}, false, 3},
		{"2+2 one after the other", []*acquisition{acq(proc, "", 2, 10, 30), acq(proc, "", 2, 30, 40)}, false, 2},
		{"2+2 of 3", []*acquisition{acq(proc, "", 2, 10, 30), acq(proc, "", 2, 20, 40)}, true, 4},
		{"2+2 of 3, one paused", []*acquisition{acq(paused, "", 2, 10, 30), acq(proc, "", 2, 20, 40)}, false, 2},
	} {
		t.Run("sem/"+c.what, func(t *testing.T) {
			r := &chaosRun{t: t, names: []string{"sem"}, sem: map[string]int{"sem": 3}}
			rep := &chaosReport{}
			r.checkShared(rep, map[string][]*acquisition{"sem": c.as}, 1000)
			sm := rep.Shared.Sem
			if got := sm.Exceeded > 0; got != c.flagged || sm.MaxInUse != c.max {
				t.Errorf("exceeded %d, max in use %d; want flagged %v, max %d", sm.Exceeded, sm.MaxInUse, c.flagged, c.max)
			}
			if flagged := len(rep.violations()) > 1; flagged != c.flagged {
				t.Errorf("verdicts %q; want flagged %v", rep.violations(), c.flagged)
			}
		})
	}
}
