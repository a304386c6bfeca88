package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/distlock/distlock"
)

// releaseTimeout bounds the release of the lock after the command.
const releaseTimeout = 5 * time.Second

var runCommand = &command{
	name:         "run",
	synopsis:     "[flags] NAME -- COMMAND [ARGS...]",
	summary:      "run a command while holding a lock",
	takesCommand: true,
	doc: `Run acquires the lock NAME, runs COMMAND while it holds the lock, renewing
the lock's lease, and releases the lock when COMMAND exits. It exits with
COMMAND's exit status. Everything after the first "--" is the command.

By default run waits as long as it takes for the lock. With --wait 0 it
tries once; with --wait DURATION it waits that long. If it does not get
the lock, it does not run COMMAND, says who holds the lock on stderr
(unless --quiet) and exits with status 75: cron jobs scheduled on several
machines thus run on one of them and the others skip. While it waits,
run shows who holds the lock: on one line kept up to date if stderr is a
terminal, else in a plain line when the wait starts, when the holder
changes and every minute.

COMMAND gets, in its environment, DISTLOCK_NAME (the lock name) and
DISTLOCK_TOKEN (the fencing token of this hold, a decimal integer
greater than the token of every earlier hold of NAME): pass the token to
the resources the command changes, and have them refuse tokens lower than
the highest they have seen.

If the lock is lost while COMMAND runs (its lease could not be renewed,
or an operator ran "distlock unlock --force"), run sends COMMAND SIGTERM,
then SIGKILL after --kill-grace, and exits with status 70.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
distlock are passed on to COMMAND; the lock is released once COMMAND has
exited. Outside a terminal, COMMAND runs in a process group of its own and
signals go to that whole group, so that the processes COMMAND started stop
with it. In the foreground of a terminal, COMMAND stays in distlock's
process group, so that it can read the terminal and gets ^C, ^\ and ^Z
from it directly (they are not passed on a second time), and signals go
to COMMAND's process alone. On Linux, COMMAND is killed if distlock dies.
A signal received while waiting for the lock ends the wait (status
128+N). A holder that is killed without releasing the lock holds it until
its lease (--ttl) runs out.

Exit statuses:
` + exitStatusTable + `
A status from COMMAND is passed on as it is, so COMMAND's own statuses may
collide with those of distlock; a command killed by signal N gives 128+N.
`,
	examples: `  # Run the report on one machine only; the others skip it (status 75):
  */5 * * * * distlock run --wait 0 --quiet nightly-report -- /usr/local/bin/report

  # Wait up to ten minutes for a deploy slot:
  distlock run --wait 10m deploy -- ./deploy.sh production

  # Hand the fencing token to the command:
  distlock run migrate -- sh -c 'migrate --fence "$DISTLOCK_TOKEN"'
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addRedisFlags(fs)
		o := new(runOptions)
		fs.Var(&o.wait, "wait", "wait at most `DURATION` for the lock; 0 tries once (default: forever)")
		fs.DurationVar(&o.ttl, "ttl", distlock.DefaultTTL,
			"lease `DURATION` of the lock, renewed while the command runs: a holder that\n"+
				"dies without releasing the lock holds it this long (at least 50ms)")
		fs.DurationVar(&o.grace, "kill-grace", 10*time.Second,
			"when the lock is lost, give the command `DURATION` to exit after SIGTERM,\n"+
				"then send SIGKILL")
		fs.BoolVar(&o.quiet, "quiet", false, "print nothing while waiting, nor when the lock is not acquired")
		fs.BoolVar(&o.verbose, "verbose", false, "log what happens to the lock (acquired, renewed, released) on stderr")
		return func(line commandLine) error {
			switch {
			case len(line.args) == 0:
				return usageErrorf("missing lock NAME (see distlock run --help)")
			case !line.dashdash:
				return usageErrorf(`missing "--" before the command: distlock run [flags] NAME -- COMMAND [ARGS...]`)
			case len(line.args) > 1:
				return usageErrorf("unexpected argument %q before \"--\"", line.args[1])
			case len(line.command) == 0:
				return usageErrorf(`missing COMMAND after "--"`)
			case o.ttl < distlock.MinTTL || o.ttl > distlock.MaxTTL:
				return usageErrorf("invalid value for --ttl: %v is not between %v and %v", o.ttl, distlock.MinTTL, distlock.MaxTTL)
			case o.grace < 0:
				return usageErrorf("invalid value for --kill-grace: negative duration")
			}
			return runLocked(rf, o, line.args[0], line.command)
		}
	},
}

// runOptions are the flags of run, but --redis and --prefix.
type runOptions struct {
	wait    waitFlag
	ttl     time.Duration
	grace   time.Duration
	quiet   bool
	verbose bool
}

// runLocked runs the command argv under the lock name.
func runLocked(rf *redisFlags, o *runOptions, name string, argv []string) error {
	path, err := lookCommand(argv[0])
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	waiting := make(chan struct{}, 1)
	opts := []distlock.Option{distlock.WithEventHandler(notifyWaiting(waiting))}
	if o.verbose {
		h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
		opts = append(opts, distlock.WithLogger(slog.New(h)))
	}
	s, err := newSession(rf, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	m := s.client.Mutex(name, distlock.WithTTL(o.ttl))
	if err := s.ready(context.Background(), m); err != nil {
		return err
	}

	lease, err := acquire(s, m, o, sigs, waiting)
	if err != nil {
		return err
	}
	if ctx := lease.Context(); ctx.Err() != nil { // lost already: a very short --ttl
		return exitf(exitLockLost, "lost lock %q before the command started: %s", name, lossReason(context.Cause(ctx)))
	}
	env := append(os.Environ(), "DISTLOCK_NAME="+name, "DISTLOCK_TOKEN="+strconv.FormatUint(lease.Token(), 10))
	j, err := startJob(path, argv, env)
	if err != nil {
		_ = release(lease)
		return err
	}
	lost := supervise(j, lease, o.grace, sigs)
	status := j.exitStatus()
	uerr := release(lease)
	switch {
	case lost != nil:
		return silentExit(exitLockLost) // supervise said why
	case errors.Is(uerr, distlock.ErrLockLost):
		return exitf(exitLockLost, "lost lock %q before the command ended (it exited with status %d): %s",
			name, status, lossReason(uerr))
	case uerr != nil:
		fmt.Fprintf(os.Stderr, "distlock run: could not release lock %q, it expires within %v: %v\n",
			name, o.ttl, rootCause(uerr))
	}
	if status == exitOK {
		return nil
	}
	return silentExit(status)
}

// notifyWaiting returns an event handler that signals waiting, without
// blocking, when distlock starts waiting for a lock.
func notifyWaiting(waiting chan<- struct{}) func(distlock.Event) {
	return func(ev distlock.Event) {
		if ev.Kind == distlock.EventWaiting {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}
}

// release releases the lease, giving Redis up to releaseTimeout.
func release(lease *distlock.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return lease.Unlock(ctx)
}
