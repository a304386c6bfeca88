package distlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distlock/distlock/internal/redisbackend"
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
func Do(ctx context.Context, l Locker, fn Job) (err error) {
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
	// Err is the error it finished with, "" if it succeeded (AlreadyDone).
	Err string
	// Token is the fencing token of its run.
	Token uint64
	// Period is, for OncePer, the period of the run: i such that the
	// run's period is [i·period, (i+1)·period) on the Redis server's clock.
	Period uint64
}

// Once runs fn under the lock key if no one ran it under key before, in
// any process, and records that it did, for keep (1 s to 100 years): the
// first caller runs it, later callers are told it was done, by whom and
// how it ended (the run counts whether fn returned an error or not). A
// caller that finds it running elsewhere waits for its outcome, until ctx
// ends. If the holder that runs it dies halfway, the key is runnable again
// once its lease ends (WithTTL; renewed while fn runs), and the next caller
// runs it.
//
// The record is written only while the runner still holds the lock (it is
// fenced by the lock's token), so a runner whose lease ended cannot record
// over one that took its place; but a runner paused past its lease may
// still be running fn when another starts it: pass the token to what fn
// changes, as for any lock. With WithReplicaAck, a record that too few
// replicas acknowledged is reported with an error wrapping
// ErrNotReplicated (the run is RanHere; a failover may lose the record).
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
// done (by whom, when, how it ended) or that it runs elsewhere: OncePer
// never waits. A holder that dies while it runs leaves the period's run to
// whoever calls after its lease ends.
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
	jobCtx := lease.Context()
	if period > 0 {
		jobCtx = context.WithValue(jobCtx, periodKey{}, run.Period)
	}
	runErr := fn(jobCtx, lease.Token())
	rec := redisbackend.Record{Period: run.Period, Token: lease.Token(), At: time.Now()}
	if runErr != nil {
		rec.Err = runErr.Error()
	}
	recorded, recErr := c.backend.RecordOnce(ctx, name, rec, keep)
	switch {
	case recorded && recErr != nil:
		recErr = fmt.Errorf("the run was recorded on the master only (a failover before a replica has it loses the record, and the job may run again): %w",
			recErr)
	case recErr != nil:
		recErr = fmt.Errorf("the run could not be recorded: %w", recErr)
	case !recorded:
		recErr = fmt.Errorf("%w: the run was not recorded, its lock having been lost (another caller may run it again)", ErrLockLost)
	}
	return Run{State: RanHere, Token: lease.Token(), Period: run.Period},
		errors.Join(runErr, opErr(op, name, recErr), opErr(op, name, lease.l.Unlock(ctx)))
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
			return nil, run, err
		}
		lease, err := m.take(ctx, m.spec, wait)
		if !wait && errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrBackend) && !errors.Is(err, ErrWrongKind) {
			info, ierr := m.info(ctx)
			if ierr != nil {
				return nil, Run{}, ierr
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
			return nil, run, errors.Join(err, lease.l.Unlock(ctx))
		}
		return lease, Run{Period: current}, nil
	}
	return nil, Run{}, fmt.Errorf("%w: the lock changed hands %d times, leaving no record of a run",
		ErrNotAcquired, maxOnceTries)
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
	now, rec, ok, err := c.backend.CheckOnce(ctx, name, period)
	switch {
	case err != nil:
		return Run{}, 0, err
	case !ok || rec.Period != now:
		return Run{}, now, nil
	}
	return Run{State: AlreadyDone, By: Holder{Host: rec.Host, PID: rec.PID}, At: rec.At, Err: rec.Err,
		Token: rec.Token, Period: rec.Period}, now, nil
}
