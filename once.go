package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/store"
)

// A Locker is a lock that can be taken for a Lease: a Mutex (plain or
// fair), an RWMutex (its write side; RLocker gives its read side), a
// MultiMutex, and permits of a Semaphore (Semaphore.Locker).
type Locker interface {
	Lock(ctx context.Context) (*Lease, error)
}

// A Job is work done under a lock: ctx is the Lease's context (it ends if
// the lock is lost), token its fencing token.
type Job func(ctx context.Context, token uint64) error

// Do takes l, calls fn under it and unlocks: it returns fn's error joined
// with Unlock's (nil when both are nil). If l cannot be taken, Do returns
// that error and does not call fn. The lock is unlocked even if fn panics.
// A nil l or fn is refused with ErrInvalidOption, before anything is
// taken.
func Do(ctx context.Context, l Locker, fn Job) (err error) {
	switch {
	case l == nil:
		return clientErr("do", fmt.Errorf("%w: nil Locker", ErrInvalidOption))
	case fn == nil:
		return clientErr("do", fmt.Errorf("%w: nil job", ErrInvalidOption))
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, lease.Unlock(ctx)) }()
	return fn(lease.Context(), lease.Token())
}

// RLocker returns a Locker that takes m's read side.
func (m *RWMutex) RLocker() Locker { return lockerFunc(m.RLock) }

// Locker returns a Locker that takes n permits of s.
func (s *Semaphore) Locker(n int) Locker {
	return lockerFunc(func(ctx context.Context) (*Lease, error) { return s.Acquire(ctx, n) })
}

type lockerFunc func(ctx context.Context) (*Lease, error)

func (f lockerFunc) Lock(ctx context.Context) (*Lease, error) { return f(ctx) }

// A RunState says what became of a job that runs once.
type RunState int

// The states of a Run.
const (
	RanHere          RunState = iota + 1 // the job ran in this call
	AlreadyDone                          // it had run before, here or elsewhere
	RunningElsewhere                     // another holder runs it now (OncePer does not wait)
)

var runStates = [...]string{"", "ran here", "already done", "running elsewhere"}

func (s RunState) String() string {
	if s > 0 && int(s) < len(runStates) {
		return runStates[s]
	}
	return "unknown"
}

// A Run tells what became of a job that runs once: whether it ran here,
// and otherwise who ran it (or runs it), when, and how it ended.
type Run struct {
	State RunState
	// By is who ran the job (AlreadyDone) or runs it (RunningElsewhere);
	// its ID is empty for a finished run.
	By Holder
	// At is when it finished (AlreadyDone), by that holder's clock.
	At time.Time
	// Err is how the run ended: nil if it succeeded. For a run made by
	// this call (RanHere) it is the job's own error, which the call also
	// returns. For a run read back from its record (AlreadyDone, and
	// Client.LastRun) it is a RecordedError: the record keeps the error's
	// text, not the error, which stays in the process that ran the job.
	Err error
	// Token is the fencing token of its run.
	Token uint64
	// Period is, for OncePer, the period of the run: i such that the
	// run's period is [i·period, (i+1)·period) on the Redis server's clock.
	Period uint64
}

// A RecordedError is the error that a run of Once or OncePer ended with,
// as its record keeps it: the error's text. It is what Run.Err holds for
// a run read back from its record. errors.Is matches it to an equal
// RecordedError only: the error that the job returned, and what it
// wrapped, stayed in the process that ran it.
type RecordedError string

func (e RecordedError) Error() string { return string(e) }

// WithFailuresRecorded makes Once and OncePer record a run whose job
// returned an error, as they record a success: later callers are told
// that it was done, and how it failed (Run.Err), and do not run the job
// until the record expires or is forgotten (Client.Forget). Use it for a
// job that must not be tried twice even after a failure (a failed run may
// have done part of its work); without it, a failed run is not recorded
// and the next caller runs the job again. Locks ignore it.
func WithFailuresRecorded() MutexOption {
	return func(m *mutexConfig) { m.recordFailures = true }
}

// Once runs fn under the lock key if no one ran it under key before, in
// any process, and records that it did, for keep (1 s to 100 years): the
// first caller runs it, later callers are told it was done, by whom and
// when. A caller that finds it running elsewhere waits for its outcome,
// until ctx ends. If the holder that runs it dies halfway, the key is
// runnable again once its lease ends (WithTTL; renewed while fn runs), and
// the next caller runs it.
//
// A run counts once fn returns nil. A failed run is not recorded, and the
// next caller runs fn again: the next delivery of a message, a client's
// retry with the same idempotency key, a waiting caller. That is what an
// idempotency key needs: a failure is not an outcome to replay, and a
// record of it would make a passing fault (a timeout, a database that was
// restarting) permanent for as long as the record is kept.
// WithFailuresRecorded records failed runs too, for jobs that must not be
// tried twice. A job that panics (or calls runtime.Goexit) did not finish:
// Once releases the lock, records nothing, and lets the panic go on; the
// next caller runs it. A nil fn is refused with ErrInvalidOption before
// anything is taken. Client.Forget deletes a record, so that the next
// caller runs fn again.
//
// The record, and the release of the lock after it, are made with a
// context of their own, which carries ctx's values but not its deadline or
// cancellation: a job that outlasts its caller is recorded all the same,
// instead of running again at the next call. Each is given one lease
// length (WithTTL) at most: the record can only be written while the lock
// is held, which the watchdog renews meanwhile, and a lock released late
// expires with its lease anyway. A record that could not be confirmed in
// that time is reported as an error, and may have been written.
//
// The record is written only while the runner still holds the lock (it is
// fenced by the lock's token), so a runner whose lease ended cannot record
// over one that took its place; but a runner paused past its lease may
// still be running fn when another starts it: pass the token to what fn
// changes, as for any lock. With redisstore.WithReplicaAck, a record that
// too few replicas acknowledged is reported with an error wrapping
// ErrNotReplicated (the run is RanHere; a failover may lose the record).
//
// Records are read as older versions of distlock wrote them, and older
// versions read the records of this one; but they recorded every run, so
// a failed run of an older client counts as done here (as if it had
// WithFailuresRecorded).
func (c *Client) Once(ctx context.Context, key string, keep time.Duration, fn Job, opts ...MutexOption) (Run, error) {
	if keep < time.Second || keep > 100*365*24*time.Hour {
		return Run{}, opErr("once", key, fmt.Errorf("%w: keep %v outside [1s, 100y]", ErrInvalidOption, keep))
	}
	return c.once(ctx, "once", key, 0, keep, true, fn, opts)
}

// OncePer runs fn under the lock name at most once per period (100 ms to
// a year) in all processes together: of N nodes that run the same job every
// period (cron), exactly one runs it, even when it takes a millisecond and
// a slow node comes late in the period. Periods are counted on the Redis
// server's clock (period i is [i·period, (i+1)·period) since the Unix
// epoch), so the nodes' clocks need not agree. The others are told it was
// done (by whom, when) or that it runs elsewhere: OncePer never waits. A
// holder that dies while it runs leaves the period's run to whoever calls
// after its lease ends. A run longer than its period never overlaps the
// next period's: a caller of the next period that comes while it runs is
// told it runs elsewhere, and the first caller after it ended runs the
// next period's job.
//
// Failed runs, panics, a nil fn, the context of the record and
// Client.Forget are as for Once: a failed run is not recorded, and the
// next caller in the period runs fn again, unless WithFailuresRecorded.
func (c *Client) OncePer(ctx context.Context, name string, period time.Duration, fn Job, opts ...MutexOption) (Run, error) {
	if period < 100*time.Millisecond || period > 365*24*time.Hour {
		return Run{}, opErr("once-per", name, fmt.Errorf("%w: period %v outside [100ms, 1y]", ErrInvalidOption, period))
	}
	return c.once(ctx, "once-per", name, period, 2*period, false, fn, opts)
}

// once runs fn under the lock name unless its record says it ran (in the
// current period, with a period): waiting for the lock with wait, or
// reporting who runs it without. Its errors are those of the method op;
// fn's error is joined to them as fn returned it.
func (c *Client) once(ctx context.Context, op, name string, period, keep time.Duration, wait bool, fn Job, opts []MutexOption) (Run, error) {
	w, ctx := c.startCall(ctx, op, name, KindMutex, 0)
	run, err := c.onceUnobserved(ctx, op, name, period, keep, wait, fn, opts)
	w.end(nil, err)
	return run, err
}

// lockOp names the acquisition of a mutex that waits, or not.
func lockOp(wait bool) string {
	if wait {
		return "lock"
	}
	return "try-lock"
}

func (c *Client) onceUnobserved(ctx context.Context, op, name string, period, keep time.Duration, wait bool, fn Job, opts []MutexOption) (Run, error) {
	if fn == nil {
		return Run{}, opErr(op, name, fmt.Errorf("%w: nil job", ErrInvalidOption))
	}
	m := c.Mutex(name, opts...)
	if m.lock.err != nil {
		return Run{}, opErr(op, name, m.lock.err)
	}
	if err := c.usable(); err != nil {
		return Run{}, opErr(op, name, err)
	}
	lease, run, err := c.takeOnce(ctx, m, period, wait)
	if lease == nil {
		return run, opErr(op, name, err)
	}
	finished := false
	defer func() {
		if !finished { // fn panicked, or called runtime.Goexit: nothing to record
			_ = release(ctx, lease, m.spec.Lease)
		}
	}()
	jobCtx := lease.Context()
	if period > 0 {
		jobCtx = context.WithValue(jobCtx, periodKey{}, run.Period)
	}
	runErr := fn(jobCtx, lease.Token())
	finished = true
	run = Run{State: RanHere, Err: runErr, Token: lease.Token(), Period: run.Period}
	var recErr error
	if runErr == nil || applied(mutexConfig{}, opts).recordFailures {
		recErr = c.record(ctx, name, run, keep, m.spec.Lease)
	}
	return run, errors.Join(runErr, opErr(op, name, recErr), opErr(op, name, release(ctx, lease, m.spec.Lease)))
}

// release unlocks lease with a context of its own, which has ctx's values
// but not its deadline or cancellation, for d (the lock's lease length) at
// most: see Once.
func release(ctx context.Context, lease *Lease, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	return lease.l.Unlock(ctx)
}

// record records run, made under the lock name, for keep, with a context
// of its own as release has, for lease (the lock's lease length) at most.
func (c *Client) record(ctx context.Context, name string, run Run, keep, lease time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease)
	defer cancel()
	rec := store.Record{Period: run.Period, Token: run.Token, At: time.Now()}
	if run.Err != nil {
		rec.Err = run.Err.Error()
		if rec.Err == "" {
			rec.Err = "failed (an error without a message)" // "" is a success
		}
	}
	s, err := capability[store.OnceKeeper](c, "Once")
	if err != nil {
		return err
	}
	recorded, err := s.RecordOnce(ctx, name, rec, keep)
	switch {
	case recorded && err != nil:
		return fmt.Errorf("the run was recorded on the master only (a failover before a replica has it loses the record, and the job may run again): %w",
			err)
	case err != nil:
		return fmt.Errorf("the run could not be recorded: %w", err)
	case !recorded:
		return fmt.Errorf("%w: the run was not recorded, its lock having been lost (another caller may run it again)", ErrLockLost)
	}
	return nil
}

// maxOnceTries bounds how many times once tries the lock without waiting
// when it keeps changing hands with no record left behind.
const maxOnceTries = 8

// takeOnce takes the lock of a job that runs once (per period) unless its
// record says it ran: it returns the lease and a Run holding the current
// period, or no lease and the Run that says why not, or an error without
// operation and name.
func (c *Client) takeOnce(ctx context.Context, m *Mutex, period time.Duration, wait bool) (*Lease, Run, error) {
	for range maxOnceTries {
		run, current, err := c.ran(ctx, m.name, period)
		if err != nil || run.State != 0 {
			return nil, run, notStarted(ctx, err)
		}
		lease, err := m.acquire(ctx, lockOp(wait), m.spec, wait)
		err = errors.Unwrap(err) // the *Error of acquire: once makes its own
		if !wait && errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrBackend) && !errors.Is(err, ErrWrongKind) {
			info, ierr := m.info(ctx)
			if ierr != nil {
				return nil, Run{}, notStarted(ctx, ierr)
			}
			if info.Locked {
				return nil, Run{State: RunningElsewhere, By: info.Holder, Token: info.Token, Period: current}, nil
			}
			continue // released meanwhile: its record says whether it ran
		}
		if err != nil {
			return nil, Run{}, err
		}
		// Whoever held the lock before may have run it meanwhile.
		run, current, err = c.ran(ctx, m.name, period)
		if err != nil || run.State != 0 {
			return nil, run, errors.Join(notStarted(ctx, err), release(ctx, lease, m.spec.Lease))
		}
		return lease, Run{Period: current}, nil
	}
	return nil, Run{}, fmt.Errorf("%w: the lock changed hands %d times, leaving no record of a run",
		ErrNotAcquired, maxOnceTries)
}

// notStarted is err, the failure of a request made before the job could
// start, as an acquisition's: the end of ctx wraps ErrNotAcquired, as Lock
// wraps it (a failure of Redis wraps ErrBackend already).
func notStarted(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrBackend) && !errors.Is(err, ErrNotAcquired) {
		return fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	return err
}

type periodKey struct{}

// RunPeriod returns the period that a job run by OncePer runs for (i such
// that the period is [i·period, (i+1)·period) on the Redis server's
// clock), from the context OncePer passes to the job; ok is false for any
// other context.
func RunPeriod(ctx context.Context) (period uint64, ok bool) {
	period, ok = ctx.Value(periodKey{}).(uint64)
	return period, ok
}

// ran reads the record of the job name: a Run with state AlreadyDone if it
// ran (in the current period, with a period), else a zero Run; and the
// period the server's clock is in (0 without a period).
func (c *Client) ran(ctx context.Context, name string, period time.Duration) (Run, uint64, error) {
	s, err := capability[store.OnceKeeper](c, "Once")
	if err != nil {
		return Run{}, 0, err
	}
	now, rec, ok, err := s.CheckOnce(ctx, name, period)
	switch {
	case err != nil:
		return Run{}, 0, err
	case !ok || rec.Period != now:
		return Run{}, now, nil
	}
	return doneRun(rec), now, nil
}

// doneRun is the Run that the record rec says was done.
func doneRun(rec store.Record) Run {
	run := Run{State: AlreadyDone, By: Holder{Host: rec.Host, PID: rec.PID}, At: rec.At, Token: rec.Token, Period: rec.Period}
	if rec.Err != "" {
		run.Err = RecordedError(rec.Err)
	}
	return run
}

// LastRun reads the record of the job name (Once's key, OncePer's name):
// the run it keeps, as AlreadyDone, with its period if it is OncePer's
// (whichever period it was: LastRun does not know the period's length),
// and ok true; or ok false if there is none: the job never ran, or not
// within the time its records are kept, or its runs failed and were not
// recorded, or its record was forgotten. It is for operators (distlock
// status shows it); a job's callers learn the same from Once and OncePer.
func (c *Client) LastRun(ctx context.Context, name string) (run Run, ok bool, err error) {
	if err := c.jobErr(name); err != nil {
		return Run{}, false, opErr("last-run", name, err)
	}
	s, err := capability[store.OnceKeeper](c, "LastRun")
	if err != nil {
		return Run{}, false, opErr("last-run", name, err)
	}
	_, rec, ok, err := s.CheckOnce(ctx, name, 0)
	if err != nil || !ok {
		return Run{}, false, opErr("last-run", name, err)
	}
	return doneRun(rec), true, nil
}

// Forget deletes the record of the job name (Once's key, OncePer's name),
// so that the next caller runs the job again, and reports whether there
// was one. It does not touch the lock: a run under way goes on, and
// records its outcome when it ends (ForceUnlock or Revoke stop it first).
// Use it to run again a job whose run was recorded by mistake, or whose
// failure WithFailuresRecorded recorded.
func (c *Client) Forget(ctx context.Context, name string) (bool, error) {
	if err := c.jobErr(name); err != nil {
		return false, opErr("forget", name, err)
	}
	s, err := capability[store.OnceKeeper](c, "Forget")
	if err != nil {
		return false, opErr("forget", name, err)
	}
	forgot, err := s.ForgetOnce(ctx, name)
	return forgot, opErr("forget", name, err)
}

// jobErr returns the error that an operation on the record of the job
// name fails with before any I/O, or nil.
func (c *Client) jobErr(name string) error {
	if err := c.usable(); err != nil {
		return err
	}
	return validateName(name)
}
