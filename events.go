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
)

var eventNames = [...]string{"", "acquired", "waiting", "renewed", "renew-failed", "lost", "released", "mismatch", "expired", "observe-failed"}

func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// An Event is one thing that happened to one lock held or awaited by this
// Client, as passed to WithEventHandler.
type Event struct {
	Kind  EventKind
	Name  string        // lock name
	Token uint64        // fencing token, when held
	Holds int           // hold count, for EventAcquired
	Wait  time.Duration // time spent waiting, for EventAcquired; the lease, for EventRenewed
	Err   error         // the cause, for EventRenewFailed, EventLost, EventMismatch, EventExpired and EventObserveFailed; it does not repeat Name
}

// observer turns engine events into Events for the handler and the log.
func (c *clientConfig) observer() func(engine.Event) {
	handler, logger := c.handler, c.logger
	if handler == nil && logger == nil {
		return nil
	}
	return func(e engine.Event) {
		emit(handler, logger, Event{Kind: eventKindOf(e.Kind), Name: e.Name, Token: e.Token, Holds: e.Holds, Wait: e.Wait, Err: e.Err})
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
