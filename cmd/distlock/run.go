package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
)

// releaseTimeout bounds the release of the lock after the command;
// lostReleaseTimeout, after the command was stopped for the loss of the
// lock.
const (
	releaseTimeout     = 5 * time.Second
	lostReleaseTimeout = time.Second
)

var runCommand = &command{
	name:         "run",
	synopsis:     "[flags] NAME -- COMMAND [ARGS...]",
	summary:      "run a command while holding a lock",
	takesCommand: true,
	doc: `Run takes the lock NAME, runs COMMAND while it holds it, renewing its
lease, and releases it once COMMAND and every process that COMMAND
started have exited. It exits with COMMAND's status. Everything after the
first "--" is COMMAND; a NAME that starts with "-" goes after a first "--"
too: distlock run -- -NAME -- COMMAND.

COMMAND gets DISTLOCK_NAME and DISTLOCK_TOKEN, the fencing token of this
hold: pass it to what COMMAND changes, and have that refuse a token lower
than the highest it has seen, and accept an equal one (this hold writes
with one token; a later hold gets a higher one).
With --shared or --exclusive it also gets DISTLOCK_MODE; with --semaphore,
DISTLOCK_MODE and DISTLOCK_PERMITS; with --once-per, DISTLOCK_PERIOD.

If the lock is lost, or its lease cannot be renewed in time, each process
of COMMAND's tree gets one SIGTERM, and SIGKILL after --kill-grace, before
the lease can run out on the server; run then exits with 70. Signals sent
to distlock are passed on to COMMAND.

--wait 0 skips COMMAND (status 75) while another run holds the lock: two
runs never overlap, but a job that cron starts on many machines may still
run on several, one after another. --once-per PERIOD runs it once per
period, on whichever machine comes first.

Exit status: COMMAND's, or 0 if --once-per found the period's run done or
running elsewhere; 64 bad flags; 65 bad NAME; 69 Redis unavailable; 70
the lock was lost, COMMAND was stopped; 75 not acquired; 77 Redis refused
the credentials; 78 NAME is in use as another kind of lock; 126, 127
COMMAND cannot run, is not found; 128+N interrupted by signal N (see
distlock --help).

The kinds of lock, waiting, the process tree, losing the lock, signals,
job control, metrics and recipes: docs/cli.md, "distlock run".
`,
	examples: `  # Report every 5 minutes from any of many machines, once per 5 minutes
  # (cron fires a minute into each period, away from its boundary):
  1-59/5 * * * * distlock run --once-per 5m --quiet report -- /usr/local/bin/report

  # Skip this round while the last sync still runs, on any machine (status 75):
  */10 * * * * distlock run --wait 0 --quiet sync -- /usr/local/bin/sync

  # Wait up to ten minutes for a deploy slot; serve deploys in turn:
  distlock run --wait 10m deploy -- ./deploy.sh production
  distlock run --fair deploy -- ./deploy.sh production

  # Back up while others may too; migrate alone:
  distlock run --shared dataset -- ./backup.sh
  distlock run --exclusive dataset -- ./migrate.sh

  # At most 4 calls at once to a partner's API, from every machine:
  distlock run --semaphore 4 partner-api -- ./sync-orders.sh

  # Hand the fencing token to the command:
  distlock run migrate -- sh -c 'migrate --fence "$DISTLOCK_TOKEN"'
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		o := new(runOptions)
		fs.Var(&o.wait, "wait", "wait at most `DURATION` for the lock; 0 tries once (default: forever)")
		fs.DurationVar(&o.ttl, "ttl", distlock.DefaultTTL,
			"lease `DURATION`, renewed while the command runs; a holder that dies\n"+
				"without releasing the lock holds it this long (min 50ms)")
		fs.DurationVar(&o.grace, "kill-grace", 0,
			"when the lock is lost, give the command's processes `DURATION` from\n"+
				"SIGTERM to SIGKILL; at most a third of --ttl (default 10s, or a third\n"+
				"of --ttl if less)")
		fs.BoolVar(&o.killLeftovers, "kill-leftovers", false,
			"when the command exits, stop what it started that still runs (SIGTERM,\n"+
				"SIGKILL after --kill-grace) instead of holding the lock until it exits")
		fs.BoolVar(&o.fair, "fair", false,
			"take the lock as a fair one: waiters on every machine are served in the\n"+
				"order they arrived; every user of the lock must use --fair")
		fs.BoolVar(&o.shared, "shared", false,
			"take the read side of the read-write lock NAME: any number of --shared\n"+
				"holders run at once, but none while an --exclusive one runs")
		fs.BoolVar(&o.exclusive, "exclusive", false,
			"take the write side of the read-write lock NAME: run alone, while no\n"+
				"--shared or --exclusive holder runs")
		fs.IntVar(&o.semaphore, "semaphore", 0,
			"take a permit of the semaphore NAME, of `N` permits: at most N commands\n"+
				"run at once, on all machines; every user of NAME must use --semaphore")
		fs.IntVar(&o.permits, "permits", 1,
			"with --semaphore: take `K` of its permits (1 to N)")
		fs.DurationVar(&o.queueTimeout, "queue-timeout", distlock.DefaultQueueTimeout,
			"with --fair, --shared, --exclusive or --semaphore: a waiter that stops\n"+
				"refreshing its place in the queue (crashed, cut off) loses it after\n"+
				"`DURATION`")
		fs.DurationVar(&o.oncePer, "once-per", 0,
			"run the command at most once per `PERIOD` (on Redis's clock) on all\n"+
				"machines; a run that finds it done or running this period exits with 0")
		fs.BoolVar(&o.quiet, "quiet", false,
			"print nothing while waiting, nor why the command did not run, nor that\n"+
				"Redis has another number of permits than --semaphore")
		fs.BoolVar(&o.verbose, "verbose", false, "log what happens to the lock (acquired, renewed, released) on stderr")
		fs.StringVar(&o.metricsAddr, "metrics-addr", "",
			"serve Prometheus metrics at http://`ADDR`/metrics (--verbose prints where)")
		return func(line commandLine) error {
			o.isSemaphore = isSet(fs, "semaphore")
			o.isOncePer = isSet(fs, "once-per")
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
			case o.grace > maxGrace(o.ttl):
				return usageErrorf("--kill-grace %v is too long for --ttl %v: the command must be killed before the lock's lease can run out, "+
					"which allows at most %v (a third of --ttl); shorten --kill-grace or lengthen --ttl", o.grace, o.ttl, maxGrace(o.ttl))
			case o.shared && o.exclusive:
				return usageErrorf("--shared and --exclusive cannot go together: --shared takes the read side of the lock, --exclusive its write side")
			case o.fair && (o.shared || o.exclusive):
				return usageErrorf("--fair cannot go with --shared or --exclusive: a read-write lock already serves its waiters in order")
			case o.isSemaphore && (o.fair || o.shared || o.exclusive):
				return usageErrorf("--semaphore cannot go with --fair, --shared or --exclusive: a semaphore is a kind of lock of its own, and serves its waiters in order")
			case o.isSemaphore && (o.semaphore < 1 || o.semaphore > distlock.MaxPermits):
				return usageErrorf("invalid value for --semaphore: %d is not between 1 and %d", o.semaphore, distlock.MaxPermits)
			case !o.isSemaphore && isSet(fs, "permits"):
				return usageErrorf("--permits is for a semaphore: add --semaphore N, or drop --permits")
			case o.isSemaphore && (o.permits < 1 || o.permits > o.semaphore):
				return usageErrorf("invalid value for --permits: %d is not between 1 and %d (--semaphore)", o.permits, o.semaphore)
			case o.isOncePer && (o.oncePer < minPeriod || o.oncePer > maxPeriod):
				return usageErrorf("invalid value for --once-per: %v is not between %v and %v", o.oncePer, minPeriod, maxPeriod)
			case o.isOncePer && o.oncePer%time.Millisecond != 0:
				return usageErrorf("invalid value for --once-per: %v is not a whole number of milliseconds", o.oncePer)
			case o.isOncePer && isSet(fs, "wait"):
				return usageErrorf("--once-per cannot go with --wait: it never waits (it tries once, and remembers the run for the period)")
			case o.isOncePer && (o.fair || o.shared || o.exclusive || o.isSemaphore):
				return usageErrorf("--once-per cannot go with --fair, --shared, --exclusive or --semaphore: it takes NAME as a plain lock")
			case len(rf.masters) > 0 && (o.queued() || o.isOncePer):
				flag, what := o.unsupportedOnRedlock()
				return usageErrorf("%s cannot go with --redlock: %s cannot be kept by a quorum of independent Redis masters, only a plain lock can; "+
					"give one Redis with --redis, or drop %s", flag, what, flag)
			case o.queueTimeout < minQueueTimeout || o.queueTimeout > maxQueueTimeout:
				return usageErrorf("invalid value for --queue-timeout: %v is not between %v and %v", o.queueTimeout, minQueueTimeout, maxQueueTimeout)
			case !o.queued() && isSet(fs, "queue-timeout"):
				return usageErrorf("--queue-timeout is for a lock with a queue: add --fair, --shared, --exclusive or --semaphore, or drop --queue-timeout")
			}
			if !isSet(fs, "kill-grace") {
				o.grace = defaultGrace(o.ttl)
			}
			if err := checkName(line.args[0]); err != nil {
				return err
			}
			if o.isOncePer {
				return runOncePer(rf, o, line.args[0], line.command)
			}
			return runLocked(rf, o, line.args[0], line.command)
		}
	},
}

// The range of --queue-timeout: that of distlock.WithQueueTimeout.
const (
	minQueueTimeout = 100 * time.Millisecond
	maxQueueTimeout = time.Hour
)

// The range of --once-per: that of distlock.Client.OncePer.
const (
	minPeriod = 100 * time.Millisecond
	maxPeriod = 365 * 24 * time.Hour
)

// runOptions are the flags of run, but --redis and --prefix.
type runOptions struct {
	wait          waitFlag
	ttl           time.Duration
	grace         time.Duration
	killLeftovers bool // --kill-leftovers: stop what the command leaves running
	fair          bool
	shared        bool          // the read side of a read-write lock
	exclusive     bool          // the write side of a read-write lock
	isSemaphore   bool          // --semaphore was given
	semaphore     int           // the semaphore's permits, as this run knows them
	permits       int           // the permits to take of the semaphore
	queueTimeout  time.Duration // for a lock with a queue
	isOncePer     bool          // --once-per was given
	oncePer       time.Duration // the period of --once-per
	quiet         bool
	verbose       bool
	metricsAddr   string // --metrics-addr: where to serve metrics, or ""
}

// queued reports whether the lock that o asks for has a queue: a fair
// mutex, a read-write lock or a semaphore.
func (o *runOptions) queued() bool { return o.fair || o.shared || o.exclusive || o.isSemaphore }

// unsupportedOnRedlock names the flag of o that asks for what Redlock
// cannot keep (the library refuses it with ErrUnsupported), and what it
// would keep: o is queued or once per period.
func (o *runOptions) unsupportedOnRedlock() (flag, what string) {
	switch {
	case o.fair:
		return "--fair", "a fair lock's queue"
	case o.shared:
		return "--shared", "a read-write lock"
	case o.exclusive:
		return "--exclusive", "a read-write lock"
	case o.isSemaphore:
		return "--semaphore", "a semaphore"
	}
	return "--once-per", "the record of a period's run"
}

// locker returns the lock called name on s that o asks for: permits of a
// semaphore with --semaphore, a side of a read-write lock with --shared
// or --exclusive, else a mutex, fair with --fair.
func (o *runOptions) locker(s *session, name string) locker {
	ttl, queue := distlock.WithTTL(o.ttl), distlock.WithQueueTimeout(o.queueTimeout)
	switch {
	case o.isSemaphore:
		return semLocker{sem: s.client.Semaphore(name, o.semaphore, ttl, queue), permits: o.permits}
	case o.shared || o.exclusive:
		return rwLocker{rw: s.client.RWMutex(name, ttl, queue), shared: o.shared}
	case o.fair:
		return mutexLocker{Mutex: s.client.FairMutex(name, ttl, queue), fair: true}
	}
	return mutexLocker{Mutex: s.client.Mutex(name, ttl)}
}

// mode is the value of DISTLOCK_MODE for the command, or "" for none.
func (o *runOptions) mode() string {
	switch {
	case o.shared:
		return "shared"
	case o.exclusive:
		return "exclusive"
	case o.isSemaphore:
		return "semaphore"
	}
	return ""
}

// watch is what supervise needs to watch the job run under the lease
// of the lock name, whose context is lease and whose ValidUntil is
// validUntil.
func (o *runOptions) watch(name string, lease context.Context, validUntil func() time.Time) watch {
	return watch{name: name, lease: lease, validUntil: validUntil, ttl: o.ttl, grace: o.grace,
		killLeftovers: o.killLeftovers, quiet: o.quiet}
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// runLocked runs the command argv under the lock name.
func runLocked(rf *storeFlags, o *runOptions, name string, argv []string) error {
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
	events := newLockEvents()
	opts = append(opts, distlock.WithEventHandler(events.handle))
	if o.verbose {
		h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
		opts = append(opts, distlock.WithLogger(slog.New(h)))
	}
	s, err := newSession(rf, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	l := o.locker(s, name)
	if err := s.ready(context.Background(), l); err != nil {
		return err
	}

	lease, err := acquire(s, l, o, sigs, events)
	if err != nil {
		return err
	}
	if err := fitPlan(lease, o); err != nil {
		_ = releaseWithin(lease, lostReleaseTimeout)
		return err
	}
	permits := 0
	if o.isSemaphore {
		permits = o.permits
	}
	j, err := startJob(path, argv, commandEnv(name, lease.Token(), holdEnv{mode: o.mode(), permits: permits}))
	if err != nil {
		_ = release(lease)
		return err
	}
	lost := supervise(j, o.watch(name, lease.Context(), lease.ValidUntil), sigs)
	status := j.exitStatus()
	if lost != nil {
		// The lock is gone, or will be within a margin: a release only
		// helps if Redis answers at once, and requests cut off from Redis
		// are not waited for.
		_ = releaseWithin(lease, lostReleaseTimeout)
		s.closeWithin(lostReleaseTimeout)
		return silentExit(exitLockLost) // supervise said why
	}
	uerr := release(lease)
	switch {
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

// fitPlan makes the lease long enough for the kill plan of o before the
// command starts (see grace.go): if the plan does not fit the lease, it
// extends the lease to o.ttl, waiting for the extension until the lease
// would end. It fails with status 70 if the lock is lost, and with status
// 69 if the extension cannot be confirmed: the command would be stopped
// as soon as it started.
func fitPlan(lease *distlock.Lease, o *runOptions) error {
	ctx := lease.Context()
	if ctx.Err() == nil && !planFits(lease.ValidUntil(), time.Now(), o.ttl, o.grace) {
		ectx, cancel := context.WithDeadline(context.Background(), lease.ValidUntil())
		err := lease.Extend(ectx, o.ttl)
		cancel()
		if err != nil && ctx.Err() == nil {
			return exitf(exitUnavailable, "could not extend the lease of lock %q to --ttl %v before starting the command, which its %v left would not let run: %v",
				lease.Name(), o.ttl, time.Until(lease.ValidUntil()).Round(time.Millisecond), rootCause(err))
		}
	}
	if ctx.Err() != nil { // lost already: a very short --ttl, or while extending
		return exitf(exitLockLost, "lost lock %q before the command started: %s", lease.Name(), lossReason(context.Cause(ctx)))
	}
	return nil
}

// A holdEnv is what the command learns of its hold, beyond the lock's
// name and token: each field that is set becomes a variable of its
// environment.
type holdEnv struct {
	mode    string // DISTLOCK_MODE: "shared", "exclusive" or "semaphore"
	permits int    // DISTLOCK_PERMITS: the permits of a semaphore held
	period  string // DISTLOCK_PERIOD: the period of a run --once-per
}

// commandEnv is the environment of the command: distlock's, with
// DISTLOCK_NAME and DISTLOCK_TOKEN, and the variables of h that are set.
// An inherited DISTLOCK_MODE, DISTLOCK_PERMITS or DISTLOCK_PERIOD is
// removed otherwise, so that the command of a plain run inside a shared
// one does not believe it shares its lock.
func commandEnv(name string, token uint64, h holdEnv) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "DISTLOCK_MODE=") || strings.HasPrefix(kv, "DISTLOCK_PERMITS=") ||
			strings.HasPrefix(kv, "DISTLOCK_PERIOD=")
	})
	env = append(env, "DISTLOCK_NAME="+name, "DISTLOCK_TOKEN="+strconv.FormatUint(token, 10))
	if h.mode != "" {
		env = append(env, "DISTLOCK_MODE="+h.mode)
	}
	if h.permits != 0 {
		env = append(env, "DISTLOCK_PERMITS="+strconv.Itoa(h.permits))
	}
	if h.period != "" {
		env = append(env, "DISTLOCK_PERIOD="+h.period)
	}
	return env
}

// lockEvents passes on the events of the library that run reports: the
// start of a wait for the lock, and a semaphore whose permits in Redis
// differ from --semaphore. Each channel keeps one event until it is
// read; the handler never blocks.
type lockEvents struct {
	waiting  chan struct{}
	mismatch chan distlock.Event
}

func newLockEvents() lockEvents {
	return lockEvents{waiting: make(chan struct{}, 1), mismatch: make(chan distlock.Event, 1)}
}

// handle is the event handler of the library.
func (e lockEvents) handle(ev distlock.Event) {
	switch ev.Kind {
	case distlock.EventWaiting:
		select {
		case e.waiting <- struct{}{}:
		default:
		}
	case distlock.EventMismatch:
		select {
		case e.mismatch <- ev:
		default:
		}
	}
}

// release releases the lease, giving Redis up to releaseTimeout.
func release(lease *distlock.Lease) error { return releaseWithin(lease, releaseTimeout) }

// releaseWithin releases the lease, giving Redis up to timeout.
func releaseWithin(lease *distlock.Lease, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return lease.Unlock(ctx)
}
