package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/distlock/distlock"
)

var permitsCommand = &command{
	name:     "permits",
	synopsis: "[flags] NAME N",
	summary:  "set the number of permits of a semaphore (operators)",
	doc: `Permits sets the number of permits of the semaphore NAME to N (1 to
1073741824) in Redis, where it is in force for every "distlock run
--semaphore" of NAME, whatever their --semaphore says, and for every
program that uses the semaphore through the library. It prints the
number before and after, and the permits in use and queued for.

Growing the number lets waiters in at once, as many as now fit, in
their order. Shrinking it takes no permits back: the holders keep them
and their commands go on, and new runs wait until the permits in use
have fallen low enough.

Redis keeps the number while the semaphore is used and for an hour after
its last use; then the next run sets it again from its --semaphore. A
run whose --semaphore differs from the number in Redis warns of it on
stderr.

If NAME is in use as another kind of lock (a mutex, fair-mutex or
rwmutex), permits changes nothing and exits with status 78.
`,
	examples: `  distlock status partner-api        # capacity, permits in use, queue
  distlock permits partner-api 8     # allow 8 calls at once from now on
`,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		return func(line commandLine) error {
			if len(rf.masters) > 0 {
				return usageErrorf("permits cannot go with --redlock: a semaphore cannot be kept by a quorum of independent Redis masters; give its Redis with --redis")
			}
			if len(line.args) != 2 {
				return usageErrorf("want a semaphore NAME and a number of permits N (see distlock permits --help)")
			}
			n, err := strconv.Atoi(line.args[1])
			if err != nil || n < 1 || n > distlock.MaxPermits {
				return usageErrorf("invalid number of permits %q: want an integer from 1 to %d", line.args[1], distlock.MaxPermits)
			}
			if err := checkName(line.args[0]); err != nil {
				return err
			}
			return setPermits(rf, line.args[0], n)
		}
	},
}

// setPermits sets the capacity of the semaphore name to n, and prints it
// before and after.
func setPermits(rf *storeFlags, name string, n int) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	sem := s.semaphore(name)
	if err := sem.Err(); errors.Is(err, distlock.ErrUnsupported) {
		return s.unsupported("a semaphore (distlock permits)", err)
	}
	if err := s.ready(ctx, sem); err != nil {
		return err
	}
	before, err := s.inspect(ctx, name)
	if err != nil {
		return s.failure(err)
	}
	if before.kind != kindNone && before.kind != kindSemaphore {
		return notSemaphore(name, before.kind)
	}
	if err := sem.SetPermits(ctx, n); err != nil {
		if errors.Is(err, distlock.ErrUnsupported) && s.rdb == nil {
			return s.unsupported("setting a semaphore's permits (distlock permits)", err)
		}
		if errors.Is(err, distlock.ErrWrongKind) { // taken as another kind meanwhile
			kind, kerr := s.kindOf(ctx, name)
			if kerr != nil {
				kind = kindNone
			}
			return notSemaphore(name, kind)
		}
		return s.failure(err)
	}
	was := "none before (never used, or unused for an hour)"
	if c := before.sem.Capacity; c != 0 {
		was = strconv.Itoa(c) + " before"
	}
	after, err := sem.Inspect(ctx)
	if err != nil {
		// The permits are set; only their use is unknown.
		fmt.Fprintf(os.Stdout, "permits of %s: %s, %d now\n", name, was, n)
		return nil
	}
	queued := "nothing queued"
	if after.Queued > 0 {
		queued = fmt.Sprintf("%d queued for %s", after.Queued, plural(after.QueuedPermits, "permit"))
	}
	held := permitsHeld(after)
	fmt.Fprintf(os.Stdout, "permits of %s: %s, %d now (%d in use, %s)\n", name, was, after.Capacity, held, queued)
	if held > after.Capacity {
		fmt.Fprintf(os.Stdout, "the holders keep the %d permits in use, more than %d; new holders wait until enough are returned\n",
			held, after.Capacity)
	}
	return nil
}

// notSemaphore is the error of permits on the name, in use as the kind
// of lock kind (kindNone if unknown): exit status 78.
func notSemaphore(name string, kind lockKind) error {
	if kind == kindNone || kind == kindSemaphore {
		return exitf(exitWrongKind, "lock %q is in use as another kind of lock than a semaphore; its permits were not set", name)
	}
	return exitf(exitWrongKind, "lock %q is in use as %s, not as a semaphore; its permits were not set", name, kind.flags())
}
