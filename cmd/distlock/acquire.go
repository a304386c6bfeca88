package main

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"

	"github.com/distlock/distlock"
)

// interrupted is the cause of a wait ended by a signal.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted by " + e.sig.String() }

// acquire takes the lock m as o.wait says, showing progress unless
// o.quiet. One of interruptSignals on sigs ends the wait; other signals
// are ignored until the command runs.
func acquire(s *session, m *distlock.Mutex, o *runOptions, sigs <-chan os.Signal, waiting <-chan struct{}) (*distlock.Lease, error) {
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
	lease, err := lock(ctx, m, o, waiting)
	close(stop)
	watcher.Wait()

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
		return nil, exitf(status, "%v while waiting for lock %q", intr, m.Name())
	}
	switch {
	case err == nil:
		return lease, nil
	case errors.Is(err, distlock.ErrNotAcquired) && !errors.Is(err, distlock.ErrBackend):
		return nil, notAcquired(s, m, o)
	}
	return nil, s.failure(err)
}

// lock takes m: once if o.wait is 0, else waiting for up to o.wait.
func lock(ctx context.Context, m *distlock.Mutex, o *runOptions, waiting <-chan struct{}) (*distlock.Lease, error) {
	if o.wait.once() {
		return m.TryLock(ctx)
	}
	if o.wait.set {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.wait.d)
		defer cancel()
	}
	pctx, stopProgress := context.WithCancel(ctx)
	var progress sync.WaitGroup
	if !o.quiet {
		progress.Go(func() { showProgress(pctx, m, waiting) })
	}
	lease, err := m.Lock(ctx)
	stopProgress()
	progress.Wait()
	return lease, err
}

// notAcquired is the error for a lock that was not acquired in time: exit
// status 75 and, unless o.quiet, who holds the lock.
func notAcquired(s *session, m *distlock.Mutex, o *runOptions) error {
	if o.quiet {
		return silentExit(exitNotAcquired)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	info, err := m.Inspect(ctx)
	var holder string
	switch {
	case err != nil:
		holder = "held by someone else"
	case info.Locked:
		holder = heldBy(info)
	default:
		holder = "free again now"
	}
	if o.wait.once() {
		return exitf(exitNotAcquired, "lock %q is %s; not acquired", m.Name(), holder)
	}
	return exitf(exitNotAcquired, "lock %q not acquired after waiting %v: %s", m.Name(), o.wait.d, holder)
}
