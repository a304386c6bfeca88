package prometheus

import (
	"context"

	"github.com/distlock/distlock"
)

// StartCall returns ctx unchanged: calls are measured as they end.
func (c *Collector) StartCall(ctx context.Context, _ distlock.Call) context.Context {
	return ctx
}

// EndCall counts the call in calls_total and, for an acquisition,
// observes its duration in acquire_duration_seconds. It does not block,
// and once the call's series exist it does not allocate.
func (c *Collector) EndCall(_ context.Context, call distlock.Call, r distlock.CallResult) {
	s := c.seriesOf(call.Name, call.Lock, call.Store)
	op, out := opIndex(call.Op), outcomeIndex(r.Outcome)
	if op >= 0 && out >= 0 {
		s.callCounter(c, op, out).Inc()
	} else {
		c.calls.WithLabelValues(c.values(s, call.Op, s.kind, s.store, string(r.Outcome))...).Inc()
	}
	if !call.Acquires() {
		return
	}
	if out >= 0 {
		s.acquireHist(c, out).Observe(r.Duration.Seconds())
	} else {
		c.acquire.WithLabelValues(c.values(s, s.kind, s.store, string(r.Outcome))...).Observe(r.Duration.Seconds())
	}
}

// Event updates the metrics that ev bears on: held_locks and
// hold_duration_seconds (EventAcquired of a new hold, EventEnded),
// waiters (EventWaiting, EventWaitEnded), renewals_total and
// renewal_duration_seconds (EventRenewed, EventRenewFailed),
// losses_total (EventLost, and EventExpired: a fixed lease that ran out
// before its Unlock, reason "expired"). It ignores the other events. It does not
// block, and once the event's series exist it does not allocate.
func (c *Collector) Event(ev distlock.Event) {
	switch ev.Kind {
	case distlock.EventAcquired:
		if ev.Holds == 1 { // not a re-entry
			c.seriesOf(ev.Name, ev.Lock, ev.Store).heldGauge(c).Inc()
		}
	case distlock.EventEnded:
		s := c.seriesOf(ev.Name, ev.Lock, ev.Store)
		s.holdHist(c).Observe(ev.Held.Seconds())
		s.heldGauge(c).Dec()
	case distlock.EventWaiting:
		c.seriesOf(ev.Name, ev.Lock, ev.Store).waitersGauge(c).Inc()
	case distlock.EventWaitEnded:
		c.seriesOf(ev.Name, ev.Lock, ev.Store).waitersGauge(c).Dec()
	case distlock.EventRenewed, distlock.EventRenewFailed:
		result := resultOK
		if ev.Kind == distlock.EventRenewFailed {
			result = resultFailed
		}
		s := c.seriesOf(ev.Name, ev.Lock, ev.Store)
		s.renewalCounter(c, result).Inc()
		s.renewalHist(c).Observe(ev.Latency.Seconds())
	case distlock.EventLost, distlock.EventExpired:
		s := c.seriesOf(ev.Name, ev.Lock, ev.Store)
		if r := reasonIndex(ev.Reason); r >= 0 {
			s.lossCounter(c, r).Inc()
		} else {
			c.losses.WithLabelValues(c.values(s, s.kind, s.store, string(ev.Reason))...).Inc()
		}
	}
}
