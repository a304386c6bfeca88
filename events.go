package distlock

import (
	"context"
	"log/slog"
	"time"

	"github.com/distlock/distlock/internal/engine"
)

// EventKind says what happened to a lock.
type EventKind int

// The kinds of Event.
const (
	EventAcquired    EventKind = iota + 1 // a hold was taken (Holds > 1: re-entry)
	EventWaiting                          // an acquirer found the lock taken and waits
	EventRenewed                          // the watchdog extended a lease
	EventRenewFailed                      // a renewal failed; it is retried until the lease deadline
	EventLost                             // the lock was lost; the lease context is cancelled
	EventReleased                         // the holder released the lock
	EventMismatch                         // Redis disagrees with this client's options (a semaphore's permits); Err says how
	EventExpired                          // a fixed lease ran its course (ErrLeaseExpired); the lease context is cancelled

	// EventObserveFailed: Election.Observe could not watch the election or
	// read who leads (Redis is unreachable, say); it tries again. Err says
	// why; it is logged at Warn.
	EventObserveFailed

	// EventWaitEnded: a wait that EventWaiting reported is over, whether
	// the lock was acquired or not (one for each EventWaiting).
	EventWaitEnded

	// EventEnded: a hold that EventAcquired reported (Holds 1) is over,
	// for whatever reason (one for each such EventAcquired): Held says how
	// long it lasted, Err is nil for a release and the cause otherwise
	// (a loss, with Reason; ErrLeaseExpired; ErrClosed). It comes as the
	// hold's lease contexts are cancelled: before a release is sent (and
	// so before EventReleased), and before EventLost and EventExpired.
	EventEnded
)

var eventNames = [...]string{"", "acquired", "waiting", "renewed", "renew-failed", "lost", "released", "mismatch", "expired", "observe-failed", "wait-ended", "ended"}

func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// An Event is one thing that happened to one lock held or awaited by this
// Client, as passed to WithEventHandler.
type Event struct {
	Kind    EventKind
	Name    string        // lock name; a MultiMutex's wait names its members, sorted, joined with "+"
	Lock    Kind          // the kind of lock (a MultiMutex's members and wait: KindMutex)
	Store   string        // what the store keeps its locks in, as Call.Store says
	Hold    uint64        // the hold it is about, an id unique in the process (0 for a wait): the events of one hold, from EventAcquired to EventEnded, share it
	Token   uint64        // fencing token, when held
	Holds   int           // hold count, for EventAcquired
	Wait    time.Duration // time spent waiting, for EventAcquired; the lease, for EventRenewed
	Latency time.Duration // for EventRenewed and EventRenewFailed: from the renewal's send to its answer, or to the give-up
	Held    time.Duration // for EventEnded: from the acquisition to the end of the hold
	Reason  LossReason    // for EventLost, EventExpired, and EventEnded by either: why the hold ended before its Unlock
	Err     error         // the cause, for EventRenewFailed, EventLost, EventMismatch, EventExpired, EventEnded and EventObserveFailed; it does not repeat Name
}

// A LossReason says why a hold ended before its Unlock (EventLost,
// EventExpired, EventEnded).
type LossReason string

// The reasons of a loss.
const (
	// LossGone: the store no longer had the lock for its owner: deleted
	// by hand, expired on the server, taken over, or lost in a failover.
	LossGone LossReason = "gone"
	// LossRevoked: an operator revoked or force-unlocked it.
	LossRevoked LossReason = "revoked"
	// LossRenewalFailed: the lease deadline passed before a renewal was
	// confirmed: the store unreachable, erring or slow, or this process
	// paused (an acquisition whose reply came after its lease deadline
	// too). A store that retries a request until its deadline reports the
	// failure only then: the reason does not say which of these it was.
	LossRenewalFailed LossReason = "renewal-failed"
	// LossExpired: a fixed lease (WithFixedLease) ran its course before it
	// was unlocked: EventExpired, not EventLost, and the reason of its
	// EventEnded. Where a fixed lease is meant to end on its own, it is
	// no fault.
	LossExpired LossReason = "expired"
)

// observer turns engine events into Events for the handler, the log and
// the observers; nil when there are none.
func (c *clientConfig) observer(system string) func(engine.Event) {
	handler, logger, obs := c.handler, c.logger, c.observers
	if handler == nil && logger == nil && len(obs) == 0 {
		return nil
	}
	return func(e engine.Event) {
		ev := Event{Kind: eventKindOf(e.Kind), Name: e.Name, Lock: kindOfEngine(e.Lock), Store: system, Hold: e.Hold,
			Token: e.Token, Holds: e.Holds, Wait: e.Wait, Latency: e.Latency, Held: e.Held, Reason: LossReason(e.Reason), Err: e.Err}
		emit(handler, logger, ev)
		for _, o := range obs {
			o.Event(ev)
		}
	}
}

// eventKinds names each event of the engine as an EventKind, indexed by
// the engine's kind (an array: no hashing on the path of every event).
var eventKinds = [...]EventKind{
	engine.Acquired:    EventAcquired,
	engine.Waiting:     EventWaiting,
	engine.Renewed:     EventRenewed,
	engine.RenewFailed: EventRenewFailed,
	engine.Lost:        EventLost,
	engine.Released:    EventReleased,
	engine.Mismatch:    EventMismatch,
	engine.Expired:     EventExpired,
	engine.WaitEnded:   EventWaitEnded,
	engine.Ended:       EventEnded,
}

// eventKindOf is k's EventKind, 0 ("unknown") for one eventKinds lacks.
func eventKindOf(k engine.EventKind) EventKind {
	if k < 0 || int(k) >= len(eventKinds) {
		return 0
	}
	return eventKinds[k]
}

// emit passes ev to handler and logger, either of which may be nil.
func emit(handler func(Event), logger *slog.Logger, ev Event) {
	if handler != nil {
		handler(ev)
	}
	if logger != nil {
		logEvent(logger, ev)
	}
}

func logEvent(l *slog.Logger, ev Event) {
	level := slog.LevelDebug
	if ev.Kind == EventLost || ev.Kind == EventRenewFailed || ev.Kind == EventMismatch || ev.Kind == EventObserveFailed {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("lock", ev.Name), slog.String("event", ev.Kind.String())}
	if ev.Token != 0 {
		attrs = append(attrs, slog.Uint64("token", ev.Token))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("err", ev.Err.Error()))
	}
	l.LogAttrs(ctx, level, "distlock: "+ev.Kind.String(), attrs...)
}
