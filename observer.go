package distlock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/internal/engine"
	"github.com/distlock/distlock/store"
)

// An Observer is told what a Client's locks do, for metrics and traces:
// the calls of the API as they start and end, and the events between
// calls (waits, renewals, losses, the end of each hold). The modules
// github.com/distlock/distlock/prometheus and .../otel are Observers;
// install one with WithObserver.
//
// Its methods are called synchronously: StartCall and EndCall on the
// caller's goroutine, Event on the engine's (as WithEventHandler's
// function is). They must be safe for concurrent use and must not block or
// call the Client: a slow Event delays renewals. A Client without
// observers does none of this work.
type Observer interface {
	// StartCall is called as a call begins. The context it returns must
	// be ctx or derived from it (a tracer's span in it): the call goes on
	// with it (the next observer's StartCall gets it, then the store's
	// requests), and it is the one EndCall gets. An acquisition's lease
	// context carries its values.
	StartCall(ctx context.Context, c Call) context.Context
	// EndCall is called once, as the call returns.
	EndCall(ctx context.Context, c Call, r CallResult)
	// Event is called for every Event of the Client.
	Event(ev Event)
}

// WithObserver installs o on the Client. It may be given several times:
// each observer sees every call and event, in the order given.
func WithObserver(o Observer) Option {
	return func(c *clientConfig) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	}
}

// A Call is one call of the API, as an Observer sees it.
type Call struct {
	// Op names the method: "lock", "try-lock", "rlock", "try-rlock",
	// "acquire", "try-acquire", "campaign" (acquisitions: see Acquires);
	// "unlock", "extend"; "once", "once-per" (the whole call, its job
	// included: the acquisition inside it is a call "lock" or "try-lock"
	// of its own).
	Op string
	// Name is the lock's name; for a MultiMutex, its members' names,
	// sorted, joined with "+".
	Name string
	// Lock is the kind of lock: KindMutex for a MultiMutex and Once.
	Lock Kind
	// Store names what the store keeps its locks in: "redis", "redlock",
	// "etcd", "postgresql", "mysql", or "other" (see store.SystemNamer).
	Store string
	// Hold is, for Unlock and Extend, the id of the lease's hold, as
	// Events and the acquisition's CallResult name it; 0 for a MultiMutex
	// (its members are holds of their own) and for other calls.
	Hold uint64
}

// Acquires reports whether the call takes a lock (Lock, TryLock, RLock,
// TryRLock, Acquire, TryAcquire, Campaign).
func (c Call) Acquires() bool {
	switch c.Op {
	case "lock", "try-lock", "rlock", "try-rlock", "acquire", "try-acquire", "campaign":
		return true
	}
	return false
}

// A CallResult is how a Call ended.
type CallResult struct {
	Outcome  Outcome
	Duration time.Duration // from StartCall to EndCall: for an acquisition, its wait
	Token    uint64        // an acquisition's fencing token (the largest of a MultiMutex's)
	Hold     uint64        // an acquisition's hold (0 for a MultiMutex): Events of the same Hold are about it
	Err      error         // nil for OutcomeOK
}

// An Outcome says how a call ended.
type Outcome string

// The outcomes of calls.
const (
	OutcomeOK       Outcome = "ok"       // it did what it was asked (an acquisition: acquired)
	OutcomeBusy     Outcome = "busy"     // not acquired: a try found the lock taken (ErrNotAcquired)
	OutcomeTimeout  Outcome = "timeout"  // the context's deadline passed first
	OutcomeCanceled Outcome = "canceled" // the context was cancelled first
	OutcomeError    Outcome = "error"    // anything else: the store failed, bad input, not held, lost, closed
)

// OutcomeOf classifies err, a call's error, as an Outcome.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, ErrNotAcquired):
		return OutcomeBusy
	}
	return OutcomeError
}

// systemOf names what s keeps its locks in, for observers.
func systemOf(s store.Store) string {
	if n, ok := s.(store.SystemNamer); ok {
		return n.System()
	}
	return "other"
}

// A callWatch is one call under way, as the observers see it; the zero
// callWatch, a Client's without observers, watches nothing.
type callWatch struct {
	obs   []Observer
	ctx   context.Context   // the first observer's, from StartCall
	more  []context.Context // the others', when there are several
	call  Call
	start time.Time
}

// startCall tells the observers that a call begins, and returns the
// context the call goes on with. Without observers it returns ctx and the
// zero callWatch, and costs nothing.
func (c *Client) startCall(ctx context.Context, op, name string, kind Kind, hold uint64) (callWatch, context.Context) {
	obs := c.cfg.observers
	if len(obs) == 0 {
		return callWatch{}, ctx
	}
	w := callWatch{obs: obs, call: Call{Op: op, Name: name, Lock: kind, Store: c.system, Hold: hold}, start: time.Now()}
	ctx = obs[0].StartCall(ctx, w.call)
	w.ctx = ctx
	if len(obs) > 1 {
		w.more = make([]context.Context, len(obs)-1)
		for i, o := range obs[1:] {
			ctx = o.StartCall(ctx, w.call)
			w.more[i] = ctx
		}
	}
	return w, ctx
}

// end tells the observers, last first, that the call ended with err,
// returning lease for an acquisition.
func (w callWatch) end(lease *Lease, err error) {
	if w.obs == nil {
		return
	}
	r := CallResult{Outcome: OutcomeOf(err), Duration: time.Since(w.start), Err: err}
	if lease != nil {
		r.Token, r.Hold = lease.l.Token(), lease.l.Hold()
	}
	for i := len(w.more) - 1; i >= 0; i-- {
		w.obs[i+1].EndCall(w.more[i], w.call, r)
	}
	w.obs[0].EndCall(w.ctx, w.call, r)
}

// kindOfEngine names the engine's kind of lock.
func kindOfEngine(k engine.Kind) Kind {
	switch k {
	case engine.Plain:
		return KindMutex
	case engine.Fair:
		return KindFairMutex
	case engine.Read, engine.Write:
		return KindRWMutex
	case engine.Semaphore:
		return KindSemaphore
	case engine.Election:
		return KindElection
	}
	return KindFree
}
