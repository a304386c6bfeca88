//go:build linux

package safety

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// chaosReport holds the figures and verdicts of a chaos run.
type chaosReport struct {
	Seed     int64
	Duration string
	Command  string
	Lease    string
	Cluster  bool

	Faults          map[string]int
	FaultTargets    map[string]int // holder SIGKILL and SIGSTOP by what they hit: a holder, a fair waiter, or (neither found) a random process
	Processes       int            // client processes started (replacements of killed ones included)
	Acquisitions    int            // successful Lock/TryLock
	AcquireOutcomes map[string]int
	ReleaseOutcomes map[string]int
	Renewals        int64
	RenewFailures   int64
	Losses          int
	FencedOps       map[string]int
	Untyped         []string // errors that match none of distlock's sentinel errors

	Linearizability struct {
		Windows, Checked, Ok, Illegal, Timeout, SkippedLoss, SkippedMulti int
		Operations                                                        int
		CleanTime                                                         string
		IllegalDetail                                                     []string
	}
	Overlap struct {
		Intervals, Checked, ExcludedPaused, ExcludedRestart int
		Overlaps                                            int // among checked: must be 0
		OverlapsExcluded                                    int // involving a paused holder or a restart: expected, caught by fencing
		Detail                                              []string
	}
	Fencing struct {
		fenceReport
		RejectedWhileValid  int // a valid, unpaused holder's op refused: must be 0
		RejectedAfterPause  int
		RejectedAfterLoss   int
		RejectedAfterRestrt int
		RejectedAfterFailvr int // in the Sentinel mode without replica acknowledgement: a holder whose lock a failover lost
		Errors              []string
	}
	Tokens struct {
		Pairs      int // acquisitions checked against all that returned before they were called
		Violations int
		Server     int // tenures seen by MONITOR
		// By the name's kind (plain, fair, rw, sem): the pairs checked and
		// the violations among them.
		PairsByKind, ViolationsByKind map[string]int
		ServerBack                    int // tenures whose token was not above the previous one of the key
	}
	LossSignal struct {
		Losses, Checked, First, Late       int
		ExcludedPaused, ExcludedRestart    int
		EndedByRelease, Unmatched          int
		NeverHandedOut                     int
		Shared                             int // losses of read-write locks' and semaphores' leases: not checked (MONITOR does not follow shared holders)
		MinLeadMs, MedianLeadMs, P99LeadMs float64
		Detail                             []string
	}
	Reentry struct {
		Inner        map[string]int // Unlock outcomes of re-entered leases
		ReportedLost int            // a lease whose Unlock returned nil, its context ended as a loss: must be 0
		PairRefused  int            // one lease of an owner released, the other told ErrNotHeld, or ErrLockLost with no fault near: must be 0
		Detail       []string
	}
	Extend struct {
		Calls    int
		Outcomes map[string]int
		Shorter  int // to a lease shorter than the run's
	}
	Close closeReport
	// MasterPause, in the cluster mode: successful acquisitions that
	// returned while one master was paused, of names on the other masters
	// (the pause costs only its own slots) and on the paused one.
	MasterPause struct {
		Pauses, OtherMasters, PausedMaster int
	}
	// Sentinel, in the Sentinel mode: the failovers, and the exclusion
	// violations across them. Without replica acknowledgement, holders
	// whose validity interval meets a failover fault are left out of the
	// overlap check (Overlap.ExcludedFailover); their overlaps are counted
	// here (Overlaps) and reported, not failed: they are the seeds'
	// failure. With it (Ack), they are checked like any other.
	Sentinel struct {
		Replicas         int
		Ack              string         // "" or the WithReplicaAck arguments
		Failovers        map[string]int // by kind
		FailoverDetail   []string       // each failover: what was done, how long it took
		ExcludedFailover int            // validity intervals that met a failover, not checked (no ack)
		Overlaps         int            // overlaps among them and the checked ones: expected without ack
		OverlapsChecked  int            // overlaps of intervals that met a failover, checked (ack): must be 0, counted in Overlap.Overlaps too
		CheckedFailover  int            // validity intervals that met a failover and were checked (ack): must not be 0, or the check above checked nothing
		MonitorSkipped   bool           // MONITOR follows one server: the loss-signal, server-side and Close checks do not run
		Detail           []string
	}
	// Redlock, in the Redlock mode: the masters' faults, the no-quorum
	// phases (redlock_chaos_test.go).
	Redlock *redlockReport `json:",omitempty"`
	// SQL, in the SQL mode: the server's faults and the checks on its
	// sampled timeline (sql_chaos_test.go).
	SQL *sqlReport `json:",omitempty"`
	// Etcd, in the etcd mode: the cluster's faults and the checks on the
	// server's timeline (etcd_chaos_test.go).
	Etcd    *etcdReport `json:",omitempty"`
	Orphans orphanReport
	Fair    fairReport
	Shared  sharedReport // the read-write locks and semaphores (sharedchecks_test.go)
	GiveUp  giveUpReport // nothing of a failed queued acquisition left after it returned (giveupchecks_test.go)
	// ScriptErrors counts the errors that distlock's scripts raised
	// themselves, by script (see recordScriptError): must be none.
	ScriptErrors struct {
		By     map[string]int
		Detail []string
	}
	Once onceReport // the jobs run once (oncechecks_test.go)
	// FairShare is the part of the checkers' figures about fair names.
	FairShare struct {
		Histories, HistoriesOk, HistoriesIllegal       int
		Intervals, IntervalsChecked, Overlaps          int
		FencedOps, FencedRefused, StaleAccepted, Lost  int
		TokenPairs, TokenViolations                    int
		Losses, LossesChecked, LossesFirst, LossesLate int
		GrantedChecked, GrantedFirst                   int // losses of leases granted inside another owner's script
		GrantedMinLeadMs                               float64
	}
	Server serverChecks // what MONITOR showed: tenures, overlaps, stale deletions
	TTL    ttlReport    // every key's TTL, sampled during the run
	Leaks  struct {
		Clients, Leaking int
		Detail           []string
	}
	ClientFailures []string
	MonitorLines   int
}

func (rep *chaosReport) violations() []string {
	var v []string
	l := &rep.Linearizability
	if l.Illegal > 0 {
		v = append(v, fmt.Sprintf("linearizability: %d illegal histories: %v", l.Illegal, l.IllegalDetail))
	}
	if n := rep.AcquireOutcomes["other"] + rep.ReleaseOutcomes["other"]; n > 0 {
		v = append(v, fmt.Sprintf("%d errors match none of distlock's sentinel errors: %q", n, rep.Untyped))
	}
	if rep.Overlap.Overlaps > 0 {
		v = append(v, fmt.Sprintf("validity intervals overlap: %d: %v", rep.Overlap.Overlaps, rep.Overlap.Detail))
	}
	if sn := rep.Sentinel; sn.Ack != "" && len(sn.Failovers) > 0 && sn.CheckedFailover == 0 {
		v = append(v, fmt.Sprintf("sentinel (ack): failovers %v, but no checked validity interval met one: the overlap check across failovers checked nothing", sn.Failovers))
	}
	f := &rep.Fencing
	if f.StaleAccepted+f.LostUpdates+f.WronglyRejected+f.RejectedWhileValid > 0 || len(f.Errors) > 0 {
		v = append(v, fmt.Sprintf("fencing: %d stale writes accepted, %d lost updates, %d wrongly rejected, %d ops of valid holders rejected; %v",
			f.StaleAccepted, f.LostUpdates, f.WronglyRejected, f.RejectedWhileValid, f.Errors))
	}
	if rep.Tokens.Violations > 0 || rep.Tokens.ServerBack > 0 {
		v = append(v, fmt.Sprintf("tokens: %d out of order, %d not increasing on the server", rep.Tokens.Violations, rep.Tokens.ServerBack))
	}
	if rw := rep.Shared.RW; rw.WriterOverlaps > 0 {
		v = append(v, fmt.Sprintf("read-write locks: %d overlaps of a writer's validity interval with another holder's: %v", rw.WriterOverlaps, rw.Detail))
	}
	if sm := rep.Shared.Sem; sm.Exceeded+sm.LeftInUse+sm.InvalidUnexplained > 0 {
		v = append(v, fmt.Sprintf("semaphores: %d acquisitions took the permits in use above the capacity in force, %d permits left in use after the run, %d refused with ErrInvalidOption with no capacity below their permits: %v",
			sm.Exceeded, sm.LeftInUse, sm.InvalidUnexplained, sm.Detail))
	}
	if rep.LossSignal.Late > 0 {
		v = append(v, fmt.Sprintf("loss signal after the server could expire the key: %d: %v", rep.LossSignal.Late, rep.LossSignal.Detail))
	}
	if rep.Reentry.ReportedLost+rep.Reentry.PairRefused > 0 {
		v = append(v, fmt.Sprintf("release: %d released leases reported lost, %d leases refused while the owner's other lease was released: %v",
			rep.Reentry.ReportedLost, rep.Reentry.PairRefused, rep.Reentry.Detail))
	}
	if c := rep.Close; c.Outlived+c.PlacesLeft+c.GrantedAfter > 0 {
		v = append(v, fmt.Sprintf("close: %d locks still held, %d places still queued when Close returned nil, %d owners made holders after it: %v",
			c.Outlived, c.PlacesLeft, c.GrantedAfter, c.Detail))
	}
	if g := rep.GiveUp; g.GrantedAfter+g.PlacesLeft > 0 {
		v = append(v, fmt.Sprintf("give-ups: %d owners made holders (%v) and %d places live after their acquisition returned an error: %v",
			g.GrantedAfter, g.GrantedAfterKind, g.PlacesLeft, g.Detail))
	}
	v = append(v, rep.Once.violations()...)
	if n := sumInts(rep.ScriptErrors.By); n > 0 {
		v = append(v, fmt.Sprintf("scripts: %d errors raised by distlock's scripts (%v): %q", n, rep.ScriptErrors.By, rep.ScriptErrors.Detail))
	}
	if o := rep.Orphans; o.Left+o.NoTTL+o.OverBound+o.Unknown > 0 {
		v = append(v, fmt.Sprintf("orphans: %d keys left after their TTL, %d without TTL, %d with a TTL above its bound, %d of no known kind: %v",
			o.Left, o.NoTTL, o.OverBound, o.Unknown, o.Detail))
	}
	if s := rep.TTL; s.NoTTL+s.OverBound+s.Unknown+s.CapMissing > 0 {
		v = append(v, fmt.Sprintf("keys during the run: %d without TTL, %d with a TTL above its bound, %d of no known kind, %d samples without a semaphore's capacity while it was held or waited for: %v",
			s.NoTTL, s.OverBound, s.Unknown, s.CapMissing, s.Detail))
	}
	if s := rep.Server; s.Overlaps+s.StaleDels > 0 {
		v = append(v, fmt.Sprintf("server: %d tenures begun while the previous one could still be held, %d locks deleted by a release of another owner: %v", s.Overlaps, s.StaleDels, s.Detail))
	}
	if f := rep.Fair; f.WrongKind+f.KindMismatch > 0 {
		v = append(v, fmt.Sprintf("kinds: %d acquisitions refused with ErrWrongKind, %d tenures of the other kind than their name's (names never change kind): %v", f.WrongKind, f.KindMismatch, rep.Server.Detail))
	}
	if f := rep.Fair.FIFO; f.Violations > 0 {
		v = append(v, fmt.Sprintf("FIFO: %d grants while a place acknowledged before the grantee's request was sent was live: %v", f.Violations, f.Detail))
	}
	if rep.Leaks.Leaking > 0 {
		v = append(v, fmt.Sprintf("goroutine leaks in %d clients: %v", rep.Leaks.Leaking, rep.Leaks.Detail))
	}
	if rep.Redlock != nil {
		v = append(v, rep.Redlock.violations()...)
	}
	if rep.Etcd != nil {
		v = append(v, rep.Etcd.violations()...)
	}
	if rep.SQL != nil {
		v = append(v, rep.SQL.violations()...)
	}
	v = append(v, rep.ClientFailures...)
	if rep.Acquisitions == 0 {
		v = append(v, "no acquisition succeeded")
	}
	return v
}

func (rep *chaosReport) log(t *testing.T) {
	t.Logf("faults injected: %v; SIGKILL and SIGSTOP hit %v", rep.Faults, rep.FaultTargets)
	t.Logf("processes %d, acquisitions %d, acquire outcomes %v, release outcomes %v, renewals %d, renewal failures %d, losses %d, fenced ops %v",
		rep.Processes, rep.Acquisitions, rep.AcquireOutcomes, rep.ReleaseOutcomes, rep.Renewals, rep.RenewFailures, rep.Losses, rep.FencedOps)
	l := rep.Linearizability
	t.Logf("linearizability (porcupine, mutex model): %d fault-free windows (%s), %d histories checked, %d ok, %d illegal, %d timed out, %d skipped (loss without fault), %d skipped (a multi-lock call under way on a store that takes members one at a time), %d ops",
		l.Windows, l.CleanTime, l.Checked, l.Ok, l.Illegal, l.Timeout, l.SkippedLoss, l.SkippedMulti, l.Operations)
	ov := rep.Overlap
	t.Logf("validity overlap: %d intervals, %d checked, %d overlaps; excluded %d paused, %d across a restart (%d overlaps among them, expected)",
		ov.Intervals, ov.Checked, ov.Overlaps, ov.ExcludedPaused, ov.ExcludedRestart, ov.OverlapsExcluded)
	f := rep.Fencing
	t.Logf("fencing: %d reads, %d writes accepted; %d reads, %d writes refused (%d after a pause, %d after a loss, %d after a restart); stale accepted %d, lost updates %d, wrongly refused %d, valid holders refused %d",
		f.Reads, f.Writes, f.RejectedReads, f.RejectedWrites, f.RejectedAfterPause, f.RejectedAfterLoss, f.RejectedAfterRestrt, f.StaleAccepted, f.LostUpdates, f.WronglyRejected, f.RejectedWhileValid)
	t.Logf("tokens: %d ordered pairs checked (by kind %v), %d violations (by kind %v); server: %d tenures, %d not increasing",
		rep.Tokens.Pairs, rep.Tokens.PairsByKind, rep.Tokens.Violations, rep.Tokens.ViolationsByKind, rep.Tokens.Server, rep.Tokens.ServerBack)
	rw, sm := rep.Shared.RW, rep.Shared.Sem
	t.Logf("read-write %v: %d acquisitions (%d readers, %d writers; %d by TryLock/TryRLock); %d intervals, %d checked (excluded %d paused, %d across a restart); writer overlaps %d (must be 0; %d with an excluded interval); reader-reader overlaps %d, at most %d readers at once",
		rw.Names, rw.Acquisitions, rw.Readers, rw.Writers, rw.Try, rw.Intervals, rw.Checked, rw.ExcludedPaused, rw.ExcludedRestart, rw.WriterOverlaps, rw.WriterOverlapsExcluded, rw.ReaderOverlaps, rw.MaxReaders)
	t.Logf("semaphores %v (capacity %d): %d acquisitions (by permits %v; %d by TryAcquire); %d intervals, %d checked (excluded %d paused, %d across a restart; %d admitted while the capacity was shrunk, %d of them after it may have lapsed); at most %d permits in use (%d with the excluded), %d above the capacity in force (must be 0); %d left in use after the run (must be 0); %d refused with ErrInvalidOption while shrunk, %d otherwise (must be 0)",
		sm.Names, sm.Capacity, sm.Acquisitions, sm.ByPermits, sm.Try, sm.Intervals, sm.Checked, sm.ExcludedPaused, sm.ExcludedRestart, sm.Shrunk, sm.Lapsed, sm.MaxInUse, sm.MaxInUseAll, sm.Exceeded, sm.LeftInUse, sm.InvalidExplained, sm.InvalidUnexplained)
	s := rep.LossSignal
	t.Logf("loss signal: %d losses, %d checked (%d of them after a release call), %d first, %d late; excluded %d paused, %d restart (data loss), %d never handed out, %d unmatched, %d of shared kinds (not followed); lead before the server expiry min %.1f ms, median %.1f ms, p99 %.1f ms",
		s.Losses, s.Checked, s.EndedByRelease, s.First, s.Late, s.ExcludedPaused, s.ExcludedRestart, s.NeverHandedOut, s.Unmatched, s.Shared, s.MinLeadMs, s.MedianLeadMs, s.P99LeadMs)
	t.Logf("re-entered leases: unlock outcomes %v; released leases reported lost %d; leases refused while the other lease of the owner was released %d",
		rep.Reentry.Inner, rep.Reentry.ReportedLost, rep.Reentry.PairRefused)
	e, c := rep.Extend, rep.Close
	t.Logf("extend: %d calls (%d shortening), outcomes %v; errors raised by distlock's scripts %v (must be none)", e.Calls, e.Shorter, e.Outcomes, rep.ScriptErrors.By)
	if c.Calls > 0 {
		t.Logf("close under load: %d calls (%d with replies delayed), outcomes %v; at Close, holders by kind %v, waiters queued by kind %v, calls that may queue in flight by kind %v, of every queued kind %d; of the closing processes %d tenures, %d shared holders and %d places checked: %d outlived a nil Close, %d places left, %d made holders after it, %d begun after it (late retried acquire)",
			c.Calls, c.Delayed, c.Outcomes, c.WithHolders, c.WithWaiters, c.WithInflight, c.AllKinds, c.Tenures, c.Admissions, c.Places, c.Outlived, c.PlacesLeft, c.GrantedAfter, c.LateStart)
		for _, e := range c.Each {
			t.Logf("close: %s", e)
		}
	}
	if g := rep.GiveUp; g.Owners > 0 {
		t.Logf("give-ups: %d owners of queued acquisitions recorded (%d tied to no call, %d to successful calls); %d of calls that returned an error checked (%d cut short by Close, from its return), by kind %v: %d grants raced them and came before the return, %d made holders after it (by kind %v), %d places live after it; excluded %d after a restart, %d of a failed Close, %d whose clean-up failed before the return; %d grants or places after the return excused, their owner's clean-up sent and not confirmed by then",
			g.Owners, g.Unlinked, g.OfSuccesses, sumInts(g.Checked), g.ByClose, g.Checked, g.RacedGrants, g.GrantedAfter, g.GrantedAfterKind, g.PlacesLeft, g.ExcludedRestart, g.ExcludedClose, g.ExcludedCleanup, g.Unconfirmed)
	}
	if oc := rep.Once; len(oc.Calls) > 0 {
		t.Logf("jobs run once: calls %v, jobs %v; %d panics, %d locks checked, %d held 3 leases after; %d succeeded (%d after their caller's deadline), %d run again after a recorded run, %d reruns allowed (%d records failed, %d lost in a restart); %d failed, %d keys run again after a failure, %d calls told a failure was done; %d runs, %d overlaps (%d excluded); %d lost",
			oc.Calls, oc.Jobs, oc.Panics, oc.PanicsChecked, oc.PanicsHeld, oc.Succeeded, oc.OutlastedOk, oc.RunAgain, oc.RecordFailed+oc.RestartLost, oc.RecordFailed, oc.RestartLost,
			oc.Failed, oc.RerunAfterFailure, oc.FailureRecorded, oc.Intervals, oc.Overlaps, oc.OverlapsExcluded, oc.Losses)
	}
	if len(c.Detail) > 0 {
		t.Logf("close: %q", c.Detail)
	}
	if sn := rep.Sentinel; sn.Failovers != nil {
		ack := sn.Ack
		if ack == "" {
			ack = "no replica acknowledgement"
		}
		t.Logf("sentinel (%d replica, %s): failovers %v; validity intervals across a failover: %d left out of the overlap check (no ack), %d overlaps among them (expected without ack), %d overlaps of checked intervals across a failover (ack: must be 0) among %d such intervals checked; fenced ops refused after a failover lost the lock %d; loss-signal, server-side and Close checks skipped (no MONITOR): %v",
			sn.Replicas, ack, sn.Failovers, sn.ExcludedFailover, sn.Overlaps, sn.OverlapsChecked, sn.CheckedFailover, rep.Fencing.RejectedAfterFailvr, sn.MonitorSkipped)
		for _, d := range sn.FailoverDetail {
			t.Logf("sentinel: %s", d)
		}
		for _, d := range sn.Detail {
			t.Logf("sentinel: overlap across a failover: %s", d)
		}
	}
	if rep.Redlock != nil {
		rep.Redlock.log(t)
	}
	if rep.Etcd != nil {
		rep.Etcd.log(t)
	}
	if rep.SQL != nil {
		rep.SQL.log(t)
	}
	if rep.Cluster {
		t.Logf("cluster: during %d master pauses, %d acquisitions returned on the other masters, %d on the paused one",
			rep.MasterPause.Pauses, rep.MasterPause.OtherMasters, rep.MasterPause.PausedMaster)
	}
	fs := rep.FairShare
	t.Logf("fair names' share: %d histories (%d ok, %d illegal); %d intervals, %d checked, %d overlaps; %d fenced ops, %d refused, %d stale accepted, %d lost updates; %d token pairs, %d violations; %d losses, %d checked, %d first, %d late; %d losses of granted leases checked, %d first (min lead %.1f ms)",
		fs.Histories, fs.HistoriesOk, fs.HistoriesIllegal, fs.Intervals, fs.IntervalsChecked, fs.Overlaps, fs.FencedOps, fs.FencedRefused, fs.StaleAccepted, fs.Lost,
		fs.TokenPairs, fs.TokenViolations, fs.Losses, fs.LossesChecked, fs.LossesFirst, fs.LossesLate, fs.GrantedChecked, fs.GrantedFirst, fs.GrantedMinLeadMs)
	fr := rep.Fair
	t.Logf("fair and elections %v: %d fair acquisitions (%d by TryLock); queued kinds' acquisition calls by script and reply %v; %d places (every queued kind): %v (%d expired with no fault near); tenures by script %v; %d ErrWrongKind, %d tenures of the wrong kind",
		fr.Names, fr.Acquisitions, fr.TryAcquisitions, fr.Enqueues, fr.Places, fr.PlaceEnds, fr.ExpiredQuiet, fr.Grants, fr.WrongKind, fr.KindMismatch)
	t.Logf("FIFO: %d grants, %d checked (%d unknown), %d places live at them, %d ordered pairs served in order, %d violations",
		fr.FIFO.Grants, fr.FIFO.Checked, fr.FIFO.Unknown, fr.FIFO.Ahead, fr.FIFO.Ordered, fr.FIFO.Violations)
	sv := rep.Server
	t.Logf("server (MONITOR): %d tenures %v, %d begun while the previous could be held; deletions by script %v, %d by another owner's release; %d places made again after they ended; %d commands on read-write locks' and semaphores' keys, %d admissions of their holders %v",
		sv.Tenures, sv.TenuresBy, sv.Overlaps, sv.DelBy, sv.StaleDels, sv.Resurrected, sv.SharedCommands, sumInts(sv.AdmissionsBy), sv.AdmissionsBy)
	tt := rep.TTL
	t.Logf("TTLs during the run: %d samples (%d skipped), keys seen %v, largest PTTL (ms) %v; %d without TTL, %d above their bound, %d unknown; semaphores' capacity: %d samples (%d skipped), %d with live holders or places, %d of them without the capacity (must be 0)",
		tt.Samples, tt.Skipped, tt.Keys, tt.MaxMs, tt.NoTTL, tt.OverBound, tt.Unknown, tt.CapSamples, tt.CapSkipped, tt.CapInUse, tt.CapMissing)
	o := rep.Orphans
	t.Logf("orphans: at close %v (awaited: %v); %d left, %d without TTL, %d above their bound, %d unknown; marks drained %v; leaks: %d clients checked, %d leaking",
		o.AtClose, o.Awaited, o.Left, o.NoTTL, o.OverBound, o.Unknown, o.Drained, rep.Leaks.Clients, rep.Leaks.Leaking)
}

// acquisition is one successful (or not) Lock/TryLock of the history.
type acquisition struct {
	acq     record
	proc    *clientProc
	rel     *record
	cancelT int64 // first cancellation of the lease context, 0 if none
	lost    *record
	ops     []record
}

func (a *acquisition) ok() bool { return a.acq.Res == "ok" }

// validEnd is the end of the holder's validity interval.
func (a *acquisition) validEnd(runEnd int64) int64 {
	end := runEnd
	if a.rel != nil {
		end = min(end, a.rel.Call)
	}
	if a.cancelT != 0 {
		end = min(end, a.cancelT)
	}
	if a.lost != nil {
		end = min(end, a.lost.T)
	}
	if k := a.proc.killAt; k != 0 {
		end = min(end, k)
	}
	if c := a.proc.closeAt; c != 0 {
		// Close cancels every lease context before it releases: its call
		// ends the validity of the process's holds, however late the
		// process records their cancellation.
		end = min(end, c)
	}
	return end
}

func (p *clientProc) pausedDuring(from, to int64) bool {
	for _, iv := range p.pauses {
		if iv[0] < to && iv[1] > from {
			return true
		}
	}
	return false
}

// disturbed says whether a disruptive fault overlapped [from-2 leases, to].
func (r *chaosRun) disturbed(from, to int64) bool {
	for _, f := range r.faults {
		if !benignFaults[f.Kind] && f.Start < to && f.End > from-2*int64(r.lease) {
			return true
		}
	}
	return false
}

// failoverDuring says whether a failover fault (Sentinel mode) overlapped
// [from, to], and returns the first.
func (r *chaosRun) failoverDuring(from, to int64) (fault, bool) {
	for _, f := range r.faults {
		if failoverFaults[f.Kind] && f.Start < to && f.End > from {
			return f, true
		}
	}
	return fault{}, false
}

func (r *chaosRun) failoverAt(from, to int64) bool { _, ok := r.failoverDuring(from, to); return ok }

func (r *chaosRun) restartDuring(from, to int64) bool {
	for _, f := range r.faults {
		if f.Kind == faultRedisRestart && f.Start < to && f.End > from {
			return true
		}
	}
	return false
}

// check reads the histories and runs every checker.
func (r *chaosRun) check(store *redis.Client, mon monitors, runEnd int64) *chaosReport {
	t := r.t
	rep := &chaosReport{Faults: map[string]int{}, AcquireOutcomes: map[string]int{}, ReleaseOutcomes: map[string]int{}, FencedOps: map[string]int{}, Lease: r.lease.String()}
	rep.Cluster = r.cluster
	if r.redlock != nil {
		rep.Redlock = &redlockReport{LossesByMasters: map[int]int{}}
	}
	rep.Extend.Outcomes, rep.Close.Outcomes, rep.Reentry.Inner = map[string]int{}, map[string]int{}, map[string]int{}
	rep.Tokens.PairsByKind, rep.Tokens.ViolationsByKind = map[string]int{}, map[string]int{}
	rep.ScriptErrors.By = map[string]int{}
	released := func(rec record) {
		if rec.Res == "ok" && rec.LostCause {
			rep.Reentry.ReportedLost++
			if len(rep.Reentry.Detail) < 10 {
				rep.Reentry.Detail = append(rep.Reentry.Detail, fmt.Sprintf("%s token %d (client %d): Unlock returned nil, the lease context ended with ErrLockLost", rec.Name, rec.Token, rec.Client))
			}
		}
	}
	closes := map[*clientProc]record{}
	rep.FaultTargets = map[string]int{}
	for _, f := range r.faults {
		rep.Faults[f.Kind]++
		if f.Kind == faultHolderKill || f.Kind == faultHolderPause {
			what, _, _ := strings.Cut(f.Detail, " ")
			rep.FaultTargets[f.Kind+"/"+what]++
		}
	}
	rep.Processes = len(r.procs)

	byName := map[string][]*acquisition{}
	enq := map[string]*enqueue{}
	rep.Fair.Enqueues = map[string]int{}
	var losses []record
	byToken := map[string]*acquisition{}
	var enqs, onceCalls, etcdReqs []record
	var jobs []onceJob
	for _, p := range r.procs {
		recs, err := readHistory(p.history)
		if err != nil {
			t.Errorf("client %d: %v", p.id, err)
			continue
		}
		owners := map[int64]*acquisition{}
		var last record
		for _, rec := range recs {
			switch rec.K {
			case "acq":
				a := &acquisition{acq: rec, proc: p}
				owners[rec.Owner] = a
				byName[rec.Name] = append(byName[rec.Name], a)
				k := rec.Res
				if k == "ctx" && rec.Cancel {
					k = "ctx-cancelled-midway"
				} else if k == "ctx" {
					k = "ctx-wait-timeout"
				}
				rep.AcquireOutcomes[k]++
				if k == "other" && len(rep.Untyped) < 10 {
					rep.Untyped = append(rep.Untyped, "acquire: "+rec.Err)
				}
				if a.ok() {
					rep.Acquisitions++
					byToken[holdKey(rec.Name, rec.Token)] = a
					if rec.Fair {
						rep.Fair.Acquisitions++
						if rec.Try {
							rep.Fair.TryAcquisitions++
						}
					}
				}
				if rec.Res == "wrongkind" {
					rep.Fair.WrongKind++
				}
			case "rel":
				if a := owners[rec.Owner]; a != nil {
					rc := rec
					a.rel = &rc
				}
				rep.ReleaseOutcomes[rec.Res]++
				if rec.Res == "other" && len(rep.Untyped) < 10 {
					rep.Untyped = append(rep.Untyped, "release: "+rec.Err)
				}
				released(rec)
				// ErrNotHeld is never right here (each lease is unlocked
				// once); ErrLockLost is, if a fault made the lock expire.
				refused := func(res string) bool {
					return res == "notheld" || res == "lost" && !r.disturbed(rec.Call, rec.Ret)
				}
				if rec.Pair != "" && (refused(rec.Pair) || refused(rec.Res)) {
					rep.Reentry.PairRefused++
					if len(rep.Reentry.Detail) < 10 {
						rep.Reentry.Detail = append(rep.Reentry.Detail, fmt.Sprintf("%s token %d (client %d): one lease of the owner released, the other %s/%s: %s",
							rec.Name, rec.Token, rec.Client, rec.Res, rec.Pair, rec.Err))
					}
				}
			case "reli":
				rep.Reentry.Inner[rec.Res]++
				if rec.Res == "other" && len(rep.Untyped) < 10 {
					rep.Untyped = append(rep.Untyped, "release of a re-entered lease: "+rec.Err)
				}
				released(rec)
			case "cancel":
				if a := owners[rec.Owner]; a != nil && (a.cancelT == 0 || rec.T < a.cancelT) {
					a.cancelT = rec.T
				}
			case "lost":
				rec.Client = p.id
				if r.isOnce(rec.Name) {
					rep.Once.Losses++ // a job's lock: checked with the jobs
					continue
				}
				losses = append(losses, rec)
			case "op":
				if a := owners[rec.Owner]; a != nil {
					a.ops = append(a.ops, rec)
				}
				k := rec.Op + "-refused"
				if rec.Acc {
					k = rec.Op + "-accepted"
				}
				if rec.Err != "" {
					k = rec.Op + "-error"
				}
				rep.FencedOps[k]++
			case "ext":
				rep.Extend.Calls++
				rep.Extend.Outcomes[rec.Res]++
				if rec.TTLms < r.lease.Milliseconds() {
					rep.Extend.Shorter++
				}
				if rec.Res == "other" && len(rep.Untyped) < 10 {
					rep.Untyped = append(rep.Untyped, "extend: "+rec.Err)
				}
			case "close":
				closes[p] = rec
				p.closeAt = rec.Call
			case "abf", "abok":
				// Clean-ups that failed and that the store confirmed (the
				// give-up checks of every mode).
				enqs = append(enqs, rec) // see checkGiveUps
				etcdReqs = append(etcdReqs, rec)
			case "abs":
				enqs = append(enqs, rec) // see checkGiveUps
			case "rpcerr", "wcomp":
				etcdReqs = append(etcdReqs, rec) // see checkEtcd
			case "enq":
				etcdReqs = append(etcdReqs, rec)
				collectEnqueues(enq, rec)
				enqs = append(enqs, rec)
				rep.Fair.Enqueues[strings.TrimSuffix(rec.Script, "_acquire")+" "+rec.Res]++
			case "serr":
				rep.ScriptErrors.By[rec.Script]++
				if len(rep.ScriptErrors.Detail) < 10 {
					rep.ScriptErrors.Detail = append(rep.ScriptErrors.Detail, fmt.Sprintf("client %d, %s of %q: %s", p.id, rec.Script, rec.Name, rec.Err))
				}
			case "once":
				onceCalls = append(onceCalls, rec)
			case "job":
				jobs = append(jobs, onceJob{job: rec, proc: p})
			case "stats", "done":
				last = rec
			}
		}
		rep.Renewals += last.Renewed
		rep.RenewFailed(last)
		if p.killAt == 0 {
			rep.Leaks.Clients++
			if last.K != "done" {
				rep.ClientFailures = append(rep.ClientFailures, fmt.Sprintf("client %d ended without its done record: %v\n%s", p.id, p.err, tail(p.stderr)))
			} else if last.Leaks > 0 {
				rep.Leaks.Leaking++
				rep.Leaks.Detail = append(rep.Leaks.Detail, fmt.Sprintf("client %d: %s", p.id, last.LeakText))
			}
			if p.err != nil {
				rep.ClientFailures = append(rep.ClientFailures, fmt.Sprintf("client %d exited with %v\n%s", p.id, p.err, tail(p.stderr)))
			}
		}
		if b, _ := os.ReadFile(p.stderr); strings.Contains(string(b), "DATA RACE") || strings.Contains(string(b), "panic:") {
			rep.ClientFailures = append(rep.ClientFailures, fmt.Sprintf("client %d: race or panic:\n%s", p.id, tail(p.stderr)))
		}
	}
	for _, l := range losses {
		if a := byToken[holdKey(l.Name, l.Token)]; a != nil {
			lc := l
			a.lost = &lc
		}
	}
	rep.Losses = len(losses)
	callOf := map[int64]*record{} // a once call by its owner number
	for i := range onceCalls {
		callOf[onceCalls[i].Owner] = &onceCalls[i]
	}
	for i := range jobs {
		jobs[i].call = callOf[jobs[i].job.Owner]
	}
	offset := wall() - mono() // CLOCK_REALTIME - CLOCK_MONOTONIC

	r.checkOverlap(rep, byName, runEnd)
	r.checkShared(rep, byName, runEnd)
	r.checkTokens(rep, byName, mon)
	r.checkFencing(rep, store, byName, runEnd)
	// The Sentinel mode has no MONITOR feed (it follows one server, not
	// the promoted replica): the checks that rest on it do not run.
	rep.Sentinel.MonitorSkipped = r.sentinel != nil
	// The etcd and SQL modes have none either: their checks on the
	// server's own timeline (a watch and revision samples; samples of the
	// table) replace those of MONITOR, and those of the keys' TTLs.
	redis := r.etcd == nil && r.sql == nil
	if r.sentinel == nil && redis {
		r.checkLossSignal(rep, losses, byToken, mon)
	}
	r.checkLinearizable(rep, byName, runEnd)
	if redis {
		r.checkOrphans(rep)
		r.checkSemaphoresDrained(rep)
		r.checkFair(rep, enq, mon)
	} else if r.etcd != nil {
		r.checkEtcd(rep, byName, losses, byToken, etcdReqs)
	} else {
		r.checkSQL(rep, byName, losses, byToken, etcdReqs)
	}
	if r.sentinel == nil && redis {
		r.checkClose(rep, closes, mon)
		r.checkGiveUps(rep, enqs, byName, closes, mon, offset)
		r.checkOnce(rep, onceCalls, jobs, mon, runEnd)
	}
	r.checkInvalid(rep, byName)
	if r.cluster {
		r.countMasterPause(rep, byName)
	}
	if r.redlock != nil {
		r.checkRedlock(rep, byName, mon)
	}
	if r.sentinel != nil {
		sn := &rep.Sentinel
		sn.Replicas = sentinelReplicas
		if r.ack {
			sn.Ack = fmt.Sprintf("WithReplicaAck(1, %v)", sentinelAckTimeout)
		}
		sn.Failovers = map[string]int{}
		for _, f := range r.faults {
			if failoverFaults[f.Kind] {
				sn.Failovers[f.Kind]++
				sn.FailoverDetail = append(sn.FailoverDetail, f.Kind+": "+f.Detail)
			}
		}
	}
	var err error
	rep.MonitorLines, err = mon.status()
	if err != nil {
		rep.ClientFailures = append(rep.ClientFailures, "monitor: "+err.Error())
	}
	return rep
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (rep *chaosReport) RenewFailed(last record) { rep.RenewFailures += last.RenewFailed }

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// checkOverlap checks that the validity intervals [acquire reply,
// min(release call, lease context cancelled, process killed, Close
// called)] of different
// owners of a lock never overlap, for holders that were not paused and
// whose lock did not live through a Redis restart (data loss). It is the
// mutexes' check: the read-write locks and semaphores, whose holders may
// overlap, have theirs (checkShared).
func (r *chaosRun) checkOverlap(rep *chaosReport, byName map[string][]*acquisition, runEnd int64) {
	type iv struct {
		from, to int64
		a        *acquisition
		excluded bool
		failover bool // met a failover fault (Sentinel mode)
	}
	for name, as := range byName {
		if r.isShared(name) {
			continue
		}
		var ivs []iv
		for _, a := range as {
			if !a.ok() {
				continue
			}
			end := a.validEnd(runEnd)
			x := iv{from: a.acq.Ret, to: end, a: a}
			rep.Overlap.Intervals++
			if r.isFair(name) {
				rep.FairShare.Intervals++
			}
			_, x.failover = r.failoverDuring(a.acq.Call, end)
			switch {
			case a.proc.pausedDuring(a.acq.Call, end):
				x.excluded = true
				rep.Overlap.ExcludedPaused++
			case r.restartDuring(a.acq.Call, end):
				x.excluded = true
				rep.Overlap.ExcludedRestart++
			case x.failover && !r.ack:
				x.excluded = true
				rep.Sentinel.ExcludedFailover++
			default:
				rep.Overlap.Checked++
				if r.isFair(name) {
					rep.FairShare.IntervalsChecked++
				}
				if x.failover {
					rep.Sentinel.CheckedFailover++
				}
			}
			ivs = append(ivs, x)
		}
		slices.SortFunc(ivs, func(a, b iv) int { return cmp.Compare(a.from, b.from) })
		sweep := func(include func(x *iv) bool) (n, nFailover int, detail []string) {
			var cur *iv
			for i := range ivs {
				x := &ivs[i]
				if !include(x) {
					continue
				}
				if cur != nil && x.from < cur.to {
					n++
					if x.failover || cur.failover {
						nFailover++
					}
					if len(detail) < 5 {
						d := fmt.Sprintf("%s: owner %d (client %d, token %d) [%d, %d] overlaps owner %d (client %d, token %d) [%d, %d] by %v",
							name, cur.a.acq.Owner, cur.a.proc.id, cur.a.acq.Token, cur.from, cur.to, x.a.acq.Owner, x.a.proc.id, x.a.acq.Token, x.from, x.to, time.Duration(cur.to-x.from))
						if f, ok := r.failoverDuring(cur.a.acq.Call, cur.to); ok {
							d += fmt.Sprintf(" (the first met %s at %d: %s)", f.Kind, f.Start, f.Detail)
						}
						detail = append(detail, d)
					}
				}
				if cur == nil || x.to > cur.to {
					cur = x
				}
			}
			return n, nFailover, detail
		}
		n, nf, d := sweep(func(x *iv) bool { return !x.excluded })
		if r.ack {
			rep.Sentinel.OverlapsChecked += nf
		}
		if r.sentinel != nil && !r.ack {
			// The overlaps across a failover: with the failover
			// intervals put back (the paused ones stay out).
			fo, _, fd := sweep(func(x *iv) bool { return !x.excluded || x.failover && !x.a.proc.pausedDuring(x.a.acq.Call, x.to) })
			rep.Sentinel.Overlaps += fo - n
			for _, line := range fd {
				if len(rep.Sentinel.Detail) < 10 && strings.Contains(line, "(the first met") {
					rep.Sentinel.Detail = append(rep.Sentinel.Detail, line)
				}
			}
		}
		rep.Overlap.Overlaps += n
		if r.isFair(name) {
			rep.FairShare.Overlaps += n
		}
		rep.Overlap.Detail = append(rep.Overlap.Detail, d...)
		all, _, _ := sweep(func(*iv) bool { return true })
		rep.Overlap.OverlapsExcluded += all - n
	}
}

// checkTokens checks that an acquisition that returned before another was
// called has the lower token (restarts included: tokens are at least the
// server time in µs), and that the server minted increasing tokens. The
// rule holds for every kind: a read-write lock mints a new token for each
// acquisition of either side, a semaphore for each acquisition, strictly
// above every token issued before for the name; the figures are split by
// kind.
func (r *chaosRun) checkTokens(rep *chaosReport, byName map[string][]*acquisition, mon monitors) {
	for name, as := range byName {
		var ok []*acquisition
		for _, a := range as {
			if a.ok() {
				ok = append(ok, a)
			}
		}
		slices.SortFunc(ok, func(a, b *acquisition) int { return cmp.Compare(a.acq.Ret, b.acq.Ret) })
		prefMax := make([]uint64, len(ok))
		for i, a := range ok {
			prefMax[i] = a.acq.Token
			if i > 0 {
				prefMax[i] = max(prefMax[i], prefMax[i-1])
			}
		}
		for _, b := range ok {
			i := sort.Search(len(ok), func(i int) bool { return ok[i].acq.Ret >= b.acq.Call })
			if i == 0 {
				continue
			}
			rep.Tokens.Pairs++
			rep.Tokens.PairsByKind[r.kindOf(name)]++
			if r.isFair(name) {
				rep.FairShare.TokenPairs++
			}
			if prefMax[i-1] >= b.acq.Token {
				rep.Tokens.Violations++
				rep.Tokens.ViolationsByKind[r.kindOf(name)]++
				if r.isFair(name) {
					rep.FairShare.TokenViolations++
				}
				r.t.Logf("token order: %s: token %d of owner %d is not above %d, returned before it was called", name, b.acq.Token, b.acq.Owner, prefMax[i-1])
			}
		}
	}
	type st struct {
		start int64
		tok   uint64
	}
	// Per key of each server: a Redlock holder's tenures on several
	// masters have one token.
	perKey := map[string][]st{}
	for i, m := range mon {
		monitors{m}.each(func(key string, token uint64, t tenure) {
			k := fmt.Sprint(i, " ", key)
			perKey[k] = append(perKey[k], st{t.Start, token})
		})
	}
	for _, s := range perKey {
		slices.SortFunc(s, func(a, b st) int { return cmp.Compare(a.start, b.start) })
		for i := range s {
			rep.Tokens.Server++
			if i > 0 && s[i].tok <= s[i-1].tok {
				rep.Tokens.ServerBack++
			}
		}
	}
}

// checkFencing replays the store's log of every register, and checks that
// no operation of a valid, unpaused holder was refused. The registers are
// those of the exclusive holders: the mutexes' and the read-write locks'
// writers (readers and semaphores' holders do no fenced operation).
func (r *chaosRun) checkFencing(rep *chaosReport, store *redis.Client, byName map[string][]*acquisition, runEnd int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &rep.Fencing
	for _, name := range r.names {
		if r.kindOf(name) == "sem" {
			continue
		}
		fr := checkRegister(ctx, store, name)
		if r.isFair(name) {
			fs := &rep.FairShare
			fs.FencedOps += fr.Reads + fr.Writes + fr.RejectedReads + fr.RejectedWrites
			fs.FencedRefused += fr.RejectedReads + fr.RejectedWrites
			fs.StaleAccepted += fr.StaleAccepted
			fs.Lost += fr.LostUpdates
		}
		f.Reads += fr.Reads
		f.Writes += fr.Writes
		f.RejectedReads += fr.RejectedReads
		f.RejectedWrites += fr.RejectedWrites
		f.StaleAccepted += fr.StaleAccepted
		f.LostUpdates += fr.LostUpdates
		f.WronglyRejected += fr.WronglyRejected
		if fr.Err != "" {
			f.Errors = append(f.Errors, fr.Err)
		}
		for _, a := range byName[name] {
			end := a.validEnd(runEnd)
			for _, op := range a.ops {
				if op.Acc || op.Err != "" {
					continue
				}
				switch {
				case a.proc.pausedDuring(a.acq.Call, op.Ret):
					f.RejectedAfterPause++
				case r.restartDuring(a.acq.Call, op.Ret):
					f.RejectedAfterRestrt++
				case r.sentinel != nil && !r.ack && r.failoverAt(a.acq.Call, op.Ret):
					f.RejectedAfterFailvr++
				case op.Ret > end:
					f.RejectedAfterLoss++
				default:
					f.RejectedWhileValid++
					r.t.Logf("fencing: %s: %s of owner %d (token %d) refused while its lease was valid", name, op.Op, a.acq.Owner, a.acq.Token)
				}
			}
		}
	}
}

// checkLossSignal checks, for every loss of an unpaused holder, that its
// lease context was cancelled before the server could have expired or
// deleted the key (from the MONITOR timeline, on CLOCK_REALTIME).
func (r *chaosRun) checkLossSignal(rep *chaosReport, losses []record, byToken map[string]*acquisition, mon monitors) {
	s := &rep.LossSignal
	s.Losses = len(losses)
	var leads []float64
	for _, l := range losses {
		if r.isShared(l.Name) {
			s.Shared++
			continue
		}
		if r.isFair(l.Name) {
			rep.FairShare.Losses++
		}
		a := byToken[holdKey(l.Name, l.Token)]
		var p *clientProc
		for _, q := range r.procs {
			if q.id == l.Client {
				p = q
			}
		}
		// The holder stops believing it holds the lock at its loss
		// signal, or at its release call if that came first (a release
		// that went through on the server but whose reply was lost).
		if a == nil {
			// The acquisition reply came after the lease deadline: the
			// hold was never handed to the caller (Lock went on waiting).
			s.NeverHandedOut++
			continue
		}
		believed, believedWall := l.T, l.Wall
		from := a.acq.Call
		if a.rel != nil && a.rel.Call < l.T {
			believed, believedWall = a.rel.Call, a.rel.Wall
		}
		if p != nil && p.pausedDuring(from, believed) {
			s.ExcludedPaused++
			continue
		}
		if r.restartDuring(from, believed) {
			s.ExcludedRestart++
			continue
		}
		// The end of the lock on the server: of its tenure, or, over
		// Redlock, of its hold on a quorum of masters, delayed restarts
		// included (see quorumLookup).
		key := r.key(l.Name)
		ten, ok := mon.lookup(key, l.Token)
		if r.redlock != nil {
			var masters int
			ten, masters, ok = mon.quorumLookup(key, l.Token, r.redlock.quorum)
			if ok {
				rep.Redlock.LossesByMasters[masters]++
			}
		}
		if !ok {
			s.Unmatched++
			continue
		}
		if ten.Cut && r.redlock == nil {
			s.ExcludedRestart++
			continue
		}
		s.Checked++
		fs := &rep.FairShare
		fair := r.isFair(l.Name)
		if fair {
			fs.LossesChecked++
		}
		if ten.Granted {
			fs.GrantedChecked++
		}
		if believed != l.T {
			s.EndedByRelease++
		}
		lead := ten.end() - believedWall
		if lead > 0 {
			s.First++
			// The margin before the server's expiry (a DEL is the
			// holder's own clean-up after the signal).
			lm := float64(ten.ExpBase+ten.ExpMs*1e6-believedWall) / 1e6
			leads = append(leads, lm)
			if fair {
				fs.LossesFirst++
			}
			if ten.Granted {
				if fs.GrantedFirst == 0 || lm < fs.GrantedMinLeadMs {
					fs.GrantedMinLeadMs = lm
				}
				fs.GrantedFirst++
			}
		} else {
			s.Late++
			if fair {
				fs.LossesLate++
			}
			if len(s.Detail) < 10 {
				s.Detail = append(s.Detail, fmt.Sprintf("%s token %d (client %d): signalled %v after the server end (%+v): %s", l.Name, l.Token, l.Client, time.Duration(-lead), ten, l.Err))
			}
		}
	}
	if len(leads) > 0 {
		slices.Sort(leads)
		s.MinLeadMs = leads[0]
		s.MedianLeadMs = leads[len(leads)/2]
		s.P99LeadMs = leads[len(leads)*99/100]
	}
}

// countMasterPause counts, for each paused master of a cluster run, the
// acquisitions that returned during the pause, by where their name lives.
func (r *chaosRun) countMasterPause(rep *chaosReport, byName map[string][]*acquisition) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := r.ctl.(*redis.ClusterClient)
	nodeOf := map[string]int{}
	for _, name := range r.names {
		m, err := cc.MasterForKey(ctx, r.key(name))
		if err != nil {
			r.t.Errorf("cluster: %v", err)
			return
		}
		for i, s := range r.lockSrvs {
			if s.Addr() == m.Options().Addr {
				nodeOf[name] = i
			}
		}
	}
	for _, f := range r.faults {
		if f.Kind != faultRedisPause {
			continue
		}
		rep.MasterPause.Pauses++
		for name, as := range byName {
			for _, a := range as {
				if !a.ok() || a.acq.Ret < f.Start || a.acq.Ret > f.End {
					continue
				}
				if nodeOf[name] == f.Node {
					rep.MasterPause.PausedMaster++
				} else {
					rep.MasterPause.OtherMasters++
				}
			}
		}
	}
}

// orphanReport is what the lock server(s) held once every client had
// closed.
type orphanReport struct {
	AtClose   map[string]int // keys by kind when the last client had closed
	Awaited   []string       // the kinds that must vanish by themselves: lock, holders, queue, and mark when drained
	Drained   bool           // abandonment marks were awaited too (runs longer than a minute, or -chaos.drain)
	Left      int            // keys of an awaited kind still there after the wait: must be 0
	NoTTL     int            // keys without a TTL: must be 0
	OverBound int            // keys with a TTL above their kind's bound: must be 0
	Unknown   int            // keys of no known kind: must be 0
	Detail    []string
}

func (o *orphanReport) note(format string, args ...any) {
	if len(o.Detail) < 10 {
		o.Detail = append(o.Detail, fmt.Sprintf(format, args...))
	}
}

// checkOrphans checks that, once every client has closed, nothing of any
// lock is left on any lock server but what outlives its locks by design:
// lock hashes (of killed holders), the holders' sets of read-write locks
// and semaphores (their holders' leases), and queues (of killed waiters)
// must expire by themselves, which is awaited through keyspace notifications;
// every key must have a TTL within its kind's bound (keyBound). Fencing
// counters and semaphores' capacities are kept for their retention (an
// hour) by design, and the
// abandonment marks for a minute: in short runs their TTL is checked, in
// runs longer than a minute (or with -chaos.drain) they are awaited too.
func (r *chaosRun) checkOrphans(rep *chaosReport) {
	o := &rep.Orphans
	o.AtClose = map[string]int{}
	o.Drained = *flagDrain || r.dur > time.Minute
	awaited := map[string]bool{"lock": true, "holders": true, "queue": true, "mark": o.Drained}
	for _, k := range []string{"lock", "holders", "queue", "mark"} {
		if awaited[k] {
			o.Awaited = append(o.Awaited, k)
		}
	}
	wait := 2*r.lease + 10*time.Second
	for _, name := range r.names {
		wait = max(wait, r.queueTimeout(name)+10*time.Second)
	}
	if o.Drained {
		_, mark := r.keyBound(r.key("x") + ":abandoned:x")
		wait = mark + 10*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, n := range r.nodes {
		r.orphansOn(ctx, n, o, awaited)
	}
}

func (r *chaosRun) orphansOn(ctx context.Context, n *redis.Client, o *orphanReport, awaited map[string]bool) {
	if err := n.ConfigSet(ctx, "notify-keyspace-events", "Egx").Err(); err != nil {
		r.t.Errorf("orphans: %v", err)
		return
	}
	ps := n.Subscribe(ctx, "__keyevent@0__:expired", "__keyevent@0__:del")
	defer ps.Close()
	for range 2 {
		if _, err := ps.Receive(ctx); err != nil {
			r.t.Errorf("orphans: subscribe: %v", err)
			return
		}
	}
	// pending lists the keys of an awaited kind still there.
	pending := func() []string {
		kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, err := n.Keys(kctx, globEscape(r.prefix)+"*").Result()
		if err != nil {
			r.t.Errorf("orphans: %v", err)
		}
		var out []string
		for _, k := range keys {
			if kind, _ := r.keyBound(k); awaited[kind] {
				out = append(out, k)
			}
		}
		return out
	}
	keys, ttls, err := keyTTLs(ctx, n, r.prefix)
	if err != nil {
		r.t.Errorf("orphans: %v", err)
		return
	}
	for i, k := range keys {
		if ttls[i] == -2 {
			continue
		}
		kind, bound := r.keyBound(k)
		o.AtClose[kind]++
		switch {
		case kind == "unknown":
			o.Unknown++
			o.note("unknown key %s", k)
		case ttls[i] == -1:
			o.NoTTL++
			o.note("%s %s (%s) has no TTL", kind, k, n.Type(ctx, k).Val())
		case ttls[i] > bound.Milliseconds():
			o.OverBound++
			o.note("%s %s: PTTL %d ms above its bound %v", kind, k, ttls[i], bound)
		}
	}
	if o.NoTTL > 0 {
		o.Left += len(pending())
		return // it would not go by itself
	}
	ch := ps.Channel()
	left := pending()
	for len(left) > 0 {
		select {
		case <-ch: // a key expired or was deleted: look again, once the burst is read
			for len(ch) > 0 {
				<-ch
			}
			left = pending()
		case <-ctx.Done():
			left = pending()
			o.Left += len(left)
			for _, k := range left {
				o.note("%s still there after its TTL's bound", k)
			}
			return
		}
	}
}

// The mutex model for porcupine (see docs/safety.md, Background): the state is the
// owner holding the lock, or -1. Operations of unknown outcome (cancelled or
// failed acquisitions, and the background release that follows them) may
// or may not take effect.
type mIn struct {
	acquire bool
	owner   int64
}

type mOut struct{ ok, unknown bool }

func mutexModel(init []int64) porcupine.Model {
	return (&porcupine.NondeterministicModel{
		Init: func() []interface{} {
			out := []interface{}{int64(-1)}
			for _, o := range init {
				out = append(out, o)
			}
			return out
		},
		Step: func(st, in, out interface{}) []interface{} {
			s, i, o := st.(int64), in.(mIn), out.(mOut)
			switch {
			case i.acquire && o.unknown:
				if s == -1 {
					return []interface{}{int64(-1), i.owner}
				}
				return []interface{}{s}
			case i.acquire && o.ok:
				if s == -1 {
					return []interface{}{i.owner}
				}
				return nil
			case i.acquire:
				if s != -1 {
					return []interface{}{s}
				}
				return nil
			case o.unknown:
				if s == i.owner {
					return []interface{}{s, int64(-1)}
				}
				return []interface{}{s}
			case o.ok:
				if s == i.owner {
					return []interface{}{int64(-1)}
				}
				return nil
			default: // release found it not held by this owner
				if s != i.owner {
					return []interface{}{s}
				}
				return nil
			}
		},
		DescribeOperation: func(in, out interface{}) string {
			i, o := in.(mIn), out.(mOut)
			op := "release"
			if i.acquire {
				op = "acquire"
			}
			res := fmt.Sprint(o.ok)
			if o.unknown {
				res = "?"
			}
			return fmt.Sprintf("%s(%d) -> %s", op, i.owner, res)
		},
	}).ToModel()
}

// checkLinearizable checks the mutex model on every window without a
// disruptive fault in it or in the two leases before it, per lock name: the
// mutexes' (a read-write lock's or a semaphore's holders may overlap, which
// the mutex model forbids; checkShared checks them).
func (r *chaosRun) checkLinearizable(rep *chaosReport, byName map[string][]*acquisition, runEnd int64) {
	L := int64(r.lease)
	type span struct{ from, to int64 }
	var dirty []span
	for _, f := range r.faults {
		if !benignFaults[f.Kind] {
			dirty = append(dirty, span{f.Start - int64(50*time.Millisecond), f.End + 2*L})
		}
	}
	slices.SortFunc(dirty, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var windows []span
	at := r.start
	for _, d := range dirty {
		if d.from-at >= L {
			windows = append(windows, span{at, d.from})
		}
		at = max(at, d.to)
	}
	if runEnd-at >= L {
		windows = append(windows, span{at, runEnd})
	}
	lin := &rep.Linearizability
	lin.Windows = len(windows)
	var clean int64
	for _, w := range windows {
		clean += w.to - w.from
	}
	lin.CleanTime = time.Duration(clean).Round(time.Millisecond).String()
	for _, w := range windows {
		for name, as := range byName {
			if r.isShared(name) {
				continue
			}
			if r.membersOneAtATime() && multiUnderWay(as, w.from, w.to) {
				lin.SkippedMulti++
				continue
			}
			ops, init, loss := r.windowHistory(as, w.from, w.to, runEnd)
			if loss {
				lin.SkippedLoss++
				continue
			}
			if len(ops) == 0 {
				continue
			}
			lin.Checked++
			if r.isFair(name) {
				rep.FairShare.Histories++
			}
			lin.Operations += len(ops)
			res, info := porcupine.CheckOperationsVerbose(mutexModel(init), ops, r.porcupineBudget())
			switch res {
			case porcupine.Ok:
				lin.Ok++
				if r.isFair(name) {
					rep.FairShare.HistoriesOk++
				}
			case porcupine.Illegal:
				lin.Illegal++
				if r.isFair(name) {
					rep.FairShare.HistoriesIllegal++
				}
				path := filepath.Join(r.dir, fmt.Sprintf("illegal-%s-%d.html", name, w.from))
				if f, err := os.Create(path); err == nil {
					_ = porcupine.Visualize(mutexModel(init), info, f)
					f.Close()
				}
				lin.IllegalDetail = append(lin.IllegalDetail, fmt.Sprintf("%s window [%d, %d], %d ops (visualization %s)", name, w.from, w.to, len(ops), path))
			default:
				lin.Timeout++
			}
		}
	}
}

// membersOneAtATime reports whether the run's store takes a multi-lock's
// members one after another (store.AcquireEach: etcd, MySQL), rather than
// all in one atomic step (Redis): a member may then be held for a moment
// and given back during the multi-lock's call, when another member is
// refused, and other clients are refused meanwhile. The history records
// the call as one acquisition, which cannot explain that: windows with
// such a call under way are left to the other checks (validity intervals,
// fencing, tokens), which see every hold.
func (r *chaosRun) membersOneAtATime() bool {
	return r.etcd != nil || r.sql != nil && r.sql.flavor == sqlMariaDB
}

// multiUnderWay reports whether a multi-lock's acquisition of the lock is
// under way during [from, to].
func multiUnderWay(as []*acquisition, from, to int64) bool {
	for _, a := range as {
		if a.acq.Multi && a.acq.Call < to && a.acq.Ret > from {
			return true
		}
	}
	return false
}

// windowHistory builds the porcupine history of one lock in [from, to].
// Operations that straddle the window's edges have an unknown outcome (a
// fault just before or after may have decided it); holders that may hold
// the lock at the window's start seed the initial states.
func (r *chaosRun) windowHistory(as []*acquisition, from, to, runEnd int64) (ops []porcupine.Operation, init []int64, loss bool) {
	L := int64(r.lease)
	add := func(in mIn, out mOut, call, ret int64) {
		if call >= to || ret <= from {
			return
		}
		if call < from || ret > to {
			out = mOut{unknown: true}
		}
		ops = append(ops, porcupine.Operation{Input: in, Call: call, Output: out, Return: ret})
	}
	for _, a := range as {
		if a.lost != nil && a.lost.T > from && a.lost.T < to {
			return nil, nil, true
		}
		c := a.acq
		switch c.Res {
		case "ok":
			if c.Ret <= from {
				if a.validEnd(runEnd) > from && (a.rel == nil || a.rel.Ret > from) {
					init = append(init, c.Owner)
				}
			} else {
				add(mIn{true, c.Owner}, mOut{ok: true}, c.Call, c.Ret)
			}
			if a.rel != nil {
				var out mOut
				switch a.rel.Res {
				case "ok":
					out.ok = true
				case "lost", "notheld":
				default:
					out.unknown = true
				}
				add(mIn{false, c.Owner}, out, a.rel.Call, a.rel.Ret)
			}
		case "notacq":
			add(mIn{true, c.Owner}, mOut{}, c.Call, c.Ret)
		default:
			// A cancelled or failed attempt may have taken the lock; the
			// engine then releases it in the background, and in any case
			// the lease (never renewed) ends it.
			acqEnd := c.Ret + L/2
			relEnd := acqEnd + L
			if acqEnd <= from && relEnd > from {
				init = append(init, c.Owner)
			}
			add(mIn{true, c.Owner}, mOut{unknown: true}, c.Call, acqEnd)
			add(mIn{false, c.Owner}, mOut{unknown: true}, c.Call, relEnd)
		}
	}
	return ops, init, false
}

// porcupineBudget bounds the check of one history: 20 s in long runs, 5 s
// in the short one, which must stay quick (an undecided history is counted,
// not failed).
func (r *chaosRun) porcupineBudget() time.Duration {
	if r.dur > time.Minute {
		return 20 * time.Second
	}
	return 5 * time.Second
}
