//go:build linux

package safety

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The give-up check: nothing of an acquisition of a queued kind (a fair
// mutex, an election, a read-write lock, a semaphore) whose call returned
// an error is left once it has returned. The engine abandons the owner of
// every attempt whose outcome it does not use, and a call that returns an
// error waits for that clean-up (within five seconds, longer than any
// fault of the run): its place leaves the queue, and a grant that raced
// the cancellation goes on to the next in line, before the call returns.
// So, from the server's own timeline (MONITOR), after the call returned:
//
//   - no place of its owners is live in a queue (still there, its
//     deadline not passed), and none is made;
//   - none of its owners is made the holder, by anyone's script (a grant
//     inside another owner's release, or the owner's own refresh).
//
// An owner id is tied to the call that sent it by the scriptRecorder: to
// the acquisition whose number the caller's context carried, when go-redis
// handed the hook the caller's context; otherwise to the acquisitions of
// the same name in the same process that were under way when its request
// was sent, and only if every one of them returned an error (the owner was
// then theirs, whichever it was). Owners of a process killed before it
// could record its calls are left out, unless tied by number.
//
// A call that Close cut short (ErrClosed) leaves its clean-up to Close,
// which abandons the owners still waiting and waits for that: for it, the
// check starts when Close returned.
//
// Left out, counted: events after a Redis restart (which loses the
// abandonment marks that refuse an abandoned owner's late requests),
// calls of a process whose Close returned an error (Close reports the
// clean-ups it could not confirm), and owners whose clean-up failed
// before the call returned (an abf record: a call returns once the
// clean-up's first attempt has ended, confirmed or not, and the clean-up
// goes on in the background, as documented). Excused, counted: a grant or
// a place after the return of an owner whose clean-up was sent at least
// giveUpWait before the return and not confirmed by it (the call stopped
// waiting for it, as documented; it frees what the owner has when it
// lands).

// giveUpWait is how long a call that gives up waits for the first
// attempt of its clean-up, at most, before it returns (internal/engine's
// giveUpWait); giveUpSlack covers the time between the start of that wait
// and the sending of the clean-up, on another goroutine.
const (
	giveUpWait  = 5 * time.Second
	giveUpSlack = 100 * time.Millisecond
)

// giveUpMargin covers the clocks' granularity: the server's µs timestamps
// in MONITOR, the clients' readings of CLOCK_REALTIME (one machine).
const giveUpMargin = 5 * time.Millisecond

// giveUpReport holds the give-up check's figures and verdicts.
type giveUpReport struct {
	Owners           int            // owners of queued acquisitions the clients recorded
	Unlinked         int            // tied to no call of the history (a killed process, a re-entry)
	OfSuccesses      int            // tied to a call that succeeded: not checked here
	Checked          map[string]int // owners of calls that returned an error, by kind
	RacedGrants      int            // grants to them made before the call returned (passed on by the clean-up)
	GrantedAfter     int            // a grant or take after the call returned: must be 0
	PlacesLeft       int            // a place live (or made) after the call returned: must be 0
	ByClose          int            // calls cut short by a nil Close (ErrClosed): checked from Close's return
	ExcludedRestart  int
	ExcludedClose    int // calls of a process whose Close returned an error
	ExcludedCleanup  int // owners whose clean-up failed before the call returned
	Unconfirmed      int // grants and places after the return of owners whose clean-up was sent and not confirmed by it
	Detail           []string
	GrantedAfterKind map[string]int
}

func (g *giveUpReport) note(format string, args ...any) {
	if len(g.Detail) < 10 {
		g.Detail = append(g.Detail, fmt.Sprintf(format, args...))
	}
}

// ownerEvents is what the server did with one owner id: made it the
// holder (a tenure of a fair mutex or an election, an admission to a
// shared lock), and its places in queues.
type ownerEvents struct {
	starts []ownerStart
	places []place
}

type ownerStart struct {
	name    string
	at      int64 // CLOCK_REALTIME ns: the HSET that made it the holder
	by      string
	granted bool
	token   uint64
}

// ownerTimeline collects, by placeID, every owner's starts and places on
// the servers of mon.
func ownerTimeline(mon monitors, key2name func(string) string) map[string]*ownerEvents {
	out := map[string]*ownerEvents{}
	of := func(owner string) *ownerEvents {
		id := placeID(owner)
		if out[id] == nil {
			out[id] = &ownerEvents{}
		}
		return out[id]
	}
	mon.each(func(key string, token uint64, t tenure) {
		if t.Fair {
			e := of(t.Owner)
			e.starts = append(e.starts, ownerStart{key2name(key), t.Start, t.By, t.Granted, token})
		}
	})
	for _, a := range mon.admissions() {
		e := of(a.Owner)
		e.starts = append(e.starts, ownerStart{a.Name, a.Start, a.By, a.Granted, a.Token})
	}
	places, _, _ := mon.fair()
	for _, p := range places {
		e := of(p.Owner)
		e.places = append(e.places, p)
	}
	return out
}

// checkGiveUps runs the give-up check on the enq records of every process
// (enqs), the acquisitions of the history (byName) and the servers'
// timelines. offset is CLOCK_REALTIME - CLOCK_MONOTONIC.
func (r *chaosRun) checkGiveUps(rep *chaosReport, enqs []record, byName map[string][]*acquisition, closes map[*clientProc]record, mon monitors, offset int64) {
	g := &rep.GiveUp
	g.Checked, g.GrantedAfterKind = map[string]int{}, map[string]int{}
	procs := map[int]*clientProc{}
	for _, p := range r.procs {
		procs[p.id] = p
	}
	type procName struct {
		proc int
		name string
	}
	calls := map[procName][]*acquisition{}
	byOwner := map[int64]*acquisition{}
	for name, as := range byName {
		for _, a := range as {
			k := procName{a.proc.id, name}
			calls[k] = append(calls[k], a)
			byOwner[a.acq.Owner] = a
		}
	}
	timeline := ownerTimeline(mon, func(key string) string {
		name, _, _ := r.splitKey(key)
		return name
	})
	// The first record of each owner: its enqueue (later ones are
	// re-entries of a holder).
	first := map[string]record{}
	// Wall times of each owner's abandon.lua calls: sent, failed,
	// confirmed.
	sentCleanup, failedCleanup, confirmedCleanup := map[string][]int64{}, map[string][]int64{}, map[string][]int64{}
	for _, e := range enqs {
		switch e.K {
		case "abs":
			sentCleanup[e.Place] = append(sentCleanup[e.Place], e.Wall)
			continue
		case "abf":
			failedCleanup[e.Place] = append(failedCleanup[e.Place], e.Wall)
			continue
		case "abok":
			confirmedCleanup[e.Place] = append(confirmedCleanup[e.Place], e.Wall)
			continue
		}
		if e.Reenter {
			continue
		}
		if f, ok := first[e.Place]; !ok || e.Call < f.Call {
			first[e.Place] = e
		}
	}
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := first[id]
		g.Owners++
		p := procs[e.Client]
		var cands []*acquisition
		switch {
		case e.Owner != 0:
			if a := byOwner[e.Owner]; a != nil {
				cands = append(cands, a)
			}
		case p != nil && p.killAt == 0:
			for _, a := range calls[procName{p.id, e.Name}] {
				if a.acq.Call <= e.Call && e.Call <= a.acq.Ret {
					cands = append(cands, a)
				}
			}
		}
		if len(cands) == 0 {
			g.Unlinked++
			continue
		}
		if slices.ContainsFunc(cands, (*acquisition).ok) {
			g.OfSuccesses++
			continue
		}
		from := slices.MinFunc(cands, func(a, b *acquisition) int { return cmp.Compare(a.acq.Call, b.acq.Call) }).acq.Call
		last := slices.MaxFunc(cands, func(a, b *acquisition) int { return cmp.Compare(a.acq.Ret, b.acq.Ret) })
		ret, retWall := last.acq.Ret, last.acq.Wall
		c, closed := closes[last.proc]
		switch {
		case closed && c.Res != "ok" && c.Call <= ret:
			g.ExcludedClose++
			continue
		case last.acq.Res == "closed":
			// Cut short by Close, which abandons its owners and waits
			// for that: nothing of it may be left once Close returned.
			if !closed {
				g.ExcludedClose++
				continue
			}
			retWall = max(retWall, c.Wall)
			g.ByClose++
		}
		if slices.ContainsFunc(failedCleanup[id], func(at int64) bool { return at <= retWall+int64(giveUpMargin) }) {
			g.ExcludedCleanup++
			continue
		}
		kind := r.kindOf(e.Name)
		g.Checked[kind]++
		ev := timeline[id]
		if ev == nil {
			continue
		}
		after := retWall + int64(giveUpMargin)
		// The call returned after giveUpWait without the confirmation of
		// its clean-up, which goes on: what the owner has after the
		// return is excused (it is freed when the clean-up lands). A
		// call that returned sooner, unconfirmed, is checked.
		cleanups := func(id string) string {
			rel := func(ats []int64) []time.Duration {
				out := make([]time.Duration, len(ats))
				for i, at := range ats {
					out[i] = time.Duration(at - retWall)
				}
				return out
			}
			return fmt.Sprintf("its clean-ups, from the return: sent %v, confirmed %v, failed %v",
				rel(sentCleanup[id]), rel(confirmedCleanup[id]), rel(failedCleanup[id]))
		}
		waitedOut := func(at int64) bool { return retWall-at >= int64(giveUpWait-giveUpSlack) }
		unconfirmed := slices.ContainsFunc(sentCleanup[id], waitedOut) &&
			!slices.ContainsFunc(confirmedCleanup[id], func(at int64) bool { return at <= after })
		for _, s := range ev.starts {
			switch {
			case s.at <= after:
				if s.granted {
					g.RacedGrants++
				}
			case r.restartDuring(from, s.at-offset):
				g.ExcludedRestart++
			case unconfirmed:
				g.Unconfirmed++
			default:
				g.GrantedAfter++
				g.GrantedAfterKind[kind]++
				g.note("%s: owner %s of client %d's call (%s, returned %s at %d) made the holder (token %d) by %s, granted %v, %v after the call returned; %s",
					e.Name, id, e.Client, describeCall(cands), last.acq.Res, retWall, s.token, s.by, s.granted, time.Duration(s.at-retWall), cleanups(id))
			}
		}
		for _, pl := range ev.places {
			live := pl.How != "cut" && pl.Deadline > after && (pl.Ended == 0 || pl.Ended > after)
			switch {
			case !live:
			case r.restartDuring(from, max(pl.Added, after)-offset):
				g.ExcludedRestart++
			case unconfirmed:
				g.Unconfirmed++
			default:
				g.PlacesLeft++
				ended := "still there at the end of the feed"
				if pl.Ended > 0 {
					ended = fmt.Sprintf("%s by %s %v after the call returned", pl.How, pl.By, time.Duration(pl.Ended-retWall))
				}
				g.note("%s: place of owner %s of client %d's call (%s, returned %s at %d), made at %d, live after the call returned: %s; %s",
					e.Name, id, e.Client, describeCall(cands), last.acq.Res, retWall, pl.Added, ended, cleanups(id))
			}
		}
	}
}

// describeCall names the calls an owner may belong to, for messages.
func describeCall(as []*acquisition) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += " or "
		}
		s += fmt.Sprintf("owner %d, %s", a.acq.Owner, a.acq.Err)
	}
	return s
}

// The give-up checker flags an owner of a failed call that is granted the
// lock, or keeps a place, after the call returned, and only that: a grant
// that raced the call and came before it returned, a place gone by then
// and an owner of a successful call pass.
func TestGiveUpCheckerFlags(t *testing.T) {
	const ms = int64(time.Millisecond)
	ret := 10_000 * ms // the call's return, on both clocks (offset 0)
	for _, c := range []struct {
		what     string
		res      string // the call's outcome
		grantAt  int64  // 0: no grant
		placeEnd int64  // when its place left the queue; 0: still there
		flagged  bool
		abfAt    int64 // when a clean-up of the owner failed; 0: none did
		absAt    int64 // when a clean-up of the owner was sent; 0: none was
		abokAt   int64 // when a clean-up of the owner was confirmed; 0: none was
	}{
		{"a grant before the return", "ctx", ret - ms, ret - ms, false, 0, 0, 0},
		{"a grant after the return", "ctx", ret + 20*ms, ret + 20*ms, true, 0, 0, 0},
		{"a place left after the return", "ctx", 0, ret + 20*ms, true, 0, 0, 0},
		{"a place gone before the return", "ctx", 0, ret - ms, false, 0, 0, 0},
		{"the owner of a successful call", "ok", ret + 20*ms, ret + 20*ms, false, 0, 0, 0},
		{"a place left after the return, its clean-up failed before it", "ctx", 0, ret + 20*ms, false, ret - ms, 0, 0},
		{"a place left after the return, its clean-up failed after it", "ctx", 0, ret + 20*ms, true, ret + 10*ms, 0, 0},
		{"a grant after the return, its clean-up sent giveUpWait before it and unconfirmed", "ctx", ret + 20*ms, ret + 20*ms, false, 0, ret - giveUpWait.Nanoseconds(), 0},
		{"a grant after the return, its clean-up sent giveUpWait before it and confirmed", "ctx", ret + 20*ms, ret + 20*ms, true, 0, ret - giveUpWait.Nanoseconds(), ret - ms},
		{"a grant after the return, its clean-up sent just before it and unconfirmed", "ctx", ret + 20*ms, ret + 20*ms, true, 0, ret - 10*ms, 0},
	} {
		t.Run(c.what, func(t *testing.T) {
			r := &chaosRun{t: t, lease: time.Second, prefix: "distlock:", names: []string{"f"}, fair: map[string]time.Duration{"f": time.Second}}
			p := &clientProc{id: 1}
			r.procs = []*clientProc{p}
			a := &acquisition{acq: record{K: "acq", Owner: 7, Name: "f", Call: ret - 6000*ms, Ret: ret, Wall: ret, Res: c.res}, proc: p}
			enq := record{K: "enq", Client: 1, Owner: 7, Name: "f", Place: placeID("X"), Call: ret - 5900*ms, Res: "queued"}
			m := newMonitor("", "distlock:")
			pl := &place{Name: "f", Owner: "X", Added: ret - 5900*ms, Deadline: ret + time.Second.Nanoseconds(), Ended: c.placeEnd, How: "dropped"}
			if c.grantAt != 0 {
				m.tenures[tenureKey{"distlock:{f}", 5}] = &tenure{Owner: "X", Start: c.grantAt, Fair: true, Kind: "fair", Granted: true, By: "release"}
				pl.How = "granted"
			}
			m.allPlace = []*place{pl}
			rep := &chaosReport{}
			recs := []record{enq}
			if c.abfAt != 0 {
				recs = append(recs, record{K: "abf", Client: 1, Name: "f", Place: placeID("X"), Wall: c.abfAt})
			}
			if c.absAt != 0 {
				recs = append(recs, record{K: "abs", Client: 1, Name: "f", Place: placeID("X"), Wall: c.absAt})
			}
			if c.abokAt != 0 {
				recs = append(recs, record{K: "abok", Client: 1, Name: "f", Place: placeID("X"), Wall: c.abokAt})
			}
			r.checkGiveUps(rep, recs, map[string][]*acquisition{"f": {a}}, nil, monitors{m}, 0)
			g := rep.GiveUp
			if got := g.GrantedAfter+g.PlacesLeft > 0; got != c.flagged {
				t.Errorf("granted after %d, places left %d (checked %v); want flagged %v: %v", g.GrantedAfter, g.PlacesLeft, g.Checked, c.flagged, g.Detail)
			}
			if flagged := strings.Contains(strings.Join(rep.violations(), "\n"), "give-ups:"); flagged != c.flagged {
				t.Errorf("the run's verdicts %q; want a give-up violation: %v", rep.violations(), c.flagged)
			}
		})
	}
}
