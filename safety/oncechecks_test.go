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

// The checks of the jobs run once (see onceclient_test.go): Once and
// OncePer, with jobs that panic, outlast their caller, fail or succeed,
// under the run's faults. Their names are plain mutexes of their own.

const (
	// oncePerName is the name of the OncePer job, run every oncePeriod;
	// onceKeyBase followed by a number is the key of a Once job, a new key
	// every onceWindow (of the wall clock), recorded for onceKeepFor.
	oncePerName = `per 'job' ä`
	onceKeyBase = `once "k" %`
	oncePeriod  = 2 * time.Second
	onceWindow  = 3 * time.Second
	onceKeepFor = time.Minute
	// onceRate is the share of the workers' iterations that run a job
	// once, in the modes that do (single and cluster).
	onceRate = 0.08
)

// isOnce says whether name is the lock of a job run once.
func (r *chaosRun) isOnce(name string) bool {
	return r.onceRate > 0 && (name == oncePerName || strings.HasPrefix(name, onceKeyBase+" "))
}

// onceKeep bounds the TTL of a job's record: Once's keep, OncePer's two
// periods.
func (r *chaosRun) onceKeep() time.Duration { return max(onceKeepFor, 2*oncePeriod) }

// onceReport holds the figures and verdicts of the jobs run once.
type onceReport struct {
	Calls  map[string]int // by outcome: the Run's state, or the error's class, or panic
	Jobs   map[string]int // runs of the job, by behaviour
	States map[string]int // by the Run's state
	// Panics: jobs that panicked, their locks found on the server
	// (MONITOR) whose process ran on for three leases after the panic
	// (a Close, a kill or the end of the run releases or ends the lock
	// anyway), and those whose lock was still held, or its lease
	// running, three leases after the panic: must be 0.
	Panics, PanicsChecked, PanicsHeld int
	// Succeeded: jobs that returned nil (OutlastedOk of them after their
	// caller's context had ended); RunAgain: a run of the same key (and
	// period) that started after one of them had returned and had been
	// recorded: must be 0. RecordFailed: successes whose call reported
	// that the record could not be made (typed, under faults: the lock
	// lost, Redis unreachable, the Client closed), whose reruns are
	// allowed; RestartLost: reruns after a Redis restart (data
	// loss), allowed.
	Succeeded, OutlastedOk, RunAgain, RecordFailed, RestartLost int
	// Failed: jobs that returned an error or panicked; RerunAfterFailure:
	// keys (and periods) run again after such a run; FailureRecorded:
	// calls told AlreadyDone by a failed or panicked run: must be 0
	// (failures are not recorded without WithFailuresRecorded).
	Failed, RerunAfterFailure, FailureRecorded int
	// Overlaps: two runs of one key (and period) at once, neither of a
	// paused process nor across a restart: must be 0.
	Intervals, Overlaps, OverlapsExcluded int
	Losses                                int      // losses of the jobs' locks (not in the loss-signal check)
	Untyped                               []string // call errors of no distlock class: must be none
	Detail                                []string
}

func (o *onceReport) note(format string, args ...any) {
	if len(o.Detail) < 10 {
		o.Detail = append(o.Detail, fmt.Sprintf(format, args...))
	}
}

func (o *onceReport) violations() []string {
	var v []string
	if o.PanicsHeld+o.RunAgain+o.FailureRecorded+o.Overlaps+len(o.Untyped) > 0 {
		v = append(v, fmt.Sprintf("jobs run once: %d locks held after a panic, %d runs again of a recorded job, %d calls told a failed run was done, %d runs at once, %d untyped errors %q: %v",
			o.PanicsHeld, o.RunAgain, o.FailureRecorded, o.Overlaps, len(o.Untyped), o.Untyped, o.Detail))
	}
	return v
}

// onceJob is one run of a job, with the call that ran it.
type onceJob struct {
	job  record
	call *record // nil: its process was killed before the call returned
	proc *clientProc
}

// key is what the job runs once for: its name, and its period for OncePer.
func (j *onceJob) key() string { return fmt.Sprintf("%s #%d", j.job.Name, j.job.Period) }

// end is when the run stopped being its runner's: its return, or the end
// of its lease context if that came first.
func (j *onceJob) end() int64 {
	if j.job.T != 0 && j.job.T < j.job.Ret {
		return j.job.T
	}
	return j.job.Ret
}

// checkOnce runs the checks of the jobs run once, on the calls and jobs
// of every process.
//
// A panicking job leaves no lock: the tenure of its lock (MONITOR) ended,
// deleted or expired, within three leases of the panic (Once releases it
// as the panic goes by; a release that fails leaves a lease that is no
// longer renewed, and a renewal sent just before the panic may land up to
// a lease and a fault's delay later). Only panics whose process ran on
// for those three leases are checked.
//
// A job that returned nil was recorded, even when it outlasted its
// caller's context: no run of the same key (and period) starts after it
// returned, unless its call reported that the record could not be made (a
// typed error: the lock was lost, Redis did not answer), or a Redis
// restart lost the record.
//
// A failed or panicked run is not recorded: no call is told AlreadyDone by
// it (its token), nor with an error.
//
// Runs of one key (and period) never overlap, unless one of their
// processes was paused (SIGSTOP) during its run or a Redis restart came
// between them: the validity of a run ends when it returns or when its
// lease context ends.
func (r *chaosRun) checkOnce(rep *chaosReport, calls []record, jobs []onceJob, mon monitors, runEnd int64) {
	o := &rep.Once
	o.Calls, o.Jobs, o.States = map[string]int{}, map[string]int{}, map[string]int{}
	failedTokens := map[string]bool{}
	for _, j := range jobs {
		o.Jobs[j.job.Job]++
		if j.job.Job == jobPanics || j.job.Job == jobFails {
			o.Failed++
			failedTokens[j.job.Name+" "+fmt.Sprint(j.job.Token)] = true
		}
	}
	for _, c := range calls {
		k := c.Res
		if c.Res == "ok" || strings.HasPrefix(c.Res, "jobfailed") {
			k = c.State
		}
		o.Calls[k]++
		if c.State != "" {
			o.States[c.State]++
		}
		if c.Res == "other" || strings.HasSuffix(c.Res, "+other") {
			if len(o.Untyped) < 10 {
				o.Untyped = append(o.Untyped, c.Name+": "+c.Err)
			}
		}
		if c.State == "already done" && (c.RunErr != "" || failedTokens[c.Name+" "+fmt.Sprint(c.Token)]) {
			o.FailureRecorded++
			o.note("%s: a call of client %d was told it was done by token %d, which failed (%q)", c.Name, c.Client, c.Token, c.RunErr)
		}
	}

	// Panics leave no lock behind.
	for _, j := range jobs {
		if j.job.Job != jobPanics {
			continue
		}
		o.Panics++
		bound := j.job.Ret + 3*int64(r.lease)
		ten, ok := mon.lookup(r.key(j.job.Name), j.job.Token)
		if !ok || ten.Cut || runEnd < bound || j.proc.killAt != 0 && j.proc.killAt < bound || j.proc.closeAt != 0 && j.proc.closeAt < bound {
			continue
		}
		o.PanicsChecked++
		if over := ten.end() - (j.job.Wall + 3*int64(r.lease)); over > 0 {
			o.PanicsHeld++
			o.note("%s: the lock of the job that panicked (client %d, token %d) was held %v after the panic (%+v)",
				j.job.Name, j.proc.id, j.job.Token, time.Duration(ten.end()-j.job.Wall), ten)
		}
	}

	// Per key (and period): recorded runs are not run again, failed ones
	// are, and no two runs overlap.
	byKey := map[string][]onceJob{}
	for _, j := range jobs {
		byKey[j.key()] = append(byKey[j.key()], j)
	}
	for key, js := range byKey {
		slices.SortFunc(js, func(a, b onceJob) int { return cmp.Compare(a.job.Call, b.job.Call) })
		failed := false
		for i, a := range js {
			if failed {
				o.RerunAfterFailure++
				failed = false
			}
			if a.job.Job == jobPanics || a.job.Job == jobFails {
				failed = true
				continue
			}
			if a.call == nil {
				continue // killed before it could say whether it recorded
			}
			o.Succeeded++
			if a.job.Job == jobOutlasts {
				o.OutlastedOk++
			}
			if c := a.call.Res; c == "lost" || c == "backend" || c == "notrepl" || c == "closed" {
				o.RecordFailed++
				continue
			}
			for _, b := range js[i+1:] {
				if b.job.Call < a.job.Ret {
					continue
				}
				if r.restartDuring(a.job.Ret, b.job.Call) {
					o.RestartLost++
					continue
				}
				o.RunAgain++
				o.note("%s: run again by client %d (token %d) at %d, after the run of client %d (token %d, %s) returned nil at %d, its call %s %q",
					key, b.proc.id, b.job.Token, b.job.Call, a.proc.id, a.job.Token, a.job.Job, a.job.Ret, a.call.Res, a.call.Err)
			}
		}
		for i, a := range js {
			o.Intervals++
			for _, b := range js[i+1:] {
				if b.job.Call >= a.end() {
					continue
				}
				if a.proc.pausedDuring(a.job.Call, a.end()) || b.proc.pausedDuring(b.job.Call, b.end()) || r.restartDuring(a.job.Call, b.end()) {
					o.OverlapsExcluded++
					continue
				}
				o.Overlaps++
				o.note("%s: runs of client %d (token %d) [%d, %d] and client %d (token %d) [%d, %d] overlap",
					key, a.proc.id, a.job.Token, a.job.Call, a.end(), b.proc.id, b.job.Token, b.job.Call, b.end())
			}
		}
	}
}

// The once checker flags a recorded job run again, a call told that a
// failed run was done, two runs of a key at once and a panicking job's lock
// held on, and only those: a rerun after a failure, or after a run whose
// record was reported lost, passes.
func TestOnceCheckerFlags(t *testing.T) {
	const lease = int64(time.Second)
	proc := &clientProc{id: 1}
	job := func(behaviour string, owner int64, token uint64, from, to int64, callRes string) onceJob {
		j := onceJob{job: record{K: "job", Owner: owner, Name: "o", Token: token, Job: behaviour, Call: from, Ret: to, Wall: to}, proc: proc}
		if callRes != "" {
			j.call = &record{K: "once", Owner: owner, Name: "o", Res: callRes, State: "ran here", Token: token}
		}
		return j
	}
	for _, c := range []struct {
		what    string
		jobs    []onceJob
		calls   []record
		held    int64 // how long the lock of token 9 stayed after its panic
		flagged bool
	}{
		{"a failed run run again", []onceJob{job(jobFails, 1, 1, 100, 200, "jobfailed"), job(jobSucceeds, 2, 2, 300, 400, "ok")}, nil, 0, false},
		{"a recorded run run again", []onceJob{job(jobOutlasts, 1, 1, 100, 200, "ok"), job(jobSucceeds, 2, 2, 300, 400, "ok")}, nil, 0, true},
		{"a run whose record was lost run again", []onceJob{job(jobSucceeds, 1, 1, 100, 200, "lost"), job(jobSucceeds, 2, 2, 300, 400, "ok")}, nil, 0, false},
		{"two runs at once", []onceJob{job(jobFails, 1, 1, 100, 200, "jobfailed"), job(jobFails, 2, 2, 150, 250, "jobfailed")}, nil, 0, true},
		{"a call told a failed run was done", []onceJob{job(jobFails, 1, 1, 100, 200, "jobfailed")},
			[]record{{K: "once", Name: "o", Res: "ok", State: "already done", Token: 1}}, 0, true},
		{"a panic's lock released", []onceJob{job(jobPanics, 1, 9, 100, 200, "")}, nil, lease / 2, false},
		{"a panic's lock held on", []onceJob{job(jobPanics, 1, 9, 100, 200, "")}, nil, 4 * lease, true},
	} {
		t.Run(c.what, func(t *testing.T) {
			r := &chaosRun{t: t, lease: time.Second, prefix: "distlock:", onceRate: onceRate}
			m := newMonitor("", "distlock:")
			if c.held != 0 {
				m.tenures[tenureKey{"distlock:{o}", 9}] = &tenure{Owner: "A", Start: 100, ExpBase: 200 + c.held, ExpMs: 1000, DelAt: 200 + c.held}
			}
			rep := &chaosReport{}
			r.checkOnce(rep, c.calls, c.jobs, monitors{m}, 100*lease)
			if got := len(rep.Once.violations()) > 0; got != c.flagged {
				t.Errorf("verdicts %q; want flagged %v", rep.Once.violations(), c.flagged)
			}
			if flagged := strings.Contains(strings.Join(rep.violations(), "\n"), "jobs run once:"); flagged != c.flagged {
				t.Errorf("the run's verdicts %q; want a violation: %v", rep.violations(), c.flagged)
			}
		})
	}
}
