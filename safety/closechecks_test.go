//go:build linux

package safety

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// closeReport holds the figures and verdicts of Close under load.
type closeReport struct {
	Calls, Ok int
	Outcomes  map[string]int
	// Delayed counts the calls made with the closing client's replies,
	// or requests, delayed (toxiproxy latency); WithHolders the calls made while the
	// client held a lock of each queued kind (queueBeforeClose), by kind;
	// WithWaiters the calls made once a waiter of each kind was seen
	// queued, and WithInflight those made right after a call of each kind
	// that may queue was sent (its reply on its way: Close racing a
	// queued acquisition); AllKinds the calls made with either of every
	// queued kind of the run.
	Delayed      int
	WithHolders  map[string]int
	WithWaiters  map[string]int
	WithInflight map[string]int
	AllKinds     int
	Tenures      int // tenures of mutexes of the closing process on the server, checked
	Admissions   int // holders of shared locks of the closing process, checked
	Places       int // places in queues of the closing process, checked
	// Outlived counts the tenures and holders begun before a nil Close
	// that were still on the server when Close returned: must be 0.
	Outlived int
	// PlacesLeft counts the places made before a nil Close that were still
	// live in their queue when it returned: must be 0.
	PlacesLeft int
	// GrantedAfter counts the owners of the process made holders after a
	// nil Close returned by a grant (another owner's script) or their own
	// refresh, from a place made before it returned: must be 0.
	GrantedAfter int
	// LateStart counts the tenures and holders begun after Close returned
	// by an acquisition script of their own owner, or granted to a place
	// made after it: a late copy of a retried acquisition (the documented
	// residual, which ends with its lease or its place's queue timeout).
	LateStart int
	Each      []string // each call: the fault, what was queued, the outcome
	Detail    []string
}

func (c *closeReport) note(format string, args ...any) {
	if len(c.Detail) < 10 {
		c.Detail = append(c.Detail, fmt.Sprintf(format, args...))
	}
}

// checkClose checks that a Close that returned nil under load left nothing
// of its process on the server, and that nothing was given to it after:
//
//   - every tenure (of a plain or fair mutex, an election) and every
//     holder of a shared lock that MONITOR saw with the process's pid (the
//     scripts write it into the lock hash) and that began before Close
//     returned had ended (deleted, or past its expiry) by then;
//   - no place of the process (its pid is in the place's record) was live
//     in any queue when Close returned: Close abandons its waiters;
//   - no owner of the process was made a holder after Close returned by a
//     grant inside another owner's script, or by its own refresh, from a
//     place made before Close returned.
//
// A tenure or holder begun after Close returned by its owner's own
// acquisition script, or granted to a place made after it, can only come
// from a late copy of an acquisition that go-redis retried and that
// succeeded, released since (the residual limit in the engine's package
// documentation: a ghost for one lease, or one queue timeout): it is
// counted, not failed; checkOrphans awaits its keys.
func (r *chaosRun) checkClose(rep *chaosReport, closes map[*clientProc]record, mon monitors) {
	c := &rep.Close
	c.WithHolders, c.WithWaiters, c.WithInflight = map[string]int{}, map[string]int{}, map[string]int{}
	var queuedKinds []string
	for _, n := range r.names {
		if k := r.kindOf(n); k != "plain" && !slices.Contains(queuedKinds, k) {
			queuedKinds = append(queuedKinds, k)
		}
	}
	for _, f := range r.faults {
		if f.Kind == faultClientClose && strings.Contains(f.Detail, "delayed") {
			c.Delayed++
		}
	}
	pids := map[int]record{}
	for p, rec := range closes {
		c.Calls++
		c.Outcomes[rec.Res]++
		for _, k := range rec.Held {
			c.WithHolders[k]++
		}
		for _, k := range rec.Kinds {
			if rec.Inflight {
				c.WithInflight[k]++
			} else {
				c.WithWaiters[k]++
			}
		}
		if len(queuedKinds) > 0 && len(rec.Kinds) == len(queuedKinds) {
			c.AllKinds++
		}
		if rec.Res == "other" && len(rep.Untyped) < 10 {
			rep.Untyped = append(rep.Untyped, "close: "+rec.Err)
		}
		how := "replies on time"
		for _, f := range r.faults {
			if f.Kind == faultClientClose && f.Client == rec.Client && f.Detail != "" {
				how = f.Detail
			}
		}
		queued := "waiting"
		if rec.Inflight {
			queued = "in flight"
		}
		c.Each = append(c.Each, fmt.Sprintf("client %d (%s; holders %v, %s %v): %s after %v", rec.Client, how, rec.Held, queued, rec.Kinds,
			rec.Res, time.Duration(rec.Ret-rec.Call).Round(time.Millisecond)))
		if rec.Res == "ok" {
			c.Ok++
			pids[p.cmd.Process.Pid] = rec
			continue
		}
		c.note("client %d (%s): Close returned after %v: %s", rec.Client, how, time.Duration(rec.Ret-rec.Call), rec.Err)
	}
	places, _, _ := mon.fair()
	placeOf := map[placeKey]place{}
	for _, p := range places {
		if _, ok := pids[p.PID]; !ok || p.How == "cut" {
			continue
		}
		placeOf[placeKey{p.Name, p.Owner}] = p
		rec := pids[p.PID]
		c.Places++
		if p.Added <= rec.Wall && p.Deadline > rec.Wall && (p.Ended == 0 || p.Ended > rec.Wall) {
			c.PlacesLeft++
			c.note("%s: place %s of client %d (made by %s) still in the queue %v after Close returned nil (%s by %s)",
				p.Name, placeID(p.Owner), rec.Client, p.By, time.Duration(max(p.Ended, p.Deadline)-rec.Wall), p.How, p.By)
		}
	}
	// late classifies a holder begun after Close returned: a grant to a
	// place made before it, or a take by the owner's own refresh, is
	// not allowed; the rest are late copies of acquisitions.
	late := func(rec record, name, owner, by string, granted bool, what string) {
		p, placed := placeOf[placeKey{name, owner}]
		if (granted || by == "refresh") && (!placed || p.Added <= rec.Wall) {
			c.GrantedAfter++
			c.note("%s: %s of client %d begun by %s (granted %v) after Close returned nil", name, what, rec.Client, by, granted)
			return
		}
		c.LateStart++
	}
	mon.each(func(key string, token uint64, t tenure) {
		rec, ok := pids[t.PID]
		if !ok || t.Cut {
			return
		}
		c.Tenures++
		name, _, _ := r.splitKey(key)
		switch {
		case t.Start > rec.Wall:
			late(rec, name, t.Owner, t.By, t.Granted, fmt.Sprintf("token %d", token))
		case t.end() > rec.Wall:
			c.Outlived++
			c.note("%s token %d of client %d: on the server until %v after Close returned nil (%+v)",
				key, token, rec.Client, time.Duration(t.end()-rec.Wall), t)
		}
	})
	for _, a := range mon.admissions() {
		rec, ok := pids[a.PID]
		if !ok || a.Cut {
			continue
		}
		c.Admissions++
		switch {
		case a.Start > rec.Wall:
			late(rec, a.Name, a.Owner, a.By, a.Granted, fmt.Sprintf("holder with token %d", a.Token))
		case a.end() > rec.Wall:
			c.Outlived++
			c.note("%s: holder with token %d of client %d held until %v after Close returned nil (%+v)",
				a.Name, a.Token, rec.Client, time.Duration(a.end()-rec.Wall), a)
		}
	}
}

// The Close checker flags what a nil Close left of its process (a
// mutex's tenure, a shared lock's holder, a place) and a grant to it after
// Close returned from a place made before, and only those: what ended
// before Close returned, and a late copy of an acquisition of the owner's
// own, pass.
func TestCloseCheckerFlags(t *testing.T) {
	const ms = int64(time.Millisecond)
	ret := 10_000 * ms // Close's return (wall)
	for _, c := range []struct {
		what    string
		tenure  *tenure
		holder  *admission
		place   *place
		flagged bool
	}{
		{"a tenure ended before", &tenure{Owner: "A", PID: 42, Start: ret - 100*ms, ExpBase: ret - 100*ms, ExpMs: 1000, DelAt: ret - ms}, nil, nil, false},
		{"a tenure still held", &tenure{Owner: "A", PID: 42, Start: ret - 100*ms, ExpBase: ret - 100*ms, ExpMs: 1000}, nil, nil, true},
		{"a holder still held", nil, &admission{Name: "s", Owner: "A", PID: 42, Start: ret - 100*ms, Ends: ret + 900*ms}, nil, true},
		{"a holder dropped before", nil, &admission{Name: "s", Owner: "A", PID: 42, Start: ret - 100*ms, Ends: ret + 900*ms, Dropped: ret - ms}, nil, false},
		{"a place still queued", nil, nil, &place{Name: "f", Owner: "A", PID: 42, Added: ret - 100*ms, Deadline: ret + 900*ms}, true},
		{"a place dropped before", nil, nil, &place{Name: "f", Owner: "A", PID: 42, Added: ret - 100*ms, Deadline: ret + 900*ms, Ended: ret - ms, How: "dropped"}, false},
		{"a grant after, to a place made before", nil, &admission{Name: "s", Owner: "A", PID: 42, Start: ret + 10*ms, Ends: ret + 900*ms, By: "release", Granted: true},
			&place{Name: "s", Owner: "A", PID: 42, Added: ret - 100*ms, Deadline: ret + 900*ms, Ended: ret + 10*ms, How: "granted"}, true},
		{"a late copy of its own acquisition", &tenure{Owner: "A", PID: 42, Start: ret + 10*ms, ExpBase: ret + 10*ms, ExpMs: 1000, By: "fair_acquire"}, nil, nil, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			r := &chaosRun{t: t, lease: time.Second, prefix: "distlock:"}
			p := &clientProc{id: 1, cmd: &exec.Cmd{Process: &os.Process{Pid: 42}}}
			m := newMonitor("", "distlock:")
			if c.tenure != nil {
				m.tenures[tenureKey{"distlock:{f}", 5}] = c.tenure
			}
			if c.holder != nil {
				m.admitted = []*admission{c.holder}
			}
			if c.place != nil {
				m.allPlace = []*place{c.place}
			}
			rep := &chaosReport{}
			rep.Close.Outcomes = map[string]int{}
			r.checkClose(rep, map[*clientProc]record{p: {K: "close", Client: 1, Res: "ok", Wall: ret}}, monitors{m})
			cl := rep.Close
			if got := cl.Outlived+cl.PlacesLeft+cl.GrantedAfter > 0; got != c.flagged {
				t.Errorf("outlived %d, places left %d, granted after %d; want flagged %v: %v", cl.Outlived, cl.PlacesLeft, cl.GrantedAfter, c.flagged, cl.Detail)
			}
			if flagged := strings.Contains(strings.Join(rep.violations(), "\n"), "close:"); flagged != c.flagged {
				t.Errorf("the run's verdicts %q; want a close violation: %v", rep.violations(), c.flagged)
			}
		})
	}
}
