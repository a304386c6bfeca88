package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/distlock/distlock"
)

// runOncePer runs the command argv under the lock name at most once per
// o.oncePer on all machines together (distlock.Client.OncePer).
func runOncePer(rf *storeFlags, o *runOptions, name string, argv []string) error {
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	opts, stopMetrics, err := startMetrics(o)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if o.verbose {
		h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
		opts = append(opts, distlock.WithLogger(slog.New(h)))
	}
	s, err := newSession(rf, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	ttl := distlock.WithTTL(o.ttl)
	if err := s.ready(context.Background(), s.client.Mutex(name, ttl)); err != nil {
		return err
	}

	// There is no wait for the lock to interrupt: signals received before
	// the command starts (the checks take a few round trips) are passed on
	// to it once it has started, or ignored if it does not run here. The
	// run's record and the release, after the command, have contexts of
	// their own, of a lease (--ttl) each at most. A failed run is recorded
	// (see "A failed run counts as done" in docs/cli.md).
	r := &onceRun{name: name, path: path, argv: argv, o: o, sigs: sigs, mutex: s.client.Mutex(name, ttl)}
	run, err := s.client.OncePer(context.Background(), name, o.oncePer, r.job, ttl, distlock.WithFailuresRecorded())
	if r.called {
		if o.verbose {
			fmt.Fprintf(os.Stderr, "distlock run: ran the command of %q in period %d of %v, token %d\n",
				name, run.Period, o.oncePer, run.Token)
		}
		return r.result(err)
	}
	switch {
	case run.State == distlock.AlreadyDone || run.State == distlock.RunningElsewhere:
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "distlock run: %s\n", skipped(name, o.oncePer, run))
		}
		if err != nil { // found done once it had the lock, then failed to release it
			fmt.Fprintf(os.Stderr, "distlock run: warning: %s\n", oneLine(trimLibrary(err.Error())))
		}
		return nil
	case errors.Is(err, distlock.ErrWrongKind):
		return wrongKind(s, mutexLocker{Mutex: s.client.Mutex(name)})
	case errors.Is(err, distlock.ErrUnsupported) && s.rdb == nil:
		// The store keeps no record of a period (on Redis, the error
		// of a server that is too old: failure says it).
		return s.unsupported("--once-per", err)
	case errors.Is(err, distlock.ErrNotAcquired) && !errors.Is(err, distlock.ErrBackend):
		// The lock kept changing hands, with no run of this period
		// recorded.
		return exitf(exitNotAcquired, "%v; not run", trimLibrary(err.Error()))
	}
	return s.failure(err)
}

// skipped says why run --once-per did not run the command of name: the
// run of this period, run, was done or runs elsewhere.
func skipped(name string, period time.Duration, run distlock.Run) string {
	if run.State == distlock.RunningElsewhere {
		return fmt.Sprintf("%q runs on %s since %s (%s ago), token %d, in period %d of %v; not run here",
			name, holderString(run.By), run.By.Since.Format(time.RFC3339), formatAge(run.By.Since),
			run.Token, run.Period, period)
	}
	return fmt.Sprintf("%q already ran in period %d of %v: on %s, ended %s (%s ago), token %d, %s; not run here",
		name, run.Period, period, holderString(run.By), run.At.Format(time.RFC3339), formatAge(run.At),
		run.Token, outcome(run))
}

// outcome says how the recorded run ended: "succeeded", or "failed: "
// and its error.
func outcome(run distlock.Run) string {
	if run.Err != nil {
		return "failed: " + oneLine(run.Err.Error())
	}
	return "succeeded"
}

// A onceRun is the command that run --once-per runs when its turn comes,
// and what became of it. distlock.Client.OncePer calls its job, at most
// once, in the goroutine that called OncePer.
type onceRun struct {
	name  string
	path  string   // the command's executable
	argv  []string // the command line
	o     *runOptions
	sigs  chan os.Signal
	mutex *distlock.Mutex // NAME, re-entered to watch its lease (see job)

	called  bool  // job was called: the command's turn came
	started bool  // the command started
	err     error // what job returned: how the run is recorded
	status  int   // the command's exit status, once it has exited
	lost    error // why the lock was lost, if it was, before or while the command ran
}

// job runs the command under the lease whose context is lease and whose
// fencing token is token, as run does, and returns nil if it succeeded,
// else the error that its run is recorded with and that the runs that find
// it done report: a commandFailed, the failure to start it, or the loss
// of the lock.
func (r *onceRun) job(lease context.Context, token uint64) error {
	r.called = true
	if lease.Err() != nil { // lost already: a very short --ttl
		r.lost = context.Cause(lease)
		r.err = fmt.Errorf("lost the lock before the command started: %s", lossReason(r.lost))
		return r.err
	}
	var env holdEnv
	if period, ok := distlock.RunPeriod(lease); ok {
		env.period = strconv.FormatUint(period, 10)
	}
	// OncePer gives the job the lease's context, not the Lease whose
	// ValidUntil supervise needs: re-entering the lock with the context
	// gives a Lease of the same hold.
	inner, err := r.mutex.Lock(lease)
	if err != nil {
		r.err = fmt.Errorf("cannot watch the lock's lease: %w", err)
		return r.err
	}
	defer func() { _ = release(inner) }()
	j, err := startJob(r.path, r.argv, commandEnv(r.name, token, env))
	if err != nil {
		r.err = err
		return r.err
	}
	r.started = true
	r.lost = supervise(j, r.o.watch(r.name, lease, inner.ValidUntil), r.sigs)
	r.status = j.exitStatus()
	switch {
	case r.lost != nil:
		r.err = fmt.Errorf("lost the lock while the command ran (it was stopped, status %d): %s", r.status, lossReason(r.lost))
	case r.status != exitOK:
		r.err = newCommandFailed(j, r.status)
	}
	return r.err
}

// result is the outcome of run --once-per when the command's turn came:
// err, what OncePer returned, joins the job's error with those of the
// record and the release.
func (r *onceRun) result(err error) error {
	var lostAtRelease error
	for _, e := range unjoin(err) {
		switch {
		case e == r.err:
		case errors.Is(e, distlock.ErrLockLost):
			lostAtRelease = e
		default:
			// The record (the others may run the command again in this
			// period) or the release (the lock expires with its lease).
			fmt.Fprintf(os.Stderr, "distlock run: warning: %s\n", oneLine(trimLibrary(e.Error())))
		}
	}
	var ee *exitError
	switch {
	case errors.As(r.err, &ee): // the command could not start
		return r.err
	case r.lost != nil && !r.started:
		return exitf(exitLockLost, "lost lock %q before the command started: %s", r.name, lossReason(r.lost))
	case r.lost != nil:
		return silentExit(exitLockLost) // supervise said why
	case lostAtRelease != nil:
		return exitf(exitLockLost, "lost lock %q before the command ended (it exited with status %d): %s",
			r.name, r.status, lossReason(lostAtRelease))
	case r.status != exitOK:
		return silentExit(r.status)
	}
	return nil
}

// unjoin returns the errors that err joins (see errors.Join), or err
// alone, or nothing if err is nil.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// A commandFailed is a command that ran and did not succeed. Its message
// is what the run is recorded with, and what the runs that find it done
// in the same period report.
type commandFailed struct {
	status int // the exit status, as a shell reports it
	signal int // the signal that killed it, or 0
}

// newCommandFailed describes the command j, which exited with status.
func newCommandFailed(j *job, status int) *commandFailed {
	e := &commandFailed{status: status}
	if n, ok := j.killedBy(); ok {
		e.signal = n
	}
	return e
}

func (e *commandFailed) Error() string {
	if e.signal != 0 {
		return fmt.Sprintf("killed by signal %d", e.signal)
	}
	return fmt.Sprintf("exit status %d", e.status)
}
