package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/distlock/distlock"
)

// A watch is what supervise needs to know of the lock a job runs under.
type watch struct {
	name  string
	lease context.Context // the lease's context: it ends when the lock is lost
	// validUntil is the lease's ValidUntil: the lock is certainly held
	// until then, and the job must be gone by then.
	validUntil    func() time.Time
	ttl, grace    time.Duration
	killLeftovers bool // stop what the command leaves running when it exits
	quiet         bool // say nothing of what the command leaves running
}

// Why supervise stopped the job although Redis never said the lock was
// lost: it could not be sure of the lock for long enough.
var (
	errNotRenewed = errors.New("its lease could not be renewed in time")
	errSuspended  = errors.New("its lease may have run out while distlock was stopped")
)

// killRepeat is how often SIGKILL is sent again, once sent, until every
// process of the job has exited: a process forked meanwhile gets it too.
const killRepeat = 100 * time.Millisecond

// supervise waits until every process of the job j has exited, and
// returns why the lock was lost or could no longer be trusted, or nil.
// Meanwhile it
//
//   - passes the signals received on sigs on to the command;
//   - stops the whole job (SIGTERM, then SIGKILL after w.grace) when the
//     lock is lost, and early enough that the SIGKILL lands before the
//     lease can run out when renewals fail (see grace.go);
//   - when the command exits, keeps the lock while what it left runs, or
//     stops it with w.killLeftovers;
//   - behaves as a shell's job in a terminal: when the terminal stops the
//     command (^Z, or reading the terminal from the background), distlock
//     stops too, and it continues the command when continued itself if
//     its lease still allows, else kills it.
//
// It catches jobControlSignals on sigs; the caller stops the delivery.
func supervise(j *job, w watch, sigs chan os.Signal) (lost error) {
	signal.Notify(sigs, jobControlSignals...)
	s := &supervisor{watch: w, j: j, deadline: w.validUntil()}
	s.timer = time.NewTimer(s.untilCheck())
	defer s.timer.Stop()
	leaseDone, exited := w.lease.Done(), j.exited
	for {
		select {
		case <-j.done:
			j.finish()
			return s.lost
		case <-exited:
			exited = nil
			s.commandExited()
		case st := <-j.states:
			s.commandStateChanged(st)
		case sig := <-sigs:
			if isContinue(sig) {
				s.continued()
			} else {
				j.forward(sig)
			}
		case <-leaseDone:
			leaseDone = nil
			s.stop(context.Cause(w.lease))
		case <-s.timer.C:
			s.tick()
		}
	}
}

// A supervisor is the state of supervise.
type supervisor struct {
	watch
	j        *job
	timer    *time.Timer // the next check of the lease, or the next SIGKILL
	deadline time.Time   // the last ValidUntil seen
	lost     error
	stopping bool // the job was sent SIGTERM, and gets SIGKILL at the timer
}

// untilCheck is the time left until the job must be sent SIGTERM unless
// a renewal has moved the deadline.
func (s *supervisor) untilCheck() time.Duration {
	return time.Until(s.deadline.Add(-s.grace - killMargin(s.ttl)))
}

// tick sends SIGKILL when stopping, else checks the lease: the job is
// stopped unless a renewal moved the deadline since the last check.
func (s *supervisor) tick() {
	switch {
	case s.stopping:
		s.j.kill()
		s.timer.Reset(killRepeat)
	case s.validUntil().After(s.deadline):
		s.deadline = s.validUntil()
		s.timer.Reset(s.untilCheck())
	case s.lease.Err() != nil:
		s.stop(context.Cause(s.lease))
	default:
		s.stop(errNotRenewed)
	}
}

// stop stops the job because the lock is lost (lost is why), or because
// the command exited and left processes that --kill-leftovers ends (lost
// is nil): SIGTERM at once and SIGKILL after the grace, or sooner if the
// lease may run out before: SIGKILL at once if it may have already.
func (s *supervisor) stop(lost error) {
	if s.stopping {
		return
	}
	s.stopping, s.lost = true, lost
	now := time.Now()
	killAt := now.Add(s.grace)
	if limit := s.deadline.Add(-killMargin(s.ttl)); limit.Before(killAt) {
		killAt = limit
	}
	if lost != nil {
		plan := fmt.Sprintf("%s now, SIGKILL after %v", terminateName, killAt.Sub(now).Round(time.Millisecond))
		if !killAt.After(now) {
			plan = "SIGKILL now"
		}
		fmt.Fprintf(os.Stderr, "distlock run: lost lock %q: %s; stopping the command: %s\n", s.name, lossReason(lost), plan)
	}
	if killAt.After(now) {
		s.j.terminate()
	}
	s.timer.Reset(time.Until(killAt))
}

// commandExited keeps the lock while the processes that the command left
// run, and says so, or stops them with --kill-leftovers.
func (s *supervisor) commandExited() {
	if s.stopping || s.j.leftovers() == 0 {
		return
	}
	if s.killLeftovers {
		s.stop(nil)
		return
	}
	if !s.quiet {
		fmt.Fprintf(os.Stderr, "distlock run: the command exited with status %d; lock %q stays held until the processes it started have exited\n",
			s.j.exitStatus(), s.name)
	}
}

// commandStateChanged follows a stop of the command. If the terminal
// stopped it, as a shell's job: a command that read or wrote the terminal
// just before distlock was brought to the foreground gets the terminal
// and goes on; otherwise distlock stops with it (the lease then runs out
// if it stays stopped: see continued). Else distlock warns that the
// stopped command keeps the lock.
//
// A fg that lands between the check of the foreground and distlock's
// stop continues distlock before it stops: it then stays stopped, and the
// shell shows it so, until the next fg.
func (s *supervisor) commandStateChanged(st stopState) {
	if !st.stopped || s.stopping || !s.j.stopped() { // continued since
		return
	}
	if s.j.term != nil && isTerminalStop(st.signal) {
		if wantsTerminal(st.signal) && s.j.term.inForeground() {
			s.j.handOver()
			s.j.continueGroup()
			return
		}
		s.j.term.takeBack(s.j.pid)
		stopSelf()
		return
	}
	fmt.Fprintf(os.Stderr, "distlock run: warning: the command was stopped by %s; it keeps lock %q until it is continued (kill -CONT -%d) or killed\n",
		signalName(st.signal), s.name, s.j.pid)
}

// continued follows distlock's own continuation (SIGCONT: fg, bg, or the
// end of a pause): the command gets the terminal if distlock has it, and
// is continued, unless the lease may have run out meanwhile: then it is
// killed at once, so that it never runs without the lock.
func (s *supervisor) continued() {
	if s.stopping {
		return
	}
	if v := s.validUntil(); v.After(s.deadline) {
		s.deadline = v
	}
	if !time.Now().Before(s.deadline.Add(-killMargin(s.ttl))) {
		s.stop(errSuspended)
		return
	}
	s.j.handOver()
	s.j.continueGroup()
	s.timer.Reset(s.untilCheck())
}

// lossReason says why a lock was lost, without the prefix of
// distlock.ErrLockLost.
func lossReason(err error) string {
	return detail(err, distlock.ErrLockLost)
}
