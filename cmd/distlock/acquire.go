package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/distlock/distlock"
)

// interrupted is the cause of a wait ended by a signal.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted by " + signalName(e.sig) }

// acquire takes the lock l as o.wait says, showing progress and warning
// of a semaphore's mismatched permits unless o.quiet. One of
// interruptSignals on sigs ends the wait; other signals are ignored until
// the command runs.
func acquire(s *session, l locker, o *runOptions, sigs <-chan os.Signal, events lockEvents) (*distlock.Lease, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for {
			select {
			case sig := <-sigs:
				if slices.Contains(interruptSignals, sig) {
					cancel(interrupted{sig})
					return
				}
			case <-stop:
				return
			}
		}
	})
	sem, isSem := l.(semLocker)
	warn := isSem && !o.quiet
	if warn {
		watcher.Go(func() {
			for {
				select {
				case ev := <-events.mismatch:
					warnMismatch(sem, o.semaphore, ev)
				case <-stop:
					return
				}
			}
		})
	}
	lease, err := lock(ctx, l, o, events.waiting)
	close(stop)
	watcher.Wait()
	if warn {
		select {
		case ev := <-events.mismatch: // reported as the wait ended
			warnMismatch(sem, o.semaphore, ev)
		default:
		}
	}

	var intr interrupted
	if errors.As(context.Cause(ctx), &intr) {
		// Possibly just as the lock was taken: then let it go at once.
		if lease != nil {
			_ = release(lease)
		}
		status := exitFailure
		if n, ok := signalNumber(intr.sig); ok {
			status = exitSignal + n
		}
		return nil, exitf(status, "%v while waiting for lock %q", intr, l.Name())
	}
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, distlock.ErrWrongKind):
		// First: it wraps ErrNotAcquired.
		return nil, wrongKind(s, l)
	case errors.Is(err, distlock.ErrNotAcquired) && !errors.Is(err, distlock.ErrBackend):
		return nil, notAcquired(l, o)
	case isSem && errors.Is(err, distlock.ErrInvalidOption):
		// The options were checked before: Redis has fewer permits.
		return nil, tooFewPermits(sem, err)
	}
	return nil, s.failure(err)
}

// lock takes l: once if o.wait is 0, else waiting for up to o.wait.
func lock(ctx context.Context, l locker, o *runOptions, waiting <-chan struct{}) (*distlock.Lease, error) {
	if o.wait.once() {
		return l.TryLock(ctx)
	}
	if o.wait.set {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait.d)
		defer cancel()
	}
	pctx, stopProgress := context.WithCancel(ctx)
	var progress sync.WaitGroup
	if !o.quiet {
		progress.Go(func() { showProgress(pctx, l, waiting) })
	}
	lease, err := l.Lock(ctx)
	stopProgress()
	progress.Wait()
	return lease, err
}

// notAcquired is the error for a lock that was not acquired in time: exit
// status 75 and, unless o.quiet, who holds the lock and who waits for it.
func notAcquired(l locker, o *runOptions) error {
	if o.quiet {
		return silentExit(exitNotAcquired)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	held := "held by someone else"
	if d, err := l.describe(ctx); err == nil {
		held = d.message()
	}
	if o.wait.once() {
		return exitf(exitNotAcquired, "lock %q is %s; not acquired", l.Name(), held)
	}
	return exitf(exitNotAcquired, "lock %q not acquired after waiting %v: %s", l.Name(), o.wait.d, held)
}

// wrongKind is the error for the lock l, which its Redis refused because
// its name is in use as another kind of lock: exit status 78, and which
// kind the name is in use as.
func wrongKind(s *session, l locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	kind, err := s.kindOf(ctx, l.Name())
	if err != nil || kind == kindNone || kind == l.kind() {
		// Released meanwhile, or Redis failed: the refusal is all we know.
		return exitf(exitWrongKind, "lock %q is in use as another kind of lock than %s; use the same kind everywhere",
			l.Name(), l.kind().flags())
	}
	if kind == kindElection {
		return exitf(exitWrongKind, "lock %q is in use as %s; use another name", l.Name(), kind.flags())
	}
	return exitf(exitWrongKind, "lock %q is in use as %s; use the same kind everywhere", l.Name(), kind.flags())
}

// warnMismatch warns, on stderr, that the semaphore l has another number
// of permits in Redis than n, that of --semaphore, as the event ev of the
// library says: Redis's number is in force.
func warnMismatch(l semLocker, n int, ev distlock.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	var msg string
	if info, err := l.sem.Inspect(ctx); err == nil && info.Capacity != 0 && info.Capacity != n {
		msg = fmt.Sprintf("semaphore %q has %s in Redis, not %d as --semaphore says: Redis's number is in force (see distlock permits --help)",
			l.Name(), plural(info.Capacity, "permit"), n)
	} else if ev.Err != nil {
		// Changed again meanwhile, or Redis failed: the library's words.
		msg = oneLine(fmt.Sprintf("semaphore %q: %v", l.Name(), ev.Err))
	} else {
		return
	}
	erase := ""
	if isTerminal(2) {
		erase = "\r\x1b[K" // over the progress line, which is drawn again
	}
	fmt.Fprintf(os.Stderr, "%sdistlock run: warning: %s\n", erase, msg)
}

// tooFewPermits is the error for permits of the semaphore l that Redis
// refused, err, because its semaphore has fewer permits than l asks for:
// exit status 78, and how many it has.
func tooFewPermits(l semLocker, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if info, ierr := l.sem.Inspect(ctx); ierr == nil && info.Capacity != 0 && info.Capacity < l.permits {
		return exitf(exitWrongKind, "semaphore %q has %s in Redis, fewer than --permits %d: lower --permits, or raise its permits with distlock permits",
			l.Name(), plural(info.Capacity, "permit"), l.permits)
	}
	return exitf(exitWrongKind, "semaphore %q has fewer permits in Redis than --permits %d: %v", l.Name(), l.permits, rootCause(err))
}
